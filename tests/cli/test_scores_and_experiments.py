"""`cas pin` and `cas pin-verify`: a pin printed is a pin verified, until its version is
retired; exact output, --json shapes and refusals."""

import json

import pytest

import cas
from cas_cli.main import EXIT_CODES
from support.citing import refused
from support.cli import commit_example

ZERO = "b3:" + "0" * 64


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


def test_cli_pin_and_verify(run, evals):
    digest = evals.version("evals", 2).content_digest
    r = run("pin", "evals", "2")
    assert (r.exit_code, r.stdout) == (0, f"evals@2#{digest}\n")
    assert run("pin", "evals@2").stdout == r.stdout
    r = run("pin", "evals", "2", "--json")
    assert json.loads(r.stdout) == {"pin": f"evals@2#{digest}", "dataset": "evals",
                                    "version": 2, "content_digest": digest}
    r = run("pin-verify", f"evals@2#{digest.upper().replace('B3:', 'b3:')}")
    assert (r.exit_code, r.stdout) == (0, f"valid: evals@2#{digest} (4 cases, ACTIVE)\n")
    r = run("--json", "pin-verify", f"evals@2#{digest}")
    assert json.loads(r.stdout) == {"valid": True, "pin": f"evals@2#{digest}",
                                    "dataset": "evals", "version": 2, "content_digest": digest,
                                    "item_count": 4, "state": "ACTIVE"}


def test_cli_pin_refusals(run, evals):
    digest = evals.version("evals", 1).content_digest
    refused(run("pin", "evals"), "INVALID_ARGUMENT",
            "no version given for dataset 'evals', and no cas.lock (here or in a parent "
            "directory) locks 'evals' (`cas lock add evals@N`); every read names an exact "
            'version, there is no "latest" (use: cas pin DATASET VERSION or cas pin '
            "DATASET@VERSION)")
    refused(run("pin", "evals", "3"), "NOT_FOUND", "dataset 'evals' has no version 3")
    refused(run("pin", "nope", "1"), "NOT_FOUND", "no dataset named 'nope'")
    refused(run("pin-verify", "evals@1"), "INVALID_ARGUMENT",
            "'evals@1' is not a pin; expected DATASET@VERSION#b3:<64 hex digits>, e.g. "
            f"evals@3#{ZERO}")
    refused(run("pin-verify", f"evals@2#{digest}"), "FAILED_PRECONDITION",
            f"pin evals@2#{digest} does not match the repository: evals@2 has content_digest "
            f"{evals.version('evals', 2).content_digest}")
    r = run("--json", "pin-verify", f"evals@2#{digest}")
    assert r.exit_code == 5 and r.stdout == ""
    error = json.loads(r.stderr)["error"]
    assert (error["code"], error["reason"], error["pin"]) == \
        ("FAILED_PRECONDITION", "PIN_MISMATCH", f"evals@2#{digest}")


def test_cli_pin_verify_of_a_retired_version_fails(run, tmp_path):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    (tmp_path / "a.jsonl").write_text(json.dumps({"input": "x"}) + "\n")
    assert run("commit", "evals", "--add", "a.jsonl").exit_code == 0
    pin = run("pin", "evals", "1").stdout.strip()
    repo = cas.open(str(tmp_path))
    r = repo.retire("evals", 1, "CONTAMINATED", "leaked")
    refused(run("pin-verify", pin), "FAILED_PRECONDITION",
            f"evals@1 is RETIRED (CONTAMINATED at {r.retired_at}): every read of it (listing, "
            "replaying, scoring) is refused, permanently; cut a new version to bring the "
            "dataset back into use")
    out = run("--json", "pin-verify", pin)
    error = json.loads(out.stderr)["error"]
    assert (out.exit_code, out.stdout, error["code"], error["reason"]) == (
        EXIT_CODES["FAILED_PRECONDITION"], "", "FAILED_PRECONDITION",
        "EVALUATION_DATASET_VERSION_RETIRED")
