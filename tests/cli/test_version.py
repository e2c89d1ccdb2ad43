"""`cas version delete`: both spellings of the version, a version it cannot name, a cited
version refused, and a deleted number never used again (exact output, the tombstone's JSON)."""

import json

import pytest

from support.citing import refused as errored
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


def test_cli_version_delete(run, evals):
    v2 = evals.version("evals", 2)
    assert run("score", "add", "evals", "1", "--metric", "acc", "--value", "1").exit_code == 0
    s = evals.scores("evals")[0]
    errored(run("version", "delete", "evals", "1"), "FAILED_PRECONDITION",
            f"version evals@1 is cited by score {s.score_id} (acc=1 on evals@1, recorded "
            f"{s.recorded_at} by Ada <ada@example.com>); a cited version cannot be deleted")
    r = run("--json", "version", "delete", "evals", "1")
    error = json.loads(r.stderr)["error"]
    assert (r.exit_code, r.stdout, error["reason"], error["cited_by"]) == \
        (5, "", "VERSION_CITED", s.score_id)
    r = run("version", "delete", "evals", "2")
    assert (r.exit_code, r.stdout) == (
        0, f"deleted evals@2 (4 cases, {v2.content_digest}); number 2 will not be used again\n")
    tomb = evals.refs.read_version_tombstone("evals", 2)
    errored(run("version", "delete", "evals", "2"), "NOT_FOUND",
            f"version 2 of dataset 'evals' was already deleted ({tomb.deleted_at} by "
            "Ada <ada@example.com>)")
    errored(run("show", "evals", "2"), "NOT_FOUND",
            f"version 2 of dataset 'evals' was deleted ({tomb.deleted_at} by "
            "Ada <ada@example.com>)")
    r = run("--json", "commit", "evals", "--base", "1", "--add", "b.jsonl")
    assert json.loads(r.stdout)["number"] == 3
    r = run("--json", "version", "delete", "evals", "3")
    t = json.loads(r.stdout)
    assert t == {"kind": "version.tombstone", "format": 1, "dataset": "evals", "number": 3,
                 "content_digest": v2.content_digest, "item_count": 4,
                 "author": "Ada <ada@example.com>", "deleted_at": t["deleted_at"]}
    assert run("fsck").exit_code == 0
