"""Recording a suite's result (cas/evals/suites/recording.py): one score batch citing the pinned
version, in an experiment over it (created if missing); what a scorer gives checked as scores;
refusals before a long run, and after."""

from __future__ import annotations

import pytest

import cas
from cas.evals.suites.executors import Run
from cas.evals.suites.files import Suite, from_version
from cas.evals.suites.recording import (check_record, check_scores, experiment_over, record,
                                        record_scores_of)
from support.evals import ADA
from support.evals import run_suite as run
from support.evals import suite_of, versioned_repo


@pytest.fixture
def versioned():
    return versioned_repo()


def test_record_without_a_scorer_records_completed_per_case(versioned):
    s = from_version(versioned, "evals", 1)

    async def one_fails(case, *, run_id):
        if case.id == s.cases[0].id:
            raise RuntimeError("x")
        return Run(case.expected, case.tenant)
    rec = record(versioned, run(s, one_fails), "baseline", author=ADA)
    assert (rec.dataset, rec.version, rec.experiment, rec.created, rec.scores) == \
        ("evals", 1, "baseline", True, 3)
    got = {(x.item, x.metric, x.value, x.experiment) for x in versioned.scores("evals", 1)}
    assert got == {(c.id, "completed", c.id != s.cases[0].id, "baseline") for c in s.cases}
    # a second run into the same experiment; then compare two experiments of suite runs
    assert record(versioned, run(s), "baseline", author=ADA).created is False
    rec2 = record(versioned, run(s, scorer=lambda c, a: {"exact": a == c.expected}),
                         "candidate", author=ADA)
    assert rec2.scores == 3 and rec2.batch is not None
    assert versioned.compare_experiments("evals", "baseline", "candidate") is not None

def test_record_refusals(versioned):
    s1 = from_version(versioned, "evals", 1)
    record(versioned, run(s1), "e1", author=ADA)
    s2 = from_version(versioned, "evals", 2)
    with pytest.raises(cas.FailedPrecondition) as e:
        check_record(versioned, s2, "e1")
    assert e.value.reason == "EXPERIMENT_VERSION_MISMATCH"
    with pytest.raises(cas.FailedPrecondition) as e:
        record(versioned, run(suite_of(2)), "e2")
    assert e.value.reason == "SUITE_NOT_PINNED"
    forged = Suite("evals", s1.version.replace("evals@1", "evals@2"), [])
    with pytest.raises(cas.FailedPrecondition) as e:
        check_record(versioned, forged, "e2")
    assert e.value.reason == "PIN_MISMATCH"
    versioned.retire("evals", 1, "CONTAMINATED", "leaked", author=ADA)
    with pytest.raises(cas.FailedPrecondition) as e:
        record(versioned, run(s1), "e1", author=ADA)
    assert e.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"


def test_record_scores_of_a_pin_creates_the_experiment_once(versioned):
    pin = str(versioned.pin("evals", 1))
    ids = versioned.items("evals", 1).items
    rows = [{"metric": "passed", "value": i % 2 == 0, "item": c} for i, c in enumerate(ids)]
    stored = record_scores_of(versioned, pin, "ci", rows, author=ADA)
    assert len(stored) == 3 and {s.experiment for s in stored} == {"ci"}
    assert record_scores_of(versioned, pin, "ci", [], author=ADA) == []
    assert [e.name for e in versioned.experiments("evals")] == ["ci"]
    assert experiment_over(versioned, versioned.pin("evals", 1), "ci").version == 1
    assert experiment_over(versioned, versioned.pin("evals", 1), "none") is None
    with pytest.raises(cas.FailedPrecondition) as e:
        record_scores_of(versioned, str(versioned.pin("evals", 2)), "ci", rows, author=ADA)
    assert e.value.reason == "EXPERIMENT_VERSION_MISMATCH"
    with pytest.raises(cas.FailedPrecondition) as e:
        record_scores_of(versioned, "evals@1", "ci", rows, author=ADA)
    assert e.value.reason == "SUITE_NOT_PINNED"


def test_what_a_scorer_gives_is_checked_as_scores_a_batch_can_record():
    assert check_scores({"exact": True, "len": 3, "grade": "good"}) == \
        ({"exact": True, "len": 3, "grade": "good"}, None)
    assert check_scores([1]) == (None, "[1], not a dict {metric: value}")
    for bad in ({"accuracy": float("nan")}, {"": 1}, {"m": "0.5"}, {"m": None}, {1: 1}):
        scores, problem = check_scores(bad)
        assert scores is None and problem.startswith("an invalid score: ")


def test_a_result_with_scores_records_each_completed_cases_scores(versioned):
    s = from_version(versioned, "evals", 1)

    async def second_fails(case, *, run_id):
        if case.id == s.cases[1].id:
            raise RuntimeError("down")
        return Run(case.expected, case.tenant)
    result = run(s, second_fails, scorer=lambda c, a: {"exact": a == c.expected, "n": 1})
    rec = record(versioned, result.to_json(), "scored", author=ADA)
    assert rec.scores == 4 and rec.created
    got = sorted((x.item, x.metric, x.value) for x in versioned.scores("evals", 1))
    assert got == sorted((c.id, m, v) for c in (s.cases[0], s.cases[2])
                         for m, v in (("exact", True), ("n", 1)))
    empty = record(versioned, run(Suite("evals", s.version, []), scorer=lambda c, a: {}),
                   "nothing", scored=True, author=ADA)
    assert (empty.scores, empty.batch, empty.created) == (0, None, True)


