"""`cas promote`, `remove`, `seal`, `commit`, the exact reads (`show`, `items`, `case`,
`diff`, `prove`, `verify-proof`), `log` (beside `status`), `export` and `replay`: exit codes,
exact output, --json shapes; reads of promoted cases (their run, tenant and outcome) and of a
repository whose erasure is pending; replays on each backend."""

import io
import json
import os

import pytest
from blake3 import blake3
from click.testing import CliRunner

import cas
from cas.interop import exports
from cas_cli.main import EXIT_CODES, cli
from support import recordings
from support.cli import (ADA, EXAMPLE, ITEMS_FORMS, add_review, commit_example, error_line, files,
                         ids, no_latest, ok_json, promote, refused, seal, subject, subjects_file,
                         write_jsonl)
from support.lifecycle import jsonl, keys, pending_erasure, run_obj, snapshot
from support.promoted import case_of, make_gold
from support.recordings import (PLAN, C, R, S, call, expected_detail, keys_and_bytes,
                                organised_version, write)

AUTHOR = ADA  # who retires a version the export tests read


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


def summary(repo_json, state="ACTIVE"):
    return {key: repo_json[key] for key in ("dataset", "number", "item_count", "content_digest")} \
        | {"state": state}


def item(run, case_id, ref="evals@1"):
    """The `items` JSON entry of a case: its id, run (none: committed directly), tenant and
    outcome, as `cas case` shows them."""
    c = json.loads(run("--json", "case", ref, case_id).stdout)
    return {"id": case_id, "run_id": None, "tenant": c["tenant"], "outcome": c["outcome"]}


def table(rows, head=""):
    """The human table of `items` (or, with head "  " and signed ids, `diff`): (id, run,
    tenant, outcome cell) rows aligned under CASE RUN TENANT OUTCOME."""
    header = (head + "CASE", "RUN", "TENANT", "OUTCOME")
    widths = [max(len(r[k]) for r in rows + [header]) for k in range(3)]
    return "".join("  ".join([r[0].ljust(widths[0]), r[1].ljust(widths[1]),
                              r[2].ljust(widths[2]), r[3]]) + "\n" for r in [header] + rows)


def example_rows(run, case_ids, sign=""):
    out = []
    for i in case_ids:
        e = item(run, i)
        out.append((sign + i, "-", e["tenant"], e["outcome"]["status"]))
    return out


def test_commit_json_shape(repo):
    assert repo["kind"] == "version" and repo["format"] == 1
    assert repo["dataset"] == "evals" and repo["number"] == 1 and repo["parent"] is None
    assert repo["item_count"] == 5 and repo["added"] == 5 and repo["removed"] == 0
    assert repo["author"] == "Ada <ada@example.com>" and repo["message"] == "first"
    assert repo["content_digest"].startswith("b3:")


def test_items_pages_and_exact_output(run, repo):
    full = json.loads(run("--json", "items", "evals", "1").stdout)
    all_ids = [i["id"] for i in full["items"]]
    assert full == {"version": summary(repo), "items": [item(run, i) for i in all_ids],
                    "next_cursor": None,
                    "pagination": {"next_cursor": None, "has_more": False}}
    assert len(all_ids) == 5 and all_ids == sorted(all_ids)
    # DATASET@VERSION is the same read
    assert json.loads(run("--json", "items", "evals@1").stdout) == full
    first = json.loads(run("items", "evals", "1", "--limit", "2", "--json").stdout)
    assert first == {"version": summary(repo), "items": [item(run, i) for i in all_ids[:2]],
                     "next_cursor": all_ids[1],
                     "pagination": {"next_cursor": all_ids[1], "has_more": True}}
    r = run("items", "evals", "1", "--limit", "2")
    assert r.exit_code == 0
    assert r.stdout == (table(example_rows(run, all_ids[:2]))
                        + f"# more: --cursor {all_ids[1]}\n")
    rest = run("items", "evals", "1", "--cursor", all_ids[1])
    assert rest.exit_code == 0
    assert rest.stdout == table(example_rows(run, all_ids[2:]))
    # --after is an alias of --cursor
    assert run("items", "evals@1", "--after", all_ids[1]).stdout == rest.stdout


def test_items_has_more_at_the_boundary(run, repo):
    all_ids = ids(run, "evals", "1")
    # exactly `limit` items left: the page holds them all and there is no more
    for limit, cursor in ((5, None), (3, all_ids[1]), (1, all_ids[3])):
        args = ["--json", "items", "evals", "1", "--limit", str(limit)]
        if cursor:
            args += ["--cursor", cursor]
        page = json.loads(run(*args).stdout)
        assert [i["id"] for i in page["items"]] == all_ids[-limit:]
        assert page["pagination"] == {"next_cursor": None, "has_more": False}
    # one more than the page
    page = json.loads(run("--json", "items", "evals", "1", "--limit", "4").stdout)
    assert page["pagination"] == {"next_cursor": all_ids[3], "has_more": True}
    page = json.loads(run("--json", "items", "evals", "1", "--limit", "2",
                          "--cursor", all_ids[1]).stdout)
    assert page["pagination"] == {"next_cursor": all_ids[3], "has_more": True}
    # after the last id: an empty page, no more
    page = json.loads(run("--json", "items", "evals", "1", "--cursor", all_ids[4]).stdout)
    assert page["items"] == [] and page["pagination"] == {"next_cursor": None, "has_more": False}
    r = run("items", "evals", "1", "--cursor", all_ids[4])
    assert r.exit_code == 0 and r.stdout == ""


@pytest.mark.parametrize("limit", ["0", "501", "-1", "100000"])
def test_limit_out_of_range_is_refused_not_clamped(run, repo, limit):
    message = f"limit must be a positive integer from 1 to 500, not {limit}"
    for args in (("items", "evals", "1"), ("diff", "evals", "1", "1")):
        r = run(*args, "--limit", limit)
        assert r.exit_code == 2
        assert r.stdout == "" and r.stderr == error_line(message)
        r = run("--json", *args, "--limit", limit)
        assert r.exit_code == 2 and r.stdout == ""
        assert json.loads(r.stderr) == {"error": {
            "code": "INVALID_ARGUMENT", "reason": None, "message": message,
            "minimum": 1, "maximum": 500}}
    for limit in ("1", "500"):
        assert run("items", "evals", "1", "--limit", limit).exit_code == 0


CASE_FORMS = ("case DATASET VERSION CASE_ID", "case DATASET@VERSION CASE_ID")


DIFF_FORMS = ("diff DATASET A B", "diff DATASET@A [DATASET@]B")


NOT_LOCKED = ", and no cas.lock (here or in a parent directory) locks 'evals' " \
    "(`cas lock add evals@N`)"


@pytest.mark.parametrize("args,message", [
    (("items", "evals"), no_latest("no version given for dataset 'evals'" + NOT_LOCKED,
                                   *ITEMS_FORMS)),
    (("items",), no_latest("missing DATASET and VERSION", *ITEMS_FORMS)),
    (("items", "evals", "latest"), no_latest("'latest' is not a version number", *ITEMS_FORMS)),
    (("items", "evals@latest"), no_latest("'latest' is not a version number", *ITEMS_FORMS)),
    (("items", "evals@"), no_latest("'' is not a version number", *ITEMS_FORMS)),
    (("items", "evals", "0"), no_latest("'0' is not a version number", *ITEMS_FORMS)),
    (("show", "evals"), no_latest("no version given for dataset 'evals'",
                                  "show DATASET VERSION", "show DATASET@VERSION")),
    (("case", "evals", "b3:" + "a" * 64),
     no_latest(f"'b3:{'a' * 64}' is not a version number", *CASE_FORMS)),
    (("prove", "evals"), no_latest("no version given for dataset 'evals'",
                                   "prove DATASET VERSION CASE_ID",
                                   "prove DATASET@VERSION CASE_ID")),
    (("diff", "evals", "1"), no_latest("missing B" + NOT_LOCKED, *DIFF_FORMS)),
    (("diff", "evals"), no_latest("no version given for dataset 'evals'", *DIFF_FORMS)),
    (("diff", "evals@1", "latest"), no_latest("'latest' is not a version number", *DIFF_FORMS)),
    (("diff", "evals@1", "evals@latest"),
     no_latest("'evals@latest' is not a version number", *DIFF_FORMS)),
])
def test_every_read_needs_an_exact_version(run, repo, args, message):
    r = run(*args)
    assert r.exit_code == 2
    assert r.stdout == "" and r.stderr == error_line(message)
    r = run("--json", *args)
    assert r.exit_code == 2 and r.stdout == ""
    err = json.loads(r.stderr)["error"]
    # a name alone resolves through cas.lock (docs/lock.md): refused as NOT_LOCKED without one
    reason = "NOT_LOCKED" if NOT_LOCKED in message else "VERSION_REQUIRED"
    assert err["code"] == "INVALID_ARGUMENT" and err["reason"] == reason
    assert err["message"] == message


