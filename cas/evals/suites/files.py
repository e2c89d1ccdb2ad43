"""Suite files: cases to run an agent over, as JSON Lines, read strictly and written redacted;
a pinned version as a suite (public as `cas.suites`)."""

from __future__ import annotations

import os
import shutil
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import msgspec

from cas.errors import CasError, FailedPrecondition, InvalidArgument, NotFound
from cas.format import encoding, redaction
from cas.format.cases import encode_case
from cas.format.records import Case
from cas.format.version_names import Pin, as_pin
from cas.interop import exports

SUITE_FORMATS = (1,)  # the header formats this cas reads; it writes the last
FORMAT = SUITE_FORMATS[-1]
# How to bring a suite of an older format to the current one, by format: empty while format 1
# is the only one there has been. A format that is neither known nor here is refused with the
# general advice of `migration`.
MIGRATIONS: dict[int, str] = {}
HEADER_FIELDS = ("format", "name", "version")
CASE_FIELDS = ("id", "input", "tenant", "expected", "user", "metadata")
IDENTITY_FIELDS = ("id", "tenant", "user")  # never masked; refused when credential-shaped
MAX_COMPONENT_BYTES = 255  # a case id or suite name names a directory: NAME_MAX of POSIX
MAX_TEXT = 512  # characters of a tenant, a user or a suite version (as a run's tenant)
SOURCE_KEY = "cas"  # the metadata key under which an export records the case's run
SPOOL = 16 << 20  # bytes a suite written to a stream is held in memory before a temp file


class SuiteCase(msgspec.Struct, frozen=True, kw_only=True):
    """One case of a suite: what an executor is given. `frozen` is the frozen case when the
    suite came from a version (its steps, for replay); it is never written to a file."""

    id: str
    input: Any
    tenant: str
    expected: Any = None
    user: str | None = None
    metadata: dict = {}
    frozen: Case | None = None


class Suite(msgspec.Struct, frozen=True):
    """A suite: its `name` (the dataset an export came from), its `version` (an export's pin
    `name@N#b3:...`, or any text) and its cases in order.

    `Suite(name, version, cases)` takes the cases as SuiteCase objects, dicts of the file's
    case fields, or `cas.Case` objects (mapped as an export maps them, docs/suites.md), and
    checks them all at construction: each refusal names `cases[i]` (field `index`)."""

    name: str
    version: str
    cases: tuple[SuiteCase, ...] = ()

    def __post_init__(self) -> None:
        name = _name(self.name, "Suite", {})
        version = _text(self.version, "version", "Suite", {})
        if isinstance(self.cases, (str, bytes, dict)) or not hasattr(self.cases, "__iter__"):
            raise InvalidArgument(f"Suite cases are an iterable of cases, not "
                                  f"{encoding.describe(self.cases)}", reason="INVALID_FIELD",
                                  field="cases")
        cases, seen = [], {}
        for i, item in enumerate(self.cases):
            where, at = f"cases[{i}]", {"index": i}
            case = _coerce(item, where, at)
            _unique(case.id, seen, f"cases[{i}]", where, at)
            cases.append(case)
        msgspec.structs.force_setattr(self, "name", name)
        msgspec.structs.force_setattr(self, "version", version)
        msgspec.structs.force_setattr(self, "cases", tuple(cases))


class SuiteExport(NamedTuple):
    """What `export` wrote: the suite's name and version, how many cases, and the path (None
    for a stream)."""

    name: str
    version: str
    cases: int
    path: str | None = None


# -- the rules of a case ------------------------------------------------------------------
def path_component_problem(text: Any) -> str | None:
    """Why `text` cannot name one directory (a case id, a suite name), or None if it can: it
    must be a string of 1 to 255 UTF-8 bytes of printable characters, neither `.` nor `..`,
    with no `/` or `\\`, not starting with `-` and not starting or ending with whitespace.
    `:` is allowed (case ids are `b3:<hex>`)."""
    if not isinstance(text, str):
        return f"is {encoding.describe(text)}, not a string"
    if not text:
        return "is empty"
    if text in (".", ".."):
        return f"is {text!r}, which names a directory's own entries"
    for c in ("/", "\\"):
        if c in text:
            return f"contains {c!r}, which separates directories"
    problem = encoding.text_problem(text, len(text))  # control and non-printable characters
    if problem is not None:
        return problem
    if text[0] == "-":
        return "starts with '-', which a command reads as an option"
    if text != text.strip():
        return "starts or ends with whitespace"
    size = len(text.encode("utf-8"))
    if size > MAX_COMPONENT_BYTES:
        return f"is {size} bytes long in UTF-8 (at most {MAX_COMPONENT_BYTES})"
    return None


