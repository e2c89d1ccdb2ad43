"""Fixtures of the command-line tests: runs imported, and runs reviewed, through `cas`; a
dataset of two versions to cite, made with `cas`; versions promoted from runs of three
tenants."""

import pytest

from support.citing import two_versions_by_cli
from support.cli import add_review, run_obj, write_jsonl
from support.promoted import promoted_runs


@pytest.fixture
def runs_file(run, tmp_path):
    """A repository here, and r-0..r-3 in runs.jsonl (not imported yet)."""
    assert run("init").exit_code == 0
    return write_jsonl(tmp_path / "runs.jsonl", *(run_obj(f"r-{i}", i) for i in range(4)))


@pytest.fixture
def reviewed(run, runs_file):
    """r-0..r-3 imported and reviewed; an empty dataset `evals`. Returns run id -> annotation."""
    assert run("runs", "import", runs_file).exit_code == 0
    assert run("dataset", "create", "evals").exit_code == 0
    return {f"r-{i}": add_review(run, f"r-{i}") for i in range(4)}


@pytest.fixture
def evals(run, tmp_path):
    """`evals@1` (3 cases) and `evals@2` (1 more), made with `cas` here: the repository, opened
    through the API."""
    return two_versions_by_cli(run, tmp_path)


@pytest.fixture
def promoted(tmp_path, monkeypatch):
    """evals@1 promoted from r-1 (acme) and r-2 (globex), evals@2 adds r-3 (initech), evals@3
    adds r-1 again under another content policy: made by Ada through the API, here."""
    return promoted_runs(str(tmp_path), monkeypatch)