def test_read_argument_count_errors(run, repo):
    r = run("case", "evals", "1")
    assert r.exit_code == 2
    assert r.stderr == error_line("missing CASE_ID (use: cas case DATASET VERSION CASE_ID or "
                                  "cas case DATASET@VERSION CASE_ID)")
    r = run("--json", "items", "evals", "1", "2")
    assert r.exit_code == 2
    assert json.loads(r.stderr) == {"error": {
        "code": "INVALID_ARGUMENT", "reason": "USAGE",
        "message": "unexpected extra argument '2' (use: cas items DATASET VERSION or "
                   "cas items DATASET@VERSION)",
        "usage": ["cas items DATASET VERSION", "cas items DATASET@VERSION"]}}


def test_unknown_version_dataset_and_bad_cursor(run, repo):
    case_id = ids(run, "evals", "1")[0]
    for args in (("items", "evals", "9"), ("show", "evals", "9"), ("case", "evals", "9", case_id),
                 ("prove", "evals@9", case_id), ("diff", "evals", "1", "9"),
                 ("diff", "evals", "9", "1")):
        r = run(*args)
        assert r.exit_code == 3 and r.stdout == ""
        assert r.stderr == error_line("dataset 'evals' has no version 9"), args
    r = run("--json", "items", "evals", "9")
    assert r.exit_code == 3
    assert json.loads(r.stderr) == {"error": {
        "code": "NOT_FOUND", "reason": None, "message": "dataset 'evals' has no version 9",
        "dataset": "evals", "version": 9}}
    for args in (("items", "nope", "1"), ("show", "nope@1"), ("case", "nope", "1", case_id),
                 ("prove", "nope", "1", case_id), ("diff", "nope", "1", "2"),
                 ("diff", "evals", "1", "nope@1")):
        r = run(*args)
        assert r.exit_code == 3 and r.stdout == ""
        assert r.stderr == error_line("no dataset named 'nope'"), args
    bad = ("cursor 'xyz' is not a digest; expected 'b3:' followed by 64 hex digits")
    for args in (("items", "evals", "1"), ("diff", "evals", "1", "1")):
        r = run(*args, "--cursor", "xyz")
        assert r.exit_code == 2 and r.stdout == "" and r.stderr == error_line(bad)
    r = run("case", "evals", "1", "xyz")
    assert r.exit_code == 2
    assert r.stderr == error_line("case id 'xyz' is not a digest; expected 'b3:' followed by "
                                  "64 hex digits")


def test_commit_needs_base_once_versions_exist_and_stale_base_conflicts(run, repo):
    r = run("commit", "evals", "--add", str(EXAMPLE))
    assert r.exit_code == 2 and "--base" in r.stderr and "newest is 1" in r.stderr
    items = ids(run, "evals@1")
    r = run("--json", "commit", "evals", "--base", "1", "--remove", items[0])
    assert r.exit_code == 0 and json.loads(r.stdout)["removed"] == 1
    r = run("--json", "commit", "evals", "--base", "1", "--remove", items[1])
    assert r.exit_code == EXIT_CODES["ABORTED"] == 6
    err = json.loads(r.stderr)["error"]
    assert err["code"] == "ABORTED" and err["reason"] == "VERSION_CONFLICT" and err["head"] == 2


