"""Pins, scores and experiments: results that cite an exact version; deleting what nothing cites.

A **pin** names `dataset@version` and the version's `content_digest`; its string form
(`evals@3#b3:...`) can be stored anywhere and is checked against the repository when resolved.
A **score** cites a pin; scores are recorded in batches claimed as the numbers of an append-only
log per dataset (`datasets/<name>/scores/<n>`). An **experiment** is a named run of evaluations
over an exact version (`datasets/<name>/experiments/<n>`, names unique per dataset).

A version (or a dataset) that any score or experiment cites can never be deleted. A deletion
writes its tombstone first, then claims the next number of each citation log with a `fence`;
a citation is claimed as the next number of its log only after checking that no tombstone
exists. So every citation either took a number below the fence (and the deletion reads it and
withdraws) or above it (and saw the tombstone and was refused): a cited version is never
deleted, even by concurrent writers. The version file is deleted last; its number stays used
forever (the tombstone), so a later seal never reuses it.

A score batch can be **withdrawn** (`datasets/<name>/withdrawn/<batch number>`, created once,
never removed): the batch stays as recorded, listed as withdrawn, and it no longer cites its
version. A deletion that reads a withdrawn batch passes over it; since a withdrawal only ever
removes a citation and is permanent, a batch the deletion saw withdrawn stays so, and one it saw
not withdrawn refuses the deletion whatever happens next.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any, Iterator, Union

import msgspec

from cas.repo import checks, datasets
from cas.storage import claims
from cas.format import encoding
from cas.digest import parse_digest
from cas.errors import Aborted, AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from cas.format.records import (DatasetTombstone, Experiment, Fence, Score, ScoreBatch,
                                ScoreWithdrawal, VersionRecord, VersionTombstone,
                                format_record_file, parse_record_file_of)
from cas.storage.refs import check_dataset_name
from cas.repo.retirement import ACTIVE, RETIRED, refuse_retired
from cas.format.keys import (CITATION_LOGS, DATASETS, citation_key_of, deleted_key, meta_key,
                             parse_score_batch_key, parse_withdrawal_key, score_batch_key,
                             tombstone_key, version_key, withdrawal_key)

_PIN_RE = re.compile(r"(?P<dataset>[^@#]+)@(?P<version>[1-9][0-9]*)#(?P<digest>.+)\Z")
PIN_FORM = "DATASET@VERSION#b3:<64 hex digits>"


class Pin(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An exact version and the digest of its set: `str(pin)` is `name@3#b3:<64 hex>`."""

    dataset: str
    version: int
    content_digest: str

    def __str__(self) -> str:
        return f"{self.dataset}@{self.version}#{self.content_digest}"

    @classmethod
    def parse(cls, text: str) -> "Pin":
        """The pin written as `DATASET@VERSION#b3:<64 hex>` (uppercase hex is folded)."""
        m = _PIN_RE.match(text.strip()) if isinstance(text, str) else None
        if m is None:
            shown = encoding.describe(text) if isinstance(text, str) else \
                f"a {type(text).__name__}"
            raise InvalidArgument(f"{shown} is not a pin; expected {PIN_FORM}, e.g. "
                                  f"evals@3#b3:{'0' * 64}", reason="INVALID_PIN",
                                  value=text if isinstance(text, str) else shown)
        try:
            name = check_dataset_name(m["dataset"])
            digest = parse_digest(m["digest"], "pin digest")
        except InvalidArgument as exc:
            raise InvalidArgument(f"{text!r} is not a pin ({exc.message}); expected {PIN_FORM}",
                                  reason="INVALID_PIN", value=text) from None
        return cls(name, int(m["version"]), digest)


class RecordedScore(msgspec.Struct, frozen=True, kw_only=True):
    """A stored score with its id: `<batch id>#<index in the batch>`, the batch id being its
    batch's key `datasets/<name>/scores/<10-digit number>`."""

    score_id: str
    dataset: str
    version: int
    content_digest: str
    metric: str
    value: Union[bool, int, float, str]
    item: Union[str, None]
    experiment: Union[str, None]
    author: str
    recorded_at: str
    version_state: str = "ACTIVE"  # of the cited version now: a score outlives a retirement
    batch: str = ""  # the batch id (`cas score withdraw` takes it)
    withdrawn: bool = False  # its batch was withdrawn: it no longer cites its version

    @property
    def pin(self) -> Pin:
        return Pin(self.dataset, self.version, self.content_digest)


