"""Pack maintenance: rewriting packs without some objects (gc, erasure), deleting packs with
their index files, and the packs that maintain themselves (writers merge small packs and pack
indexes as they go)."""

import pytest

import cas
from cas.digest import to_bytes
from cas.errors import NotFound
from cas.format.keys import PACKS, SHARDS, multi_index_key
from cas.format.records import Case, TreeLeaf, encode_object
from cas.storage import leases, maintenance
from cas.storage.backends.memory import MemoryBackend
from cas.storage.pack import format_multi_index, parse_index
from cas.storage.store import ObjectStore
from support.backends import Counting
from support.lifecycle import multi_keys
from support.person_files import to_records
from support.sample_cases import padded_cases


def keyed_store(backend=None) -> ObjectStore:
    """A store that indexes the people its objects name (as a repository's does)."""
    return ObjectStore(backend or MemoryBackend(), person_key=b"\x07" * 32)


def write(store: ObjectStore, *objects: tuple) -> list[str]:
    """Write `objects` ((object, people it names without a `person` field)) as one pack."""
    with store.writer() as w:
        return [w.add(obj, persons) for obj, persons in objects]


ADA, NOBODY, LEAF = Case(input="a", person="ada"), Case(input="n"), TreeLeaf(ids=[])


# -- rewriting and dropping packs -----------------------------------------------------------
def test_a_rewrite_drops_objects_and_keeps_the_others_with_their_people():
    store = keyed_store()
    ada, nobody, leaf = write(store, (ADA, ()), (NOBODY, ()), (LEAF, ("bob",)))
    (pid,) = store.pack_ids()
    before = sorted(store.backend.list())
    planned = maintenance.rewrite_packs(store, [pid], {to_bytes(nobody)}, dry_run=True)
    assert sorted(store.backend.list()) == before  # a dry run writes nothing
    done = maintenance.rewrite_pack(store, pid, {to_bytes(nobody)})
    assert done._replace(index=None) == planned and done.dropped == 1 and done.index
    assert store.pack_ids() == [done.new_pack] != [pid]
    assert store.get(ada) == ADA and store.get(leaf) == LEAF
    with pytest.raises(NotFound):
        store.get(nobody)
    # the case is indexed anew from its bytes; the leaf, naming no one itself, keeps its entry
    files = store.persons.files()
    assert list(files) == [done.new_pack]
    assert sorted(store.persons.rows(done.new_pack, files[done.new_pack])) == sorted(
        [(store.person_digest("ada"), ada), (store.person_digest("bob"), leaf)])
    again = maintenance.rewrite_pack(store, done.new_pack, set())  # the same pack: a no-op
    assert again == (done.new_pack, 0, 0, again.bytes_before, again.bytes_before, None)
    assert store.pack_ids() == [done.new_pack]


def test_a_rewrite_dropping_every_object_leaves_no_pack():
    store = keyed_store()
    digests = write(store, (ADA, ()), (NOBODY, ()))
    (pid,) = store.pack_ids()
    done = maintenance.rewrite_pack(store, pid, {to_bytes(d) for d in digests})
    assert done.new_pack is None and done.dropped == 2 and done.bytes_written == 0
    assert list(store.backend.list()) == []


def test_packs_merged_keep_an_object_both_hold_once():
    store = keyed_store()
    (ada,) = write(store, (ADA, ()))
    nobody, _ = write(store, (NOBODY, ()), (ADA, ()))
    pids = store.pack_ids()
    merged = maintenance.rewrite_packs(store, pids, set())
    assert merged.dropped == 0 and store.pack_ids() == [merged.new_pack]
    _, entries = parse_index(store.backend.get(f"{PACKS}{merged.new_pack}.idx"))
    assert sorted(e.digest for e in entries) == sorted(to_bytes(d) for d in (ada, nobody))
    # the same packs give the same pack: a merge repeated after a crash is a no-op
    again = keyed_store()
    write(again, (ADA, ()))
    write(again, (NOBODY, ()), (ADA, ()))
    assert maintenance.rewrite_packs(again, pids, set()).new_pack == merged.new_pack


