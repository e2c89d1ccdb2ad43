"""Pins (cas/repo/pins.py): a pin of an ACTIVE version, resolved and verified against the
repository later (PIN_MISMATCH, a deleted version, a retired one), a proof checked against a
pin; the Python API and the CLI's exact output."""

from __future__ import annotations

import json

import pytest

import cas
from cas.errors import CasError
from cas.repo import pins
from cas_cli.main import EXIT_CODES
from support.citing import keys, refused, two_versions, two_versions_by_cli


ZERO = "b3:" + "0" * 64


@pytest.fixture
def repo(location, monkeypatch):
    return two_versions(location, monkeypatch)


@pytest.fixture
def evals(run, tmp_path):
    return two_versions_by_cli(run, tmp_path)


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


def test_cli_pin_and_verify(run, evals):
    digest = evals.version("evals", 2).content_digest
    r = run("pin", "evals", "2")
    assert (r.exit_code, r.stdout) == (0, f"evals@2#{digest}\n")
    assert run("pin", "evals@2").stdout == r.stdout
    r = run("pin", "evals", "2", "--json")
    assert json.loads(r.stdout) == {"pin": f"evals@2#{digest}", "dataset": "evals",
                                    "version": 2, "content_digest": digest}
    r = run("pin-verify", f"evals@2#{digest.upper().replace('B3:', 'b3:')}")
    assert (r.exit_code, r.stdout) == (0, f"valid: evals@2#{digest} (4 cases, ACTIVE)\n")
    r = run("--json", "pin-verify", f"evals@2#{digest}")
    assert json.loads(r.stdout) == {"valid": True, "pin": f"evals@2#{digest}",
                                    "dataset": "evals", "version": 2, "content_digest": digest,
                                    "item_count": 4, "state": "ACTIVE"}


def test_cli_pin_refusals(run, evals):
    digest = evals.version("evals", 1).content_digest
    refused(run("pin", "evals"), "INVALID_ARGUMENT",
            "no version given for dataset 'evals'; every read names an exact version, there "
            'is no "latest" (use: cas pin DATASET VERSION or cas pin DATASET@VERSION)')
    refused(run("pin", "evals", "3"), "NOT_FOUND", "dataset 'evals' has no version 3")
    refused(run("pin", "nope", "1"), "NOT_FOUND", "no dataset named 'nope'")
    refused(run("pin-verify", "evals@1"), "INVALID_ARGUMENT",
            "'evals@1' is not a pin; expected DATASET@VERSION#b3:<64 hex digits>, e.g. "
            f"evals@3#{ZERO}")
    refused(run("pin-verify", f"evals@2#{digest}"), "FAILED_PRECONDITION",
            f"pin evals@2#{digest} does not match the repository: evals@2 has content_digest "
            f"{evals.version('evals', 2).content_digest}")
    r = run("--json", "pin-verify", f"evals@2#{digest}")
    assert r.exit_code == 5 and r.stdout == ""
    error = json.loads(r.stderr)["error"]
    assert (error["code"], error["reason"], error["pin"]) == \
        ("FAILED_PRECONDITION", "PIN_MISMATCH", f"evals@2#{digest}")


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


def test_cli_pin_verify_of_a_retired_version_fails(run, tmp_path):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    (tmp_path / "a.jsonl").write_text(json.dumps({"input": "x"}) + "\n")
    assert run("commit", "evals", "--add", "a.jsonl").exit_code == 0
    pin = run("pin", "evals", "1").stdout.strip()
    repo = cas.open(str(tmp_path))
    r = repo.retire("evals", 1, "CONTAMINATED", "leaked")
    refused(run("pin-verify", pin), "FAILED_PRECONDITION",
            f"evals@1 is RETIRED (CONTAMINATED at {r.retired_at}): every read of it (listing, "
            "replaying, scoring) is refused, permanently; cut a new version to bring the "
            "dataset back into use")
    out = run("--json", "pin-verify", pin)
    error = json.loads(out.stderr)["error"]
    assert (out.exit_code, out.stdout, error["code"], error["reason"]) == (
        EXIT_CODES["FAILED_PRECONDITION"], "", "FAILED_PRECONDITION",
        "EVALUATION_DATASET_VERSION_RETIRED")


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


def test_cli_verify_proof_says_what_it_checked_against(run, evals, tmp_path):
    ids = evals.items("evals", 2).items
    proof = run("prove", "evals@2", ids[0]).stdout
    (tmp_path / "p.json").write_text(proof)
    root = json.loads(proof)["root"]
    r = run("verify-proof", "p.json")
    assert (r.exit_code, r.stdout) == (0, (
        f"valid: {ids[0]} is in {root}\nchecked against the proof's own root only: this "
        "proves only that the case is in the tree whose root the proof names; give --root or "
        "--pin to check it against a version\n"))
    data = json.loads(run("--json", "verify-proof", "p.json").stdout)
    assert data == {"valid": True, "root": root, "case_id": ids[0], "checked_against": "proof"}
    r = run("verify-proof", "p.json", "--root", root)
    assert r.stdout == f"valid: {ids[0]} is in {root}\n"
    assert json.loads(run("--json", "verify-proof", "p.json", "--root", root).stdout)[
        "checked_against"] == "root"
    pin = str(evals.pin("evals", 2))
    r = run("verify-proof", "p.json", "--pin", pin)
    assert (r.exit_code, r.stdout) == (0, f"valid: {ids[0]} is in evals@2 ({root}, checked "
                                          "against the pin)\n")
    data = json.loads(run("--json", "verify-proof", "p.json", "--pin", pin).stdout)
    assert data["checked_against"] == "pin" and data["pin"] == pin
    assert data["version"]["number"] == 2
    r = run("--json", "verify-proof", "p.json", "--pin", str(evals.pin("evals", 1)))
    assert r.exit_code == 5 and json.loads(r.stderr)["error"]["reason"] == "PROOF_INVALID"
    r = run("--json", "verify-proof", "p.json", "--pin", pin, "--root", root)
    assert r.exit_code == 2 and json.loads(r.stderr)["error"]["reason"] == "USAGE"
