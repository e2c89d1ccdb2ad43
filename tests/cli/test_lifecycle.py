"""CLI of the lifecycle: runs, review, config, settings, promote, remove, seal.

Each refusal is checked for its exit code, its exact one-line message on stderr, its JSON error
object (code and reason) with --json, an empty stdout, and an unchanged repository.
"""

import json

import pytest
from click.testing import CliRunner

from cas_cli.main import cli

ADA = "Ada <ada@example.com>"


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAS_USER", ADA)
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "config" / "cas.json"))
    monkeypatch.delenv("CAS_REPO", raising=False)
    runner = CliRunner()

    def invoke(*args, input=None):
        return runner.invoke(cli, list(args), input=input, catch_exceptions=False)
    return invoke


def files(tmp_path):
    """Every file of the repository, with its size: what a refusal must leave alone."""
    return sorted((str(p.relative_to(tmp_path)), p.stat().st_size)
                  for p in (tmp_path / ".cas").rglob("*") if p.is_file())


def run_obj(run_id, n=0, **over):
    obj = {"run_id": run_id, "tenant": "acme", "person": "user-42",
           "started_at": "2026-05-01T10:00:00Z", "input": {"task": f"task {n}"},
           "output": f"done {n}",
           "steps": [{"type": "message", "role": "user", "content": f"task {n}"},
                     {"type": "tool_call", "tool_name": "ls", "arguments": {"path": "."},
                      "result": ["a"]},
                     {"type": "tool_call", "tool_name": "rm", "arguments": {"path": "a"}}],
           "outcome": {"status": "success"}, "metadata": {"model": "m-1"}}
    obj.update(over)
    return obj


def write_jsonl(path, *objs):
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return str(path)


def ok_json(r):
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert r.stderr == ""
    return json.loads(r.stdout)


def refused(run, tmp_path, args, exit_code, code, reason, message, **fields):
    """The refusal as one line and as a JSON error, with nothing stored by either."""
    before = files(tmp_path)
    r = run(*args)
    assert (r.exit_code, r.stdout) == (exit_code, ""), (r.stdout, r.stderr)
    assert r.stderr == f"cas: error: {message}\n"
    r = run("--json", *args)
    assert (r.exit_code, r.stdout) == (exit_code, "")
    assert json.loads(r.stderr) == {"error": {"code": code, "reason": reason,
                                              "message": message, **fields}}
    assert files(tmp_path) == before


@pytest.fixture
def runs_file(run, tmp_path):
    assert run("init").exit_code == 0
    return write_jsonl(tmp_path / "runs.jsonl", *(run_obj(f"r-{i}", i) for i in range(4)))


def add_review(run, run_id, label="reviewed"):
    args = ("review", "add", run_id, "--metric", "dataset_eligibility", "--label", label)
    token = ok_json(run("--json", *args))["confirm_token"]
    return ok_json(run("--json", *args, "--confirm-token", token))["annotation_id"]


@pytest.fixture
def reviewed(run, runs_file, tmp_path):
    """r-0..r-3 imported and reviewed; an empty dataset `evals`. Returns run id -> annotation."""
    assert run("runs", "import", runs_file).exit_code == 0
    assert run("dataset", "create", "evals").exit_code == 0
    return {f"r-{i}": add_review(run, f"r-{i}") for i in range(4)}


def subjects_file(tmp_path, *subjects, name="subjects.json"):
    path = tmp_path / name
    path.write_text(json.dumps(list(subjects)))
    return str(path)


def subject(ref, annotation_id=None, **over):
    s = {"subject_kind": "agent_run", "subject_ref": ref}
    if annotation_id is not None:
        s["review_annotation_id"] = annotation_id
    return s | over


def promote(run, tmp_path, anns, run_ids, key, name="evals"):
    path = subjects_file(tmp_path, *(subject(r, anns[r]) for r in run_ids), name=f"{key}.json")
    return ok_json(run("--json", "promote", name, "--file", path, "--idempotency-key", key))


def seal(run, token, name="evals"):
    return ok_json(run("--json", "seal", name, "--confirm-token", token))


