"""Eval sets (cas/evalset.py): capture, dedup, eviction at capacity, the full-of-wins refusal,
attached inputs, and regression runs with their outcomes, exit codes and recorded scores."""

from __future__ import annotations

import asyncio
import itertools
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.evals import evalset
from cas.storage.backends.memory import MemoryBackend
from cas.evals.capture.records import CaptureRecord, RecordedTool
from cas.errors import FailedPrecondition, InvalidArgument, NotFound, VersionConflict

AUTHOR = "ada@example.com"


def ticking_clock():
    """A clock one second later at each call: captures have a strict order."""
    ticks = itertools.count()

    def clock() -> str:
        i = next(ticks)
        return f"2026-12-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000000Z"
    return clock


def new_repo():
    return cas.Repository.create(MemoryBackend(), clock=ticking_clock())


def fill(es, kinds: str, replay_input=None):
    """One scenario per letter of `kinds` (f: failure, w: win), sessions s0, s1, ..."""
    out = []
    for i, k in enumerate(kinds):
        kind = "failure" if k == "f" else "win"
        out.append(es.capture(f"s{i}", kind, [f"label{i % 2}"],
                              {"success": 0.0 if kind == "failure" else 1.0},
                              replay_input=replay_input, author=AUTHOR))
    return out


def record(**changes) -> CaptureRecord:
    fields = dict(id="r1", captured_at="2026-12-01T10:00:00.000000Z", agent_name="support",
                  invocation_id="i1", reasons=("rule",), status="failed",
                  error_type="TimeoutError", content="omitted")
    return CaptureRecord(**{**fields, **changes})


# -- the eval set -------------------------------------------------------------------------------
def test_open_creates_a_tagged_direct_dataset_and_refuses_another_dataset():
    repo = new_repo()
    es = evalset.open(repo, "regressions")
    assert es.version is None and es.pin is None and es.cases() == []
    d = repo.dataset("regressions")
    assert d.tags == ["evalset"] and d.admits == "direct"
    repo.create_dataset("plain", admission="direct")
    with pytest.raises(FailedPrecondition) as refused:
        evalset.open(repo, "plain")
    assert refused.value.reason == "NOT_AN_EVAL_SET"
    with pytest.raises(NotFound):
        evalset.open(repo, "missing", create=False)


def test_every_change_seals_a_version_and_a_capture_again_seals_nothing():
    repo = new_repo()
    es = evalset.open(repo, "es")
    a = es.capture("s1", "failure", ["b", "a", "b"], {"success": 0.0}, notes="n",
                   author=AUTHOR)
    assert es.version == 1 and a.signature == ("a", "b") and a.session_id == "s1"
    again = es.capture_report("s1", "failure", ["a", "b"], {"success": 1.0}, author=AUTHOR)
    assert again.scenario == a and not again.sealed and es.version == 1
    es.capture("s1", "win", ["a", "b"], {"success": 1.0}, author=AUTHOR)   # another kind
    es.capture("s1", "failure", ["a"], {"success": 0.0}, author=AUTHOR)    # another signature
    assert es.version == 3 and len(es.cases()) == 3
    assert str(es.pin) == str(repo.pin("es", 3))
    case = repo.case("es", 1, a.id)
    assert case.tenant == "evalset" and case.metadata["evalset"]["kind"] == "failure"
    assert cas.encode_case(case).case_id == a.id


def test_notes_are_scrubbed():
    es = evalset.open(new_repo(), "es")
    s = es.capture("s1", "failure", [], {"success": 0}, notes="write to bob@example.com",
                   author=AUTHOR)
    assert "bob@example.com" not in s.notes and "[REDACTED:email]" in s.notes


def test_at_capacity_the_oldest_failures_are_evicted_in_the_same_commit():
    repo = new_repo()
    es = evalset.open(repo, "es", capacity=3)
    f0, w1, f2 = fill(es, "fwf")
    report = es.capture_report("s9", "failure", [], {"success": 0.0}, author=AUTHOR)
    assert report.evicted == (f0.id,) and report.version == 4
    v = repo.version("es", 4)
    assert (v.added, v.removed, v.item_count) == (1, 1, 3)
    assert [s.id for s in es.cases()] == [w1.id, f2.id, report.scenario.id]
    es.capture("s10", "win", [], {"success": 1.0}, author=AUTHOR)   # a win evicts a failure too
    assert [s.kind for s in es.cases()] == ["win", "failure", "win"]
    assert f2.id not in [s.id for s in es.cases()]


