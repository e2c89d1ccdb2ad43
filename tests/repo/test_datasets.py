"""Datasets (cas/repo/datasets.py): creation with an admission rule fixed for ever, metadata
revisions, heads, exact versions and pages of versions; a deleted name is never used again."""

from __future__ import annotations

import msgspec
import pytest

import cas
from cas.errors import CasError
from cas.format.keys import meta_key
from cas.format.records import DatasetRecord, parse_record_file
from cas.repo import datasets
from cas.storage.backends.memory import MemoryBackend
from support.sample_cases import case_id


def refused(call, code: str, reason: str) -> CasError:
    with pytest.raises(CasError) as info:
        call()
    assert (info.value.code, info.value.reason) == (code, reason), info.value.to_json()
    return info.value


def test_a_dataset_created_before_the_rule_reads_as_direct(mem):
    # the record as an older cas wrote it: no admission field (the vector's bytes)
    old = DatasetRecord(name="legacy", revision=1, author="a", edited_at="t")
    assert b"admission" not in cas.format.encoding.encode(old)
    assert mem.refs.append_meta(old)
    stored = parse_record_file(mem.backend.get(meta_key("legacy", 1)), DatasetRecord, "m")
    assert (stored.admission, stored.admits) == (msgspec.UNSET, "direct")
    mem.commit("legacy", base=None, add=[{"input": 1}])
    edited = mem.edit_dataset("legacy", tags=["t"])
    assert edited.admission is msgspec.UNSET  # carried as it was: still canonical, still direct
    assert mem.fsck().ok


@pytest.mark.parametrize("bad", ["Reviewed", "", None, ["direct"]])
def test_an_unknown_admission_rule_is_refused(mem, bad):
    err = refused(lambda: mem.create_dataset("x", admission=bad), "INVALID_ARGUMENT",
                  "ADMISSION_INVALID")
    assert "accepted: reviewed, direct" in str(err)
    assert mem.datasets() == []



@pytest.fixture
def repo():
    r = cas.Repository.create(MemoryBackend())
    r.create_dataset("ds", description="first", tags=["b", "a"], author="ann", admission="direct")
    return r


def test_edit_dataset_keeps_history(repo):
    repo.edit_dataset("ds", description="second", author="bob")
    repo.edit_dataset("ds", tags=["x"], author="cy")
    history = repo.dataset_history("ds")
    assert [(h.revision, h.description, h.tags, h.author) for h in history] == [
        (1, "first", ["a", "b"], "ann"),
        (2, "second", ["a", "b"], "bob"),
        (3, "second", ["x"], "cy"),
    ]
    assert repo.dataset("ds") == history[-1]
    # A fresh handle reads the same history from storage.
    assert cas.Repository(repo.backend).dataset_history("ds") == history
    with pytest.raises(cas.NotFound):
        repo.edit_dataset("nope", description="x")
    with pytest.raises(cas.NotFound):
        repo.dataset_history("nope")


def test_versions_paging_newest_first(repo):
    for i in range(7):
        repo.commit("ds", base=i, add=[{"input": i}])
    page = repo.versions("ds", limit=3)
    assert [v.number for v in page.versions] == [7, 6, 5]
    assert page.next_before == 5
    page = repo.versions("ds", before=page.next_before, limit=3)
    assert [v.number for v in page.versions] == [4, 3, 2]
    assert page.next_before == 2
    page = repo.versions("ds", before=page.next_before, limit=3)
    assert [v.number for v in page.versions] == [1]
    assert page.next_before is None
    # Walking with the default limit gives every version once, newest first.
    seen, before = [], None
    while True:
        page = repo.versions("ds", before=before, limit=2)
        seen += [v.number for v in page.versions]
        if page.next_before is None:
            break
        before = page.next_before
    assert seen == [7, 6, 5, 4, 3, 2, 1]
    assert repo.versions("ds", before=100, limit=2).versions[0].number == 7
    repo.create_dataset("empty", admission="direct")
    assert repo.versions("empty") == cas.VersionsPage([], None)


@pytest.mark.parametrize("name", ["", "Upper", "has space", "-lead", ".lead", "a/b", "a..b",
                                  "x" * 129, 7, None, "caf\u00e9"])
