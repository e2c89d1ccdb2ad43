"""`cas experiment create`, `list` and `compare`: an empty listing and a comparison of
experiments that have no scores yet."""

import pytest
from support.cli import commit_example, ok_json


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