def test_dropping_a_pack_deletes_its_files_and_the_multi_pack_index_naming_it():
    store = keyed_store()
    write(store, (ADA, ()))
    write(store, (NOBODY, ()))
    first, second = store.pack_ids()
    data = format_multi_index([store.backend.get(f"{PACKS}{p}.idx") for p in (first, second)])
    store.backend.put_if_absent(multi_index_key(data[-32:].hex()), data)
    to_records(store.backend)  # the first generation of person index files, too
    maintenance.drop_pack(store, first, ())
    left = list(store.backend.list())
    assert not [k for k in left if first in k or k.endswith(".midx")], left
    assert f"{PACKS}{second}.pack" in left and any(second in k for k in store.backend.list(SHARDS))
    assert store.get(encode_object(NOBODY)[2]) == NOBODY


def test_the_writers_estimate_under_the_threshold_costs_no_storage_call():
    counted = Counting(MemoryBackend())
    store = ObjectStore(counted)
    assert maintenance.maintain(store, None, maintenance.AUTO_MULTI_INDEX_AT - 1) is None
    assert counted.calls == {}


def test_a_store_without_upkeep_never_maintains_and_one_with_it_is_asked_once(tmp_path):
    """A writer with a lease asks the store's `maintain` once per batch, with its estimate of
    the uncovered pack indexes (those it started with, and its own)."""
    repo = cas.init(str(tmp_path))
    assert repo.store.maintain is maintenance.maintain  # a repository's store maintains
    packs = len(repo.store.pack_ids())
    asked = []
    repo.store.maintain = lambda store, lease, uncovered: asked.append(uncovered)
    with leases.writing(repo.context, "commit") as lease:
        with repo.store.writer(lease) as w:
            w.add(ADA)
            w.flush()  # its first pack: the store is asked
            w.add(NOBODY)
    assert asked == [packs + 1]
    repo.store.maintain = None
    with leases.writing(repo.context, "commit") as lease, repo.store.writer(lease) as w:
        w.add(LEAF)
    assert asked == [packs + 1] and len(repo.store.pack_ids()) == packs + 3


# -- packs that maintain themselves ---------------------------------------------------------
def searched(repo) -> list:
    fresh = cas.Repository(repo.backend)
    return fresh.store.indexes()


