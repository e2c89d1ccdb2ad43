"""Scores (cas/repo/scores.py): values (numbers, booleans, labels), batches recorded and listed
per version and per dataset, batches from a file, withdrawal of a batch; the Python API on both
backends and the CLI's exact output for every refusal."""

from __future__ import annotations

import json
import math

import pytest

import cas
from cas.repo import scores as scoresmod
from cas_cli.main import EXIT_CODES
from support.sample_cases import plain_cases
from support.citing import ADA, keys, refused, snapshot, two_versions, two_versions_by_cli


@pytest.fixture
def repo(location, monkeypatch):
    return two_versions(location, monkeypatch)


@pytest.fixture
def evals(run, tmp_path):
    return two_versions_by_cli(run, tmp_path)


def test_scores_are_listed_per_version_and_per_dataset(repo):
    item = repo.items("evals", 1).items[0]
    a = repo.record_score(repo.pin("evals", 1), metric="acc", value=0.75)
    b = repo.record_score(str(repo.pin("evals", 2)), metric="acc", value=1, item=item)
    assert a.score_id == "datasets/evals/scores/0000000001#0"
    assert b.score_id == "datasets/evals/scores/0000000002#0"
    assert (a.value, type(b.value), b.item) == (0.75, int, item)
    assert a.author == "Ada <ada@example.com>" and a.pin == repo.pin("evals", 1)
    assert repo.scores("evals") == [a, b]
    assert repo.scores("evals", 1) == [a]
    assert repo.scores("evals", 2) == [b]
    with pytest.raises(cas.NotFound):
        repo.scores("evals", 3)
    with pytest.raises(cas.NotFound):
        repo.scores("nope")


def test_many_scores_are_one_batch_file(repo):
    items = repo.items("evals", 1).items
    recorded = repo.record_scores(repo.pin("evals", 1), [
        {"metric": "task_success", "value": i % 2, "item": case} for i, case in enumerate(items)
    ] + [{"metric": "mean", "value": 0.5}])
    assert [s.score_id for s in recorded] == [
        f"datasets/evals/scores/0000000001#{i}" for i in range(len(items) + 1)]
    assert keys(repo, "datasets/evals/scores/") == ["datasets/evals/scores/0000000001"]
    assert repo.scores("evals", 1) == recorded


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "1", "0.5", "nan", "true",
                                   "False", "", " x", "x" * 65, "a\nb", "\ud800", None, [1]])
def test_non_finite_numbers_and_bad_labels_are_refused(repo, value):
    with pytest.raises(cas.InvalidArgument) as info:
        repo.record_score(repo.pin("evals", 1), metric="acc", value=value)
    assert info.value.reason == "INVALID_SCORE_VALUE"
    assert keys(repo, "datasets/evals/scores/") == []


@pytest.mark.parametrize("metric", ["", " acc", "a\nb", 3, None, "x" * 129, "\ud800"])
def test_bad_metric_names_are_refused(repo, metric):
    with pytest.raises(cas.InvalidArgument):
        repo.record_score(repo.pin("evals", 1), metric=metric, value=1)
    assert keys(repo, "datasets/evals/scores/") == []


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
    refused(run("score", "add", "evals", "1", "--metric", "acc", "--value", "x" * 65),
            "INVALID_ARGUMENT", f"score label '{'x' * 56}... is refused: a label is 1-64 "
            "printable characters without leading or trailing spaces; it is 65 characters long")
    refused(run("score", "add", "evals", "1", "--metric", "acc", "--value", "nan"),
            "INVALID_ARGUMENT", "score label 'nan' is refused: it reads as a number or a "
            "boolean; give the number (as JSON writes numbers: 3, 0.25, 1e-3) or the boolean "
            "(true, false) itself")
    refused(run("score", "add", "evals", "1", "--metric", "acc", "--value", "1e999"),
            "INVALID_ARGUMENT", "a score's value must be a finite number, not inf")
    refused(run("score", "add", "evals", "1", "--metric", "", "--value", "1"),
            "INVALID_ARGUMENT", "metric must be a non-empty string, not ''")
    refused(run("score", "add", "evals", "1", "--metric", "acc", "--value", "1", "--item",
                only_in_2), "NOT_FOUND",
            f"case {only_in_2} is not in evals@1; a score's item must be a case of the version "
            "it cites")
    refused(run("score", "add", "evals", "1", "--metric", "acc", "--value", "1",
                "--experiment", "ghost"), "NOT_FOUND",
            "dataset 'evals' has no experiment 'ghost' (create it first with `cas experiment "
            "create`)")
    assert run("experiment", "create", "evals", "2", "--name", "two").exit_code == 0
    refused(run("score", "add", "evals", "1", "--metric", "acc", "--value", "1",
                "--experiment", "two"), "FAILED_PRECONDITION",
            "experiment 'two' is over evals@2, not evals@1; its scores must cite that version")
    refused(run("score", "add", "evals", "7", "--metric", "acc", "--value", "1"), "NOT_FOUND",
            "dataset 'evals' has no version 7")
    refused(run("score", "list"), "INVALID_ARGUMENT",
            "missing DATASET (use: cas score list DATASET [VERSION])")
    refused(run("score", "list", "evals", "9"), "NOT_FOUND", "dataset 'evals' has no version 9")
    assert evals.scores("evals") == []


