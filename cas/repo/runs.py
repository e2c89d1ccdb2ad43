"""Recorded runs: validated JSON Lines import (all or nothing), lookup by run id (docs/runs.md)."""

from __future__ import annotations

import itertools
from typing import IO, Any, Iterable, Iterator, NamedTuple

from cas.errors import DataLoss, FailedPrecondition, InvalidArgument, NotFound
from cas.format import encoding, times
from cas.format.keys import admission_key, import_key
from cas.format.records import (RunAdmission, RunEntry, RunImport, RunRecord, encode_object,
                                format_record_file, parse_record_file)
from cas.repo import checks
from cas.repo.checks import Progress
from cas.repo.erased import admitted_persons, erased_persons, refuse_erased
from cas.storage import claims, leases, log_index
from cas.storage.refs import read_log_from

FIELDS = ("run_id", "tenant", "person", "started_at", "input", "output", "steps", "outcome",
          "metadata")
STEP_TYPES = ("message", "tool_call")
MAX_LINE = 16 << 20  # a longer line is refused, never read into a record


def _text(value: Any, where: str, *, optional: bool = False, limit: int = 512) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{where}: must be a non-empty string"
                              + (" or null" if optional else ""))
    problem = encoding.text_problem(value, limit)
    if problem is not None:
        raise InvalidArgument(f"{where}: must be at most {limit} printable characters; it "
                              f"{problem}")
    return value


def parse_run(obj: Any, where: str) -> RunRecord:
    """Validate one run given as a decoded JSON object; errors name `where` and the field."""
    if not isinstance(obj, dict):
        raise InvalidArgument(f"{where}: a run must be a JSON object")
    encoding.check_json(obj, where)  # and nested at most MAX_DEPTH levels
    for required in ("run_id", "tenant", "steps"):
        if required not in obj:
            raise InvalidArgument(f"{where}.{required}: required field is missing")
    run_id = _text(obj["run_id"], f"{where}.run_id", limit=256)
    tenant = _text(obj["tenant"], f"{where}.tenant")
    person = _text(obj.get("person"), f"{where}.person", optional=True)
    started = _text(obj.get("started_at"), f"{where}.started_at", optional=True, limit=64)
    steps = obj["steps"]
    if not isinstance(steps, list):
        raise InvalidArgument(f"{where}.steps: must be a list of steps")
    for i, step in enumerate(steps):
        _check_step(step, f"{where}.steps[{i}]")
    metadata = obj.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise InvalidArgument(f"{where}.metadata: must be a JSON object")
    extra = {k: v for k, v in obj.items() if k not in FIELDS}
    return RunRecord(run_id=run_id, tenant=tenant, person=person, started_at=started,
               input=obj.get("input"), output=obj.get("output"), steps=steps,
               outcome=obj.get("outcome"), metadata=metadata, extra=extra)


def _check_step(step: Any, where: str) -> None:
    if not isinstance(step, dict):
        raise InvalidArgument(f"{where}: a step must be a JSON object")
    kind = step.get("type")
    if kind not in STEP_TYPES:
        raise InvalidArgument(f"{where}.type: must be one of {', '.join(STEP_TYPES)}, "
                              f"not {encoding.describe(kind)}")
    if kind == "message":
        if not isinstance(step.get("role"), str) or not step["role"]:
            raise InvalidArgument(f"{where}.role: a message needs a non-empty string role")
    else:
        _text(step.get("tool_name"), f"{where}.tool_name", limit=256)
        if "arguments" in step and not isinstance(step["arguments"], (dict, list)):
            raise InvalidArgument(f"{where}.arguments: must be a JSON object or array")


def read_runs_jsonl(stream: IO[bytes] | Iterable[bytes], source: str = "input") -> list[RunRecord]:
    """Every run of a JSON Lines file, validated; the first bad line is refused by number."""
    return list(iter_runs_jsonl(stream, source))


def iter_runs_jsonl(stream: IO[bytes] | Iterable[bytes],
                    source: str = "input") -> Iterator[RunRecord]:
    """`read_runs_jsonl` a line at a time: each run validated as its line is read (the first
    bad line is refused by number when it is reached)."""
    lines = encoding.lines_of(stream, source)  # (what is no stream is refused at once)
    return _runs_of_lines(lines, source)


def _runs_of_lines(lines: Iterable[Any], source: str) -> Iterator[RunRecord]:
    for lineno, line in enumerate(lines, 1):
        if len(line) > MAX_LINE:
            raise InvalidArgument(f"{source} line {lineno}: longer than {MAX_LINE} bytes")
        if not line.strip():
            continue
        try:
            yield parse_run(encoding.parse_json(line), "$")
        except InvalidArgument as exc:
            raise encoding.in_context(exc, f"{source} line {lineno}", line=lineno) from None


