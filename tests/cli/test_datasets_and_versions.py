"""`cas promote`, `remove`, `seal`, `commit` and the exact reads (`show`, `items`, `case`,
`diff`, `prove`, `verify-proof`): exit codes, exact output, --json shapes."""

import json

import pytest
from support.cli import (ADA, EXAMPLE, ITEMS_FORMS, add_review, commit_example, error_line,
                         files, ids, no_latest, ok_json, promote, refused, seal, subject,
                         subjects_file)

from cas_cli.main import EXIT_CODES


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
                    "pagination": {"next_cursor": None, "has_more": False}}
    assert len(all_ids) == 5 and all_ids == sorted(all_ids)
    # DATASET@VERSION is the same read
    assert json.loads(run("--json", "items", "evals@1").stdout) == full
    first = json.loads(run("items", "evals", "1", "--limit", "2", "--json").stdout)
    assert first == {"version": summary(repo), "items": [item(run, i) for i in all_ids[:2]],
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


@pytest.mark.parametrize("args,message", [
    (("items", "evals"), no_latest("no version given for dataset 'evals'", *ITEMS_FORMS)),
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
    (("diff", "evals", "1"), no_latest("missing B", *DIFF_FORMS)),
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
    assert err["code"] == "INVALID_ARGUMENT" and err["reason"] == "VERSION_REQUIRED"
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
        "changes": [{"change": "added", **item(run, items[0])}],
        "pagination": {"next_cursor": None, "has_more": False}}
    assert json.loads(run("--json", "diff", "evals", "1", "1").stdout) == {
        "from": summary(repo), "to": summary(repo), "added": [], "removed": [],
        "changes": [], "pagination": {"next_cursor": None, "has_more": False}}
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
        "pagination": {"next_cursor": None, "has_more": False}}
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
                              "carried_complete": True,
                              "added_cases": p["proposed"]["added_cases"], "removed_cases": []},
                 "withheld": {a: [] for a in added}, "changes": True, "stale": False,
                 "restage": None,
                 "subjects": [{"run_id": r, "annotation_id": reviewed[r],
                               "metric": "dataset_eligibility", "label": "reviewed",
                               "reviewer": ADA} for r in ("r-0", "r-1")]}
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
                               "removed_cases": rm["proposed"]["removed_cases"]},
                  "withheld": {}, "changes": True, "stale": False, "restage": None}
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