# -- pins ---------------------------------------------------------------------------------
def as_pin(pin: Any) -> Pin:
    if isinstance(pin, Pin):
        # A Pin built by hand is not validated: its fields may have any type.
        if not (isinstance(pin.dataset, str) and isinstance(pin.version, int)
                and isinstance(pin.content_digest, str)):
            raise InvalidArgument("a cas.Pin holds a dataset name (str), a version number (int) "
                                  "and a content_digest (str), not "
                                  f"{encoding.describe(pin.dataset)}, "
                                  f"{encoding.describe(pin.version)}, "
                                  f"{encoding.describe(pin.content_digest)}",
                                  reason="INVALID_PIN")
        return pin
    if isinstance(pin, str):
        return Pin.parse(pin)
    raise InvalidArgument(f"a pin must be a cas.Pin or its string ({PIN_FORM}), not "
                          f"{type(pin).__name__}", reason="INVALID_PIN")


def pin(ctx, name: str, number: int) -> Pin:
    """A `cas.Pin` of an ACTIVE version: dataset, version and its content_digest."""
    record = _citable(ctx, name, number)
    return Pin(record.dataset, record.number, record.content_digest)


def resolve_pin(ctx, pin: Any) -> VersionRecord:
    """The VersionRecord a pin (or its string) names, re-read; refused if its digest no
    longer matches (PIN_MISMATCH) or the version was deleted (NotFound)."""
    p = as_pin(pin)
    record = _live_version(ctx, p.dataset, p.version)
    _check_pin_digest(p, record)
    return record


def verify_pin(ctx, pin: Any) -> VersionRecord:
    """`resolve_pin`, and refused if the version is RETIRED (EVALUATION_DATASET_VERSION_RETIRED):
    a check of a pin (e.g. in CI) fails when every read of the version it names is refused.
    `resolve_pin` itself still resolves a retired version: it answers "is this the set that
    was pinned", which an audit of an old result asks of a retired version too."""
    record = resolve_pin(ctx, pin)
    retired = ctx.refs.read_retirement(record.dataset, record.number)
    if retired is not None:
        raise refuse_retired(record.dataset, record.number, retired,
                             "every read of it (listing, replaying, scoring)")
    return record


def _check_pin_digest(p: Pin, record: VersionRecord) -> None:
    if record.content_digest != p.content_digest:
        raise FailedPrecondition(
            f"pin {p} does not match the repository: {p.dataset}@{p.version} has content_digest "
            f"{record.content_digest}", reason="PIN_MISMATCH", pin=str(p),
            expected=p.content_digest, got=record.content_digest)


def _live_version(ctx, name: str, number: int) -> VersionRecord:
    """The version record, refused (NotFound) if it or its dataset is deleted, even when the
    deletion is still in progress."""
    record = datasets.version(ctx, name, number)
    if ctx.backend.exists(tombstone_key(name)):
        raise _dataset_deleted(ctx, name)
    gone = ctx.refs.read_version_tombstone(name, number)
    if gone is not None:
        raise NotFound(f"version {number} of dataset {name!r} was deleted ({gone.deleted_at} "
                       f"by {gone.author})", reason="VERSION_DELETED", dataset=name,
                       version=number)
    return record


def _citable(ctx, name: str, number: int, check_tombstones: bool = True) -> VersionRecord:
    """A version a pin, score or experiment may cite: it exists and it is ACTIVE."""
    record = _live_version(ctx, name, number) if check_tombstones else datasets.version(ctx, name, number)
    retired = ctx.refs.read_retirement(name, number)
    if retired is not None:
        raise refuse_retired(name, number, retired, "pinning, scoring or an experiment over it")
    return record


def _dataset_deleted(ctx, name: str) -> NotFound:
    gone = ctx.refs.read_dataset_tombstone(name)
    when = f" ({gone.deleted_at} by {gone.author})" if gone is not None else ""
    return NotFound(f"dataset {name!r} was deleted{when}", reason="DATASET_DELETED",
                    dataset=name)


def _check_not_deleted(ctx, name: str, number: int) -> None:
    """Refuse a citation of a deleted (or being deleted) version or dataset. Called after the
    citation log's head was read and before its next number is claimed (see the module doc)."""
    if ctx.backend.exists(tombstone_key(name)):
        raise _dataset_deleted(ctx, name)
    if ctx.backend.exists(deleted_key(name, number)):
        ctx.refs.read_version(name, number)  # NotFound, saying it was deleted
        raise NotFound(f"version {number} of dataset {name!r} is being deleted",
                       reason="VERSION_DELETED", dataset=name, version=number)


# -- the citation logs ----------------------------------------------------------------------
def _entry_type(log: str) -> type:
    return ScoreBatch if log == "scores" else Experiment


def read_log(ctx, name: str, log: str, after: int = 0) -> Iterator[tuple[int, str, Any]]:
    """(number, key, entry or Fence) of a citation log from `after + 1` to its end."""
    key_of = citation_key_of(name, log)
    n = after
    while True:
        key = key_of(n + 1)
        try:
            data = ctx.backend.get(key)
        except NotFound:
            return
        n += 1
        yield n, key, parse_record_file_of(data, (_entry_type(log), Fence), key)


