"""Stored records: frozen msgspec Structs with explicit tags, and the record-file envelope."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from cas.digest import cassette_request_digest, digest_of, register_kind
from cas.errors import CorruptData, DigestMismatch, UnsupportedFormat
from cas.format import encoding

FORMAT = 1  # the only record format this cas reads and writes


class _Record(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind",
              kw_only=True):
    """Every stored record: its msgspec tag is its kind (the digest domain and the `kind`
    member). A subclass is registered as a kind by being defined (see TYPES below)."""

    format: int = FORMAT
    # The one-byte code of the kind inside pack files, for the kinds ever written into packs
    # (docs/format.md section 7); None for records that live in record files.
    PACK_CODE: ClassVar[int | None] = None


class Case(_Record, tag="case", kw_only=True):
    """The frozen content of one evaluation case; its id is the digest of its canonical bytes."""

    PACK_CODE: ClassVar[int | None] = 1

    run_id: str | None = None
    started_at: str | None = None
    input: Any = None
    output: Any = None
    steps: list[dict[str, Any]] = []
    outcome: Any = None
    metadata: dict[str, Any] = {}
    tenant: str | None = None
    person: str | None = None
    withheld: list[str] = []


class TreeLeaf(_Record, tag="tree.leaf", kw_only=True):
    """A set of at most LEAF_MAX case ids sharing the leaf's prefix, sorted."""

    PACK_CODE: ClassVar[int | None] = 2

    ids: list[str]


