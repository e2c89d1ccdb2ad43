"""Scores: results that cite an exact version, recorded in batches, listed, and withdrawn.

A **score** cites a pin; scores are recorded in batches claimed as the numbers of an append-only
citation log per dataset (`datasets/<name>/scores/<n>`, cas/repo/citations.py). A version that
a score cites can never be deleted (cas/repo/deletion.py).

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
from typing import IO, Any, Iterable, Union

import msgspec

from cas.digest import parse_digest
from cas.errors import AlreadyExists, InvalidArgument, NotFound
from cas.format import encoding
from cas.format.keys import (DATASETS, parse_score_batch_key, parse_withdrawal_key, score_batch_key,
                             withdrawal_key)
from cas.format.records import (Fence, Score, ScoreBatch, ScoreWithdrawal, SuiteResultRecord,
                                format_record_file, parse_record_file_of)
from cas.format.version_names import Pin, as_pin
from cas.repo import checks, datasets, reads
from cas.repo.citations import CITING, check_not_deleted, claim, read_log, recorded_scores, score_id
from cas.repo.experiments import check_scored
from cas.repo.pins import check_digest
from cas.repo.retirement import ACTIVE, RETIRED, active
from cas.storage import leases

_SCORE_FIELDS = frozenset({"metric", "value", "item", "experiment"})
MAX_LABEL = 64  # characters of a label value
_NUMBER_RE = re.compile(r"-?(0|[1-9][0-9]*)(?P<frac>\.[0-9]+)?(?P<exp>[eE][+-]?[0-9]+)?\Z")
VALUE_FORMS = ("a finite number, a boolean, or a label (1-64 printable characters without "
               "leading or trailing spaces that do not read as a number or as true/false)")
MAX_REASON = 4096  # characters of a withdrawal's reason


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


def record_score(ctx, pin: Pin | str, *, metric: str, value: numbers.Real | str,
                 item: str | None = None, experiment: str | None = None,
                 author: str | None = None) -> RecordedScore:
    """Store one score citing `pin`; returns it as a RecordedScore (with `score_id`)."""
    return record_scores(ctx, pin, [{"metric": metric, "value": value, "item": item,
                                     "experiment": experiment}], author=author)[0]


def record_scores(ctx, pin: Pin | str, scores: Iterable[dict[str, Any]],
                  author: str | None = None,
                  result: SuiteResultRecord | None = None) -> list[RecordedScore]:
    """Store `scores` (dicts of metric, value, item=None, experiment=None) citing `pin`, as
    one batch. Everything is checked before anything is stored. `result`: the suite result
    the scores were taken from (a `suite.result` of the same pin), stored first as an object
    and cited by the batch."""
    if result is not None:
        if not isinstance(result, SuiteResultRecord):
            raise InvalidArgument(f"result is a cas suite.result record, not "
                                  f"{encoding.describe(result)}")
        p = as_pin(pin)
        if (result.dataset, result.version, result.content_digest) != \
                (p.dataset, p.version, p.content_digest):
            raise InvalidArgument(f"the suite result is of {result.dataset}@{result.version}, "
                                  f"the scores cite {p}: a batch cites the result of its "
                                  "own version", reason="RESULT_VERSION_MISMATCH")
        encoding.check_json(result.results, "result")
        with leases.writing(ctx, "record a suite result") as lease:
            # Indexed under the persons of the cases it answers, as a cassette is: erasing one
            # of them finds and deletes it (under the lease: an erasure that starts later
            # waits for this writer, one that started earlier retired the version first).
            persons = _persons_of(ctx, p, {r.id for r in result.results})
            with ctx.store.writer(lease) as writer:
                digest = writer.add(result, persons)  # the object, then the batch citing it
            return _record_scores(ctx, pin, scores, author, digest)
    return _record_scores(ctx, pin, scores, author, None)


def _persons_of(ctx, p: Pin, case_ids: set[str]) -> set[str]:
    """The persons the cases `case_ids` of the pinned version name (refused if the version is
    retired, or does not hold one of them)."""
    cases = reads.cases_of(ctx, p.dataset, p.version, sorted(case_ids),
                           "recording a suite result of it")
    return {c.person for c in cases if c.person is not None}


def _record_scores(ctx, pin: Pin | str, scores: Iterable[dict[str, Any]],
                   author: str | None, result: str | None) -> list[RecordedScore]:
    author, now = checks.author(author), ctx.clock()
    p = as_pin(pin)
    if isinstance(scores, (dict, str, bytes)) or not hasattr(scores, "__iter__"):
        raise InvalidArgument("scores must be a list of dicts {metric, value, item, experiment}")
    scores = list(scores)
    if not scores:
        raise InvalidArgument("no scores to record: give at least one")
    record = active(ctx, p.dataset, p.version, CITING)
    check_digest(p, record)
    rows = [_score_row(s, f"score {i}" if len(scores) > 1 else "score", i)
            for i, s in enumerate(scores)]
    trie = ctx.trie()
    for item in sorted({item for _, _, item, _ in rows if item is not None}):
        if not trie.contains(record.content_digest, item):
            raise NotFound(f"case {item} is not in {p.dataset}@{p.version}; a score's item must "
                           "be a case of the version it cites", reason="ITEM_NOT_IN_VERSION",
                           case_id=item, dataset=p.dataset, version=p.version)
    check_scored(ctx, p, {e for _, _, _, e in rows if e is not None})
    batch_scores = [Score(dataset=p.dataset, version=p.version,
                          content_digest=p.content_digest, metric=metric, value=value,
                          item=item, experiment=experiment, author=author, recorded_at=now)
                    for metric, value, item, experiment in rows]
    encoding.check_json(batch_scores)  # e.g. a lone surrogate in a metric name
    _, key = claim(
        ctx, p.dataset, "scores",
        lambda n: ScoreBatch(dataset=p.dataset, number=n, scores=batch_scores,
                             **({} if result is None else {"result": result})),
        lambda head: check_not_deleted(ctx, p.dataset, p.version))
    return [_recorded(key, i, s) for i, s in enumerate(batch_scores)]


def batch_results(ctx, name: str) -> list[tuple[str, frozenset, str]]:
    """(batch key, the experiments its scores name, the digest of the suite result it cites)
    of every score batch of a dataset that cites one, in the order recorded (withdrawn ones
    left out)."""
    datasets.dataset(ctx, name)  # the name checked, NotFound if no such dataset
    withdrawn = withdrawn_batches(ctx, name)
    out = []
    for n, key, entry in read_log(ctx, name, "scores"):
        if isinstance(entry, ScoreBatch) and isinstance(entry.result, str) and \
                n not in withdrawn:
            out.append((key, frozenset(s.experiment for s in entry.scores), entry.result))
    return out


def suite_result(ctx, digest: str) -> SuiteResultRecord:
    """The `suite.result` object `digest` (NotFound if it is not stored)."""
    checks.digest_text(digest, "suite result")
    return ctx.store.get(parse_digest(digest, "suite result"), SuiteResultRecord)


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
    metric = checks.label(s["metric"], "metric")
    value = check_value(s["value"])
    item = s.get("item")
    if item is not None:
        if not isinstance(item, str):
            raise InvalidArgument(f"item {encoding.describe(item)} is not a case id; "
                                  "expected 'b3:' followed by 64 hex digits", index=i)
        item = parse_digest(item, "item")
    experiment = s.get("experiment")
    if experiment is not None:
        experiment = checks.label(experiment, "experiment name")
    return metric, value, item, experiment


def _recorded(key: str, index: int, s: Score, state: str = ACTIVE,
              withdrawn: bool = False) -> RecordedScore:
    return RecordedScore(score_id=score_id(key, index), dataset=s.dataset, version=s.version,
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
    for n, key, i, s in recorded_scores(ctx, name):
        if version is None or s.version == version:
            if s.version not in states:
                retired = ctx.refs.read_retirement(name, s.version)
                states[s.version] = ACTIVE if retired is None else RETIRED
            out.append(_recorded(key, i, s, states[s.version], n in withdrawn))
    return out


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
            isinstance(value, int) and not encoding.int_in_range(value):
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
        raise _value_error(f"score value {text[:40]!r}... is out of range: "
                           f"{encoding.INT_RULE}", text[:40]) from None
    return check_value(number)  # refuses a float that overflows to infinity


def read_score_lines(stream: IO[bytes] | Iterable[bytes], source: str) -> list[dict]:
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


def value_text(value: Any) -> str:
    """A score value as text, the way `parse_value` reads it back: `true`, `0.25`, a label."""
    return value if isinstance(value, str) else encoding.encode(value).decode()


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
