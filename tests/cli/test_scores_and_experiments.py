"""`cas pin` and `cas pin-verify`: a pin printed is a pin verified, until its version is
retired."""

import json

import pytest
from support.cli import commit_example


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


def test_a_printed_pin_verifies_until_its_version_is_retired(run, repo):
    pin = run("pin", "evals@1").stdout.strip()
    assert pin == f"evals@1#{repo['content_digest']}" == run("pin", "evals", "1").stdout.strip()
    r = run("pin-verify", pin)
    assert (r.exit_code, r.stdout) == (0, f"valid: {pin} (5 cases, ACTIVE)\n")
    r = run("retire", "evals", "1", "--cause", "contaminated", "--note", "leaked")
    assert r.exit_code == 0
    for args in (("pin-verify", pin), ("pin", "evals@1")):
        r = run("--json", *args)
        error = json.loads(r.stderr)["error"]
        assert (r.exit_code, r.stdout, error["code"], error["reason"]) == (
            5, "", "FAILED_PRECONDITION", "EVALUATION_DATASET_VERSION_RETIRED")
