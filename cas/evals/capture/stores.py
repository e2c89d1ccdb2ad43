"""Where captures go: a local store (one JSON Lines file per UTC day, with retention), and a
repository store (captures become recorded runs, ready for review) (docs/capture.md)."""

from __future__ import annotations

import logging
import os
import re
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable, Iterable

import msgspec

from cas.digest import person_digest
from cas.errors import FailedPrecondition, InvalidArgument, NotFound
from cas.evals.capture.records import (FAILED, OMITTED, CaptureRecord, RecordedTool, format_record,
                                       parse_record)
from cas.format import encoding
from cas.format.times import Instant, format_time, parse_time, time_or_none
from cas.repo.erased import erased_persons

RUN_PREFIX = "capture-"  # a captured run's id: this and the record's id
logger = logging.getLogger("cas.capture")
_DAY_FILE = re.compile(r"captures-(\d{4}-\d{2}-\d{2})\.jsonl\Z")
# Beside the day files of a store opened with a repository: which repository's key its person
# digests were made with, as the keyed digest of a constant (it tells the key apart, and
# reveals nothing of it or of anyone), so an import into another repository, where an
# erasure could never find those digests, is refused.
KEY_FILE = "captures-key.json"
_KEY_CHECK = "cas:capture-store-key-check"
UNKEYED_WARNING = ("the captures in {path} were made by a LocalCaptureStore opened without a "
                   "repository: their runs name nobody, so `cas erase --person` cannot find "
                   "them (open the store with repo= to keep the keyed person digest)")


def key_check(repo) -> str:
    """The check value of `repo`'s person key that KEY_FILE holds."""
    return person_digest(_KEY_CHECK, _person_key(repo))


def _person_key(repo) -> bytes:
    key = getattr(getattr(repo, "store", None), "person_key", None)
    if not isinstance(key, bytes):
        raise InvalidArgument(f"a capture store digests users with a repository's person key; "
                              f"{encoding.describe(repo)} has none (give a cas.Repository)",
                              reason="CAPTURE_REPOSITORY_REQUIRED")
    return key


def _since(since: Any) -> Instant | None:
    """`since` as a time (a datetime with a zone, or text parse_time reads): compared with a
    record's `captured_at` as times, never as text (an offset would misplace it)."""
    if since is None:
        return None
    if isinstance(since, datetime):
        if since.tzinfo is None:
            raise InvalidArgument("since is a datetime without a time zone; give one in UTC")
        since = since.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(since, str):
        return parse_time(since, "since")
    raise InvalidArgument(f"since is a datetime or ISO 8601 text, not {encoding.describe(since)}")


def _captured_since(record: CaptureRecord, after: Instant | None) -> bool:
    """Whether a record was captured at or after `after` (no bound: every record)."""
    if after is None:
        return True
    captured = time_or_none(record.captured_at)
    return captured is not None and captured >= after


def _limit(limit: Any) -> int:
    if type(limit) is not int or limit < 1:
        raise InvalidArgument(f"limit is a whole number from 1, not {encoding.describe(limit)}")
    return limit