def test_case_show_and_case_not_in_version(run, repo):
    items = ids(run, "evals", "1")
    case = json.loads(run("--json", "case", "evals", "1", items[0]).stdout)
    assert case["id"] == items[0] and case["kind"] == "case" and case["format"] == 1
    assert case["tenant"] == "acme" and case["withheld"] == []
    stored = json.loads(run("--json", "cat", items[0]).stdout)["object"]
    assert case == {"id": items[0], **stored}
    assert json.loads(run("--json", "case", "evals@1", items[0]).stdout) == case
    r = run("case", "evals", "1", items[0])
    assert r.exit_code == 0
    assert r.stdout == json.dumps(case, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    # the id is accepted in upper case and printed canonically
    upper = json.loads(run("--json", "case", "evals", "1", items[0].upper()).stdout)
    assert upper == case
    second = json.loads(run("--json", "commit", "evals", "--base", "1", "--remove",
                            items[0]).stdout)
    for args in (("case", "evals", "2", items[0]), ("case", "evals@2", items[0]),
                 ("prove", "evals", "2", items[0])):
        r = run(*args)
        assert r.exit_code == 3 and r.stdout == ""
        assert r.stderr == error_line(f"case {items[0]} is not in evals@2")
    r = run("--json", "case", "evals", "2", items[0])
    assert json.loads(r.stderr) == {"error": {
        "code": "NOT_FOUND", "reason": None, "message": f"case {items[0]} is not in evals@2",
        "case_id": items[0], "dataset": "evals", "version": 2}}
    shown = json.loads(run("--json", "show", "evals", "2").stdout)
    assert shown == {**second, "state": "ACTIVE", "retirement_cause": None, "retired_at": None,
                     "retirement_note": None, "retired_by": None}
    assert json.loads(run("--json", "show", "evals@2").stdout) == shown
    r = run("show", "evals", "2")
    assert r.exit_code == 0
    assert r.stdout == (
        f"evals@2: 4 cases (+0 -1) {second['content_digest']}\n"
        "state:     ACTIVE\n"
        "parent:    1\n"
        "operation: commit\n"
        "author:    Ada <ada@example.com>\n"
        f"sealed at: {second['sealed_at']}\n")


def test_diff_forms_and_shape(run, repo):
    items = ids(run, "evals", "1")
    second = json.loads(run("--json", "commit", "evals", "--base", "1", "--remove",
                            items[0]).stdout)
    for args in (("diff", "evals", "1", "2"), ("diff", "evals@1", "evals@2"),
                 ("diff", "evals@1", "2")):
        r = run(*args)
        assert r.exit_code == 0
        assert r.stdout == table(example_rows(run, items[:1], "- "), head="  ")
    assert json.loads(run("--json", "diff", "evals", "2", "1").stdout) == {
        "from": summary(second), "to": summary(repo), "added": [items[0]], "removed": [],
        "changes": [{"change": "added", **item(run, items[0])}], "next_cursor": None,
        "pagination": {"next_cursor": None, "has_more": False}}
    assert json.loads(run("--json", "diff", "evals", "1", "1").stdout) == {
        "from": summary(repo), "to": summary(repo), "added": [], "removed": [],
        "changes": [], "next_cursor": None,
        "pagination": {"next_cursor": None, "has_more": False}}
    # across datasets: B names its own dataset
    assert run("dataset", "create", "other", "--admission", "direct").exit_code == 0
    other = json.loads(run("--json", "commit", "other", "--add", str(EXAMPLE)).stdout)
    r = json.loads(run("--json", "diff", "evals", "2", "other@1").stdout)
    assert r["to"] == summary(other) and r["added"] == [items[0]] and r["removed"] == []


def test_diff_pages_concatenate_to_the_full_diff(run, repo, tmp_path):
    items = ids(run, "evals", "1")
    extra = tmp_path / "extra.jsonl"
    extra.write_text("".join(json.dumps({"input": f"question {n}"}) + "\n" for n in range(7)))
    r = run("--json", "commit", "evals", "--base", "1", "--add", str(extra),
            "--remove", items[1], "--remove", items[3])
    assert r.exit_code == 0, r.output
    second = json.loads(r.stdout)
    new_ids = ids(run, "evals", "2")
    added, removed = sorted(set(new_ids) - set(items)), [items[1], items[3]]
    changes = sorted([(i, "+") for i in added] + [(i, "-") for i in removed])
    assert len(changes) == 9
    full = json.loads(run("--json", "diff", "evals", "1", "2").stdout)
    assert {k: v for k, v in full.items() if k != "changes"} == {
        "from": summary(repo), "to": summary(second), "added": added, "removed": removed,
        "next_cursor": None, "pagination": {"next_cursor": None, "has_more": False}}
    assert [(c["id"], c["change"]) for c in full["changes"]] == [
        (i, "added" if sign == "+" else "removed") for i, sign in changes]
    for limit in (1, 2, 3, 4, 8, 9, 10):
        got_added, got_removed, cursor, pages = [], [], None, 0
        while True:
            args = ["--json", "diff", "evals", "1", "2", "--limit", str(limit)]
            if cursor:
                args += ["--cursor", cursor]
            page = json.loads(run(*args).stdout)
            pages += 1
            assert page["from"] == full["from"] and page["to"] == full["to"]
            held = page["added"] + page["removed"]
            assert 0 < len(held) <= limit
            got_added += page["added"]
            got_removed += page["removed"]
            cursor = page["pagination"]["next_cursor"]
            assert page["pagination"]["has_more"] is (cursor is not None)
            if cursor is None:
                break
            assert cursor == max(held) and len(held) == limit
        assert (got_added, got_removed) == (added, removed)
        assert pages == -(-len(changes) // limit)  # exactly limit left: no empty last page
    # human output: one page of changes in id order, then the continuation
    def rows(part):
        out = []
        for i, sign in part:
            c = json.loads(run("--json", "case", "evals@1" if sign == "-" else "evals@2",
                               i).stdout)
            out.append((f"{sign} {i}", "-", "-" if c["tenant"] is None else c["tenant"],
                        "-" if c["outcome"] is None else c["outcome"]["status"]))
        return out
    r = run("diff", "evals@1", "evals@2", "--limit", "4")
    assert r.exit_code == 0
    assert r.stdout == table(rows(changes[:4]), head="  ") + \
        f"# more: --cursor {changes[3][0]}\n"
    r = run("diff", "evals", "1", "2", "--after", changes[3][0])
    assert r.stdout == table(rows(changes[4:]), head="  ")


def test_prove_and_verify_proof(run, repo, tmp_path):
    items = ids(run, "evals", "1")
    proof = run("prove", "evals", "1", items[2]).stdout
    assert run("prove", "evals@1", items[2]).stdout == proof
    assert json.loads(run("--json", "prove", "evals", "1", items[2]).stdout) == json.loads(proof)
    assert json.loads(proof)["root"] == repo["content_digest"]
    (tmp_path / "p.json").write_text(proof)
    r = run("verify-proof", str(tmp_path / "p.json"), "--root", repo["content_digest"])
    assert r.exit_code == 0 and r.stdout.startswith("valid: ")
    r = run("--json", "verify-proof", str(tmp_path / "p.json"), "--case", items[3])
    assert r.exit_code == 5
    assert json.loads(r.stderr)["error"]["reason"] == "PROOF_INVALID"


def test_bad_jsonl_names_line_and_field_and_changes_nothing(run, repo, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": 1}\n{"input": 2, "steps": [3]}\n')
    before = sorted(p.name for p in (tmp_path / ".cas").rglob("*") if p.is_file())
    r = run("commit", "evals", "--base", "1", "--add", str(bad))
    assert r.exit_code == 2
    assert "line 2" in r.stderr and "$.steps[0]" in r.stderr
    after = sorted(p.name for p in (tmp_path / ".cas").rglob("*") if p.is_file())
    assert before == after


def test_promote_and_seal_shapes_and_output(run, reviewed, tmp_path):
    path = subjects_file(tmp_path, subject("r-0", reviewed["r-0"]),
                         subject("r-1", reviewed["r-1"]))
    before = files(tmp_path)
    p = ok_json(run("--json", "promote", "evals", "--file", path, "--idempotency-key", "k1"))
    token, added = p["confirm_token"], p["proposed"]["added"]
    assert [(c["id"], c["tenant"], c["outcome"]) for c in p["proposed"]["added_cases"]] == [
        (a, "acme", {"status": "success"}) for a in added]
    assert p == {"confirm_token": token, "dataset": "evals", "operation": "promote",
                 "base_version": None,
                 "proposed": {"item_count": 2, "content_digest": p["proposed"]["content_digest"],
                              "added": added, "removed": [], "carried": [], "carried_count": 0,
                              "carried_complete": True, "added_count": 2, "removed_count": 0,
                              "added_cases": p["proposed"]["added_cases"], "removed_cases": []},
                 "withheld": {a: [] for a in added}, "changes": True, "stale": False,
                 "restage": None, "page": {"after": None, "limit": 100}, "next_cursor": None,
                 "subjects": [{"run_id": r, "annotation_id": reviewed[r],
                               "metric": "dataset_eligibility", "label": "reviewed",
                               "reviewer": ADA} for r in ("r-0", "r-1")], "subjects_count": 2}
    assert len(added) == 2 and added == sorted(added)
    assert not any(f.startswith(".cas/datasets/evals/versions/") for f, _ in files(tmp_path))
    assert len(files(tmp_path)) > len(before)
    # the human preview, from a replay of the same key: the same proposal; each case beside
    # its run, tenant and outcome
    by_case = {c["id"]: c["run_id"] for c in p["proposed"]["added_cases"]}
    assert sorted(by_case.values()) == ["r-0", "r-1"]
    r = run("promote", "evals", "--file", path, "--idempotency-key", "k1")
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout == (
        "promote into evals: base none (first version)\n"
        f"  {'CASE':67}  RUN  TENANT  OUTCOME\n"
        + "".join(f"+ {a}  {by_case[a]}  acme    success\n" for a in added) +
        f"judged: r-0: reviewed (dataset_eligibility) by {ADA}\n"
        f"judged: r-1: reviewed (dataset_eligibility) by {ADA}\n"
        f"proposed: 2 cases (2 new, 0 carried) {p['proposed']['content_digest']}\n"
        f"nothing is sealed yet; to seal: cas seal evals --confirm-token {token}\n")
    sealed = seal(run, token)
    v = sealed["version"]
    assert sealed == {"sealed": True, "already_sealed": False, "version": {
        "dataset": "evals", "number": 1, "item_count": 2,
        "content_digest": p["proposed"]["content_digest"], "state": "ACTIVE", "parent": None,
        "added": 2, "removed": 0, "operation": "promote", "sealed_at": v["sealed_at"],
        "author": ADA}}
    before = files(tmp_path)
    again = seal(run, token)
    assert again == {**sealed, "already_sealed": True}
    r = run("seal", "evals", "--confirm-token", token)
    assert r.stdout == (f"already sealed as evals@1: 2 cases (+2 -0) {v['content_digest']}\n")
    assert files(tmp_path) == before
    items = ok_json(run("--json", "items", "evals", "1"))
    assert [i["id"] for i in items["items"]] == added
    # the second promotion: base named, carried listed, human output
    path2 = subjects_file(tmp_path, subject("r-2", reviewed["r-2"]), name="s2.json")
    p2 = ok_json(run("--json", "promote", "evals", "--file", path2, "--idempotency-key", "k2"))
    [new] = p2["proposed"]["added"]
    assert p2["base_version"] == {"number": 1, "item_count": 2,
                                  "content_digest": v["content_digest"]}
    assert p2["proposed"]["carried"] == added and p2["proposed"]["carried_count"] == 2
    r = run("seal", "evals", "--confirm-token", p2["confirm_token"], "-m", "more")
    v2 = ok_json(run("--json", "show", "evals", "2"))
    assert (r.exit_code, r.stdout) == (
        0, f"sealed evals@2: 3 cases (+1 -0) {p2['proposed']['content_digest']}\n")
    assert (v2["message"], v2["proposal"], v2["operation"]) == ("more", p2["confirm_token"],
                                                                "promote")



def test_preview_pages_a_staged_proposal(run, reviewed, tmp_path):
    """`cas preview` reads a staged proposal back a page at a time; the pages' cases are the
    proposal's, each once, and the last page says `next_cursor: null`."""
    path = subjects_file(tmp_path, *(subject(f"r-{i}", reviewed[f"r-{i}"]) for i in range(4)))
    p = ok_json(run("--json", "promote", "evals", "--file", path, "--idempotency-key", "k1"))
    token, added = p["confirm_token"], p["proposed"]["added"]
    before = files(tmp_path)
    pages, cursor = [], None
    while True:
        args = ["--json", "preview", "evals", "--confirm-token", token, "--limit", "3"]
        page = ok_json(run(*args, *(["--cursor", cursor] if cursor else [])))
        pages.append(page)
        if (cursor := page["next_cursor"]) is None:
            break
    assert [len(q["proposed"]["added_cases"]) for q in pages] == [3, 1]
    assert [c["id"] for q in pages for c in q["proposed"]["added_cases"]] == added
    assert pages[0]["proposed"]["added_cases"] == p["proposed"]["added_cases"][:3]
    assert all(q["proposed"]["added_count"] == 4 and q["confirm_token"] == token for q in pages)
    assert files(tmp_path) == before  # reads only
    r = run("preview", "evals", "--confirm-token", token, "--limit", "3")
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout.splitlines()[-1] == f"# more: --cursor {added[2]}"
    assert sum(line.startswith("+ ") for line in r.stdout.splitlines()) == 3
    r = run("preview", "evals", "--confirm-token", token, "--after", added[2])
    assert [line for line in r.stdout.splitlines() if line.startswith("+ ")] == [
        line for line in r.stdout.splitlines() if added[3] in line]
    assert "# more" not in r.stdout
    bad = run("--json", "preview", "evals", "--confirm-token", token, "--limit", "0")
    assert bad.exit_code == 2 and json.loads(bad.stdout or bad.stderr)["error"]["reason"] == \
        "BAD_LIMIT"

def test_promotion_refusals(run, reviewed, tmp_path):
    anns = reviewed
    cases = [
        ([subject("r-0")], 5, "FAILED_PRECONDITION", "REVIEW_REQUIRED",
         "subject 0 ('r-0'): a promotion needs a saved review: give its review_annotation_id "
         "(see `cas review add`)", {}),
        ([subject("r-0", anns["r-0"]), subject("r-1", anns["r-0"])], 5, "FAILED_PRECONDITION",
         "REVIEW_RUN_MISMATCH",
         f"subject 1 ('r-1'): review {anns['r-0']} is a review of run 'r-0', not of this run",
         {}),
        ([subject("r-404", anns["r-0"])], 3, "NOT_FOUND", "RUN_NOT_FOUND",
         "no recorded run 'r-404' (import it with `cas runs import`)", {"run_id": "r-404"}),
        ([subject("r-0", "ann-" + "1" * 32)], 3, "NOT_FOUND", "REVIEW_NOT_FOUND",
         f"subject 0 ('r-0'): no review 'ann-{'1' * 32}'", {}),
        ([subject("r-0", anns["r-0"], subject_kind="SUBJECT_KIND_DATASET_ITEM")], 2,
         "INVALID_ARGUMENT", "SUBJECT_KIND_INVALID",
         "subject 0 ('r-0'): subject_kind 'SUBJECT_KIND_DATASET_ITEM' is not a run; accepted: "
         "agent_run, SUBJECT_KIND_AGENT_RUN", {}),
        ([subject("r-0", anns["r-0"], run_id="r-1")], 2, "INVALID_ARGUMENT", "RUN_MISMATCH",
         "subject 0 ('r-0'): run_id 'r-1' and subject_ref 'r-0' name different runs", {}),
    ]
    for subjects, exit_code, code, reason, message, fields in cases:
        path = subjects_file(tmp_path, *subjects)
        refused(run, tmp_path, ("promote", "evals", "--file", path, "--idempotency-key", "k"),
                exit_code, code, reason, message, **fields)
    path = tmp_path / "s.json"
    for text, message in [
            ("not json", f"{path}: JSON is malformed: invalid character (byte 4)"),
            ("[]", f"{path}: expected a non-empty JSON array of subjects "
                   '(or {"subjects": [...]})'),
            ('{"subject_ref": "r-0"}', f"{path}: expected a non-empty JSON array of subjects "
                                       '(or {"subjects": [...]})'),
            (json.dumps([subject("r-0", anns["r-0"], note="x")]),
             f"{path}: subject 0: Object contains unknown field `note` (fields: subject_kind, "
             "subject_ref, review_annotation_id, run_id)"),
            (json.dumps([{"subject_ref": "r-0"}]),
             f"{path}: subject 0: Object missing required field `subject_kind` (fields: "
             "subject_kind, subject_ref, review_annotation_id, run_id)")]:
        path.write_text(text)
        refused(run, tmp_path, ("promote", "evals", "--file", str(path), "--idempotency-key",
                                "k"), 2, "INVALID_ARGUMENT", None, message)
    good = subjects_file(tmp_path, subject("r-0", anns["r-0"]), name="good.json")
    refused(run, tmp_path, ("promote", "nope", "--file", good, "--idempotency-key", "k"), 3,
            "NOT_FOUND", None, "no dataset named 'nope'", dataset="nope")
    refused(run, tmp_path, ("promote", "evals", "--file", good, "--idempotency-key", ""), 2,
            "INVALID_ARGUMENT", None,
            "an idempotency key is required: 1-256 printable characters")
    r = run("promote", "evals", "--file", good)
    assert r.exit_code == 2 and "Missing option '--idempotency-key'" in r.stderr
    # {"subjects": [...]} is accepted too, and no refusal above used up the key
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"subjects": [subject("r-0", anns["r-0"])]}))
    p = ok_json(run("--json", "promote", "evals", "--file", str(wrapped),
                    "--idempotency-key", "k"))
    assert ok_json(run("--json", "promote", "evals", "--file", good,
                       "--idempotency-key", "k")) == p


