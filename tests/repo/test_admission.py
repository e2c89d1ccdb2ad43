"""A dataset's admission rule: `reviewed` (the default: only promotion adds cases) or `direct`
(commits may add cases, each recorded with its author; a case naming a person is found by an
erasure like a promoted one). Datasets created before the rule existed read as direct."""

from __future__ import annotations

import io
import json

import msgspec
import pytest

import cas
from cas.format import encoding
from cas.errors import CasError, CorruptData
from cas.format.keys import meta_key, version_key
from cas.format.records import DatasetRecord, Provenance, format_record_file, parse_record_file
from support.lifecycle import jsonl, keys, promote_and_seal, review, run_obj


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


def test_a_directly_committed_case_naming_a_person_is_erased_like_a_promoted_one(mem):
    mem.create_dataset("gold", admission="direct")
    mem.commit("gold", base=None, add=[{"input": "mine", "person": "p-1"},
                                       {"input": "other"}])
    preview = mem.erase("p-1")
    assert preview["matched"] is True
    mem.erase("p-1", preview["confirm_token"])
    assert mem.version_state("gold", 1) == "RETIRED"
    everything = b"".join(mem.backend.get(k) for k in keys(mem))
    assert b"mine" not in everything and b"p-1" not in everything
    assert mem.fsck().ok


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


def test_cli_admission(run, tmp_path):
    assert run("init").exit_code == 0
    r = run("dataset", "create", "evals")
    assert r.stdout == ("created dataset evals (admission reviewed: only promotion of "
                        "reviewed runs adds cases)\n")
    (tmp_path / "cases.jsonl").write_text('{"input": 1}\n')
    r = run("--json", "commit", "evals", "--add", "cases.jsonl")
    assert r.exit_code == 5
    assert json.loads(r.stderr)["error"]["reason"] == "ADMISSION_REVIEWED_ONLY"
    assert run("dataset", "create", "gold", "--admission", "direct").exit_code == 0
    assert run("commit", "gold", "--add", "cases.jsonl").exit_code == 0
    shown = run("dataset", "show", "gold").stdout.splitlines()
    assert shown[1] == "  admission: direct (commits may add cases, as promotion does)"
    data = json.loads(run("--json", "dataset", "show", "evals").stdout)
    assert data["dataset"]["admission"] == "reviewed"
    r = run("dataset", "create", "x", "--admission", "open")
    assert r.exit_code == 2 and "'reviewed', 'direct'" in r.stderr


def test_fsck_reports_an_unknown_or_changed_admission_rule(mem):
    mem.create_dataset("evals")
    changed = DatasetRecord(name="evals", revision=2, author="a", edited_at="t",
                            admission="direct")
    assert mem.refs.append_meta(changed)
    [problem] = [p for p in mem.fsck().problems if p.severity == "error"]
    assert problem.where == meta_key("evals", 2)
    assert "differs from the one the dataset was created with ('reviewed')" in problem.message
    mem.refs.append_meta(DatasetRecord(name="bogus", revision=1, author="a", edited_at="t",
                                       admission="open"))
    assert any("admission 'open' is not a rule; known: reviewed, direct" in p.message
               for p in mem.fsck().problems)
