"""Promotion and removal (cas/repo/promotion.py): a staged proposal with a preview and a confirm
token, then a seal; idempotency keys, provenance and the content policy; promotion by selection
(`promote --reviewed`: the runs whose newest judgment accepts them), previews naming each case's
run, and a stale proposal saying how to stage it anew.

Every refusal is checked to leave the repository's key listing unchanged: a proposal refuses
before it stores anything. Tests that touch storage run on both backends (`location`).
"""

from __future__ import annotations

import io

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas.errors import CasError
from cas.repo import promotion
from support.backends import Counting
from support.lifecycle import REVIEWER, jsonl, keys, promote_and_seal, review, run_obj, subject

pytestmark = pytest.mark.usefixtures("as_reviewer")


def test_promote_previews_and_seal_seals(staged):
    repo, anns = staged
    before = keys(repo)
    p = repo.promote("evals", [subject("r-0", anns["r-0"]), subject("r-1", anns["r-1"])], "k-1")
    assert p["base_version"] is None and p["operation"] == "promote" and p["changes"] is True
    assert p["proposed"]["item_count"] == 2 and p["proposed"]["carried"] == []
    assert p["proposed"]["added"] == sorted(p["proposed"]["added"])
    assert p["withheld"] == {c: [] for c in p["proposed"]["added"]}
    assert repo.head("evals") == 0  # nothing sealed by a preview
    new = set(keys(repo)) - set(before)
    # a preview stores the frozen cases (packs, with their person index), the proposal and the key
    assert {k for k in new if not k.startswith(("packs/", "persons/"))} == {
        f"datasets/evals/proposals/{p['confirm_token']}",
        next(k for k in new if k.startswith("datasets/evals/keys/"))}
    result = repo.seal("evals", p["confirm_token"], message="first")
    v = result.version
    assert result.already_sealed is False
    assert (v.number, v.parent, v.item_count, v.added, v.removed, v.operation, v.message) == (
        1, None, 2, 2, 0, "promote", "first")
    assert v.content_digest == p["proposed"]["content_digest"] and v.proposal == p["confirm_token"]
    assert repo.items("evals", 1).items == p["proposed"]["added"]
    # the next preview names the base and carries its cases
    p2 = repo.promote("evals", [subject("r-2", anns["r-2"])], "k-2")
    assert p2["base_version"] == {"number": 1, "item_count": 2, "content_digest": v.content_digest}
    assert p2["proposed"]["carried"] == repo.items("evals", 1).items
    assert p2["proposed"]["carried_count"] == 2 and p2["proposed"]["carried_complete"] is True
    assert p2["proposed"]["item_count"] == 3 and len(p2["proposed"]["added"]) == 1
    assert repo.fsck().ok


def refusal_cases(anns):
    return [
        ([subject("r-0", None)], "FAILED_PRECONDITION", "REVIEW_REQUIRED",
         "subject 0 ('r-0'): a promotion needs a saved review: give its review_annotation_id "
         "(see `cas review add`)"),
        ([subject("r-0", "")], "FAILED_PRECONDITION", "REVIEW_REQUIRED", None),
        ([subject("r-0", anns["r-0"]), subject("r-1", anns["r-0"])], "FAILED_PRECONDITION",
         "REVIEW_RUN_MISMATCH",
         f"subject 1 ('r-1'): review {anns['r-0']} is a review of run 'r-0', not of this run"),
        ([subject("r-0", "ann-" + "0" * 32)], "NOT_FOUND", "REVIEW_NOT_FOUND",
         f"subject 0 ('r-0'): no review 'ann-{'0' * 32}'"),
        ([subject("r-404", anns["r-0"])], "NOT_FOUND", "RUN_NOT_FOUND",
         "no recorded run 'r-404' (import it with `cas runs import`)"),
        ([subject("r-0", anns["r-0"], subject_kind="dataset_item")], "INVALID_ARGUMENT",
         "SUBJECT_KIND_INVALID",
         "subject 0 ('r-0'): subject_kind 'dataset_item' is not a run; accepted: agent_run, "
         "SUBJECT_KIND_AGENT_RUN"),
        ([subject("r-0", anns["r-0"], subject_kind="SUBJECT_KIND_DATASET_ITEM")],
         "INVALID_ARGUMENT", "SUBJECT_KIND_INVALID", None),
        ([subject("r-0", anns["r-0"], run_id="r-1")], "INVALID_ARGUMENT", "RUN_MISMATCH",
         "subject 0 ('r-0'): run_id 'r-1' and subject_ref 'r-0' name different runs"),
    ]


def test_promotion_refusals_store_nothing(staged):
    repo, anns = staged
    for subjects, code, reason, message in refusal_cases(anns):
        before = keys(repo)
        with pytest.raises(cas.CasError) as info:
            repo.promote("evals", subjects, "the-key")
        err = info.value
        assert (err.code, err.reason) == (code, reason), subjects
        if message:
            assert err.message == message
        assert keys(repo) == before, subjects
    # no refusal used up the key
    p = repo.promote("evals", [subject("r-0", anns["r-0"])], "the-key")
    assert repo.seal("evals", p["confirm_token"]).version.number == 1
    # and refusals on a dataset with versions store nothing either
    for subjects, code, reason, message in refusal_cases(anns):
        before = keys(repo)
        with pytest.raises(cas.CasError):
            repo.promote("evals", subjects, "another-key")
        assert keys(repo) == before


