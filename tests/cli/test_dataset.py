"""`cas dataset ...`: create (the admission rule), list, show (each version's state), edit,
history and delete of datasets."""

import json

import pytest

from support.citing import refused
from support.cli import ADA, commit_example


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


def test_dataset_commands(run, repo):
    r = run("dataset", "create", "Bad Name", "--admission", "direct")
    assert r.exit_code == 2 and "a-z, 0-9" in r.stderr
    r = run("dataset", "create", "evals", "--admission", "direct")
    assert r.exit_code == 4
    assert json.loads(run("--json", "dataset", "list").stdout) == {"datasets": ["evals"]}
    r = run("--json", "dataset", "edit", "evals", "--description", "new", "--tag", "b",
            "--tag", "a")
    assert json.loads(r.stdout)["revision"] == 2 and json.loads(r.stdout)["tags"] == ["a", "b"]
    hist = json.loads(run("--json", "dataset", "history", "evals").stdout)["revisions"]
    assert [h["description"] for h in hist] == ["", "new"]
    shown = json.loads(run("--json", "dataset", "show", "evals").stdout)
    assert shown["dataset"]["description"] == "new"
    assert [v["number"] for v in shown["versions"]] == [1] and shown["next_before"] is None


def test_cli_dataset_delete(run, evals):
    assert run("experiment", "create", "evals", "2", "--name", "base").exit_code == 0
    refused(run("dataset", "delete", "evals"), "FAILED_PRECONDITION",
            "dataset 'evals' is cited by experiment 'base' (datasets/evals/experiments/"
            "0000000001, over evals@2); a cited dataset cannot be deleted")
    assert run("dataset", "create", "spare", "--admission", "direct").exit_code == 0
    r = run("dataset", "delete", "spare")
    assert (r.exit_code, r.stdout) == (
        0, "deleted dataset spare; the name 'spare' cannot be used again\n")
    tomb = evals.refs.read_dataset_tombstone("spare")
    refused(run("dataset", "create", "spare", "--admission", "direct"), "ALREADY_EXISTS",
            f"dataset 'spare' was deleted ({tomb.deleted_at} by Ada <ada@example.com>); the "
            "name of a deleted dataset cannot be used again")
    refused(run("dataset", "show", "spare"), "NOT_FOUND",
            f"dataset 'spare' was deleted ({tomb.deleted_at} by Ada <ada@example.com>)")
    refused(run("dataset", "delete", "spare"), "NOT_FOUND",
            f"dataset 'spare' was already deleted ({tomb.deleted_at} by Ada <ada@example.com>)")
    assert run("dataset", "list").stdout == "evals\n"
    assert run("dataset", "create", "other", "--admission", "direct").exit_code == 0
    t = json.loads(run("--json", "dataset", "delete", "other").stdout)
    assert t == {"kind": "dataset.tombstone", "format": 1, "dataset": "other", "head": 0,
                 "author": "Ada <ada@example.com>", "deleted_at": t["deleted_at"]}
    assert run("fsck").exit_code == 0


def test_cli_admission(run, tmp_path):
    assert run("init").exit_code == 0
    r = run("dataset", "create", "evals")
    assert r.stdout == ("created dataset evals (admission reviewed: only promotion of "
                        "reviewed runs adds cases)\n")
    (tmp_path / "cases.jsonl").write_text('{"input": 1}\n')
    r = run("--json", "commit", "evals", "--add", "cases.jsonl")
    assert r.exit_code == 5
    assert json.loads(r.stderr)["error"]["reason"] == "ADMISSION_REVIEWED_ONLY"
    assert run("dataset", "create", "gold", "--admission", "direct").exit_code == 0
    assert run("commit", "gold", "--add", "cases.jsonl").exit_code == 0
    shown = run("dataset", "show", "gold").stdout.splitlines()
    assert shown[1] == "  admission: direct (commits may add cases, as promotion does)"
    data = json.loads(run("--json", "dataset", "show", "evals").stdout)
    assert data["dataset"]["admission"] == "reviewed"
    r = run("dataset", "create", "x", "--admission", "open")
    assert r.exit_code == 2 and "'reviewed', 'direct'" in r.stderr


def test_cli_dataset_show_lists_states(promoted, run):
    promoted.retire("evals", 2, "CONTAMINATED", "leaked")
    vs = [promoted.version("evals", n) for n in (3, 2, 1)]
    r = run("dataset", "show", "evals")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[0] == "evals (revision 2) (retired by an operator: @2)"  # its witness (4.4)
    assert lines[1] == "  admission: direct (commits may add cases, as promotion does)"
    assert lines[2] == (
        "  content policy: withholds tool_results (the repository default, settings revision 1)")
    del lines[1:3]
    states = ["ACTIVE                ", "RETIRED (CONTAMINATED)", "ACTIVE                "]
    assert lines[1:] == [f"  evals@{v.number}  {s}  {v.item_count} cases (+{v.added} "
                         f"-{v.removed})  promote  {ADA}  {v.sealed_at}" for v, s in
                         zip(vs, states)]
    data = json.loads(run("--json", "dataset", "show", "evals").stdout)
    assert [(v["number"], v["state"], v["retirement_cause"]) for v in data["versions"]] == [
        (3, "ACTIVE", None), (2, "RETIRED", "CONTAMINATED"), (1, "ACTIVE", None)]