class RunIndex:
    """Run id -> digest of the stored run. Lookups go through the log's keyed index (a few
    small reads in a fresh process); `all` reads every import record (once per process)."""

    def __init__(self, backend, secret: bytes) -> None:
        self.backend = backend
        self.keyed = log_index.LogIndex(backend, log_index.RUNS, secret)
        self._by_id: dict[str, str] = {}
        self._loaded = 0  # import records read so far by `all`

    def refresh(self) -> int:
        """The number of the last import record (the records landed since are read)."""
        return self.keyed.refresh()

    def reload(self) -> None:
        """Read every import record again (an erasure rewrites records already read)."""
        self.keyed.reload()
        self._by_id, self._loaded = {}, 0

    def get(self, run_id: str) -> str | None:
        return self.get_many([run_id]).get(run_id)

    def get_many(self, run_ids: Iterable[str]) -> dict[str, str]:
        """Run id -> digest of those of `run_ids` that are recorded (the newest import wins:
        an id comes back only after an erasure removed its first recording)."""
        found = self.keyed.find_many("run-id", run_ids)
        return {run_id: entries[-1][1].run for run_id, entries in found.items() if entries}

    def import_numbers(self, run_ids: Iterable[str]) -> dict[str, int]:
        """Run id -> the number of the import record that recorded it (the newest), for
        those of `run_ids` that are recorded: a few keyed lookups, not a read of the log."""
        found = self.keyed.find_many("run-id", run_ids)
        return {run_id: entries[-1][0] for run_id, entries in found.items() if entries}

    def all(self) -> dict[str, str]:
        """Every run id -> digest, in import order."""
        for n, record in read_log_from(self.backend, import_key, RunImport, self._loaded):
            for entry in record.runs:
                self._by_id[entry.run_id] = entry.run
            self._loaded = n
        return dict(self._by_id)


class _Counts(NamedTuple):
    new: list[str]       # run ids imported now
    unchanged: int       # runs already stored with identical content


class RunImportResult(_Counts):
    """`(new, unchanged)`, and `warnings` beside them (kept out of the tuple, so code that
    unpacks or compares the two counts reads them as before): e.g. tool calls hidden in message
    steps (`hidden_tool_calls`)."""

    warnings: list[str] = []


# Members of a message's content (or of the message) that are tool calls or their replies in
# another format: imported as cas's own schema they stay hidden inside a message step.
_HIDDEN = {"tool_use": "anthropic", "tool_result": "anthropic", "server_tool_use": "anthropic",
           "function_call": "openai-responses", "function_call_output": "openai-responses",
           "tool_call": "otel-genai", "tool_call_response": "otel-genai"}


def hidden_tool_calls(run: RunRecord) -> str | None:
    """The import format to use instead when `run`'s message steps hide tool calls: an
    assistant message with `tool_calls`, a `role: "tool"` reply, or content blocks that are
    another format's tool calls. None when its tool calls are steps of their own."""
    for step in run.steps:
        if step.get("type") != "message" or step.get("orphan_reply") is True:
            continue  # (an importer keeps a reply that answers no call as a message)
        if "tool_calls" in step or "function_call" in step or step.get("role") == "tool":
            return "openai-chat"
        content = step.get("content")
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict) and part.get("type") in _HIDDEN:
                return _HIDDEN[part["type"]]
    return None


def index(ctx) -> RunIndex:
    """The context's run index (read once, then extended as the log grows)."""
    return ctx.derived("runs", lambda: RunIndex(ctx.backend, ctx.store.person_key))


PROGRESS_EVERY = 500  # runs between two progress reports