def test_promotion_input_refusals(staged):
    repo, anns = staged
    before = keys(repo)
    s = [subject("r-0", anns["r-0"])]
    for name, subjects, key, exc in [
            ("nope", s, "k", cas.NotFound), ("Bad Name", s, "k", cas.InvalidArgument),
            ("evals", s, "", cas.InvalidArgument), ("evals", s, "a\nb", cas.InvalidArgument),
            ("evals", s, "k" * 257, cas.InvalidArgument),
            ("evals", [{"subject_kind": "agent_run"}], "k", cas.InvalidArgument),
            ("evals", [{"subject_ref": "r-0", "subject_kind": "agent_run", "x": 1}], "k",
             cas.InvalidArgument),
            ("evals", ["r-0"], "k", cas.InvalidArgument)]:
        with pytest.raises(exc):
            repo.promote(name, subjects, key)
    assert keys(repo) == before


def test_native_subject_kind_spelling_is_the_same_request(staged):
    repo, anns = staged
    a = repo.promote("evals", [subject("r-0", anns["r-0"])], "k")
    b = repo.promote("evals", [subject("r-0", anns["r-0"], subject_kind="SUBJECT_KIND_AGENT_RUN",
                                       run_id="r-0")], "k")
    assert a == b


def test_removal_refusals_store_nothing(staged):
    repo, anns = staged
    before = keys(repo)
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.remove("evals", [], "k")  # no version yet
    assert info.value.reason == "EMPTY_REMOVAL"
    promote_and_seal(repo, anns, ["r-0", "r-1"], "p-1")
    held = repo.items("evals", 1).items
    stranger = cas.encode_case({"input": "never promoted"}).case_id
    before = keys(repo)
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.remove("evals", [], "k")
    assert (info.value.code, info.value.reason) == ("FAILED_PRECONDITION", "EMPTY_REMOVAL")
    assert info.value.message == ("a removal needs at least one case id; an empty removal is "
                                  "accepted only when the current version is retired")
    for ids in ([stranger], [held[0], stranger]):
        with pytest.raises(cas.NotFound) as info:
            repo.remove("evals", ids, "k")
        assert (info.value.reason, info.value.fields) == ("ITEM_NOT_IN_VERSION",
                                                          {"case_id": stranger})
        assert info.value.message == f"evals@1 does not hold {stranger}"
    with pytest.raises(cas.InvalidArgument) as info:
        repo.remove("evals", ["r-0"], "k")
    assert info.value.message == ("case id 'r-0' is not a digest; expected 'b3:' followed by "
                                  "64 hex digits")
    assert keys(repo) == before
    # the key was not used up by the refusals; an id in upper case is the same id
    p = repo.remove("evals", [held[0].upper()], "k")
    assert repo.remove("evals", [held[0]], "k") == p
    assert p["operation"] == "remove" and p["proposed"]["removed"] == [held[0]]
    assert p["proposed"]["added"] == [] and p["proposed"]["carried"] == [held[1]]
    v = repo.seal("evals", p["confirm_token"]).version
    assert (v.number, v.item_count, v.added, v.removed, v.operation) == (2, 1, 0, 1, "remove")
    assert repo.provenance("evals", 2) == []


def test_preview_carries_a_first_page_of_a_large_base(staged, monkeypatch):
    repo, anns = staged
    promote_and_seal(repo, anns, ["r-0", "r-1", "r-2"], "k1")
    monkeypatch.setattr(promotion, "CARRIED_PAGE", 2)
    p = repo.promote("evals", [subject("r-3", anns["r-3"])], "k2")
    held = repo.items("evals", 1).items
    assert p["proposed"]["carried"] == held[:2]
    assert (p["proposed"]["carried_count"], p["proposed"]["carried_complete"]) == (3, False)
    assert p["proposed"]["item_count"] == 4


def test_idempotency_keys(staged):
    repo, anns = staged
    s0, s1 = subject("r-0", anns["r-0"]), subject("r-1", anns["r-1"])
    p = repo.promote("evals", [s0, s1], "key-A")
    before = keys(repo)
    # the same key and content: the same token, nothing new stored (order does not matter)
    assert repo.promote("evals", [s1, s0], "key-A") == p
    assert keys(repo) == before
    # the same key, other content: refused
    for other in ([s0], [s0, subject("r-2", anns["r-2"])]):
        with pytest.raises(cas.FailedPrecondition) as info:
            repo.promote("evals", other, "key-A")
        assert (info.value.code, info.value.reason) == ("FAILED_PRECONDITION",
                                                        "IDEMPOTENCY_KEY_REUSED")
        assert info.value.message == ("idempotency key 'key-A' was already used for a different "
                                      "request; use a new key")
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.remove("evals", [p["proposed"]["added"][0]], "key-A")
    assert info.value.reason == "IDEMPOTENCY_KEY_REUSED"
    assert keys(repo) == before
    # a key belongs to one dataset
    repo.create_dataset("other", admission="direct")
    q = repo.promote("other", [s0, s1], "key-A")
    assert q["confirm_token"] != p["confirm_token"] and q["dataset"] == "other"
    # after sealing, replaying the key still returns the same proposal and seal is idempotent
    v = repo.seal("evals", p["confirm_token"]).version
    assert repo.promote("evals", [s0, s1], "key-A")["confirm_token"] == p["confirm_token"]
    again = repo.seal("evals", p["confirm_token"])
    assert again == (v, True)


