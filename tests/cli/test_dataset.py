"""`cas dataset ...`: create, list, show, edit and history of datasets."""

import json

import pytest
from support.cli import commit_example


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


def test_dataset_commands(run, repo):
    r = run("dataset", "create", "Bad Name", "--admission", "direct")
    assert r.exit_code == 2 and "a-z, 0-9" in r.stderr
    r = run("dataset", "create", "evals", "--admission", "direct")
    assert r.exit_code == 4
    assert json.loads(run("--json", "dataset", "list").stdout) == {"datasets": ["evals"]}
    r = run("--json", "dataset", "edit", "evals", "--description", "new", "--tag", "b",
            "--tag", "a")
    assert json.loads(r.stdout)["revision"] == 2 and json.loads(r.stdout)["tags"] == ["a", "b"]
    hist = json.loads(run("--json", "dataset", "history", "evals").stdout)["revisions"]
    assert [h["description"] for h in hist] == ["", "new"]
    shown = json.loads(run("--json", "dataset", "show", "evals").stdout)
    assert shown["dataset"]["description"] == "new"
    assert [v["number"] for v in shown["versions"]] == [1] and shown["next_before"] is None