# -- the whole result, recorded and read back (DATASET:EXPERIMENT) ------------------------------
def test_record_stores_the_whole_result_cited_by_the_batch_and_reads_it_back(versioned):
    from cas.evals.suites.recording import recorded_result
    from cas.evals.suites.runner import SuiteRunner
    s = from_version(versioned, "evals", 1)

    async def agent(case, *, run_id, repetition, seed):
        if repetition == 1 and case.id == s.cases[0].id:
            raise RuntimeError("down")
        return Run({"rep": repetition, "seed": seed}, case.tenant)
    first = SuiteRunner(agent, repeat=3, seed=4, scorer=lambda c, a: {"ok": a["rep"] != 2}
                        ).run(s)
    rec = record(versioned, first, "live", author=ADA)
    assert rec.result is not None and rec.scores == 8  # the ERRORED repetition has no scores
    back = recorded_result(versioned, "evals:live")
    assert back == first and back.digest == first.digest
    assert [(r.outcome, r.answer, r.seed) for r in back.results] == \
        [(r.outcome, r.answer, r.seed) for r in first.results]
    # the newest batch of the experiment wins; a withdrawn one is passed over
    second = SuiteRunner(agent, repeat=2, seed=5).run(s)
    rec2 = record(versioned, second, "live", author=ADA)
    assert recorded_result(versioned, "evals:live") == second
    versioned.withdraw_batch("evals", rec2.batch, "a wrong run", author=ADA)
    assert recorded_result(versioned, "evals:live") == first
    # a run without repetitions is recorded and read back with today's bytes
    plain = run(s)
    record(versioned, plain, "plain", author=ADA)
    assert recorded_result(versioned, "evals:plain").to_json() == plain.to_json()
    assert versioned.fsck().problems == []


def test_recorded_result_refusals(versioned):
    from cas.evals.suites.recording import is_recorded_source, recorded_result
    for bad in ("evals", "Evals:x", ":x", "evals:", "evals: x", 3):
        assert not is_recorded_source(bad)
        with pytest.raises(cas.InvalidArgument) as e:
            recorded_result(versioned, bad)
        assert e.value.reason == "INVALID_RECORDED_SOURCE"
    assert is_recorded_source("evals:prompt v2: long")  # the first ':' splits
    with pytest.raises(cas.NotFound) as e:
        recorded_result(versioned, "evals:nothing")
    assert e.value.reason == "RECORDED_RESULT_NOT_FOUND"
    # scores recorded before results were stored (record_scores_of): nothing to read back
    s = from_version(versioned, "evals", 1)
    record_scores_of(versioned, s.version, "old", [{"metric": "m", "value": 1}], author=ADA)
    with pytest.raises(cas.NotFound) as e:
        recorded_result(versioned, "evals:old")
    assert "experiments: old" in e.value.message
    record(versioned, run(s), "done", author=ADA)
    versioned.retire("evals", 1, "CONTAMINATED", "leaked", author=ADA)
    with pytest.raises(cas.FailedPrecondition) as e:
        recorded_result(versioned, "evals:done")
    assert e.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"


def test_a_batch_citing_a_result_that_is_not_stored_is_reported_by_fsck(versioned):
    from cas.format.records import SuiteResultRecord
    from cas.repo.scores import record_scores
    s = from_version(versioned, "evals", 1)
    rec = record(versioned, run(s), "e", author=ADA)
    obj = versioned.suite_result(rec.result)
    assert isinstance(obj, SuiteResultRecord) and len(obj.results) == 3
    with pytest.raises(cas.InvalidArgument) as e:  # a result of another version
        record_scores(versioned.context, from_version(versioned, "evals", 2).version,
                      [{"metric": "m", "value": 1}], ADA, obj)
    assert e.value.reason == "RESULT_VERSION_MISMATCH"
    # a batch citing a digest no object has (written below the API, as damage would)
    from cas.repo.scores import _record_scores
    missing = "b3:" + "7" * 64
    _record_scores(versioned.context, s.version, [{"metric": "m", "value": 1}], ADA, missing)
    problems = [p for p in versioned.fsck().problems if p.severity == "error"]
    assert [p.message for p in problems] == \
        [f"cites suite result {missing}, which is not stored (or is not a suite.result)"]


def test_erasing_a_person_deletes_the_recorded_results_answering_their_cases(as_operator):
    """A recorded result holds the agent's answers to every case of its version, the person's
    data as much as a cassette: it is indexed under the persons of those cases, so erasing one
    deletes it (and retires the version, so nothing reads it), leaving fsck clean."""
    from cas.storage.backends.memory import MemoryBackend
    repo = cas.Repository.create(MemoryBackend())
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, author=ADA, add=[
        {"input": f"question {i}", "output": f"answer {i}", "tenant": "acme",
         "person": person} for i, person in enumerate(["p-ann", "p-bob", None])])
    s = from_version(repo, "evals", 1)
    rec = record(repo, run(s), "live", author=ADA)
    digest = rec.result
    assert repo.context.store.contains(digest)
    assert repo.erase("p-zed")["suite_results"] == 0  # no case of theirs: not their result
    preview = repo.erase("p-ann")
    assert preview["suite_results"] == 1
    repo.erase("p-ann", preview["confirm_token"])
    assert not repo.context.store.contains(digest)
    assert repo.version_state("evals", 1) == "RETIRED"
    with pytest.raises(cas.FailedPrecondition):
        from cas.evals.suites.recording import recorded_result
        recorded_result(repo, "evals:live")
    assert repo.fsck().ok, repo.fsck().problems
