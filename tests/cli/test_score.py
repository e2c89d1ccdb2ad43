"""`cas score add`, `list` and `withdraw`: scores and batches recorded, listed (a table,
--json) and withdrawn, a batch from a file, an empty listing, and every refusal's exact
message."""

import json

import pytest

import cas
from cas_cli.main import EXIT_CODES
from support.citing import ADA
from support.citing import refused as errored
from support.citing import snapshot
from support.cli import commit_example, ok_json, refused
from support.sample_cases import plain_cases


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


def test_a_file_of_scores_is_one_batch(run, repo, tmp_path):
    r = run("score", "list", "evals", "1")
    assert (r.exit_code, r.stdout) == (0, "no scores\n")
    (tmp_path / "scores.jsonl").write_text('{"metric": "acc", "value": 0.5}\n'
                                           '{"metric": "tone", "value": "terse"}\n')
    pin = f"evals@1#{repo['content_digest']}"
    r = run("score", "add", "evals@1", "--file", "scores.jsonl")
    assert (r.exit_code, r.stdout) == (
        0, f"recorded batch datasets/evals/scores/0000000001: 2 scores on {pin}\n")
    listed = ok_json(run("--json", "score", "list", "evals"))
    assert [(s["metric"], s["value"], s["pin"]) for s in listed["scores"]] == [
        ("acc", 0.5, pin), ("tone", "terse", pin)]
    batch = ok_json(run("--json", "score", "add", "evals", "1", "--file", "scores.jsonl"))
    assert (batch["batch"], batch["pin"]) == ("datasets/evals/scores/0000000002", pin)
    assert [s["score_id"] for s in batch["scores"]] == [
        "datasets/evals/scores/0000000002#0", "datasets/evals/scores/0000000002#1"]


def test_a_batch_and_one_score_at_once_is_refused(run, repo, tmp_path):
    (tmp_path / "scores.jsonl").write_text('{"metric": "acc", "value": 1}\n')
    refused(run, tmp_path, ("score", "add", "evals", "1", "--file", "scores.jsonl",
                            "--metric", "acc"), 2, "INVALID_ARGUMENT", "USAGE",
            "give either --metric --value [--item], or --file, not both")
    refused(run, tmp_path, ("score", "add", "evals", "1", "--value", "1"), 2,
            "INVALID_ARGUMENT", "USAGE", "score add needs --metric and --value (or --file)")


def test_withdrawing_a_batch_marks_its_scores(run, repo):
    assert run("score", "add", "evals", "1", "--metric", "acc", "--value", "1").exit_code == 0
    r = run("score", "withdraw", "datasets/evals/scores/0000000001", "--reason", "wrong rubric")
    assert (r.exit_code, r.stdout) == (
        0, "withdrew datasets/evals/scores/0000000001: wrong rubric\n")
    assert run("score", "list", "evals").stdout.splitlines()[1].endswith("ACTIVE WITHDRAWN")
    [s] = json.loads(run("--json", "score", "list", "evals").stdout)["scores"]
    assert s["withdrawn"] is True


def test_cli_scores(run, evals):
    item = evals.items("evals", 1).items[0]
    r = run("score", "add", "evals", "1", "--metric", "acc", "--value", "0.5")
    s = evals.scores("evals")[0]
    pin = f"evals@1#{evals.version('evals', 1).content_digest}"
    assert (r.exit_code, r.stdout) == (
        0, f"recorded datasets/evals/scores/0000000001#0: acc=0.5 on {pin}\n")
    assert run("experiment", "create", "evals", "1", "--name", "base").exit_code == 0
    r = run("--json", "score", "add", "evals@1", "--metric", "ok", "--value", "1",
            "--item", item, "--experiment", "base")
    t = json.loads(r.stdout)
    assert t == {"score_id": "datasets/evals/scores/0000000002#0", "dataset": "evals",
                 "version": 1, "content_digest": pin.split("#")[1], "metric": "ok", "value": 1,
                 "item": item, "experiment": "base", "author": "Ada <ada@example.com>",
                 "recorded_at": t["recorded_at"], "pin": pin, "version_state": "ACTIVE",
                 "batch": "datasets/evals/scores/0000000002", "withdrawn": False}
    r = run("score", "list", "evals")
    pad = " " * (len(item) - 4)
    assert r.stdout == (
        f"BATCH                             VERSION  METRIC  VALUE  ITEM{pad}  EXPERIMENT  STATE\n"
        f"datasets/evals/scores/0000000001  evals@1  acc     0.5    -{pad}     -           ACTIVE\n"
        f"datasets/evals/scores/0000000002  evals@1  ok      1      {item}  base        ACTIVE\n")
    listed = json.loads(run("score", "list", "evals", "1", "--json").stdout)
    assert listed["dataset"] == "evals" and listed["version"] == 1
    assert [x["score_id"] for x in listed["scores"]] == [s.score_id, t["score_id"]]
    assert json.loads(run("--json", "score", "list", "evals", "2").stdout) == \
        {"dataset": "evals", "version": 2, "scores": []}


