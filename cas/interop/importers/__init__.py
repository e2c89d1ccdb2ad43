"""Importers: runs from the trace formats teams already have (docs/importers.md).

Each format is a module with `NAME`, `detect(value) -> bool` (does one parsed JSON value look
like this format's document?) and `convert(values, options, source) -> list[dict]` (the runs,
in cas's own schema, of a file's parsed JSON values); a format that HTTP recordings carry also
has `detect_exchange(exchange) -> bool` and `convert_exchanges(exchanges, options, source)` for
the vcr container, and a format whose files are archives rather than JSON has
`detect_bytes(data) -> bool` and `convert_bytes(data, options, source)`. All are pure: they
read documents and return runs, and `Repository.import_runs` stores them. `convert_stream`
hands the runs of a JSON Lines file over as its lines are read, for the formats whose
documents convert one at a time (`PER_DOCUMENT`): an import's memory then does not grow with
the file (docs/performance.md).

- `common`: what every importer shares: options, documents, tool arguments, run ids, tenant.
- `vcr`: the vcr container: recorded API traffic in vcrpy cassettes, read as exchanges.
- `bodies`: recorded HTTP bodies decoded: stored forms, Content-Encoding, AWS event streams.
- `otlp`: spans as both span importers read them, grouped into traces and conversations.
- `openai_chat`, `openai_responses`, `anthropic`: the model APIs' requests and responses.
- `bedrock_converse`: Amazon Bedrock's Converse API (any model), plain and streamed.
- `otel_genai`, `openinference`: spans that follow the OpenTelemetry GenAI or OpenInference
  conventions.
- `inspect_log`, `langsmith`: Inspect AI eval logs; LangSmith run trees.
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Iterator, NamedTuple

from cas.errors import InvalidArgument
from cas.format import encoding
from cas.format.projection import IMPORT_KEY
from cas.interop.importers import vcr
from cas.interop.importers.common import (Options, Warning, checked_on_import, collecting,
                                          lines_or_whole, parse_documents, warn)

# Each format's module, imported when a format is first used (a `cas` command that imports
# nothing does not pay for seven parsers).
FORMATS = {"openai-chat": "openai_chat", "openai-responses": "openai_responses",
           "anthropic": "anthropic", "bedrock-converse": "bedrock_converse",
           "otel-genai": "otel_genai",
           "openinference": "openinference", "inspect": "inspect_log", "langsmith": "langsmith"}
CONTAINERS = ("vcr",)


def formats() -> tuple[str, ...]:
    """The names `convert` accepts (besides `auto`)."""
    return tuple(FORMATS)


def module_of(name: str):
    """The module that reads format `name`."""
    if name not in FORMATS:
        raise InvalidArgument(f"unknown import format {encoding.describe(name)}; accepted: "
                              + ", ".join(("auto", *FORMATS)), reason="UNKNOWN_FORMAT",
                              accepted=["auto", *FORMATS])
    return importlib.import_module(f".{FORMATS[name]}", __name__)


def convert(data: bytes, format: str = "auto", *, source: str = "input",  # noqa: A002
            container: str | None = None, tenant: str | None = None,
            person: str | None = None, tenant_from: str | None = None,
            person_from: str | None = None, warnings: list | None = None) -> list[dict]:
    """The runs (dicts in cas's schema, for `repo.import_runs`) of one file in `format`
    (`auto`: detected), optionally read out of a `container` (`vcr`: recorded HTTP traffic).
    Pure: nothing is stored. A document that is not the named format is refused with the
    shape expected (and what it looks like instead); the same file always gives the same runs.
    What the file holds that no run keeps is said in a warning (`Warning(source, message,
    run_id)`), appended to `warnings` when a list is given (`convert_files` returns them)."""
    with collecting() as said:
        try:
            return _convert(data, format, source, container, tenant, person, tenant_from,
                            person_from)
        finally:
            if warnings is not None:
                warnings.extend(said)


class Converted(NamedTuple):
    """The runs of the files of one import, and the warnings converting them gave."""

    runs: list[dict]
    warnings: list[Warning]


def convert_files(files, format: str = "auto", *, container: str | None = None,  # noqa: A002
                  tenant: str | None = None, person: str | None = None,
                  tenant_from: str | None = None, person_from: str | None = None) -> Converted:
    """The runs of several files (`(source, bytes)` pairs), in order, all or nothing: the
    first file that is refused refuses the whole import, named by its source (the refusal's
    `source` field), and no runs are returned."""
    runs: list[dict] = []
    said: list[Warning] = []
    for source, data in files:
        try:
            runs.extend(convert(data, format, source=source, container=container,
                                tenant=tenant, person=person, tenant_from=tenant_from,
                                person_from=person_from, warnings=said))
        except InvalidArgument as exc:
            exc.fields.setdefault("source", source)
            raise
    return Converted(runs, said)


# The formats whose documents are each converted on their own (no run spans two documents):
# their JSON Lines files are read a line at a time by `convert_stream`.
PER_DOCUMENT = ("openai-chat", "openai-responses", "anthropic", "bedrock-converse", "inspect")


def convert_stream(files, format: str = "auto", *,  # noqa: A002
                   container: str | None = None, tenant: str | None = None,
                   person: str | None = None, tenant_from: str | None = None,
                   person_from: str | None = None,
                   warnings: list | None = None) -> Iterator[dict]:
    """`convert_files` a run at a time, for `repo.import_runs` to store as they come: `files`
    are `(source, binary file)` pairs (or `(source, bytes)`). A JSON Lines file of a format in
    `PER_DOCUMENT` is converted as its lines are read, so memory does not grow with it (with
    `auto`, a file that can seek is read twice: once to detect the format, line by line);
    any other file is read whole and converted as `convert` does (one JSON document, a
    cassette, an archive, spans grouped into traces, LangSmith runs grouped by trace).

    The same runs, refusals and warnings as `convert_files`, in order; a refusal is raised when
    its line is reached, named by its source (`source` field): the import consuming the runs
    then stores none of them. Warnings are appended to `warnings` as they are said. The runs
    are for `repo.import_runs`, which makes the `check_json` of every run the importers then
    leave to it (a caller keeping them otherwise uses `convert_files`)."""
    said = warnings if warnings is not None else []
    for source, file in files:
        try:
            yield from _stream_file(file, format, source, container, tenant, person,
                                    tenant_from, person_from, said)
        except InvalidArgument as exc:
            exc.fields.setdefault("source", source)
            raise


def _stream_file(file, format, source, container, tenant, person, tenant_from,  # noqa: A002
                 person_from, said: list) -> Iterator[dict]:
    whole = container is not None or not hasattr(file, "read") or \
        (format != "auto" and format not in PER_DOCUMENT) or \
        (format == "auto" and not _seekable(file))
    values = iter(())
    if not whole:
        options = _options(source, tenant, person, tenant_from, person_from)
        data, values = lines_or_whole(file, source)
    else:
        data = file if not hasattr(file, "read") else file.read()
    if data is None and format == "auto":
        name = _detect_lines(values)
        file.seek(0)
        if name is None:  # refused, ambiguous or read whole: as `convert` says it
            data = file.read()
        else:
            data, values = lines_or_whole(file, source)
            format = name  # noqa: A001
    if data is not None:
        yield from convert(data, format, source=source, container=container, tenant=tenant,
                           person=person, tenant_from=tenant_from, person_from=person_from,
                           warnings=said)
        return
    module = module_of(format)
    for k, (_, value) in enumerate(values, 1):
        with collecting() as got, checked_on_import():
            try:
                runs = module.convert([value], options, f"{source} document {k}")
            finally:
                said.extend(got)
        for run in runs:
            run.setdefault("metadata", {})[IMPORT_KEY] = {"format": module.NAME,
                                                          "container": None}
            yield run


def _seekable(file) -> bool:
    try:
        return bool(file.seekable())
    except (AttributeError, OSError, ValueError):
        return False


def _detect_lines(values) -> str | None:
    """The one format of `PER_DOCUMENT` that detects every value, else None (no format, more
    than one, one read whole, or a line that is not JSON: `convert` of the whole file then
    says which)."""
    candidates = list(map(module_of, FORMATS))
    try:
        for _, value in values:
            candidates = [m for m in candidates if m.detect(value)]
            if not candidates:
                return None
    except InvalidArgument:
        return None
    if len(candidates) != 1 or candidates[0].NAME not in PER_DOCUMENT:
        return None
    return candidates[0].NAME


def _options(source, tenant, person, tenant_from, person_from) -> Options:
    if not isinstance(source, str):
        raise InvalidArgument(f"source names the input: a string, not {encoding.describe(source)}")
    for name, value in (("tenant", tenant), ("person", person), ("tenant_from", tenant_from),
                        ("person_from", person_from)):
        encoding.check_text(value, name, optional=True)
    return Options(tenant, person, tenant_from, person_from)


def _convert(data, format, source, container, tenant, person, tenant_from,  # noqa: A002
             person_from) -> list[dict]:
    options = _options(source, tenant, person, tenant_from, person_from)
    if container is not None and container not in CONTAINERS:
        raise InvalidArgument(f"unknown container {encoding.describe(container)}; accepted: "
                              + ", ".join(CONTAINERS), reason="UNKNOWN_CONTAINER",
                              accepted=list(CONTAINERS))
    if container == "vcr":
        exchanges = vcr.read_cassette(data, source)
        try:
            module = _module(format, _reads_most(exchanges), source)
        except InvalidArgument as exc:
            hint = _traffic_of(exchanges)
            raise (hinted(exc, hint) if hint else exc) from None
        runs = module.convert_exchanges(exchanges, options, source)
        _unread_exchanges(exchanges, module, source)
    elif (module := _archive_format(format, data, source)) is not None:
        runs = module.convert_bytes(data, options, source)
    else:
        try:
            values = parse_documents(data, source)
            module = _module(format, lambda m: all(m.detect(v) for v in values), source)
            runs = module.convert(values, options, source)
        except InvalidArgument as exc:
            if _is_cassette(data):  # said, rather than "not JSON" or "not this format"
                raise hinted(exc, "it looks like a vcr cassette: give --container vcr") \
                    from None
            raise
    for run in runs:  # where it came from; a content policy reads it (cas/format/projection.py)
        run.setdefault("metadata", {})[IMPORT_KEY] = {"format": module.NAME,
                                                      "container": container}
    return runs


def detect(data: bytes, source: str = "input", container: str | None = None) -> str:
    """The format of a file, as `convert(format="auto")` would read it."""
    if container == "vcr":
        return _module("auto", _reads_most(vcr.read_cassette(data, source)), source).NAME
    module = _archive_format("auto", data, source)
    if module is not None:
        return module.NAME
    values = parse_documents(data, source)
    return _module("auto", lambda m: all(m.detect(v) for v in values), source).NAME


def looks_like(data: bytes, source: str = "input") -> str | None:
    """What a file refused as cas's own runs looks like instead, as the flag to give: a vcr
    cassette (`--container vcr`) or another format's documents (`--format NAME`); None when
    it looks like none of them."""
    if _is_cassette(data):
        return "it looks like a vcr cassette: give --format auto --container vcr"
    try:
        name = detect(data, source)
    except InvalidArgument as exc:
        names = exc.fields.get("candidates") if exc.reason == "FORMAT_AMBIGUOUS" else None
        if not names:
            return None
        return f"it looks like {' or '.join(names)} documents: give --format with one of them"
    return f"it looks like {name} documents: give --format {name}"


def hinted(exc: InvalidArgument, hint: str) -> InvalidArgument:
    """The refusal `exc` with what the file looks like instead after its message."""
    new = encoding.in_context(exc, "x", looks_like=hint)
    new.message = f"{exc.message} ({hint})"
    new.args = (new.message,)
    return new


# A cassette's top-level `interactions:` key (YAML) or member (JSON), near the start.
_CASSETTE = re.compile(rb'(?m)^(?:interactions:|\{?\s*"interactions"\s*:)')


def _is_cassette(data: Any) -> bool:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return False
    head = bytes(data[:1 << 16])
    if not _CASSETTE.search(head):
        return False
    try:
        vcr.read_cassette(bytes(data), "input")
    except Exception:  # noqa: BLE001 - any failure: not something to name it by
        return False
    return True


# APIs no importer reads, known by their hosts or paths, to name in a refusal.
_UNREAD_APIS = (("generativelanguage.googleapis.com", "Google Gemini (generateContent)"),
                (":generateContent", "Google Gemini (generateContent)"),
                (":streamGenerateContent", "Google Gemini (generateContent)"),
                ("aiplatform.googleapis.com", "Google Vertex AI"))


def _traffic_of(exchanges) -> str | None:
    """What API a cassette no importer reads records, when it is one we know by name."""
    for exchange in exchanges:
        for mark, api in _UNREAD_APIS:
            if mark in exchange.uri:
                return f"it records {api} traffic, which no importer reads"
    return None


def _unread_exchanges(exchanges, module, source: str) -> None:
    """Warn of each recorded call the format read none of (another API's traffic)."""
    for i, exchange in enumerate(exchanges):
        if not module.detect_exchange(exchange):
            others = [n for n, m in ((n, module_of(n)) for n in FORMATS)
                      if hasattr(m, "detect_exchange") and m.detect_exchange(exchange)]
            also = f" (it is {others[0]} traffic: --format {others[0]} reads it)" if others \
                else ""
            warn(source, f"interactions[{i}] ({exchange.uri or 'no uri'}) is not read by "
                 f"{module.NAME} (not a call of its API): not imported{also}")


def _reads_most(exchanges):
    """Which formats a cassette is: those that read the most of its exchanges (a tool's own
    call to another API does not make a cassette ambiguous)."""
    counts = {name: sum(map(m.detect_exchange, exchanges))
              for name, m in ((n, module_of(n)) for n in FORMATS)
              if hasattr(m, "convert_exchanges")}
    best = max(counts.values(), default=0)
    return lambda m: best > 0 and counts.get(m.NAME) == best


def _archive_format(name: str, data: bytes, source: str):
    """The format that reads `data` as an archive of its own (not JSON, e.g. Inspect's zip
    `.eval` logs: a module with `detect_bytes` and `convert_bytes`), or None."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return None
    candidates = [module_of(name)] if name != "auto" else list(map(module_of, FORMATS))
    for module in candidates:
        if hasattr(module, "detect_bytes") and module.detect_bytes(bytes(data)):
            return module
    return None


def _module(name: str, fits, source: str):
    if name != "auto":
        return module_of(name)
    found = [m for m in map(module_of, FORMATS) if fits(m)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise InvalidArgument(f"{source}: no import format recognises it; accepted: "
                              + ", ".join(FORMATS) + " (name one with --format)",
                              reason="FORMAT_UNKNOWN", accepted=list(FORMATS))
    names = [m.NAME for m in found]
    raise InvalidArgument(f"{source}: it could be any of {', '.join(names)}; name one with "
                          "--format", reason="FORMAT_AMBIGUOUS", candidates=names)


__all__ = ["CONTAINERS", "FORMATS", "PER_DOCUMENT", "Converted", "Options", "Warning", "convert",
           "convert_files", "convert_stream", "detect", "formats", "looks_like", "module_of"]
