"""Pins (cas/repo/pins.py): a pin of an ACTIVE version, resolved and verified against the
repository later (PIN_MISMATCH, a deleted version, a retired one), a proof checked against a
pin; the Python API (`cas pin`, `cas pin-verify`: tests/cli/test_scores_and_experiments.py)."""

from __future__ import annotations

import pytest

import cas
from cas.errors import CasError
from cas.repo import pins
from support.citing import keys, two_versions


@pytest.fixture
def repo(location, monkeypatch):
    return two_versions(location, monkeypatch)


def test_pin_round_trips_through_its_string(repo):
    v = repo.version("evals", 2)
    pin = repo.pin("evals", 2)
    assert pin == cas.Pin("evals", 2, v.content_digest)
    text = str(pin)
    assert text == f"evals@2#{v.content_digest}"
    assert cas.Pin.parse(text) == pin
    assert cas.Pin.parse(text.upper().replace("EVALS", "evals").replace("B3:", "b3:")) == pin
    assert repo.resolve_pin(text) == v
    assert repo.resolve_pin(pin) == v


def test_tampered_pin_digest_is_refused(repo):
    pin = repo.pin("evals", 1)
    other = repo.version("evals", 2).content_digest
    tampered = f"evals@1#{other}"
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.resolve_pin(tampered)
    assert info.value.reason == "PIN_MISMATCH"
    assert info.value.message == (f"pin {tampered} does not match the repository: evals@1 has "
                                  f"content_digest {pin.content_digest}")
    with pytest.raises(cas.FailedPrecondition):
        repo.record_score(tampered, metric="acc", value=1)
    assert repo.scores("evals") == []
    assert keys(repo, "datasets/evals/scores/") == []


def test_pins_of_missing_or_deleted_versions_are_refused(repo):
    with pytest.raises(cas.NotFound):
        repo.pin("evals", 3)
    with pytest.raises(cas.NotFound):
        repo.pin("nope", 1)
    old = str(repo.pin("evals", 2))
    repo.delete_version("evals", 2)
    with pytest.raises(cas.NotFound) as info:
        repo.pin("evals", 2)
    assert info.value.reason == "VERSION_DELETED"
    with pytest.raises(cas.NotFound) as info:
        repo.resolve_pin(old)
    assert info.value.reason == "VERSION_DELETED"
    assert "was deleted" in info.value.message


def test_retired_versions_cannot_be_pinned_scored_or_experimented_on(repo):
    pin = repo.pin("evals", 1)
    score = repo.record_score(pin, metric="acc", value=1)
    retired = repo.retire("evals", 1, "Contaminated", "leaked into a training set")
    assert (retired.cause, retired.note) == ("CONTAMINATED", "leaked into a training set")
    before = keys(repo, "datasets/evals/scores/") + keys(repo, "datasets/evals/experiments/")
    for call, what in ((lambda: repo.pin("evals", 1), "pinning"),
                       (lambda: repo.record_score(pin, metric="acc", value=1), "pinning"),
                       (lambda: repo.create_experiment("evals", 1, "base"), "pinning")):
        with pytest.raises(cas.FailedPrecondition) as info:
            call()
        assert info.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"
        assert info.value.message == (
            f"evals@1 is RETIRED (CONTAMINATED at {retired.retired_at}): pinning, scoring or an "
            "experiment over it is refused, permanently; cut a new version to bring the "
            "dataset back into use")
    after = keys(repo, "datasets/evals/scores/") + keys(repo, "datasets/evals/experiments/")
    assert after == before
    # the score recorded before stays, and says what became of its version
    [kept] = repo.scores("evals", 1)
    assert kept.score_id == score.score_id and kept.version_state == "RETIRED"
    other = repo.record_score(repo.pin("evals", 2), metric="acc", value=0)
    assert repo.scores("evals", 2) == [other] and other.version_state == "ACTIVE"


def test_pin_verify_of_a_retired_version_fails(repo, run, tmp_path):
    pin = repo.pin("evals", 1)
    r = repo.retire("evals", 1, "CONTAMINATED", "leaked")
    with pytest.raises(cas.FailedPrecondition) as info:
        pins.verify_pin(repo.context, str(pin))
    assert info.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"
    assert info.value.message == (
        f"evals@1 is RETIRED (CONTAMINATED at {r.retired_at}): every read of it (listing, "
        "replaying, scoring) is refused, permanently; cut a new version to bring the dataset "
        "back into use")
    assert repo.resolve_pin(pin).number == 1  # resolving still answers "is this the set"
    assert pins.verify_pin(repo.context, repo.pin("evals", 2)).number == 2


def test_check_proof_pin(repo):
    ids = repo.items("evals", 2).items
    proof = repo.prove("evals", 2, ids[0])
    pin = str(repo.pin("evals", 2))
    assert pins.check_proof_pin(repo.context, proof, pin).number == 2
    assert repo.check_proof_pin(proof, pin).number == 2
    with pytest.raises(CasError) as info:  # the proof is of evals@2, not evals@1
        pins.check_proof_pin(repo.context, proof, str(repo.pin("evals", 1)))
    assert info.value.reason == "PROOF_INVALID"
    wrong = pin.rsplit("#", 1)[0] + "#b3:" + "0" * 64
    with pytest.raises(CasError) as info:
        pins.check_proof_pin(repo.context, proof, wrong)
    assert info.value.reason == "PIN_MISMATCH"
