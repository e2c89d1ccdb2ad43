"""The order of objects in the packs a writer writes (docs/format.md 7): tree nodes first, in
the order they came, then the rest by digest; a batch larger than a pack spooled where reads
cost a round trip, so that each of its packs holds a range of digests; reads that count on
it, and packs written in any other order still read."""

import pytest

import cas
from cas.digest import digest_of, to_bytes
from cas.format.keys import index_key, pack_key
from cas.format.records import KIND_BY_CODE, Case, TreeLeaf, encode_object
from cas.storage import maintenance
from cas.storage import pack as packfmt
from cas.storage import store as storemod
from cas.storage.backends.memory import MemoryBackend
from cas.storage.store import ObjectStore, PackWriter
from support.backends import Counting
from support.sample_cases import padded_cases


def case(i: int, person: str | None = None) -> Case:
    return Case(input={"task": f"task {i}", "pad": "x" * 400}, output=f"answer {i}",
                person=person)


def pack_contents(backend, pid: str) -> list[tuple[int, bytes]]:
    """(kind code, raw digest) of each object of a pack, in file order."""
    data = backend.get(pack_key(pid))
    return [(kind, to_bytes(digest_of(KIND_BY_CODE[kind], data[at:at + n])))
            for at, n, kind in packfmt.parse_pack(data)]


def others(contents) -> list[bytes]:
    return [d for kind, d in contents if kind not in packfmt.TREE_CODES]


