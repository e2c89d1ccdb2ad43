"""CLI behaviour: exit codes, exact output, --json shapes, errors as one line or a JSON object."""

import json
import subprocess
import sys

import pytest

from support import ROOT
from cas_cli.main import EXIT_CODES

EXAMPLE = ROOT / "examples" / "cases.jsonl"


@pytest.fixture
def repo(run, tmp_path):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
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


def ids(run, *ref):
    """Every case id of a version, in order (one page: the example is small)."""
    r = run("--json", "items", *ref, "--limit", "500")
    assert r.exit_code == 0, r.output
    return [i["id"] for i in json.loads(r.stdout)["items"]]


def summary(repo_json, state="ACTIVE"):
    return {key: repo_json[key] for key in ("dataset", "number", "item_count", "content_digest")} \
        | {"state": state}


def error_line(message):
    return f"cas: error: {message}\n"


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


def no_latest(problem, *forms):
    usage = " or ".join(f"cas {f}" for f in forms)
    return (f'{problem}; every read names an exact version, there is no "latest" '
            f"(use: {usage})")


ITEMS_FORMS = ("items DATASET VERSION", "items DATASET@VERSION")
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


def test_dataset_commands(run, repo):
    r = run("dataset", "create", "Bad Name", "--admission", "direct")
    assert r.exit_code == 2 and "a-z, 0-9" in r.stderr
    r = run("dataset", "create", "evals", "--admission", "direct")
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
            "print('LOADED', 'cas.repo.repository' in sys.modules, 'msgspec' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Usage: cas" in out.stdout
    assert out.stdout.strip().endswith("LOADED False False")


# -- --json covers the command line's own errors (docs/cli.md) --------------------------
USAGE_ERRORS = [
    (("bogus",), "No such command 'bogus'."),
    (("items", "evals", "1", "--limit", "x"),
     "Invalid value for '--limit': 'x' is not an integer (ASCII digits, e.g. 100)"),
    (("items", "evals", "1", "--limit", "\uff11"),
     "Invalid value for '--limit': '\uff11' is not an integer (ASCII digits, e.g. 100)"),
    (("items", "evals", "1", "--bogus"), "No such option '--bogus'."),
    (("items", "evals", "1", "--limt", "3"), "No such option '--limt'. Did you mean '--limit'?"),
    (("runs", "import"), "give FILE or --from-captures DIR (one of them)"),
    (("runs", "import", "no-such-file"),
     "Invalid value for 'FILE': 'no-such-file': No such file or directory"),
    (("runs",), "missing command (see: cli runs --help)"),
    (("--bogus",), "No such option '--bogus'."),
]


@pytest.mark.parametrize("args,message", USAGE_ERRORS)
def test_usage_errors_are_json_errors_under_json(run, repo, args, message):
    for words in (("--json",) + args, args + ("--json",)):  # the root or the command's --json
        r = run(*words)
        assert (r.exit_code, r.stdout) == (2, ""), r.stderr
        assert json.loads(r.stderr) == {"error": {
            "code": "INVALID_ARGUMENT", "reason": "USAGE", "message": message}}
    r = run(*args)  # without --json: click's usage text (or a group's help), as before
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("Usage: ") and ("Error: " in r.stderr or args == ("runs",))


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
