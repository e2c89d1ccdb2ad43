"""Renewal: the successor of a head an erasure retired holds exactly the cases it left; a head
an operator retired, or an ACTIVE head, is refused; a pin's successors follow renewals only."""

from __future__ import annotations

import pytest

import cas
from cas.errors import FailedPrecondition
from support.erasure_world import ALICE, BOB, all_items, build

pytestmark = pytest.mark.usefixtures("as_operator")


def erase(repo, person: str):
    preview = repo.erase(person)
    return repo.erase(person, preview["confirm_token"])


@pytest.fixture
def world(tmp_path):
    repo = cas.init(str(tmp_path))
    ids = build(repo)
    return repo, ids


def test_renew_after_an_erasure_seals_the_cases_it_left(world):
    repo, ids = world
    before = set(all_items(repo, "support", 1))  # bob's two cases, never retired
    erasure = erase(repo, ALICE)
    assert repo.version_state("support", 3) == "RETIRED"
    record = repo.renew("support")
    assert (record.number, record.parent, record.operation) == (4, 3, "renew")
    assert record.message == f"renew after the erasure {erasure.id}"
    kept = set(all_items(repo, "support", 4))
    assert kept.isdisjoint(ids["alice"])
    # support@3 held bob-run-0..2 and alice-run-0..1: the renewal holds bob's three
    assert before < kept and len(kept) == 3
    assert record.removed == 2 and record.added == 0
    assert repo.version("support", 3).item_count - record.item_count == 2
    assert repo.successor("support", 3) == record
    assert repo.renewed_to("support", 3) == record
    assert repo.fsck().problems == []


def test_an_active_head_and_an_operators_retirement_are_refused(world):
    repo, _ = world
    with pytest.raises(FailedPrecondition) as active:
        repo.renew("billing")
    assert active.value.reason == "HEAD_ACTIVE"
    erase(repo, ALICE)
    with pytest.raises(FailedPrecondition) as still_active:  # triage@1 is retired, @3 the head
        repo.renew("triage")
    assert still_active.value.reason == "HEAD_ACTIVE"
    repo.retire("billing", 2, "contaminated", "found in a training crawl")
    heads = {n: repo.head(n) for n in ("billing", "support", "triage")}
    with pytest.raises(FailedPrecondition) as operator:
        repo.renew("billing")
    assert operator.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"
    assert operator.value.fields["retirement_cause"] == "CONTAMINATED"
    assert "cas commit" in operator.value.message
    assert {n: repo.head(n) for n in heads} == heads  # nothing sealed by a refusal
    with pytest.raises(FailedPrecondition) as none:
        repo.renewed_to("billing", 2)
    assert none.value.reason == "NO_SUCCESSOR" and "--to N" in none.value.message


def test_successors_follow_renewals_and_never_a_plain_later_version(world):
    repo, _ = world
    erase(repo, ALICE)
    # support@2 is retired but is not the head: no renewal can be sealed on it
    assert repo.successor("support", 2) is None
    with pytest.raises(FailedPrecondition) as refused:
        repo.renewed_to("support", 2)
    assert refused.value.reason == "NO_SUCCESSOR" and "not the head" in refused.value.message
    with pytest.raises(FailedPrecondition) as unrenewed:
        repo.renewed_to("support", 3)
    assert "cas renew support" in unrenewed.value.message
    fourth = repo.renew("support")
    # an ACTIVE version is its own answer, and has no renewal path
    assert repo.renewal_path("billing", 2) == [] and repo.renewed_to("billing", 1).number == 1
    erase(repo, BOB)  # retires the renewal too (it holds bob's cases)
    assert repo.version_state("support", 4) == "RETIRED"
    fifth = repo.renew("support")
    assert [r.number for r in repo.renewal_path("support", 3)] == [4, 5]
    assert repo.renewed_to("support", 3) == fifth and repo.renewed_to("support", 4) == fifth
    assert fifth.parent == fourth.number and fifth.item_count == 0
    # a later commit is not a successor
    repo.commit("support", base=5, add=[{"input": "new"}])
    assert repo.successor("support", 5) is None