def test_idempotency_key_reuse_is_refused(run, reviewed, tmp_path):
    p = promote(run, tmp_path, reviewed, ["r-0"], "key-1")
    other = subjects_file(tmp_path, subject("r-1", reviewed["r-1"]), name="other.json")
    message = "idempotency key 'key-1' was already used for a different request; use a new key"
    refused(run, tmp_path, ("promote", "evals", "--file", other, "--idempotency-key", "key-1"),
            5, "FAILED_PRECONDITION", "IDEMPOTENCY_KEY_REUSED", message)
    refused(run, tmp_path, ("remove", "evals", p["proposed"]["added"][0], "--idempotency-key",
                            "key-1"), 5, "FAILED_PRECONDITION", "IDEMPOTENCY_KEY_REUSED", message)
    # the same request again: the same proposal
    assert promote(run, tmp_path, reviewed, ["r-0"], "key-1") == p


def test_remove_shapes_and_refusals(run, reviewed, tmp_path):
    refused(run, tmp_path, ("remove", "evals", "--idempotency-key", "r"), 5,
            "FAILED_PRECONDITION", "EMPTY_REMOVAL", "a removal needs at least one case id; an "
            "empty removal is accepted only when the current version is retired")
    p = promote(run, tmp_path, reviewed, ["r-0", "r-1", "r-2"], "k1")
    seal(run, p["confirm_token"])
    ids = p["proposed"]["added"]
    stranger = "b3:" + "0" * 64
    refused(run, tmp_path, ("remove", "evals", ids[0], stranger, "--idempotency-key", "r"), 3,
            "NOT_FOUND", "ITEM_NOT_IN_VERSION", f"evals@1 does not hold {stranger}",
            case_id=stranger)
    refused(run, tmp_path, ("remove", "evals", "--idempotency-key", "r"), 5,
            "FAILED_PRECONDITION", "EMPTY_REMOVAL", "a removal needs at least one case id; an "
            "empty removal is accepted only when the current version is retired")
    refused(run, tmp_path, ("remove", "evals", "r-0", "--idempotency-key", "r"), 2,
            "INVALID_ARGUMENT", None,
            "case id 'r-0' is not a digest; expected 'b3:' followed by 64 hex digits",
            value="r-0")
    rm = ok_json(run("--json", "remove", "evals", ids[1], "--idempotency-key", "r"))
    assert rm == {"confirm_token": rm["confirm_token"], "dataset": "evals",
                  "operation": "remove",
                  "base_version": {"number": 1, "item_count": 3,
                                   "content_digest": p["proposed"]["content_digest"]},
                  "proposed": {"item_count": 2, "content_digest": rm["proposed"]["content_digest"],
                               "added": [], "removed": [ids[1]], "carried": [ids[0], ids[2]],
                               "carried_count": 2, "carried_complete": True, "added_cases": [],
                               "added_count": 0, "removed_count": 1,
                               "removed_cases": rm["proposed"]["removed_cases"]},
                  "withheld": {}, "changes": True, "stale": False, "restage": None,
                  "page": {"after": None, "limit": 100}, "next_cursor": None}
    [gone] = rm["proposed"]["removed_cases"]
    assert (gone["id"], gone["tenant"]) == (ids[1], "acme") and gone["run_id"] is not None
    r = run("remove", "evals", ids[1], "--idempotency-key", "r")
    assert r.stdout == (
        f"remove into evals: base evals@1 (3 cases, {p['proposed']['content_digest']})\n"
        f"  {'CASE':67}  RUN  TENANT  OUTCOME\n"
        f"- {ids[1]}  {gone['run_id']}  acme    success\n"
        f"proposed: 2 cases (0 new, 2 carried) {rm['proposed']['content_digest']}\n"
        f"nothing is sealed yet; to seal: cas seal evals --confirm-token {rm['confirm_token']}\n")
    v = seal(run, rm["confirm_token"])["version"]
    assert (v["number"], v["item_count"], v["added"], v["removed"], v["operation"]) == (
        2, 2, 0, 1, "remove")