# -- runs -----------------------------------------------------------------------------------
def test_runs_import_list_show(run, runs_file, tmp_path):
    r = run("runs", "import", runs_file)
    assert (r.exit_code, r.stdout, r.stderr) == (
        0, "imported 4 runs (0 already present, unchanged)\n", "")
    assert ok_json(run("--json", "runs", "import", runs_file)) == {"imported": [],
                                                                   "unchanged": 4,
                                                                   "warnings": []}
    more = write_jsonl(tmp_path / "more.jsonl", run_obj("r-0", 0), run_obj("r-9", 9))
    assert ok_json(run("runs", "import", "--json", more)) == {"imported": ["r-9"],
                                                              "unchanged": 1, "warnings": []}
    # '-' reads stdin
    stdin = json.dumps(run_obj("r-a")) + "\n"
    assert ok_json(run("--json", "runs", "import", "-", input=stdin)) == {
        "imported": ["r-a"], "unchanged": 0, "warnings": []}
    ids = ["r-0", "r-1", "r-2", "r-3", "r-9", "r-a"]
    listed = ok_json(run("--json", "runs", "list"))
    assert (listed["runs"], listed["next_cursor"]) == (ids, None)
    assert [s["run_id"] for s in listed["summaries"]] == ids
    r = run("runs", "list")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["RUN", "TENANT", "STARTED", "STEPS", "TOOLS", "FIRST", "USER",
                                "MESSAGE"]
    assert [line.split()[0] for line in lines[1:]] == ids
    assert lines[1].split() == ["r-0", "acme", "2026-05-01T10:00:00Z", "3", "2", "task", "0"]
    page = ok_json(run("--json", "runs", "list", "--limit", "2", "--cursor", "r-1"))
    assert (page["runs"], page["next_cursor"]) == (["r-2", "r-3"], "r-3")
    assert ok_json(run("--json", "runs", "list", "--tenant", "other"))["runs"] == []
    shown = ok_json(run("--json", "runs", "show", "r-1"))
    assert shown == {"kind": "run", "format": 1, "extra": {}, **run_obj("r-1", 1)}
    r = run("runs", "show", "r-1")
    assert r.exit_code == 0
    assert r.stdout == json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_runs_show_unknown(run, runs_file, tmp_path):
    refused(run, tmp_path, ("runs", "show", "r-404"), 3, "NOT_FOUND", "RUN_NOT_FOUND",
            "no recorded run 'r-404' (import it with `cas runs import`)", run_id="r-404")


@pytest.mark.parametrize("bad,problem", [
    ({"run_id": "x", "steps": []}, "$.tenant: required field is missing"),
    ({"run_id": "x", "tenant": "a"}, "$.steps: required field is missing"),
    ({"tenant": "a", "steps": []}, "$.run_id: required field is missing"),
    ({"run_id": 7, "tenant": "a", "steps": []}, "$.run_id: must be a non-empty string"),
    ({"run_id": "x", "tenant": "a", "steps": [{"type": "tool_call"}]},
     "$.steps[0].tool_name: must be a non-empty string"),
    ({"run_id": "x", "tenant": "a", "steps": [{"type": "thought"}]},
     "$.steps[0].type: must be one of message, tool_call, not 'thought'"),
    ({"run_id": "x", "tenant": "a", "steps": [1]}, "$.steps[0]: a step must be a JSON object"),
    ({"run_id": "a\nb", "tenant": "a", "steps": []},
     "$.run_id: must be at most 256 printable characters; it contains the control character "
     "U+000A at character 1"),
])
def test_runs_import_refuses_a_bad_line_and_stores_nothing(run, runs_file, tmp_path, bad,
                                                           problem):
    assert run("runs", "import", runs_file).exit_code == 0
    path = write_jsonl(tmp_path / "bad.jsonl", run_obj("new-1"), bad, run_obj("new-2"))
    refused(run, tmp_path, ("runs", "import", path), 2, "INVALID_ARGUMENT", None,
            f"{path} line 2: {problem}", line=2)


