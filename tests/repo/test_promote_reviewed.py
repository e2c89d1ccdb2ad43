"""Promotion by selection (`promote --reviewed`): the subject list is built from the runs whose
newest judgment accepts them; previews name each case's run; a stale proposal says how to stage
it anew."""

from __future__ import annotations

import io
import json

import pytest

from cas.errors import CasError
from support.lifecycle import jsonl, keys, review, run_obj


@pytest.fixture
def judged(mem, as_reviewer):
    """Runs r-1..r-5 (r-4 of tenant beta, r-5 started in June): r-1, r-4, r-5 accepted, r-2
    rejected after an acceptance, r-3 not judged; an empty dataset `evals`."""
    mem.import_runs(io.BytesIO(jsonl(
        *(run_obj(f"r-{i}", i) for i in (1, 2, 3)), run_obj("r-4", 4, tenant="beta"),
        run_obj("r-5", 5, started_at="2026-06-01T00:00:00Z"))))
    anns = {r: review(mem, r) for r in ("r-1", "r-2", "r-4", "r-5")}
    review(mem, "r-2", label="rejected")
    mem.create_dataset("evals")
    return mem, anns


def refused(call, code, reason):
    with pytest.raises(CasError) as info:
        call()
    assert (info.value.code, info.value.reason) == (code, reason), info.value.to_json()
    return info.value


def test_the_selection_is_the_runs_whose_newest_judgment_accepts_them(judged):
    repo, anns = judged
    subjects = repo.reviewed_subjects()
    assert [(s.subject_ref, s.review_annotation_id) for s in subjects] == [
        ("r-1", anns["r-1"]), ("r-4", anns["r-4"]), ("r-5", anns["r-5"])]
    assert [s.subject_ref for s in repo.reviewed_subjects(tenant="beta")] == ["r-4"]
    assert [s.subject_ref for s in repo.reviewed_subjects(since="2026-05-15")] == ["r-5"]
    assert [s.subject_ref for s in repo.reviewed_subjects(run_ids=["r-5", "r-1"])] == [
        "r-1", "r-5"]  # import order, whatever the order named


def test_promote_reviewed_stages_the_selection_and_seals_it(judged):
    repo, anns = judged
    p = repo.promote_reviewed("evals", "k1", tenant="acme")
    assert [j["run_id"] for j in p["subjects"]] == ["r-1", "r-5"]
    assert sorted(c["run_id"] for c in p["proposed"]["added_cases"]) == ["r-1", "r-5"]
    assert [c["id"] for c in p["proposed"]["added_cases"]] == p["proposed"]["added"]
    assert {c["tenant"] for c in p["proposed"]["added_cases"]} == {"acme"}
    v = repo.seal("evals", p["confirm_token"]).version
    assert v.item_count == 2
    # the same request again is the same proposal (already sealed, so not stale)
    again = repo.promote_reviewed("evals", "k1", tenant="acme")
    assert (again["confirm_token"], again["stale"]) == (p["confirm_token"], False)


@pytest.mark.parametrize("kwargs, reason", [
    (dict(run_ids=["r-2"]), "REVIEW_NOT_ACCEPTED"),      # superseded by a rejection
    (dict(run_ids=["r-3"]), "REVIEW_REQUIRED"),          # never judged
    (dict(run_ids=["r-1", "r-4"], tenant="acme"), "RUN_NOT_SELECTED"),
    (dict(since="2027-01-01"), "NO_ACCEPTED_RUNS"),
    (dict(metric="quality"), "REVIEW_WRONG_METRIC"),
])
def test_a_selection_that_cannot_be_promoted_is_refused_and_stores_nothing(judged, kwargs,
                                                                             reason):
    repo, _ = judged
    before = keys(repo)
    err = refused(lambda: repo.promote_reviewed("evals", "k", **kwargs), "FAILED_PRECONDITION",
                  reason)
    assert keys(repo) == before
    if reason == "REVIEW_NOT_ACCEPTED":
        assert (err.to_json()["label"], err.to_json()["accepted"]) == (
            "rejected", ["accepted", "reviewed"])
    refused(lambda: repo.promote_reviewed("evals", "k", run_ids=["nope"]), "NOT_FOUND",
            "RUN_NOT_FOUND")


def test_a_replayed_key_after_the_head_moved_is_flagged_stale_and_seal_says_what_to_do(judged):
    repo, _ = judged
    p1 = repo.promote_reviewed("evals", "k1", run_ids=["r-1"])
    p2 = repo.promote_reviewed("evals", "k2", run_ids=["r-4"])
    assert p2["stale"] is False
    repo.seal("evals", p1["confirm_token"])
    replay = repo.promote_reviewed("evals", "k2", run_ids=["r-4"])
    assert replay["confirm_token"] == p2["confirm_token"] and replay["stale"] is True
    assert "new idempotency key" in replay["restage"]
    err = refused(lambda: repo.seal("evals", p2["confirm_token"]), "FAILED_PRECONDITION",
                  "PROPOSAL_STALE")
    assert str(err) == (
        "this proposal was made on evals@0, but the head is now evals@1; stage it again on the "
        "head with a new idempotency key (key 'k2' names this proposal for ever): cas promote "
        "evals --reviewed (or --file SUBJECTS.json) --idempotency-key NEW-KEY")
    assert err.to_json()["idempotency_key"] == "k2"
    fresh = repo.promote_reviewed("evals", "k3", run_ids=["r-4"])
    assert fresh["stale"] is False and repo.seal("evals", fresh["confirm_token"]).version.number == 2


def test_cli_promote_reviewed(run, tmp_path):
    assert run("init").exit_code == 0
    runs = tmp_path / "runs.jsonl"
    runs.write_bytes(jsonl(run_obj("r-1", 1), run_obj("r-2", 2, tenant="beta")))
    assert run("runs", "import", str(runs)).exit_code == 0
    for r in ("r-1", "r-2"):
        preview = json.loads(run("--json", "review", "add", r, "--metric", "dataset_eligibility",
                                 "--label", "reviewed").stdout)
        assert run("review", "add", r, "--metric", "dataset_eligibility", "--label", "reviewed",
                   "--confirm-token", preview["confirm_token"]).exit_code == 0
    assert run("dataset", "create", "evals").exit_code == 0
    r = run("promote", "evals", "--reviewed", "--tenant", "acme", "--idempotency-key", "k1")
    assert r.exit_code == 0, r.stderr
    data = json.loads(run("--json", "promote", "evals", "--reviewed", "--tenant", "acme",
                          "--idempotency-key", "k1").stdout)
    [case] = data["proposed"]["added_cases"]
    lines = r.stdout.splitlines()
    assert lines[1].split() == ["CASE", "RUN", "TENANT", "OUTCOME"]
    assert lines[2].split() == ["+", case["id"], "r-1", "acme", "success"]
    assert "judged: r-1: reviewed (dataset_eligibility) by Ada <ada@example.com>" in lines
    r = run("--json", "promote", "evals", "--idempotency-key", "k2")
    assert r.exit_code == 2 and json.loads(r.stderr)["error"]["message"] == (
        "give one of --reviewed (the runs whose newest judgment accepts them) and --file "
        "SUBJECTS.json")
    (tmp_path / "s.json").write_text("[]")
    r = run("--json", "promote", "evals", "--file", "s.json", "--tenant", "acme",
            "--idempotency-key", "k2")
    assert r.exit_code == 2 and "select runs for --reviewed" in r.stderr