def import_runs(ctx, source: IO[bytes] | Iterable[bytes] | Iterable[dict[str, Any]],
                author: str | None = None, allow_erased_persons: Iterable[str] = (),
                progress: Progress | None = None) -> RunImportResult:
    """Import runs from a binary JSON Lines stream (or a list, or any other iterable, of
    dicts): all or nothing. An identical run again is a no-op; a known run id with other
    content is refused.

    A new run naming a person an erasure deleted is refused (`PERSON_ERASED_BEFORE`), unless
    the person is in `allow_erased_persons` (their new consent): then the import first records
    a `run.admission` with the author, at the number its import record takes. An admission
    holds for that import only.

    The runs are read, checked and packed one batch at a time (memory does not grow with the
    file: docs/performance.md); what keeps them all is the run id -> digest of each. The
    import record that makes the runs visible is written last, after every run was read and
    every conflict found: a refusal, even at the last line, leaves no run visible (a pack
    already full by then stays, unreferenced: a notice of fsck that gc removes).
    `progress(stage, done, total)` hears how far the encoding of the runs is (total 0: not
    known ahead, as of a stream).
    """
    author = checks.author(author)
    allowed = admitted_persons(ctx, allow_erased_persons)
    position = None  # how far into the file, when the runs are a file's lines
    if isinstance(source, (list, tuple)):
        total = len(source)
        runs: Iterable[RunRecord] = (parse_run(obj, f"$[{i}]") for i, obj in enumerate(source))
    else:
        total, source = 0, _lines_or_dicts(source)
        if isinstance(source, _Dicts):  # runs as dicts, e.g. converted as a file is read
            runs = (parse_run(obj, f"$[{i}]") for i, obj in enumerate(source.items))
        else:
            name = getattr(source, "name", "input")
            runs = iter_runs_jsonl(source, name if isinstance(name, str) else "input")
            total, position = _extent(source)
    runs_index = index(ctx)
    runs_index.refresh()
    with leases.writing(ctx, "import") as lease:
        # Read under the lease: an erasure that started earlier has finished by now (writers
        # wait for it), and one that starts later erases what this import stores.
        erased = erased_persons(ctx)
        staged = _Staged(ctx, runs_index, _Admitting(ctx, erased, allowed))
        with ctx.store.writer(lease) as writer:
            staged.read(runs, writer, progress, total, position)
        new, unchanged = _import_leased(ctx, lease, runs_index, staged, author, ctx.clock())
    result = RunImportResult(new, unchanged)
    result.warnings = staged.warnings
    return result


class _Dicts(NamedTuple):
    items: Iterable[Any]


def _lines_or_dicts(source: Any) -> Any:
    """`source` as given when it is a stream of JSON Lines (a file, or what `lines_of`
    refuses), else its items: `_Dicts` when they are not lines (runs as dicts)."""
    if hasattr(source, "read") or isinstance(source, (str, bytes, bytearray, memoryview, dict)) \
            or not hasattr(source, "__iter__"):
        return source
    items = iter(source)
    first = next(items, None)
    if first is None:
        return _Dicts(())
    rest = itertools.chain([first], items)
    return rest if isinstance(first, (bytes, bytearray, str)) else _Dicts(rest)


def _extent(stream: Any) -> tuple[int, Any]:
    """(size, a function of how far reading is) of a regular file; (0, None) of a stream
    whose size is not known ahead (a pipe)."""
    try:
        if not stream.seekable():
            return 0, None
        here = stream.tell()
        size = stream.seek(0, 2)
        stream.seek(here)
        return size, stream.tell
    except (AttributeError, OSError, ValueError):
        return 0, None


BATCH = 512  # runs checked against the stored index with one lookup


class _Staged:
    """What an import keeps of its runs once they are packed: each run id's digest, the
    erased persons its new runs bring back (by run id), and the warnings."""

    def __init__(self, ctx, runs_index: RunIndex, admitting: "_Admitting") -> None:
        self.ctx, self.runs_index, self.admitting = ctx, runs_index, admitting
        self.seen: dict[str, str] = {}          # run id -> digest, in the order first read
        self.admitted: dict[str, str] = {}      # run id -> the keyed erased person it admits
        self.warnings: list[str] = []

    def read(self, runs: Iterable[RunRecord], writer, progress, total: int,
             position=None) -> None:
        """Pack `runs` as they come; progress counts runs, or bytes of the file when
        `position()` says how far into it the reading is (its size: `total`)."""
        batch: list[tuple[RunRecord, tuple[str, bytes, str]]] = []
        done = 0
        for run in runs:
            if progress is not None and done % PROGRESS_EVERY == 0:
                if position is None:
                    progress("encoding runs", done, total)
                else:
                    progress("encoding runs, bytes read", position(), total)
            done += 1
            encoded = encode_object(run)
            digest = encoded[2]
            prior = self.seen.get(run.run_id)
            if prior is not None:
                if prior != digest:
                    raise InvalidArgument(f"run {run.run_id!r} appears twice with different "
                                          "content", run_id=run.run_id)
                continue
            self.seen[run.run_id] = digest
            fmt = hidden_tool_calls(run)
            if fmt is not None:
                self.warnings.append(f"run {run.run_id!r}: its message steps hold tool calls "
                                     "that are not tool_call steps; import the original with "
                                     f"--format {fmt}")
            batch.append((run, encoded))
            if len(batch) >= BATCH:
                self._stage(batch, writer)
                batch = []
        self._stage(batch, writer)

    def _stage(self, batch, writer) -> None:
        """Pack the runs of `batch` not stored yet, after refusing a conflict or an erased
        person among them (the check is made again, on every run, before the record)."""
        if not batch:
            return
        known = self.runs_index.get_many(run.run_id for run, _ in batch)
        new: dict[str, tuple[str, RunRecord]] = {}
        for run, (_, _, digest) in batch:
            stored = known.get(run.run_id)
            if stored is None:
                new[run.run_id] = (digest, run)
            elif stored != digest:
                raise _conflict(run.run_id)
        self.admitted.update(self.admitting.persons(new))
        for run, (kind, data, digest) in batch:
            if run.run_id in new:
                writer.add_encoded(kind, data, digest, run.person)


