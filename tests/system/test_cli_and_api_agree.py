"""The CLI and the API refuse the same things: the library raises every refusal, and a command
prints exactly the library's error ("no rule lives only in an interface", DESIGN.md).

Each test makes the library call and runs the command that makes it, and compares the two:
the same error object (`--json`), the same one-line message, the same result.
"""

import json

import pytest

import cas
from cas.repo import mirror
from cas_cli.main import EXIT_CODES
from support.cli import EXAMPLE

CASE = {"input": {"task": "t"}, "output": "o", "steps": [], "outcome": {"status": "success"}}


@pytest.fixture
def repo(run, tmp_path):
    """A repository in tmp_path with dataset `evals` at version 1, opened through the API."""
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    r = run("--json", "commit", "evals", "--add", str(EXAMPLE))
    assert r.exit_code == 0, r.output
    return cas.open(str(tmp_path))


def refuses_alike(run, api_call, *command) -> cas.CasError:
    """`api_call()` raises a CasError; the command prints that very error, with `--json` and
    without, and exits with its code's status."""
    with pytest.raises(cas.CasError) as info:
        api_call()
    error = info.value
    r = run("--json", *command)
    assert r.exit_code == EXIT_CODES[error.code], r.output
    assert r.stdout == ""
    assert json.loads(r.stderr) == {"error": error.to_json()}
    r = run(*command)
    assert r.exit_code == EXIT_CODES[error.code]
    assert r.stderr == f"cas: error: {error.message}\n"
    return error


# -- (a) commit: the base is required once the dataset has versions ------------------------
def test_commit_without_base_once_versions_exist_is_refused_by_the_library(run, repo):
    error = refuses_alike(run, lambda: repo.commit("evals", base=None, add=[CASE]),
                          "commit", "evals", "--add", str(EXAMPLE))
    assert isinstance(error, cas.InvalidArgument), (
        f"Repository.commit(base=None) on a dataset with versions raised {error!r}; the "
        "library should refuse it as InvalidArgument naming the head")
    assert error.fields.get("head") == 1
    assert "its newest is 1" in error.message and "--base" in error.message
    assert repo.head("evals") == 1  # neither sealed anything


def test_commit_names_its_base_in_the_api(repo):
    """`base` is keyword-only and has no default: a caller always says what it builds on."""
    with pytest.raises(TypeError):
        repo.commit("evals", add=[CASE])
    assert repo.head("evals") == 1


def test_first_commit_needs_no_base_in_either(run, repo, tmp_path):
    repo.create_dataset("api", admission="direct")
    assert repo.commit("api", base=None, add=[CASE]).number == 1
    assert run("dataset", "create", "cli", "--admission", "direct").exit_code == 0
    r = run("--json", "commit", "cli", "--add", str(EXAMPLE))
    assert r.exit_code == 0 and json.loads(r.stdout)["number"] == 1


# -- (c) cat: one stored object, verified, named by a digest the library parses ------------
def test_cat_prints_the_bytes_object_bytes_returns(run, repo):
    object_bytes = repo.object_bytes
    root = repo.version("evals", 1).content_digest
    kind, data = object_bytes(root)
    assert isinstance(data, bytes)
    r = run("cat", root)
    assert r.exit_code == 0 and r.stdout_bytes == data + b"\n"
    r = run("--json", "cat", root)
    assert json.loads(r.stdout) == {"digest": root, "kind": kind, "object": json.loads(data)}
    # a digest in uppercase hex names the same object, and is shown folded
    assert object_bytes(root.upper().replace("B3:", "b3:")) == (kind, data)
    r = run("--json", "cat", root.upper())
    assert r.exit_code == 0 and json.loads(r.stdout)["digest"] == root


@pytest.mark.parametrize("digest, code", [("nonsense", "INVALID_ARGUMENT"),
                                          ("b3:" + "0" * 64, "NOT_FOUND")])
def test_cat_refuses_what_object_bytes_refuses(run, repo, digest, code):
    error = refuses_alike(run, lambda: repo.object_bytes(digest), "cat", digest)
    assert error.code == code


# -- (b) mirror: locations are the library's to check ---------------------------------------
@pytest.mark.parametrize("source", ["nul\x00here", "no-repository-here"])
def test_mirror_refuses_what_copy_refuses(run, repo, tmp_path, source):
    refuses_alike(run, lambda: mirror.copy(source, str(tmp_path / "dst")), "mirror", source,
                  str(tmp_path / "dst"))


def test_mirror_reports_what_copy_reports(run, repo, tmp_path):
    r = run("--json", "mirror", str(tmp_path), str(tmp_path / "by-cli"))
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == mirror.copy(str(tmp_path),
                                               str(tmp_path / "by-api"))._asdict()
