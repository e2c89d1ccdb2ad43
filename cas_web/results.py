"""What the experiments and case pages show of scores: a version's experiments and score
batches, two experiments side by side (charts, per-case differences, answers, the verdict),
and one case's scores across every version and experiment. Read through the library only."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import msgspec
from markupsafe import Markup

from cas.errors import CasError
from cas.evals.suites.compare import compare as compare_results
from cas.evals.suites.compare import headline
from cas.evals.suites.recording import recorded_result
from cas.repo.comparison import MetricAggregate
from cas.repo.repository import Repository
from cas.repo.scores import RecordedScore
from cas_web import charts

DIFFERENCES = 200  # per-case differences a comparison lists (a count says how many more)
ANSWER_CHARS = 300  # characters of an answer shown before "more"


class Batch(NamedTuple):
    """A score batch citing the version: its id, experiments, metrics, how many scores."""

    batch: str
    experiments: list[str]
    metrics: list[str]
    count: int
    author: str
    recorded_at: str
    withdrawn: bool


class Chart(NamedTuple):
    metric: str
    svg: Markup
    a: MetricAggregate
    b: MetricAggregate


class Difference(NamedTuple):
    """One case scored apart on one metric: both values, the size of the change (None when
    the values are not numbers), the case's run (and whether it is recorded here), and each
    experiment's recorded answer (None where it recorded no suite result)."""

    metric: str
    item: str
    a: Any
    b: Any
    size: float | None
    run_id: str | None
    run_recorded: bool
    answer_a: str | None
    answer_b: str | None


class SideBySide(NamedTuple):
    a: str
    b: str
    charts: list[Chart]
    differences: list[Difference]
    total_differences: int
    answers: dict[str, bool]    # experiment -> whether its suite result was recorded
    verdict: str | None         # the comparison's headline, when it could be made
    verdict_note: str | None    # why there is none (or what it warns)
    verdict_detail: Any         # the Comparison, when made


class CaseScore(NamedTuple):
    dataset: str
    version: int
    experiment: str | None
    metric: str
    value: Any
    recorded_at: str
    withdrawn: bool


def batches(scores: list[RecordedScore]) -> list[Batch]:
    """The batches of `scores` (those citing one version), in the order recorded."""
    out: dict[str, list[RecordedScore]] = {}
    for s in scores:
        out.setdefault(s.batch, []).append(s)
    return [Batch(batch=b, experiments=sorted({s.experiment for s in ss if s.experiment}),
                  metrics=sorted({s.metric for s in ss}), count=len(ss), author=ss[0].author,
                  recorded_at=ss[0].recorded_at, withdrawn=ss[0].withdrawn)
            for b, ss in out.items()]


def _values(scores: list[RecordedScore], experiment: str, metric: str) -> list[Any]:
    """The experiment's values of `metric`: each case's last score, and every score that
    names no case."""
    last: dict[str, Any] = {}
    loose: list[Any] = []
    for s in scores:
        if s.experiment == experiment and s.metric == metric and not s.withdrawn:
            if s.item is None:
                loose.append(s.value)
            else:
                last[s.item] = s.value
    return list(last.values()) + loose


def _size(a: Any, b: Any) -> float | None:
    def number(v: Any) -> float | None:
        if isinstance(v, bool):
            return float(v)
        return float(v) if charts.is_number(v) else None
    x, y = number(a), number(b)
    if x is None or y is None:
        return None
    d = abs(y - x)
    return d if math.isfinite(d) else None


def _answers(repo: Repository, name: str, experiment: str) -> dict[str, Any] | None:
    """case id -> the answer of its first repetition in the experiment's recorded suite
    result, or None when the experiment recorded none."""
    try:
        result = recorded_result(repo, f"{name}:{experiment}")
    except CasError:
        return None
    out: dict[str, Any] = {}
    for r in result.results:
        out.setdefault(r.id, r.answer)
    return out


def answer_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode("utf-8", "replace")


