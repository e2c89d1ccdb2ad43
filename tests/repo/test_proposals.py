"""Staged proposals as stored (cas/repo/proposals.py): read by confirm token, the version a
token sealed, and the deletion of a proposal with the idempotency claim naming it."""

from __future__ import annotations

import pytest

import cas
from cas.format import keys
from cas.repo import proposals
from support.lifecycle import keys as listing
from support.lifecycle import subject

pytestmark = pytest.mark.usefixtures("as_reviewer")


@pytest.fixture
def preview(staged):
    repo, anns = staged
    return repo, repo.promote("evals", [subject("r-0", anns["r-0"])], "k-1")


def test_a_proposal_is_read_by_its_token(preview):
    repo, p = preview
    token = p["confirm_token"]
    stored = proposals.load_proposal(repo.context, "evals", token)
    assert (stored.dataset, stored.operation, stored.base, stored.idempotency_key) == \
        ("evals", "promote", 0, "k-1")
    assert stored.add == p["proposed"]["added"]


@pytest.mark.parametrize("token, error", [("ct-" + "0" * 32, cas.NotFound),
                                          ("ct-../x", cas.InvalidArgument),
                                          (None, cas.InvalidArgument)])
def test_an_unknown_or_malformed_token_is_refused(preview, token, error):
    repo, _ = preview
    with pytest.raises(error) as info:
        proposals.load_proposal(repo.context, "evals", token)
    if error is cas.NotFound:
        assert info.value.reason == "PROPOSAL_NOT_FOUND"
    else:
        assert "is not a confirm token (ct- and 32 hex digits)" in info.value.message


def test_the_version_a_token_sealed(preview):
    repo, p = preview
    token = p["confirm_token"]
    assert proposals.sealed_by(repo.context, "evals", 0, token) is None
    version = repo.seal("evals", token).version
    assert proposals.sealed_by(repo.context, "evals", 0, token) == version
    assert proposals.sealed_by(repo.context, "evals", 0, "ct-" + "1" * 32) is None
    assert proposals.sealed_by(repo.context, "evals", 1, token) is None  # not built on 1


def test_deleting_a_proposal_deletes_its_claim_first(preview):
    repo, p = preview
    token = p["confirm_token"]
    key = keys.proposal_key("evals", token)
    claim = keys.idempotency_key("evals", "k-1")
    stored = proposals.load_proposal(repo.context, "evals", token)
    assert repo.backend.exists(claim)
    assert proposals.delete_proposal(repo.context, key, stored) is True
    assert not repo.backend.exists(key) and not repo.backend.exists(claim)
    assert proposals.delete_proposal(repo.context, key, stored) is False  # already gone
    # the same request stages anew, under the same key
    again = repo.promote("evals", [subject("r-0", p["subjects"][0]["annotation_id"])], "k-1")
    assert again["confirm_token"] == token and repo.backend.exists(key)


def test_a_damaged_proposal_is_deleted_without_its_claim(preview):
    repo, p = preview
    key = keys.proposal_key("evals", p["confirm_token"])
    before = listing(repo)
    assert proposals.delete_proposal(repo.context, key, None) is True
    assert sorted(set(before) - set(listing(repo))) == [key]  # the claim is left for fsck
