"""Regression runs: every scenario of a pinned eval set version replayed, its new scores compared
with its baselines, the outcomes recorded as one score batch (docs/evalset.md)."""

from __future__ import annotations

import asyncio
import math
import numbers
from typing import Any, Callable, Iterable

import msgspec
from blake3 import blake3

from cas.digest import EVALSET_REGRESSION_DOMAIN
from cas.errors import CasError, FailedPrecondition, InvalidArgument, NotFound
from cas.evals.calls import TimedOut, call, clean_reason, exception_text
from cas.evals.evalset.scenarios import OUTCOME_METRIC, WIN, Scenario, check_evalset, read_version
from cas.evals.suites.executors import takes_keyword
from cas.evals.suites.recording import check_scores, experiment_over, record_scores_of
from cas.evals.suites.results import check_repeat
from cas.format import encoding
from cas.format.version_names import Pin, as_pin, parse_version_name
from cas.repo import checks

HELD, REGRESSED, IMPROVED, INCONCLUSIVE, SKIPPED = OUTCOMES = (
    "held", "regressed", "improved", "inconclusive", "skipped")
# With repetitions (repeat > 1), a scenario whose checked repetitions disagree on whether it
# regressed: reported, never by itself a failing exit code.
FLAKY = "flaky"
# The exit codes of a regression run. They sit above the CLI's error codes (1-8) and beside the
# suite runner's 10 and 11 (cas.runner): 12 when a win regressed (something that worked is
# broken), else 13 when a win could not be checked (inconclusive or skipped: not green either).
# Failures never change it: they are things to fix, and a failure that still fails is no news.
EXIT_OK, EXIT_WIN_REGRESSED, EXIT_WIN_UNCHECKED = 0, 12, 13
NO_REPLAY_WARNING = "no replay function: nothing was re-run; every scenario is skipped"


class Repetition(msgspec.Struct, frozen=True, kw_only=True):
    """One repetition of a scenario under `repeat` > 1: its outcome, scores, reason, run."""

    repetition: int
    outcome: str
    scores: dict[str, Any] | None
    reason: str | None = None
    new_run_id: str | None = None


class ScenarioResult(msgspec.Struct, frozen=True, kw_only=True):
    """One scenario of a regression run. `scores` are the new run's (None when there are
    none; with repetitions, the last checked repetition's); `reason` says why it is not
    `held` (None when there is nothing to say). With repetitions, `repetitions` holds each
    one and `outcome` is their classification (`classify`)."""

    id: str
    kind: str
    outcome: str
    scores: dict[str, Any] | None
    baseline: dict[str, Any]
    reason: str | None = None
    new_run_id: str | None = None
    repetitions: tuple[Repetition, ...] | None = None


class RegressionBatch(msgspec.Struct, frozen=True, kw_only=True):
    """The score batch a regression run recorded: in `experiment` (created by this run, or
    found), its id, and how many scores it holds."""

    experiment: str
    created: bool
    batch: str
    scores: int


class RegressionResult(msgspec.Struct, frozen=True, kw_only=True):
    evalset: str
    version: int
    results: tuple[ScenarioResult, ...]
    counts: dict[str, int]
    warnings: tuple[str, ...]
    exit_code: int
    recorded: RegressionBatch | None = None  # the score batch, when one was recorded
    repeat: int = 1

    @property
    def flaky(self) -> tuple[str, ...]:
        """The ids of the flaky scenarios."""
        return tuple(r.id for r in self.results if r.outcome == FLAKY)

    def to_json(self) -> dict[str, Any]:
        """With one repetition, the shape it always had; with more, each result also holds
        its `repetitions`, and `repeat` and `flaky` are added."""
        out = {"evalset": self.evalset, "version": self.version,
               "results": [{"id": r.id, "kind": r.kind, "outcome": r.outcome,
                            "scores": r.scores, "baseline": r.baseline, "reason": r.reason}
                           for r in self.results],
               "counts": dict(self.counts), "warnings": list(self.warnings),
               "exit_code": self.exit_code}
        if self.repeat > 1:
            for entry, r in zip(out["results"], self.results):
                entry["repetitions"] = msgspec.to_builtins(r.repetitions or ())
            out["repeat"], out["flaky"] = self.repeat, list(self.flaky)
        return out


