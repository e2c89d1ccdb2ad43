"""Comparing experiments (cas/repo/comparison.py): per-metric aggregates of each side and
the cases scored differently; the Python API and the CLI's exact output."""

from __future__ import annotations

import json

import pytest

import cas
from cas.repo import comparison
from support.sample_cases import plain_cases
from support.citing import refused, two_versions


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


def test_cli_experiment_compare(run, tmp_path):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(c) + "\n" for c in plain_cases(2)))
    assert run("commit", "evals", "--add", "a.jsonl").exit_code == 0
    repo = cas.open(str(tmp_path))
    i0, i1 = repo.items("evals", 1).items
    for name in ("base", "cand"):
        assert run("experiment", "create", "evals", "1", "--name", name).exit_code == 0
    (tmp_path / "b.jsonl").write_text(json.dumps({"metric": "acc", "value": 1, "item": i0})
                                      + "\n" + json.dumps({"metric": "acc", "value": 0,
                                                           "item": i1}) + "\n")
    (tmp_path / "c.jsonl").write_text(json.dumps({"metric": "acc", "value": 1, "item": i0})
                                      + "\n")
    for f, e in (("b.jsonl", "base"), ("c.jsonl", "cand")):
        assert run("score", "add", "evals", "1", "--file", f, "--experiment", e).exit_code == 0
    r = run("experiment", "compare", "evals", "base", "cand")
    pad = " " * (len(i1) - 4)
    assert (r.exit_code, r.stdout) == (0, (
        "base (evals@1) vs cand (evals@1)\n"
        "METRIC  EXPERIMENT  COUNT  MEAN  VALUES\n"
        "acc     base        2      0.5   -\n"
        "acc     cand        1      1.0   -\n"
        "1 case scored differently:\n"
        f"METRIC  ITEM{pad}  base  cand\n"
        f"acc     {i1}  0     -\n"))
    out = json.loads(run("--json", "experiment", "compare", "evals", "base", "cand").stdout)
    assert out["metrics"] == [{"metric": "acc",
                               "a": {"count": 2, "numbers": 2, "mean": 0.5, "values": {}},
                               "b": {"count": 1, "numbers": 1, "mean": 1.0, "values": {}}}]
    assert out["differences"] == [{"metric": "acc", "item": i1, "a": 0, "b": None}]
    assert (out["dataset"], out["a"]["name"], out["b"]["kind"]) == ("evals", "base",
                                                                    "experiment")
    refused(run("experiment", "compare", "evals", "base", "ghost"), "NOT_FOUND",
            "dataset 'evals' has no experiment 'ghost'")