def test_writers_merge_uncovered_pack_indexes_once_they_pass_the_threshold(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setattr("cas.storage.maintenance.SMALL_PACK", 0)  # no pack is small: indexes only
    repo = cas.init(str(tmp_path))
    repo.create_dataset("d", admission="direct")
    for n in range(40):  # one small pack per commit
        repo.commit("d", base=n or None, add=padded_cases(2, f"v{n}"))
    packs = [k for k in repo.backend.list(PACKS) if k.endswith(".idx")]
    assert len(packs) >= 40 and multi_keys(repo.backend)
    readers = searched(repo)
    assert len(readers) < 16 + 3, [r.key for r in readers]  # not one per pack
    fresh = cas.open(str(tmp_path))
    for v in (1, 20, 40):
        ids = fresh.items("d", v, limit=500).items
        assert len(ids) == 2 * v and all(fresh.case("d", v, i) for i in ids)
    assert fresh.fsck().ok


def test_writers_merge_small_packs_into_one_when_no_one_else_is_at_work(tmp_path):
    repo = cas.init(str(tmp_path))
    repo.create_dataset("d", admission="direct")
    for n in range(40):  # one small pack per commit: merged every 16 or so
        repo.commit("d", base=n or None, add=padded_cases(2, f"v{n}"))
    packs = repo.store.pack_ids()
    assert len(packs) < 16, packs
    assert not list(repo.backend.list("leases/"))  # the merge's gc lease is released
    # The pack the merges grew holds every earlier commit's objects: each version reads whole.
    fresh = cas.open(str(tmp_path))
    assert len(fresh.store.indexes()) == len(packs)
    for v in (1, 20, 40):
        ids = fresh.items("d", v, limit=500).items
        assert len(ids) == 2 * v and all(fresh.case("d", v, i) for i in ids)
    assert fresh.fsck().ok
    # With another writer at work (its lease live), a writer merges indexes, never packs.
    with leases.writing(fresh, "commit"):
        for n in range(40, 60):
            repo.commit("d", base=n, add=padded_cases(2, f"v{n}"))
    busy = repo.store.pack_ids()
    assert len(busy) >= len(packs) + 20 - 1 and multi_keys(repo.backend)
    assert len(searched(repo)) < 16
    # Alone again: the next time the threshold is passed, the new small packs are merged (the
    # ones the multi-pack index covers wait for the merge of every index, or for gc).
    again = cas.open(str(tmp_path))
    for n in range(60, 76):
        again.commit("d", base=n, add=padded_cases(2, f"v{n}"))
    assert len(again.store.pack_ids()) < len(busy) + 3, again.store.pack_ids()
    assert again.fsck().ok and len(again.items("d", 76, limit=500).items) == 152


def test_multi_indexes_are_merged_in_turn_and_gc_drops_the_superseded(tmp_path, monkeypatch):
    monkeypatch.setattr("cas.storage.maintenance.SMALL_PACK", 0)
    monkeypatch.setattr("cas.storage.maintenance.AUTO_MULTI_INDEX_AT", 2)
    monkeypatch.setattr("cas.storage.maintenance.MERGE_MULTI_INDEXES_AT", 3)
    repo = cas.init(str(tmp_path))
    repo.create_dataset("d", admission="direct")
    for n in range(12):
        repo.commit("d", base=n or None, add=padded_cases(2, f"v{n}"))
    listed = multi_keys(repo.backend)
    readers = searched(repo)
    assert len(listed) > 3 and len(readers) <= 3, (listed, [r.key for r in readers])
    report = cas.open(str(tmp_path)).gc(dry_run=True, grace=1e6)  # no pack old enough
    assert report.multi_indexes_deleted == len(listed) - sum(r.multi for r in readers) > 0
    real = cas.open(str(tmp_path)).gc(grace=1e6)
    assert real.multi_indexes_deleted == report.multi_indexes_deleted
    assert sorted(multi_keys(repo.backend)) == sorted(r.key for r in readers if r.multi)
    fresh = cas.open(str(tmp_path))
    assert fresh.fsck().ok and len(fresh.items("d", 12, limit=500).items) == 24
    monkeypatch.setattr("cas.storage.maintenance.SMALL_PACK", 4 << 20)
    merged = cas.open(str(tmp_path)).gc(grace=0)  # now the small packs are merged into one
    assert merged.packs_rewritten == 12 and multi_keys(repo.backend) == []
    fresh = cas.open(str(tmp_path))
    assert fresh.fsck().ok and len(fresh.items("d", 12, limit=500).items) == 24


def test_a_damaged_pack_index_is_never_merged(tmp_path, monkeypatch):
    monkeypatch.setattr("cas.storage.maintenance.AUTO_MULTI_INDEX_AT", 3)
    repo = cas.init(str(tmp_path))
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=padded_cases(2, "a"))
    repo.commit("d", base=1, add=padded_cases(2, "b"))
    (first,) = [k for k in repo.backend.list(PACKS) if k.endswith(".idx")][:1]
    path = tmp_path / ".cas" / first
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    repo.commit("d", base=2, add=padded_cases(2, "c"))  # the third: past the threshold
    assert multi_keys(repo.backend) == []  # the merge was skipped, not built over damage
    assert not cas.open(str(tmp_path)).fsck().ok  # and the damage is fsck's to report


def test_a_damaged_small_pack_is_never_merged(tmp_path, monkeypatch):
    """A merge reads and verifies every pack before it writes: one damaged pack stops it, and
    nothing is deleted (or indexed over packs the merge might have left half deleted)."""
    monkeypatch.setattr("cas.storage.maintenance.AUTO_MULTI_INDEX_AT", 3)

    def two_commits(where):
        repo = cas.init(str(where))
        repo.create_dataset("d", admission="direct")
        repo.commit("d", base=None, add=padded_cases(2, "a"))
        repo.commit("d", base=1, add=padded_cases(2, "b"))
        return repo
    control = two_commits(tmp_path / "control")  # undamaged, the third commit merges
    control.commit("d", base=2, add=padded_cases(2, "c"))
    assert len(control.store.pack_ids()) == 1
    repo = two_commits(tmp_path)
    before = repo.store.pack_ids()
    path = tmp_path / ".cas" / "packs" / f"{before[0]}.pack"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    repo.commit("d", base=2, add=padded_cases(2, "c"))  # the third: past the threshold
    after = cas.open(str(tmp_path)).store.pack_ids()
    assert set(before) < set(after) and multi_keys(repo.backend) == []
    assert any(p.where.endswith(f"{before[0]}.pack")
               for p in cas.open(str(tmp_path)).fsck().problems)