def test_wins_are_never_evicted_and_a_corpus_full_of_wins_refuses():
    repo = new_repo()
    es = evalset.open(repo, "es", capacity=2)
    wins = fill(es, "ww")
    for kind in ("failure", "win"):
        with pytest.raises(FailedPrecondition) as refused:
            es.capture("new", kind, [], {"success": 0.0}, author=AUTHOR)
        assert refused.value.reason == "EVAL_SET_FULL_OF_WINS"
        assert refused.value.fields["wins"] == 2
    assert es.version == 2 and [s.id for s in es.cases()] == [w.id for w in wins]
    # a capture already held is still answered: nothing needs room
    assert es.capture("s0", "win", ["label0"], {"success": 1.0}, author=AUTHOR) == wins[0]


def test_a_smaller_capacity_evicts_enough_failures_or_refuses():
    repo = new_repo()
    big = evalset.open(repo, "es", capacity=10)
    f0, f1, w2, f3 = fill(big, "ffwf")
    small = evalset.open(repo, "es", capacity=2)
    report = small.capture_report("x", "failure", [], {"success": 0}, author=AUTHOR)
    assert report.evicted == tuple(sorted([f0.id, f1.id, f3.id]))
    assert [s.id for s in small.cases()] == [w2.id, report.scenario.id]


def test_attach_input_replaces_the_case_in_a_new_version():
    repo = new_repo()
    es = evalset.open(repo, "es")
    old = es.capture("s1", "failure", ["x"], {"success": 0}, author=AUTHOR)
    new = es.attach_input(old.id, {"input_text": "hello"}, author=AUTHOR)
    assert new.id != old.id and new.replay_input == {"input_text": "hello"}
    assert (new.session_id, new.signature, new.captured_at) == \
        (old.session_id, old.signature, old.captured_at)
    assert es.version == 2 and [s.id for s in es.cases()] == [new.id]
    assert es.attach_input(new.id, {"input_text": "hello"}, author=AUTHOR) == new
    assert es.version == 2  # the same input again seals nothing
    with pytest.raises(NotFound) as missing:
        es.attach_input(old.id, "x", author=AUTHOR)
    assert missing.value.reason == "SCENARIO_NOT_FOUND"
    with pytest.raises(InvalidArgument):
        es.attach_input(new.id, None, author=AUTHOR)


def test_matching_gives_failures_holding_every_label_newest_first_and_kind_filters():
    es = evalset.open(new_repo(), "es")
    a = es.capture("s1", "failure", ["tool_failed:search", "failed"], {"s": 0}, author=AUTHOR)
    b = es.capture("s2", "failure", ["tool_failed:search"], {"s": 0}, author=AUTHOR)
    es.capture("s3", "win", ["tool_failed:search", "failed"], {"s": 1}, author=AUTHOR)
    c = es.capture("s4", "failure", ["failed"], {"s": 0}, author=AUTHOR)
    assert es.matching(["tool_failed:search"]) == [b, a]
    assert es.matching(["failed", "tool_failed:search"]) == [a]
    assert es.matching(["nothing"]) == []
    assert [s.id for s in es.cases("failure")] == [a.id, b.id, c.id]
    assert [s.session_id for s in es.cases("win")] == ["s3"]
    with pytest.raises(InvalidArgument):
        es.matching([])
    with pytest.raises(InvalidArgument):
        es.cases("loss")


def test_capture_failure_from_a_capture_record():
    repo = new_repo()
    es = evalset.open(repo, "es")
    s = es.capture_failure(record(), author=AUTHOR)
    assert s.kind == "failure" and s.session_id == "capture-r1"
    assert s.signature == ("error_type:TimeoutError", "failed")
    assert s.baseline_scores == {"success": 0.0} and s.replay_input is None  # omitted
    assert s.notes == "agent support: failed (TimeoutError)"
    person = "pk:" + "ab" * 32
    redacted = record(id="r2", status="completed", error_type=None, content="redacted",
                      input_text="where is [REDACTED:email]'s order?", person=person,
                      tool_calls=(RecordedTool(name="search", failed=True),
                                  RecordedTool(name="open", failed=False)))
    t = es.capture_failure(redacted, author=AUTHOR)
    assert t.signature == ("tool_failed:search",)
    assert t.replay_input == {"input_text": "where is [REDACTED:email]'s order?"}
    assert repo.case("es", es.version, t.id).person == person
    assert es.capture_failure(redacted, author=AUTHOR) == t  # dedup
    with pytest.raises(InvalidArgument):
        es.capture_failure({"id": "r1"}, author=AUTHOR)