def _claim(ctx, name: str, log: str, make, check) -> tuple[int, str]:
    """Claim the next number of a citation log for `make(number)`, after `check(head)`
    (which refuses by raising) has seen everything below it. Returns (number, key)."""
    key_of = citation_key_of(name, log)
    for _ in claims.attempts(f"a number in {DATASETS}{name}/{log}/", dataset=name):
        head = ctx.refs.citation_head(name, log)
        check(head)
        key = key_of(head + 1)
        if ctx.backend.put_if_absent(key, format_record_file(make(head + 1))):
            return head + 1, key


# -- scores ---------------------------------------------------------------------------------
_SCORE_FIELDS = frozenset({"metric", "value", "item", "experiment"})


def record_score(ctx, pin: Any, *, metric: str, value, item: str | None = None,
                 experiment: str | None = None, author: str | None = None) -> RecordedScore:
    """Store one score citing `pin`; returns it as a RecordedScore (with `score_id`)."""
    return record_scores(ctx, pin, [{"metric": metric, "value": value, "item": item,
                                     "experiment": experiment}], author=author)[0]


def record_scores(ctx, pin: Any, scores: list, author: str | None = None) -> list[RecordedScore]:
    """Store `scores` (dicts of metric, value, item=None, experiment=None) citing `pin`, as
    one batch. Everything is checked before anything is stored."""
    author, now = checks.author(author), ctx.clock()
    p = as_pin(pin)
    if isinstance(scores, (dict, str, bytes)) or not hasattr(scores, "__iter__"):
        raise InvalidArgument("scores must be a list of dicts {metric, value, item, experiment}")
    scores = list(scores)
    if not scores:
        raise InvalidArgument("no scores to record: give at least one")
    record = _citable(ctx, p.dataset, p.version, check_tombstones=False)
    _check_pin_digest(p, record)
    rows = [_score_row(s, f"score {i}" if len(scores) > 1 else "score", i)
            for i, s in enumerate(scores)]
    trie = ctx.trie()
    for item in sorted({item for _, _, item, _ in rows if item is not None}):
        if not trie.contains(record.content_digest, item):
            raise NotFound(f"case {item} is not in {p.dataset}@{p.version}; a score's item must "
                           "be a case of the version it cites", reason="ITEM_NOT_IN_VERSION",
                           case_id=item, dataset=p.dataset, version=p.version)
    _check_experiments(ctx, p, {e for _, _, _, e in rows if e is not None})
    batch_scores = [Score(dataset=p.dataset, version=p.version,
                          content_digest=p.content_digest, metric=metric, value=value,
                          item=item, experiment=experiment, author=author, recorded_at=now)
                    for metric, value, item, experiment in rows]
    encoding.check_json(batch_scores)  # e.g. a lone surrogate in a metric name
    _, key = _claim(
        ctx, p.dataset, "scores",
        lambda n: ScoreBatch(dataset=p.dataset, number=n, scores=batch_scores),
        lambda head: _check_not_deleted(ctx, p.dataset, p.version))
    return [_recorded(key, i, s) for i, s in enumerate(batch_scores)]


def _score_row(s: Any, where: str, i: int) -> tuple:
    """(metric, value, item, experiment) of one score given as a dict, each checked."""
    if not isinstance(s, dict):
        raise InvalidArgument(f"{where} must be a dict {{metric, value, item, experiment}}, "
                              f"not {type(s).__name__}", index=i)
    unknown = sorted(set(s) - _SCORE_FIELDS, key=encoding.describe)
    if unknown:
        raise InvalidArgument(f"{where} has unknown field {encoding.describe(unknown[0])}; "
                              "accepted: metric, value, item, experiment", index=i)
    if "metric" not in s or "value" not in s:
        raise InvalidArgument(f"{where} needs a metric and a value", index=i)
    metric = check_label(s["metric"], "metric")
    value = check_value(s["value"])
    item = s.get("item")
    if item is not None:
        if not isinstance(item, str):
            raise InvalidArgument(f"item {encoding.describe(item)} is not a case id; "
                                  "expected 'b3:' followed by 64 hex digits", index=i)
        item = parse_digest(item, "item")
    experiment = s.get("experiment")
    if experiment is not None:
        experiment = check_label(experiment, "experiment name")
    return metric, value, item, experiment


def _check_experiments(ctx, p: Pin, wanted: set[str]) -> None:
    """Every experiment the scores name exists and is over the version they cite."""
    if not wanted:
        return
    known = {e.name: e for e in experiments(ctx, p.dataset)}
    for name in sorted(wanted):
        exp = known.get(name)
        if exp is None:
            raise NotFound(f"dataset {p.dataset!r} has no experiment {name!r} (create it "
                           "first with `cas experiment create`)",
                           reason="EXPERIMENT_NOT_FOUND", dataset=p.dataset,
                           experiment=name)
        if exp.version != p.version:
            raise FailedPrecondition(
                f"experiment {name!r} is over {p.dataset}@{exp.version}, not "
                f"{p.dataset}@{p.version}; its scores must cite that version",
                reason="EXPERIMENT_VERSION_MISMATCH", experiment=name,
                version=exp.version)


