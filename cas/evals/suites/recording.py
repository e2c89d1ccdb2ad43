"""Recording a suite's result: the whole result stored as a `suite.result` object and its scores
as one batch citing it and the pinned version the suite is of, in an experiment over that
version; and a recorded result read back (docs/suites.md)."""

from __future__ import annotations

from typing import Any, Union

import msgspec

from cas.digest import parse_digest
from cas.errors import AlreadyExists, CasError, CorruptData, InvalidArgument, NotFound
from cas.evals.suites.files import version_pin
from cas.evals.suites.results import (COMPLETED, CaseResult, Shard, SuiteRef, SuiteResult,
                                      as_result, finish)
from cas.format import encoding
from cas.format.records import SuiteRepetition, SuiteResultRecord, encode_object
from cas.format.version_names import Pin, check_dataset_name
from cas.repo import checks
from cas.repo.experiments import check_version
from cas.repo.scores import check_value


class Recorded(msgspec.Struct, frozen=True, kw_only=True):
    """What `record` stored: the experiment (created now or found), the score batch, and the
    digest of the `suite.result` object the batch cites."""

    dataset: str
    version: int
    experiment: str
    created: bool
    batch: Union[str, None]  # the batch id, None when there was nothing to record
    scores: int
    result: Union[str, None] = None  # the suite.result object's digest (None: not stored)


def check_scores(scores: Any) -> tuple[dict | None, str | None]:
    """(the scores, None) when `scores` (what a scorer gave) is a {metric: value} a score
    batch can record (metric names and values as `cas score` takes them), else (None, what is
    wrong, worded to follow "the scorer returned" or "... gave")."""
    if not isinstance(scores, dict):
        return None, f"{encoding.describe(scores)}, not a dict {{metric: value}}"
    checked = {}
    try:
        for metric, value in scores.items():
            checked[checks.label(metric, "metric")] = check_value(value)
    except CasError as exc:
        return None, f"an invalid score: {exc.message}"
    return checked, None


def _pinned(repo, version: str):
    pin = version_pin(version, "only a suite exported from a version (cas suite export, or "
                               "DATASET@N) can be recorded")
    return pin, repo.verify_pin(pin)  # refused if it does not match, or is retired


def check_record(repo, suite: Any, experiment: str):
    """Refuse up front (before a long run) what `record` would refuse: a suite version that is
    not a pin of `repo`, a retired version, case ids that are not case ids, an experiment of
    that name over another version. Returns the pin."""
    ref = suite.suite if isinstance(suite, SuiteResult) else suite
    checks.label(experiment, "experiment name")
    pin, _ = _pinned(repo, ref.version)
    ids = [c.id for c in (suite.results if isinstance(suite, SuiteResult) else suite.cases)]
    for case_id in ids:
        parse_digest(case_id, "case id")
    experiment_over(repo, pin, experiment)
    return pin


def experiment_over(repo, pin, name: str):
    """The experiment `name` of the pinned dataset (None if there is none); refused
    (EXPERIMENT_VERSION_MISMATCH) when it is over another version than the pin's."""
    for e in repo.experiments(pin.dataset):
        if e.name == name:
            return check_version(e, pin.version)
    return None


def _ensure_experiment(repo, pin, experiment: str, author: str | None) -> bool:
    """The experiment over the pinned version exists afterwards; True if this created it."""
    if experiment_over(repo, pin, experiment) is not None:
        return False
    try:
        repo.create_experiment(pin.dataset, pin.version, experiment, author=author)
        return True
    except AlreadyExists:  # created meanwhile by another writer: over which version?
        if experiment_over(repo, pin, experiment) is None:
            raise
        return False


def record_scores_of(repo, pin_text: str, experiment: str, scores: list[dict],
                     author: str | None = None) -> list:
    """Record `scores` (dicts of metric, value, item) as one batch of `experiment` over the
    pinned version `pin_text` (the experiment created if missing; refused if it exists over
    another version, or if the version is retired): what the pytest plugin records."""
    checks.label(experiment, "experiment name")
    pin, _ = _pinned(repo, pin_text)
    _ensure_experiment(repo, pin, experiment, author)
    return repo.record_scores(pin, [{**s, "experiment": experiment} for s in scores],
                              author=author) if scores else []