def test_seal_refusals(run, reviewed, tmp_path):
    seal(run, promote(run, tmp_path, reviewed, ["r-0"], "k0")["confirm_token"])
    a = promote(run, tmp_path, reviewed, ["r-1"], "ka")
    b = promote(run, tmp_path, reviewed, ["r-2"], "kb")
    assert seal(run, a["confirm_token"])["version"]["number"] == 2
    refused(run, tmp_path, ("seal", "evals", "--confirm-token", b["confirm_token"]), 5,
            "FAILED_PRECONDITION", "PROPOSAL_STALE", "this proposal was made on evals@1, but "
            "the head is now evals@2; stage it again on the head with a new idempotency key "
            "(key 'kb' names this proposal for ever): cas promote evals --reviewed (or --file "
            "SUBJECTS.json) --idempotency-key NEW-KEY", base=1, head=2, idempotency_key="kb")
    unknown = "ct-" + "e" * 32
    why = (" (gc deletes a proposal left unsealed for longer than its grace period, and an "
           "erasure one that holds an erased case; preview again)")
    refused(run, tmp_path, ("seal", "evals", "--confirm-token", unknown), 3, "NOT_FOUND",
            "PROPOSAL_NOT_FOUND",
            f"dataset 'evals' has no proposal with confirm token {unknown}{why}")
    refused(run, tmp_path, ("seal", "evals", "--confirm-token", "ct-../x"), 2,
            "INVALID_ARGUMENT", None, "'ct-../x' is not a confirm token (ct- and 32 hex digits)")
    assert run("dataset", "create", "other").exit_code == 0
    refused(run, tmp_path, ("seal", "other", "--confirm-token", a["confirm_token"]), 3,
            "NOT_FOUND", "PROPOSAL_NOT_FOUND",
            f"dataset 'other' has no proposal with confirm token {a['confirm_token']}{why}")
    r = run("seal", "evals")
    assert r.exit_code == 2 and "Missing option '--confirm-token'" in r.stderr


def test_a_proposal_that_changes_nothing_seals_no_version(run, reviewed, tmp_path):
    p = promote(run, tmp_path, reviewed, ["r-0", "r-1"], "k1")
    seal(run, p["confirm_token"])
    again = promote(run, tmp_path, reviewed, ["r-1"], "k2")
    assert again["changes"] is False and again["proposed"]["added"] == []
    r = run("promote", "evals", "--file", str(tmp_path / "k2.json"), "--idempotency-key", "k2")
    assert r.stdout.splitlines()[-2:] == [
        "this changes nothing: sealing it seals no version",
        f"nothing is sealed yet; to seal: cas seal evals --confirm-token "
        f"{again['confirm_token']}"]
    before = files(tmp_path)
    assert seal(run, again["confirm_token"]) == {"version": None, "sealed": False,
                                                 "reason": "NO_CHANGES"}
    r = run("seal", "evals", "--confirm-token", again["confirm_token"])
    assert (r.exit_code, r.stdout) == (0, "the proposal changes nothing: no version sealed\n")
    assert files(tmp_path) == before
    assert ok_json(run("--json", "dataset", "show", "evals"))["versions"][0]["number"] == 1


def test_same_run_twice_is_one_case(run, reviewed, tmp_path):
    second = add_review(run, "r-0", label="accepted")
    path = subjects_file(tmp_path, subject("r-0", reviewed["r-0"]), subject("r-0", second))
    p = ok_json(run("--json", "promote", "evals", "--file", path, "--idempotency-key", "k"))
    assert p["proposed"]["item_count"] == 1
    seal(run, p["confirm_token"])
    assert run("dataset", "create", "other").exit_code == 0
    q = promote(run, tmp_path, reviewed, ["r-0"], "k", name="other")
    assert q["proposed"]["added"] == p["proposed"]["added"]


def test_cli_verify_proof_says_what_it_checked_against(run, evals, tmp_path):
    ids = evals.items("evals", 2).items
    proof = run("prove", "evals@2", ids[0]).stdout
    (tmp_path / "p.json").write_text(proof)
    root = json.loads(proof)["root"]
    r = run("verify-proof", "p.json")
    assert (r.exit_code, r.stdout) == (0, (
        f"valid: {ids[0]} is in {root}\nchecked against the proof's own root only: this "
        "proves only that the case is in the tree whose root the proof names; give --root or "
        "--pin to check it against a version\n"))
    data = json.loads(run("--json", "verify-proof", "p.json").stdout)
    assert data == {"valid": True, "root": root, "case_id": ids[0], "checked_against": "proof"}
    r = run("verify-proof", "p.json", "--root", root)
    assert r.stdout == f"valid: {ids[0]} is in {root}\n"
    assert json.loads(run("--json", "verify-proof", "p.json", "--root", root).stdout)[
        "checked_against"] == "root"
    pin = str(evals.pin("evals", 2))
    r = run("verify-proof", "p.json", "--pin", pin)
    assert (r.exit_code, r.stdout) == (0, f"valid: {ids[0]} is in evals@2 ({root}, checked "
                                          "against the pin)\n")
    data = json.loads(run("--json", "verify-proof", "p.json", "--pin", pin).stdout)
    assert data["checked_against"] == "pin" and data["pin"] == pin
    assert data["version"]["number"] == 2
    r = run("--json", "verify-proof", "p.json", "--pin", str(evals.pin("evals", 1)))
    assert r.exit_code == 5 and json.loads(r.stderr)["error"]["reason"] == "PROOF_INVALID"
    r = run("--json", "verify-proof", "p.json", "--pin", pin, "--root", root)
    assert r.exit_code == 2 and json.loads(r.stderr)["error"]["reason"] == "USAGE"


