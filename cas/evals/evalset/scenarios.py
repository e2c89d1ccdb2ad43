"""The eval set: the scenarios worth re-running (failures to fix, wins to protect) kept as a
dataset tagged `evalset`; captured, deduplicated, evicted at capacity (docs/evalset.md)."""

from __future__ import annotations

from typing import Any, Iterable

import msgspec

from cas.digest import parse_digest
from cas.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, VersionConflict
from cas.evals.capture.records import REDACTED, CaptureRecord
from cas.format import encoding
from cas.format.cases import encode_case
from cas.format.records import Case
from cas.format.redaction import scrub_text
from cas.format.version_names import Pin, check_dataset_name
from cas.repo import checks
from cas.repo.scores import check_value

TAG = "evalset"                       # the dataset tag that makes a dataset an eval set
FAILURE, WIN = KINDS = ("failure", "win")
DEFAULT_CAPACITY = 200
DEFAULT_TENANT = "evalset"
WRITE_ATTEMPTS = 5                    # commits retried on a VersionConflict before giving up
MAX_LABEL = 256                       # characters of a signature label
MAX_IDENTITY = 512                    # characters of a session id, tenant or person
OUTCOME_METRIC = "regression"         # the score a regression run records each outcome as (so no
#                                       baseline may name it)


