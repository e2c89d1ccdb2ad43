"""What a reader does with the states docs/format.md names but no writer of cas leaves for good
(section 12, "Resolved ambiguities"): an override of a dataset that never existed (4.7.4), a
person table whose pack is gone (8.3), and a non-key path in the repository (section 5)."""

from __future__ import annotations

import os

import msgspec
import pytest

import cas
from cas.format.keys import person_table_key, settings_key
from cas.format.records import Settings, format_record_file
from cas.storage.person_index import format_table

pytestmark = pytest.mark.usefixtures("as_operator")


def test_an_override_of_a_dataset_that_never_existed_is_kept_and_applies_later(mem):
    """4.7.4: valid (a notice in fsck, never damage), and in force for a dataset later made."""
    record = Settings(revision=1, withheld=["input"], author="a",
                      edited_at="2026-11-30T12:00:00.000000Z", dataset="later")
    assert mem.backend.put_if_absent(settings_key(1), format_record_file(record))
    report = cas.Repository(mem.backend).fsck()
    mine = [p for p in report.problems if p.where == settings_key(1)]
    assert [p.severity for p in mine] == ["notice"], report.problems
    assert not [p for p in report.problems if p.severity == "error"], report.problems
    mem.create_dataset("later")
    policy = mem.content_policy("later")
    assert policy.withheld == ["input"] and policy.source.dataset == "later"
    assert mem.content_policy().withheld == [] and mem.settings() is None


def test_a_person_table_whose_pack_is_gone_is_a_notice_and_names_nothing(mem):
    """8.3: not damage; an erasure reads it and finds nothing to delete through it."""
    person = "p-1"
    keyed = mem.context.store.person_digest(person)
    pid = "5" * 64
    data, shards = format_table(pid, {bytes(32): [keyed]})
    key = person_table_key(pid, shards)
    assert mem.backend.put_if_absent(key, data)
    report = cas.Repository(mem.backend).fsck()
    mine = [p for p in report.problems if p.where == key]
    assert [p.severity for p in mine] == ["notice"] and "gone" in mine[0].message, mine
    assert not [p for p in report.problems if p.severity == "error"], report.problems
    preview = mem.erase(person)
    assert preview["cases"] == preview["runs"] == [] and preview["matched"] is False


def test_a_non_key_path_is_ignored_by_readers_and_an_error_in_fsck(tmp_path):
    """Section 5: a file no family claims, valid key or not, holds no record: reads ignore it,
    fsck reports each as an unexpected key."""
    repo = cas.init(str(tmp_path))
    repo.create_dataset("alpha")
    root = repo.backend.root
    paths = ["stray.txt", "my notes.txt", os.path.join("datasets", "café", "x"),
             os.path.join("datasets", "readme")]
    for path in paths:
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write("not a record")
    again = cas.open(str(tmp_path))
    assert again.datasets() == ["alpha"]
    report = again.fsck()
    errors = {p.where for p in report.problems if p.severity == "error"}
    assert {p.replace(os.sep, "/") for p in paths} <= errors, report.problems


def test_a_pending_plan_whose_versions_are_not_retired_refuses_what_it_names(mem):
    """4.8.3: an erasure in progress, not damage. Its versions are ACTIVE until retired, what
    the plan names is refused (ERASURE_PENDING), and the next write completes it, retiring
    every version holding one of its cases."""
    from cas.format.keys import pending_key
    from cas.repo import erasure
    from support.erasure_world import ALICE, RETIRED, build, case_of
    build(mem)
    case_id = case_of(mem, "support", 3, "alice-run-1")
    _, plan = erasure.preview(mem.context, ALICE)
    plan = msgspec.structs.replace(plan, author="a", started_at="2026-11-30T12:00:00.000000Z")
    assert mem.backend.put_if_absent(pending_key(plan.id), format_record_file(plan))
    reader = cas.Repository(mem.backend)
    assert {reader.version_state(n, v) for n, v in RETIRED} == {"ACTIVE"}
    with pytest.raises(cas.FailedPrecondition) as info:
        reader.case("support", 3, case_id)
    assert info.value.reason == "ERASURE_PENDING"
    report = reader.fsck()
    assert any(p.where == pending_key(plan.id) and p.severity == "notice"
               for p in report.problems), report.problems
    assert not [p for p in report.problems if p.severity == "error"], report.problems
    reader.create_dataset("after")  # a write: it completes the erasure first
    assert {reader.version_state(n, v) for n, v in RETIRED} == {"RETIRED"}
    assert [e.id for e in reader.erasures()] == [plan.id]