def test_runs_import_refuses_undecodable_lines(run, runs_file, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(json.dumps(run_obj("ok")).encode() + b"\n"
                     + b'{"run_id": "x", "tenant": "\xff", "steps": []}\n')
    refused(run, tmp_path, ("runs", "import", str(path)), 2, "INVALID_ARGUMENT", None,
            f"{path} line 2: Invalid UTF-8 encoded string", line=2)
    path.write_bytes(b'{"run_id": "x", "tenant": "a", "steps": [], "input": NaN}\n')
    refused(run, tmp_path, ("runs", "import", str(path)), 2, "INVALID_ARGUMENT", None,
            f"{path} line 1: JSON is malformed: invalid character (byte 53)", line=1)


def test_runs_import_refuses_a_changed_run(run, runs_file, tmp_path):
    assert run("runs", "import", runs_file).exit_code == 0
    path = write_jsonl(tmp_path / "changed.jsonl", run_obj("r-new"),
                       run_obj("r-2", 2, output="rewritten"))
    refused(run, tmp_path, ("runs", "import", path), 5, "FAILED_PRECONDITION",
            "RUN_ID_CONFLICT", "run 'r-2' was already imported with different content; a run "
            "id names one recording", run_id="r-2")
    assert "r-new" not in ok_json(run("--json", "runs", "list"))["runs"]


# -- config and reviews ---------------------------------------------------------------------
def test_review_preview_then_confirm(run, runs_file, tmp_path):
    assert run("runs", "import", runs_file).exit_code == 0
    args = ("review", "add", "r-1", "--metric", "dataset_eligibility", "--label", "reviewed")
    before = files(tmp_path)
    preview = ok_json(run("--json", *args))
    token = preview["confirm_token"]
    assert set(preview) == {"confirm_token", "reviews"}
    assert token.startswith("ct-") and len(token) == 35
    [row] = preview["reviews"]
    assert {k: row[k] for k in ("run_id", "metric", "label", "reviewer")} == {
        "run_id": "r-1", "metric": "dataset_eligibility", "label": "reviewed", "reviewer": ADA}
    r = run(*args)
    assert r.exit_code == 0
    assert r.stdout == ("review of r-1: dataset_eligibility = reviewed by Ada <ada@example.com>\n"
                        f"nothing saved yet; to save, repeat with --confirm-token {token}\n")
    assert files(tmp_path) == before
    assert ok_json(run("--json", "review", "list", "r-1")) == {"run_id": "r-1", "reviews": []}
    saved = ok_json(run("--json", *args, "--confirm-token", token))
    ann = saved["annotation_id"]
    assert saved == {"annotation_id": ann, "annotation_ids": [ann],
                     "saved": [{"run_id": "r-1", "annotation_id": ann}]}
    listed = ok_json(run("--json", "review", "list", "r-1"))
    [rev] = listed["reviews"]
    assert rev == {"annotation_id": ann, "run_id": "r-1", "run": row["run"],
                   "metric": "dataset_eligibility", "label": "reviewed", "reviewer": ADA,
                   "reviewed_at": rev["reviewed_at"]}
    r = run("review", "list", "r-1")
    assert r.stdout == (f"{ann}  dataset_eligibility = reviewed  {ADA}  {rev['reviewed_at']}\n")
    # confirming again (a retried command) saves nothing new and names the saved review
    r = run(*args, "--confirm-token", token)
    assert (r.exit_code, r.stdout) == (0, f"saved review {ann} of r-1\n")
    assert [i["annotation_id"] for i in ok_json(run("--json", "review", "list", "r-1"))[
        "reviews"]] == [ann]


def test_review_refusals(run, runs_file, tmp_path):
    assert run("runs", "import", runs_file).exit_code == 0
    args = ("review", "add", "r-1", "--metric", "m", "--label", "good")
    other = ok_json(run("--json", "review", "add", "r-1", "--metric", "m", "--label",
                        "bad"))["confirm_token"]
    mismatch = ("the confirm token does not match this request (it was issued for a different "
                "request, or what it previewed has changed); run the command without "
                "--confirm-token to preview again")
    for token in (other, "ct-" + "0" * 32, "nonsense"):
        refused(run, tmp_path, (*args, "--confirm-token", token), 5, "FAILED_PRECONDITION",
                "CONFIRM_TOKEN_MISMATCH", mismatch)
    refused(run, tmp_path, ("review", "add", "r-404", "--metric", "m", "--label", "l"), 3,
            "NOT_FOUND", "RUN_NOT_FOUND",
            "no recorded run 'r-404' (import it with `cas runs import`)", run_id="r-404")
    refused(run, tmp_path, ("review", "list", "r-404"), 3, "NOT_FOUND", "RUN_NOT_FOUND",
            "no recorded run 'r-404' (import it with `cas runs import`)", run_id="r-404")
    refused(run, tmp_path, ("review", "add", "r-1", "--metric", "m"), 2, "INVALID_ARGUMENT",
            None, "review add needs RUN_ID (or --run RUN_ID ...), --metric and --label (or --file)")
    batch = write_jsonl(tmp_path / "reviews.jsonl", {"run_id": "r-1", "metric": "m",
                                                     "label": "l"})
    refused(run, tmp_path, ("review", "add", "r-1", "--file", batch), 2, "INVALID_ARGUMENT",
            None, "give either RUN_ID --metric --label, or --file, not both")
    refused(run, tmp_path, ("review", "add", "r-1", "--metric", "", "--label", "l"), 2,
            "INVALID_ARGUMENT", None, "review add needs RUN_ID (or --run RUN_ID ...), --metric and --label (or --file)")
    refused(run, tmp_path, ("review", "add", "r-1", "--metric", "m\tx", "--label", "l"), 2,
            "INVALID_ARGUMENT", None, "review metric must be 1-256 printable characters; it "
            "contains the control character U+0009 at character 1")


def test_review_needs_a_configured_person(run, runs_file, tmp_path, monkeypatch):
    assert run("runs", "import", runs_file).exit_code == 0
    monkeypatch.delenv("CAS_USER")
    config = tmp_path / "config" / "cas.json"
    config.parent.mkdir()
    config.write_text("")  # an empty config file: nobody configured
    args = ("review", "add", "r-1", "--metric", "m", "--label", "good")
    refused(run, tmp_path, args, 5, "FAILED_PRECONDITION", "NO_CONFIGURED_PERSON",
            'a review needs to know who you are: run `cas config user.name "Your Name"` and '
            '`cas config user.email you@example.com`, or set CAS_USER="Name <email>"')
    r = run("config", "user.name")
    assert (r.exit_code, r.stdout) == (1, "")
    assert ok_json(run("--json", "config", "user.name")) == {"key": "user.name", "value": None}
    r = run("config", "user.name", "Grace Hopper")
    assert (r.exit_code, r.stdout) == (0, "Grace Hopper\n")
    assert ok_json(run("--json", "config", "user.email", "grace@example.com")) == {
        "key": "user.email", "value": "grace@example.com"}
    assert run("config", "user.email").stdout == "grace@example.com\n"
    preview = ok_json(run("--json", *args))
    assert preview["reviews"][0]["reviewer"] == "Grace Hopper <grace@example.com>"
    saved = ok_json(run("--json", *args, "--confirm-token", preview["confirm_token"]))
    [rev] = ok_json(run("--json", "review", "list", "r-1"))["reviews"]
    assert (rev["annotation_id"], rev["reviewer"]) == (saved["annotation_id"],
                                                       "Grace Hopper <grace@example.com>")
    # CAS_USER wins over the config file
    monkeypatch.setenv("CAS_USER", ADA)
    assert ok_json(run("--json", *args))["reviews"][0]["reviewer"] == ADA
    refused(run, tmp_path, ("config", "user.phone", "123"), 2, "INVALID_ARGUMENT", None,
            "unknown setting 'user.phone'; accepted: user.name, user.email")


def test_review_batch_from_a_file(run, runs_file, tmp_path):
    assert run("runs", "import", runs_file).exit_code == 0
    batch = write_jsonl(tmp_path / "reviews.jsonl",
                        *({"run_id": f"r-{i}", "metric": "dataset_eligibility",
                           "label": "reviewed"} for i in range(4)))
    before = files(tmp_path)
    preview = ok_json(run("--json", "review", "add", "--file", batch))
    assert [r["run_id"] for r in preview["reviews"]] == ["r-0", "r-1", "r-2", "r-3"]
    assert files(tmp_path) == before
    saved = ok_json(run("--json", "review", "add", "--file", batch, "--confirm-token",
                        preview["confirm_token"]))
    assert set(saved) == {"annotation_ids", "saved"} and len(set(saved["annotation_ids"])) == 4
    assert [x["annotation_id"] for x in saved["saved"]] == saved["annotation_ids"]
    new = sorted(set(files(tmp_path)) - set(before))
    assert [f for f, _ in new if not f.startswith(".cas/indexes/")] == [".cas/reviews/0000000001"]
    for i, ann in enumerate(saved["annotation_ids"]):
        assert [r["annotation_id"] for r in ok_json(run("--json", "review", "list",
                                                        f"r-{i}"))["reviews"]] == [ann]
    bad = write_jsonl(tmp_path / "bad.jsonl", {"run_id": "r-1", "metric": "m", "label": "l"},
                      {"run_id": "r-2", "metric": "m", "label": "l", "score": 1})
    r = run("--json", "review", "add", "--file", bad)
    assert (r.exit_code, r.stdout) == (2, "")
    err = json.loads(r.stderr)["error"]
    assert (err["code"], err["line"]) == ("INVALID_ARGUMENT", 2)
    assert err["message"].startswith(f"{bad} line 2: ")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    refused(run, tmp_path, ("review", "add", "--file", str(empty)), 2, "INVALID_ARGUMENT",
            None, f"{empty} holds no reviews")


# -- settings -------------------------------------------------------------------------------
def test_settings_content_policy(run, reviewed, tmp_path):
    assert ok_json(run("--json", "settings", "show")) == {
        "revision": 0, "dataset": None, "overridden": False, "withheld": [],
        "copied": ["input", "output", "tool_arguments", "tool_results", "metadata"],
        "eligibility": {"revision": 0, "metric": "dataset_eligibility",
                        "accepted": ["accepted", "reviewed"]}}
    r = run("settings", "show")
    assert r.stdout == "copied: input, output, tool_arguments, tool_results, metadata\n" \
                       "withheld: -\npromotion needs: dataset_eligibility = accepted or reviewed\n"
    record = ok_json(run("--json", "settings", "content-policy", "--withhold", "tool_results",
                         "--withhold", "input"))
    assert record == {"kind": "settings", "format": 1, "revision": 1,
                      "withheld": ["input", "tool_results"], "author": ADA,
                      "edited_at": record["edited_at"]}
    assert run("settings", "show").stdout == ("copied: output, tool_arguments, metadata\n"
                                              "withheld: input, tool_results\n"
                                              "promotion needs: dataset_eligibility = "
                                              "accepted or reviewed\n")
    one_of = "give one of --withhold CLASS (repeatable), --copy-all or --inherit (with --dataset)"
    refused(run, tmp_path, ("settings", "content-policy"), 2, "INVALID_ARGUMENT", None, one_of)
    refused(run, tmp_path, ("settings", "content-policy", "--withhold", "input", "--copy-all"),
            2, "INVALID_ARGUMENT", None, one_of)
    refused(run, tmp_path, ("settings", "content-policy", "--inherit"), 2, "INVALID_ARGUMENT",
            None, "--inherit drops a dataset's override: name it with --dataset")
    refused(run, tmp_path, ("settings", "content-policy", "--withhold", "secrets"), 2,
            "INVALID_ARGUMENT", None, "unknown content class 'secrets'; accepted: input, "
            "output, tool_arguments, tool_results, metadata")
    # the preview names the withheld classes per case, the frozen case too
    path = subjects_file(tmp_path, subject("r-1", reviewed["r-1"]))
    p = ok_json(run("--json", "promote", "evals", "--file", path, "--idempotency-key", "k"))
    [cid] = p["proposed"]["added"]
    assert p["withheld"] == {cid: ["input", "tool_results"]}
    r = run("promote", "evals", "--file", path, "--idempotency-key", "k")
    assert r.stdout.splitlines()[1].split() == ["CASE", "RUN", "TENANT", "OUTCOME", "WITHHELD"]
    assert r.stdout.splitlines()[2].split() == ["+", cid, "r-1", "acme", "success", "input,",
                                                "tool_results"]
    seal(run, p["confirm_token"])
    case = ok_json(run("--json", "case", "evals", "1", cid))
    assert case["withheld"] == ["input", "tool_results"] and case["input"] is None
    assert all("result" not in s for s in case["steps"] if s["type"] == "tool_call")
    assert case["output"] == "done 1" and case["run_id"] == "r-1"
    r = run("--json", "settings", "content-policy", "--copy-all")
    assert ok_json(r)["withheld"] == [] and ok_json(r)["revision"] == 2


# -- promote, remove, seal ------------------------------------------------------------------
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