def _recorded(key: str, index: int, s: Score, state: str = ACTIVE,
              withdrawn: bool = False) -> RecordedScore:
    return RecordedScore(score_id=f"{key}#{index}", dataset=s.dataset, version=s.version,
                         content_digest=s.content_digest, metric=s.metric, value=s.value,
                         item=s.item, experiment=s.experiment, author=s.author,
                         recorded_at=s.recorded_at, version_state=state, batch=key,
                         withdrawn=withdrawn)


def scores(ctx, name: str, version: int | None = None) -> list[RecordedScore]:
    """Every score of a dataset (or of one of its versions), in the order recorded; the
    scores of a withdrawn batch are listed too, marked `withdrawn`."""
    datasets.dataset(ctx, name)
    if version is not None:
        datasets.version(ctx, name, version)  # NotFound for a version never sealed, or deleted
    withdrawn = withdrawn_batches(ctx, name)
    out = []
    states: dict[int, str] = {}
    for n, key, entry in read_log(ctx, name, "scores"):
        if isinstance(entry, Fence):
            continue
        for i, s in enumerate(entry.scores):
            if version is None or s.version == version:
                if s.version not in states:
                    retired = ctx.refs.read_retirement(name, s.version)
                    states[s.version] = ACTIVE if retired is None else RETIRED
                out.append(_recorded(key, i, s, states[s.version], n in withdrawn))
    return out


# -- score values ----------------------------------------------------------------------------
MAX_LABEL = 64
_NUMBER_RE = re.compile(r"-?(0|[1-9][0-9]*)(?P<frac>\.[0-9]+)?(?P<exp>[eE][+-]?[0-9]+)?\Z")
VALUE_FORMS = ("a finite number, a boolean, or a label (1-64 printable characters without "
               "leading or trailing spaces that do not read as a number or as true/false)")


def _value_error(message: str, value: Any) -> InvalidArgument:
    return InvalidArgument(message, reason="INVALID_SCORE_VALUE",
                           value=value if isinstance(value, str) else encoding.describe(value))


