"""Comparing experiments (cas/repo/comparison.py): per-metric aggregates of each side and
the cases scored differently; the Python API (`cas experiment compare`:
tests/cli/test_experiment.py)."""

from __future__ import annotations

import pytest

import cas
from cas.repo import comparison
from support.citing import two_versions


@pytest.fixture
def repo(location, monkeypatch):
    return two_versions(location, monkeypatch)


def test_compare_experiments(repo):
    items = repo.items("evals", 1).items
    repo.create_experiment("evals", 1, "base")
    repo.create_experiment("evals", 2, "cand")
    p1, p2 = repo.pin("evals", 1), repo.pin("evals", 2)
    repo.record_scores(p1, [{"metric": "acc", "value": v, "item": i, "experiment": "base"}
                            for v, i in zip((1, 0, 1), items)]
                       + [{"metric": "ok", "value": True, "experiment": "base"}])
    repo.record_scores(p2, [{"metric": "acc", "value": v, "item": i, "experiment": "cand"}
                            for v, i in zip((1.0, 1, True), items)]
                       + [{"metric": "ok", "value": "unsure", "experiment": "cand"}])
    c = comparison.compare_experiments(repo.context, "evals", "base", "cand")
    assert (c.a.name, c.b.name) == ("base", "cand")
    acc, ok = c.metrics
    assert (acc.metric, acc.a.count, acc.a.numbers, acc.a.mean, acc.a.values) == \
        ("acc", 3, 3, 2 / 3, {})
    assert (acc.b.count, acc.b.numbers, acc.b.mean, acc.b.values) == (3, 2, 1.0, {"true": 1})
    assert (ok.a.values, ok.b.values, ok.a.mean) == ({"true": 1}, {"unsure": 1}, None)
    # 1 and 1.0 are the same; 0 and 1 differ; 1 and True differ (a bool is not a number)
    assert [(d.item, d.a, d.b) for d in c.differences] == sorted(
        [(items[1], 0, 1), (items[2], 1, True)])
    with pytest.raises(cas.NotFound) as info:
        comparison.compare_experiments(repo.context, "evals", "base", "ghost")
    assert info.value.reason == "EXPERIMENT_NOT_FOUND"
    with pytest.raises(cas.InvalidArgument) as info:
        comparison.compare_experiments(repo.context, "evals", "base", "base")
    assert info.value.reason == "SAME_EXPERIMENT"