def test_the_cli_prints_the_log_and_the_status(run, tmp_path):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"input": "q"}\n')
    assert run("commit", "evals", "--add", str(cases), "-m", "first").exit_code == 0
    r = run("log")
    assert r.exit_code == 0
    (line,) = r.stdout.splitlines()
    assert line.endswith("  sealed evals@1 (commit: 1 cases, +1 -0) first  by Ada "
                         "<ada@example.com>")
    data = json.loads(run("--json", "log", "evals").stdout)
    assert data["next_cursor"] is None and data["entries"][0]["kind"] == "seal"
    assert run("status").stdout == ("staged proposals not sealed: 0\n"
                                    "runs awaiting review (dataset_eligibility): 0\n"
                                    "erasures not finished: 0\n")


def test_cli_promote_reviewed(run, tmp_path):
    assert run("init").exit_code == 0
    runs = tmp_path / "runs.jsonl"
    runs.write_bytes(jsonl(run_obj("r-1", 1), run_obj("r-2", 2, tenant="beta")))
    assert run("runs", "import", str(runs)).exit_code == 0
    for r in ("r-1", "r-2"):
        preview = json.loads(run("--json", "review", "add", r, "--metric", "dataset_eligibility",
                                 "--label", "reviewed").stdout)
        assert run("review", "add", r, "--metric", "dataset_eligibility", "--label", "reviewed",
                   "--confirm-token", preview["confirm_token"]).exit_code == 0
    assert run("dataset", "create", "evals").exit_code == 0
    r = run("promote", "evals", "--reviewed", "--tenant", "acme", "--idempotency-key", "k1")
    assert r.exit_code == 0, r.stderr
    data = json.loads(run("--json", "promote", "evals", "--reviewed", "--tenant", "acme",
                          "--idempotency-key", "k1").stdout)
    [case] = data["proposed"]["added_cases"]
    lines = r.stdout.splitlines()
    assert lines[1].split() == ["CASE", "RUN", "TENANT", "OUTCOME"]
    assert lines[2].split() == ["+", case["id"], "r-1", "acme", "success"]
    assert "judged: r-1: reviewed (dataset_eligibility) by Ada <ada@example.com>" in lines
    r = run("--json", "promote", "evals", "--idempotency-key", "k2")
    assert r.exit_code == 2 and json.loads(r.stderr)["error"]["message"] == (
        "give one of --reviewed (the runs whose newest judgment accepts them) and --file "
        "SUBJECTS.json")
    (tmp_path / "s.json").write_text("[]")
    r = run("--json", "promote", "evals", "--file", "s.json", "--tenant", "acme",
            "--idempotency-key", "k2")
    assert r.exit_code == 2 and "select runs for --reviewed" in r.stderr


@pytest.fixture
def pending(as_reviewer, monkeypatch):
    """A repository whose erasure of user-42 crashed right after storing its plan: (backend,
    the erased run's case id)."""
    return pending_erasure(monkeypatch)


def test_the_cli_reports_a_pending_erasure(pending, tmp_path, run):
    backend, case_id = pending
    location = tmp_path / "copy"
    local = cas.init(str(location))
    for key, data in snapshot(backend).items():  # the same repository in a local directory
        if key != "config":
            local.backend.put_if_absent(key, data)
    local.backend.replace("config", backend.get("config"))
    r = run("--repo", str(location), "--json", "case", "evals", "1", case_id)
    assert r.exit_code == 5, r.output
    assert '"ERASURE_PENDING"' in r.stderr


def test_cli_items_and_diff_show_run_tenant_outcome(promoted, run):
    ids = promoted.items("evals", 2).items
    runs = {i: promoted.case("evals", 2, i).run_id for i in ids}
    tenant = {"r-1": "acme     ", "r-2": "globex   ", "r-3": "initech  "}
    outcome = {"r-1": "success", "r-2": "failure", "r-3": "-"}
    r = run("items", "evals@2")
    assert r.exit_code == 0
    assert r.stdout == ("CASE" + " " * 63 + "  RUN  TENANT   OUTCOME\n" + "".join(
        f"{i}  {runs[i]}  {tenant[runs[i]]}{outcome[runs[i]]}\n" for i in ids))
    data = json.loads(run("--json", "items", "evals", "2").stdout)
    assert [(e["id"], e["run_id"]) for e in data["items"]] == [(i, runs[i]) for i in ids]
    assert data["items"][0].keys() == {"id", "run_id", "tenant", "outcome"}
    (r3,) = [i for i in ids if runs[i] == "r-3"]
    r = run("diff", "evals", "1", "2")
    assert r.stdout == ("  CASE" + " " * 63 + "  RUN  TENANT   OUTCOME\n"
                        f"+ {r3}  r-3  initech  -\n")
    data = json.loads(run("--json", "diff", "evals", "1", "2").stdout)
    assert data["added"] == [r3] and data["changes"] == [
        {"change": "added", "id": r3, "run_id": "r-3", "tenant": "initech", "outcome": None}]


def test_cli_items_of_direct_commits_say_no_run(promoted, run):
    make_gold(promoted)
    data = json.loads(run("--json", "items", "gold@1").stdout)
    assert [e["run_id"] for e in data["items"]] == [None, None]


def test_cli_case_by_run_and_prefix(promoted, run):
    (r2,) = case_of(promoted, 2, "r-2")
    by_id = run("--json", "case", "evals@2", r2).stdout
    assert run("--json", "case", "evals@2", "--run", "r-2").stdout == by_id
    assert run("--json", "case", "evals", "2", r2[:11]).stdout == by_id
    assert run("case", "evals@2", r2[:12].upper()).stdout == run("case", "evals@2", r2).stdout
    before = keys(promoted)
    both = sorted(case_of(promoted, 3, "r-1"))
    message = (f"evals@3 holds 2 cases of run 'r-1' (frozen under different content "
               f"policies): {both[0]}, {both[1]}; name one by its id")
    r = run("case", "evals@3", "--run", "r-1")
    assert (r.exit_code, r.stdout, r.stderr) == (2, "", f"cas: error: {message}\n")
    err = json.loads(run("--json", "case", "evals@3", "--run", "r-1").stderr)["error"]
    assert err == {"code": "INVALID_ARGUMENT", "reason": "AMBIGUOUS_RUN", "message": message,
                   "run_id": "r-1", "case_ids": both, "dataset": "evals", "version": 3}
    r = run("--json", "case", "evals@2", "--run", "r-9")
    assert r.exit_code == 3
    assert json.loads(r.stderr)["error"]["reason"] == "RUN_NOT_IN_VERSION"
    r = run("--json", "case", "evals@2", r2[:10])
    assert r.exit_code == 2
    assert json.loads(r.stderr)["error"] == {
        "code": "INVALID_ARGUMENT", "reason": "PREFIX_TOO_SHORT", "value": r2[:10],
        "minimum": 8, "message": f"case id prefix {r2[:10]!r} is too short: give 'b3:' and "
                                 "at least 8 hex digits"}
    r = run("case", "evals@2", r2, "--run", "r-2")  # both: an extra argument
    assert r.exit_code == 2
    assert keys(promoted) == before


@pytest.fixture
def cli_repo(run):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    r = run("--json", "commit", "evals", "--add", str(EXAMPLE))
    assert r.exit_code == 0, r.output
    return cas.open("."), json.loads(r.stdout)


def test_cli_jsonl_to_stdout_in_every_spelling(run, cli_repo):
    repo, _ = cli_repo
    pin = repo.pin("evals", 1)
    out = io.BytesIO()
    exports.export_jsonl(repo, pin, out)
    for args in (("evals", "1"), ("evals@1",), (str(pin),)):
        r = run("export", *args, "--to", "jsonl")
        assert r.exit_code == 0 and r.stdout_bytes == out.getvalue() and r.stderr == ""