def check_value(value: Any) -> Union[bool, int, float, str]:
    """A score's value: a boolean, an int or a finite float (numpy scalars and the like are
    converted), or a label (`check_score_label`). A bool stays a bool (canonical `true`), never
    the integer Python also takes it for."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return check_score_label(value)
    if not isinstance(value, numbers.Real):
        raise _value_error(f"a score's value must be {VALUE_FORMS}, not "
                           f"{encoding.describe(value)}", value)
    try:
        value = int(value) if isinstance(value, numbers.Integral) else float(value)
    except (ArithmeticError, ValueError, TypeError):  # e.g. a Fraction beyond any float
        value = math.inf
    if isinstance(value, float) and not math.isfinite(value) or \
            isinstance(value, int) and not -10 ** encoding.MAX_INT_DIGITS < value < \
            10 ** encoding.MAX_INT_DIGITS:
        raise _value_error(f"a score's value must be a finite number, not "
                           f"{encoding.describe(value)}", value)
    return value


def _reads_as_number(text: str) -> bool:
    """True for any spelling a reader could take for a number: JSON's, and every one Python's
    float() accepts (`nan`, `inf`, `+1`, `.5`, `1_000`, digits of other scripts)."""
    try:
        float(text)
    except (ValueError, OverflowError):
        return False
    return True


def check_score_label(text: str) -> str:
    """A label value: 1-64 printable characters, no leading or trailing space, not spelled as
    a number or a boolean (so a label written as text, on the command line or in a file, is
    never read back as another type: `"0.5"` and `"true"` are refused, give 0.5 or true)."""
    problem = encoding.text_problem(text, MAX_LABEL)
    if problem is None and text != text.strip():
        problem = "has leading or trailing spaces"
    if problem is not None:
        raise _value_error(f"score label {encoding.describe(text)} is refused: a label is 1-64 "
                           f"printable characters without leading or trailing spaces; it "
                           f"{problem}", text)
    if text.lower() in ("true", "false") or _reads_as_number(text):
        raise _value_error(f"score label {encoding.describe(text)} is refused: it reads as a "
                           "number or a boolean; give the number (as JSON writes numbers: 3, "
                           "0.25, 1e-3) or the boolean (true, false) itself", text)
    return text


def parse_value(text: str) -> Union[bool, int, float, str]:
    """A score value written as text (`cas score add --value`): `true` and `false` are
    booleans, a JSON number is a number (an integer without fraction or exponent), anything
    else is a label (`check_score_label`)."""
    if not isinstance(text, str):
        raise _value_error(f"a score value as text must be a str, not "
                           f"{encoding.describe(text)}", text)
    if text in ("true", "false"):
        return text == "true"
    m = _NUMBER_RE.match(text)
    if m is None:
        return check_score_label(text)
    try:
        number = float(text) if m["frac"] or m["exp"] else int(text)
    except ValueError:  # an integer of more digits than Python converts
        raise _value_error(f"score value {text[:40]!r}... is out of range: an integer has at "
                           f"most {encoding.MAX_INT_DIGITS} digits", text[:40]) from None
    return check_value(number)  # refuses a float that overflows to infinity


def read_score_lines(stream, source: str) -> list[dict]:
    """The scores of a JSON Lines input, one `{"metric", "value", "item"?}` a line (blank
    lines skipped), each checked as `record_scores` checks it; errors name the line."""
    out = []
    for lineno, line in enumerate(encoding.lines_of(stream, source), 1):
        if not line.strip():
            continue
        try:
            row = encoding.decode_json(line)
            if not isinstance(row, dict):
                raise InvalidArgument('a line is a JSON object {"metric", "value", "item"?}, '
                                      f"not {encoding.describe(row)}")
            unknown = sorted(set(row) - {"metric", "value", "item"})
            if unknown:
                raise InvalidArgument(f"unknown field {encoding.describe(unknown[0])}; a line "
                                      'is {"metric", "value", "item"?}')
            _score_row(row, "score", len(out))
        except InvalidArgument as exc:
            raise encoding.in_context(exc, f"{source} line {lineno}", line=lineno) from None
        out.append(row)
    if not out:
        raise InvalidArgument(f"{source} holds no scores")
    return out


def check_label(text: Any, what: str) -> str:
    """Metric and experiment names: 1-128 printable characters, no surrounding spaces."""
    if not isinstance(text, str) or not text:
        raise InvalidArgument(f"{what} must be a non-empty string, not "
                              f"{encoding.describe(text)}")
    problem = encoding.text_problem(text, 128)
    if problem is not None or text != text.strip():
        raise InvalidArgument(f"invalid {what} {encoding.describe(text)}: use 1-128 printable "
                              "characters without leading or trailing spaces"
                              + (f"; it {problem}" if problem else ""))
    return text


# -- experiments -----------------------------------------------------------------------------
def create_experiment(ctx, name: str, version: int, experiment_name: str,
                      author: str | None = None) -> Experiment:
    """A named experiment over the ACTIVE version `name@version` (names unique per dataset)."""
    author, now, number = checks.author(author), ctx.clock(), version
    experiment_name = check_label(experiment_name, "experiment name")
    record = _citable(ctx, name, number, check_tombstones=False)
    seen: dict[str, Experiment] = {}
    last = 0

    def check(head: int) -> None:
        nonlocal last
        for n, _, entry in read_log(ctx, name, "experiments", last):
            last = n
            if isinstance(entry, Experiment):
                seen[entry.name] = entry
        if experiment_name in seen:
            prior = seen[experiment_name]
            raise AlreadyExists(f"dataset {name!r} already has an experiment named "
                                f"{experiment_name!r} (over {name}@{prior.version})",
                                reason="EXPERIMENT_EXISTS", dataset=name,
                                experiment=experiment_name)
        _check_not_deleted(ctx, name, number)

    def make(n: int) -> Experiment:
        return Experiment(dataset=name, number=n, name=experiment_name, version=number,
                          content_digest=record.content_digest, author=author, created_at=now)

    number_, key = _claim(ctx, name, "experiments", make, check)
    return make(number_)


def experiments(ctx, name: str) -> list[Experiment]:
    """The experiments of a dataset, in the order created."""
    datasets.dataset(ctx, name)
    return [e for _, _, e in read_log(ctx, name, "experiments") if isinstance(e, Experiment)]


# -- comparing experiments ---------------------------------------------------------------------
class MetricAggregate(msgspec.Struct, frozen=True, kw_only=True):
    """The scores of one experiment on one metric: `count` of them, `numbers` of those that
    are numbers and their `mean` (None without any), and `values`: the count of each boolean
    and label, keyed by its text (`true`, `false`, the label; a label never spells a boolean)."""

    count: int = 0
    numbers: int = 0
    mean: Union[float, None] = None
    values: dict[str, int] = {}


class MetricComparison(msgspec.Struct, frozen=True, kw_only=True):
    metric: str
    a: MetricAggregate
    b: MetricAggregate


class ItemDifference(msgspec.Struct, frozen=True, kw_only=True):
    """A case scored differently on a metric: each side's value, None where that experiment
    has no score of the case on the metric."""

    metric: str
    item: str
    a: Union[bool, int, float, str, None]
    b: Union[bool, int, float, str, None]


class ExperimentComparison(msgspec.Struct, frozen=True, kw_only=True):
    dataset: str
    a: Experiment
    b: Experiment
    metrics: list[MetricComparison]
    differences: list[ItemDifference]


def value_text(value: Any) -> str:
    """A score value as text, the way `parse_value` reads it back: `true`, `0.25`, a label."""
    return value if isinstance(value, str) else encoding.encode(value).decode()


def _aggregate(found: list[RecordedScore]) -> MetricAggregate:
    nums = [s.value for s in found if not isinstance(s.value, (bool, str))]
    values: dict[str, int] = {}
    for s in found:
        if isinstance(s.value, (bool, str)):
            values[value_text(s.value)] = values.get(value_text(s.value), 0) + 1
    try:
        mean = math.fsum(nums) / len(nums) if nums else None
    except OverflowError:  # integers beyond any float: no mean to give
        mean = None
    return MetricAggregate(count=len(found), numbers=len(nums), mean=mean,
                           values=dict(sorted(values.items())))


def _same(x: Any, y: Any) -> bool:
    """Equal values of the same kind: True is not 1, 1 is 1.0, a label is only itself."""
    def kind(v: Any) -> int:
        return 0 if isinstance(v, bool) else 1 if isinstance(v, str) else 2
    return x is not None and y is not None and kind(x) == kind(y) and x == y


def compare_experiments(ctx, name: str, a: str, b: str) -> ExperimentComparison:
    """Per-metric aggregates of two experiments of a dataset, and the (metric, case) pairs
    scored differently: by each side's last score of that case on that metric, a case only one
    side scored counting as different. Withdrawn scores are left out."""
    a, b = check_label(a, "experiment name"), check_label(b, "experiment name")
    if a == b:
        raise InvalidArgument(f"compare two different experiments, not {a!r} with itself",
                              reason="SAME_EXPERIMENT", experiment=a)
    known = {e.name: e for e in experiments(ctx, name)}
    for wanted in (a, b):
        if wanted not in known:
            raise NotFound(f"dataset {name!r} has no experiment {wanted!r}",
                           reason="EXPERIMENT_NOT_FOUND", dataset=name, experiment=wanted)
    by: dict[str, list[RecordedScore]] = {a: [], b: []}
    for s in scores(ctx, name):
        if s.experiment in by and not s.withdrawn:
            by[s.experiment].append(s)
    metrics = sorted({s.metric for s in by[a] + by[b]})
    compared = [MetricComparison(metric=m, a=_aggregate([s for s in by[a] if s.metric == m]),
                                 b=_aggregate([s for s in by[b] if s.metric == m]))
                for m in metrics]
    last = {side: {(s.metric, s.item): s.value for s in by[side] if s.item is not None}
            for side in (a, b)}
    differences = [ItemDifference(metric=m, item=i, a=last[a].get((m, i)), b=last[b].get((m, i)))
                   for m, i in sorted(set(last[a]) | set(last[b]))
                   if not _same(last[a].get((m, i)), last[b].get((m, i)))]
    return ExperimentComparison(dataset=name, a=known[a], b=known[b], metrics=compared,
                                differences=differences)


# -- withdrawals ------------------------------------------------------------------------------
MAX_REASON = 4096


def batch_number(name: str, batch: Any) -> int:
    """The number of a score batch given as its number or its id (its key,
    `datasets/<name>/scores/0000000003`, which must be of dataset `name`)."""
    if isinstance(batch, int) and not isinstance(batch, bool) and batch >= 1:
        return batch
    parsed = parse_score_batch_key(batch) if isinstance(batch, str) else None
    if parsed is None or parsed[0] != name:
        raise InvalidArgument(f"{encoding.describe(batch)} is not a score batch of dataset "
                              f"{name!r}: give its id as `cas score list` shows it "
                              f"({score_batch_key(name, 1)}) or its number",
                              reason="INVALID_BATCH_ID", dataset=name)
    return parsed[1]


def parse_batch_id(text: str) -> tuple[str, int]:
    """(dataset, number) of a batch id `datasets/<name>/scores/<10 digits>`."""
    parsed = parse_score_batch_key(text) if isinstance(text, str) else None
    if parsed is None:
        raise InvalidArgument(f"{encoding.describe(text)} is not a score batch id; expected "
                              "datasets/DATASET/scores/NNNNNNNNNN as `cas score list` shows it",
                              reason="INVALID_BATCH_ID")
    return parsed


def withdrawn_batches(ctx, name: str) -> set[int]:
    """The numbers of the withdrawn score batches of a dataset (one listing)."""
    found = (parse_withdrawal_key(k) for k in ctx.backend.list(f"{DATASETS}{name}/withdrawn/"))
    return {f[1] for f in found if f is not None and f[0] == name}


def is_withdrawn(ctx, name: str, number: int) -> bool:
    """Whether score batch `number` is withdrawn: its withdrawal exists and names it. A damaged
    withdrawal is an error (CorruptData), never read as one: a deletion then refuses."""
    key = withdrawal_key(name, number)
    try:
        data = ctx.backend.get(key)
    except NotFound:
        return False
    found = parse_record_file_of(data, (ScoreWithdrawal,), key)
    return (found.dataset, found.batch) == (name, number)


def withdrawal(ctx, name: str, batch: Any) -> ScoreWithdrawal | None:
    """The withdrawal of a score batch (number or id), or None."""
    key = withdrawal_key(name, batch_number(name, batch))
    try:
        return parse_record_file_of(ctx.backend.get(key), (ScoreWithdrawal,), key)
    except NotFound:
        return None


def _check_reason(reason: Any) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidArgument(f"a withdrawal needs a reason saying why: 1-{MAX_REASON} "
                              "characters", reason="REASON_REQUIRED")
    if len(reason) > MAX_REASON:
        raise InvalidArgument(f"a withdrawal reason is at most {MAX_REASON} characters; this "
                              f"one has {len(reason)}", reason="REASON_TOO_LONG",
                              maximum=MAX_REASON)
    encoding.check_json(reason, "reason")  # e.g. a lone surrogate, which no record can hold
    return reason


def withdraw_batch(ctx, name: str, batch: Any, reason: str,
                   author: str | None = None) -> ScoreWithdrawal:
    """Withdraw score batch `batch` (its number or id) of dataset `name`, once: its scores stay
    listed (as withdrawn) and no longer cite their version. The batch is not changed."""
    author, now = checks.author(author), ctx.clock()
    datasets.dataset(ctx, name)
    number = batch_number(name, batch)
    reason = _check_reason(reason)
    key = score_batch_key(name, number)
    try:
        entry = parse_record_file_of(ctx.backend.get(key), (ScoreBatch, Fence), key)
    except NotFound:
        raise NotFound(f"dataset {name!r} has no score batch {key}",
                       reason="SCORE_BATCH_NOT_FOUND", dataset=name, batch=key) from None
    if isinstance(entry, Fence):
        raise NotFound(f"{key} is not a score batch: it is a fence a deletion wrote "
                       f"({entry.reason})", reason="SCORE_BATCH_NOT_FOUND", dataset=name,
                       batch=key)
    record = ScoreWithdrawal(dataset=name, batch=number, reason=reason, author=author,
                             withdrawn_at=now)
    if not ctx.backend.put_if_absent(withdrawal_key(name, number), format_record_file(record)):
        prior = withdrawal(ctx, name, number)
        when = f" ({prior.withdrawn_at} by {prior.author}: {prior.reason})" if prior else ""
        raise AlreadyExists(f"score batch {key} was already withdrawn{when}; a batch is "
                            "withdrawn once", reason="SCORE_BATCH_ALREADY_WITHDRAWN",
                            dataset=name, batch=key)
    return record


def _citation(ctx, name: str, log: str, number: int, key: str, entry: Any,
              version: int | None) -> tuple[str, str] | None:
    """(description, id) of the first citation of `version` (any version if None) in entry
    `number` of a log, or None. A withdrawn batch cites nothing (read only when the batch
    would cite: most batches of a log are about other versions)."""
    if isinstance(entry, Fence):
        return None
    if log == "scores":
        for i, s in enumerate(entry.scores):
            if version is None or s.version == version:
                if is_withdrawn(ctx, name, number):
                    return None
                return (f"score {key}#{i} ({s.metric}={s.value!r} on {name}@{s.version}, "
                        f"recorded {s.recorded_at} by {s.author})", f"{key}#{i}")
        return None
    if version is None or entry.version == version:
        return f"experiment {entry.name!r} ({key}, over {name}@{entry.version})", key
    return None


def _cited(name: str, what: str, citation: str, key: str, **fields) -> FailedPrecondition:
    return FailedPrecondition(f"{what} is cited by {citation}; a cited {what.split()[0]} "
                              "cannot be deleted", reason="VERSION_CITED", cited_by=key,
                              dataset=name, **fields)


def _scan(ctx, name: str, target: int | None, what: str, rollback=None,
          **fields) -> dict[str, int]:
    """Refuse if any entry of either citation log cites `version` (any version if None);
    returns each log's head."""
    heads = {}
    for log in CITATION_LOGS:
        heads[log] = 0
        for n, key, entry in read_log(ctx, name, log):
            heads[log] = n
            found = _citation(ctx, name, log, n, key, entry, target)
            if found:
                if rollback is not None:
                    rollback()
                raise _cited(name, what, *found, **fields)
    return heads


