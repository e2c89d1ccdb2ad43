"""`cas cassette list` and `show`: a dataset with no recordings yet, and cassettes recorded and
replayed by `cas suite run --cassette-mode` (a mode the executor cannot use refused), then
listed, logged and shown."""

import json

import pytest

import cas
from cas.evals.suites import EXIT_ERRORED
from support.cli import commit_example, ids, ok_json, refused
from support.evals import ADA, frozen


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


def test_cli_records_replays_and_refuses_a_cassette_mode_the_executor_cannot_use(tmp_path,
                                                                                 monkeypatch):
    from click.testing import CliRunner

    from cas_cli.main import cli
    monkeypatch.setenv("CAS_USER", ADA)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("CAS_CASSETTE_MODE", raising=False)
    location = str(tmp_path / "repo")
    r = cas.init(location)
    r.create_dataset("evals", admission="direct")
    r.commit("evals", base=None, add=[frozen(i) for i in range(2)], author=ADA)

    def cli_run(*args):
        return CliRunner().invoke(cli, ["--repo", location, *args], catch_exceptions=False)
    replayed = cli_run("suite", "run", "evals@1", "--executor", "cas:cassette",
                       "--cassette-mode", "replay", "--json")
    assert replayed.exit_code == EXIT_ERRORED
    assert "stale cassette" in json.loads(replayed.stdout)["results"][0]["reason"]
    assert cli_run("suite", "run", "evals@1", "--executor", "cas:cassette").exit_code == 0
    monkeypatch.setenv("CI", "true")  # replay by default under CI
    again = cli_run("suite", "run", "evals@1", "--executor", "cas:cassette", "--json")
    assert again.exit_code == 0, again.stdout
    refused = cli_run("suite", "run", "evals@1", "--executor", "cas:echo",
                      "--cassette-mode", "record", "--json")
    assert json.loads(refused.output)["error"]["reason"] == "CASSETTE_UNUSED_BY_EXECUTOR"
    listed = cli_run("cassette", "list", "evals", "--json")
    assert listed.exit_code == 0 and len(json.loads(listed.stdout)["cassettes"]) == 2
    case_id = json.loads(listed.stdout)["cassettes"][0]["case_id"]
    assert "recorded 2 cassettes of evals under cas:cassette (batch 1)" in \
        cli_run("log", "evals").output
    shown = cli_run("cassette", "show", "evals", case_id, "--executor", "cas:cassette", "--json")
    assert [e["name"] for e in json.loads(shown.stdout)["exchanges"]] == ["search", "open"]
