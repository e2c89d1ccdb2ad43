"""CLI behaviour: exit codes, exact output, --json shapes, errors as one line or a JSON object."""

import json
import os
import pathlib
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cas_cli.main import EXIT_CODES, cli

EXAMPLE = pathlib.Path(__file__).parent.parent / "examples" / "cases.jsonl"


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    monkeypatch.delenv("CAS_REPO", raising=False)
    runner = CliRunner()

    def invoke(*args, input=None):
        result = runner.invoke(cli, list(args), input=input, catch_exceptions=False)
        return result
    return invoke


@pytest.fixture
def repo(run, tmp_path):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals").exit_code == 0
    r = run("--json", "commit", "evals", "--add", str(EXAMPLE), "-m", "first")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_init_creates_dot_cas_and_refuses_a_second_time(run, tmp_path):
    r = run("init")
    assert r.exit_code == 0
    assert r.stdout == f"initialized empty cas repository in {tmp_path / '.cas'}\n"
    r = run("init")
    assert r.exit_code == EXIT_CODES["ALREADY_EXISTS"] == 4
    assert r.stderr == f"cas: error: a repository already exists at {tmp_path / '.cas'}\n"
    assert r.stdout == ""


def test_commands_outside_a_repository_are_refused(run, tmp_path):
    r = run("fsck")
    assert r.exit_code == 3
    assert "no cas repository" in r.stderr and "cas init" in r.stderr


def test_commit_json_shape(repo):
    assert repo["kind"] == "version" and repo["format"] == 1
    assert repo["dataset"] == "evals" and repo["number"] == 1 and repo["parent"] is None
    assert repo["item_count"] == 5 and repo["added"] == 5 and repo["removed"] == 0
    assert repo["author"] == "Ada <ada@example.com>" and repo["message"] == "first"
    assert repo["content_digest"].startswith("b3:")


def test_items_pages_and_exact_output(run, repo):
    full = json.loads(run("--json", "items", "evals@1").stdout)
    assert full["next_cursor"] is None and len(full["items"]) == 5
    assert full["items"] == sorted(full["items"])
    first = json.loads(run("items", "evals@1", "--limit", "2", "--json").stdout)
    assert first == {"dataset": "evals", "version": 1, "items": full["items"][:2],
                     "next_cursor": full["items"][1]}
    rest = run("items", "evals@1", "--after", first["next_cursor"])
    assert rest.exit_code == 0
    assert rest.stdout == "".join(i + "\n" for i in full["items"][2:])


def test_there_is_no_latest_read(run, repo):
    r = run("items", "evals")
    assert r.exit_code == 2
    assert "expected DATASET@VERSION" in r.stderr
    r = run("--json", "show", "evals@latest")
    assert r.exit_code == 2
    err = json.loads(r.stderr)["error"]
    assert err["code"] == "INVALID_ARGUMENT" and "e.g. demo@3" in err["message"]
    assert r.stdout == ""


def test_commit_needs_base_once_versions_exist_and_stale_base_conflicts(run, repo):
    r = run("commit", "evals", "--add", str(EXAMPLE))
    assert r.exit_code == 2 and "--base" in r.stderr and "newest is 1" in r.stderr
    items = json.loads(run("--json", "items", "evals@1").stdout)["items"]
    r = run("--json", "commit", "evals", "--base", "1", "--remove", items[0])
    assert r.exit_code == 0 and json.loads(r.stdout)["removed"] == 1
    r = run("--json", "commit", "evals", "--base", "1", "--remove", items[1])
    assert r.exit_code == EXIT_CODES["ABORTED"] == 6
    err = json.loads(r.stderr)["error"]
    assert err["code"] == "ABORTED" and err["reason"] == "VERSION_CONFLICT" and err["head"] == 2


def test_case_diff_show(run, repo):
    items = json.loads(run("--json", "items", "evals@1").stdout)["items"]
    case = json.loads(run("--json", "case", "evals@1", items[0]).stdout)
    assert case["case_id"] == items[0] and case["case"]["kind"] == "case"
    run("commit", "evals", "--base", "1", "--remove", items[0])
    r = run("diff", "evals@1", "evals@2")
    assert r.exit_code == 0 and r.stdout == f"- {items[0]}\n"
    assert json.loads(run("--json", "diff", "evals@2", "1").stdout) == {
        "added": [items[0]], "removed": []}
    r = run("case", "evals@2", items[0])
    assert r.exit_code == 3 and r.stderr == f"cas: error: case {items[0]} is not in evals@2\n"
    shown = json.loads(run("--json", "show", "evals@2").stdout)
    assert shown["number"] == 2 and shown["parent"] == 1 and shown["item_count"] == 4