def test_cli_writes_a_file_and_reports_it(run, cli_repo, tmp_path):
    repo, _ = cli_repo
    pin = str(repo.pin("evals", 1))
    r = run("--json", "export", "evals@1", "--to", "parquet", "-o", "v.parquet")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"format": "parquet", "pin": pin, "cases": 5, "skipped": 0,
                                    "truncated": 0, "path": str(tmp_path / "v.parquet")}
    r = run("export", "evals", "1", "--to", "openai-chat", "-o", "chat.jsonl")
    assert r.stdout == (f"exported 4 cases of {pin} to {tmp_path / 'chat.jsonl'} "
                        "(1 skipped, 0 truncated)\n")


def test_cli_refusals_write_nothing(run, cli_repo, tmp_path):
    repo, _ = cli_repo
    before = sorted(os.listdir(tmp_path))
    r = run("--json", "export", "evals", "1", "--to", "csv", "-o", "x")
    assert r.exit_code == 2 and json.loads(r.stderr)["error"]["accepted"] == list(
        exports.FORMATS)
    r = run("export", "evals", "1", "--to", "parquet")
    assert r.exit_code == 2 and "-o PATH" in r.stderr
    r = run("--json", "export", "evals", "--to", "jsonl")  # a name alone: only through cas.lock
    assert r.exit_code == 2 and json.loads(r.stderr)["error"]["reason"] == "NOT_LOCKED"
    r = run("export", f"evals@1#b3:{'0' * 64}", "--to", "jsonl", "-o", "x")
    assert r.exit_code == 5 and "does not match" in r.stderr
    repo.retire("evals", 1, "contaminated", "leaked", author=AUTHOR)
    r = run("--json", "export", "evals@1", "--to", "hf", "-o", "x")
    assert r.exit_code == 5 and r.stdout == ""
    assert json.loads(r.stderr)["error"]["reason"] == "EVALUATION_DATASET_VERSION_RETIRED"
    r = run("export", "evals@1", "--to", "jsonl")
    assert r.exit_code == 5 and r.stdout == ""
    assert sorted(os.listdir(tmp_path)) == before