@pytest.mark.parametrize("args,field", [
    (dict(kind="loss"), "kind"),
    (dict(signature="failed"), "signature"),
    (dict(signature=["ok", ""]), "signature"),
    (dict(baseline_scores={"success": "high"}), "baseline_scores"),
    (dict(baseline_scores={"success": float("nan")}), "baseline_scores"),
    (dict(baseline_scores=[("success", 1)]), "baseline_scores"),
    (dict(baseline_scores={"regression": 1}), "baseline_scores"),
    (dict(session_id=""), "session_id"),
])
def test_bad_arguments_are_refused_naming_the_field_and_nothing_is_sealed(args, field):
    es = evalset.open(new_repo(), "es")
    given = {"session_id": "s", "kind": "failure", "signature": ["a"],
             "baseline_scores": {"success": 0}, **args}
    with pytest.raises(InvalidArgument) as refused:
        es.capture(**given, author=AUTHOR)
    assert refused.value.fields.get("field") == field
    assert es.version is None


def test_other_bad_arguments():
    repo = new_repo()
    with pytest.raises(InvalidArgument):
        evalset.open(repo, "es", capacity=0)
    with pytest.raises(InvalidArgument):
        evalset.open(repo, "es", capacity=True)
    es = evalset.open(repo, "es")
    with pytest.raises(InvalidArgument):
        es.capture("s", "win", [], {"s": 1}, replay_input={"x": float("inf")}, author=AUTHOR)


def test_a_conflicting_writer_is_retried_and_dedup_is_checked_again():
    repo = new_repo()
    es = evalset.open(repo, "es")
    other = evalset.open(repo, "es")
    commit, calls = repo.commit, []

    def racing_commit(*args, **kwargs):
        calls.append(kwargs["base"])
        if len(calls) == 1:  # another writer captures the same scenario first
            repo.commit = commit
            other.capture("s1", "failure", ["a"], {"success": 0}, author=AUTHOR)
            repo.commit = racing_commit
        return commit(*args, **kwargs)
    repo.commit = racing_commit
    report = es.capture_report("s1", "failure", ["a"], {"success": 0}, author=AUTHOR)
    assert calls == [0] and not report.sealed and es.version == 1
    report = es.capture_report("s2", "failure", ["a"], {"success": 0}, author=AUTHOR)
    assert report.sealed and report.version == 2

    def always_conflicts(*args, **kwargs):
        raise VersionConflict("es", 2, 3)
    repo.commit = always_conflicts
    with pytest.raises(VersionConflict):
        es.capture("s3", "failure", [], {"success": 0}, author=AUTHOR)


def test_an_erasure_deletes_the_persons_scenarios_and_the_next_capture_renews():
    repo = new_repo()
    es = evalset.open(repo, "es")
    kept = es.capture("s1", "failure", [], {"success": 0}, author=AUTHOR)
    es.capture("s2", "failure", [], {"success": 0}, person="user-42", author=AUTHOR)
    preview = repo.erase("user-42", author=AUTHOR)
    repo.erase("user-42", preview["confirm_token"], author=AUTHOR)
    assert repo.version_state("es", 2) == "RETIRED"
    with pytest.raises(FailedPrecondition):
        es.cases()
    assert es.renew(author=AUTHOR) == 3 and es.renew(author=AUTHOR) is None
    assert [s.id for s in es.cases()] == [kept.id]


def test_erasing_the_user_of_a_capture_record_deletes_its_scenario():
    repo = new_repo()
    es = evalset.open(repo, "es")
    # a capture record names the store's keyed digest of its user, never the user id
    digest = repo.store.person_digest("user-7")
    kept = es.capture("s1", "win", [], {"success": 1}, author=AUTHOR)
    es.capture_failure(record(person=digest), author=AUTHOR)
    preview = repo.erase("user-7", author=AUTHOR)
    assert len(preview["cases"]) == 1
    repo.erase("user-7", preview["confirm_token"], author=AUTHOR)
    es.capture("s2", "win", [], {"success": 1}, author=AUTHOR)  # renews the retired head first
    assert [s.session_id for s in es.cases()] == ["s1", "s2"] and es.cases()[0] == kept
    assert es.version == 4


# -- regression runs -------------------------------------------------------------------------
def scored_set(kinds: str = "fw"):
    repo = new_repo()
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


# -- the invariant ---------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(capacity=st.integers(1, 4),
       captures=st.lists(st.tuples(st.sampled_from(["failure", "win"]), st.integers(0, 5)),
                         max_size=10))
def test_the_corpus_never_exceeds_capacity_and_no_win_is_ever_evicted(capacity, captures):
    repo = new_repo()
    es = evalset.open(repo, "es", capacity=capacity)
    wins: set[str] = set()
    for kind, session in captures:
        head = es.version
        try:
            report = es.capture_report(f"s{session}", kind, [], {"m": 1}, author=AUTHOR)
        except FailedPrecondition as exc:
            assert exc.reason == "EVAL_SET_FULL_OF_WINS" and len(wins) >= capacity
            assert es.version == head  # nothing sealed
            continue
        if report.scenario.kind == "win":
            wins.add(report.scenario.id)
        held = {s.id for s in es.cases()}
        assert len(held) <= capacity and wins <= held
        assert es.version == (head if not report.sealed else report.version)


