"""Regression runs (cas/evals/evalset/regression.py): a pinned eval set version replayed and its
new scores compared with the baselines; held, regressed, improved, inconclusive and skipped;
exit codes; one score batch citing the version (`cas evalset`, end to end:
tests/cli/test_evalset.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from cas.errors import FailedPrecondition, InvalidArgument
from cas.evals import evalset
from support.evals import AUTHOR, clocked_repo, fill


def scored_set(kinds: str = "fw"):
    repo = clocked_repo()
    es = evalset.open(repo, "es")
    return repo, es, fill(es, kinds, replay_input={"q": "hi"})

def new_run(scenario, system_context):
    return f"new-{scenario.session_id}"

def scorer_of(values: dict):
    """A scorer giving each session's scores from `values` (session -> scores)."""
    return lambda scenario, run_id: values[scenario.session_id]

def test_held_regressed_and_improved_with_a_scorer():
    repo, es, (f0, w1) = scored_set("fw")
    result = evalset.regress(repo, "es@2", new_run, scorer_of(
        {"s0": {"success": 1.0, "extra": "label"}, "s1": {"success": 1.0}}), author=AUTHOR)
    by_id = {r.id: r for r in result.results}
    assert by_id[f0.id].outcome == "improved" and by_id[w1.id].outcome == "held"
    assert by_id[f0.id].new_run_id == "new-s0"
    assert result.exit_code == 0 and result.warnings == ()
    assert result.counts == {"held": 1, "regressed": 0, "improved": 1, "inconclusive": 0,
                             "skipped": 0}
    regressed = evalset.regress(repo, "es@2", new_run, scorer_of(
        {"s0": {"success": 0.0}, "s1": {"success": 0}}), record=False)
    assert [r.outcome for r in regressed.results] == ["held", "regressed"]
    assert regressed.exit_code == evalset.EXIT_WIN_REGRESSED == 12
    assert "success 1.0 -> 0" in regressed.results[1].reason

def test_a_regressed_failure_never_changes_the_exit_code_and_tolerance_and_direction():
    repo, es, (f0, w1) = scored_set("fw")
    es.capture("lat", "win", [], {"latency_s": 2.0, "ok": True}, replay_input="x",
               author=AUTHOR)
    scores = {"s0": {"success": -1.0}, "s1": {"success": 0.95},
              "lat": {"latency_s": 1.0, "ok": True}}
    result = evalset.regress(repo, "es@3", new_run, scorer_of(scores), tolerance=0.1,
                             lower_is_better=["latency_s"], record=False)
    assert [r.outcome for r in result.results] == ["regressed", "held", "improved"]
    assert result.exit_code == 0
    strict = evalset.regress(repo, "es@3", new_run, scorer_of(scores),
                             lower_is_better=["latency_s"], record=False)
    assert [r.outcome for r in strict.results] == ["regressed", "regressed", "improved"]
    higher = evalset.regress(repo, "es@3", new_run, scorer_of(scores), record=False)
    assert higher.results[2].outcome == "regressed"  # latency 2.0 -> 1.0, higher is better

def test_compare_rules():
    assert evalset.compare({}, {"a": 1})[0] == "inconclusive"
    assert evalset.compare({"a": True}, {"a": 0.5})[0] == "regressed"
    assert evalset.compare({"a": False}, {"a": True})[0] == "improved"
    assert evalset.compare({"a": 1}, {"a": "good"})[0] == "inconclusive"
    assert evalset.compare({"a": 1, "b": 0}, {"a": 2, "b": -1}) == \
        ("regressed", "worse: b 0 -> -1")
    outcome, reason = evalset.compare({"a": 1, "b": 1}, {"c": 1})
    assert outcome == "inconclusive" and "'a', 'b'" in reason

async def slow_async(scenario, system_context):
    await asyncio.sleep(5)
    return "never"

def slow_sync(scenario, system_context):
    time.sleep(0.3)
    return "late"

def test_inconclusive_scenarios_never_crash_the_run():
    repo, es, (f0, w1, w2, w3, w4) = scored_set("fwwww")

    def replay(scenario, system_context):
        if scenario.session_id == "s1":
            raise RuntimeError("the agent fell over")
        if scenario.session_id == "s2":
            return scenario.session_id          # not a new run
        if scenario.session_id == "s3":
            return 42                           # not a run id
        return new_run(scenario, system_context)
    result = evalset.regress(repo, "es@5", replay, scorer_of(
        {"s0": {"success": 0.0}, "s4": {"other": 1.0}}), record=False)
    reasons = [r.reason for r in result.results]
    assert [r.outcome for r in result.results] == ["held"] + ["inconclusive"] * 4
    assert "RuntimeError: the agent fell over" in reasons[1]
    assert "own session 's2'" in reasons[2]
    assert "42" in reasons[3]
    assert "lack the baseline metric(s) 'success'" in reasons[4]
    assert result.exit_code == evalset.EXIT_WIN_UNCHECKED == 13