# -- cas dataset import --from TOOL (cas/interop/datasets/) -----------------------------------
def test_cli_dataset_import_seals_once_then_says_unchanged(run, tmp_path):
    from support.dataset_exports import BRAINTRUST_ROWS, jsonl
    assert run("init").exit_code == 0
    (tmp_path / "bt.jsonl").write_bytes(jsonl(BRAINTRUST_ROWS + [{"input": 3, "score": 1}]))
    r = run("dataset", "import", "--from", "braintrust", "bt.jsonl", "gold", "--tenant", "acme")
    assert (r.exit_code, r.stdout) == (0, (
        "3 examples read: 3 cases, 3 new\n"
        "sealed gold@1 (3 cases, +3); created dataset gold (admission direct)\n"
        "  no place for 'score' (1x, first at bt.jsonl line 3): kept in "
        "metadata.from.braintrust.extra\n"))
    r = run("--json", "dataset", "import", "--from", "braintrust", "bt.jsonl", "gold",
            "--tenant", "acme")
    data = json.loads(r.stdout)
    assert r.exit_code == 0 and (data["status"], data["new"], data["version"], data["base"]) == (
        "unchanged", 0, None, 1)
    assert set(data) == {"dataset", "source", "path", "items", "skipped", "cases",
                         "duplicates", "new", "unplaced", "created", "status", "base",
                         "version", "case_ids"}
    assert run("dataset", "import", "--from", "braintrust", "bt.jsonl", "gold", "--tenant",
               "acme").stdout.splitlines()[1] == (
        "unchanged: gold@1 already holds every case; nothing sealed")
    r = run("dataset", "import", "--from", "braintrust", "bt.jsonl", "gold", "--dry-run")
    assert r.stdout.splitlines()[1] == "dry run: would seal gold@2"
    assert json.loads(run("--json", "dataset", "show", "gold").stdout)["versions"][0][
        "operation"] == "commit"


def test_cli_dataset_import_refusals_change_nothing(run, tmp_path):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "reviewed").exit_code == 0
    (tmp_path / "bad.jsonl").write_bytes(b'{"input": 1}\n{"input": \n')
    (tmp_path / "ok.jsonl").write_bytes(b'{"input": 1}\n')
    r = run("--json", "dataset", "import", "--from", "braintrust", "bad.jsonl", "gold")
    err = json.loads(r.stderr)["error"]
    assert r.exit_code == 2 and err["message"].startswith("bad.jsonl line 2: invalid JSON")
    assert err["line"] == 2
    r = run("--json", "dataset", "import", "--from", "csv", "ok.jsonl", "gold")
    assert r.exit_code == 2 and json.loads(r.stderr)["error"]["reason"] == "UNKNOWN_FORMAT"
    r = run("--json", "dataset", "import", "--from", "langsmith", "none.json", "gold")
    assert r.exit_code == 3 and json.loads(r.stderr)["error"]["reason"] == "FILE_NOT_FOUND"
    r = run("--json", "dataset", "import", "--from", "jsonl", "ok.jsonl", "reviewed")
    assert r.exit_code == 5
    assert json.loads(r.stderr)["error"]["reason"] == "ADMISSION_REVIEWED_ONLY"
    r = run("--json", "dataset", "import", "--from", "langfuse", "ok.jsonl", "gold", "--map",
            "input=x")
    assert r.exit_code == 2 and json.loads(r.stderr)["error"]["reason"] == "INVALID_MAPPING"
    assert run("dataset", "list").stdout == "reviewed\n"


def test_cli_export_to_a_tool_and_import_back(run, tmp_path):
    from support.dataset_exports import LANGSMITH_SDK, write
    assert run("init").exit_code == 0
    write(tmp_path / "ls.json", LANGSMITH_SDK)
    assert run("dataset", "import", "--from", "langsmith", "ls.json", "gold").exit_code == 0
    for tool in ("langsmith", "langfuse", "phoenix", "braintrust"):
        r = run("--json", "export", "gold@1", "--to", tool, "-o", f"out.{tool}")
        assert r.exit_code == 0 and json.loads(r.stdout)["cases"] == 2
        r = run("--json", "dataset", "import", "--from", tool, f"out.{tool}", f"back-{tool}")
        assert r.exit_code == 0, r.stderr
        digests = {json.loads(run("--json", "dataset", "show", n).stdout)["versions"][0][
            "content_digest"] for n in ("gold", f"back-{tool}")}
        assert len(digests) == 1
    r = run("export", "gold@1", "--to", "langsmith")
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["inputs"]