def side_by_side(repo: Repository, name: str, number: int, a: str, b: str) -> SideBySide:
    """Two experiments of `name@number` compared: a chart of each metric's distribution in
    each, the per-case differences sorted by size (largest first, then the ones that are not
    numbers), each with its run and both recorded answers, and the suites' verdict."""
    comparison = repo.compare_experiments(name, a, b)
    scores = repo.scores(name, number)
    drawn = [Chart(metric=m.metric, a=m.a, b=m.b,
                   svg=charts.distribution(m.metric, {a: _values(scores, a, m.metric),
                                                      b: _values(scores, b, m.metric)}))
             for m in comparison.metrics]
    diffs = sorted(comparison.differences,
                   key=lambda d: (_size(d.a, d.b) is None, -(_size(d.a, d.b) or 0.0),
                                  d.metric, d.item))
    shown = diffs[:DIFFERENCES]
    answers = {e: _answers(repo, name, e) for e in (a, b)}
    try:
        origins = repo.case_origins(name, number, sorted({d.item for d in shown}))
    except CasError:
        origins = {}

    def answer(e: str, item: str) -> str | None:
        got = answers[e]
        return None if got is None or item not in got else answer_text(got[item])
    runs: dict[str, tuple[str | None, bool]] = {}

    def run_of(item: str) -> tuple[str | None, bool]:
        """The case's run (its promotion's, else the one its bytes name) and whether that run
        is recorded here (then it is one click away)."""
        if item not in runs:
            run_id = getattr(origins.get(item), "run_id", None) or None
            if run_id is None:
                try:
                    run_id = repo.case(name, number, item).run_id
                except CasError:
                    run_id = None
            recorded = False
            if run_id is not None:
                try:
                    repo.run(run_id)
                    recorded = True
                except CasError:
                    pass
            runs[item] = (run_id, recorded)
        return runs[item]
    rows = [Difference(metric=d.metric, item=d.item, a=d.a, b=d.b, size=_size(d.a, d.b),
                       run_id=run_of(d.item)[0], run_recorded=run_of(d.item)[1],
                       answer_a=answer(a, d.item), answer_b=answer(b, d.item))
            for d in shown]
    verdict = note = detail = None
    if answers[a] is None or answers[b] is None:
        missing = [e for e in (a, b) if answers[e] is None]
        note = (f"No verdict: {' and '.join(missing)} recorded no suite result (record one with "
                "`cas suite run --record EXPERIMENT`); the verdict compares two recorded runs.")
    else:
        try:
            detail = compare_results(recorded_result(repo, f"{name}:{a}"),
                                      recorded_result(repo, f"{name}:{b}"), names=(a, b))
            verdict = headline(detail)
            note = "; ".join(detail.warnings) or None
        except CasError as exc:
            note = (f"No verdict: {exc.message}" if exc.reason != "EXTRA_REQUIRED" else
                    "No verdict: the comparison's tests need scipy, from the `stats` extra "
                    "(pip install '.[stats]' in the cas checkout).")
    return SideBySide(a=a, b=b, charts=drawn, differences=rows, total_differences=len(diffs),
                      answers={e: answers[e] is not None for e in (a, b)}, verdict=verdict,
                      verdict_note=note, verdict_detail=detail)


def case_scores(repo: Repository, case_id: str) -> list[CaseScore]:
    """Every score of `case_id` (as its item) in every dataset, version and experiment, by
    dataset, version, experiment and metric, each in the order recorded."""
    out = []
    for name in repo.datasets():
        try:
            found = repo.scores(name)
        except CasError:
            continue
        out += [CaseScore(dataset=s.dataset, version=s.version, experiment=s.experiment,
                          metric=s.metric, value=s.value, recorded_at=s.recorded_at,
                          withdrawn=s.withdrawn) for s in found if s.item == case_id]
    return sorted(out, key=lambda s: (s.dataset, s.version, s.experiment or "", s.metric))
