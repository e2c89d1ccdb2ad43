"""`cas score add`, `list` and `withdraw`: a batch from a file, an empty listing, refusals."""

import json

import pytest
from support.cli import commit_example, ok_json, refused


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
