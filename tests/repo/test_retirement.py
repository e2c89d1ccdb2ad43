"""Retirement (cas/repo/retirement.py): an operator retires a version with a cause and a note; the
version record never changes, the first retirement stands, and the set can be sealed again as
a new, active version. Runs on both backends. (Retirement by an erasure: test_erasure.py.)"""

from __future__ import annotations

import msgspec
import pytest

import cas
from cas.format.records import format_record_file
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
    # it deletes nothing and changes no other file; the dataset's own log names it
    after = {k: repo.backend.get(k) for k in repo.backend.list("")}
    assert {k: v for k, v in after.items() if k in before} == before
    meta = f"datasets/billing/meta/{repo.dataset('billing').revision:010d}"
    assert set(after) - set(before) == {"datasets/billing/retired/0000000002", meta}
    assert repo.dataset("billing").retired == [2]
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


def test_losing_an_operators_retirement_record_is_damage_fsck_names(repo):
    """The retirement record alone made a version RETIRED: deleting that one file read as
    ACTIVE again, unnoticed. The dataset's metadata revision names it now (issue 32)."""
    build(repo)
    repo.retire("billing", 1, "INVALID_LABELS", "rubric v1 was wrong")
    repo.edit_dataset("billing", description="edited after")  # a later edit carries it on
    repo.retire("billing", 2, "CONTAMINATED", "in a training crawl")
    assert repo.dataset("billing").retired == [1, 2]
    assert [r.retired or [] for r in repo.dataset_history("billing")][-3:] == [[1], [1], [1, 2]]
    assert repo.fsck().ok
    repo.backend.delete("datasets/billing/retired/0000000002")
    assert repo.version_state("billing", 2) == "ACTIVE"  # what reads see: hence the report
    report = repo.fsck()
    assert not report.ok
    [problem] = [p for p in report.problems if p.severity == "error"]
    assert problem.where == "datasets/billing/retired/0000000002"
    assert "billing@2 was retired by an operator" in problem.message
    assert "cas retire billing@2" in problem.message
    # retiring it again (as the report says) repairs it; the witness is not written twice
    head = repo.dataset("billing").revision
    repo.retire("billing", 2, "CONTAMINATED", "restored after a lost record")
    assert repo.dataset("billing").revision == head and repo.fsck().ok


def test_a_revision_that_drops_a_retired_version_is_damage(repo):
    build(repo)
    repo.retire("billing", 1, "OPERATOR_REQUEST", "superseded")
    current = repo.dataset("billing")
    forged = msgspec.structs.replace(current, revision=current.revision + 1, retired=msgspec.UNSET)
    assert repo.backend.put_if_absent(
        f"datasets/billing/meta/{forged.revision:010d}", format_record_file(forged))
    [message] = [p.message for p in repo.fsck().problems if p.severity == "error"]
    assert message == "no longer names billing@1 as retired, as an earlier revision does (a " \
                      "retirement is for ever)"