def test_invalid_dataset_name_refused(repo, name):
    for call in (lambda: repo.create_dataset(name, admission="direct"), lambda: repo.dataset(name),
                 lambda: repo.version(name, 1), lambda: repo.items(name, 1)):
        with pytest.raises(cas.InvalidArgument) as info:
            call()
        assert info.value.code == "INVALID_ARGUMENT"
        assert "a-z, 0-9" in info.value.message  # names what is accepted
    assert repo.datasets() == ["ds"]


def test_longest_valid_name_accepted(repo):
    repo.create_dataset("a" * 128, admission="direct")
    assert "a" * 128 in repo.datasets()


@pytest.mark.parametrize("number", [0, -1, 1.0, "1", True, None])
def test_invalid_version_refused(repo, number):
    repo.commit("ds", base=None, add=[{"input": 1}])
    for call in (lambda: repo.version("ds", number), lambda: repo.items("ds", number),
                 lambda: repo.case("ds", number, case_id({"input": 1})),
                 lambda: repo.diff("ds", 1, number)):
        with pytest.raises(cas.InvalidArgument) as info:
            call()
        assert "positive integer" in info.value.message


def test_missing_version_and_dataset_not_found(repo):
    repo.commit("ds", base=None, add=[{"input": 1}])
    with pytest.raises(cas.NotFound):
        repo.version("ds", 2)
    with pytest.raises(cas.NotFound):
        repo.version("other", 1)
    with pytest.raises(cas.NotFound):
        repo.commit("ds", base=5, add=[{"input": 2}])
    with pytest.raises(cas.NotFound):
        repo.commit("other", base=None, add=[{"input": 2}])


@pytest.mark.parametrize("limit", [0, -1, 1.5, "10", None])
def test_invalid_limit_refused(repo, limit):
    repo.commit("ds", base=None, add=[{"input": 1}])
    with pytest.raises(cas.InvalidArgument) as info:
        repo.items("ds", 1, limit=limit)
    assert "positive integer" in info.value.message
    with pytest.raises(cas.InvalidArgument) as info:
        repo.versions("ds", limit=limit)
    assert "positive integer" in info.value.message


@pytest.mark.parametrize("before", [0, -3, "2", 1.5])
def test_invalid_versions_cursor_refused(repo, before):
    repo.commit("ds", base=None, add=[{"input": 1}])
    with pytest.raises(cas.InvalidArgument) as info:
        repo.versions("ds", before=before)
    assert "positive integer" in info.value.message


def test_the_admission_rule_and_the_head(repo):
    assert repo.head("ds") == 0
    assert repo.dataset("ds").admits == "direct"
    assert datasets.admission(repo.context, "ds") == "direct"
    repo.create_dataset("reviewed")
    assert datasets.admission(repo.context, "reviewed") == "reviewed"
    repo.commit("ds", base=None, add=[{"input": 1}])
    repo.commit("ds", base=1, add=[{"input": 2}])
    assert repo.head("ds") == 2 and repo.datasets() == ["ds", "reviewed"]
    with pytest.raises(cas.NotFound) as info:
        datasets.admission(repo.context, "nope")
    assert info.value.message == "no dataset named 'nope'"


def test_live_versions_are_every_version_not_deleted(repo):
    repo.create_dataset("other", admission="direct")
    for n in (1, 2, 3):
        repo.commit("ds", base=n - 1 or None, add=[{"input": n}])
    repo.commit("other", base=None, add=[{"input": 0}])
    repo.retire("ds", 1, "CONTAMINATED", "leaked")  # a retired version is live
    repo.delete_version("ds", 2)
    assert sorted((v.dataset, v.number) for v in datasets.live_versions(repo.context)) == [
        ("ds", 1), ("ds", 3), ("other", 1)]
    assert [v.number for v in repo.versions("ds").versions] == [3, 1]


def test_a_deleted_dataset_is_named_as_deleted_and_its_name_never_used_again(repo):
    repo.delete_dataset("ds")
    with pytest.raises(cas.NotFound) as info:
        repo.dataset("ds")
    assert (info.value.reason, info.value.fields) == ("DATASET_DELETED", {"dataset": "ds"})
    with pytest.raises(cas.AlreadyExists) as info:
        repo.create_dataset("ds")
    assert info.value.reason == "DATASET_DELETED"
    assert "cannot be used again" in info.value.message
    assert repo.datasets() == []


def test_a_dataset_is_created_once(repo):
    with pytest.raises(cas.AlreadyExists) as info:
        repo.create_dataset("ds", admission="direct")
    assert info.value.message == "dataset 'ds' already exists"
