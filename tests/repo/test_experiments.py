"""Experiments (cas/repo/experiments.py): named runs over an exact version, unique per
dataset, whose scores must cite that version; the Python API (`cas experiment`:
tests/cli/test_experiment.py)."""

from __future__ import annotations

import pytest

import cas
from support.citing import two_versions


@pytest.fixture
def repo(location, monkeypatch):
    return two_versions(location, monkeypatch)


def test_items_and_experiments_must_belong_to_the_version(repo):
    pin1 = repo.pin("evals", 1)
    only_in_2 = sorted(set(repo.items("evals", 2).items) - set(repo.items("evals", 1).items))[0]
    with pytest.raises(cas.NotFound) as info:
        repo.record_score(pin1, metric="acc", value=1, item=only_in_2)
    assert info.value.reason == "ITEM_NOT_IN_VERSION"
    with pytest.raises(cas.InvalidArgument):
        repo.record_score(pin1, metric="acc", value=1, item="not-a-digest")
    with pytest.raises(cas.NotFound) as info:
        repo.record_score(pin1, metric="acc", value=1, experiment="ghost")
    assert info.value.reason == "EXPERIMENT_NOT_FOUND"
    repo.create_experiment("evals", 2, "on-two")
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.record_score(pin1, metric="acc", value=1, experiment="on-two")
    assert info.value.reason == "EXPERIMENT_VERSION_MISMATCH"
    with pytest.raises(cas.InvalidArgument):
        repo.record_scores(pin1, [{"metric": "acc", "value": 1, "weight": 2}])
    with pytest.raises(cas.InvalidArgument):
        repo.record_scores(pin1, [])
    # one bad score in a batch stores none of them
    with pytest.raises(cas.NotFound):
        repo.record_scores(pin1, [{"metric": "a", "value": 1},
                                  {"metric": "b", "value": 2, "item": only_in_2}])
    assert repo.scores("evals") == []


def test_experiments(repo):
    e = repo.create_experiment("evals", 1, "baseline")
    assert (e.dataset, e.number, e.name, e.version) == ("evals", 1, "baseline", 1)
    assert e.content_digest == repo.version("evals", 1).content_digest
    with pytest.raises(cas.AlreadyExists) as info:
        repo.create_experiment("evals", 2, "baseline")
    assert info.value.reason == "EXPERIMENT_EXISTS"
    f = repo.create_experiment("evals", 2, "candidate")
    assert repo.experiments("evals") == [e, f]
    s = repo.record_score(repo.pin("evals", 2), metric="acc", value=1, experiment="candidate")
    assert s.experiment == "candidate"
    with pytest.raises(cas.NotFound):
        repo.create_experiment("evals", 9, "later")