def _refusal(where: str, at: dict, field: str, reason: str, problem: str,
             cls: type[CasError] = InvalidArgument, **more: Any) -> CasError:
    return cls(f"{where}: {field} {problem}", reason=reason, **at, field=field, **more)


def _name(value: Any, where: str, at: dict) -> str:
    problem = path_component_problem(value)
    if problem is not None:
        raise _refusal(where, at, "name", "INVALID_FIELD", f"{problem}: a suite's name names "
                       "its artefact directory, so it is one safe path component")
    return value


def _text(value: Any, field: str, where: str, at: dict, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _refusal(where, at, field, "INVALID_FIELD",
                       f"must be a string{' or null' if optional else ''}, not "
                       f"{encoding.describe(value)}")
    problem = encoding.text_problem(value, MAX_TEXT)
    if problem is not None:
        raise _refusal(where, at, field, "INVALID_FIELD",
                       f"must be 1 to {MAX_TEXT} printable characters; it {problem}")
    return value


def _case_id(value: Any, where: str, at: dict) -> str:
    problem = path_component_problem(value)
    if problem is not None:
        raise _refusal(where, at, "id", "UNSAFE_CASE_ID", f"{problem}: a case id names the "
                       "case's artefact directory, so it is one safe path component "
                       "(docs/suites.md)", id=value if isinstance(value, str) else None)
    return value


def _json(value: Any, field: str, where: str, at: dict) -> Any:
    try:
        encoding.check_json(value, f"$.{field}")
    except CasError as exc:
        raise encoding.in_context(exc, where, **at, field=field) from None
    return value


def _case(obj: dict, where: str, at: dict, frozen: Case | None = None) -> SuiteCase:
    """A suite case from the file's fields, checked; refusals name `where`, `at` and the
    field."""
    for key in obj:
        if key not in CASE_FIELDS:
            raise _refusal(where, at, str(key), "UNKNOWN_FIELD",
                           "is not a field of a suite case (its fields: "
                           + ", ".join(CASE_FIELDS) + ")")
    for required in ("id", "input", "tenant"):
        if required not in obj:
            why = (": every case declares the tenant whose data it touches, and there is no "
                   "default" if required == "tenant" else "")
            raise _refusal(where, at, required, "MISSING_FIELD", f"is required{why}")
    metadata = obj.get("metadata")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise _refusal(where, at, "metadata", "INVALID_FIELD",
                       f"must be a JSON object, not {encoding.describe(metadata)}")
    if frozen is not None and not isinstance(frozen, Case):
        raise _refusal(where, at, "frozen", "INVALID_FIELD",
                       f"must be a cas.Case or None, not {encoding.describe(frozen)}")
    return SuiteCase(
        id=_case_id(obj["id"], where, at),
        tenant=_text(obj["tenant"], "tenant", where, at),
        user=_text(obj.get("user"), "user", where, at, optional=True),
        input=_json(obj["input"], "input", where, at),
        expected=_json(obj.get("expected"), "expected", where, at),
        metadata=_json(metadata, "metadata", where, at),
        frozen=frozen)


def _identity(case: SuiteCase, where: str, at: dict, **more: Any) -> None:
    """Refuse a credential-shaped identity field: it is never masked, so the author fixes it."""
    for field in IDENTITY_FIELDS:
        kind = redaction.credential_kind(getattr(case, field))
        if kind is not None:
            raise _refusal(where, at, field, "CREDENTIAL_IN_IDENTITY_FIELD",
                           f"looks like a credential ({kind}); identity fields (id, tenant, "
                           "user) are never masked, so a suite refuses to hold one: change "
                           "it at its source", kind=kind, **more)


def _unique(case_id: str, seen: dict, here: str, where: str, at: dict) -> None:
    """Refuse a repeated id, or one that differs from an earlier one only in case or Unicode
    normalisation (the two would share an artefact directory on macOS or Windows)."""
    key = unicodedata.normalize("NFC", case_id).casefold()
    first = seen.get(key)
    if first is None:
        seen[key] = (case_id, here, at)
        return
    first_id, first_here, first_at = first
    same = "repeats" if first_id == case_id else f"differs only in case from {first_id!r} of"
    raise _refusal(where, at, "id", "DUPLICATE_CASE_ID",
                   f"{case_id!r} {same} {first_here}: case ids are unique in a suite (each "
                   "names a directory)", id=case_id,
                   **{f"first_{k}": v for k, v in first_at.items()})


def case_of(case: Case, case_id: str | None = None) -> SuiteCase:
    """A frozen case as a suite case: `id` its case id, `input` its input, `tenant` its tenant
    (refused if it has none: CASE_WITHOUT_TENANT), `expected` its recorded output, no `user`
    (a suite is a shared file: the case's person is never copied), `metadata` the case's own
    plus `cas`: {run_id, started_at, outcome, withheld}, and `frozen` the case itself."""
    if case_id is None:
        case_id = encode_case(case).case_id
    if case.tenant is None:
        raise FailedPrecondition(
            f"case {case_id} has no tenant: a suite case declares the tenant whose data it "
            "touches and there is no default (a case committed directly may have none); "
            "commit it again with its tenant, or leave it out of the version",
            reason="CASE_WITHOUT_TENANT", case_id=case_id, field="tenant")
    if SOURCE_KEY in case.metadata:
        raise FailedPrecondition(
            f"case {case_id} has its own metadata key {SOURCE_KEY!r}, which a suite case "
            "uses for the run it came from", reason="METADATA_KEY_RESERVED",
            case_id=case_id, field="metadata")
    source = {"run_id": case.run_id, "started_at": case.started_at, "outcome": case.outcome,
              "withheld": list(case.withheld)}
    return SuiteCase(id=case_id, input=case.input, tenant=case.tenant, expected=case.output,
                     user=None, metadata={**case.metadata, SOURCE_KEY: source}, frozen=case)


def _coerce(item: Any, where: str, at: dict) -> SuiteCase:
    if isinstance(item, SuiteCase):
        obj = {f: getattr(item, f) for f in CASE_FIELDS}
        return _case(obj, where, at, frozen=item.frozen)
    if isinstance(item, dict):
        return _case(item, where, at)
    if isinstance(item, Case):
        try:
            case = case_of(item)
            return _case({f: getattr(case, f) for f in CASE_FIELDS}, where, at, frozen=item)
        except CasError as exc:
            raise encoding.in_context(exc, where, **at) from None
    raise InvalidArgument(f"{where}: a suite case is a SuiteCase, a dict or a cas.Case, not "
                          f"{encoding.describe(item)}", reason="INVALID_FIELD", **at)


# -- reading --------------------------------------------------------------------------------
def migration(found: Any) -> str:
    """What to do with a suite whose header has format `found`, which this cas cannot read."""
    newest = SUITE_FORMATS[-1]
    if type(found) is int and found in MIGRATIONS:
        return MIGRATIONS[found]
    if type(found) is int and found > newest:
        return (f"format {found} is newer than this cas reads: update your cas checkout and "
                f"reinstall it (git pull && pip install .) to read it, or re-export the suite "
                f"with a cas that writes "
                f"format {newest} (cas suite export DATASET VERSION -o FILE)")
    return (f"no cas writes suite format {encoding.describe(found)}: re-export the suite "
            f"(cas suite export DATASET VERSION -o FILE writes format {newest}), or, for a "
            f"suite written by hand in format {newest}'s layout (docs/suites.md), write its "
            f"header as {{\"format\": {newest}, \"name\": ..., \"version\": ...}}")


def _header(obj: Any, where: str, at: dict) -> tuple[str, str]:
    if not isinstance(obj, dict) or "format" not in obj:
        found = ("a case" if isinstance(obj, dict) and "id" in obj else
                 encoding.describe(obj))
        raise _refusal(where, at, "format", "MISSING_SUITE_HEADER",
                       f"is missing: a suite file starts with the header {{\"format\": "
                       f"{FORMAT}, \"name\": ..., \"version\": ...}}, not {found}")
    found = obj["format"]
    if type(found) is not int or found not in SUITE_FORMATS:
        raise _refusal(where, at, "format", "UNSUPPORTED_SUITE_FORMAT",
                       f"{encoding.describe(found)} is not a suite format this cas reads "
                       f"(it reads {', '.join(map(str, SUITE_FORMATS))}); nothing of the "
                       f"suite is read. Migration: {migration(found)}", FailedPrecondition,
                       format=found, known=list(SUITE_FORMATS), migration=migration(found))
    for key in obj:
        if key not in HEADER_FIELDS:
            raise _refusal(where, at, str(key), "UNKNOWN_FIELD",
                           "is not a field of a suite header (its fields: "
                           + ", ".join(HEADER_FIELDS) + ")")
    for required in ("name", "version"):
        if required not in obj:
            raise _refusal(where, at, required, "MISSING_FIELD", "is required in the header")
    return _name(obj["name"], where, at), _text(obj["version"], "version", where, at)


def _lines(source: Any) -> tuple[str, Iterable, Any]:
    """(name for messages, the lines, the file to close or None)."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            raise NotFound(f"no suite file at {path}", reason="SUITE_FILE_NOT_FOUND",
                           path=path) from None
        return path, f, f
    name = getattr(source, "name", None)
    return (name if isinstance(name, str) else "suite"), encoding.lines_of(source, "suite"), None


def read_jsonl(source: Any) -> Suite:
    """The suite in a file (a path, or a binary stream or iterable of lines).

    Line 1 is the header `{"format": 1, "name", "version"}`, every other line one case;
    blank lines are skipped (and still counted). Everything is checked before anything is
    returned, and a refusal names the line (`line`, from 1) and the `field`: an unknown
    header format (FAILED_PRECONDITION, UNSUPPORTED_SUITE_FORMAT, with `format`, `known` and
    `migration`), a missing header, an unknown field, a missing `id`, `input` or `tenant`, an
    id that is no safe path component, a repeated id, a credential-shaped identity field."""
    name, lines, handle = _lines(source)
    try:
        header, cases, seen = None, [], {}
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue  # a blank line is no record (it still counts)
            where, at = f"{name} line {n}", {"line": n}
            obj = _parse(line, where, at)
            if header is None:
                header = _header(obj, where, at)
                continue
            if not isinstance(obj, dict):
                raise _refusal(where, at, "case", "INVALID_FIELD",
                               f"must be a JSON object, not {encoding.describe(obj)}")
            case = _case(obj, where, at)
            _identity(case, where, at)
            _unique(case.id, seen, f"line {n}", where, at)
            cases.append(case)
        if header is None:
            raise _refusal(f"{name} line 1", {"line": 1}, "format", "MISSING_SUITE_HEADER",
                           "is missing: the file is empty; a suite file starts with the "
                           f"header {{\"format\": {FORMAT}, \"name\": ..., \"version\": ...}}")
    finally:
        if handle is not None:
            handle.close()
    return Suite(header[0], header[1], tuple(cases))


def _parse(line: Any, where: str, at: dict) -> Any:
    try:
        return encoding.parse_json(line)
    except CasError as exc:
        refusal = encoding.in_context(exc, where, **at)
        if refusal.reason is None:
            refusal.reason = "INVALID_JSON"
        raise refusal from None


# -- writing --------------------------------------------------------------------------------
_encode = encoding.encode


def _header_line(name: str, version: str) -> bytes:
    return b'{"format":%d,"name":%s,"version":%s}\n' % (FORMAT, _encode(name), _encode(version))


def _case_line(case: SuiteCase, where: str, at: dict, **more: Any) -> bytes:
    """One case as its line: identity fields as they are (refused when credential-shaped),
    `input`, `expected` and `metadata` scrubbed; keys in the order of CASE_FIELDS, `user`,
    `expected` and `metadata` left out when null or empty; values in canonical JSON."""
    _identity(case, where, at, **more)
    parts = [b'{"id":', _encode(case.id), b',"tenant":', _encode(case.tenant)]
    if case.user is not None:
        parts += (b',"user":', _encode(case.user))
    for field in ("input", "expected", "metadata"):
        value = getattr(case, field)
        if field == "input" or (value != {} if field == "metadata" else value is not None):
            try:
                scrubbed = redaction.scrub(value, f"$.{field}")
            except CasError as exc:
                raise encoding.in_context(exc, where, **at, field=field, **more) from None
            parts += (b',"%s":' % field.encode(), _encode(scrubbed))
    parts.append(b"}\n")
    return b"".join(parts)


def _render(f, name: str, version: str, cases: Iterable[tuple[SuiteCase, dict]],
            target: str) -> int:
    f.write(_header_line(name, version))
    n = 0
    for n, (case, more) in enumerate(cases, 1):
        line = n + 1
        f.write(_case_line(case, f"{target} line {line}", {"line": line}, **more))
    return n


def _write(out: Any, name: str, version: str, cases: Iterable[tuple[SuiteCase, dict]]
           ) -> tuple[int, str | None]:
    """Render every case, then write: to a path through a temporary file beside it (fsync,
    rename), to a stream only once all of it has rendered. A refusal leaves nothing."""
    if hasattr(out, "write"):
        with tempfile.SpooledTemporaryFile(max_size=SPOOL) as buf:
            n = _render(buf, name, version, cases, "suite")
            buf.seek(0)
            shutil.copyfileobj(buf, out)
        if hasattr(out, "flush"):
            out.flush()
        return n, None
    if not isinstance(out, (str, os.PathLike)):
        raise InvalidArgument(f"a suite is written to a path or a binary stream, not "
                              f"{encoding.describe(out)}", reason="INVALID_FIELD", field="path")
    path = os.fspath(out)
    with exports.atomic_file(path) as f:
        n = _render(f, name, version, cases, path)
    return n, os.path.abspath(path)


def write_jsonl(path: Any, suite: Suite) -> None:
    """Write `suite` as a suite file at `path` (or to a binary stream), scrubbed on the way
    (cas.redaction.scrub on every field but id, tenant and user; `frozen` is never written).
    A credential-shaped identity field is refused naming its line and field
    (CREDENTIAL_IN_IDENTITY_FIELD), and a refusal leaves no file, not even a partial one."""
    if not isinstance(suite, Suite):
        raise InvalidArgument(f"write_jsonl writes a cas.suites.Suite, not "
                              f"{encoding.describe(suite)}", reason="INVALID_FIELD",
                              field="suite")
    _write(path, suite.name, suite.version, ((c, {}) for c in suite.cases))


# -- a pinned version as a suite ----------------------------------------------------------------
def version_pin(version: Any, why: str) -> Pin:
    """The pin a suite's version is (a suite of a version, or exported from one); refused
    (FAILED_PRECONDITION, SUITE_NOT_PINNED) for a version that is none, a suite file written
    by hand, saying `why` a pin is needed."""
    try:
        return as_pin(version)
    except InvalidArgument:
        raise FailedPrecondition(
            f"suite version {version!r} is not a pin (DATASET@N#b3:...) of this repository: "
            f"{why}", reason="SUITE_NOT_PINNED", version=str(version)) from None



def _version_cases(repo, dataset: str, number: int) -> tuple[str, Iterator[SuiteCase]]:
    """The pin text and the version's cases as suite cases, in id order, read a page at a
    time. A retired, deleted or missing version is refused here, before any case is read."""
    pin = repo.pin(dataset, number)  # EVALUATION_DATASET_VERSION_RETIRED for a retired one
    stream = exports.cases(repo, pin)
    return str(pin), _corrected(repo, dataset, number,
                                (case_of(case, case_id) for case_id, case in stream))


CORRECTION_PAGE = 2000  # suite cases whose corrections are looked up together


def _corrected(repo, dataset: str, number: int,
               cases: Iterator[SuiteCase]) -> Iterator[SuiteCase]:
    """`cases` with `expected` replaced by the correction of the judgment that admitted each
    promoted case, where it carries one (metadata `cas.expected_from` names that judgment);
    the case, and so its id, is unchanged (Repository.corrections)."""
    while True:
        page = [c for _, c in zip(range(CORRECTION_PAGE), cases)]
        if not page:
            return
        found = repo.corrections(dataset, number, [c.id for c in page])
        for c in page:
            review = found.get(c.id)
            if review is None:
                yield c
                continue
            source = dict(c.metadata[SOURCE_KEY], expected_from=review.annotation_id)
            yield msgspec.structs.replace(c, expected=review.correction,
                                          metadata={**c.metadata, SOURCE_KEY: source})


def from_version(repo, dataset: str, number: int) -> Suite:
    """The version `dataset@number` as a suite: name = the dataset, version = its pin
    (`name@N#b3:...`), cases in id order as `case_of` maps them, each with its frozen case.
    Refused for a retired version (as every read of it is) and for a case without tenant."""
    pin, cases = _version_cases(repo, dataset, number)
    return Suite(dataset, pin, tuple(cases))


def export(repo, dataset: str, number: int, path: Any) -> SuiteExport:
    """Write `dataset@number` as a suite file at `path` (or to a binary stream), reading the
    version a page at a time; as `from_version` maps it, as `write_jsonl` writes it. A
    refusal (a case without tenant, a credential-shaped tenant) names the case id and
    leaves no file."""
    pin, cases = _version_cases(repo, dataset, number)

    def checked() -> Iterator[tuple[SuiteCase, dict]]:
        # The same checks as a file read back gets, so an export is always readable.
        for i, case in enumerate(cases):
            line = i + 2
            where, at = f"case {case.id} (line {line})", {"line": line, "case_id": case.id}
            fields = {f: getattr(case, f) for f in CASE_FIELDS}
            yield _case(fields, where, at, frozen=case.frozen), {"case_id": case.id}
    n, written = _write(path, dataset, pin, checked())
    return SuiteExport(dataset, pin, n, written)

