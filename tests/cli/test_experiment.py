"""`cas experiment create`, `list` and `compare`: an empty listing, a comparison of
experiments that have no scores yet and of two that have, exact output and refusals."""

import json

import pytest

import cas
from support.citing import refused
from support.cli import commit_example, ok_json
from support.sample_cases import plain_cases


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


def test_experiments_without_scores_compare_to_nothing(run, repo):
    assert ok_json(run("--json", "experiment", "list", "evals")) == {
        "dataset": "evals", "experiments": []}
    assert run("experiment", "list", "evals").stdout == ""
    for name in ("base", "cand"):
        r = run("experiment", "create", "evals@1", "--name", name)
        assert (r.exit_code, r.stdout) == (
            0, f"created experiment {name} over evals@1 ({repo['content_digest']})\n")
    r = run("experiment", "compare", "evals", "base", "cand")
    assert (r.exit_code, r.stdout) == (0, "base (evals@1) vs cand (evals@1)\nno scores\n"
                                          "0 cases scored differently\n")
    c = ok_json(run("--json", "experiment", "compare", "evals", "base", "cand"))
    assert (c["metrics"], c["differences"]) == ([], [])


def test_cli_experiments(run, evals):
    digest = evals.version("evals", 1).content_digest
    r = run("experiment", "create", "evals", "1", "--name", "baseline")
    assert (r.exit_code, r.stdout) == (0, f"created experiment baseline over evals@1 ({digest})\n")
    refused(run("experiment", "create", "evals", "2", "--name", "baseline"), "ALREADY_EXISTS",
            "dataset 'evals' already has an experiment named 'baseline' (over evals@1)")
    refused(run("experiment", "create", "evals", "1", "--name", " x"), "INVALID_ARGUMENT",
            "invalid experiment name ' x': use 1-128 printable characters without leading or "
            "trailing spaces")
    e = json.loads(run("--json", "experiment", "list", "evals").stdout)
    assert e == {"dataset": "evals", "experiments": [{
        "kind": "experiment", "format": 1, "dataset": "evals", "number": 1, "name": "baseline",
        "version": 1, "content_digest": digest, "author": "Ada <ada@example.com>",
        "created_at": e["experiments"][0]["created_at"]}]}
    assert run("experiment", "list", "evals").stdout == (
        f"baseline  evals@1  {digest}  {e['experiments'][0]['created_at']}  "
        "Ada <ada@example.com>\n")


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
