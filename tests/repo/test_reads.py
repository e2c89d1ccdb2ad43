"""Reads of an exact version (cas/reads.py): what a page costs in storage requests."""

from __future__ import annotations

import json

import pytest

import cas
from support.backends import Counting
from cas.format.keys import meta_key
from cas.storage.backends.memory import MemoryBackend


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