def test_a_pack_holds_tree_nodes_as_they_came_then_the_rest_by_digest():
    store = ObjectStore(MemoryBackend())
    leaves = [TreeLeaf(ids=[digest_of("case", b"%d" % i)]) for i in range(20)]
    with store.writer() as w:
        added = []
        for i in range(60):
            added.append(w.add(case(i)))
            if i % 3 == 0:
                added.append(w.add(leaves[i // 3]))
    (pid,) = store.pack_ids()
    got = pack_contents(store.backend, pid)
    trees = [d for kind, d in got if kind in packfmt.TREE_CODES]
    assert trees == [to_bytes(encode_object(leaf)[2]) for leaf in leaves]
    assert got[:len(trees)] == [(2, d) for d in trees]  # ahead of the others
    assert others(got) == sorted(to_bytes(d) for d in added if to_bytes(d) not in trees)
    fresh = ObjectStore(store.backend)
    assert [fresh.get(d) for d in added[:4]] == [case(0), leaves[0], case(1), case(2)]


def spooled(spool: bool, n: int = 400, persons: bool = True):
    """n cases (each naming one of 7 people) and a few tree leaves, written by a writer with
    small packs, spooling or not."""
    store = ObjectStore(MemoryBackend(), person_key=b"\x05" * 32)
    w = PackWriter(store, max_bytes=32 * 1024, spool=spool)
    with w:
        digests = [w.add(case(i, f"p{i % 7}" if persons else None)) for i in range(n)]
        digests += [w.add(case(i)) for i in range(0, n, 50)]  # again: stored once
        digests += [w.add(TreeLeaf(ids=[digest_of("case", b"%d" % i)])) for i in range(5)]
    return store, w, digests


def test_a_spooled_batch_writes_each_pack_as_a_range_of_digests():
    store, w, digests = spooled(True)
    pids = store.pack_ids()
    assert w.packs_written == len(pids) >= 6
    ranges = []
    for pid in pids:
        got = others(pack_contents(store.backend, pid))
        assert got == sorted(got)
        if got:
            ranges.append((got[0], got[-1]))
    ranges.sort()
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))  # disjoint ranges
    stored = [d for pid in pids for _, d in pack_contents(store.backend, pid)]
    assert sorted(stored) == sorted({to_bytes(d) for d in digests})  # each once
    fresh = ObjectStore(store.backend)
    assert [fresh.get(d) for d in digests[:400:37]] == [case(i, f"p{i % 7}")
                                                       for i in range(0, 400, 37)]
    # The same people are indexed as by a writer that does not spool.
    plain, _, _ = spooled(False)
    assert store.persons.entries(pids) == plain.persons.entries(plain.pack_ids()) != {}


def test_a_spool_past_its_bound_is_written_out_and_the_batch_goes_on(monkeypatch):
    """A spool holds at most SPOOL_MAX_BYTES of local disk: past it, what it holds is written
    as packs of digest ranges, and a new spool takes the rest of the batch. Each spool's
    packs are ranges; every object is stored once and reads back."""
    import cas.storage.store as store_mod
    monkeypatch.setattr(store_mod, "SPOOL_MAX_BYTES", 96 * 1024)
    drains = []
    real = PackWriter._drain_spool

    def counting(self):
        drains.append(self._spool is not None and self._spool.bytes)
        real(self)
    monkeypatch.setattr(PackWriter, "_drain_spool", counting)
    store, w, digests = spooled(True)
    written = [b for b in drains if b]
    assert len(written) >= 3 and max(written) < 96 * 1024 + 32 * 1024  # bounded, each
    stored = [d for pid in store.pack_ids() for _, d in pack_contents(store.backend, pid)]
    assert sorted(stored) == sorted({to_bytes(d) for d in digests})  # each once
    for pid in store.pack_ids():
        got = others(pack_contents(store.backend, pid))
        assert got == sorted(got)
    fresh = ObjectStore(store.backend)
    assert [fresh.get(d) for d in digests[:400:37]] == [case(i, f"p{i % 7}")
                                                       for i in range(0, 400, 37)]


def test_a_spool_is_on_where_reads_cost_a_round_trip_and_leaves_no_files(tmp_path):
    class Remote(MemoryBackend):
        ROUND_TRIPS = True

    assert PackWriter(ObjectStore(Remote())).spool
    assert not PackWriter(ObjectStore(MemoryBackend())).spool
    store = ObjectStore(Remote(), cache_dir=str(tmp_path / "cache"))
    with PackWriter(store, max_bytes=16 * 1024) as w:
        for i in range(100):
            w.add(case(i))
        assert w._spool is not None
        assert all(w.pending(encode_object(case(i))[2]) for i in range(100))
    assert len(store.pack_ids()) >= 3
    assert list((tmp_path / "cache").iterdir()) == []  # the spool's files are gone
    failed = PackWriter(store, max_bytes=16 * 1024)
    with pytest.raises(RuntimeError), failed:
        for i in range(100, 200):
            failed.add(case(i))
        raise RuntimeError("the batch fails")
    assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.parametrize("spool", [True, False])
def test_a_page_of_consecutive_ids_is_read_with_a_request_per_pack(spool, monkeypatch):
    """A page (100 consecutive ids) of a spooled batch lies in one or two packs, each read
    with one range; in packs written as objects came (a local batch), about one range per
    object (READ_GAP 16, past the entry header between two objects: a pack of 64 MB spreads
    them further apart than a read coalesces)."""
    monkeypatch.setattr(storemod, "READ_GAP", 16)
    store, _, digests = spooled(spool, persons=False)
    page = sorted(digests[:400])[150:250]
    counting = Counting(store.backend)
    assert ObjectStore(counting).get_many_bytes(page) == [store.get_bytes(d) for d in page]
    calls = counting.ranges(".pack")
    spanned = len(set(calls))
    if spool:
        assert len(calls) == spanned <= 3, calls
    else:
        assert len(calls) > 50


def test_packs_in_another_order_still_read():
    """Readers never relied on an order: a pack whose objects are in reverse digest order
    (as a pack written as they came may be) reads object by object and together."""
    objs = [encode_object(case(i)) for i in range(40)]
    objs.sort(key=lambda o: o[2], reverse=True)
    data, spans = packfmt.format_pack((storemod.KIND_CODES[k], d) for k, d, _ in objs)
    pid = packfmt.pack_id(data)
    backend = MemoryBackend()
    backend.put_if_absent(pack_key(pid), bytes(data))
    backend.put_if_absent(index_key(pid), packfmt.format_index(pid, [
        packfmt.Entry(to_bytes(digest), at, n, storemod.KIND_CODES[kind])
        for (kind, _, digest), (at, n) in zip(objs, spans)]))
    store = ObjectStore(backend)
    digests = sorted(o[2] for o in objs)
    assert store.get_many_bytes(digests[5:30]) == [ObjectStore(backend).get_bytes(d)
                                                   for d in digests[5:30]]
    assert [store.get_bytes(d)[1] for d in digests] == [
        next(o[1] for o in objs if o[2] == d) for d in digests]


def test_rewritten_and_merged_packs_are_in_the_writers_order():
    """gc, erasure and a writer merging small packs write packs in the order writers do; a
    rewrite that drops nothing from one pack leaves it as it is, in whatever order."""
    store = ObjectStore(MemoryBackend())
    for start in (0, 30):
        with store.writer() as w:
            for i in range(start, start + 30):
                w.add(case(i))
                w.add(TreeLeaf(ids=[digest_of("case", b"%d" % i)]))
    old = store.pack_ids()
    done = maintenance.rewrite_packs(store, old, {to_bytes(encode_object(case(3))[2])})
    got = pack_contents(store.backend, done.new_pack)
    trees = [d for kind, d in got if kind in packfmt.TREE_CODES]
    assert len(trees) == 60 and got[:60] == [(2, d) for d in trees]
    assert others(got) == sorted(others(got)) and len(others(got)) == 59
    # One pack, nothing to drop: not rewritten (the no-op a repeated rewrite was).
    objs = [encode_object(case(i)) for i in range(70, 75)]
    objs.sort(key=lambda o: o[2], reverse=True)
    data, spans = packfmt.format_pack((storemod.KIND_CODES[k], d) for k, d, _ in objs)
    pid = packfmt.pack_id(data)
    store.backend.put_if_absent(pack_key(pid), bytes(data))
    store.backend.put_if_absent(index_key(pid), packfmt.format_index(pid, [
        packfmt.Entry(to_bytes(digest), at, n, 1) for (_, _, digest), (at, n) in zip(objs, spans)]))
    same = maintenance.rewrite_packs(store, [pid], set())
    assert same.new_pack == pid and store.backend.exists(pack_key(pid))


def test_a_walk_reads_a_subtree_or_a_run_of_leaves_at_once(monkeypatch):
    """Reading an inner tree node whose subtree is small, a read takes the inner nodes
    written after it (its subtree), and reading several leaves of a node, a read of the first
    takes the others: a cold read of a case or a page then costs fewer requests, and reads the
    same."""
    backend = MemoryBackend()
    repo = cas.Repository.create(backend)
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=padded_cases(20000))
    ids = repo.items("d", 1, limit=3).items

    class Remote(Counting):
        ROUND_TRIPS = True  # (read ahead only where a read is a round trip)

    def cold_reads(ahead: int, read) -> tuple[int, list]:
        monkeypatch.setattr(storemod, "READ_AHEAD", ahead)
        counting = Remote(backend)
        got = read(cas.Repository(counting))
        return len(counting.ranges(".pack")), got
    def cases(r):
        return [r.case("d", 1, i).input for i in ids]
    with_ahead, got = cold_reads(512 << 10, cases)
    without, expected = cold_reads(0, cases)
    assert got == expected == cases(repo)
    assert with_ahead < without, (with_ahead, without)
    # A page: its leaves (siblings, in id order) are read with the first, not one by one.
    def page(r):
        return r.items("d", 1, after=ids[1], limit=300).items
    with_ahead, got = cold_reads(512 << 10, page)
    without, expected = cold_reads(0, page)
    assert got == expected == page(repo) and len(got) == 300
    assert with_ahead + 2 <= without, (with_ahead, without)