@pytest.fixture
def cli_run(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CAS_REPO", raising=False)
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(cli, list(args), catch_exceptions=False)
    return invoke


@pytest.fixture
def organised(location, as_reviewer):
    """A repository on each backend with one version holding both organiser runs: (location,
    repo, number, run id -> case id)."""
    return organised_version(location)


def test_cli_replay_json_is_exactly_the_documented_shape_on_both_backends(organised, cli_run,
                                                                          tmp_path):
    location, repo, number, ids = organised
    plan = write(tmp_path / "plan.json", PLAN)
    before = keys_and_bytes(repo)
    r = cli_run("--repo", location, "replay", "evals", str(number), ids["with"], "--plan", plan,
                "--json")
    assert (r.exit_code, r.stderr) == (0, "")
    out = json.loads(r.stdout)
    frozen = json.loads(cas.encode_case(repo.case("evals", number, ids["with"])).data)
    for i in (5, 6, 8, 10):
        step = frozen["steps"][i]
        step.pop("result", None)
        step.pop("error", None)
        step["cas_stub"] = {"effect": "external" if i == 10 else "internal"}
    assert frozen["run_id"] == "with"
    assert out == {"run": frozen, "record": {
        "plan_digest": "b3:" + blake3(b"cas:replay.plan\x00" + cas.format_plan(PLAN)).hexdigest(),
        "steps": 12, "tool_calls": 7, "replayed": 3, "stubbed": 4, "unrecorded": 0,
        "stubbed_tools": ["move_file", "send_email", "write_file"],
        "steps_detail": expected_detail([C, C, R, R, R, S, S, C, S, C, S, C])}}
    # DATASET@VERSION and the root --json are the same command; the output is the same bytes
    r2 = cli_run("--repo", location, "--json", "replay", f"evals@{number}", ids["with"],
                 "--plan", plan)
    assert r2.stdout == r.stdout
    assert keys_and_bytes(repo) == before


def test_cli_human_summary(organised, cli_run, tmp_path):
    location, repo, number, ids = organised
    r = cli_run("--repo", location, "replay", "evals", str(number), ids["without"])
    assert r.exit_code == 0
    digest = cas.plan_digest(None)
    assert r.stdout == (
        f"replayed evals@{number} {ids['without']}\n"
        "12 steps, 7 tool calls: 0 replayed, 7 stubbed, 0 unrecorded\n"
        f"plan: {digest}\n"
        "stubbed tools: list_dir, move_file, read_file, search, send_email, write_file\n"
        "   0  CARRIED     message    -\n"
        "   1  CARRIED     message    -\n"
        "   2  STUBBED     tool_call  list_dir\n"
        "   3  STUBBED     tool_call  read_file\n"
        "   4  STUBBED     tool_call  search\n"
        "   5  STUBBED     tool_call  move_file\n"
        "   6  STUBBED     tool_call  move_file\n"
        "   7  CARRIED     message    -\n"
        "   8  STUBBED     tool_call  write_file\n"
        "   9  CARRIED     message    -\n"
        "  10  STUBBED     tool_call  send_email\n"
        "  11  CARRIED     message    -\n")


def test_cli_diff_and_against(organised, cli_run, tmp_path):
    location, repo, number, ids = organised
    plan = write(tmp_path / "plan.json", PLAN)
    base = ("--repo", location, "replay", "evals", str(number), ids["with"])
    r = cli_run(*base, "--plan", plan, "--diff", "--json")
    assert r.exit_code == 0
    diff = json.loads(r.stdout)
    assert set(diff) == {"identical", "differences"} and diff["identical"] is False
    assert diff["differences"][:2] == [
        {"path": "/steps/5/cas_stub", "replayed": {"effect": "internal"}},
        {"path": "/steps/5/result", "frozen": {"ok": True}}]
    r = cli_run(*base, "--plan", plan, "--diff")
    assert r.stdout.splitlines()[:3] == [
        "8 differences (frozen -> replayed):",
        '/steps/5/cas_stub: (absent) -> {"effect": "internal"}',
        '/steps/5/result: {"ok": true} -> (absent)']
    # a plan that stubs nothing replays the frozen bytes exactly
    reads = write(tmp_path / "reads.json", {"default_effect": "none"})
    assert json.loads(cli_run(*base, "--plan", reads, "--diff", "--json").stdout) == {
        "identical": True, "differences": []}
    assert cli_run(*base, "--plan", reads, "--diff").stdout == \
        "identical: the run has the frozen case's bytes\n"
    # --against: the saved replay reply, and `cas case --json`, diffed against the frozen case
    saved = tmp_path / "replayed.json"
    saved.write_text(cli_run(*base, "--plan", plan, "--json").stdout)
    assert json.loads(cli_run(*base, "--against", str(saved), "--json").stdout) == diff
    case_reply = tmp_path / "case.json"
    case_reply.write_text(cli_run("--repo", location, "case", "evals", str(number),
                                  ids["with"], "--json").stdout)
    assert json.loads(cli_run(*base, "--against", str(case_reply), "--json").stdout) == {
        "identical": True, "differences": []}


def refusal(cli_run, args, exit_code, code, reason, message):
    """`cas replay` refused, in one line and as a JSON error (code, reason, message): the
    error."""
    r = cli_run(*args)
    assert (r.exit_code, r.stdout) == (exit_code, ""), (r.stdout, r.stderr)
    assert r.stderr == f"cas: error: {message}\n"
    r = cli_run("--json", *args)
    assert (r.exit_code, r.stdout) == (exit_code, "")
    error = json.loads(r.stderr)["error"]
    assert (error["code"], error["reason"], error["message"]) == (code, reason, message)
    return error


@pytest.fixture
def cli_case(cli_run, tmp_path) -> str:
    """A local repository in the current directory whose raw@1 holds one case; its id."""
    assert cli_run("init").exit_code == 0
    assert cli_run("dataset", "create", "raw", "--admission", "direct").exit_code == 0
    cases = write(tmp_path / "cases.jsonl",
                  json.dumps(recordings.case_of(call("ls", result=1))) + "\n")
    assert cli_run("commit", "raw", "--add", cases).exit_code == 0
    return json.loads(cli_run("--json", "items", "raw", "1").stdout)["items"][0]["id"]


def test_cli_refusals(cli_run, cli_case, tmp_path):
    case_id = cli_case
    before = sorted((p, p.stat().st_size) for p in (tmp_path / ".cas").rglob("*"))

    bad = write(tmp_path / "bad.json", {"tools": [{"tool_name": "mv", "effect": "Internal"}]})
    error = refusal(cli_run, ("replay", "raw", "1", case_id, "--plan", bad), 2,
                    "INVALID_ARGUMENT", "UNKNOWN_EFFECT",
                    f'{bad}: $.tools[0].effect: "Internal" is not an effect; accepted values: '
                    "none, internal, external")
    assert error["accepted"] == ["none", "internal", "external"]
    dup = write(tmp_path / "dup.json", {"tools": [{"tool_name": "mv", "effect": "none"},
                                                  {"tool_name": "mv", "effect": "none"}]})
    refusal(cli_run, ("replay", "raw", "1", case_id, "--plan", dup), 2, "INVALID_ARGUMENT",
            "DUPLICATE_TOOL", f"{dup}: $.tools[1].tool_name: tool 'mv' is declared twice")
    garbage = write(tmp_path / "garbage.json", "{oops")
    not_json = "invalid JSON: JSON is malformed: object keys must be strings (byte 1)"
    refusal(cli_run, ("replay", "raw", "1", case_id, "--plan", garbage), 2, "INVALID_ARGUMENT",
            "INVALID_PLAN", f"{garbage}: {not_json}")
    array = write(tmp_path / "array.json", [])
    refusal(cli_run, ("replay", "raw", "1", case_id, "--plan", array), 2, "INVALID_ARGUMENT",
            "INVALID_PLAN", f"{array}: $: a plan must be a JSON object, not []")
    usage = "(use: cas replay DATASET VERSION ITEM_ID or cas replay DATASET@VERSION ITEM_ID)"
    refusal(cli_run, ("replay", "raw", case_id), 2, "INVALID_ARGUMENT", "VERSION_REQUIRED",
            f"{case_id!r} is not a version number; every read names an exact version, there "
            f'is no "latest" {usage}')
    refusal(cli_run, ("replay", "raw", "1"), 2, "INVALID_ARGUMENT", "USAGE",
            f"missing ITEM_ID {usage}")
    refusal(cli_run, ("replay", "raw", "1", case_id, "--against", array, "--plan", bad), 2,
            "INVALID_ARGUMENT", "USAGE",
            f"--plan does nothing with --against (the file is diffed as it is) {usage}")
    refusal(cli_run, ("replay", "raw", "1", case_id, "--against", garbage), 2,
            "INVALID_ARGUMENT", None,
            f"{garbage}: {not_json}")
    refusal(cli_run, ("replay", "raw", "2", case_id), 3, "NOT_FOUND", None,
            "dataset 'raw' has no version 2")
    other = "b3:" + "0" * 64
    refusal(cli_run, ("replay", "raw@1", other), 3, "NOT_FOUND", None,
            f"case {other} is not in raw@1")
    # the plan is refused before the repository is read
    refusal(cli_run, ("replay", "nope", "1", case_id, "--plan", bad), 2, "INVALID_ARGUMENT",
            "UNKNOWN_EFFECT", f'{bad}: $.tools[0].effect: "Internal" is not an effect; '
                              "accepted values: none, internal, external")
    assert sorted((p, p.stat().st_size) for p in (tmp_path / ".cas").rglob("*")) == before


def test_cli_plan_from_stdin(cli_case):
    r = CliRunner().invoke(cli, ["--json", "replay", "raw", "1", cli_case, "--plan", "-"],
                           input='{"default_effect": "none"}')
    assert json.loads(r.stdout)["record"]["replayed"] == 1


# -- issue 36: --yes, --list, K reviewers on the command line --------------------------------------
def test_promote_and_remove_yes_preview_and_seal_in_one_call(run, reviewed, tmp_path):
    r = run("promote", "evals", "--reviewed", "--idempotency-key", "k-1", "--yes", "-m", "first")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "promote into evals: base none (first version)"
    assert not any(line.startswith("nothing is sealed yet") for line in lines)
    assert lines[-1].startswith("sealed evals@1: 4 cases (+4 -0) b3:")
    assert "first" in run("log", "evals").stdout  # the message of the version --yes sealed
    case = ok_json(run("--json", "items", "evals", "1"))["items"][0]["id"]
    out = ok_json(run("--json", "remove", "evals", case, "--idempotency-key", "k-2", "--yes"))
    assert out["sealed"] is True and out["version"]["number"] == 2
    assert out["preview"]["operation"] == "remove"
    again = ok_json(run("--json", "remove", "evals", case, "--idempotency-key", "k-2", "--yes"))
    assert again["already_sealed"] is True  # a retried command seals nothing new


def test_a_promotion_preview_of_more_than_50_runs_is_summarised(run, tmp_path):
    assert run("init").exit_code == 0
    many = [run_obj(f"r-{i:03d}", i) for i in range(60)]
    assert run("runs", "import", write_jsonl(tmp_path / "m.jsonl", *many)).exit_code == 0
    assert run("dataset", "create", "evals").exit_code == 0
    batch = write_jsonl(tmp_path / "b.jsonl", *({"run_id": f"r-{i:03d}",
                                                 "metric": "dataset_eligibility",
                                                 "label": "reviewed"} for i in range(60)))
    assert run("review", "add", "--file", batch, "--yes").exit_code == 0
    args = ("promote", "evals", "--reviewed", "--idempotency-key", "k-1")
    lines = run(*args).stdout.splitlines()
    assert lines[1] == "60 cases added, 0 removed; 60 runs judged"
    assert lines[2].split() == ["CASE", "RUN", "TENANT", "OUTCOME"]
    assert lines[13] == "... and 110 more: add --list to promote to see all"  # (JSON pages)
    assert lines[-1].startswith("nothing is sealed yet") and len(lines) == 16
    assert len(run(*args, "--list").stdout.splitlines()) == 2 + 120 + 2


def test_a_subjects_file_naming_one_judgment_under_two_reviewers_is_refused(
        run, reviewed, tmp_path):
    assert run("settings", "eligibility", "--reviewers", "2").exit_code == 0
    path = subjects_file(tmp_path, subject("r-0", reviewed["r-0"]))
    r = run("promote", "evals", "--file", path, "--idempotency-key", "k-1")
    assert r.exit_code == 5
    assert "names judgments of 1 reviewer(s) (Ada <ada@example.com>); 2 different reviewers' " \
           "newest judgments on 'dataset_eligibility' must accept the run" in r.stderr
    assert "(rule unanimous, `cas settings eligibility --reviewers`)" in r.stderr


def test_a_preview_of_one_page_of_many_changes_says_how_to_read_the_next():
    from cas_cli.datasets_and_versions import _preview_text
    case = {"id": "b3:" + "1" * 64, "run_id": "r-1", "tenant": "acme", "outcome": None}
    preview = {"operation": "promote", "dataset": "evals", "base_version": None,
               "confirm_token": "ct-" + "a" * 32, "changes": True, "stale": False,
               "withheld": {}, "subjects": [], "subjects_count": 250, "next_cursor": case["id"],
               "proposed": {"added_cases": [case], "removed_cases": [], "added_count": 250,
                            "removed_count": 0, "item_count": 250, "added": [case["id"]] * 250,
                            "carried_count": 0, "content_digest": "b3:" + "2" * 64}}
    text = _preview_text(preview)
    assert ("this preview shows the first 1 of 250 changes; the next page: cas preview evals "
            f"--confirm-token ct-{'a' * 32} --cursor b3:{'1' * 64}") in text
