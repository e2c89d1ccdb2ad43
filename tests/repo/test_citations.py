"""Citation logs (cas/repo/citations.py): score batches and experiments read in order, a number
claimed only after the check has seen everything below it, and a citation of a deleted (or
being deleted) version or dataset refused."""

from __future__ import annotations

import pytest

import cas
from cas.format.keys import deleted_key, score_batch_key
from cas.format.records import Experiment, Fence, ScoreBatch, VersionTombstone, format_record_file
from cas.repo import citations
from support.citing import two_versions


@pytest.fixture
def repo(mem, monkeypatch):
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    mem.create_dataset("evals", admission="direct")
    mem.commit("evals", base=None, add=[{"input": 1}, {"input": 2}])
    mem.commit("evals", base=1, add=[{"input": 3}])
    return mem


def test_the_logs_are_read_in_order_fences_included(repo):
    a = repo.record_scores(repo.pin("evals", 1), [{"metric": "m", "value": 1},
                                                  {"metric": "m", "value": 2}])
    repo.create_experiment("evals", 2, "x")
    fence = Fence(dataset="evals", log="scores", number=2, reason="r", author="a",
                  written_at="t")
    repo.backend.put_if_absent(score_batch_key("evals", 2), format_record_file(fence))
    b = repo.record_score(repo.pin("evals", 2), metric="m", value=3)
    scores = list(citations.read_log(repo.context, "evals", "scores"))
    assert [(n, key, type(e)) for n, key, e in scores] == [
        (1, score_batch_key("evals", 1), ScoreBatch), (2, score_batch_key("evals", 2), Fence),
        (3, score_batch_key("evals", 3), ScoreBatch)]
    assert [n for n, _, _ in citations.read_log(repo.context, "evals", "scores", after=2)] == [3]
    [(number, _, experiment)] = citations.read_log(repo.context, "evals", "experiments")
    assert (number, experiment.name, isinstance(experiment, Experiment)) == (1, "x", True)
    # every score, with its batch and its id, past the fence
    recorded = list(citations.recorded_scores(repo.context, "evals"))
    assert [(n, i, s.value) for n, _, i, s in recorded] == [(1, 0, 1), (1, 1, 2), (3, 0, 3)]
    assert [citations.score_id(key, i) for _, key, i, _ in recorded] == \
        [s.score_id for s in a + [b]]


def test_each_log_holds_its_own_kind(repo):
    assert citations.entry_type("scores") is ScoreBatch
    assert citations.entry_type("experiments") is Experiment


def test_a_number_is_claimed_after_the_check_saw_the_head(repo):
    seen = []

    def make(n):
        return Fence(dataset="evals", log="experiments", number=n, reason=f"#{n}", author="a",
                     written_at="t")
    assert citations.claim(repo.context, "evals", "experiments", make, seen.append) == \
        (1, "datasets/evals/experiments/0000000001")
    assert citations.claim(repo.context, "evals", "experiments", make, seen.append)[0] == 2
    assert seen == [0, 1]

    def refuse(head):
        raise cas.FailedPrecondition("no")
    with pytest.raises(cas.FailedPrecondition):
        citations.claim(repo.context, "evals", "experiments", make, refuse)
    assert len(list(citations.read_log(repo.context, "evals", "experiments"))) == 2


def test_a_citation_of_a_deleted_or_deleting_version_is_refused(repo):
    citations.check_not_deleted(repo.context, "evals", 1)
    version = repo.version("evals", 1)
    tomb = VersionTombstone(dataset="evals", number=1, content_digest=version.content_digest,
                            item_count=version.item_count, author="a", deleted_at="t")
    repo.backend.put_if_absent(deleted_key("evals", 1), format_record_file(tomb))
    with pytest.raises(cas.NotFound) as info:  # the version file is still there: being deleted
        citations.check_not_deleted(repo.context, "evals", 1)
    assert info.value.reason == "VERSION_DELETED"
    citations.check_not_deleted(repo.context, "evals", 2)


def test_a_citation_in_a_deleted_dataset_is_refused(location, monkeypatch):
    repo = two_versions(location, monkeypatch)
    repo.delete_dataset("evals")
    with pytest.raises(cas.NotFound) as info:
        citations.check_not_deleted(repo.context, "evals", 2)
    assert info.value.reason == "DATASET_DELETED"
    assert info.value.message.startswith("dataset 'evals' was deleted (")
