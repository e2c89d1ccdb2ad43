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


# -- issue 36: comments and corrections, --yes, label sets, agreement, summaries -------------------
def test_review_with_comment_and_correction_in_one_call(run, runs_file, tmp_path):
    assert run("runs", "import", runs_file).exit_code == 0
    (tmp_path / "right.json").write_text('{"answer": "refund within 30 days"}')
    args = ("review", "add", "r-1", "--metric", "dataset_eligibility", "--label", "needs-work",
            "--comment", "cites the old policy; call +44 20 7946 0958", "--correction",
            "@right.json")
    r = run(*args, "--yes")
    assert r.exit_code == 0, r.stderr
    preview, saved = r.stdout.splitlines()
    assert preview == (f"review of r-1: dataset_eligibility = needs-work by {ADA} - cites the "
                       "old policy; call [REDACTED:phone] (with a correction)")
    assert saved.startswith("saved review ann-") and saved.endswith(" of r-1")
    [rev] = ok_json(run("--json", "review", "list", "r-1"))["reviews"]
    assert rev["comment"] == "cites the old policy; call [REDACTED:phone]"
    assert rev["correction"] == {"answer": "refund within 30 days"}
    listed = run("review", "list", "r-1").stdout.splitlines()
    assert listed[1:] == ["    comment: cites the old policy; call [REDACTED:phone]",
                          '    correction: {"answer": "refund within 30 days"}']
    again = ok_json(run("--json", "review", "add", "r-2", "--metric", "dataset_eligibility",
                        "--label", "reviewed", "--correction", "[1, 2]", "--yes"))
    assert again["preview"]["reviews"][0]["correction"] == [1, 2]
    assert again["annotation_ids"] == [again["annotation_id"]]
    before = files(tmp_path)
    for bad, message in (("{nope", "--correction (JSON, or @FILE)"),
                         ("null", "a correction is a JSON value other than null"),
                         ("@missing.json", "cannot read 'missing.json'")):
        r = run("review", "add", "r-3", "--metric", "dataset_eligibility", "--label",
                "reviewed", "--correction", bad, "--yes")
        assert r.exit_code == 2 and message in r.stderr, r.stderr
    assert files(tmp_path) == before


def test_label_sets_and_the_undeclared_metric_warning(run, runs_file, tmp_path):
    assert run("runs", "import", runs_file).exit_code == 0
    r = run("review", "metric", "define", "tone", "--labels", "calm, curt,rude",
            "--description", "How the agent sounds")
    assert r.stdout == "metrics revision 1: tone = calm, curt, rude\n"
    assert run("review", "metric", "list").stdout == (
        "dataset_eligibility: accepted, reviewed, rejected, needs-work  (whether a run may "
        "become a dataset case)\ntone: calm, curt, rude  (How the agent sounds)\n")
    listed = ok_json(run("--json", "review", "metric", "list"))
    assert listed["revision"] == 1 and listed["declared_only"] is False
    assert [m["name"] for m in listed["metrics"]] == ["dataset_eligibility", "tone"]
    refused(run, tmp_path, ("review", "add", "r-1", "--metric", "tone", "--label", "polite",
                            "--yes"), 2, "INVALID_ARGUMENT", "LABEL_NOT_DECLARED",
            "label 'polite' is not one of metric 'tone''s labels; accepted: calm, curt, rude "
            "(`cas review metric define` declares others); nothing was saved",
            metric="tone", label="polite", accepted=["calm", "curt", "rude"])
    r = run("review", "add", "r-1", "--metric", "dataset_eligibilty", "--label", "reviewed",
            "--yes")
    assert r.exit_code == 0
    assert r.stderr == ("cas: warning: metric 'dataset_eligibilty' is not declared; did you "
                        "mean 'dataset_eligibility'? (`cas review metric define` declares it)\n")
    assert run("settings", "metrics", "--declared-only").stdout == (
        "metrics revision 2: a judgment on an undeclared metric is refused\n")
    r = run("review", "add", "r-2", "--metric", "dataset_eligibilty", "--label", "reviewed")
    assert r.exit_code == 5 and "did you mean 'dataset_eligibility'?" in r.stderr
    assert run("settings", "eligibility", "--accept", "gold").stdout == (
        "eligibility revision 1: dataset_eligibility = accepted or gold or reviewed\n")
    assert ok_json(run("--json", "review", "add", "r-2", "--metric", "dataset_eligibility",
                       "--label", "gold", "--yes"))["annotation_ids"]