@pytest.mark.parametrize("slow", [slow_async, slow_sync])
def test_a_slow_replay_times_out_as_inconclusive(slow):
    repo, es, _ = scored_set("w")
    started = time.monotonic()
    timed = evalset.regress(repo, "es@1", slow, scorer_of({}), timeout=0.2, record=False)
    assert time.monotonic() - started < 0.28  # stopped waiting at the timeout
    assert timed.results[0].outcome == "inconclusive" and timed.exit_code == 13
    assert "did not return within 0.2 s" in timed.results[0].reason

def test_a_raising_scorer_is_inconclusive():
    repo, es, _ = scored_set("w")

    async def scorer(scenario, run_id):
        raise ValueError("no judge")
    result = evalset.regress(repo, "es@1", new_run, scorer, record=False)
    assert result.results[0].outcome == "inconclusive"
    assert "ValueError: no judge" in result.results[0].reason

def test_without_a_replay_function_every_scenario_is_skipped_with_one_warning():
    repo, es, _ = scored_set("fw")
    es.capture("bare", "failure", [], {"success": 0}, author=AUTHOR)  # not replayable
    result = evalset.regress(repo, "es@3")
    assert result.counts["skipped"] == 3 and result.warnings == (evalset.NO_REPLAY_WARNING,)
    assert result.exit_code == 13 and result.recorded is None  # a win went unchecked
    assert repo.scores("es") == []
    replayed = evalset.regress(repo, "es@3", new_run, scorer_of(
        {"s0": {"success": 0}, "s1": {"success": 1}}), record=False)
    skipped = [r for r in replayed.results if r.outcome == "skipped"]
    assert len(skipped) == 1 and skipped[0].reason.startswith("not replayable")
    assert replayed.warnings == () and replayed.exit_code == 0

def test_scores_are_read_from_the_new_runs_outcome_without_a_scorer():
    repo, es, (w0,) = scored_set("w")
    repo.import_runs([{"run_id": "new-s0", "tenant": "t", "input": "x", "steps": [],
                       "outcome": {"scores": {"success": 1.0}}}])
    result = evalset.regress(repo, "es@1", new_run, record=False)
    assert result.results[0].outcome == "held"
    assert result.results[0].scores == {"success": 1.0}
    missing = evalset.regress(repo, "es@1", lambda s, c: "elsewhere-1", record=False)
    assert missing.results[0].outcome == "inconclusive"
    assert "not a run of this repository" in missing.results[0].reason

def test_results_are_recorded_as_one_batch_citing_the_version():
    repo, es, (f0, w1) = scored_set("fw")
    es.capture("bare", "win", [], {"success": 1}, author=AUTHOR)  # skipped, still labelled
    result = evalset.regress(repo, str(es.pin), new_run, scorer_of(
        {"s0": {"success": 0.0}, "s1": {"success": 1.0}}), author=AUTHOR)
    rec = result.recorded
    assert rec is not None and rec.created and rec.experiment.startswith("regress-")
    assert len(rec.experiment) == len("regress-") + 12
    scores = repo.scores("es", 3)
    assert {s.batch for s in scores} == {rec.batch} and rec.scores == len(scores) == 5
    assert all(s.version == 3 and s.experiment == rec.experiment for s in scores)
    labels = {s.item: s.value for s in scores if s.metric == "regression"}
    assert sorted(labels.values()) == ["held", "held", "skipped"]
    assert [e.name for e in repo.experiments("es")] == [rec.experiment]
    again = evalset.regress(repo, "es@3", new_run, scorer_of(
        {"s0": {"success": 0.0}, "s1": {"success": 1.0}}), author=AUTHOR)
    assert again.recorded.experiment == rec.experiment and not again.recorded.created
    named = evalset.regress(repo, "es@3", new_run, scorer_of(
        {"s0": {"success": 0.0}, "s1": {"success": 1.0}}), experiment="nightly",
        author=AUTHOR)
    assert named.recorded.experiment == "nightly"
    es.capture("later", "failure", [], {"success": 0}, author=AUTHOR)
    with pytest.raises(FailedPrecondition) as refused:  # checked before anything runs
        evalset.regress(repo, "es@4", experiment="nightly", author=AUTHOR)
    assert refused.value.reason == "EXPERIMENT_VERSION_MISMATCH"