def test_a_writer_never_indexes_a_pack_its_own_merge_removed(location, monkeypatch):
    """A batch that flushes again after its own maintenance merged its first pack away (a
    commit retried on a new head does) must not publish a multi-pack index naming that pack:
    readers would look there for its objects and find the pack gone (CI: DATA_LOSS)."""
    monkeypatch.setattr("cas.storage.maintenance.AUTO_MULTI_INDEX_AT", 3)
    repo = cas.init(location)
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=padded_cases(2, "a"))
    repo.commit("d", base=1, add=padded_cases(2, "b"))
    first, second = (cas.encode_case(padded_cases(1, tag)[0]) for tag in ("x", "y"))
    with leases.writing(repo.context, "commit") as lease, repo.store.writer(lease) as writer:
        writer.add_encoded("case", first.data, first.case_id)
        writer.flush()  # the third pack: past the threshold, so its packs are merged into one
        assert len(repo.store.pack_ids()) == 1
        writer.add_encoded("case", second.data, second.case_id)
        writer.flush()
    fresh = cas.open(location)
    assert fresh.fsck().ok
    for enc in (first, second):
        assert fresh.store.get_bytes(enc.case_id)[1] == enc.data


def test_a_multi_pack_index_naming_packs_that_are_gone_is_read_past_and_collected(location):
    """The damage an earlier build's writer left (above): a multi-pack index naming packs that
    were merged into another. Readers find the objects in the pack that holds them, fsck
    names the index, and gc deletes it."""
    repo = cas.init(location)
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=padded_cases(2, "a"))
    repo.commit("d", base=1, add=padded_cases(2, "b"))
    pids = repo.store.pack_ids()
    blobs = [repo.backend.get(f"packs/{p}.idx") for p in sorted(pids)]
    stale = format_multi_index(blobs)
    merged = maintenance.rewrite_packs(repo.store, sorted(pids), set())  # drops them
    key = f"packs/{stale[-32:].hex()}.midx"
    repo.backend.put_if_absent(key, stale)
    fresh = cas.open(location)
    assert [i.key for i in fresh.store.indexes()][0] == key  # searched first: it misleads
    ids = fresh.items("d", 2).items
    assert sorted(fresh.case("d", 2, c).input for c in ids) == \
        sorted(c["input"] for c in padded_cases(2, "a") + padded_cases(2, "b"))
    problems = [p for p in fresh.fsck().problems if p.severity == "error"]
    assert [p.where for p in problems] == [key] and "gone" in problems[0].message
    planned = cas.open(location).gc(dry_run=True)
    assert planned.multi_indexes_deleted == 1 and multi_keys(repo.backend) == [key]
    report = cas.open(location).gc()
    assert report.multi_indexes_deleted == 1 and multi_keys(repo.backend) == []
    assert cas.open(location).fsck().ok and repo.store.pack_ids() == [merged.new_pack]


def test_a_commit_retried_after_its_writer_merged_packs_stays_readable(location, monkeypatch):
    """The run CI caught: a commit's first attempt passes the threshold and merges every small
    pack, including its own; a rival seals the same number first; the retry on the new head
    flushes again. Every case of both versions stays readable and fsck stays clean."""
    monkeypatch.setattr("cas.storage.maintenance.AUTO_MULTI_INDEX_AT", 3)
    repo = cas.init(location)
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=padded_cases(2, "a"))
    repo.commit("d", base=1, add=padded_cases(2, "b"))
    rival = cas.open(location)
    claim = repo.context.refs.append_version
    lost = []

    def rival_first(record):
        if not lost:  # once: the rival's version takes the number this attempt wanted
            lost.append(rival.commit("d", base=2, add=padded_cases(2, "rival")).number)
        return claim(record)
    monkeypatch.setattr(repo.context.refs, "append_version", rival_first)
    mine = repo.commit("d", base=2, add=padded_cases(2, "mine"), retry=True)
    assert lost == [3] and mine.number == 4
    fresh = cas.open(location)
    assert fresh.fsck().ok
    held = sorted(fresh.case("d", 4, c).input for c in fresh.items("d", 4, limit=50).items)
    assert held == sorted(c["input"] for tag in ("a", "b", "rival", "mine")
                          for c in padded_cases(2, tag))
