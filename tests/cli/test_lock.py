"""`cas lock add|list|remove|check|update|diff` and `cas renew`, and a dataset name resolving
through cas.lock in `cas items`, `cas pin`, `cas export`, `cas diff` and `cas suite run`: exit
codes, the exact lines, the JSON, and refusals that change nothing."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

import cas
from support.cli import ok_json

ADA = "Ada <ada@example.com>"


def _case(n: int, person: str) -> dict:
    return {"run_id": f"r-{n}", "tenant": "acme", "person": person, "input": f"question {n}",
            "output": f"answer {n}"}


@pytest.fixture
def world(run, tmp_path):
    """A repository here; `ds@1` holds r-0 (p-1) and r-1, r-2 (p-2); `ds@2` adds r-3 (p-2)."""
    assert run("init").exit_code == 0
    assert run("dataset", "create", "ds", "--admission", "direct").exit_code == 0
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(_case(n, "p-1" if n == 0 else "p-2")) + "\n"
                            for n in range(3)))
    assert run("commit", "ds", "--add", str(path)).exit_code == 0
    path.write_text(json.dumps(_case(3, "p-2")) + "\n")
    assert run("commit", "ds", "--base", "1", "--add", str(path)).exit_code == 0
    return cas.open(str(tmp_path))


def _erase(run, person: str) -> None:
    token = ok_json(run("--json", "erase", "--person", person))["confirm_token"]
    assert run("erase", "--person", person, "--confirm-token", token).exit_code == 0


def _error(r) -> dict:
    assert r.stdout == ""
    return json.loads(r.stderr)["error"]


def test_add_list_move_and_remove(run, world, tmp_path):
    pin1, pin2 = str(world.pin("ds", 1)), str(world.pin("ds", 2))
    r = run("lock", "add", "ds@1")
    assert (r.exit_code, r.stdout) == (0, f"locked ds@1 (cas.lock: {pin1})\n")
    text = (tmp_path / "cas.lock").read_text()
    assert f'[datasets.ds]\npin = "{pin1}"\n' in text and text.startswith("# ")
    r = run("lock", "add", pin2)  # a full pin; a locked dataset moves
    assert r.stdout == f"ds@1 -> ds@2 (cas.lock: {pin2})\n"
    assert ok_json(run("--json", "lock", "list"))["datasets"] == [
        {"dataset": "ds", "pin": pin2, "version": 2, "repository": None}]
    before = (tmp_path / "cas.lock").read_bytes()
    error = _error(run("--json", "lock", "add", "ds@1#b3:" + "0" * 64))
    assert (error["code"], error["reason"]) == ("FAILED_PRECONDITION", "PIN_MISMATCH")
    r = run("lock", "add", "ds@9")
    assert r.exit_code == 3 and "has no version 9" in r.stderr
    r = run("lock", "add", "ds")
    assert r.exit_code == 2 and "names no version" in r.stderr
    assert (tmp_path / "cas.lock").read_bytes() == before  # refusals change nothing
    assert run("lock", "remove", "ds").stdout == "unlocked ds (was ds@2)\n"
    assert _error(run("--json", "lock", "remove", "ds"))["reason"] == "NOT_LOCKED"


def test_check_update_and_renew_after_an_erasure(run, world, tmp_path):
    assert run("lock", "add", "ds@2").exit_code == 0
    assert run("lock", "check").stdout == "ok    ds@2\n"
    _erase(run, "p-1")
    retired = world.retirement("ds", 2)
    r = run("lock", "check")
    assert r.exit_code == 5 and r.stdout == ""
    assert r.stderr == (
        f"cas: error: 1 of 1 locked pins fail: ds@2 is RETIRED (PERSON_ERASED at "
        f"{retired.retired_at}): every read of it (listing, replaying, scoring) is refused, "
        "permanently; it has no successor yet; seal one with `cas renew ds`\n")
    before = (tmp_path / "cas.lock").read_bytes()
    r = run("lock", "update")
    assert r.exit_code == 5 and "cas renew ds" in r.stderr
    assert _error(run("--json", "lock", "update"))["reason"] == "NO_SUCCESSOR"
    assert (tmp_path / "cas.lock").read_bytes() == before
    # renew seals the cases the erasure left; the check then names the successor
    renewed = ok_json(run("--json", "renew", "ds"))
    assert (renewed["number"], renewed["renewed_from"], renewed["operation"]) == (3, 2, "renew")
    assert renewed["item_count"] == 3 and renewed["removed"] == 1
    successor = str(world.pin("ds", 3))
    error = _error(run("--json", "lock", "check"))
    assert (error["code"], error["reason"]) == ("FAILED_PRECONDITION", "LOCK_CHECK_FAILED")
    assert (error["retirement_cause"], error["retired_at"], error["successor"]) == \
        ("PERSON_ERASED", retired.retired_at, successor)
    assert f"its successor is {successor}" in error["message"]
    [erasure] = world.erasures()
    r = run("lock", "update")
    assert (r.exit_code, r.stdout) == (0, f"ds@2 -> ds@3; 1 cases removed by erasure "
                                          f"{erasure.id} at {erasure.erased_at}\n")
    assert run("lock", "check").stdout == "ok    ds@3\n"
    assert run("lock", "update").stdout == "nothing to move: no pin is retired\n"
    r = run("renew", "ds")  # the head is ACTIVE now
    assert r.exit_code == 5 and "is ACTIVE: there is nothing to renew" in r.stderr


def test_update_renew_in_one_step_and_to_and_an_operators_retirement(run, world, tmp_path):
    assert run("lock", "add", "ds@2").exit_code == 0
    _erase(run, "p-1")
    moved = ok_json(run("--json", "lock", "update", "--renew"))["moved"]
    assert [(m["old"].split("#")[0], m["new"].split("#")[0]) for m in moved] == \
        [("ds@2", "ds@3")]
    assert moved[0]["erasures"][0]["cases_removed"] == 1
    assert run("retire", "ds@3", "--cause", "contaminated", "--note", "leaked").exit_code == 0
    r = run("renew", "ds")
    assert r.exit_code == 5 and "RETIRED by an operator (CONTAMINATED" in r.stderr
    r = run("lock", "update", "--renew")
    assert r.exit_code == 5 and "an operator retired it" in r.stderr
    assert world.head("ds") == 3  # nothing was sealed
    r = run("lock", "update", "ds", "--to", "1")
    assert r.exit_code == 5 and "ds@1 is RETIRED" in r.stderr  # erased as well
    r = run("lock", "update", "--to", "1")
    assert r.exit_code == 2 and "name the dataset" in r.stderr


def test_a_name_resolves_through_the_lock_and_says_so(run, world, tmp_path):
    r = run("items", "ds")
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr == (
        "cas: error: no version given for dataset 'ds', and no cas.lock (here or in a parent "
        "directory) locks 'ds' (`cas lock add ds@N`); every read names an exact version, there "
        'is no "latest" (use: cas items DATASET VERSION or cas items DATASET@VERSION)\n')
    error = _error(run("--json", "pin", "ds"))
    assert (error["code"], error["reason"], error["dataset"]) == \
        ("INVALID_ARGUMENT", "NOT_LOCKED", "ds")
    assert run("lock", "add", "ds@1").exit_code == 0
    line = "ds -> ds@1 (cas.lock)\n"
    r = run("--json", "items", "ds")
    assert r.exit_code == 0 and r.stderr == line
    data = json.loads(r.stdout)
    assert data["version"]["number"] == 1 and len(data["items"]) == 3
    assert data["resolved"] == {"dataset": "ds", "version": 1, "pin": str(world.pin("ds", 1)),
                                "lock": str(tmp_path / "cas.lock"), "repository": None}
    r = run("pin", "ds")
    assert (r.stdout, r.stderr) == (f"{world.pin('ds', 1)}\n", line)
    r = run("--json", "diff", "ds", "2")  # the locked version to version 2
    assert r.stderr == line and json.loads(r.stdout)["from"]["number"] == 1
    assert len(json.loads(r.stdout)["added"]) == 1
    out = tmp_path / "out.jsonl"
    r = run("--json", "export", "ds", "--to", "jsonl", "-o", str(out))
    assert r.exit_code == 0 and json.loads(r.stdout)["resolved"]["version"] == 1
    assert len(out.read_text().splitlines()) == 1 + 3  # the header naming the pin, the cases
    assert str(world.pin("ds", 1)) in out.read_text().splitlines()[0]
    r = run("--json", "suite", "run", "ds", "--executor", "cas:echo")
    assert r.exit_code == 0 and r.stderr == line
    assert json.loads(r.stdout)["resolved"]["pin"] == str(world.pin("ds", 1))
    # --lock names another file; a name it does not hold is refused
    (tmp_path / "other.lock").write_text("")
    r = run("items", "ds", "--lock", str(tmp_path / "other.lock"))
    assert r.exit_code == 2 and "other.lock does not lock 'ds' (`cas lock add ds@N`)" in r.stderr
    # a path that exists is a suite file, not a name
    assert run("suite", "export", "ds", "2", "-o", "ds").exit_code == 0
    r = run("--json", "suite", "run", "ds", "--executor", "cas:echo")
    assert r.exit_code == 0 and r.stderr == ""
    assert "resolved" not in json.loads(r.stdout) and len(json.loads(r.stdout)["results"]) == 4
    # a lock whose digest no longer matches is refused, not read
    text = (tmp_path / "cas.lock").read_text()
    (tmp_path / "cas.lock").write_text(text.replace(world.pin("ds", 1).content_digest,
                                                    "b3:" + "0" * 64))
    assert _error(run("--json", "items", "ds"))["reason"] == "PIN_MISMATCH"


def test_to_moves_to_exactly_that_version_and_says_what_changes(run, world):
    assert run("lock", "add", "ds@1").exit_code == 0
    r = run("lock", "update", "ds", "--to", "2")
    assert r.stdout == "ds@1 -> ds@2 (3 -> 4 cases: `cas diff ds 1 2` lists them)\n"
    assert run("lock", "update", "ds", "--to", "2").stdout == \
        "nothing to move: no pin is retired\n"


def test_an_entry_naming_its_repository_is_read_there(run, world, tmp_path,
                                                      tmp_path_factory, monkeypatch):
    project = tmp_path_factory.mktemp("project")  # outside the repository's directory
    monkeypatch.chdir(project)
    r = run("lock", "add", "ds@2", "--repository", str(tmp_path))
    assert r.exit_code == 0, r.stderr
    assert f'repository = "{tmp_path}"' in (project / "cas.lock").read_text()
    assert run("lock", "check").stdout == "ok    ds@2\n"
    r = run("--json", "items", "ds")
    assert r.exit_code == 0 and r.stderr == "ds -> ds@2 (cas.lock)\n"
    assert json.loads(r.stdout)["resolved"]["repository"] == str(tmp_path)
    assert len(json.loads(r.stdout)["items"]) == 4


def test_a_missing_or_malformed_lock_file_is_refused(run, world, tmp_path):
    for command in (("lock", "check"), ("lock", "update"), ("lock", "list"), ("lock", "diff")):
        error = _error(run("--json", *command))
        assert (error["code"], error["reason"]) == ("INVALID_ARGUMENT", "NOT_LOCKED"), command
        assert "cas lock add NAME@N" in error["message"]
    (tmp_path / "cas.lock").write_text('[datasets.ds]\npin = "ds@1"\n')
    r = run("lock", "check")
    assert r.exit_code == 2 and "cas.lock is not a valid lock file: 'ds@1' is not a pin (" in \
        r.stderr
    error = _error(run("--json", "items", "ds"))
    assert (error["reason"], error["path"]) == ("INVALID_LOCK_FILE", str(tmp_path / "cas.lock"))
    r = run("lock", "add", "ds@1")  # a file it cannot read is never overwritten
    assert r.exit_code == 2 and (tmp_path / "cas.lock").read_text().endswith('"ds@1"\n')


def test_diff_as_markdown(run, world):
    r = run("diff", "ds", "1", "2", "--format", "markdown")
    assert r.exit_code == 0
    assert r.stdout.startswith("### `ds@1` \u2192 `ds@2`\n\n3 \u2192 4 cases: **+1** added, "
                               "**\u22120** removed\n")
    assert "| + | `b3:" in r.stdout and "| r-3 | acme | question 3 | committed by Ada" in \
        r.stdout
    data = ok_json(run("--json", "diff", "ds@1", "2", "--format", "markdown"))
    assert (data["added"], data["removed"]) == (1, 0) and data["markdown"] == r.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_lock_diff_against_a_git_revision(run, world, tmp_path):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=A", "-c", "user.email=a@example.com", *args],
                       cwd=tmp_path, check=True, capture_output=True)
    assert run("lock", "add", "ds@1").exit_code == 0
    error = _error(run("--json", "lock", "diff"))
    assert (error["code"], error["reason"]) == ("FAILED_PRECONDITION", "NOT_A_GIT_REPOSITORY")
    git("init", "-q")
    git("add", "cas.lock")
    git("commit", "-q", "-m", "lock ds@1")
    r = run("lock", "diff")
    assert (r.exit_code, r.stdout) == (0, "## Dataset changes in `cas.lock since HEAD`\n\n"
                                          "No dataset pin changed.\n")
    assert run("lock", "add", "ds@2").exit_code == 0
    r = run("lock", "diff", "HEAD")
    assert r.exit_code == 0
    assert "### `ds`: `ds@1` \u2192 `ds@2`" in r.stdout and "**+1** added" in r.stdout
    _erase(run, "p-1")
    assert run("renew", "ds").exit_code == 0
    git("commit", "-q", "-am", "lock ds@2")
    assert run("lock", "update").exit_code == 0
    data = ok_json(run("--json", "lock", "diff"))
    assert data["changed"] == ["ds"]
    assert "1 cases removed by erasure" in data["markdown"]
    assert "are not listed" in data["markdown"]
    r = run("lock", "diff", "no-such-ref")
    assert r.exit_code == 2 and "names no commit" in r.stderr