@pytest.mark.parametrize("text,value", [("true", True), ("false", False), ("3", 3),
                                        ("-0.25", -0.25), ("1e-3", 0.001), ("fast", "fast"),
                                        ("needs work", "needs work"), ("True?", "True?")])
def test_parse_value_reads_booleans_numbers_and_labels(text, value):
    got = scoresmod.parse_value(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text", ["nan", "inf", "+1", ".5", "1.", "1_000", "TRUE", "False",
                                  "", " x", "x ", "x" * 65, "a\tb", "1e999"])
def test_parse_value_refusals(text):
    with pytest.raises(cas.InvalidArgument) as info:
        scoresmod.parse_value(text)
    assert info.value.reason == "INVALID_SCORE_VALUE"


def test_a_boolean_stays_a_boolean_in_the_stored_bytes(repo):
    pin = repo.pin("evals", 1)
    recorded = repo.record_scores(pin, [{"metric": "ok", "value": True},
                                        {"metric": "ok", "value": 1},
                                        {"metric": "tone", "value": "x" * 64}])
    data = repo.backend.get(recorded[0].batch).decode()
    assert '"value":true' in data and '"value":1' in data and '"value":"' + "x" * 64 in data
    listed = repo.scores("evals")
    assert [(s.value, type(s.value)) for s in listed] == [(True, bool), (1, int),
                                                          ("x" * 64, str)]


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
    refused(run("score", "add", "evals", "1", "--file", "bad.jsonl"), "INVALID_ARGUMENT",
            "bad.jsonl line 2: score label '0.5' is refused: it reads as a number or a boolean; "
            "give the number (as JSON writes numbers: 3, 0.25, 1e-3) or the boolean (true, "
            "false) itself")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"metric": "m", "value": 1, "w": 2}) + "\n")
    refused(run("score", "add", "evals", "1", "--file", "bad.jsonl"), "INVALID_ARGUMENT",
            "bad.jsonl line 1: unknown field 'w'; a line is {\"metric\", \"value\", \"item\"?}")
    (tmp_path / "bad.jsonl").write_text("\n")
    refused(run("score", "add", "evals", "1", "--file", "bad.jsonl"), "INVALID_ARGUMENT",
            "bad.jsonl holds no scores")
    refused(run("score", "add", "evals", "1", "--file", "s.jsonl", "--metric", "m"),
            "INVALID_ARGUMENT", "give either --metric --value [--item], or --file, not both")
    refused(run("score", "add", "evals", "1", "--metric", "m"), "INVALID_ARGUMENT",
            "score add needs --metric and --value (or --file)")
    assert snapshot(repo) == before


def test_a_fence_is_not_a_batch(repo):
    repo.delete_version("evals", 1)  # leaves a fence at scores/1
    with pytest.raises(cas.NotFound) as info:
        scoresmod.withdraw_batch(repo.context, "evals", 1, "x")
    assert info.value.reason == "SCORE_BATCH_NOT_FOUND"
    assert info.value.message == ("datasets/evals/scores/0000000001 is not a score batch: it "
                                  "is a fence a deletion wrote (delete version 1)")


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
    refused(run("score", "withdraw", "evals#1", "--reason", "x"), "INVALID_ARGUMENT",
            "'evals#1' is not a score batch id; expected datasets/DATASET/scores/NNNNNNNNNN as "
            "`cas score list` shows it")
    refused(run("score", "withdraw", "datasets/evals/scores/0000000009", "--reason", "x"),
            "NOT_FOUND", "dataset 'evals' has no score batch datasets/evals/scores/0000000009")
    assert snapshot(repo) == before
    r = run("--json", "score", "withdraw", "datasets/evals/scores/0000000002", "--reason", "r")
    out = json.loads(r.stdout)
    assert out == {"kind": "score.withdrawal", "format": 1, "dataset": "evals", "batch": 2,
                   "reason": "r", "author": ADA, "withdrawn_at": out["withdrawn_at"],
                   "batch_id": "datasets/evals/scores/0000000002"}
    r = run("version", "delete", "evals", "1")
    assert r.exit_code == 0, r.stderr