def test_sealing_twice_returns_the_same_version(staged):
    repo, anns = staged
    p, first = promote_and_seal(repo, anns, ["r-0"], "k")
    before = keys(repo)
    second = repo.seal("evals", p["confirm_token"])
    assert second.already_sealed is True and second.version == first.version
    assert keys(repo) == before and repo.head("evals") == 1
    # still true once later versions exist
    promote_and_seal(repo, anns, ["r-1"], "k2")
    assert repo.seal("evals", p["confirm_token"]) == (first.version, True)


def test_sealing_twice_over_a_deleted_number(staged):
    """A number deleted above the base is skipped: the proposal seals as the next free number,
    and sealing its token again still returns that version."""
    repo, anns = staged
    promote_and_seal(repo, anns, ["r-0"], "k0")
    promote_and_seal(repo, anns, ["r-1"], "k1")
    repo.delete_version("evals", 2)
    assert repo.head("evals") == 1
    p = repo.promote("evals", [subject("r-2", anns["r-2"])], "k2")
    assert p["base_version"]["number"] == 1
    first = repo.seal("evals", p["confirm_token"])
    assert (first.version.number, first.version.parent, first.already_sealed) == (3, 1, False)
    before = keys(repo)
    assert repo.seal("evals", p["confirm_token"]) == (first.version, True)
    assert keys(repo) == before


def test_stale_token_is_refused_naming_the_head(staged):
    repo, anns = staged
    promote_and_seal(repo, anns, ["r-0"], "k0")
    a = repo.promote("evals", [subject("r-1", anns["r-1"])], "ka")
    b = repo.promote("evals", [subject("r-2", anns["r-2"])], "kb")
    assert a["base_version"]["number"] == b["base_version"]["number"] == 1
    assert repo.seal("evals", a["confirm_token"]).version.number == 2
    before = keys(repo)
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.seal("evals", b["confirm_token"])
    err = info.value
    assert (err.code, err.reason, err.fields) == ("FAILED_PRECONDITION", "PROPOSAL_STALE",
                                                  {"base": 1, "head": 2,
                                                   "idempotency_key": "kb"})
    assert err.message == ("this proposal was made on evals@1, but the head is now evals@2; "
                           "stage it again on the head with a new idempotency key (key 'kb' "
                           "names this proposal for ever): cas promote evals --reviewed (or "
                           "--file SUBJECTS.json) --idempotency-key NEW-KEY")
    assert keys(repo) == before
    # the same subjects with a new key build on the head
    c = repo.promote("evals", [subject("r-2", anns["r-2"])], "kc")
    assert repo.seal("evals", c["confirm_token"]).version.number == 3


def test_unknown_and_malformed_tokens(staged):
    repo, anns = staged
    repo.create_dataset("other", admission="direct")
    p = repo.promote("other", [subject("r-0", anns["r-0"])], "k")
    before = keys(repo)
    for token, code, reason in [("ct-" + "f" * 32, "NOT_FOUND", "PROPOSAL_NOT_FOUND"),
                                (p["confirm_token"], "NOT_FOUND", "PROPOSAL_NOT_FOUND"),
                                ("ct-../../config", "INVALID_ARGUMENT", None),
                                ("ct-" + "F" * 32, "INVALID_ARGUMENT", None),
                                ("", "INVALID_ARGUMENT", None)]:
        with pytest.raises(cas.CasError) as info:
            repo.seal("evals", token)
        assert (info.value.code, info.value.reason) == (code, reason), token
    assert keys(repo) == before


def test_a_proposal_that_changes_nothing_seals_nothing(staged):
    repo, anns = staged
    p1, v1 = promote_and_seal(repo, anns, ["r-0", "r-1"], "k1")
    # the same runs again, under another key and with a second review of one of them
    ann2 = review(repo, "r-0", label="accepted")
    p = repo.promote("evals", [subject("r-0", ann2), subject("r-1", anns["r-1"])], "k2")
    assert p["changes"] is False and p["proposed"]["added"] == []
    assert p["proposed"]["content_digest"] == v1.version.content_digest
    assert p["proposed"]["carried"] == p1["proposed"]["added"]
    before = keys(repo)
    assert repo.seal("evals", p["confirm_token"]) == (None, False)
    assert repo.head("evals") == 1 and keys(repo) == before