def _conflict(run_id: str) -> FailedPrecondition:
    return FailedPrecondition(f"run {run_id!r} was already imported with different content; a "
                              "run id names one recording", reason="RUN_ID_CONFLICT",
                              run_id=run_id)


class _Admitting(NamedTuple):
    ctx: Any
    erased: dict        # keyed person digest -> Erased
    allowed: set[str]   # keyed digests the caller admits again

    def persons(self, new: dict[str, tuple[str, RunRecord]]) -> dict[str, str]:
        """Run id -> the erased person it brings back, of the runs `new` (all admitted, or
        refused)."""
        admitted: dict[str, str] = {}
        if not self.erased:
            return admitted
        for run_id, (_, run) in sorted(new.items()):
            if run.person is None:
                continue
            keyed = self.ctx.store.person_digest(run.person)
            if keyed in self.allowed and keyed in self.erased:
                admitted[run_id] = keyed
            else:
                refuse_erased(self.erased, keyed, run.person, f"run {run_id!r}",
                                      run_id=run_id)
        return admitted


def _admit(ctx, number: int, persons: list[str], author: str, now: str) -> bool:
    """Record that import `number` admits `persons` again; False if that number's admission
    is another import's (try the next number once its import record lands)."""
    record = RunAdmission(number=number, persons=persons, author=author, admitted_at=now)
    key = admission_key(number)
    if ctx.backend.put_if_absent(key, format_record_file(record)):
        return True
    # The same admission left by this very import retried after a crash is reused.
    try:
        found = parse_record_file(ctx.backend.get(key), RunAdmission, key)
    except NotFound:
        return False
    return (found.persons, found.author) == (persons, author)


def _import_leased(ctx, lease, runs_index, staged: _Staged, author,
                   now) -> tuple[list[str], int]:
    seen = staged.seen
    for _ in claims.attempts("a run import number"):
        checked = runs_index.refresh()  # every import up to this number is checked below
        new = {}
        known = runs_index.get_many(seen)
        for run_id, digest in seen.items():
            stored = known.get(run_id)
            if stored is None:
                new[run_id] = digest
            elif stored != digest:
                raise _conflict(run_id)
        if not new:
            return [], len(seen)
        # Only new runs count: a run already stored (admitted before) brings nobody back.
        # (Every new run is packed: one stored when its batch was read is still stored, as
        # an erasure waits for this import's lease.)
        admitted = sorted({p for r, p in staged.admitted.items() if r in new})
        if runs_index.refresh() != checked:
            continue  # an import landed since the check (or during it): check against it too
        number = checked + 1
        record = RunImport(number=number, author=author, imported_at=now,
                           runs=[RunEntry(run_id=r, run=d) for r, d in sorted(new.items())])
        lease.check()
        # The admission comes first, naming the number the import record then claims.
        if admitted and not _admit(ctx, number, admitted, author, now):
            continue
        data = format_record_file(record)
        if ctx.backend.put_if_absent(import_key(number), data):
            log_index.extend(ctx.backend, log_index.RUNS, ctx.store.person_key, number, data)
            runs_index.refresh()
            return sorted(new), len(seen) - len(new)
        # another import took this number: re-check conflicts against it, then retry (an
        # admission written for it stays, a notice for fsck; the next number gets its own)


def runs(ctx) -> list[str]:
    """Every recorded run id, sorted."""
    return sorted(index(ctx).all())