def test_read_ahead_keeps_only_what_its_bytes_are():
    """Bytes read after a node that are not whole tree entries (the pack's trailer, another
    kind, a cut-off entry) are passed over; what is kept is kept under its own digest. Only
    where a read is a round trip does a store read ahead at all."""
    store = ObjectStore(MemoryBackend())
    leaf = TreeLeaf(ids=[digest_of("case", b"x")])
    _, data, digest = encode_object(leaf)
    entry = packfmt.ENTRY_HEAD.pack(2, len(data)) + data
    other = packfmt.ENTRY_HEAD.pack(1, 3) + b"abc"
    store._take_ahead(memoryview(other + entry + entry[:9] + b"\xff" * 40))
    assert store._cache == {digest: leaf}
    store._take_ahead(memoryview(packfmt.ENTRY_HEAD.pack(2, 4) + b"!!!!" + entry))
    assert store._cache == {digest: leaf}  # stopped at the entry that does not decode
    store._counts[digest] = 10
    node = packfmt.Entry(to_bytes(digest), 0, 1, storemod.TREE_NODE)
    assert store._ahead(digest, node) == 0  # a memory (or local) backend

    class Remote(MemoryBackend):
        ROUND_TRIPS = True
    remote = ObjectStore(Remote())
    remote._counts[digest] = 10
    assert remote._ahead(digest, node) == 4 * 10 * storemod.AHEAD_PER_ID


def test_a_small_remote_index_read_whole_by_its_opening_is_checked_before_it_is_kept(tmp_path):
    """A pack index the opening read holds whole (OPEN_REMOTE) is kept in the local cache
    without a second request, and only once its checksum holds: a flipped byte is
    DATA_LOSS, never a cached index or a wrong answer."""
    from cas.errors import DigestMismatch
    from cas.storage.backends.cache import CachingBackend
    remote = MemoryBackend()
    store = ObjectStore(remote)
    with store.writer() as w:
        digests = [w.add(case(i)) for i in range(20)]
    (pid,) = store.pack_ids()
    index = bytearray(remote.get(index_key(pid)))
    assert len(index) < packfmt.OPEN_REMOTE
    good = ObjectStore(CachingBackend(remote, str(tmp_path / "good")))
    assert good.get(digests[3]) == case(3)
    assert (tmp_path / "good" / "packs" / f"{pid}.idx").read_bytes() == bytes(index)
    index[-40] ^= 1  # the pack id, before the checksum: sizes still agree
    remote.replace(index_key(pid), bytes(index))
    bad = ObjectStore(CachingBackend(remote, str(tmp_path / "bad")))
    with pytest.raises(DigestMismatch):
        bad.get(digests[3])
    assert not (tmp_path / "bad" / "packs" / f"{pid}.idx").exists()