def _fence(ctx, name: str, target: int | None, heads: dict[str, int], reason: str,
           author: str, now: str, rollback, what: str, **fields) -> None:
    """Claim the next number of each citation log. A citation that took a number first is
    read here: the deletion is withdrawn (`rollback`) and refused, naming it."""
    for log in CITATION_LOGS:
        n = heads[log]
        key_of = citation_key_of(name, log)
        try:
            for _ in claims.attempts(f"a fence in {DATASETS}{name}/{log}/", dataset=name):
                fence = Fence(dataset=name, log=log, number=n + 1, reason=reason,
                              author=author, written_at=now)
                key = key_of(n + 1)
                if ctx.backend.put_if_absent(key, format_record_file(fence)):
                    break
                try:
                    data = ctx.backend.get(key)
                except NotFound:
                    continue  # the claim that won was withdrawn meanwhile: this number again
                entry = parse_record_file_of(data, (_entry_type(log), Fence), key)
                found = _citation(ctx, name, log, n + 1, key, entry, target)
                if found:
                    rollback()
                    raise _cited(name, what, *found, **fields)
                n += 1
        except Aborted:
            rollback()  # contended beyond the bound: withdraw the deletion, then refuse
            raise


def delete_version(ctx, name: str, number: int, author: str | None = None) -> VersionTombstone:
    """Delete a version nothing cites: tombstone, fences, then the version file. An
    interrupted deletion is completed by running it again."""
    author, now = checks.author(author), ctx.clock()
    datasets.dataset(ctx, name)
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise InvalidArgument(f"version must be a positive integer, not "
                              f"{encoding.describe(number)}")
    vkey, dkey = version_key(name, number), deleted_key(name, number)
    tomb = ctx.refs.read_version_tombstone(name, number)
    if tomb is not None and not ctx.backend.exists(vkey):
        raise NotFound(f"version {number} of dataset {name!r} was already deleted "
                       f"({tomb.deleted_at} by {tomb.author})", reason="VERSION_DELETED",
                       dataset=name, version=number)
    what = f"version {name}@{number}"

    def rollback() -> None:
        ctx.backend.delete(dkey)

    if tomb is None:
        record = ctx.refs.read_version(name, number)
        heads = _scan(ctx, name, number, what, version=number)
        tomb = VersionTombstone(dataset=name, number=number,
                                content_digest=record.content_digest,
                                item_count=record.item_count, author=author, deleted_at=now)
        if not ctx.backend.put_if_absent(dkey, format_record_file(tomb)):
            tomb = ctx.refs.read_version_tombstone(name, number) or tomb  # a concurrent delete
    else:  # resuming an interrupted deletion (the version file is still there): check again
        heads = _scan(ctx, name, number, what, rollback, version=number)
    _fence(ctx, name, number, heads, f"delete version {number}", author, now, rollback, what,
           version=number)
    ctx.backend.delete(vkey)
    return tomb