def test_same_run_is_one_case_and_keeps_its_id(staged):
    repo, anns = staged
    ann_b = review(repo, "r-0", label="accepted")
    # one request naming the run twice (two reviews): one case
    p = repo.promote("evals", [subject("r-0", anns["r-0"]), subject("r-0", ann_b)], "k1")
    assert len(p["proposed"]["added"]) == 1 and p["proposed"]["item_count"] == 1
    case_id = p["proposed"]["added"][0]
    repo.seal("evals", p["confirm_token"])
    # two promotions in two datasets under two keys: the same case id
    repo.create_dataset("other", admission="direct")
    q, _ = promote_and_seal(repo, anns, ["r-0", "r-1"], "k2", name="other")
    assert case_id in q["proposed"]["added"]
    # the id survives later versions of the first dataset
    _, v2 = promote_and_seal(repo, anns, ["r-2", "r-3"], "k3")
    r1 = next(c for c in q["proposed"]["added"] if c != case_id)
    _, v3 = promote_and_seal(repo, anns, ["r-1"], "k4")
    assert v3.version.number == 3 and r1 in repo.items("evals", 3).items
    for n in (1, 2, 3):
        assert case_id in repo.items("evals", n).items
        assert repo.case("evals", n, case_id) == repo.case("evals", 1, case_id)
    frozen = repo.case("evals", 3, case_id)
    assert cas.encode_case(frozen).case_id == case_id and frozen.run_id == "r-0"


def test_the_same_subjects_in_another_order_stage_the_same_proposal(staged):
    """One run named with two accepting judgments: the provenance of its one case does not
    depend on which subject came first (the request is sorted; the proposal must be too)."""
    repo, anns = staged
    ann_b = review(repo, "r-0", label="accepted")
    repo.create_dataset("other")
    one = repo.promote("evals", [subject("r-0", anns["r-0"]), subject("r-0", ann_b)], "k1")
    two = repo.promote("other", [subject("r-0", ann_b), subject("r-0", anns["r-0"])], "k2")
    repo.seal("evals", one["confirm_token"])
    repo.seal("other", two["confirm_token"])
    [first], [second] = repo.provenance("evals", 1), repo.provenance("other", 1)
    assert first == second
    assert first.annotation_id == min(anns["r-0"], ann_b)


def test_provenance_names_review_reviewer_and_time(staged):
    repo, anns = staged
    p, v1 = promote_and_seal(repo, anns, ["r-0", "r-1"], "k1")
    entries = repo.provenance("evals", 1)
    assert [e.case_id for e in entries] == p["proposed"]["added"]
    by_run = {e.run_id: e for e in entries}
    for run_id in ("r-0", "r-1"):
        [r] = repo.reviews(run_id)
        e = by_run[run_id]
        assert (e.annotation_id, e.reviewer, e.reviewed_at, e.withheld) == (
            r.annotation_id, REVIEWER, r.reviewed_at, [])
        assert repo.case("evals", 1, e.case_id).run_id == run_id
    # a later version records only the cases it promoted
    p2, _ = promote_and_seal(repo, anns, ["r-0", "r-2"], "k2")
    assert [(e.run_id, e.annotation_id) for e in repo.provenance("evals", 2)] == [
        ("r-2", anns["r-2"])]
    assert repo.provenance("evals", 1) == entries
    # a committed version's provenance names each case it added and its author, no run
    repo.create_dataset("plain", admission="direct")
    v1 = repo.commit("plain", base=None, add=[{"input": 1}], author="Bo <bo@example.com>")
    [e] = repo.provenance("plain", 1)
    assert (e.promoted, e.committed_by, e.run_id, e.annotation_id) == (
        False, "Bo <bo@example.com>", msgspec.UNSET, msgspec.UNSET)
    assert e.case_id == repo.items("plain", 1).items[0] and v1.provenance is not None
    repo.commit("plain", base=1, add=[{"input": 1}, {"input": 2}], author="Cy")
    assert [(x.case_id, x.committed_by) for x in repo.provenance("plain", 2)] == [
        (cas.encode_case({"input": 2}).case_id, "Cy")]  # the carried case is not named


CLASS_EFFECT = {
    "input": lambda c, r: c.input is None and r.input is not None,
    "output": lambda c, r: c.output is None and r.output is not None,
    "metadata": lambda c, r: c.metadata == {} and r.metadata,
    "tool_arguments": lambda c, r: all("arguments" not in s for s in c.steps
                                       if s["type"] == "tool_call"),
    "tool_results": lambda c, r: all("result" not in s and "error" not in s for s in c.steps
                                     if s["type"] == "tool_call"),
}


@pytest.mark.parametrize("withheld", [["input"], ["output"], ["metadata"], ["tool_arguments"],
                                      ["tool_results"], ["input", "tool_results"],
                                      sorted(CLASS_EFFECT)])
def test_content_policy_withholds_classes(staged, withheld):
    repo, anns = staged
    assert repo.settings() is None
    p0 = repo.promote("evals", [subject("r-0", anns["r-0"])], "before-policy")
    settings = repo.set_content_policy(list(reversed(withheld)) + withheld[:1], author="ops")
    assert (settings.revision, settings.withheld, settings.author) == (1, sorted(withheld), "ops")
    assert repo.settings() == settings
    p = repo.promote("evals", [subject("r-0", anns["r-0"])], "after-policy")
    [case_id] = p["proposed"]["added"]
    assert case_id != p0["proposed"]["added"][0]  # a different projection is a different case
    assert p["withheld"] == {case_id: sorted(withheld)}
    repo.seal("evals", p["confirm_token"])
    case, run = repo.case("evals", 1, case_id), repo.run("r-0")
    assert case.withheld == sorted(withheld)
    for cls, effect in CLASS_EFFECT.items():
        assert bool(effect(case, run)) is (cls in withheld), cls
    # what is not withheld is copied as recorded
    assert case.outcome == run.outcome and (case.tenant, case.person) == (run.tenant, run.person)
    assert [s["type"] for s in case.steps] == [s["type"] for s in run.steps]
    if "tool_results" not in withheld:
        assert case.steps == [s if "tool_arguments" not in withheld or s["type"] != "tool_call"
                              else {k: v for k, v in s.items() if k != "arguments"}
                              for s in run.steps]
    [entry] = repo.provenance("evals", 1)
    assert entry.withheld == sorted(withheld)
    # copying everything again: the earlier, full case id
    assert repo.set_content_policy([]).revision == 2
    assert repo.promote("evals", [subject("r-0", anns["r-0"])], "after-reset")[
        "proposed"]["added"] == p0["proposed"]["added"]


