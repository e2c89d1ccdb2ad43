"""`cas version delete`: both spellings of the version, and a version it cannot name."""

import pytest
from support.cli import commit_example, ok_json, refused


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


def test_version_delete_takes_either_spelling_and_needs_a_version(run, repo, tmp_path):
    usage = ["cas version delete DATASET N", "cas version delete DATASET@N"]
    refused(run, tmp_path, ("version", "delete", "evals"), 2, "INVALID_ARGUMENT",
            "VERSION_REQUIRED", "no version given for dataset 'evals'; every read names an "
            f'exact version, there is no "latest" (use: {" or ".join(usage)})', usage=usage)
    tomb = ok_json(run("--json", "version", "delete", "evals@1"))
    assert (tomb["kind"], tomb["dataset"], tomb["number"], tomb["item_count"]) == (
        "version.tombstone", "evals", 1, 5)
    refused(run, tmp_path, ("version", "delete", "evals", "1"), 3, "NOT_FOUND", "VERSION_DELETED",
            f"version 1 of dataset 'evals' was already deleted ({tomb['deleted_at']} by "
            "Ada <ada@example.com>)", dataset="evals", version=1)