def test_queue_mine_and_the_rule_of_two_reviewers(run, runs_file, monkeypatch):
    assert run("runs", "import", runs_file).exit_code == 0
    assert run("settings", "eligibility", "--reviewers", "2", "--rule", "majority").stdout == (
        "eligibility revision 1: 2 reviewers (majority): dataset_eligibility = accepted or "
        "reviewed\n")
    assert ok_json(run("--json", "settings", "show"))["eligibility"] == {
        "revision": 1, "metric": "dataset_eligibility", "accepted": ["accepted", "reviewed"],
        "reviewers": 2, "rule": "majority"}
    assert run("review", "add", "r-0", "--metric", "dataset_eligibility", "--label",
               "reviewed", "--yes").exit_code == 0

    def queue(*more):
        return ok_json(run("--json", "review", "queue", *more))["runs"]
    assert queue() == ["r-0", "r-1", "r-2", "r-3"] and queue("--mine") == ["r-1", "r-2", "r-3"]
    monkeypatch.setenv("CAS_USER", "Grace <grace@example.com>")
    assert queue("--mine") == ["r-0", "r-1", "r-2", "r-3"]
    assert run("review", "add", "r-0", "--metric", "dataset_eligibility", "--label",
               "accepted", "--yes").exit_code == 0
    assert queue() == ["r-1", "r-2", "r-3"]


def test_agreement_report_human_and_json(run, runs_file, monkeypatch):
    assert run("runs", "import", runs_file).exit_code == 0
    plan = {"Ada <ada@example.com>": ["accepted", "rejected", "accepted", "accepted"],
            "Bob <bob@example.com>": ["accepted", "rejected", "rejected", "accepted"]}
    for who, labels in plan.items():
        monkeypatch.setenv("CAS_USER", who)
        for i, label in enumerate(labels):
            assert run("review", "add", f"r-{i}", "--metric", "dataset_eligibility",
                       "--label", label, "--yes").exit_code == 0
    report = ok_json(run("--json", "review", "agreement"))
    [pair] = report["pairs"]
    assert (pair["runs"], pair["observed"]) == (4, 0.75) and report["overall"] is None
    assert pair["cohens_kappa"] == 0.5  # po 0.75, pe 0.5: (0.75 - 0.5) / 0.5
    assert run("review", "agreement").stdout == (
        "agreement on dataset_eligibility: 2 reviewers, 4 runs judged\n"
        "  Ada <ada@example.com> / Bob <bob@example.com>: 4 runs in common, observed 0.750, "
        "Cohen's kappa 0.500\n"
        "disagreements: 1\n"
        "  r-2: Ada <ada@example.com> accepted, Bob <bob@example.com> rejected\n")


def test_a_preview_of_more_than_50_reviews_is_summarised(run, runs_file, tmp_path):
    many = [run_obj(f"r-{i:03d}", i) for i in range(60)]
    assert run("runs", "import", write_jsonl(tmp_path / "many.jsonl", *many)).exit_code == 0
    batch = write_jsonl(tmp_path / "b.jsonl", *({"run_id": f"r-{i:03d}",
                                                 "metric": "dataset_eligibility",
                                                 "label": "reviewed" if i % 3 else "rejected"}
                                                for i in range(60)))
    lines = run("review", "add", "--file", batch).stdout.splitlines()
    assert lines[0] == ("60 reviews of 60 runs: 20 dataset_eligibility = rejected, "
                        "40 dataset_eligibility = reviewed")
    assert lines[1].startswith("review of r-000: ") and len(lines) == 13
    assert lines[11] == ("... and 50 more: add --list to review add to see all (--json always "
                         "lists all)")
    assert len(run("review", "add", "--file", batch, "--list").stdout.splitlines()) == 61
    assert len(ok_json(run("--json", "review", "add", "--file", batch))["reviews"]) == 60
    lines = run("review", "add", "--file", batch, "--yes").stdout.splitlines()
    assert len(lines) == 24 and lines[12] == "saved 60 reviews"