def test_a_policy_change_makes_a_replayed_key_a_different_request(staged):
    repo, anns = staged
    s = [subject("r-0", anns["r-0"])]
    repo.promote("evals", s, "k")
    repo.set_content_policy(["input"])
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.promote("evals", s, "k")
    assert info.value.reason == "IDEMPOTENCY_KEY_REUSED"


def _promote_one(repo, run_id, ann, key):
    return repo.promote("evals", [subject(run_id, ann)], key)


def test_promotion_needs_an_accepting_judgment_on_the_eligibility_metric(staged):
    """A rejected run is not promoted; nor one judged on another metric; and the run's newest
    judgment on the metric, by anyone, must not be a non-accepting one. Nothing is stored."""
    repo, _ = staged
    rejected = review(repo, "r-0", label="rejected")
    before = keys(repo)
    with pytest.raises(cas.FailedPrecondition) as info:
        _promote_one(repo, "r-0", rejected, "k1")
    assert info.value.reason == "REVIEW_NOT_ACCEPTED"
    assert info.value.fields == {"annotation_id": rejected, "label": "rejected",
                                 "accepted": ["accepted", "reviewed"]}
    other = review(repo, "r-1", metric="tone", label="reviewed")
    with pytest.raises(cas.FailedPrecondition) as info:
        _promote_one(repo, "r-1", other, "k2")
    assert info.value.reason == "REVIEW_WRONG_METRIC"
    assert info.value.fields == {"metric": "tone", "expected": "dataset_eligibility"}
    accepted = review(repo, "r-2")
    later = review(repo, "r-2", label="rejected")  # a later rejection stops the earlier yes
    with pytest.raises(cas.FailedPrecondition) as info:
        _promote_one(repo, "r-2", accepted, "k3")
    assert info.value.reason == "REVIEW_SUPERSEDED"
    assert info.value.fields == {"annotation_id": accepted, "newer_annotation_id": later,
                                 "label": "rejected"}
    # every refusal came before anything was staged: only the reviews were added
    assert [k for k in keys(repo) if k not in before] == [
        k for k in keys(repo) if k not in before and k.startswith(("reviews/", "indexes/reviews/"))]
    assert not any("/proposals/" in k or "/keys/" in k for k in keys(repo))
    again = review(repo, "r-2", label="accepted")  # a newer acceptance admits it again
    preview = _promote_one(repo, "r-2", again, "k4")
    assert preview["subjects"] == [{"run_id": "r-2", "annotation_id": again,
                                    "metric": "dataset_eligibility", "label": "accepted",
                                    "reviewer": REVIEWER}]


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


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # it only reads
@given(picked=st.lists(st.sampled_from(["r-1", "r-2", "r-3", "r-4", "r-5", "r-6"]), min_size=1,
                       max_size=6))
def test_naming_runs_selects_what_the_whole_selection_holds_of_them(judged, picked):
    """The named path looks each run up in the keyed indexes; the unnamed one reads the logs.
    They agree on every run: selected with the same judgment, or refused for the same reason."""
    repo, _ = judged
    whole = {s.subject_ref: s for s in repo.reviewed_subjects()}
    try:
        named = repo.reviewed_subjects(run_ids=picked)
    except CasError as exc:
        assert exc.reason in ("REVIEW_NOT_ACCEPTED", "REVIEW_REQUIRED", "RUN_NOT_FOUND")
        assert exc.fields["run_id"] in set(picked) - set(whole)
    else:
        assert set(picked) <= set(whole)
        assert named == [whole[r] for r in whole if r in picked]  # in import order


def test_naming_a_few_runs_reads_neither_log_whole(mem, as_reviewer):
    """Promotion by selection of 2 runs among 40 import records and 40 review batches reads
    a few records of each log, not all (issue 37: O(N) in the runs named)."""
    for i in range(40):
        mem.import_runs(io.BytesIO(jsonl(run_obj(f"r-{i}", i))))
        review(mem, f"r-{i}")
    counting = Counting(mem.backend)
    fresh = cas.Repository(counting)
    subjects = fresh.reviewed_subjects(run_ids=["r-7", "r-31"])
    assert [s.subject_ref for s in subjects] == ["r-7", "r-31"]
    got = counting.calls["get"] + counting.calls["get_range"]
    assert got < 20, counting.calls


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
    assert fresh["stale"] is False
    assert repo.seal("evals", fresh["confirm_token"]).version.number == 2


