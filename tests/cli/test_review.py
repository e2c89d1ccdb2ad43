"""`cas review add`, `list` and `queue`: preview then confirm, batches (one review of several
runs), and who the reviewer is."""

import json

from support.cli import ADA, files, ok_json, refused, write_jsonl
from support.lifecycle import run_obj


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
            "INVALID_ARGUMENT", None, "review add needs RUN_ID (or --run RUN_ID ...), --metric "
            "and --label (or --file)")
    refused(run, tmp_path, ("review", "add", "r-1", "--metric", "m\tx", "--label", "l"), 2,
            "INVALID_ARGUMENT", None, "review metric must be 1-256 printable characters; it "
            "contains the control character U+0009 at character 1")


def test_review_needs_a_configured_person(run, runs_file, tmp_path, monkeypatch):
    assert run("runs", "import", runs_file).exit_code == 0
    monkeypatch.delenv("CAS_USER")
    config = tmp_path / "config" / "cas.json"
    config.parent.mkdir()
    config.write_text("")  # an empty config file: nobody configured
    monkeypatch.setenv("CAS_CONFIG", str(config))
    args = ("review", "add", "r-1", "--metric", "m", "--label", "good")
    refused(run, tmp_path, args, 5, "FAILED_PRECONDITION", "NO_CONFIGURED_PERSON",
            'a review needs to know who you are: run `cas config user.name "Your Name"` and '
            '`cas config user.email you@example.com`, or set CAS_USER="Name <email>"')
    assert run("config", "user.name", "Grace Hopper").exit_code == 0
    assert run("config", "user.email", "grace@example.com").exit_code == 0
    preview = ok_json(run("--json", *args))
    assert preview["reviews"][0]["reviewer"] == "Grace Hopper <grace@example.com>"
    saved = ok_json(run("--json", *args, "--confirm-token", preview["confirm_token"]))
    [rev] = ok_json(run("--json", "review", "list", "r-1"))["reviews"]
    assert (rev["annotation_id"], rev["reviewer"]) == (saved["annotation_id"],
                                                       "Grace Hopper <grace@example.com>")
    # CAS_USER wins over the config file
    monkeypatch.setenv("CAS_USER", ADA)
    assert ok_json(run("--json", *args))["reviews"][0]["reviewer"] == ADA


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


def test_review_add_judges_several_runs_and_names_each_saved_review(run, tmp_path):
    assert run("init").exit_code == 0
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(run_obj(r)) + "\n" for r in ("r-1", "r-2")))
    assert run("runs", "import", str(runs)).exit_code == 0
    args = ("review", "add", "r-1", "--run", "r-2", "--metric", "dataset_eligibility",
            "--label", "reviewed")
    preview = json.loads(run("--json", *args).stdout)
    assert [r["run_id"] for r in preview["reviews"]] == ["r-1", "r-2"]
    r = run(*args, "--confirm-token", preview["confirm_token"])
    saved = json.loads(run("--json", *args, "--confirm-token", preview["confirm_token"]).stdout)
    assert r.stdout == "".join(f"saved review {s['annotation_id']} of {s['run_id']}\n"
                               for s in saved["saved"])
    assert [s["run_id"] for s in saved["saved"]] == ["r-1", "r-2"]
    queue = run("review", "queue")
    assert queue.stdout == "no run awaits dataset_eligibility\n"
