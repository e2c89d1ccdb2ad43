"""Sealing (cas/repo/sealing.py): `commit` seals version base+1 from its base under the
dataset's admission rule (a reviewed dataset takes only removals; a direct one records each
committed case's author in the version's provenance), never reusing a number."""

from __future__ import annotations

import io

import msgspec
import pytest

import cas
from cas.errors import CasError, CorruptData
from cas.format import encoding
from cas.format import records as objects
from cas.format.keys import version_key
from cas.format.records import Provenance, format_record_file
from cas.storage.backends.memory import MemoryBackend
from support.lifecycle import jsonl, keys, promote_and_seal, review, run_obj
from support.sample_cases import case_id, read_all_items


def refused(call, code: str, reason: str) -> CasError:
    with pytest.raises(CasError) as info:
        call()
    assert (info.value.code, info.value.reason) == (code, reason), info.value.to_json()
    return info.value


def test_a_reviewed_dataset_refuses_added_cases_and_stores_nothing(mem):
    record = mem.create_dataset("evals")
    assert (record.admission, record.admits) == ("reviewed", "reviewed")
    before = keys(mem)
    err = refused(lambda: mem.commit("evals", base=None, add=[{"input": 1}]),
                  "FAILED_PRECONDITION", "ADMISSION_REVIEWED_ONLY")
    assert "--admission direct" in str(err) and err.to_json()["admission"] == "reviewed"
    # a generator is refused on its first case, before any is stored
    refused(lambda: mem.commit("evals", base=None, add=({"input": i} for i in range(3))),
            "FAILED_PRECONDITION", "ADMISSION_REVIEWED_ONLY")
    assert keys(mem) == before


def test_a_reviewed_dataset_takes_promotions_and_commits_that_only_remove(mem, as_reviewer):
    mem.import_runs(io.BytesIO(jsonl(run_obj("r-1", 1), run_obj("r-2", 2))))
    anns = {r: review(mem, r) for r in ("r-1", "r-2")}
    mem.create_dataset("evals")
    _, sealed = promote_and_seal(mem, anns, ["r-1", "r-2"], "k1")
    first = mem.items("evals", 1).items[0]
    v2 = mem.commit("evals", base=1, remove=[first], message="drop one")
    assert (v2.item_count, v2.removed, v2.provenance) == (1, 1, None)
    assert mem.edit_dataset("evals", description="x").admits == "reviewed"  # fixed for ever


def test_a_direct_dataset_records_each_committed_cases_author(mem):
    mem.create_dataset("gold", admission="direct")
    v1 = mem.commit("gold", base=None, add=[{"input": "a"}, {"input": "b"}],
                    author="Bo <bo@example.com>")
    entries = mem.provenance("gold", 1)
    assert sorted(e.case_id for e in entries) == mem.items("gold", 1).items
    assert {(e.committed_by, e.promoted, e.run_id) for e in entries} == {
        ("Bo <bo@example.com>", False, msgspec.UNSET)}
    # the author is in the version's provenance, never in the case bytes: ids do not change
    assert mem.items("gold", 1).items == sorted(cas.encode_case({"input": x}).case_id
                                                for x in "ab")
    assert [c.run_id for c in mem.items_detailed("gold", 1).items] == [None, None]
    assert v1.provenance is not None and mem.fsck().ok


def test_a_first_commit_names_its_author_once_however_many_cases_it_holds(mem):
    mem.create_dataset("gold", admission="direct")
    cases = [{"input": f"case {i}"} for i in range(300)]
    v1 = mem.commit("gold", base=None, add=cases, author="Bo <bo@example.com>")
    stored = mem.context.store.get(v1.provenance, Provenance)
    assert (stored.entries, stored.committed_by) == ([], "Bo <bo@example.com>")
    assert len(encoding.encode(stored)) < 100  # not one entry per case
    ids = sorted(cas.encode_case(c).case_id for c in cases)
    assert [(e.case_id, e.committed_by, e.promoted) for e in mem.provenance("gold", 1)] == [
        (c, "Bo <bo@example.com>", False) for c in ids]
    # a later commit lists exactly the cases it adds, each with its author
    new = cas.encode_case({"input": "late"}).case_id
    v2 = mem.commit("gold", base=1, add=[cases[0], {"input": "late"}], author="Cy <cy@x.org>")
    later = mem.context.store.get(v2.provenance, Provenance)
    assert later.committed_by is msgspec.UNSET
    assert [(e.case_id, e.committed_by) for e in mem.provenance("gold", 2)] == [
        (new, "Cy <cy@x.org>")]
    assert mem.fsck().ok