def test_cli_score_refusals(run, evals):
    only_in_2 = sorted(set(evals.items("evals", 2).items) - set(evals.items("evals", 1).items))[0]
    errored(run("score", "add", "evals", "1", "--metric", "acc", "--value", "x" * 65),
            "INVALID_ARGUMENT", f"score label '{'x' * 56}... is refused: a label is 1-64 "
            "printable characters without leading or trailing spaces; it is 65 characters long")
    errored(run("score", "add", "evals", "1", "--metric", "acc", "--value", "nan"),
            "INVALID_ARGUMENT", "score label 'nan' is refused: it reads as a number or a "
            "boolean; give the number (as JSON writes numbers: 3, 0.25, 1e-3) or the boolean "
            "(true, false) itself")
    errored(run("score", "add", "evals", "1", "--metric", "acc", "--value", "1e999"),
            "INVALID_ARGUMENT", "a score's value must be a finite number, not inf")
    errored(run("score", "add", "evals", "1", "--metric", "", "--value", "1"),
            "INVALID_ARGUMENT", "metric must be a non-empty string, not ''")
    errored(run("score", "add", "evals", "1", "--metric", "acc", "--value", "1", "--item",
                only_in_2), "NOT_FOUND",
            f"case {only_in_2} is not in evals@1; a score's item must be a case of the version "
            "it cites")
    errored(run("score", "add", "evals", "1", "--metric", "acc", "--value", "1",
                "--experiment", "ghost"), "NOT_FOUND",
            "dataset 'evals' has no experiment 'ghost' (create it first with `cas experiment "
            "create`)")
    assert run("experiment", "create", "evals", "2", "--name", "two").exit_code == 0
    errored(run("score", "add", "evals", "1", "--metric", "acc", "--value", "1",
                "--experiment", "two"), "FAILED_PRECONDITION",
            "experiment 'two' is over evals@2, not evals@1; its scores must cite that version")
    errored(run("score", "add", "evals", "7", "--metric", "acc", "--value", "1"), "NOT_FOUND",
            "dataset 'evals' has no version 7")
    errored(run("score", "list"), "INVALID_ARGUMENT",
            "missing DATASET (use: cas score list DATASET [VERSION])")
    errored(run("score", "list", "evals", "9"), "NOT_FOUND", "dataset 'evals' has no version 9")
    assert evals.scores("evals") == []