def compare(baseline: dict[str, Any], scores: dict[str, Any],
            lower_is_better: Iterable[str] = (), tolerance: float = 0.0) -> tuple[str, str | None]:
    """(outcome, reason) of new `scores` against `baseline`, metric by metric of the baseline:
    higher is better unless the metric is in `lower_is_better`; `regressed` if any is worse by
    more than `tolerance`, else `improved` if any is better by more than it, else `held`. A
    missing metric, a label value or an empty baseline is `inconclusive`. Bools count 0/1."""
    if not baseline:
        return INCONCLUSIVE, "the scenario has no baseline scores to compare with"
    missing = sorted(m for m in baseline if m not in scores)
    if missing:
        return INCONCLUSIVE, ("the new scores lack the baseline metric(s) "
                              f"{', '.join(repr(m) for m in missing)}")
    lower = set(lower_is_better)
    worse, better = [], []
    for metric in sorted(baseline):
        old, new = baseline[metric], scores[metric]
        if not _comparable(old) or not _comparable(new):
            return INCONCLUSIVE, (f"metric {metric!r}: {encoding.describe(old)} and "
                                  f"{encoding.describe(new)} cannot be compared (numbers "
                                  "and bools can)")
        delta = float(new) - float(old)
        if metric in lower:
            delta = -delta
        change = f"{metric} {_shown(old)} -> {_shown(new)}"
        if delta < -tolerance:
            worse.append(change)
        elif delta > tolerance:
            better.append(change)
    if worse:
        return REGRESSED, "worse: " + "; ".join(worse)
    if better:
        return IMPROVED, "better: " + "; ".join(better)
    return HELD, None


def _comparable(value: Any) -> bool:
    return isinstance(value, bool) or isinstance(value, numbers.Real) and \
        math.isfinite(float(value))


def _shown(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value)


def classify(outcomes: Iterable[str]) -> tuple[str, str | None]:
    """(outcome, reason) of a scenario from its repetitions' outcomes: the checked ones
    (held, regressed, improved) decide. None checked: skipped if all were skipped, else
    inconclusive. All regressed: regressed. Some regressed and some not: flaky (it fails
    only sometimes: named, never by itself failing the run). Else improved if every checked
    one improved, else held."""
    outcomes = list(outcomes)
    checked = [o for o in outcomes if o in (HELD, REGRESSED, IMPROVED)]
    n = len(outcomes)
    if not checked:
        if all(o == SKIPPED for o in outcomes):
            return SKIPPED, None
        return INCONCLUSIVE, f"none of the {n} repetitions could be checked"
    bad = checked.count(REGRESSED)
    tally = f"regressed in {bad} of {len(checked)} checked repetitions" + \
        (f" ({n - len(checked)} not checked)" if len(checked) < n else "")
    if bad == len(checked):
        return REGRESSED, tally
    if bad:
        return FLAKY, tally
    if all(o == IMPROVED for o in checked):
        return IMPROVED, None
    return HELD, None


def exit_code(results: Iterable[ScenarioResult]) -> int:
    """12 if any win regressed, else 13 if any win is inconclusive or skipped, else 0 (a
    flaky win is neither)."""
    wins = [r.outcome for r in results if r.kind == WIN]
    if REGRESSED in wins:
        return EXIT_WIN_REGRESSED
    if INCONCLUSIVE in wins or SKIPPED in wins:
        return EXIT_WIN_UNCHECKED
    return EXIT_OK


