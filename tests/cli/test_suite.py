"""`cas suite export`, `run` and `diff`: a version exported, run twice, and the runs compared."""

import json

import pytest
from support.cli import commit_example


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


def test_an_exported_suite_runs_the_same_twice(run, repo, tmp_path):
    r = run("suite", "export", "evals@1", "-o", "suite.jsonl")
    assert r.exit_code == 0, r.output
    for name in ("a", "b"):
        r = run("--json", "suite", "run", "suite.jsonl", "--executor", "cas:echo")
        assert r.exit_code == 0, r.output
        (tmp_path / f"{name}.json").write_text(r.stdout)
    result = json.loads(r.stdout)
    assert result["ok"] is True and len(result["results"]) == 5
    r = run("suite", "diff", "a.json", "b.json")
    assert (r.exit_code, r.stdout) == (0, "0 changed, 5 unchanged\n")
    r = run("suite", "run", "suite.jsonl", "--executor", "cas:echo")
    assert r.exit_code == 0
    assert r.stdout.startswith(f"suite evals {result['suite']['version']}: 5 cases in ")
    assert r.stdout.endswith(f"5 completed, 0 errored, 0 incomplete; ok; digest "
                             f"{result['digest']}\n")