def test_since_selects_by_time_whatever_the_offset_and_refuses_what_is_not_a_time(mem,
                                                                                   as_reviewer):
    mem.import_runs(io.BytesIO(jsonl(
        run_obj("ny", 1, started_at="2025-05-12T20:27:36-04:00"),  # 00:27 UTC on the 13th
        run_obj("utc", 2, started_at="2025-05-12T22:00:00Z"),
        run_obj("odd", 3, started_at="5/13/2025"))))
    for run_id in ("ny", "utc", "odd"):
        review(mem, run_id)
    assert [s.subject_ref for s in mem.reviewed_subjects(since="2025-05-12T23:00:00Z")] == ["ny"]
    assert [s.subject_ref for s in mem.reviewed_subjects(since="2025-05-12")] == ["ny", "utc"]
    err = refused(lambda: mem.reviewed_subjects(since="2025-05-12", run_ids=["odd"]),
                  "FAILED_PRECONDITION", "RUN_NOT_SELECTED")
    assert err.message == ("run 'odd' has a started_at of '5/13/2025', which is not a time, so "
                           "--since 2025-05-12T00:00:00Z cannot select it")
    err = refused(lambda: mem.reviewed_subjects(since="2025-05-13T00:30Z", run_ids=["ny"]),
                  "FAILED_PRECONDITION", "RUN_NOT_SELECTED")
    assert err.message == ("run 'ny' started at '2025-05-12T20:27:36-04:00', not since "
                           "2025-05-13T00:30:00Z")
    refused(lambda: mem.reviewed_subjects(since="yesterday"), "INVALID_ARGUMENT", "INVALID_TIME")


# -- previews in pages ----------------------------------------------------------------------------
class _Changes(msgspec.Struct):
    add: list[str]
    remove: list[str]


_IDS = st.lists(st.integers(0, 2**20), unique=True, max_size=40).map(
    lambda xs: sorted(f"b3:{x:064x}" for x in xs))


@given(ids=_IDS, removed=st.data(), limit=st.integers(1, 7))
def test_the_pages_of_changes_are_every_change_once_in_id_order(ids, removed, limit):
    remove = sorted(removed.draw(st.sets(st.sampled_from(ids))) if ids else [])
    p = _Changes(add=[i for i in ids if i not in remove], remove=remove)
    pages, after = [], None
    while True:
        page = promotion._page_of_changes(p, after, limit + 1)
        more, page = len(page) > limit, page[:limit]
        pages.append(page)
        if not more:
            break
        after = page[-1][0]
    assert all(len(page) <= limit for page in pages) and all(pages[:-1])
    assert [c for page in pages for c in page] == [
        (i, "-" if i in remove else "+") for i in ids]


def test_a_preview_describes_a_page_and_preview_reads_the_next_ones(staged, monkeypatch):
    repo, anns = staged
    monkeypatch.setattr(promotion, "PREVIEW_PAGE", 3)
    runs = ["r-0", "r-1", "r-2", "r-3"]
    p = repo.promote("evals", [subject(r, anns[r]) for r in runs], "k-page")
    added = p["proposed"]["added"]
    assert len(added) == p["proposed"]["added_count"] == 4 and p["proposed"]["removed_count"] == 0
    assert [c["id"] for c in p["proposed"]["added_cases"]] == added[:3]
    assert set(p["withheld"]) == set(added[:3])
    assert (len(p["subjects"]), p["subjects_count"]) == (3, 4)
    assert (p["next_cursor"], p["page"]) == (added[2], {"after": None, "limit": 3})
    rest = repo.preview("evals", p["confirm_token"], after=p["next_cursor"])
    assert [c["id"] for c in rest["proposed"]["added_cases"]] == added[3:]
    assert rest["next_cursor"] is None and rest["stale"] is False
    # what stays the same on every page: token, counts, digests, the id lists
    same = ("confirm_token", "base_version", "changes")
    assert {k: rest[k] for k in same} == {k: p[k] for k in same}
    assert {k: v for k, v in rest["proposed"].items() if not k.endswith("_cases")} == {
        k: v for k, v in p["proposed"].items() if not k.endswith("_cases")}
    # pages of one walk the cases the full page describes, each once
    one, after, walked = None, None, []
    while one is None or one["next_cursor"] is not None:
        one = repo.preview("evals", p["confirm_token"], after=after, limit=1)
        walked += one["proposed"]["added_cases"]
        after = one["next_cursor"]
    assert walked == repo.preview("evals", p["confirm_token"], limit=10)["proposed"]["added_cases"]
    assert [c["run_id"] for c in walked] and {c["run_id"] for c in walked} == set(runs)


def test_a_preview_read_back_after_the_head_moved_is_stale(staged):
    repo, anns = staged
    old = repo.promote("evals", [subject("r-0", anns["r-0"])], "k-old")
    promote_and_seal(repo, anns, ["r-1"], "k-new")
    p = repo.preview("evals", old["confirm_token"])
    assert p["stale"] is True and "new idempotency key" in p["restage"]
    removal = repo.remove("evals", repo.items("evals", 1).items, "k-rm")
    shown = repo.preview("evals", removal["confirm_token"])
    assert [c["id"] for c in shown["proposed"]["removed_cases"]] == removal["proposed"]["removed"]
    assert shown["proposed"]["removed_cases"][0]["run_id"] == "r-1"