# -- records ----------------------------------------------------------------------------------
class Scenario(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One scenario of an eval set: a case of its dataset, `id` being the case id."""

    id: str
    kind: str                                  # failure (to fix) or win (to protect)
    signature: tuple[str, ...]                 # condition labels, sorted, unique
    baseline_scores: dict[str, Any]            # metric -> number or bool at capture time
    replay_input: Any = None                   # None: not replayable (still a label)
    notes: str = ""                            # scrubbed (cas.redaction.scrub_text)
    session_id: str
    captured_at: str                           # ISO 8601 UTC, the repository's clock


class Corpus(msgspec.Struct, frozen=True, kw_only=True):
    """The scenarios of one read of an eval set's head, oldest first, and the version read
    (None while the eval set has no version)."""

    evalset: str
    version: int | None
    scenarios: tuple[Scenario, ...]

    def of_kind(self, kind: str | None = None) -> list[Scenario]:
        """Every scenario (or those of `kind`), oldest first."""
        if kind is not None:
            _check_kind(kind)
        return [s for s in self.scenarios if kind is None or s.kind == kind]

    def matching(self, labels: Iterable[str]) -> list[Scenario]:
        """The failures whose signature holds every label of `labels`, newest first."""
        wanted = set(_check_labels(labels, "labels", empty=False))
        return [s for s in reversed(self.scenarios)
                if s.kind == FAILURE and wanted.issubset(s.signature)]

    def get(self, case_id: str) -> Scenario:
        checks.digest_text(case_id, "case id")
        case_id = parse_digest(case_id, "case id")
        for s in self.scenarios:
            if s.id == case_id:
                return s
        what = f"eval set {self.evalset!r} is empty" if self.version is None else \
            f"eval set {self.evalset}@{self.version} has no scenario {case_id}"
        raise NotFound(what,
                       reason="SCENARIO_NOT_FOUND", evalset=self.evalset,
                       version=self.version, case_id=case_id)


class CaptureReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a capture did: the scenario (new or the one already held), the head afterwards,
    whether it sealed a version, and the failures it evicted to make room."""

    scenario: Scenario
    version: int | None
    sealed: bool
    evicted: tuple[str, ...] = ()


# -- argument checks --------------------------------------------------------------------------
def _check_kind(kind: Any) -> str:
    if kind not in KINDS or not isinstance(kind, str):
        raise InvalidArgument(f"kind {encoding.describe(kind)} is not a scenario kind; "
                              f"accepted: {', '.join(KINDS)}", reason="INVALID_KIND",
                              field="kind", accepted=list(KINDS))
    return kind


def _check_identity(value: Any, what: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    problem = encoding.text_problem(value, MAX_IDENTITY) if isinstance(value, str) else \
        f"is {encoding.describe(value)}, not a string"
    if problem is not None:
        raise InvalidArgument(f"{what} must be 1-{MAX_IDENTITY} printable characters"
                              f"{' or None' if optional else ''}; it {problem}", field=what)
    return value


def _check_labels(labels: Any, what: str, empty: bool = True) -> list[str]:
    """A list of labels (each 1-256 printable characters), sorted and unique."""
    if isinstance(labels, (str, bytes, dict)) or not isinstance(labels, Iterable):
        raise InvalidArgument(f"{what} must be a list of non-empty strings (labels), not "
                              f"{encoding.describe(labels)}", field=what)
    out = list(labels)
    for label in out:
        problem = encoding.text_problem(label, MAX_LABEL) if isinstance(label, str) else \
            f"is {encoding.describe(label)}, not a string"
        if problem is not None:
            raise InvalidArgument(f"{what}: each label is 1-{MAX_LABEL} printable characters; "
                                  f"{encoding.describe(label)} {problem}", field=what)
    if not out and not empty:
        raise InvalidArgument(f"{what} must name at least one label", field=what)
    return sorted(set(out))


def _check_baseline(baseline: Any) -> dict[str, Any]:
    if not isinstance(baseline, dict):
        raise InvalidArgument(f"baseline_scores must be a dict of metric -> number or bool, "
                              f"not {encoding.describe(baseline)}", field="baseline_scores")
    out = {}
    for metric, value in baseline.items():
        try:
            checks.label(metric, "baseline metric name")
        except InvalidArgument as exc:
            raise InvalidArgument(f"baseline_scores: {exc.message}", field="baseline_scores",
                                  metric=encoding.describe(metric)) from None
        if metric == OUTCOME_METRIC:
            raise InvalidArgument(f"baseline_scores: the metric {OUTCOME_METRIC!r} is the one "
                                  "a regression run records each outcome as; name it "
                                  "otherwise", field="baseline_scores", metric=metric)
        if isinstance(value, str):
            raise InvalidArgument(f"baseline_scores[{metric!r}] is the label {value!r}; a "
                                  "baseline is a number or a bool (a label cannot be compared)",
                                  field="baseline_scores", metric=metric)
        try:
            out[metric] = check_value(value)
        except InvalidArgument as exc:
            raise InvalidArgument(f"baseline_scores[{metric!r}]: {exc.message}",
                                  field="baseline_scores", metric=metric) from None
    return out


def _check_replay_input(value: Any) -> Any:
    encoding.check_json(value, "replay_input")
    return value


def _check_capacity(capacity: Any) -> int:
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
        raise InvalidArgument(f"capacity must be an int >= 1 (the most scenarios an eval set "
                              f"keeps), not {encoding.describe(capacity)}", field="capacity")
    return capacity


# -- the eval set -------------------------------------------------------------------------------
def open(repo, name: str, capacity: int = DEFAULT_CAPACITY, tenant: str = DEFAULT_TENANT,
         create: bool = True) -> "EvalSet":  # noqa: A001 - the API name is cas.evalset.open
    """The eval set `name` of `repo`: a dataset tagged `evalset` (created, direct admission,
    when missing and `create`). A dataset of that name without the tag is refused
    (FAILED_PRECONDITION, NOT_AN_EVAL_SET): it is not ours to write."""
    check_dataset_name(name)
    _check_capacity(capacity)
    _check_identity(tenant, "tenant")
    if not isinstance(create, bool):
        raise InvalidArgument(f"create must be a bool, not {encoding.describe(create)}",
                              field="create")
    try:
        record = repo.dataset(name)
    except NotFound as exc:
        if not create or exc.reason == "DATASET_DELETED":
            raise
        try:
            record = repo.create_dataset(
                name, description="eval set: scenarios worth re-running (cas.evalset)",
                tags=[TAG], admission="direct")
        except AlreadyExists as again:  # created meanwhile by another writer: whose is it?
            if again.reason == "DATASET_DELETED":
                raise
            record = repo.dataset(name)
    check_evalset(record)
    return EvalSet(repo, name, capacity, tenant)


def check_evalset(record) -> None:
    """Refuse a dataset that is not an eval set: without the `evalset` tag, or not admitting
    direct commits (every capture is one)."""
    if TAG not in record.tags:
        raise FailedPrecondition(
            f"dataset {record.name!r} is not an eval set (it has no {TAG!r} tag); an eval set "
            "is a dataset cas.evalset created, and writing scenarios into another would mix "
            "them with its cases", reason="NOT_AN_EVAL_SET", dataset=record.name)
    if record.admits != "direct":
        raise FailedPrecondition(
            f"dataset {record.name!r} is tagged {TAG!r} but admits only reviewed runs: an "
            "eval set takes direct commits (create it with admission='direct')",
            reason="NOT_AN_EVAL_SET", dataset=record.name, admission=record.admits)


class EvalSet:
    """An eval set of a repository. Every read reads the head anew, and every change seals a
    version built on the head it read (retried on a VersionConflict, re-checking dedup and
    capacity). Nothing captures into an eval set unless a caller asks: it stores data derived
    from sessions."""

    def __init__(self, repo, name: str, capacity: int = DEFAULT_CAPACITY,
                 tenant: str = DEFAULT_TENANT) -> None:
        self.repo, self.name = repo, check_dataset_name(name)
        self.capacity, self.tenant = _check_capacity(capacity), _check_identity(tenant, "tenant")

    def __repr__(self) -> str:
        return f"EvalSet({self.name!r}, capacity={self.capacity})"

    # -- reads -------------------------------------------------------------------------------
    @property
    def version(self) -> int | None:
        """The head version, or None while the eval set has none."""
        return self.repo.head(self.name) or None

    @property
    def pin(self) -> Pin | None:
        """The pin of the head (None while there is no version); refused if it is retired."""
        version = self.version
        return None if version is None else self.repo.pin(self.name, version)

    def read(self) -> Corpus:
        """The scenarios of the head, oldest first (by captured_at, then id). A retired head is
        refused as every read of a retired version is (an erasure's: `renew`, or the next
        capture, seals a version of what is left)."""
        return read_version(self.repo, self.name, self.version)

    def cases(self, kind: str | None = None) -> list[Scenario]:
        if kind is not None:
            _check_kind(kind)
        return self.read().of_kind(kind)

    def matching(self, labels: Iterable[str]) -> list[Scenario]:
        """The failures whose signature holds every label asked for, newest first."""
        labels = _check_labels(labels, "labels", empty=False)  # once: it may be a generator
        return self.read().matching(labels)

    def scenario(self, case_id: str) -> Scenario:
        return self.read().get(case_id)

    # -- changes -----------------------------------------------------------------------------
    def capture(self, session_id: str, kind: str, signature: Iterable[str],
                baseline_scores: dict[str, Any], replay_input: Any = None, notes: str = "",
                author: str | None = None, person: str | None = None) -> Scenario:
        """Capture a scenario (see `capture_report`); the scenario, new or already held."""
        return self.capture_report(session_id, kind, signature, baseline_scores,
                                   replay_input, notes, author, person).scenario

    def capture_report(self, session_id: str, kind: str, signature: Iterable[str],
                       baseline_scores: dict[str, Any], replay_input: Any = None,
                       notes: str = "", author: str | None = None,
                       person: str | None = None) -> CaptureReport:
        """Capture a scenario: sealed as a version that adds it (and, at capacity, removes the
        oldest failures in the same commit). One already held for the same (session,
        signature, kind) is returned as it is and nothing is sealed. At capacity with no
        failure to evict, refused (FAILED_PRECONDITION, EVAL_SET_FULL_OF_WINS): a win is never
        dropped to make room."""
        _check_identity(session_id, "session_id")
        _check_kind(kind)
        signature = _check_labels(signature, "signature")
        baseline = _check_baseline(baseline_scores)
        _check_replay_input(replay_input)
        notes = scrub_text(encoding.check_text(notes, "notes"))
        _check_identity(person, "person", optional=True)
        author = checks.author(author)
        key = (session_id, tuple(signature), kind)
        for attempt in range(WRITE_ATTEMPTS):
            corpus = self._writable(author)
            for s in corpus.scenarios:
                if (s.session_id, s.signature, s.kind) == key:
                    return CaptureReport(scenario=s, version=corpus.version, sealed=False)
            evicted = self._evictions(corpus)
            case = {"input": replay_input, "tenant": self.tenant, "person": person,
                    "metadata": {TAG: {"kind": kind, "signature": signature,
                                       "baseline_scores": baseline, "notes": notes,
                                       "session_id": session_id,
                                       "captured_at": self.repo.clock()}}}
            message = f"capture {kind} of session {session_id}" + \
                (f", evicting {len(evicted)} oldest failure(s)" if evicted else "")
            try:
                # base 0, not None, for a first version: a writer that sealed version 1
                # meanwhile is then a VersionConflict to retry, not a refusal
                record = self.repo.commit(self.name, base=corpus.version or 0, add=[case],
                                          remove=evicted, message=message, author=author)
            except VersionConflict:
                if attempt == WRITE_ATTEMPTS - 1:
                    raise
                continue  # another writer sealed first: re-read, re-check dedup and capacity
            scenario = scenario_of(encode_case(case).case_id, msgspec.convert(case, Case))
            return CaptureReport(scenario=scenario, version=record.number, sealed=True,
                                 evicted=tuple(evicted))
        raise AssertionError("unreachable")

    def capture_failure(self, record: CaptureRecord, signature: Iterable[str] | None = None,
                        baseline_scores: dict[str, Any] | None = None,
                        author: str | None = None) -> Scenario:
        """A failure from a capture record (cas.capture_records.CaptureRecord): session
        `capture-<record id>`, the signature of what went wrong, baseline {"success": 0.0},
        replayable only when the record kept (redacted) input text, the record's person."""
        return self.capture(**failure_fields(record, signature, baseline_scores),
                            author=author)

    def attach_input(self, case_id: str, replay_input: Any,
                     author: str | None = None) -> Scenario:
        """Seal a version in which the scenario `case_id` carries `replay_input`: its case is
        removed and the new one added (so its id changes); the new scenario. The same input
        again seals nothing."""
        checks.digest_text(case_id, "case id")
        case_id = parse_digest(case_id, "case id")
        _check_replay_input(replay_input)
        if replay_input is None:
            raise InvalidArgument("replay_input must be a JSON value other than null (null "
                                  "means not replayable)", field="replay_input")
        author = checks.author(author)
        for attempt in range(WRITE_ATTEMPTS):
            corpus = self._writable(author)
            old = corpus.get(case_id)
            if encoding.encode(old.replay_input) == encoding.encode(replay_input):
                return old
            case = msgspec.structs.replace(self.repo.case(self.name, corpus.version, old.id),
                                           input=replay_input)
            try:
                self.repo.commit(self.name, base=corpus.version, add=[case], remove=[old.id],
                                 message=f"attach the replay input of {old.id}",
                                 author=author)
            except VersionConflict:
                if attempt == WRITE_ATTEMPTS - 1:
                    raise
                continue
            return scenario_of(encode_case(case).case_id, case)
        raise AssertionError("unreachable")

    def renew(self, author: str | None = None) -> int | None:
        """After an erasure retired the head (it held a scenario of the erased person), seal a
        version of the scenarios left, so that the eval set can be read again; the new
        version, or None when the head is not retired. Captures do this themselves."""
        author = checks.author(author)
        for attempt in range(WRITE_ATTEMPTS):
            head = self.version
            if head is None or self.repo.version_state(self.name, head) == "ACTIVE":
                return None
            try:
                return self._renew(head, author)
            except VersionConflict:
                if attempt == WRITE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    # -- internals ---------------------------------------------------------------------------
    def _renew(self, head: int, author: str) -> int:
        # The renewal of any dataset (cas.repo.renewal): an operator's retirement is refused
        # (the operator's to resolve with a commit of the scenarios to keep)
        return self.repo.renew(self.name, author=author).number

    def _writable(self, author: str) -> Corpus:
        """The head to build a change on: renewed first if an erasure retired it."""
        head = self.version
        if head is not None and self.repo.version_state(self.name, head) != "ACTIVE":
            try:
                self._renew(head, author)
            except VersionConflict:
                pass  # another writer renewed it (or sealed on it): read whatever is head
        return self.read()

    def _evictions(self, corpus: Corpus) -> list[str]:
        """The oldest failures to remove so that one more scenario fits; refused when the
        failures are not enough (wins are never evicted automatically)."""
        excess = len(corpus.scenarios) + 1 - self.capacity
        if excess <= 0:
            return []
        failures = [s.id for s in corpus.scenarios if s.kind == FAILURE]
        if len(failures) < excess:
            wins = len(corpus.scenarios) - len(failures)
            raise FailedPrecondition(
                f"eval set {self.name!r} is full: {len(corpus.scenarios)} scenarios (capacity "
                f"{self.capacity}), {wins} of them wins, which are never evicted automatically; "
                "nothing was captured. Remove wins no longer worth protecting (cas commit "
                f"{self.name} --base {corpus.version} --remove CASE_ID), or open the eval set "
                "with a larger capacity", reason="EVAL_SET_FULL_OF_WINS", evalset=self.name,
                version=corpus.version, capacity=self.capacity, wins=wins,
                failures=len(failures))
        return sorted(failures[:excess])


def failure_fields(record: Any, signature: Iterable[str] | None = None,
                   baseline_scores: dict[str, Any] | None = None) -> dict[str, Any]:
    """The capture arguments of a failure made from a capture record (what `capture_failure`
    captures): a record never holds the session id, so the session is the captured run's."""
    if not isinstance(record, CaptureRecord):
        raise InvalidArgument(f"record must be a cas.capture_records.CaptureRecord, not "
                              f"{encoding.describe(record)}", field="record")
    if signature is None:
        signature = (["failed"] if record.failed else []) + \
            ([f"error_type:{record.error_type}"] if record.error_type else []) + \
            [f"tool_failed:{t.name}" for t in record.tool_calls if t.failed]
    if baseline_scores is None:
        baseline_scores = {"success": 0.0}
    # Omitted content is not replayable: its input text is an empty string, never the input.
    replayable = record.content == REDACTED and bool(record.input_text)
    failed_tools = sorted({t.name for t in record.tool_calls if t.failed})
    notes = f"agent {record.agent_name}: {record.status}" + \
        (f" ({record.error_type})" if record.error_type else "") + \
        (f"; failed tools: {', '.join(failed_tools)}" if failed_tools else "")
    return {"session_id": f"capture-{record.id}", "kind": FAILURE, "signature": signature,
            "baseline_scores": baseline_scores,
            "replay_input": {"input_text": record.input_text} if replayable else None,
            "notes": notes, "person": record.person}


def scenario_of(case_id: str, case: Case) -> Scenario:
    """The scenario a case of an eval set holds; refused (FAILED_PRECONDITION,
    NOT_A_SCENARIO) for a case that holds none (committed by hand)."""
    meta = case.metadata.get(TAG) if isinstance(case.metadata, dict) else None
    try:
        if not isinstance(meta, dict):
            raise msgspec.ValidationError(f"metadata.{TAG} is missing")
        return msgspec.convert({"id": case_id, "replay_input": case.input,
                                **{k: meta.get(k) for k in (
                                    "kind", "signature", "baseline_scores", "notes",
                                    "session_id", "captured_at") if k in meta}}, Scenario)
    except msgspec.ValidationError as exc:
        raise FailedPrecondition(f"case {case_id} holds no scenario ({exc}): an eval set's "
                                 "cases are captured by cas.evalset", reason="NOT_A_SCENARIO",
                                 case_id=case_id) from None


def read_version(repo, name: str, version: int | None) -> Corpus:
    """The scenarios of `name@version` (none for None), oldest first: a page of ids at a time,
    each page's cases read together."""
    scenarios: list[Scenario] = []
    after = None
    while version is not None:
        page = repo.items(name, version, after=after, limit=checks.MAX_PAGE)
        if page.items:
            for case_id, (_, data) in zip(page.items, repo.objects_bytes(page.items)):
                scenarios.append(scenario_of(case_id, encoding.decode(data, Case, "a case")))
        if not page.has_more:
            break
        after = page.next_cursor
    scenarios.sort(key=lambda s: (s.captured_at, s.id))
    return Corpus(evalset=name, version=version, scenarios=tuple(scenarios))
