"""Retirement (cas/repo/retirement.py): an operator retires a version with a cause and a note; the
version record never changes, the first retirement stands, and the set can be sealed again as
a new, active version. Runs on both backends. (Retirement by an erasure: test_erasure.py.)"""

from __future__ import annotations

import pytest

import cas
from support.erasure_world import all_items, build, remove
from support.lifecycle import OPERATOR

pytestmark = pytest.mark.usefixtures("as_operator")


def test_operator_retirement(repo):
    build(repo)
    record = repo.version("billing", 2)
    before = {k: repo.backend.get(k) for k in repo.backend.list("")
              if not k.startswith("datasets/billing/retired/")}
    r = repo.retire("billing", 2, "contaminated", "cases appeared in the model-9 training mix")
    assert (r.cause, r.note, r.author) == ("CONTAMINATED", "cases appeared in the model-9 "
                                           "training mix", OPERATOR)
    # it deletes nothing and changes no other file
    after = {k: repo.backend.get(k) for k in repo.backend.list("")}
    assert {k: v for k, v in after.items() if k in before} == before
    assert set(after) - set(before) == {"datasets/billing/retired/0000000002"}
    assert repo.version("billing", 2) == record
    for cause in ("Invalid_Labels", "OPERATOR_REQUEST"):
        with pytest.raises(cas.FailedPrecondition) as info:
            repo.retire("billing", 2, cause, "again")
        assert info.value.reason == "VERSION_ALREADY_RETIRED"
    assert repo.retirement("billing", 2).cause == "CONTAMINATED"  # the first cause stands
    for cause, reason in (("PERSON_ERASED", "CAUSE_RESERVED"), ("person_erased", "CAUSE_RESERVED"),
                          ("LEAKED", "CAUSE_INVALID"), ("", "CAUSE_INVALID")):
        with pytest.raises(cas.InvalidArgument) as info:
            repo.retire("billing", 1, cause, "why")
        assert info.value.reason == reason and "OPERATOR_REQUEST" in info.value.message
    with pytest.raises(cas.InvalidArgument) as info:
        repo.retire("billing", 1, "invalid_labels", "  ")
    assert info.value.reason == "NOTE_REQUIRED"
    with pytest.raises(cas.NotFound):
        repo.retire("billing", 9, "OPERATOR_REQUEST", "no such version")
    assert repo.version_state("billing", 1) == "ACTIVE"
    # an empty removal re-seals the same set as a new, active version
    recut = remove(repo, "billing", [], "recut")
    assert (recut.number, recut.content_digest) == (3, record.content_digest)
    assert repo.version_state("billing", 3) == "ACTIVE"
    assert len(all_items(repo, "billing", 3)) == 3
    assert repo.fsck().ok