def test_the_first_commits_form_of_provenance_on_a_later_version_is_reported(mem):
    mem.create_dataset("gold", admission="direct")
    v1 = mem.commit("gold", base=None, add=[{"input": "a"}])
    v2 = mem.commit("gold", base=1, add=[{"input": "b"}])
    forged = msgspec.structs.replace(v2, provenance=v1.provenance)  # "committed every case"
    mem.backend.replace(version_key("gold", 2), format_record_file(forged))
    with pytest.raises(CorruptData, match="has a parent"):
        mem.provenance("gold", 2)
    report = mem.fsck()
    assert not report.ok
    assert any("has a parent (1)" in p.message for p in report.problems), report.problems
    assert mem.provenance("gold", 1)[0].committed_by  # the first version still reads




@pytest.fixture
def repo():
    r = cas.Repository.create(MemoryBackend())
    r.create_dataset("ds", description="first", tags=["b", "a"], author="ann", admission="direct")
    return r


@pytest.mark.parametrize("base", [-1, "1", 1.0])
def test_invalid_base_refused(repo, base):
    with pytest.raises(cas.InvalidArgument):
        repo.commit("ds", base=base, add=[{"input": 1}])
    assert repo.head("ds") == 0


@pytest.mark.parametrize("value, path", [
    (float("nan"), "$.input"),
    ({"x": [1, float("inf")]}, "$.input.x[1]"),
    ({"k": {"deep": [0, {"z": -float("inf")}]}}, "$.input.k.deep[1].z"),
    ({1: "int key"}, "$.input"),
    ({"s": "\ud800"}, "$.input.s"),
])
def test_commit_with_invalid_json_refused_and_nothing_stored(repo, value, path):
    repo.commit("ds", base=None, add=[{"input": "ok"}])
    before = sorted(repo.backend.list(""))
    cases = [{"input": "fine"}, {"input": value}, {"input": "after"}]
    with pytest.raises(cas.InvalidJSONValue) as info:
        repo.commit("ds", base=1, add=cases)
    assert info.value.path == path
    assert path in info.value.message
    assert info.value.code == "INVALID_ARGUMENT"
    assert sorted(repo.backend.list("")) == before
    assert repo.head("ds") == 1
    # The valid cases sent alongside were not stored either.
    with pytest.raises(cas.NotFound):
        repo.object(case_id({"input": "fine"}))


def test_nan_in_steps_names_the_step(repo):
    with pytest.raises(cas.InvalidJSONValue) as info:
        repo.commit("ds", base=None,
                    add=[{"steps": [{}, {}, {}, {"arguments": {"x": float("nan")}}]}])
    assert info.value.path == "$.steps[3].arguments.x"


def test_same_case_is_one_case_id(repo):
    a = {"input": {"q": 1, "r": [1, 2]}, "output": "x"}
    a_reordered = {"output": "x", "input": {"r": [1, 2], "q": 1}}
    cid = case_id(a)
    assert case_id(a_reordered) == cid
    assert cas.encode_case(msgspec.convert(a, cas.Case)).case_id == cid
    v1 = repo.commit("ds", base=None, add=[a, a_reordered, a])
    assert (v1.item_count, v1.added) == (1, 1)
    assert repo.items("ds", 1).items == [cid]
    # Adding it again in a later commit changes nothing about it: same id, still one member.
    v2 = repo.commit("ds", base=1, add=[a_reordered, {"input": "other"}])
    assert (v2.item_count, v2.added) == (2, 1)
    assert cid in repo.items("ds", 2).items
    assert repo.diff("ds", 1, 2) == cas.Diff([case_id({"input": "other"})], [])
    # Alone, it is no change at all.
    with pytest.raises(cas.FailedPrecondition):
        repo.commit("ds", base=2, add=[a])
    # Stored once: exactly two case objects in the whole repository.
    report = repo.fsck()
    assert report.ok
    case_objects = [e for idx in repo.store.indexes()
                    for e in cas.storage.store.packfmt.parse_index(repo.backend.get(idx.key))[1]
                    if e.kind == objects.KIND_CODES["case"]]
    assert len(case_objects) == 2


def test_add_and_remove_same_case_refused(repo):
    repo.commit("ds", base=None, add=[{"input": 1}])
    with pytest.raises(cas.InvalidArgument):
        repo.commit("ds", base=1, add=[{"input": 1}], remove=[case_id({"input": 1})])


def test_remove_everything_then_read(repo):
    repo.commit("ds", base=None, add=[{"input": i} for i in range(100)])
    ids = read_all_items(repo, "ds", 1, 33)
    assert len(ids) == 100
    v2 = repo.commit("ds", base=1, remove=ids)
    assert (v2.item_count, v2.removed, v2.added) == (0, 100, 0)
    assert repo.items("ds", 2) == cas.ItemsPage([], None)
    assert repo.diff("ds", 2, 1) == cas.Diff(ids, [])
    assert repo.fsck().ok


def test_commit_writes_no_unreferenced_objects(repo):
    repo.commit("ds", base=None, add=[{"input": i} for i in range(90)])
    repo.commit("ds", base=1, remove=repo.items("ds", 1, limit=30).items)  # 60 left: folds
    assert repo.fsck().problems == []
