"""Recording a suite's result as scores: one batch citing the pinned version the suite is of, in
an experiment over that version (docs/suites.md)."""

from __future__ import annotations

from typing import Any, Union

import msgspec

from cas.digest import parse_digest
from cas.errors import AlreadyExists, CasError
from cas.evals.suites.files import version_pin
from cas.evals.suites.results import COMPLETED, SuiteResult, as_result
from cas.format import encoding
from cas.repo import checks
from cas.repo.experiments import check_version
from cas.repo.scores import check_value


class Recorded(msgspec.Struct, frozen=True, kw_only=True):
    """What `record` stored: the experiment (created now or found), and the score batch."""

    dataset: str
    version: int
    experiment: str
    created: bool
    batch: Union[str, None]  # the batch id, None when there was nothing to record
    scores: int


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
    batch = None
    if rows:
        stored = repo.record_scores(pin, rows, author=author)
        batch = stored[0].batch
    return Recorded(dataset=pin.dataset, version=pin.version, experiment=experiment,
                    created=created, batch=batch, scores=len(rows))