class LocalCaptureStore:
    """One JSON Lines file per UTC day (`captures-YYYY-MM-DD.jsonl`) in `directory`. Days older
    than `retention_days` are deleted on start and when a new day begins. A crash mid-append
    leaves at most a torn last line: reading skips it and reports it (`torn`, and a
    `capture.torn_line` log), and the next append starts on a new line.

    With `repo` (the repository its captures will be imported into), a record names its user
    by that repository's keyed person digest (`pk:...`, as RepositoryCaptureStore's runs do),
    never the user id, so `cas erase --person USER` finds the imported runs; the directory
    keeps the key's check value (KEY_FILE). Without, its records name nobody (`person_key`
    answers None) and their runs cannot be erased by person."""

    def __init__(self, directory: Any, retention_days: int = 30,
                 clock: Callable[[], datetime] | None = None, *, repo: Any = None) -> None:
        if type(retention_days) is not int or retention_days < 1:
            raise InvalidArgument(f"retention_days is a whole number of days from 1, not "
                                  f"{encoding.describe(retention_days)}")
        self.directory = os.fspath(directory)
        self.retention_days = retention_days
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.torn: list[tuple[str, int]] = []  # (file, line number) of lines skipped on read
        self._day: date | None = None
        # Only the key is kept, not the repository: the worker thread digests with it, and a
        # Repository's caches are not shared across threads.
        self._key = None if repo is None else _person_key(repo)
        self._key_checked = False

    def person_key(self, user_id: str) -> str | None:
        return None if self._key is None else person_digest(user_id, self._key)

    def key_check(self) -> str | None:
        """The check value KEY_FILE holds for this store's key (None without a repository)."""
        return None if self._key is None else person_digest(_KEY_CHECK, self._key)

    async def start(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        self._day = self._today()
        self.prune()
        self._check_key()

    def _check_key(self) -> None:
        """Before the first append: one directory holds the captures of one key, or of none,
        because an import tells them apart by the directory's KEY_FILE alone. Written when a
        keyed store starts an empty directory; any other mix is refused."""
        if self._key_checked:
            return
        found = read_key_check(self.directory)
        if self._key is None and found is not None:
            raise FailedPrecondition(
                f"{self.directory} holds captures naming their users by a repository's keyed "
                "digest: open the store with that repository (repo=), or its records would "
                "name nobody", reason="CAPTURE_REPOSITORY_REQUIRED")
        if self._key is not None and found is None:
            if self.days():
                raise FailedPrecondition(
                    f"{self.directory} holds captures made without a repository (they name "
                    "nobody): import them first (cas runs import --from-captures) or give "
                    "this store a new directory", reason="CAPTURE_KEY_MISMATCH")
            path = os.path.join(self.directory, KEY_FILE)
            with open(path + ".tmp", "wb") as f:  # renamed whole: a torn key file would
                f.write(encoding.encode({"format": 1, "key_check": self.key_check()}) + b"\n")
            os.replace(path + ".tmp", path)  # refuse every later start and import
        elif self._key is not None and found != self.key_check():
            raise FailedPrecondition(
                f"{self.directory} holds captures digested with another repository's key: "
                "give each repository its own capture directory",
                reason="CAPTURE_KEY_MISMATCH")
        self._key_checked = True

    async def close(self) -> None:
        return None

    def _today(self) -> date:
        return self.clock().astimezone(timezone.utc).date()

    def days(self) -> list[tuple[date, str]]:
        """(day, path) of the day files, oldest first."""
        found = []
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        for name in names:
            m = _DAY_FILE.match(name)
            if m:
                try:
                    found.append((date.fromisoformat(m[1]), os.path.join(self.directory, name)))
                except ValueError:
                    continue
        return sorted(found)

    def prune(self) -> list[str]:
        """Delete the day files older than the retention; returns their paths."""
        oldest = self._today() - timedelta(days=self.retention_days - 1)
        gone = []
        for day, path in self.days():
            if day < oldest:
                try:
                    os.remove(path)
                    gone.append(path)
                except FileNotFoundError:
                    pass
        return gone

    async def append(self, record: CaptureRecord) -> None:
        self.append_many_sync([record])

    async def append_many(self, records: list[CaptureRecord]) -> None:
        self.append_many_sync(records)

    def append_many_sync(self, records: Iterable[CaptureRecord]) -> None:
        today = self._today()
        if today != self._day:  # a new day began: its file, and the old days pruned
            os.makedirs(self.directory, exist_ok=True)
            self._day = today
            self.prune()
        self._check_key()
        path = os.path.join(self.directory, f"captures-{today.isoformat()}.jsonl")
        data = b"".join(format_record(r) + b"\n" for r in records)
        with open(path, "ab+") as f:
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":  # a torn line from a crash: keep it apart
                    data = b"\n" + data
            f.write(data)

    async def list(self, since: Any = None, limit: int = 100) -> list[CaptureRecord]:
        return self.read(since, limit)

    def read(self, since: Any = None, limit: int | None = 100) -> list[CaptureRecord]:
        """Records newest first, `captured_at` at or after `since`, at most `limit` (None:
        all)."""
        after = _since(since)
        if limit is not None:
            limit = _limit(limit)
        out: list[CaptureRecord] = []
        for day, path in reversed(self.days()):
            if after is not None and day.isoformat() < format_time(after)[:10]:
                break  # the day files are UTC days: none before the one `since` falls in
            records = self._read_file(path)
            for record in sorted(records, key=lambda r: r.captured_at, reverse=True):
                if not _captured_since(record, after):
                    continue
                out.append(record)
                if limit is not None and len(out) >= limit:
                    return out
        return out

    def _read_file(self, path: str) -> list[CaptureRecord]:
        try:
            with open(path, "rb") as f:
                lines = f.read().split(b"\n")
        except FileNotFoundError:
            return []
        out = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                out.append(parse_record(line))
            except (msgspec.DecodeError, msgspec.ValidationError):
                if (path, number) not in self.torn:
                    self.torn.append((path, number))
                    logger.warning("capture.torn_line file=%s line=%d", path, number)
        return out


def run_of(record: CaptureRecord, tenant: str) -> dict:
    """The recorded run a captured invocation becomes (docs/capture.md): its id
    `capture-<record id>`, the store's tenant, the keyed person digest as its person, the
    content the policy kept (omitted content is not recorded: null input and output, tool
    calls without arguments or results), and what capture knows in `metadata.capture`."""
    omitted = record.content == OMITTED
    steps: list[dict] = []
    if not omitted and record.input_text:
        steps.append({"type": "message", "role": "user", "content": record.input_text})
    for tool in record.tool_calls:
        step: dict[str, Any] = {"type": "tool_call", "tool_name": tool.name,
                                "failed": tool.failed}
        if not omitted:
            if isinstance(tool.arguments, (dict, list)):
                step["arguments"] = tool.arguments
            elif tool.arguments is not None:
                step["arguments"] = {"value": tool.arguments}
            if tool.error is not None:
                step["error"] = tool.error
            elif tool.result is not None:
                step["result"] = tool.result
        steps.append(step)
    if not omitted and record.output_text:
        steps.append({"type": "message", "role": "assistant", "content": record.output_text})
    status = "failure" if record.status == FAILED else \
        "partial" if record.tool_error else "success"
    outcome: dict[str, Any] = {"status": status}
    if record.error_type is not None:
        outcome["error_type"] = record.error_type
    return {"run_id": RUN_PREFIX + record.id, "tenant": tenant, "person": record.person,
            "started_at": record.captured_at,
            "input": None if omitted else record.input_text,
            "output": None if omitted else record.output_text,
            "steps": steps, "outcome": outcome,
            "metadata": {"capture": {
                "schema_version": record.schema_version, "record_id": record.id,
                "agent_name": record.agent_name, "invocation_id": record.invocation_id,
                "reasons": list(record.reasons), "status": record.status,
                "error_type": record.error_type, "content": record.content,
                "failed_tools": sorted({t.name for t in record.tool_calls if t.failed})}}}


def record_of(run) -> CaptureRecord | None:
    """The capture record a captured run was made from (None for a run capture did not make)."""
    meta = (run.metadata or {}).get("capture") if isinstance(run.metadata, dict) else None
    if not isinstance(meta, dict) or not str(run.run_id).startswith(RUN_PREFIX):
        return None
    tools = tuple(RecordedTool(name=s["tool_name"], failed=bool(s.get("failed")),
                               arguments=s.get("arguments"), result=s.get("result"),
                               error=s.get("error"))
                  for s in run.steps if s.get("type") == "tool_call")
    return CaptureRecord(
        schema_version=meta.get("schema_version", 1), id=meta["record_id"],
        captured_at=run.started_at, agent_name=meta["agent_name"],
        invocation_id=meta["invocation_id"], reasons=tuple(meta["reasons"]),
        status=meta["status"], error_type=meta.get("error_type"),
        input_text=run.input or "", output_text=run.output or "",
        tool_calls=tools, content=meta["content"], person=run.person)


def import_captures(repo, directory: Any, tenant: str, author: str | None = None,
                    allow_erased_persons: Iterable[str] = ()):
    """Import every record of a LocalCaptureStore directory as runs of `tenant` (all or
    nothing, as an import is; a record imported before is unchanged). Returns the import's
    result and the torn lines skipped, as (file, line number)."""
    encoding.check_text(tenant, "tenant")
    if not tenant:
        raise InvalidArgument("captured records name no tenant: give the one their runs get "
                              "(--tenant)", reason="TENANT_REQUIRED")
    path = os.fspath(directory)
    if not os.path.isdir(path):
        raise InvalidArgument(f"{path} is not a directory of captures (a LocalCaptureStore's "
                              "captures-YYYY-MM-DD.jsonl files)", reason="NOT_A_DIRECTORY")
    local = LocalCaptureStore(path)
    records = sorted(local.read(limit=None), key=lambda r: (r.captured_at, r.id))
    found = read_key_check(path)
    if found is not None and found != key_check(repo):
        raise FailedPrecondition(
            f"the captures in {path} name their users by another repository's keyed digest: "
            "imported here, no erasure could find them (import them into the repository "
            "their store was opened with)", reason="CAPTURE_KEY_MISMATCH")
    result = repo.import_runs([run_of(r, tenant) for r in records], author=author,
                              allow_erased_persons=allow_erased_persons)
    if found is None and records:
        result.warnings.append(UNKEYED_WARNING.format(path=path))
    return result, list(local.torn)


def read_key_check(directory: str) -> str | None:
    """The key check value of a capture directory's KEY_FILE, None when it has none."""
    try:
        with open(os.path.join(directory, KEY_FILE), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    try:
        value = encoding.parse_json(data)
        check = value["key_check"]
        if value.get("format") == 1 and isinstance(check, str):
            return check
    except (InvalidArgument, KeyError, TypeError, AttributeError):
        pass
    raise FailedPrecondition(f"{os.path.join(directory, KEY_FILE)} is not a capture key file",
                             reason="CAPTURE_KEY_FILE_INVALID")


class RepositoryCaptureStore:
    """Captures appended to a cas repository (local or S3) as recorded runs of `tenant`,
    ready for `cas review queue`. A run names its user by the repository's keyed person
    digest, never the user id, so `cas erase --person USER` still finds it. With `evalset`
    (opt-in: it stores session-derived data) every captured failure also becomes a failure
    scenario of that eval set (docs/evalset.md)."""

    def __init__(self, repo, tenant: str, *, evalset: str | None = None,
                 author: str = "cas capture") -> None:
        encoding.check_text(tenant, "tenant")
        if not tenant:
            raise InvalidArgument("a repository capture store names the tenant its runs get")
        # Its own Repository over the same storage: the worker thread writes through it while
        # the application may use `repo` in others, and a Repository's caches are not shared
        # across threads.
        self.repo = type(repo)(repo.backend, repo.clock, repo.time)
        self.tenant, self.evalset, self.author = tenant, evalset, author
        self.erased_skipped = 0  # records of erased persons left out

    def person_key(self, user_id: str) -> str | None:
        return self.repo.store.person_digest(user_id)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def append(self, record: CaptureRecord) -> None:
        await self.append_many([record])

    async def append_many(self, records: list[CaptureRecord]) -> None:
        """Import the records as runs. Those of a person an erasure deleted are left out (an
        erasure stays erased: cas imports a person's data again only when someone admits
        them deliberately, docs/concepts.md), counted in `erased_skipped` and logged."""
        for attempt in range(2):
            erased = erased_persons(self.repo.context)
            kept = [r for r in records if r.person is None or r.person not in erased]
            try:
                if kept:
                    self.repo.import_runs([run_of(r, self.tenant) for r in kept],
                                          author=self.author)
                break
            except FailedPrecondition as exc:  # erased meanwhile: leave them out too
                if exc.reason != "PERSON_ERASED_BEFORE" or attempt:
                    raise
        if len(kept) < len(records):
            self.erased_skipped += len(records) - len(kept)
            logger.info("capture.skipped reason=person_erased count=%d",
                        len(records) - len(kept))
        if self.evalset is not None:
            # Imported here: an agent that captures never loads the eval sets (and they import
            # capture's records).
            from cas.evals.evalset.scenarios import open as open_evalset
            corpus = open_evalset(self.repo, self.evalset)
            for record in kept:
                if record.failed or record.tool_error:
                    corpus.capture_failure(record, author=self.author)

    async def list(self, since: Any = None, limit: int = 100) -> list[CaptureRecord]:
        after, limit = _since(since), _limit(limit)
        found = []
        for run_id in self.repo.runs():
            if not run_id.startswith(RUN_PREFIX):
                continue
            try:
                record = record_of(self.repo.run(run_id))
            except NotFound:  # erased since this store's repository listed the runs
                continue
            if record is not None and _captured_since(record, after):
                found.append(record)
        found.sort(key=lambda r: (r.captured_at, r.id), reverse=True)
        return found[:limit]
