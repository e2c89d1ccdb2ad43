"""Fixtures of the command-line tests: runs imported, and runs reviewed, through `cas`."""

import pytest
from support.cli import add_review, run_obj, write_jsonl


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