class TreeChild(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    nibble: int
    node: str
    count: int


class TreeNode(_Record, tag="tree.node", kw_only=True):
    """An inner trie node: one child per non-empty next hex digit, with subtree counts."""

    PACK_CODE: ClassVar[int | None] = 3

    count: int
    children: list[TreeChild]


class VersionRecord(_Record, tag="version", kw_only=True):
    dataset: str
    number: int
    parent: int | None
    content_digest: str
    item_count: int
    operation: str
    added: int
    removed: int
    author: str
    sealed_at: str
    message: str = ""
    proposal: str | None = None     # the confirm token of the proposal it sealed
    provenance: str | None = None   # digest of its Provenance object (promotions)


ADMISSION_RULES = ("reviewed", "direct")


class DatasetRecord(_Record, tag="dataset", kw_only=True):
    """One revision of a dataset's editable metadata; revision 1 creates the dataset."""

    name: str
    revision: int
    description: str = ""
    tags: list[str] = []
    author: str
    edited_at: str
    # How cases enter (fixed at creation, carried by every revision): "reviewed" (only
    # promotion adds cases) or "direct" (commits may add them too). Absent in the records of
    # datasets created before the rule existed (UNSET keeps their bytes canonical): those
    # read as "direct", the rule they were created under.
    admission: str | msgspec.UnsetType = msgspec.UNSET
    # The versions an operator retired, as of this revision (ascending; carried by every later
    # revision, as retirement is for ever): the witness that makes the loss of one
    # `version.retirement` record detectable (fsck). Absent (UNSET) until the first one.
    retired: list[int] | msgspec.UnsetType = msgspec.UNSET

    @property
    def admits(self) -> str:
        """The admission rule in force: "reviewed" or "direct"."""
        return "direct" if self.admission is msgspec.UNSET else self.admission


class RepoConfig(_Record, tag="config", kw_only=True):
    repository_id: str
    created_at: str


# -- recorded runs, reviews and promotion (docs/runs.md, docs/format.md) --------------------
class RunRecord(_Record, tag="run", kw_only=True):
    """A recorded agent run, as imported (stored in packs, found by run id via imports)."""

    PACK_CODE: ClassVar[int | None] = 7

    run_id: str
    tenant: str
    person: str | None = None
    started_at: str | None = None
    input: Any = None
    output: Any = None
    steps: list[dict[str, Any]]
    outcome: Any = None
    metadata: dict[str, Any] = {}
    extra: dict[str, Any] = {}  # further top-level fields of the imported line, kept as given


class RunEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    run_id: str
    run: str  # digest of the RunRecord object


class RunImport(_Record, tag="run.import", kw_only=True):
    """One all-or-nothing import: the runs it added, sorted by run id."""

    number: int
    runs: list[RunEntry]
    author: str
    imported_at: str


class RunAdmission(_Record, tag="run.admission", kw_only=True):
    """The erased persons an import admits again, deliberately (a new consent): written as
    `runs/admissions/<n>` before the import record `runs/imports/<n>` it speaks for."""

    number: int
    persons: list[str]  # keyed person digests, sorted
    author: str
    admitted_at: str


class Review(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    annotation_id: str
    run_id: str
    run: str  # digest of the reviewed RunRecord object
    metric: str
    label: str
    reviewer: str
    reviewed_at: str
    # The reviewer's reason (scrubbed, at most COMMENT_LIMIT characters) and the output the
    # reviewer says was right (any JSON). Absent (UNSET) when not given, so that the reviews
    # saved before they existed keep their bytes.
    comment: str | msgspec.UnsetType = msgspec.UNSET
    correction: Any = msgspec.UNSET


COMMENT_LIMIT = 4096  # characters of a judgment's comment


class ReviewBatch(_Record, tag="review.batch", kw_only=True):
    number: int
    reviews: list[Review]
    confirm_token: str | None = None  # the preview it confirmed: a retry saves nothing new


class Settings(_Record, tag="settings", kw_only=True):
    """One revision of the content policy: the repository default (no `dataset`) or one
    dataset's override. Without any, every content class is copied."""

    revision: int
    # content classes a promotion must not copy into a case; None (an override only): the
    # dataset follows the repository default again
    withheld: list[str] | None = []
    author: str
    edited_at: str
    # the dataset the revision overrides the default for; absent (UNSET, so that revisions
    # written before overrides existed keep their bytes) in a revision of the default
    dataset: str | msgspec.UnsetType = msgspec.UNSET


class Eligibility(_Record, tag="eligibility", kw_only=True):
    """One revision of the rule a judgment must meet for promotion (`eligibility/<revision>`):
    on `metric`, with one of the `accepted` labels. Without any, the defaults of
    cas/repo/settings.py hold."""

    revision: int
    metric: str
    accepted: list[str]  # sorted
    author: str
    edited_at: str
    # How many different reviewers' newest judgments must accept a run, and the rule over
    # them ("unanimous": none rejects it; "majority": accepting ones outnumber the others).
    # Absent (UNSET: one reviewer, unanimous) in revisions written before they existed.
    reviewers: int | msgspec.UnsetType = msgspec.UNSET
    rule: str | msgspec.UnsetType = msgspec.UNSET

    @property
    def quorum(self) -> int:
        return 1 if self.reviewers is msgspec.UNSET else self.reviewers

    @property
    def agreement_rule(self) -> str:
        return "unanimous" if self.rule is msgspec.UNSET else self.rule


ELIGIBILITY_RULES = ("unanimous", "majority")


class MetricSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One declared metric: its labels in declared order (the order a reviewer picks them)."""

    name: str
    labels: list[str]
    description: str = ""


class Metrics(_Record, tag="metrics", kw_only=True):
    """One revision of the declared metrics (`metrics/<revision>`): every declared metric, by
    name, and whether a judgment on an undeclared metric is refused (`declared_only`)."""

    revision: int
    metrics: list[MetricSpec]  # sorted by name, each name once
    declared_only: bool = False
    author: str
    edited_at: str


class ProvenanceEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """How one case entered its version: promoted (the run and the review that admitted it)
    or committed directly to a `direct` dataset (`committed_by`: its author, and no run or
    review). The fields one kind does not have are absent (UNSET), never null, so that the
    entries written before direct commits were recorded keep their canonical bytes."""

    case_id: str
    run_id: str | msgspec.UnsetType = msgspec.UNSET
    annotation_id: str | msgspec.UnsetType = msgspec.UNSET
    reviewer: str | msgspec.UnsetType = msgspec.UNSET
    reviewed_at: str | msgspec.UnsetType = msgspec.UNSET
    withheld: list[str] = []
    committed_by: str | msgspec.UnsetType = msgspec.UNSET
    # Under an eligibility rule of several reviewers: every admitting judgment's annotation id
    # (sorted; `annotation_id` is the newest of them). Absent (UNSET) with one reviewer.
    admitted_by: list[str] | msgspec.UnsetType = msgspec.UNSET

    @property
    def promoted(self) -> bool:
        return self.annotation_id is not msgspec.UNSET


class Provenance(_Record, tag="provenance", kw_only=True):
    """Per case a version added: the review that allowed it, or its author (referenced by
    the version record). A dataset's first version, committed directly, has no entries and
    `committed_by` instead: every case of it was committed by that author (one small record
    for a commit of a million cases, listed from the version's tree when read)."""

    PACK_CODE: ClassVar[int | None] = 8

    entries: list[ProvenanceEntry]
    committed_by: str | msgspec.UnsetType = msgspec.UNSET


class ProvenanceRun(msgspec.Struct, frozen=True):
    """Of a provenance entry, what a listing asks: its case and its run (UNSET for a
    committed case)."""

    case_id: str
    run_id: str | msgspec.UnsetType = msgspec.UNSET


class ProvenanceRuns(msgspec.Struct, frozen=True):
    """A `provenance` object read for its run ids alone: a view, never written (untagged, so
    not a kind: its reader checks the kind the pack names). The decoder skips the other
    fields instead of building them (a 10k-case promotion's provenance is 2.7 MB: 7.5 ms to
    decode this way, 16 ms whole). Its bytes are verified against their digest as any
    object's; checking every field is fsck's, which decodes it whole."""

    entries: list[ProvenanceRun]
    format: int = FORMAT


class Proposal(_Record, tag="proposal", kw_only=True):
    """A staged promotion or removal; sealing it creates version `base + 1`."""

    dataset: str
    operation: str          # "promote" or "remove"
    base: int
    idempotency_key: str
    request: str            # digest of the normalised request
    add: list[str] = []     # case ids new to the base
    carried: int = 0        # how many base ids stay
    remove: list[str] = []
    provenance: str | None = None
    proposed_root: str
    proposed_count: int
    author: str
    created_at: str


class IdempotencyRecord(_Record, tag="idempotency", kw_only=True):
    dataset: str
    key: str
    request: str
    token: str


# -- cassettes (cas/cassettes.py, docs/suites.md, docs/format.md 4.10) -----------------------
class CassetteExchange(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One recorded request and what answered it: a `response`, or the `error` raised
    ({"type", "message"}); the side a call did not have is absent (UNSET)."""

    adapter: str     # "call" (cassette.wrap) or "http" (cassette.http)
    name: str        # the model or tool name (for "http": the method and URL)
    key: str         # the request digest (docs/format.md 3.1) of name and request
    request: Any     # the request as JSON: a call's arguments by parameter name
    response: Any = msgspec.UNSET
    error: Any = msgspec.UNSET


def request_key(adapter: str, name: str, request: Any) -> str:
    """`b3:` + 64 hex: BLAKE3 in the cassette-request domain of the canonical bytes of
    `[adapter, name, request]` (docs/format.md 3.1). The one definition: a recorder writes it
    and fsck recomputes it, so the two cannot drift apart."""
    return cassette_request_digest(encoding.encode([adapter, name, request]))


def exchange_key(exchange: CassetteExchange) -> str:
    """The request key `exchange` must carry (docs/format.md 4.10): an HTTP exchange's is over
    its method, URI and body alone (its headers are kept to read, never matched on)."""
    request = exchange.request
    if exchange.adapter == "http" and isinstance(request, dict):
        request = {k: request.get(k) for k in ("method", "uri", "body")}
    return request_key(exchange.adapter, exchange.name, request)


class CassetteRecord(_Record, tag="cassette", kw_only=True):
    """The exchanges of one case's run under one executor, in the order the run made them.
    It names the case's person, so that erasing the person finds and deletes it."""

    PACK_CODE: ClassVar[int | None] = 9

    dataset: str
    case_id: str
    executor: str
    person: str | None = None
    exchanges: list[CassetteExchange]


class CassetteEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    case_id: str
    executor: str
    cassette: str    # the digest of the CassetteRecord


class CassetteLog(_Record, tag="cassette.log", kw_only=True):
    """One batch of recorded cassettes of a dataset (`datasets/<name>/cassettes/<n>`): for each
    (case, executor) the newest entry of the log is the cassette in force."""

    dataset: str
    number: int
    entries: list[CassetteEntry]  # sorted by (case_id, executor), each pair at most once
    author: str
    recorded_at: str


# -- scores, experiments and deletion (cas/repo/citations.py, docs/format.md) --------------
class Score(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One result citing an exact version (`dataset@version` and its `content_digest`)."""

    dataset: str
    version: int
    content_digest: str
    metric: str
    # a finite number (NaN and the infinities have no canonical form), a boolean, or a short
    # label (at most 64 printable characters)
    value: bool | int | float | str
    item: str | None = None  # a case id of that version, or None for the whole version
    experiment: str | None = None  # the name of an experiment of that dataset
    author: str
    recorded_at: str


class ScoreBatch(_Record, tag="score.batch", kw_only=True):
    """Scores recorded together, claimed as `datasets/<name>/scores/<number>`."""

    dataset: str
    number: int
    scores: list[Score]
    # The digest of the `suite.result` object these scores were taken from (`cas suite run
    # --record`); absent (UNSET keeps older batches' bytes) when the batch cites none.
    result: str | msgspec.UnsetType = msgspec.UNSET


class SuiteRepetition(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One repetition of one case in a recorded suite result (timings are never recorded)."""

    id: str           # the case id
    position: int     # of the case in the suite, from 0
    repetition: int   # from 0
    seed: int         # the repetition's own seed
    run_id: str
    outcome: str      # COMPLETED, ERRORED or INCOMPLETE
    answer: Any       # a JSON value; null unless COMPLETED
    reason: str | None
    scores: dict[str, bool | int | float | str] | None


class SuiteResultRecord(_Record, tag="suite.result", kw_only=True):
    """A suite run's whole result over a pinned version, every repetition of every case:
    what `cas suite run --record` stores and its score batch cites (docs/format.md 4.6.6)."""

    PACK_CODE: ClassVar[int | None] = 10

    dataset: str
    version: int
    content_digest: str
    suite: str               # the suite's name (its version is the pin above)
    seed: int
    repeat: int
    shard: list[int] | None  # [index, count, cases] of a shard, else null
    digest: str              # the result digest (docs/suites.md) the results give
    results: list[SuiteRepetition]


class ScoreWithdrawal(_Record, tag="score.withdrawal", kw_only=True):
    """A score batch withdrawn (`datasets/<name>/withdrawn/<batch number>`): its scores no
    longer cite their version, and the batch itself stays as it was recorded."""

    dataset: str
    batch: int
    reason: str
    author: str
    withdrawn_at: str


class Experiment(_Record, tag="experiment", kw_only=True):
    """A named experiment over an exact version; names are unique per dataset."""

    dataset: str
    number: int
    name: str
    version: int
    content_digest: str
    author: str
    created_at: str


class VersionTombstone(_Record, tag="version.tombstone", kw_only=True):
    """A deleted version: its number stays used forever, and says what was deleted."""

    dataset: str
    number: int
    content_digest: str
    item_count: int
    author: str
    deleted_at: str


class DatasetTombstone(_Record, tag="dataset.tombstone", kw_only=True):
    """A deleted dataset: its name can never be created again."""

    dataset: str
    head: int  # the highest version number the dataset had used (deleted ones included)
    author: str
    deleted_at: str


class Fence(_Record, tag="fence", kw_only=True):
    """A number of a citation log (scores, experiments) claimed by a deletion, so that every
    citation is ordered before the deletion (and seen by it) or after it (and refused)."""

    dataset: str
    log: str       # "scores" or "experiments"
    number: int
    reason: str    # what the deletion deletes, e.g. "delete version 3"
    author: str
    written_at: str


# -- retirement, erasure and the person index (cas/repo/erasure.py, docs/format.md) -------------
class VersionRetirement(_Record, tag="version.retirement", kw_only=True):
    """A version that can no longer be honoured: written once, never removed."""

    dataset: str
    number: int
    cause: str                     # PERSON_ERASED, CONTAMINATED, INVALID_LABELS, OPERATOR_REQUEST
    retired_at: str
    note: str = ""
    author: str
    erasure: str | None = None  # the erasure that retired it (PERSON_ERASED)


class PersonObject(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    person: str   # keyed digest of the person id ("pk:<hex>"), never the id itself
    digest: str   # an object of that person in the pack


class PersonIndex(_Record, tag="person.index", kw_only=True):
    """The objects of one pack that belong to people whose keyed digest starts with the shard:
    written before the pack, so no person's bytes are ever stored unindexed."""

    pack: str
    entries: list[PersonObject]  # sorted


class PersonShards(_Record, tag="person.shards", kw_only=True):
    """Which person index files a pack has (none, for a pack holding no person's objects),
    written before them: an erasure can tell a lost file from a pack with no one in a shard."""

    pack: str
    shards: list[str]  # sorted, each two hex digits


class VersionRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    dataset: str
    number: int


class ErasurePlan(_Record, tag="erasure.plan", kw_only=True):
    """The journal of an erasure in progress: what it deletes. Completed by whoever finds it."""

    id: str
    person: str          # keyed digest
    cases: list[str]
    runs: list[str]      # digests of RunRecord objects
    reviews: list[str]   # annotation ids of the reviews of those runs
    author: str
    started_at: str


class Erasure(_Record, tag="erasure", kw_only=True):
    """What an erasure removed and retired: digests and counts only, no identity in plaintext."""

    id: str
    person: str
    cases: list[str]
    runs: list[str]
    reviews: list[str]           # annotation ids of the deleted reviews
    retired: list[VersionRef]    # every version that held one of the cases
    proposals_deleted: int
    objects_deleted: int
    packs_rewritten: int
    bytes_rewritten: int
    author: str
    started_at: str
    erased_at: str


class Lease(_Record, tag="lease", kw_only=True):
    """Who is writing, collecting or erasing right now (`leases/<role>.<id>`): gc and erasure
    wait for the writers that started before them, and writers keep clear of what they remove."""

    id: str
    role: str                   # writer, gc or erasure
    operation: str              # what the holder is doing: commit, promote, import, gc ...
    host: str
    pid: int
    started_at: str
    expires_at: str             # renewed while the holder works; past it, the lease is dead
    packs: list[str] = []       # gc: the packs it may rewrite or delete
    proposals: list[str] = []   # gc: the keys of the stale proposals it may delete
    erasure: str | None = None  # erasure: the id of its plan


# The objects: the records stored in packs, by digest (the kinds with a PACK_CODE).
Object = Case | TreeLeaf | TreeNode | RunRecord | Provenance | CassetteRecord | SuiteResultRecord


def _record_types() -> list[type]:
    """Every record Struct, in definition order: the subclasses of _Record, at any depth."""
    out, todo = [], list(_Record.__subclasses__())
    while todo:
        t = todo.pop(0)
        out.append(t)
        todo[:0] = t.__subclasses__()
    return out


def _build_registry() -> dict[str, type]:
    """The one registry of kinds, from the record types themselves: each type's msgspec tag is
    its kind. Refuses two types with one kind, and two kinds with one pack code."""
    types: dict[str, type] = {}
    codes: dict[int, str] = {}
    for t in _record_types():
        kind = t.__struct_config__.tag
        if kind in types:
            raise TypeError(f"kind {kind!r} is the tag of both {types[kind].__name__} and "
                            f"{t.__name__}")
        register_kind(kind)  # cas.digest checks the spelling and builds the kind's hasher
        types[kind] = t
        code = t.PACK_CODE
        if code is not None:
            if not (isinstance(code, int) and 1 <= code <= 255) or code in codes:
                raise TypeError(f"pack code {code!r} of {kind!r} is not a free byte 1-255")
            codes[code] = kind
    return types


TYPES: dict[str, type] = _build_registry()
KIND_OF: dict[type, str] = {t: k for k, t in TYPES.items()}
# Kind codes used inside pack files (one byte per entry): 1 case, 2 tree.leaf, 3 tree.node,
# 7 run, 8 provenance, 9 cassette, 10 suite.result. 4, 5, 6 were reserved for version, dataset
# and config, which were never packed: they are unused, and a reader refuses them like any
# unknown code.
KIND_CODES: dict[str, int] = {k: t.PACK_CODE for k, t in TYPES.items() if t.PACK_CODE is not None}
KIND_BY_CODE: dict[int, str] = {v: k for k, v in KIND_CODES.items()}


def encode_object(obj: _Record) -> tuple[str, bytes, str]:
    """(kind, canonical bytes, digest) of a record built by cas."""
    kind = KIND_OF[type(obj)]
    data = encoding.encode(obj)
    return kind, data, digest_of(kind, data)


def check_format(obj: Any, what: str) -> Any:
    if obj.format != FORMAT:
        raise UnsupportedFormat(
            f"{what} has format {obj.format}; this cas reads format {FORMAT} only",
            format=obj.format)
    return obj


def decode_object(kind: str, data: bytes, what: str = "object") -> Any:
    try:
        type_ = TYPES[kind]
    except KeyError:
        raise CorruptData(f"{what} has unknown kind {kind!r}") from None
    obj = encoding.decode(data, type_, what)
    return check_format(obj, what)


class _RecordFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    digest: str
    record: msgspec.Raw


def format_record_file(obj: _Record) -> bytes:
    """A record stored under a name (refs, config): canonical bytes wrapped with their digest.

    The digest makes any flipped byte detectable, exactly as for packed objects.
    """
    _, data, digest = encode_object(obj)
    return b'{"digest":"' + digest.encode("ascii") + b'","record":' + data + b"}"


def parse_record_file(data: bytes, type_: type, where: str) -> Any:
    try:
        env = msgspec.json.decode(data, type=_RecordFile)
    except msgspec.DecodeError as exc:
        raise CorruptData(f"{where} does not parse: {exc}", key=where) from None
    kind = KIND_OF[type_]
    raw = bytes(env.record)
    got = digest_of(kind, raw)
    if got != env.digest:
        raise DigestMismatch(env.digest, got, where)
    if data != b'{"digest":"' + env.digest.encode("ascii") + b'","record":' + raw + b"}":
        raise CorruptData(f"{where} is not in canonical form", key=where)
    obj = decode_object(kind, raw, where)
    if encoding.encode(obj) != raw:
        raise CorruptData(f"{where} holds a record that is not in canonical form", key=where)
    return obj


class _KindOnly(msgspec.Struct):
    kind: str = ""


def parse_record_file_of(data: bytes, types: tuple[type, ...], where: str) -> Any:
    """A record file that may hold any of `types` (a log whose numbers hold either entries or
    fences, or a key family a reader does not know): the kind named inside picks the type,
    then the file is verified exactly as by parse_record_file."""
    try:
        raw = msgspec.json.decode(data, type=_RecordFile).record
        kind = msgspec.json.decode(raw, type=_KindOnly).kind
    except msgspec.DecodeError as exc:
        raise CorruptData(f"{where} does not parse: {exc}", key=where) from None
    for type_ in types:
        if KIND_OF[type_] == kind:
            return parse_record_file(data, type_, where)
    raise CorruptData(f"{where} holds a {kind!r} record; expected "
                      + " or ".join(repr(KIND_OF[t]) for t in types), key=where)
