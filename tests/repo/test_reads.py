"""Reads of an exact version (cas/repo/reads.py): what a page costs in storage requests (a
cold `cas items` page too); readable listings and lookups (cases with their run, tenant and
outcome; a case named by run id or by id prefix; versions with their state). The commands'
exact output: tests/cli/test_datasets_and_versions.py and tests/cli/test_dataset.py."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
import cas.repo.reads as reads
from cas.errors import CasError
from cas.format import encoding
from cas.format import records as objects
from cas.format.keys import meta_key
from cas.storage.backends.memory import MemoryBackend
from support.backends import Counting
from support.lifecycle import keys, promote_and_seal, review
from support.promoted import ADA, case_of, make_gold, promoted_runs


def test_a_cold_page_loads_the_children_it_needs_together():
    """A page of 100 ids of a 100-case version spans the root and its 16 leaves: the leaves a
    page needs are read in one go (two index reads and one pack read), not one by one."""
    backend = MemoryBackend()
    repo = cas.Repository.create(backend)
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=[{"input": i} for i in range(100)])
    expected = repo.items("evals", 1, limit=100).items
    counting = Counting(backend)
    cold = cas.Repository(counting)
    counting.calls.clear()
    page = cold.items("evals", 1, limit=100)
    assert page.items == expected and len(expected) == 100
    # version and retirement records (3), the pack listing and index header (2), the root
    # (3), then the 16 leaves together (3); one by one they were 48 requests
    assert sum(counting.calls.values()) <= 12, counting.calls


def test_a_small_diff_reads_its_changed_paths_a_level_at_a_time():
    """A diff of two versions 6 cases apart in a three-level tree: the changed nodes of both
    versions are read a level at a time (a batch each), not one by one down each of the 6
    paths on each side (a memory backend maps nothing: every index probe is a request)."""
    backend = MemoryBackend()
    repo = cas.Repository.create(backend)
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=[{"input": i} for i in range(5000)])
    gone = [cas.encode_case({"input": i}).case_id for i in (0, 1666, 3333)]  # spread out
    repo.commit("evals", base=1, remove=gone, add=[{"input": f"new {i}"} for i in range(3)])
    expected = repo.diff("evals", 1, 2)
    counting = Counting(backend)
    cold = cas.Repository(counting)
    counting.calls.clear()
    got = cold.diff("evals", 1, 2)
    assert (got.added, got.removed) == (expected.added, expected.removed)
    assert sorted(got.removed) == sorted(gone) and len(got.added) == 3
    assert sum(counting.calls.values()) <= 50, counting.calls  # 45 now; 88 one node at a time


def test_the_head_of_a_dataset_costs_three_storage_calls_locally(tmp_path):
    """`head` (the base a writer builds on): a look for the dataset's first metadata
    revision, one listing of the versions and one look for the newest one's tombstone (it
    made 7 calls; issue 16 asks for 2); a deleted newest version is skipped, and a dataset
    that does not exist is still NOT_FOUND."""
    repo = cas.init(str(tmp_path))
    repo.create_dataset("evals", admission="direct")
    for n in range(3):
        repo.commit("evals", base=n or None, add=[{"input": f"v{n}"}])
    counting = Counting(repo.backend)
    cold = cas.Repository(counting)
    counting.calls.clear()
    assert cold.head("evals") == 3
    assert sum(counting.calls.values()) == 3, counting.calls
    repo.delete_version("evals", 3)
    assert cas.Repository(repo.backend).head("evals") == 2
    repo.create_dataset("empty", admission="direct")
    assert cas.Repository(repo.backend).head("empty") == 0
    with pytest.raises(cas.CasError) as nope:
        cas.Repository(repo.backend).head("nope")
    assert nope.value.code == "NOT_FOUND"
    # A dataset half deleted (its first metadata revision goes first, its versions last) has
    # versions listed but no head.
    repo.backend.delete(meta_key("evals", 1))
    with pytest.raises(cas.CasError) as half:
        cas.Repository(repo.backend).head("evals")
    assert half.value.code == "NOT_FOUND"


def test_a_cold_cas_items_page_reads_the_version_once(tmp_path, monkeypatch):
    """`cas items` on a local repository, a fresh process: the version's record, its dataset
    and its retirement are looked at once (the page carries the record it read; it made
    three more reads of them), and no mapped index is confirmed with a call (each hit is
    read from its pack next). 10 calls for a 100-case version, counted at the backend."""
    from click.testing import CliRunner

    from cas.storage.backends.local import LocalBackend
    from cas_cli.main import cli
    repo = cas.init(str(tmp_path))
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=[{"input": i} for i in range(100)])
    calls = []
    for name in ("get", "get_range", "get_ranges", "exists", "list", "map"):
        def counted(self, key, *args, _real=getattr(LocalBackend, name), _name=name):
            calls.append((_name, key))
            return _real(self, key, *args)
        monkeypatch.setattr(LocalBackend, name, counted)
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "no-config.json"))
    out = CliRunner().invoke(cli, ["--repo", str(tmp_path), "--json", "items", "evals@1"],
                             catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert len(json.loads(out.output)["items"]) == 100
    state = [k for _, k in calls if k.startswith("datasets/")]
    assert state == ["datasets/evals/meta/0000000001", "datasets/evals/versions/0000000001",
                     "datasets/evals/retired/0000000001"], calls
    assert [n for n, k in calls if k.endswith(".idx")] == ["map"], calls
    # the repository's config, the three above, the pack listing, the index mapped, the root
    # and the 16 leaves (a call each: a level at a time), the listing of pending erasures and
    # the page's 100 cases (one call)
    assert len(calls) == 10, calls


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """evals@1..3 promoted from r-1, r-2 and r-3 of three tenants (support.promoted)."""
    return promoted_runs(str(tmp_path), monkeypatch)


_entry_st = st.builds(
    lambda case, run, promoted: objects.ProvenanceEntry(
        case_id=case, run_id=run, annotation_id="ann-1", reviewer=ADA,
        reviewed_at="2026-12-02T00:00:00.000000Z", withheld=["tool_results"])
    if promoted else objects.ProvenanceEntry(case_id=case, committed_by=ADA),
    st.text(min_size=1).map(lambda t: "b3:" + t), st.text(min_size=1), st.booleans())


def test_items_detailed_names_run_tenant_outcome_also_of_carried_cases(repo):
    before = keys(repo)
    page = reads.items_detailed(repo.context, "evals", 2)
    assert [c.case_id for c in page.items] == repo.items("evals", 2).items
    by_run = {c.run_id: c for c in page.items}
    assert set(by_run) == {"r-1", "r-2", "r-3"}
    assert (by_run["r-1"].tenant, by_run["r-1"].outcome) == ("acme", {"status": "success"})
    assert (by_run["r-2"].tenant, by_run["r-2"].outcome) == ("globex", {"status": "failure"})
    assert (by_run["r-3"].tenant, by_run["r-3"].outcome) == ("initech", None)
    first = reads.items_detailed(repo.context, "evals", 2, limit=2)
    assert first.has_more and first.items == page.items[:2]
    rest = reads.items_detailed(repo.context, "evals", 2, after=first.next_cursor)
    assert first.items + rest.items == page.items and not rest.has_more
    assert keys(repo) == before  # reads never write


def test_directly_committed_cases_have_no_run(repo):
    make_gold(repo)
    page = reads.items_detailed(repo.context, "gold", 1)
    assert sorted((c.run_id, c.tenant, c.outcome) for c in page.items
                  if c.tenant) == [(None, "hand", "pass")]
    assert all(c.run_id is None for c in page.items)


def test_a_reviewed_datasets_listing_reads_run_ids_from_the_cases_not_the_provenance(
        repo, monkeypatch):
    anns = {r: review(repo, r) for r in ("r-1", "r-2", "r-3")}
    repo.create_dataset("reviewed")  # only promotions add cases to it
    promote_and_seal(repo, anns, ["r-1", "r-2"], "rk1", name="reviewed")
    promote_and_seal(repo, anns, ["r-3"], "rk2", name="reviewed")
    expected = {e.case_id: e.run_id for v in (1, 2) for e in repo.provenance("reviewed", v)}

    def no_walk(*args):
        raise AssertionError("the provenance chain was walked")
    monkeypatch.setattr(reads, "_provenances", no_walk)
    page = reads.items_detailed(repo.context, "reviewed", 2)
    assert {c.case_id: c.run_id for c in page.items} == expected
    assert sorted(expected.values()) == ["r-1", "r-2", "r-3"]
    with pytest.raises(AssertionError, match="walked"):  # a direct dataset's still is
        reads.items_detailed(repo.context, "evals", 2)


def test_a_case_committed_with_a_run_id_in_its_bytes_shows_no_run(repo):
    repo.create_dataset("gold", admission="direct")
    repo.commit("gold", base=None, add=[{"input": "q", "run_id": "r-1"}])
    (case,) = reads.items_detailed(repo.context, "gold", 1).items
    assert repo.case("gold", 1, case.case_id).run_id == "r-1" and case.run_id is None


def test_diff_detailed_describes_added_and_removed(repo):
    d = reads.diff_detailed(repo.context, "evals", 1, 2)
    assert [(c.run_id, c.tenant) for c in d.added] == [("r-3", "initech")] and d.removed == []
    back = reads.diff_detailed(repo.context, "evals", 2, 1)
    assert [c.run_id for c in back.removed] == ["r-3"] and back.added == []
    assert not back.has_more


def test_resolve_by_run_and_ambiguous_run(repo):
    (r2,) = case_of(repo, 2, "r-2")
    assert reads.resolve_case(repo.context, "evals", 2, run_id="r-2") == r2
    (r1,) = case_of(repo, 2, "r-1")
    assert reads.resolve_case(repo.context, "evals", 2, run_id="r-1") == r1
    both = sorted(case_of(repo, 3, "r-1"))
    assert len(both) == 2
    with pytest.raises(CasError) as info:
        reads.resolve_case(repo.context, "evals", 3, run_id="r-1")
    assert (info.value.code, info.value.reason) == ("INVALID_ARGUMENT", "AMBIGUOUS_RUN")
    assert info.value.fields["case_ids"] == both and info.value.fields["run_id"] == "r-1"
    with pytest.raises(CasError) as info:
        reads.resolve_case(repo.context, "evals", 2, run_id="r-9")
    assert (info.value.code, info.value.reason) == ("NOT_FOUND", "RUN_NOT_IN_VERSION")
    with pytest.raises(CasError) as info:
        reads.resolve_case(repo.context, "evals", 2)
    assert info.value.code == "INVALID_ARGUMENT"


def test_resolve_by_prefix(repo):
    ids = repo.items("evals", 3).items
    target = ids[1]
    assert reads.resolve_case(repo.context, "evals", 3, case_id=target[:11].upper()) == target
    assert reads.resolve_case(repo.context, "evals", 3, case_id=target) == target
    with pytest.raises(CasError) as info:
        reads.resolve_case(repo.context, "evals", 3, case_id=target[:10])
    assert (info.value.code, info.value.reason) == ("INVALID_ARGUMENT", "PREFIX_TOO_SHORT")
    with pytest.raises(CasError) as info:  # (no id of 7 random ones starts with 8 zeros)
        reads.resolve_case(repo.context, "evals", 3, case_id="b3:" + "0" * 8)
    assert (info.value.code, info.value.reason) == ("NOT_FOUND", "NO_CASE_WITH_PREFIX")
    with pytest.raises(CasError) as info:
        reads.resolve_case(repo.context, "evals", 3, case_id="b3:zz")
    assert info.value.code == "INVALID_ARGUMENT"


def test_ambiguous_prefix_is_refused_with_candidates(repo, monkeypatch):
    """Two ids sharing 8 hex digits are rare by chance: the version's tree is read through a
    test double holding forged ids (a prefix lookup reads only the tree)."""
    from cas.format.records import TreeLeaf
    from cas.storage.tree import Trie
    ids = ["b3:052f26e5" + "0" * 56, "b3:052f26e5" + "f" * 56, "b3:052f26e6" + "0" * 56]
    monkeypatch.setattr(repo.context, "trie", lambda emit=None: Trie(
        lambda d: TreeLeaf(ids=ids)))
    before = keys(repo)
    with pytest.raises(CasError) as info:
        reads.resolve_case(repo.context, "evals", 1, case_id="B3:052F26E5")
    assert (info.value.code, info.value.reason) == ("INVALID_ARGUMENT", "AMBIGUOUS_PREFIX")
    assert info.value.message == (
        f"case id prefix b3:052f26e5 is ambiguous in evals@1: it matches 2 cases ({ids[0]}, "
        f"{ids[1]}); give more digits")
    assert info.value.fields == {"prefix": "b3:052f26e5", "candidates": ids[:2],
                                 "dataset": "evals", "version": 1}
    # the padded prefix is itself a member (ids[0]); one more digit makes each unique
    assert reads.resolve_case(repo.context, "evals", 1, case_id="b3:052f26e50") == ids[0]
    assert reads.resolve_case(repo.context, "evals", 1, case_id="b3:052f26e5f") == ids[1]
    assert reads.resolve_case(repo.context, "evals", 1, case_id="b3:052f26e6") == ids[2]
    assert keys(repo) == before


def test_version_listing_gives_each_state(repo):
    repo.retire("evals", 2, "CONTAMINATED", "leaked")
    listing = reads.version_listing(repo.context, "evals")
    assert [(e.record.number, e.state) for e in listing.versions] == [
        (3, "ACTIVE"), (2, "RETIRED"), (1, "ACTIVE")]
    assert listing.versions[1].retirement.cause == "CONTAMINATED"
    assert listing.next_before is None
    page = reads.version_listing(repo.context, "evals", limit=1)
    assert [e.record.number for e in page.versions] == [3] and page.next_before == 3


@settings(max_examples=60, deadline=None)
@given(st.lists(_entry_st, max_size=20))
def test_a_listing_reads_the_same_runs_from_a_provenance_as_the_whole_record(entries):
    """Listings decode a provenance's case and run ids alone (objects.ProvenanceRuns): the
    pairs are the whole record's, from its canonical bytes; a committed entry has no run."""
    data = encoding.encode(objects.Provenance(entries=entries))
    view = encoding.decode(data, objects.ProvenanceRuns)
    assert [(e.case_id, e.run_id) for e in view.entries] == \
        [(e.case_id, e.run_id) for e in entries]
    with pytest.raises(CasError) as wrong:  # a case's bytes have no entries
        encoding.decode(encoding.encode(objects.Case(input="x")), objects.ProvenanceRuns)
    assert wrong.value.reason == "CORRUPT"


