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