# -- the CLI ----------------------------------------------------------------------------------
REPLAY_MODULE = '''
def replay(scenario, system_context):
    return "new-" + scenario.session_id + ("-ctx" if system_context else "")

def score(scenario, run_id):
    return {"success": 0.0 if run_id.endswith("-ctx") else 1.0}
'''


def test_cli_capture_list_show_matching_attach_and_regress(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cas_cli.main import cli
    monkeypatch.setenv("CAS_USER", AUTHOR)
    location = str(tmp_path / "repo")
    cas.init(location)
    (tmp_path / "evalset_cli_agent.py").write_text(REPLAY_MODULE)
    monkeypatch.chdir(tmp_path)

    def run(*args):
        return CliRunner().invoke(cli, ["--repo", location, *args], catch_exceptions=False)

    def ok(*args):
        r = run(*args, "--json")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)
    win = ok("evalset", "capture", "es", "--session", "s1", "--kind", "win", "--signature",
             "refund", "--baseline", "success=1", "--replay-input", '{"q": "refund"}')
    assert win["sealed"] and win["version"] == 1 and win["evicted"] == []
    assert win["scenario"]["baseline_scores"] == {"success": 1}
    fail = ok("evalset", "capture", "es", "--session", "s2", "--kind", "failure",
              "--signature", "tool_failed:search", "--signature", "failed",
              "--baseline", "success=0", "--notes", "call +1 415 555 0100")
    assert "555" not in fail["scenario"]["notes"]
    again = ok("evalset", "capture", "es", "--session", "s2", "--kind", "failure",
               "--signature", "failed", "--signature", "tool_failed:search",
               "--baseline", "success=0")
    assert not again["sealed"] and again["version"] == 2
    listed = ok("evalset", "list", "es")
    assert listed["version"] == 2 and len(listed["scenarios"]) == 2
    assert [s["kind"] for s in ok("evalset", "list", "es", "--kind", "win")["scenarios"]] == \
        ["win"]
    assert "es@2: 2 scenarios" in run("evalset", "list", "es").stdout
    shown = ok("evalset", "show", "es", fail["scenario"]["id"])
    assert shown["scenario"]["signature"] == ["failed", "tool_failed:search"]
    matched = ok("evalset", "matching", "es", "--signature", "failed")
    assert [s["id"] for s in matched["scenarios"]] == [fail["scenario"]["id"]]
    attached = ok("evalset", "attach", "es", fail["scenario"]["id"], "--replay-input", '"q"')
    assert attached["version"] == 3 and attached["scenario"]["replay_input"] == "q"

    r = run("evalset", "regress", "es@3", "--json")   # no replay: all skipped, exit 13
    assert r.exit_code == 13 and "cas: warning: no replay function" in r.stderr
    out = json.loads(r.stdout)
    assert out["counts"]["skipped"] == 2 and out["recorded"] is None
    assert set(out) == {"evalset", "version", "results", "counts", "warnings", "exit_code",
                        "recorded"}
    assert set(out["results"][0]) == {"id", "kind", "outcome", "scores", "baseline", "reason"}
    r = run("evalset", "regress", "es@3", "--replay", "evalset_cli_agent:replay",
            "--scorer", "evalset_cli_agent:score", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["recorded"]["scores"] == 4
    (tmp_path / "context.txt").write_text("be terse")
    r = run("evalset", "regress", "es@3", "--replay", "evalset_cli_agent:replay",
            "--scorer", "evalset_cli_agent:score", "--system-context", "@context.txt",
            "--no-record")
    assert r.exit_code == 12 and "1 regressed" in r.stdout and "NOT ok (exit 12)" in r.stdout

    refused = run("evalset", "capture", "es", "--session", "s3", "--kind", "win",
                  "--baseline", "success", "--json")
    assert refused.exit_code == 2 and json.loads(refused.output)["error"]["reason"] == "USAGE"
    bad = run("evalset", "capture", "es", "--session", "s3", "--kind", "win",
              "--baseline", "success=great", "--json")
    assert bad.exit_code == 2 and json.loads(bad.output)["error"]["field"] == "baseline_scores"
    missing = run("evalset", "list", "nope", "--json")
    assert missing.exit_code == 3
    assert run("evalset", "renew", "es", "--json").exit_code == 0