@pytest.mark.parametrize("kwargs, error, reason", [
    ({"limit": 0}, cas.InvalidArgument, "BAD_LIMIT"),
    ({"limit": 10_001}, cas.InvalidArgument, "BAD_LIMIT"),
    ({"limit": True}, cas.InvalidArgument, "BAD_LIMIT"),
    ({"after": "r-0"}, cas.InvalidArgument, None),
    ({"token": "ct-" + "0" * 32}, cas.NotFound, "PROPOSAL_NOT_FOUND"),
])
def test_preview_refuses_a_bad_page_or_token_and_stores_nothing(staged, kwargs, error, reason):
    repo, anns = staged
    p = repo.promote("evals", [subject("r-0", anns["r-0"])], "k")
    before = keys(repo)
    kwargs = dict(kwargs)  # (the parameters are shared by both backends' runs)
    token = kwargs.pop("token", p["confirm_token"])
    with pytest.raises(error) as info:
        repo.preview("evals", token, **kwargs)
    assert reason is None or info.value.reason == reason
    assert keys(repo) == before


# -- staging many runs (issue 37: memory that grew with the runs) --------------------------------
def _trace(monkeypatch) -> list[str]:
    """What staging does, in order: "run" each time a run is read whole, "case" each time a
    case reaches the pack writer."""
    from cas.format.records import RunRecord
    from cas.storage.store import ObjectStore, PackWriter
    events: list[str] = []
    get, add = ObjectStore.get, PackWriter.add_encoded

    def traced_get(self, digest, type_=None):
        obj = get(self, digest, type_)
        if isinstance(obj, RunRecord):
            events.append("run")
        return obj

    def traced_add(self, kind, *args, **kwargs):
        if kind == "case":
            events.append("case")
        return add(self, kind, *args, **kwargs)
    monkeypatch.setattr(ObjectStore, "get", traced_get)
    monkeypatch.setattr(PackWriter, "add_encoded", traced_add)
    return events


@pytest.mark.parametrize("by", ["selection", "subjects"])
def test_each_run_is_read_once_and_its_case_stored_before_the_next_is_read(mem, monkeypatch,
                                                                           by):
    """Staging holds one frozen case at a time, not every case's bytes until the end (50k
    runs held 95 MiB of them); every subject is checked first, so a refusal reads no run."""
    mem.import_runs(io.BytesIO(jsonl(*(run_obj(f"r-{i}", i) for i in range(5)))))
    anns = {f"r-{i}": review(mem, f"r-{i}") for i in range(5)}
    mem.create_dataset("evals")
    events = _trace(monkeypatch)
    if by == "selection":
        p = mem.promote_reviewed("evals", "k")
    else:
        p = mem.promote("evals", [subject(r, a) for r, a in anns.items()], "k")
    assert p["proposed"]["added_count"] == 5
    assert events == ["run", "case"] * 5
    # the same request again returns its proposal without freezing anything anew
    events.clear()
    again = mem.promote_reviewed("evals", "k") if by == "selection" else \
        mem.promote("evals", [subject(r, a) for r, a in anns.items()], "k")
    assert again["confirm_token"] == p["confirm_token"] and events == []
    # a subject refused last: no run was read, nothing stored
    before = keys(mem)
    with pytest.raises(cas.NotFound):
        mem.promote("evals", [subject(r, a) for r, a in anns.items()]
                    + [subject("r-0", "ann-" + "0" * 32)], "k2")
    assert events == [] and keys(mem) == before


def test_cases_already_in_the_base_are_not_stored_again_and_carry_no_provenance(staged,
                                                                                 monkeypatch):
    repo, anns = staged
    promote_and_seal(repo, anns, ["r-0", "r-1"], "k-1")
    events = _trace(monkeypatch)
    p = repo.promote("evals", [subject(r, anns[r]) for r in ("r-1", "r-0", "r-2")], "k-2")
    assert p["proposed"]["added_count"] == 1 and p["proposed"]["carried_count"] == 2
    assert events == ["run", "run", "run", "case"]
    v = repo.seal("evals", p["confirm_token"]).version
    assert [e.run_id for e in repo.context.store.get(v.provenance).entries] == ["r-2"]
    assert set(repo.items("evals", 2).items) == set(repo.items("evals", 1).items) | \
        set(p["proposed"]["added"])


def test_a_run_erased_after_the_selection_is_refused_and_nothing_is_saved(judged, monkeypatch):
    """The runs are read under the staging's lease; one an erasure removed since the selection
    read the logs is refused as `require_runs` refuses it (it was checked there before)."""
    from cas.repo import erasure
    from support.lifecycle import OPERATOR, PERSON
    repo, _ = judged
    writing = promotion.leases.writing

    def erase_first(ctx, operation):  # (between the selection and the staging's lease)
        monkeypatch.setattr(promotion.leases, "writing", writing)
        monkeypatch.setenv("CAS_USER", OPERATOR)
        token = erasure.erase(ctx, PERSON)["confirm_token"]
        erasure.erase(ctx, PERSON, token)
        return writing(ctx, operation)
    monkeypatch.setattr(promotion.leases, "writing", erase_first)
    before = [k for k in keys(repo) if k.startswith("datasets/")]
    err = refused(lambda: repo.promote_reviewed("evals", "k"), "NOT_FOUND", "RUN_NOT_FOUND")
    assert "is no longer stored (an erasure removed it since it was read)" in err.message
    assert [k for k in keys(repo) if k.startswith("datasets/")] == before


