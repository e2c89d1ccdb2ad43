"""Scores (cas/repo/scores.py): values (numbers, booleans, labels), batches recorded and listed
per version and per dataset, batches from a file, withdrawal of a batch; the Python API on both
backends (`cas score`: tests/cli/test_score.py)."""

from __future__ import annotations

import math

import pytest

import cas
from cas.repo import scores as scoresmod
from support.citing import keys, two_versions


@pytest.fixture
def repo(location, monkeypatch):
    return two_versions(location, monkeypatch)


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


def test_a_fence_is_not_a_batch(repo):
    repo.delete_version("evals", 1)  # leaves a fence at scores/1
    with pytest.raises(cas.NotFound) as info:
        scoresmod.withdraw_batch(repo.context, "evals", 1, "x")
    assert info.value.reason == "SCORE_BATCH_NOT_FOUND"
    assert info.value.message == ("datasets/evals/scores/0000000001 is not a score batch: it "
                                  "is a fence a deletion wrote (delete version 1)")
