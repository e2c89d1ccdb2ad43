"""`cas cassette list` and `show` of a dataset with no recordings yet."""

import pytest
from support.cli import commit_example, ids, ok_json, refused


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


def test_a_dataset_with_no_cassettes(run, repo, tmp_path):
    r = run("cassette", "list", "evals")
    assert (r.exit_code, r.stdout) == (0, "0 cassettes\n")
    assert ok_json(run("--json", "cassette", "list", "evals", "--executor", "cas:cassette")) \
        == {"dataset": "evals", "cassettes": []}
    case_id = ids(run, "evals@1")[0]
    refused(run, tmp_path, ("cassette", "show", "evals", case_id, "--executor", "cas:cassette"),
            3, "NOT_FOUND", "CASSETTE_NOT_FOUND",
            f"no cassette of case {case_id} under executor 'cas:cassette' in 'evals' (record "
            "one with `cas suite run ... --cassette-mode record-missing`; an erasure deletes "
            "its person's)", dataset="evals", case_id=case_id)