def delete_dataset(ctx, name: str, author: str | None = None) -> DatasetTombstone:
    """Delete a dataset none of whose versions is cited: tombstone, fences, then its records.
    The tombstone and the citation logs (by then only fences) stay, so the name is never
    created again and no late citation can claim a number there."""
    checks.dataset_name(name)
    author, now = checks.author(author), ctx.clock()
    tomb = ctx.refs.read_dataset_tombstone(name)
    prefix = f"{DATASETS}{name}/"
    kept = (tombstone_key(name), f"{prefix}scores/", f"{prefix}withdrawn/", f"{prefix}experiments/")
    if tomb is not None:
        leftovers = [k for k in ctx.backend.list(prefix) if not k.startswith(kept)]
        if not leftovers:
            raise NotFound(f"dataset {name!r} was already deleted ({tomb.deleted_at} by "
                           f"{tomb.author})", reason="DATASET_DELETED", dataset=name)
    else:
        datasets.dataset(ctx, name)
    what = f"dataset {name!r}"

    def rollback() -> None:
        # Only while nothing is deleted yet: a half-deleted dataset keeps its tombstone.
        if ctx.backend.exists(meta_key(name, 1)):
            ctx.backend.delete(tombstone_key(name))

    heads = _scan(ctx, name, None, what, rollback if tomb is not None else None)
    if tomb is None:
        tomb = DatasetTombstone(dataset=name, head=ctx.refs.last_number(name), author=author,
                                deleted_at=now)
        if not ctx.backend.put_if_absent(tombstone_key(name), format_record_file(tomb)):
            tomb = ctx.refs.read_dataset_tombstone(name) or tomb
    _fence(ctx, name, None, heads, "delete dataset", author, now, rollback, what)
    # Metadata revision 1 first: from then on the dataset does not exist for any reader.
    doomed = [k for k in ctx.backend.list(prefix) if not k.startswith(kept)]
    first = meta_key(name, 1)
    for key in sorted(doomed, key=lambda k: (k != first, k)):
        ctx.backend.delete(key)
    return tomb


__all__ = ["Pin", "RecordedScore", "as_pin", "pin", "resolve_pin", "verify_pin", "record_score",
           "record_scores", "read_score_lines", "scores", "check_value", "parse_value",
           "value_text", "create_experiment", "experiments", "compare_experiments",
           "ExperimentComparison", "MetricComparison", "MetricAggregate", "ItemDifference",
           "withdraw_batch", "withdrawal", "withdrawn_batches", "is_withdrawn", "batch_number",
           "parse_batch_id", "delete_version", "delete_dataset", "read_log"]