def test_cli_score_add_file_is_one_batch(run, tmp_path, monkeypatch):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(c) + "\n" for c in plain_cases(2)))
    assert run("commit", "evals", "--add", "a.jsonl").exit_code == 0
    repo = cas.open(str(tmp_path))
    items = repo.items("evals", 1).items
    assert run("experiment", "create", "evals", "1", "--name", "base").exit_code == 0
    lines = [{"metric": "ok", "value": True, "item": items[0]},
             {"metric": "tone", "value": "terse", "item": items[1]},
             {"metric": "acc", "value": 0.5}]
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + "\n")
    pin = str(repo.pin("evals", 1))
    r = run("score", "add", "evals", "1", "--file", "s.jsonl", "--experiment", "base")
    assert (r.exit_code, r.stdout) == (
        0, f"recorded batch datasets/evals/scores/0000000001: 3 scores on {pin}\n")
    r = run("--json", "score", "add", "evals@1", "--file", "s.jsonl")
    out = json.loads(r.stdout)
    assert (out["batch"], out["pin"]) == ("datasets/evals/scores/0000000002", pin)
    assert [(s["score_id"], s["value"], s["experiment"], s["batch"], s["withdrawn"])
            for s in out["scores"]] == [
        (f"datasets/evals/scores/0000000002#{i}", x["value"], None,
         "datasets/evals/scores/0000000002", False) for i, x in enumerate(lines)]
    before = snapshot(repo)
    (tmp_path / "bad.jsonl").write_text(json.dumps(lines[0]) + "\n"
                                        + json.dumps({"metric": "m", "value": "0.5"}) + "\n")
    errored(run("score", "add", "evals", "1", "--file", "bad.jsonl"), "INVALID_ARGUMENT",
            "bad.jsonl line 2: score label '0.5' is refused: it reads as a number or a boolean; "
            "give the number (as JSON writes numbers: 3, 0.25, 1e-3) or the boolean (true, "
            "false) itself")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"metric": "m", "value": 1, "w": 2}) + "\n")
    errored(run("score", "add", "evals", "1", "--file", "bad.jsonl"), "INVALID_ARGUMENT",
            "bad.jsonl line 1: unknown field 'w'; a line is {\"metric\", \"value\", \"item\"?}")
    (tmp_path / "bad.jsonl").write_text("\n")
    errored(run("score", "add", "evals", "1", "--file", "bad.jsonl"), "INVALID_ARGUMENT",
            "bad.jsonl holds no scores")
    errored(run("score", "add", "evals", "1", "--file", "s.jsonl", "--metric", "m"),
            "INVALID_ARGUMENT", "give either --metric --value [--item], or --file, not both")
    errored(run("score", "add", "evals", "1", "--metric", "m"), "INVALID_ARGUMENT",
            "score add needs --metric and --value (or --file)")
    assert snapshot(repo) == before


def test_cli_score_list_and_withdraw(run, tmp_path):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    (tmp_path / "a.jsonl").write_text(json.dumps({"input": "x"}) + "\n")
    assert run("commit", "evals", "--add", "a.jsonl").exit_code == 0
    assert run("score", "add", "evals", "1", "--metric", "ok", "--value", "true").exit_code == 0
    assert run("score", "add", "evals", "1", "--metric", "tone", "--value", "terse").exit_code == 0
    batch = "datasets/evals/scores/0000000001"
    r = run("score", "withdraw", batch, "--reason", "wrong rubric")
    assert (r.exit_code, r.stdout) == (0, f"withdrew {batch}: wrong rubric\n")
    r = run("score", "list", "evals")
    assert r.stdout == (
        "BATCH                             VERSION  METRIC  VALUE  ITEM  EXPERIMENT  STATE\n"
        f"{batch}  evals@1  ok      true   -     -           ACTIVE WITHDRAWN\n"
        "datasets/evals/scores/0000000002  evals@1  tone    terse  -     -           ACTIVE\n")
    listed = json.loads(run("--json", "score", "list", "evals").stdout)["scores"]
    assert [(s["value"], s["withdrawn"], s["batch"]) for s in listed] == [
        (True, True, batch), ("terse", False, "datasets/evals/scores/0000000002")]
    repo = cas.open(str(tmp_path))
    before = snapshot(repo)
    r = run("score", "withdraw", batch, "--reason", "again")
    assert r.exit_code == EXIT_CODES["ALREADY_EXISTS"] and "already withdrawn" in r.stderr
    errored(run("score", "withdraw", "evals#1", "--reason", "x"), "INVALID_ARGUMENT",
            "'evals#1' is not a score batch id; expected datasets/DATASET/scores/NNNNNNNNNN as "
            "`cas score list` shows it")
    errored(run("score", "withdraw", "datasets/evals/scores/0000000009", "--reason", "x"),
            "NOT_FOUND", "dataset 'evals' has no score batch datasets/evals/scores/0000000009")
    assert snapshot(repo) == before
    r = run("--json", "score", "withdraw", "datasets/evals/scores/0000000002", "--reason", "r")
    out = json.loads(r.stdout)
    assert out == {"kind": "score.withdrawal", "format": 1, "dataset": "evals", "batch": 2,
                   "reason": "r", "author": ADA, "withdrawn_at": out["withdrawn_at"],
                   "batch_id": "datasets/evals/scores/0000000002"}
    r = run("version", "delete", "evals", "1")
    assert r.exit_code == 0, r.stderr
