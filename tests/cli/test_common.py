"""What the commands share (cas_cli/common.py): where the repository is (--repo, CAS_REPO,
the nearest .cas), and version numbers in ASCII digits only, as arguments and options."""

import json

import pytest

from support.cli import ITEMS_FORMS, commit_example, error_line, no_latest


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


def test_commands_outside_a_repository_are_refused(run, tmp_path):
    r = run("fsck")
    assert r.exit_code == 3
    assert "no cas repository" in r.stderr and "cas init" in r.stderr


def test_repo_option_and_env(run, repo, tmp_path, monkeypatch):
    monkeypatch.chdir("/")
    assert run("--repo", str(tmp_path), "dataset", "list").stdout == "evals\n"
    monkeypatch.setenv("CAS_REPO", str(tmp_path))
    assert run("dataset", "list").stdout == "evals\n"


@pytest.mark.parametrize("word", ["-1", "-0", "\u00b2", "\u0661", "\uff11", "1\u00b2",
                                  "99999999999", "1" * 5000])
def test_only_ascii_digits_are_a_version_number(run, repo, word):
    message = no_latest(f"{word!r} is not a version number", *ITEMS_FORMS)
    for args in (("items", "evals", word), ("items", f"evals@{word}")):
        r = run(*args)
        assert (r.exit_code, r.stdout) == (2, "") and r.stderr == error_line(message)
        r = run("--json", *args)
        err = json.loads(r.stderr)["error"]
        assert (r.exit_code, err["code"], err["reason"], err["message"]) == (
            2, "INVALID_ARGUMENT", "VERSION_REQUIRED", message)
    r = run("--json", "diff", "evals", "1", word)
    assert json.loads(r.stderr)["error"]["reason"] == "VERSION_REQUIRED"
    assert run("items", "evals", "0001").exit_code == 0  # ASCII digits with leading zeros


def test_version_options_take_ascii_digits_only(run, repo):
    for args in (("commit", "evals", "--base", "\u00b2"), ("commit", "evals", "--base", "-1"),
                 ("dataset", "show", "evals", "--before", "\u0661")):
        r = run("--json", *args)
        err = json.loads(r.stderr)["error"]
        assert r.exit_code == 2 and err["reason"] == "VERSION_REQUIRED"
        option, value = args[-2:]
        assert err["message"] == (f"{option} {value!r} is not a version number (ASCII "
                                  "digits, e.g. 3)")
    assert run("dataset", "show", "evals", "--before", "2").exit_code == 0