def test_cat_prints_verified_canonical_bytes(run, repo):
    r = run("cat", repo["content_digest"])
    assert r.exit_code == 0
    from cas.digest import digest_of
    data = r.stdout_bytes.rstrip(b"\n")
    assert digest_of(json.loads(data)["kind"], data) == repo["content_digest"]
    r = run("cat", "b3:" + "0" * 64)
    assert r.exit_code == 3
    r = run("cat", "nonsense")
    assert r.exit_code == 2 and "64 hex digits" in r.stderr


def test_prove_and_verify_proof(run, repo, tmp_path):
    items = json.loads(run("--json", "items", "evals@1").stdout)["items"]
    proof = run("prove", "evals@1", items[2]).stdout
    (tmp_path / "p.json").write_text(proof)
    r = run("verify-proof", str(tmp_path / "p.json"), "--root", repo["content_digest"])
    assert r.exit_code == 0 and r.stdout.startswith("valid: ")
    r = run("--json", "verify-proof", str(tmp_path / "p.json"), "--case", items[3])
    assert r.exit_code == 5
    assert json.loads(r.stderr)["error"]["reason"] == "PROOF_INVALID"


def test_dataset_commands(run, repo):
    r = run("dataset", "create", "Bad Name")
    assert r.exit_code == 2 and "a-z, 0-9" in r.stderr
    r = run("dataset", "create", "evals")
    assert r.exit_code == 4
    assert json.loads(run("--json", "dataset", "list").stdout) == {"datasets": ["evals"]}
    r = run("--json", "dataset", "edit", "evals", "--description", "new", "--tag", "b", "--tag", "a")
    assert json.loads(r.stdout)["revision"] == 2 and json.loads(r.stdout)["tags"] == ["a", "b"]
    hist = json.loads(run("--json", "dataset", "history", "evals").stdout)["revisions"]
    assert [h["description"] for h in hist] == ["", "new"]
    shown = json.loads(run("--json", "dataset", "show", "evals").stdout)
    assert shown["dataset"]["description"] == "new"
    assert [v["number"] for v in shown["versions"]] == [1] and shown["next_before"] is None


def test_bad_jsonl_names_line_and_field_and_changes_nothing(run, repo, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": 1}\n{"input": 2, "steps": [3]}\n')
    before = sorted(p.name for p in (tmp_path / ".cas").rglob("*") if p.is_file())
    r = run("commit", "evals", "--base", "1", "--add", str(bad))
    assert r.exit_code == 2
    assert "line 2" in r.stderr and "$.steps[0]" in r.stderr
    after = sorted(p.name for p in (tmp_path / ".cas").rglob("*") if p.is_file())
    assert before == after


def test_fsck_json_and_exit_code_on_damage(run, repo, tmp_path):
    r = run("--json", "fsck")
    assert r.exit_code == 0
    report = json.loads(r.stdout)
    assert report["ok"] is True and report["versions"] == 1 and report["problems"] == []
    version_file = tmp_path / ".cas" / "datasets" / "evals" / "versions" / "0000000001"
    data = bytearray(version_file.read_bytes())
    data[-5] ^= 0x01
    version_file.write_bytes(bytes(data))
    r = run("fsck")
    assert r.exit_code == 7
    assert "datasets/evals/versions/0000000001" in r.stdout and "DAMAGED" in r.stdout


def test_repo_option_and_env(run, repo, tmp_path, monkeypatch):
    monkeypatch.chdir("/")
    assert run("--repo", str(tmp_path), "dataset", "list").stdout == "evals\n"
    monkeypatch.setenv("CAS_REPO", str(tmp_path))
    assert run("dataset", "list").stdout == "evals\n"


def test_console_script_help_is_fast_and_does_not_import_the_library():
    code = ("import sys; sys.argv=['cas','--help']\n"
            "from cas_cli.main import main\n"
            "try:\n    main()\nexcept SystemExit: pass\n"
            "print('LOADED', 'cas.repository' in sys.modules, 'msgspec' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Usage: cas" in out.stdout
    assert out.stdout.strip().endswith("LOADED False False")