def get_run(ctx, run_id: str) -> RunRecord:
    """The recorded run `run_id`."""
    if not isinstance(run_id, str):
        raise InvalidArgument(f"a run id is a string, not {encoding.describe(run_id)}")
    runs_index = index(ctx)
    digest = runs_index.get(run_id)
    if digest is not None:
        ctx.refuse_erasing(digest, f"run {run_id!r}")
        try:
            return ctx.store.get(digest, RunRecord)
        except NotFound:
            # An erasure (in another process) deleted the run and redacted the import record
            # this index read: read the log again. A run the log still names is damage.
            runs_index.reload()
            digest = runs_index.get(run_id)
            if digest is not None:
                try:
                    return ctx.store.get(digest, RunRecord)
                except NotFound:
                    raise DataLoss(f"run {run_id!r} ({digest}) is recorded as imported but "
                                   "its object is missing", run_id=run_id, digest=digest) from None
    raise NotFound(f"no recorded run {run_id!r} (import it with `cas runs import`)",
                   reason="RUN_NOT_FOUND", run_id=run_id)


class RunsPage(NamedTuple):
    runs: list[dict]          # summaries, in import order (ties by run id)
    next_cursor: str | None   # the last run id of the page, to pass as `cursor`; None at the end
    # the runs of this page's stretch that `since` left out because their `started_at` is absent
    # or not a time (docs/runs.md): a filter that cannot place a run says so, never drops it
    # silently. Each is named on exactly one page; always empty without `since`.
    undated: tuple[str, ...] = ()


MAX_RUNS_PAGE = 500


def list_runs(ctx, tenant: str | None = None, since: str | None = None, limit: int = 100,
              cursor: str | None = None) -> RunsPage:
    """A page of recorded runs in import order (ties by run id), each summarised: run id,
    tenant, started_at, the number of steps and of tool calls, the first user message
    (trimmed). `since` keeps the runs whose `started_at` is at or after it, compared as times
    (`cas.format.times`: any offset, a date alone is its midnight UTC; other text is refused,
    INVALID_TIME); a run whose `started_at` is absent or not a time does not match and is named
    in `undated`. `cursor` is the last run id of the previous page."""
    return page_of_runs(ctx, tenant, since, limit, cursor)


def page_of_runs(ctx, tenant: str | None, since: str | None, limit: int, cursor: str | None,
                 keep=None) -> RunsPage:
    """`list_runs`, of the runs `keep(run_id)` accepts (the review queue's filter)."""
    for value, what in ((tenant, "tenant"), (since, "since"), (cursor, "cursor")):
        encoding.check_text(value, what, optional=True)
    after = None if since is None else times.parse_time(since, "since")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_RUNS_PAGE:
        raise InvalidArgument(f"limit must be a positive integer from 1 to {MAX_RUNS_PAGE}, not "
                              f"{encoding.describe(limit)}", minimum=1, maximum=MAX_RUNS_PAGE)
    ordered = list(index(ctx).all().items())
    start = 0
    if cursor is not None:
        ids = [r for r, _ in ordered]
        if cursor not in ids:
            raise InvalidArgument(f"cursor {cursor!r} is not a recorded run id (pass the "
                                  "next_cursor of the previous page)", reason="CURSOR_UNKNOWN")
        start = ids.index(cursor) + 1
    out: list[dict] = []
    undated: list[str] = []  # this page's; those after its last run belong to the next page
    passed: list[str] = []   # undated since the last run kept
    for run_id, digest in ordered[start:]:
        if keep is not None and not keep(run_id):
            continue
        try:
            run = ctx.store.get(digest, RunRecord)
        except NotFound:
            continue  # erased since the index was read
        if tenant is not None and run.tenant != tenant:
            continue
        if after is not None:
            started = times.time_or_none(run.started_at)
            if started is None:
                passed.append(run_id)
                continue
            if started < after:
                continue
        if len(out) == limit:
            return RunsPage(out, out[-1]["run_id"], tuple(undated))
        out.append(summary(run))
        undated += passed
        passed = []
    return RunsPage(out, None, tuple(undated + passed))


def summary(run: RunRecord, width: int = 80) -> dict:
    """What a listing shows of a run."""
    first = next((s.get("content") for s in run.steps if s.get("type") == "message"
                  and s.get("role") == "user"), None)
    if first is not None and not isinstance(first, str):
        first = encoding.encode(first).decode("utf-8", "replace")
    if isinstance(first, str) and len(first) > width:
        first = first[:width - 1] + "…"
    return {"run_id": run.run_id, "tenant": run.tenant, "started_at": run.started_at,
            "steps": len(run.steps),
            "tool_calls": sum(1 for s in run.steps if s.get("type") == "tool_call"),
            "first_user_message": first}