def regress(repo, source: Any, replay: Callable | None = None, scorer: Callable | None = None,
            *, timeout: float | None = None, system_context: str = "",
            lower_is_better: Iterable[str] = (), tolerance: float = 0.0, record: bool = True,
            author: str | None = None, experiment: str | None = None,
            repeat: int = 1) -> RegressionResult:
    """Replay every scenario of the eval set version `source` (`NAME@N`, or its pin) and
    compare the new scores with the baselines (docs/evalset.md); with `repeat` N, N times
    each (a replay function that declares a `repetition` parameter gets it), classified by
    `classify`. Blocking; from inside an event loop, `await regress_async(...)`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise FailedPrecondition("cas.evalset.regress was called inside a running event loop; "
                                 "await cas.evalset.regress_async(...) there",
                                 reason="EVENT_LOOP_RUNNING")
    return asyncio.run(regress_async(
        repo, source, replay, scorer, timeout=timeout, system_context=system_context,
        lower_is_better=lower_is_better, tolerance=tolerance, record=record, author=author,
        experiment=experiment, repeat=repeat))


async def regress_async(repo, source: Any, replay: Callable | None = None,
                        scorer: Callable | None = None, *, timeout: float | None = None,
                        system_context: str = "", lower_is_better: Iterable[str] = (),
                        tolerance: float = 0.0, record: bool = True, author: str | None = None,
                        experiment: str | None = None, repeat: int = 1) -> RegressionResult:
    """`regress`, as a coroutine."""
    check_repeat(repeat)
    for fn, what in ((replay, "replay"), (scorer, "scorer")):
        if fn is not None and not callable(fn):
            raise InvalidArgument(f"{what} must be a function (sync or async) or None, not "
                                  f"{encoding.describe(fn)}", field=what)
    checks.seconds(timeout, "timeout", optional=True)
    encoding.check_text(system_context, "system_context")
    lower = [checks.label(m, "lower_is_better metric")
             for m in checks.strings(lower_is_better, "lower_is_better", "metric names")]
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or \
            not math.isfinite(tolerance) or tolerance < 0:
        raise InvalidArgument(f"tolerance must be a finite number >= 0, not "
                              f"{encoding.describe(tolerance)}", field="tolerance")
    if not isinstance(record, bool):
        raise InvalidArgument(f"record must be a bool, not {encoding.describe(record)}",
                              field="record")
    author = checks.author(author)
    pin = _source_pin(repo, source)
    check_evalset(repo.dataset(pin.dataset))
    if experiment is None:
        experiment = experiment_name(pin, replay, scorer, system_context, lower, tolerance,
                                     repeat)
    checks.label(experiment, "experiment name")
    if record:
        experiment_over(repo, pin, experiment)  # before, not after, the run
    corpus = read_version(repo, pin.dataset, pin.version)
    warnings = [] if replay is not None else [NO_REPLAY_WARNING]
    results = []
    takes = replay is not None and takes_keyword(replay, "repetition")
    for scenario in corpus.scenarios:  # sequential: one replay at a time
        if repeat == 1:
            results.append(await _regress_one(repo, scenario, replay, scorer, timeout,
                                              system_context, lower, float(tolerance)))
            continue
        reps = []
        for k in range(repeat):
            one = await _regress_one(repo, scenario, replay, scorer, timeout, system_context,
                                     lower, float(tolerance), k if takes else None)
            reps.append(Repetition(repetition=k, outcome=one.outcome, scores=one.scores,
                                   reason=one.reason, new_run_id=one.new_run_id))
        outcome, reason = classify(r.outcome for r in reps)
        last = next((r for r in reversed(reps) if r.scores is not None), reps[-1])
        # an example of what happened: the first regressed repetition's reason, else the first
        example = next((r for r in reps if r.outcome == REGRESSED), reps[0]).reason
        if outcome == IMPROVED:
            reason = last.reason
        elif outcome == SKIPPED:
            reason = example
        elif reason is not None and example:
            reason = clean_reason(f"{reason}; e.g. {example}")
        results.append(ScenarioResult(id=scenario.id, kind=scenario.kind, outcome=outcome,
                                      scores=last.scores, reason=reason,
                                      baseline=dict(scenario.baseline_scores),
                                      new_run_id=last.new_run_id, repetitions=tuple(reps)))
    counts = {o: sum(r.outcome == o for r in results)
              for o in (OUTCOMES if repeat == 1 else OUTCOMES + (FLAKY,))}
    recorded = None
    if record and any(r.scores is not None or r.repetitions for r in results):
        recorded = _record(repo, pin, experiment, results, author)
    return RegressionResult(evalset=pin.dataset, version=pin.version, results=tuple(results),
                            counts=counts, warnings=tuple(warnings),
                            exit_code=exit_code(results), recorded=recorded, repeat=repeat)


def _source_pin(repo, source: Any) -> Pin:
    """The ACTIVE version `source` names: `NAME@N` or the pin `NAME@N#b3:...` (verified)."""
    if isinstance(source, Pin):
        repo.verify_pin(source)
        return as_pin(source)
    try:
        name = parse_version_name(source)
    except InvalidArgument as exc:
        raise encoding.in_context(exc, "source", field="source") from None
    if name.content_digest is not None:
        pin = Pin(*name)
        repo.verify_pin(pin)  # a pin that no longer matches, or a retired version: refused
        return pin
    return repo.pin(name.dataset, name.version)


def experiment_name(pin: Pin, replay, scorer, system_context: str, lower: list[str],
                     tolerance: float, repeat: int = 1) -> str:
    """`regress-` + 12 hex digits of the run's inputs: the same run over the same version
    records into the same experiment. The inputs are hashed in a domain of their own, as every
    derived identifier is (docs/format.md 3.1; docs/evalset.md gives the derivation); `repeat`
    is among them only above 1 (so a run without repetitions keeps its name)."""
    inputs = {"pin": str(pin), "replay": _callable_name(replay), "scorer": _callable_name(scorer),
              "system_context": system_context, "lower_is_better": sorted(set(lower)),
              "tolerance": float(tolerance)}
    if repeat != 1:
        inputs["repeat"] = repeat
    h = blake3(EVALSET_REGRESSION_DOMAIN)
    h.update(encoding.encode(inputs))
    return "regress-" + h.hexdigest()[:12]


def _callable_name(fn: Callable | None) -> str | None:
    if fn is None:
        return None
    module = getattr(fn, "__module__", None) or type(fn).__module__
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return clean_reason(f"{module}:{name}")


def _record(repo, pin: Pin, experiment: str, results: list[ScenarioResult],
            author: str) -> RegressionBatch:
    """One score batch citing the version: per scenario its outcome as the label
    `regression`, and each new score (with repetitions, each repetition's, in order)."""
    created = all(e.name != experiment for e in repo.experiments(pin.dataset))
    rows = []
    for r in results:
        rows.append({"metric": OUTCOME_METRIC, "value": r.outcome, "item": r.id})
        for scores in ([r.scores] if r.repetitions is None else
                       [rep.scores for rep in r.repetitions]):
            rows += [{"metric": m, "value": v, "item": r.id}
                     for m, v in sorted((scores or {}).items())]
    stored = record_scores_of(repo, str(pin), experiment, rows, author=author)
    return RegressionBatch(experiment=experiment, created=created, batch=stored[0].batch,
                           scores=len(stored))


async def _regress_one(repo, scenario: Scenario, replay, scorer, timeout: float | None,
                       system_context: str, lower: list[str], tolerance: float,
                       repetition: int | None = None) -> ScenarioResult:
    def result(outcome: str, reason: str | None, scores: dict | None = None,
               run_id: str | None = None) -> ScenarioResult:
        return ScenarioResult(id=scenario.id, kind=scenario.kind, outcome=outcome,
                              scores=scores, baseline=dict(scenario.baseline_scores),
                              reason=None if reason is None else clean_reason(reason),
                              new_run_id=run_id)
    if scenario.replay_input is None:
        return result(SKIPPED, "not replayable: the scenario has no replay input "
                               "(attach one with attach_input)")
    if replay is None:
        return result(SKIPPED, "no replay function")
    try:
        run_id = await call(replay, (scenario, system_context),
                            None if repetition is None else {"repetition": repetition},
                            timeout=timeout)
    except TimedOut:
        return result(INCONCLUSIVE, f"the replay function did not return within {timeout} s")
    except Exception as exc:
        return result(INCONCLUSIVE, f"the replay function raised {exception_text(exc)}")
    if not isinstance(run_id, str) or not run_id:
        return result(INCONCLUSIVE, f"the replay function returned {encoding.describe(run_id)}, "
                                    "not a new run id (a non-empty string)")
    if run_id == scenario.session_id:
        return result(INCONCLUSIVE, f"the replay function returned the scenario's own session "
                                    f"{run_id!r}, not a new run: nothing was re-run",
                      run_id=run_id)
    if scorer is not None:
        try:
            scores = await call(scorer, (scenario, run_id), timeout=timeout)
        except TimedOut:
            return result(INCONCLUSIVE, f"the scorer did not return within {timeout} s",
                          run_id=run_id)
        except Exception as exc:
            return result(INCONCLUSIVE, f"the scorer raised {exception_text(exc)}",
                          run_id=run_id)
        where = "the scorer"
    else:
        try:
            outcome = repo.run(run_id).outcome
        except NotFound:
            return result(INCONCLUSIVE, f"no scorer, and the new run {run_id!r} is not a run of "
                                        "this repository", run_id=run_id)
        except CasError as exc:
            return result(INCONCLUSIVE, f"the new run {run_id!r} cannot be read: {exc.message}",
                          run_id=run_id)
        scores = outcome.get("scores") if isinstance(outcome, dict) else None
        if scores is None:
            return result(INCONCLUSIVE, f"no scorer, and the new run {run_id!r} records no "
                                        "outcome.scores", run_id=run_id)
        where = "the new run's outcome.scores"
    checked, problem = check_scores(scores)
    if problem is None and OUTCOME_METRIC in checked:
        problem = f"the metric {OUTCOME_METRIC!r}, which the runner records each outcome as"
    if problem is not None:
        return result(INCONCLUSIVE, f"{where} gave {problem}", run_id=run_id)
    outcome, reason = compare(scenario.baseline_scores, checked, lower, tolerance)
    return result(outcome, reason, scores=checked, run_id=run_id)