def test_a_retired_version_or_a_wrong_source_is_refused():
    repo, es, _ = scored_set("fw")
    pin = str(es.pin)
    repo.retire("es", 2, "contaminated", "leaked into a training mix", author=AUTHOR)
    for source in ("es@2", pin):
        with pytest.raises(FailedPrecondition) as refused:
            evalset.regress(repo, source)
        assert refused.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"
    with pytest.raises(FailedPrecondition) as refused:
        es.capture("new", "failure", [], {"success": 0}, author=AUTHOR)  # not renewed
    assert refused.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"
    with pytest.raises(InvalidArgument):
        evalset.regress(repo, "es")
    with pytest.raises(FailedPrecondition) as mismatch:
        evalset.regress(repo, "es@1#b3:" + "0" * 64)
    assert mismatch.value.reason == "PIN_MISMATCH"
    repo.create_dataset("plain", admission="direct")
    repo.commit("plain", base=None, add=[{"input": 1}])
    with pytest.raises(FailedPrecondition) as refused:
        evalset.regress(repo, "plain@1")
    assert refused.value.reason == "NOT_AN_EVAL_SET"

def test_bad_regression_arguments():
    repo, es, _ = scored_set("w")
    for kwargs in (dict(tolerance=-1), dict(tolerance=float("nan")), dict(timeout=-1),
                   dict(lower_is_better="latency"), dict(replay="mod:fn")):
        with pytest.raises(InvalidArgument):
            evalset.regress(repo, "es@1", **kwargs)


# -- repetitions ------------------------------------------------------------------------------
def test_repeat_passes_the_repetition_and_a_win_failing_one_time_in_five_is_flaky():
    repo, es, (f0, w1) = scored_set("fw")
    seen = []

    def replay(scenario, system_context, *, repetition):
        seen.append((scenario.session_id, repetition))
        return f"new-{scenario.session_id}-{repetition}"

    def scorer(scenario, run_id):
        # the win fails its 4th repetition only; the failure stays failed every time
        if scenario.session_id == "s1":
            return {"success": 0.0 if run_id.endswith("-3") else 1.0}
        return {"success": 0.0}
    result = evalset.regress(repo, "es@2", replay, scorer, repeat=5, author=AUTHOR)
    assert seen == [(s, k) for s in ("s0", "s1") for k in range(5)]
    by_id = {r.id: r for r in result.results}
    win = by_id[w1.id]
    assert win.outcome == "flaky" and result.flaky == (w1.id,)
    assert win.reason.startswith("regressed in 1 of 5 checked repetitions; e.g. worse: success")
    assert [r.outcome for r in win.repetitions] == ["held"] * 3 + ["regressed", "held"]
    assert [r.new_run_id for r in win.repetitions] == [f"new-s1-{k}" for k in range(5)]
    assert by_id[f0.id].outcome == "held"
    assert result.exit_code == 0  # a flaky win alone does not fail the run
    assert result.counts["flaky"] == 1 and result.repeat == 5
    doc = result.to_json()
    assert doc["flaky"] == [w1.id] and doc["repeat"] == 5
    assert [r["outcome"] for r in doc["results"][1]["repetitions"]] == \
        ["held"] * 3 + ["regressed", "held"]
    # recorded: the classification once, and every repetition's scores
    rows = [(s.item, s.metric, s.value) for s in repo.scores("es", 2)
            if s.experiment == result.recorded.experiment]
    assert rows.count((w1.id, "regression", "flaky")) == 1
    assert sorted(v for i, m, v in rows if i == w1.id and m == "success") == [0.0] + [1.0] * 4
    # the experiment of a repeated run is not the one of a single run
    once = evalset.regress(repo, "es@2", new_run, scorer_of(
        {"s0": {"success": 0.0}, "s1": {"success": 1.0}}), author=AUTHOR)
    assert "flaky" not in once.counts and "repeat" not in once.to_json()


def test_a_win_regressing_every_repetition_still_fails_and_an_undeclared_replay_gets_none():
    repo, es, (f0, w1) = scored_set("fw")
    result = evalset.regress(repo, "es@2", new_run, scorer_of(
        {"s0": {"success": 0.0}, "s1": {"success": 0.0}}), repeat=3, record=False)
    assert result.results[1].outcome == "regressed" and result.exit_code == 12
    assert result.results[1].reason.startswith("regressed in 3 of 3 checked repetitions")
    with pytest.raises(InvalidArgument) as e:
        evalset.regress(repo, "es@2", new_run, repeat=0, record=False)
    assert e.value.reason == "INVALID_REPEAT"


def test_classify_rules():
    c = evalset.regression.classify
    assert c(["held", "held"]) == ("held", None)
    assert c(["improved", "improved"]) == ("improved", None)
    assert c(["improved", "held"]) == ("held", None)
    assert c(["regressed", "inconclusive"])[0] == "regressed"
    assert c(["regressed", "held", "inconclusive"]) == \
        ("flaky", "regressed in 1 of 2 checked repetitions (1 not checked)")
    assert c(["skipped", "skipped"]) == ("skipped", None)
    assert c(["inconclusive", "skipped"])[0] == "inconclusive"