def test_a_provenance_read_for_its_runs_must_be_one(mem):
    """The view is untagged: its reader checks the kind the pack names, so a version whose
    provenance names another object is CORRUPT, never read as runs."""
    record = make_gold(mem)
    with pytest.raises(CasError) as wrong:
        reads._provenance_runs(mem.context, record.content_digest)  # a tree node
    assert wrong.value.reason == "CORRUPT" and "expected a provenance" in wrong.value.message


def test_cases_reads_the_cases_it_is_given_together_in_their_order():
    """`repo.cases` answers in the order asked, with one batch of reads for all of them (the
    review page lists a page of cases with their metadata this way, not a read each)."""
    backend = MemoryBackend()
    repo = cas.Repository.create(backend)
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=[{"input": i, "metadata": {"n": i}} for i in range(60)])
    ids = repo.items("d", 1, limit=60).items
    asked = ids[::-3]
    counting = Counting(backend)
    cold = cas.Repository(counting)
    counting.calls.clear()
    got = cold.cases("d", 1, asked)
    assert [cas.encode_case(c).case_id for c in got] == asked
    assert [c.metadata for c in got] == [repo.case("d", 1, i).metadata for i in asked]
    assert counting.calls["get_range"] + counting.calls["get"] < len(asked), counting.calls
    other = cas.encode_case({"input": "elsewhere"}).case_id
    with pytest.raises(cas.NotFound) as info:
        repo.cases("d", 1, asked[:2] + [other])
    assert info.value.fields["case_id"] == other
    with pytest.raises(cas.InvalidArgument):
        repo.cases("d", 1, asked[0])  # one id, not a list of them
    assert repo.cases("d", 1, iter(asked[:2])) == got[:2] and repo.cases("d", 1, []) == []