def record(repo, result: Any, experiment: str, *, scored: bool | None = None,
           author: str | None = None) -> Recorded:
    """Record `result` as one score batch citing its pinned version, in `experiment` (created
    over that version if missing; refused if it exists over another). Each case is the
    score's `item`. With a scorer (`scored`, by default: any case has scores), each
    COMPLETED case's scores; without, a boolean `completed` for every case."""
    result = as_result(result)
    pin = check_record(repo, result, experiment)
    created = _ensure_experiment(repo, pin, experiment, author)
    if scored is None:
        scored = any(r.scores is not None for r in result.results)
    if scored:
        rows = [{"metric": m, "value": v, "item": r.id, "experiment": experiment}
                for r in result.results if r.scores for m, v in sorted(r.scores.items())]
    else:
        rows = [{"metric": "completed", "value": r.outcome == COMPLETED, "item": r.id,
                 "experiment": experiment} for r in result.results]
    batch = stored_result = None
    if rows:
        obj = result_record(result, pin)
        stored = repo.record_scores(pin, rows, author=author, result=obj)
        batch = stored[0].batch
        stored_result = encode_object(obj)[2]
    return Recorded(dataset=pin.dataset, version=pin.version, experiment=experiment,
                    created=created, batch=batch, scores=len(rows), result=stored_result)


def result_record(result: SuiteResult, pin) -> SuiteResultRecord:
    """The `suite.result` object of `result` (a run of the version `pin`): every repetition's
    answer, outcome, reason, scores, run id and seed (a result holds no timings)."""
    shard = None if result.shard is None else \
        [result.shard.index, result.shard.count, result.shard.cases]
    return SuiteResultRecord(
        dataset=pin.dataset, version=pin.version, content_digest=pin.content_digest,
        suite=result.suite.name, seed=result.seed, repeat=result.repeat, shard=shard,
        digest=result.digest,
        results=[SuiteRepetition(id=r.id, position=r.position, repetition=r.repetition,
                                 seed=r.seed, run_id=r.run_id, outcome=r.outcome,
                                 answer=r.answer, reason=r.reason, scores=r.scores)
                 for r in result.results])


# -- recorded results read back ---------------------------------------------------------------
def parse_recorded_source(source: Any) -> tuple[str, str]:
    """`DATASET:EXPERIMENT` -> (dataset, experiment). A dataset name never holds ':', so the
    first ':' splits; the experiment name may hold anything an experiment name may."""
    if isinstance(source, str) and ":" in source:
        dataset, _, experiment = source.partition(":")
        try:
            check_dataset_name(dataset)
            checks.label(experiment, "experiment name")
            return dataset, experiment
        except CasError:
            pass
    raise InvalidArgument(f"{encoding.describe(source)} does not name a recorded experiment: "
                          "DATASET:EXPERIMENT (e.g. support-evals:baseline)",
                          reason="INVALID_RECORDED_SOURCE")


def is_recorded_source(text: Any) -> bool:
    """Whether `text` is spelled as `DATASET:EXPERIMENT` (check for a file of that name
    first: a path may hold ':' too)."""
    try:
        parse_recorded_source(text)
        return True
    except InvalidArgument:
        return False


def recorded_result(repo, source: str) -> SuiteResult:
    """The suite result recorded in experiment EXPERIMENT of DATASET (`source` is
    `DATASET:EXPERIMENT`): the newest score batch of that experiment that cites a
    `suite.result` (withdrawn batches left out), read back as `as_result` would read the
    result file. Refused: NotFound (RECORDED_RESULT_NOT_FOUND) when there is none (the
    experiment does not exist, or was recorded without its result, before cas stored
    results); a retired or deleted version, as every read of one is; a stored result whose
    digest does not match its results (CorruptData)."""
    dataset, experiment = parse_recorded_source(source)
    found = [digest for _, experiments, digest in repo.score_batch_results(dataset)
             if experiment in experiments]
    if not found:
        known = sorted(e.name for e in repo.experiments(dataset))
        raise NotFound(f"experiment {experiment!r} of dataset {dataset!r} has no recorded "
                       "suite result (record one with cas suite run --record "
                       f"{experiment}); experiments: {', '.join(known) or 'none'}",
                       reason="RECORDED_RESULT_NOT_FOUND", dataset=dataset,
                       experiment=experiment)
    try:
        obj = repo.suite_result(found[-1])
    except NotFound:
        # An erasure deletes a result answering its person's cases, after retiring the
        # version: say that, as every read of a retired version does.
        over = next(e for e in repo.experiments(dataset) if e.name == experiment)
        repo.verify_pin(Pin(dataset, over.version, over.content_digest))
        raise
    pin = Pin(obj.dataset, obj.version, obj.content_digest)
    repo.verify_pin(pin)  # refused if retired or deleted
    results = [CaseResult(id=r.id, position=r.position, run_id=r.run_id, outcome=r.outcome,
                          answer=r.answer, reason=r.reason, scores=r.scores,
                          repetition=r.repetition, seed=r.seed) for r in obj.results]
    shard = None if obj.shard is None else Shard(*obj.shard)
    result = finish(SuiteRef(obj.suite, str(pin)), obj.seed, results, shard, obj.repeat)
    if result.digest != obj.digest:
        raise CorruptData(f"the suite result {found[-1]} recorded in {source} does not give "
                          f"its digest {obj.digest} (it gives {result.digest})",
                          key=found[-1])
    return result
