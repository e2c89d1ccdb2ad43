"""What the experiments and case pages read (cas_web/results.py): two experiments side by
side with their charts, differences sorted by size with runs and answers, the verdict (or why
there is none), and a case's scores across versions and experiments."""

from __future__ import annotations

import builtins

import pytest

from cas_web import results
from support.experiments import WORSE, scored_repo


@pytest.fixture(scope="module")
def scored():
    return scored_repo()


def test_two_experiments_side_by_side(scored):
    repo, ids = scored
    shown = results.side_by_side(repo, "evals", 1, "baseline", "candidate")
    assert [c.metric for c in shown.charts] == ["exact", "quality"]
    assert all(c.svg.startswith("<svg") for c in shown.charts)
    assert shown.charts[1].a.count == shown.charts[1].b.count == len(ids)
    # sorted by size: every change is numeric here, largest first
    sizes = [d.size for d in shown.differences]
    assert None not in sizes and sizes == sorted(sizes, reverse=True)
    assert shown.total_differences == len(shown.differences)
    # each with its run (recorded here) and both recorded answers
    worse = ids[WORSE[0]]
    row = next(d for d in shown.differences if d.item == worse and d.metric == "exact")
    assert (row.a, row.b, row.size) == (True, False, 1.0)
    assert (row.run_id, row.run_recorded) == (f"r-{WORSE[0]}", True)
    assert (row.answer_a, row.answer_b) == (f"answer {WORSE[0]} right",
                                            f"answer {WORSE[0]} wrong")
    # the comparison's verdict, from the recorded results
    assert shown.verdict.split(":")[0] in {"HELD", "IMPROVED", "REGRESSED", "INCONCLUSIVE"}
    assert {m.metric for m in shown.verdict_detail.metrics} == {"exact", "quality"}


def test_without_scipy_the_verdict_is_a_note_and_the_rest_is_shown(scored, monkeypatch):
    repo, _ = scored
    real = builtins.__import__

    def no_scipy(name, *args, **kw):
        if name.startswith("scipy"):
            raise ImportError(name)
        return real(name, *args, **kw)
    monkeypatch.setattr(builtins, "__import__", no_scipy)
    shown = results.side_by_side(repo, "evals", 1, "baseline", "candidate")
    assert shown.verdict is None and "stats" in shown.verdict_note
    assert len(shown.charts) == 2 and shown.differences


def test_an_experiment_without_a_recorded_result_has_no_answers_and_no_verdict(scored):
    repo, ids = scored
    repo.create_experiment("evals", 1, "scores-only")
    pin = str(repo.pin("evals", 1))
    repo.record_scores(pin, [{"metric": "quality", "value": 0.5, "item": i,
                              "experiment": "scores-only"} for i in ids])
    shown = results.side_by_side(repo, "evals", 1, "baseline", "scores-only")
    assert shown.answers == {"baseline": True, "scores-only": False}
    assert shown.verdict is None and "scores-only recorded no suite result" in \
        shown.verdict_note
    assert all(d.answer_b is None and d.answer_a is not None for d in shown.differences)
    # a case scored by one side only is a difference of no size, listed after the sized ones
    missing = [d for d in shown.differences if d.size is None]
    assert missing and shown.differences[-len(missing):] == missing


def test_batches_and_a_cases_scores_across_versions(scored):
    repo, ids = scored
    found = results.batches(repo.scores("evals", 1))
    assert [b.experiments for b in found][:2] == [["baseline"], ["candidate"]]
    assert found[0].metrics == ["exact", "quality"] and found[0].count == 2 * len(ids)
    rows = results.case_scores(repo, ids[0])
    assert {(r.version, r.experiment) for r in rows} >= {
        (1, "baseline"), (1, "candidate"), (2, "later")}
    assert results.case_scores(repo, "b3:" + "0" * 64) == []