# -- more than one reviewer (issue 36) ----------------------------------------------------------
GRACE, HAL = "Grace <grace@example.com>", "Hal <hal@example.com>"


def _as(monkeypatch, who):
    monkeypatch.setenv("CAS_USER", who)


def test_two_reviewers_unanimous_admit_a_run_and_the_provenance_names_both(
        mem, monkeypatch):
    mem.import_runs(io.BytesIO(jsonl(*(run_obj(f"r-{i}", i) for i in range(3)))))
    mem.create_dataset("evals")
    mem.set_eligibility(reviewers=2, rule="unanimous")
    one = mem.review("r-0", "dataset_eligibility", "reviewed")["annotation_ids"][0]
    mem.review("r-1", "dataset_eligibility", "reviewed")
    mem.review("r-2", "dataset_eligibility", "reviewed")
    _as(monkeypatch, GRACE)
    two = mem.review("r-0", "dataset_eligibility", "accepted")["annotation_ids"][0]
    mem.review("r-1", "dataset_eligibility", "rejected")  # unanimous: r-1 is out
    _as(monkeypatch, REVIEWER)
    before = keys(mem)
    with pytest.raises(cas.FailedPrecondition) as info:  # a subject naming one judgment
        mem.promote("evals", [subject("r-0", one)], "k-1")
    assert info.value.reason == "REVIEWERS_REQUIRED"
    assert "2 different reviewers' newest judgments" in info.value.message
    assert "rule unanimous" in info.value.message
    assert keys(mem) == before
    with pytest.raises(cas.FailedPrecondition) as info:  # r-1: Grace rejects it
        mem.promote_reviewed("evals", "k-2", run_ids=["r-1"])
    assert info.value.reason == "REVIEW_NOT_ACCEPTED" and info.value.fields["reviewers"] == 2
    with pytest.raises(cas.FailedPrecondition) as info:  # r-2: one reviewer so far
        mem.promote_reviewed("evals", "k-3", run_ids=["r-2"])
    assert info.value.reason == "REVIEWERS_REQUIRED"
    staged = mem.promote_reviewed("evals", "k-4")
    [judged] = staged["subjects"]
    assert judged["run_id"] == "r-0" and judged["annotation_id"] == two  # the newest
    assert {a["annotation_id"] for a in judged["admitted_by"]} == {one, two}
    by_file = mem.promote("evals", [dict(subject("r-0", one), review_annotation_ids=[two])],
                          "k-5")
    assert by_file["proposed"]["content_digest"] == staged["proposed"]["content_digest"]
    mem.seal("evals", staged["confirm_token"])
    [entry] = mem.provenance("evals", 1)
    assert entry.annotation_id == two and entry.admitted_by == sorted([one, two])
    assert [p for p in mem.fsck().problems if p.severity == "error"] == []


def test_majority_counts_each_reviewers_newest_judgment_once(mem, monkeypatch):
    mem.import_runs(io.BytesIO(jsonl(run_obj("r-0"))))
    mem.create_dataset("evals")
    mem.set_eligibility(reviewers=2, rule="majority")
    for who, label in ((REVIEWER, "reviewed"), (GRACE, "rejected"), (HAL, "accepted")):
        _as(monkeypatch, who)
        mem.review("r-0", "dataset_eligibility", label)
    assert [s.subject_ref for s in promotion.reviewed_subjects(mem.context)] == ["r-0"]
    _as(monkeypatch, HAL)
    mem.review("r-0", "dataset_eligibility", "needs-work")  # Hal changes his mind: 1 against 2
    with pytest.raises(cas.FailedPrecondition) as info:
        promotion.reviewed_subjects(mem.context)
    assert info.value.reason == "NO_ACCEPTED_RUNS"


class _R(msgspec.Struct, frozen=True):
    reviewer: str
    label: str
    reviewed_at: str
    annotation_id: str


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from(["ok", "no", "meh"])),
                max_size=10),
       st.integers(1, 4), st.sampled_from(["unanimous", "majority"]))
def test_admission_follows_the_rules_definition(judgments, k, rule):
    """admission() against a brute-force reading of the rule: each reviewer's last judgment;
    K accepting ones, and none against (unanimous) or more for than against (majority)."""
    from cas.format.records import Eligibility
    rules = Eligibility(revision=1, metric="m", accepted=["ok"], author="", edited_at="",
                        reviewers=k, rule=rule)
    reviews = [_R(who, label, f"2026-01-01T00:00:{i:02d}Z", f"ann-{i:032x}")
               for i, (who, label) in enumerate(judgments)]
    last = {}
    for who, label in judgments:
        last[who] = label
    yes = sum(1 for x in last.values() if x == "ok")
    no = len(last) - yes
    eligible = yes >= k and (no == 0 if rule == "unanimous" else yes > no)
    if k == 1 and rule == "unanimous":  # one reviewer: the newest judgment by anyone decides
        eligible = bool(judgments) and judgments[-1][1] == "ok"
    admitting, why = promotion.admission(rules, reversed(reviews))  # (order does not matter)
    assert (why is None) == eligible
    if eligible and not (k == 1 and rule == "unanimous"):
        assert sorted(r.reviewer for r in admitting) == sorted(
            w for w, x in last.items() if x == "ok")
