"""Object store: typed objects by digest, written in packs, verified on every read."""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Callable, Iterable

from cas.digest import digest_of, from_bytes, person_digest, to_bytes
from cas.errors import Aborted, CasError, CorruptData, DigestMismatch, NotFound
from cas.format.keys import (PACKS, index_key, multi_index_key, pack_key, parse_index_key,
                             parse_multi_index_key, parse_pack_key, person_shard)
from cas.format.records import KIND_BY_CODE, KIND_CODES, Object, decode_object, encode_object
from cas.storage import leases
from cas.storage import pack as packfmt
from cas.storage.backends import get_ranges
from cas.storage.person_index import PERSON_KINDS, Persons, named_person
from cas.storage.tree import LEAF_MAX

NODE_CACHE = 8192  # inner tree nodes kept in memory
LEAF_CACHE = 256   # tree leaves kept in memory (each holds up to 64 ids)
READ_GAP = 64 << 10  # objects of a pack this close together are read in one request
LOCATE_ATTEMPTS = 20  # listings of the indexes one lookup may take while packs are replaced
PERSON_DIGESTS_KEPT = 1 << 16  # keyed digests of people a store remembers (a few MB)
# A batch's spool (PackWriter) holds at most this much local disk, nor more than half of what
# is free where it lies when it begins: past that, what it holds is written out as packs of
# digest ranges and a new spool begins. A page then lies in a pack per spool written, and a
# ten-million-case ingest does not need 16 GB of a CI runner's disk.
SPOOL_MAX_BYTES = 4 << 30
# A tree's inner nodes are written each before the inner nodes of its subtree (Trie emits them
# so; a writer keeps them in that order, docs/format.md 7): on a remote store, reading an
# inner node whose
# subtree's inner nodes fit in READ_AHEAD bytes, a read takes them too, and a walk down it
# costs no lookup and no request until its leaves. Those nodes hold about AHEAD_PER_ID bytes
# per id below them (7.4 measured at 1M cases), up to four times as many where the lowest
# nodes are sparse (20 at 20k); the count comes from the parent, read before.
READ_AHEAD = 512 << 10
AHEAD_PER_ID = 8
# A tree's leaves are written in id order, so the leaves of a page (siblings) lie together: a
# read of the first takes the others (about LEAF_PER_ID bytes an id, 72.9 measured at 1M, and
# LEAF_HEAD a leaf), with one lookup instead of one per leaf.
LEAF_PER_ID = 80
LEAF_HEAD = 128
COUNTS_KEPT = 1 << 16  # subtree counts of children of the nodes read, kept for READ_AHEAD


TREE_NODE = KIND_CODES["tree.node"]


class ObjectStore:
    """Typed objects by digest over a backend: located through the pack indexes, read with
    their digest checked, written in packs by a `PackWriter`."""

    def __init__(self, backend, cache_dir: str | None = None,
                 person_key: bytes | None = None,
                 maintain: Callable[[ObjectStore, leases.Held, int], int | None] | None = None,
                 ) -> None:
        self.backend = backend
        # Objects naming a person are indexed by the keyed digest of the person, so that an
        # erasure finds them without reading the repository (cas/repo/erasure.py).
        self.person_key = person_key
        self._person_digests: dict[str, str] = {}
        self.persons = Persons(backend)  # the person index files of the packs
        # The upkeep of a writer holding a lease once its batch is written: the repository
        # passes cas.storage.maintenance.maintain, which works over this store (so is not
        # imported by it).
        self.maintain = maintain
        self._indexes: list[packfmt.IndexReader] | None = None
        self._verified: set[str] = set()  # index keys checked whole (verify_indexes)
        self._answered: set[str] = set()  # index keys that held objects of the last batch
        self._cache: dict[str, Object] = {}
        self._leaves: OrderedDict[str, None] = OrderedDict()  # the cached leaves, oldest first
        self._counts: dict[str, int] = {}  # an inner node's child -> its count (READ_AHEAD)
        # Where each read is a round trip (S3), a read takes the tree nodes after it too; a
        # local read costs a pread, less than decoding what it would take.
        self._read_ahead = getattr(type(backend), "ROUND_TRIPS", False)
        # For remote repositories: object bytes cached on local disk by digest. They are
        # immutable, so a cached copy never goes stale; it is verified on every read anyway.
        self.cache_dir = os.path.join(cache_dir, "objects") if cache_dir else None

    # -- reading -------------------------------------------------------------------------
    def indexes(self) -> list[packfmt.IndexReader]:
        """The indexes to search: the multi-pack indexes that cover packs no larger one does
        (the others are superseded), and the pack index of each pack that no multi-pack index
        covers (a lookup then costs a few indexes, not one per pack)."""
        for attempt in range(3):
            if self._indexes is not None:
                break
            keys = list(self.backend.list(PACKS))
            # (by suffix first: a listing holds a pack for each index, and parsing every key
            # twice cost more than the listing)
            multi = [packfmt.IndexReader(self.backend, k) for k in keys
                     if k.endswith(".midx") and parse_multi_index_key(k)]
            try:
                multi = _minimal_cover(multi)
                covered = {p for m in multi for p in m.packs}
            except NotFound:  # a multi-pack index was dropped since the listing: list again
                if attempt == 2:
                    raise
                continue
            single = [packfmt.IndexReader(self.backend, k) for k in keys
                      if k.endswith(".idx") and k[len(PACKS):-len(".idx")] not in covered
                      and parse_index_key(k)]
            self._indexes = multi + single
        return self._indexes

    def refresh(self) -> None:
        """Forget the list of packs, so packs written by other processes become visible."""
        self._indexes = None

    def person_digest(self, person: str) -> str:
        found = self._person_digests.get(person)
        if found is None:
            if len(self._person_digests) >= PERSON_DIGESTS_KEPT:
                # An ingest of a million cases may name half a million people: keeping all
                # their digests would cost about 100 MB for lookups that seldom repeat.
                self._person_digests.clear()
            found = self._person_digests[person] = person_digest(person, self.person_key)
        return found

    def locate(self, digest: str, gone: frozenset[str] = frozenset(),
               confirm: bool = True) -> tuple[str, packfmt.Entry] | None:
        """Where an object is, or None once a whole pass over a fresh listing of the indexes
        found it nowhere (a pass cut short by an index that was replaced does not count).
        An index's answer naming a pack in `gone` (keys) is passed over. `confirm=False` is
        for a caller that reads the object from its pack next (IndexReader.lookup); an
        answer of None is confirmed either way."""
        raw = to_bytes(digest)
        fresh = self._indexes is None
        for _ in range(LOCATE_ATTEMPTS):
            indexes = self.indexes()
            try:
                for i, idx in enumerate(indexes):
                    found = idx.lookup(raw, confirm)
                    if found is not None and pack_key(found[0]) not in gone:
                        if i:  # move to front: objects read together tend to share a pack
                            indexes.insert(0, indexes.pop(i))
                        return pack_key(found[0]), found[1]
            except NotFound:  # gc or an erasure replaced a pack since we listed: list again
                self.refresh()
                fresh = True
                continue
            if fresh:
                try:  # a mapped index deleted since the listing answered nothing for its pack
                    for idx in indexes:
                        idx.confirm()
                except NotFound:
                    self.refresh()
                    continue  # (fresh stays True: the next pass lists again)
                return None
            self.refresh()  # another writer may have added a pack since we listed
            fresh = True
        raise Aborted(f"the packs kept being replaced while looking for {digest}; retry",
                      reason="PACKS_CHANGING", digest=digest)

    def locate_many(self, digests: Iterable[str]) -> dict[str, tuple[str, packfmt.Entry]]:
        """Where each of `digests` is (pack key, entry), of those stored, by one pass over a
        fresh listing of the indexes (a batch lookup each) with every index still there at
        its end: what `locate` answers for each of them, without a listing (and a pass)
        per object that is absent. A pass cut short by an index replaced meanwhile is
        repeated."""
        wanted = sorted({to_bytes(d) for d in digests})
        for _ in range(LOCATE_ATTEMPTS):
            self.refresh()
            found: dict[bytes, tuple[str, packfmt.Entry]] = {}
            try:
                for idx in self.indexes():
                    rest = [d for d in wanted if d not in found]
                    if not rest:
                        break
                    found.update(idx.lookup_many(rest))
                if len(found) < len(wanted):
                    for idx in self.indexes():  # a mapped index deleted since answered nothing
                        idx.confirm()
            except NotFound:  # gc or an erasure replaced a pack since we listed
                continue
            return {from_bytes(d): (pack_key(pid), entry) for d, (pid, entry) in found.items()}
        raise Aborted("the packs kept being replaced while looking objects up; retry",
                      reason="PACKS_CHANGING")

    def verify_indexes(self) -> None:
        """Check every index searched, whole (checksum, order, fan-out table), once per
        process: a damaged index must be DATA_LOSS, never read as the absence of an object."""
        for idx in list(self.indexes()):
            if idx.key in self._verified:
                continue
            try:
                data = self.backend.get(idx.key)
            except NotFound:
                continue  # replaced since it was listed
            if idx.multi:
                packfmt.parse_multi_index(data, idx.key)
            else:
                packfmt.parse_index(data, idx.key)
            self._verified.add(idx.key)

    def contains(self, digest: str) -> bool:
        return self.locate(digest) is not None

    def get_bytes(self, digest: str, ahead: int | None = None) -> tuple[str, bytes]:
        """(kind, bytes) of one object, its digest verified; `ahead`: the bytes after it to
        read too, for the tree nodes among them (else READ_AHEAD's rule)."""
        if self.cache_dir:
            cached = self._read_cache(digest)
            if cached is not None:
                return cached
        gone: frozenset[str] = frozenset()
        for attempt in range(3):
            found = self.locate(digest, gone, confirm=False)  # the read below confirms
            if found is None:
                # A lookup reads a few bytes of each index and cannot see a flipped byte in
                # them: before answering "absent", check the indexes whole (once each).
                self.verify_indexes()
                raise NotFound(f"object {digest} is not in the repository", digest=digest)
            key, entry = found
            if ahead is None:
                ahead = self._ahead(digest, entry)
            try:
                data = self.backend.get_range(key, entry.offset, entry.length + ahead)
                break
            except NotFound:  # the pack was rewritten since we listed: look again
                if attempt == 2:
                    raise
                if attempt:  # listed afresh and still gone: an index names a pack that is
                    gone |= {key}  # not there (fsck reports it): another may hold the object
                self.refresh()
        kind = KIND_BY_CODE.get(entry.kind)
        if kind is None:
            raise CorruptData(f"object {digest} in {key} has unknown kind code {entry.kind}",
                              digest=digest, key=key)
        if ahead:
            self._take_ahead(memoryview(data)[entry.length:])
            data = data[:entry.length]
        got = digest_of(kind, data)
        if got != digest:
            raise DigestMismatch(digest, got, key)
        if self.cache_dir:
            self._write_cache(digest, kind, data)
        return kind, data

    def _ahead(self, digest: str, entry: packfmt.Entry) -> int:
        """The bytes to read after inner tree node `digest` (READ_AHEAD): its subtree's inner
        nodes, where the count of ids below it is known and they fit; else 0."""
        if entry.kind != TREE_NODE or not self._read_ahead:
            return 0
        count = self._counts.get(digest)
        if count is None or count * AHEAD_PER_ID > READ_AHEAD:
            return 0
        return min(READ_AHEAD, 4 * count * AHEAD_PER_ID)

    def _take_ahead(self, data: memoryview) -> None:
        """Keep the tree nodes among the pack entries that start `data` (bytes read after an
        object): each is kept under the digest of its bytes, so whatever they are, what is
        kept is right; an entry cut off, or not a tree node, ends or is passed over."""
        pos, end = 0, len(data)
        while pos + packfmt.ENTRY_HEAD.size <= end:
            code, n = packfmt.ENTRY_HEAD.unpack_from(data, pos)
            pos += packfmt.ENTRY_HEAD.size
            if pos + n > end:
                return
            if code in packfmt.TREE_CODES:
                kind, blob = KIND_BY_CODE[code], bytes(data[pos:pos + n])
                digest = digest_of(kind, blob)
                if digest not in self._cache:
                    try:
                        self._remember(digest, kind, decode_object(kind, blob, "read ahead"))
                    except CasError:
                        return  # not an entry after all (past the last one)
            pos += n

    def get_many_bytes(self, digests: list[str]) -> list[tuple[str, bytes]]:
        """(kind, bytes) of each of `digests`, verified, in their order: those in the local
        cache from it, the others located together (a few index reads for all of them, not
        several per object) and read with one request per run of nearby objects in a pack
        (then cached). An object not found that way (an index or pack replaced meanwhile) is
        read alone, with get_bytes' errors."""
        have: dict[str, tuple[str, bytes]] = {}
        if self.cache_dir:
            for digest in set(digests):
                cached = self._read_cache(digest)
                if cached is not None:
                    have[digest] = cached
        rest = [d for d in dict.fromkeys(digests) if d not in have]
        if len(rest) > 1:
            have.update(self._read_together(rest))
        return [have.get(d) or self.get_bytes(d) for d in digests]

    def _read_together(self, digests: list[str]) -> dict[str, tuple[str, bytes]]:
        """(kind, bytes) of those of `digests` found in one pass over the indexes and read,
        verified (and cached, with a cache); the others are left out."""
        wanted = sorted(to_bytes(d) for d in digests)
        found: dict[bytes, tuple[str, packfmt.Entry]] = {}
        answered = set()
        try:
            for idx in self._batch_order(self.indexes()):
                rest = [d for d in wanted if d not in found]
                if not rest:
                    break
                located = idx.lookup_many(rest, confirm=False)  # read below
                if located:
                    answered.add(idx.key)
                    found.update(located)
        except NotFound:
            found = {}  # an index was replaced since it was listed: the careful path
        self._answered = answered
        out = {}
        for raw, (kind, data) in self._read_located(found).items():
            digest = from_bytes(raw)
            got = digest_of(kind, data)
            if got != digest:
                raise DigestMismatch(digest, got, pack_key(found[raw][0]))
            if self.cache_dir:
                self._write_cache(digest, kind, data)
            out[digest] = kind, data
        return out

    def _batch_order(self, indexes: list[packfmt.IndexReader]) -> list[packfmt.IndexReader]:
        """The indexes in the order a batch searches them: those that held objects of the
        last batch first, the smallest of them first, then the rest as listed. The next
        level of a tree lies where the last one did; a diff's changed paths lie in a large
        pack (the old version) and a small one (the new): searched first, the small one
        takes its objects out of the batch, so the large one is not searched for them in
        vain."""
        if not self._answered:
            return indexes
        first = sorted((i for i in indexes if i.key in self._answered), key=len)
        return first + [i for i in indexes if i.key not in self._answered]

    def _read_located(self, found: dict) -> dict[bytes, tuple[str, bytes]]:
        """The bytes of located objects, a range per run of objects of a pack that lie within
        READ_GAP of each other, the ranges of a pack read together (backends.get_ranges);
        those of a pack gone meanwhile are left out."""
        by_pack: dict[str, list[packfmt.Entry]] = {}
        for pack, entry in found.values():
            by_pack.setdefault(pack, []).append(entry)
        out: dict[bytes, tuple[str, bytes]] = {}
        ahead = {e.digest: n for _, e in found.values()
                 if (n := self._ahead(from_bytes(e.digest), e))}
        for pack, entries in by_pack.items():
            entries.sort(key=lambda e: e.offset)
            runs, run = [], [entries[0]]
            end = entries[0].offset + entries[0].length + ahead.get(entries[0].digest, 0)
            for e in entries[1:]:
                if e.offset - end > READ_GAP:
                    runs.append(run)
                    run = []
                run.append(e)
                end = max(end, e.offset + e.length + ahead.get(e.digest, 0))
            runs.append(run)
            ends = [max(e.offset + e.length + ahead.get(e.digest, 0) for e in run)
                    for run in runs]
            spans = [(run[0].offset, stop - run[0].offset) for run, stop in zip(runs, ends)]
            try:  # the runs of one pack in one call (a local file opened once)
                blobs = get_ranges(self.backend, pack_key(pack), spans)
            except NotFound:
                continue
            for run, (start, _), blob in zip(runs, spans, blobs):
                for e in run:
                    kind = KIND_BY_CODE.get(e.kind)
                    if kind is None:
                        raise CorruptData(f"object {from_bytes(e.digest)} in {pack_key(pack)} "
                                          f"has unknown kind code {e.kind}",
                                          digest=from_bytes(e.digest), key=pack_key(pack))
                    out[e.digest] = kind, blob[e.offset - start:e.offset - start + e.length]
                    if e.digest in ahead:
                        at = e.offset - start + e.length
                        self._take_ahead(memoryview(blob)[at:at + ahead[e.digest]])
        return out

    def _cache_path(self, digest: str) -> str:
        return os.path.join(self.cache_dir, digest[3:5], digest[3:])

    def _read_cache(self, digest: str) -> tuple[str, bytes] | None:
        try:
            with open(self._cache_path(digest), "rb") as f:
                blob = f.read()
        except FileNotFoundError:
            return None
        kind = KIND_BY_CODE.get(blob[0]) if blob else None
        if kind is None or digest_of(kind, blob[1:]) != digest:
            return None  # a damaged cache entry is ignored and fetched again
        return kind, blob[1:]

    def _write_cache(self, digest: str, kind: str, data: bytes) -> None:
        path = self._cache_path(digest)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # unique per call, not per process: two threads caching one object must not share it
        tmp = f"{path}.{os.urandom(6).hex()}.tmp"
        with open(tmp, "wb") as f:
            f.write(bytes([KIND_CODES[kind]]) + data)
        os.replace(tmp, path)

    def evict(self, digest: str) -> None:
        """Forget a cached object (erasure)."""
        self._cache.pop(digest, None)
        self._leaves.pop(digest, None)
        if self.cache_dir:
            try:
                os.remove(self._cache_path(digest))
            except FileNotFoundError:
                pass

    def get(self, digest: str, type_: type | None = None) -> Object:
        obj = self._cache.pop(digest, None)
        if obj is not None:
            self._cache[digest] = obj  # the most recently used is the last to go
            if digest in self._leaves:
                self._leaves.move_to_end(digest)
        else:
            kind, data = self.get_bytes(digest)
            obj = decode_object(kind, data, f"object {digest}")
            self._remember(digest, kind, obj)
        if type_ is not None and not isinstance(obj, type_):
            raise CorruptData(f"object {digest} is a {type(obj).__name__}, "
                              f"expected a {type_.__name__}", digest=digest)
        return obj

    def _remember(self, digest: str, kind: str, obj: Object) -> None:
        """Keep a tree node: immutable, small, and read on every lookup. A walk over a large
        version reads every leaf once, so leaves are kept only while among the LEAF_CACHE last
        used; inner nodes (a fifteenth as many, and on every path) up to NODE_CACHE."""
        if not kind.startswith("tree."):
            return
        self._cache[digest] = obj
        if kind == "tree.node":
            if len(self._counts) > COUNTS_KEPT:
                self._counts.clear()
            for child in obj.children:
                self._counts[child.node] = child.count
        if len(self._cache) > NODE_CACHE + LEAF_CACHE:
            del self._cache[next(iter(self._cache))]
        if kind == "tree.leaf":
            self._leaves[digest] = None
            if len(self._leaves) > LEAF_CACHE:
                self._cache.pop(self._leaves.popitem(last=False)[0], None)

    def prefetch(self, digests: list[str]) -> None:
        """Read the tree nodes of `digests` that are not in memory yet, together: a page of a
        version needs several children of one node. A failure is left to the read of the node
        itself, which reports it."""
        todo = [d for d in digests if d not in self._cache]
        if len(todo) < 2:
            return
        try:
            leaves = [self._counts.get(d) for d in todo]
            if self._read_ahead and all(c is not None and c <= LEAF_MAX for c in leaves):
                # Leaves, in id order (a node's children), written so: a read of the first
                # and the bytes after it takes the others, with one lookup.
                ahead = sum(c * LEAF_PER_ID + LEAF_HEAD for c in leaves[1:])
                if ahead <= READ_AHEAD:
                    kind, data = self.get_bytes(todo[0], ahead)
                    self._remember(todo[0], kind, decode_object(kind, data, "object"))
                    todo = [d for d in todo if d not in self._cache]
            if todo:
                for digest, (kind, data) in zip(todo, self.get_many_bytes(todo)):
                    self._remember(digest, kind, decode_object(kind, data, f"object {digest}"))
        except CasError:
            pass

    def missing(self, digests: Iterable[bytes],
                indexes: list[packfmt.IndexReader] | None = None) -> set[bytes]:
        """Which raw digests are not in `indexes` (default: every index): probes for few
        digests, one read of the digest column per index for many."""
        want = set(digests)
        for idx in (self.indexes() if indexes is None else indexes):
            if not want:
                break
            if len(want) * 16 > len(idx):
                want -= idx.all_digests()
            else:
                want = {d for d in want if idx.lookup(d) is None}
        return want

    def writer(self, lease: leases.Held | None = None) -> "PackWriter":
        """A pack writer for the holder of the writer's `lease`: objects in the packs a running
        gc may delete are written again rather than reused, and the writer may merge indexes
        and small packs (`self.maintain`). Without a lease (tests, tools) it does neither."""
        return PackWriter(self, lease=lease)

    def indexes_avoiding(self, packs: frozenset[str]) -> list[packfmt.IndexReader]:
        """The indexes to search for objects that may be reused: every index, except that no
        object in `packs` is found (a multi-pack index covering one is replaced by the pack
        indexes of its other packs)."""
        if not packs:
            return list(self.indexes())
        out, uncovered = [], set()
        for idx in self.indexes():  # the packs of a multi-pack index were read by indexes()
            if not packs.isdisjoint(idx.packs):
                uncovered.update(p for p in idx.packs if p not in packs)
            else:
                out.append(idx)
        have = {p for idx in out for p in idx.packs}
        out += [packfmt.IndexReader(self.backend, index_key(p)) for p in sorted(uncovered - have)]
        return out

    def pack_ids(self) -> list[str]:
        return [found[0] for found in map(parse_index_key, self.backend.list(PACKS)) if found]

    def unindexed_packs(self) -> list[str]:
        """Packs without an index: a write in flight, or a deletion interrupted between
        unpublishing a pack and deleting it."""
        keys = set(self.backend.list(PACKS))
        return sorted(found[0] for found in map(parse_pack_key, keys)
                      if found and index_key(found[0]) not in keys)

    def person_objects(self, pid: str, person: str) -> set[str]:
        """Digests of the objects in pack `pid` that name the person with keyed digest
        `person`, read from the pack itself (when its person index cannot be trusted)."""
        pack = self.backend.get(pack_key(pid))
        found = set()
        for off, length, kind in packfmt.parse_pack(pack, pack_key(pid)):
            if kind not in PERSON_KINDS:
                continue
            data = pack[off:off + length]
            named = named_person(kind, data)
            if named is not None and self.person_digest(named) == person:
                found.add(digest_of(KIND_BY_CODE[kind], data))
        return found

    def pack_objects(self, pid: str) -> tuple[set[bytes], set[str]]:
        """(raw digests, person shards) of the objects in a pack, read from the pack itself."""
        pack = self.backend.get(pack_key(pid))
        digests, shards = set(), set()
        for off, length, kind in packfmt.parse_pack(pack, pack_key(pid)):
            data = pack[off:off + length]
            name = KIND_BY_CODE.get(kind)
            if name is None:
                continue
            digests.add(to_bytes(digest_of(name, data)))
            person = named_person(kind, data)
            if person is not None and self.person_key is not None:
                shards.add(person_shard(self.person_digest(person)))
        return digests, shards


def _minimal_cover(multi: list[packfmt.IndexReader]) -> list[packfmt.IndexReader]:
    """The multi-pack indexes worth searching: largest first, each kept only if it covers a
    pack the ones kept before it do not (an index merged from others supersedes them)."""
    kept, covered = [], set()
    for m in sorted(multi, key=lambda m: (-len(m.packs), m.key)):
        if not covered.issuperset(m.packs):
            kept.append(m)
            covered.update(m.packs)
    return kept


def superseded_multi_indexes(readers: list[packfmt.IndexReader]) -> list[str]:
    """Keys of the multi-pack indexes `indexes()` no longer searches (gc deletes them)."""
    kept = {m.key for m in _minimal_cover(readers)}
    return sorted(m.key for m in readers if m.key not in kept)


class PackWriter:
    """Collects objects and writes them as packs: pack first, then its index (which publishes it).

    A crash between the two leaves a pack without an index: unreferenced bytes that fsck
    reports and gc removes, never a reference to missing data.
    """

    def __init__(self, store: ObjectStore, max_bytes: int | None = None,
                 lease: leases.Held | None = None,
                 avoid_packs: frozenset[str] | None = None, spool: bool | None = None) -> None:
        self.store = store
        self.max_bytes = max_bytes or packfmt.PACK_MAX_BYTES
        # A batch larger than a pack is spooled to local files and written at its end, each
        # pack a range of digests (packfmt.PackSpool), where a read costs a round trip (a
        # remote store): a page of consecutive ids then costs a request or two, not one per
        # pack of the batch. A local batch writes its full packs as it goes (spooling would
        # cost its ingest a tenth more time for reads that cost a pread each).
        self.spool = getattr(type(store.backend), "ROUND_TRIPS", False) \
            if spool is None else spool
        self._spool: packfmt.PackSpool | None = None
        self.lease = lease
        if avoid_packs is None:
            avoid_packs = lease.avoid_packs if lease is not None else frozenset()
        self.avoid_packs = avoid_packs
        # Deduplicate against the packs that existed when this batch began, plus what it has
        # flushed itself; rereading its own indexes on every flush would cost O(flushes^2).
        self._known = store.indexes_avoiding(self.avoid_packs)
        self._flushed: set[bytes] = set()  # (and spooled)
        self._indexes_written: list[bytes] = []  # for the multi-pack index
        # The pack being built: objects are appended to it as they are added (their bytes are
        # kept once), and written when it is full or at the end of the batch.
        self._pack = packfmt.PackBuffer()
        self._pending: dict[bytes, tuple[int, int, int]] = {}  # raw -> (offset, length, kind)
        self._persons: dict[bytes, set[str]] = {}  # pending object -> keyed digests of people
        self.objects_written = 0
        self.bytes_written = 0
        self.packs_written = 0
        self._maintained = False
        self._thread = None  # writes full packs while a large batch goes on (_flush_pending)
        self._writing = None  # (pack id, future) of the pack in flight

    def add(self, obj: Object, persons: Iterable[str] = ()) -> str:
        """Add a record; `persons`: the people an object names without a `person` field (the
        cases a provenance object describes), so that their erasure finds it too."""
        kind, data, digest = encode_object(obj)
        self.add_encoded(kind, data, digest, getattr(obj, "person", None), persons)
        return digest

    def add_encoded(self, kind: str, data: bytes, digest: str,
                    person: str | None = None, persons: Iterable[str] = ()) -> bytes:
        """Add an object already encoded; its raw digest (the writer's own key for it, which
        a caller collecting a million ids may share instead of keeping another copy)."""
        raw = to_bytes(digest)
        if raw in self._pending or raw in self._flushed:
            return raw
        code = KIND_CODES[kind]
        keyed = None
        if self.store.person_key is not None:
            if persons:
                named = {p for p in (person, *persons) if p is not None}
                keyed = {self.store.person_digest(p) for p in named}
            elif person is not None:  # (a case or a run: the loop of a large ingest)
                keyed = {self.store.person_digest(person)}
        if self._spool is not None and code not in packfmt.TREE_CODES:
            self._spool.add(raw, code, data, keyed)
            self._flushed.add(raw)
            if self._spool.bytes >= self._renew_at:
                self._renew_at += self.max_bytes
                if self.lease is not None:
                    self.lease.renew()  # as a batch writing its packs does, a pack at a time
                if self._spool.bytes >= self._spool_limit:
                    self._drain_spool()  # (the batch goes on; a full pack begins a new one)
            return raw
        self._pending[raw] = (self._pack.append(code, data), len(data), code)
        if keyed:
            self._persons[raw] = keyed
        if len(self._pack) >= self.max_bytes:
            if self.spool and self._spool is None:
                self._start_spool()
            if len(self._pack) >= self.max_bytes:  # (a spooling batch's tree nodes)
                self._flush_pending(background=True)
        return raw

    def _start_spool(self) -> None:
        """Move the pending objects to a spool, where the rest of the batch goes too (tree
        nodes stay pending: they go to packs of their own, in the order they came)."""
        cache = self.store.cache_dir  # a remote store's local disk, else the temp directory
        spool = packfmt.PackSpool(os.path.dirname(cache) if cache else None)
        pending, view, self._pack = self._pending, memoryview(self._pack.data), \
            packfmt.PackBuffer()
        self._pending = {}
        for raw, (at, n, code) in pending.items():
            if code in packfmt.TREE_CODES:
                self._pending[raw] = (self._pack.append(code, view[at:at + n]), n, code)
            else:
                spool.add(raw, code, view[at:at + n], self._persons.pop(raw, None))
                self._flushed.add(raw)
        del view
        disk = os.statvfs(spool.directory)  # (shutil.disk_usage: shutil costs every start)
        free = disk.f_bavail * disk.f_frsize
        self._spool_limit = max(self.max_bytes, min(SPOOL_MAX_BYTES, free // 2))
        self._spool, self._renew_at = spool, spool.bytes + self.max_bytes

    def _drain_spool(self) -> None:
        """Write the spooled objects as packs, in digest order, a pack in flight while the
        next is built."""
        spool, self._spool = self._spool, None
        if spool is None:
            return
        if self._pending:  # tree nodes: a pack of their own, in the order they came
            self._flush_pending(background=True)
        try:
            for raw, code, data, keyed in spool.drain():
                self._pending[raw] = (self._pack.append(code, data), len(data), code)
                if keyed:
                    self._persons[raw] = keyed
                if len(self._pack) >= self.max_bytes:
                    self._flush_pending(background=True)
        finally:
            spool.close()

    def pending(self, digest: str) -> bool:
        raw = to_bytes(digest)
        return raw in self._pending or self._spool is not None and raw in self._flushed

    def flush(self) -> None:
        """Write what is pending; once a batch has written several packs, also one index
        over all of them, so readers search one index instead of one per pack."""
        self._drain_spool()
        self._flush_pending()  # (waits for the pack in flight first)
        if len(self._indexes_written) >= 2:
            data = packfmt.format_multi_index(self._indexes_written)
            key = multi_index_key(data[-packfmt.DIGEST_LEN:].hex())
            self.store.backend.put_if_absent(key, data)  # after every pack and index it covers
            self.bytes_written += len(data)
            self._indexes_written = []
            self.store.refresh()
        maintain = self.store.maintain
        if self.packs_written and self.lease is not None and maintain is not None \
                and not self._maintained:
            self._maintained = True  # once per batch: its later flushes add a pack or two
            # Estimated from the indexes this batch started with (no storage call).
            uncovered = sum(not i.multi for i in self._known) + (self.packs_written == 1)
            written = maintain(self.store, self.lease, uncovered)
            if written is not None:
                self.bytes_written += written
                # It may have merged this batch's packs away: a later flush (a commit
                # retried on a new head) must not publish a multi-pack index naming them.
                self._indexes_written = []

    def write_packs(self) -> list[bytes]:
        """Write what is pending and return the indexes of the packs this writer wrote since
        (a helper process storing part of a batch: the batch's own writer adopts them)."""
        self._drain_spool()
        self._flush_pending()
        written, self._indexes_written = self._indexes_written, []
        return written

    def adopt(self, indexes: list[bytes], objects: int, bytes_written: int) -> None:
        """Count packs another process wrote for this batch (published: `indexes` are theirs)
        as this writer's: its multi-pack index covers them, and they are searched."""
        for index in indexes:
            self._indexes_written.append(index)
            self._published(packfmt.index_pack(index))
        self.objects_written += objects
        self.bytes_written += bytes_written
        self.packs_written += len(indexes)

    def _flush_pending(self, background: bool = False) -> None:
        """Write the pending objects as one pack (those not stored already). With
        `background` (a batch that filled a pack and goes on), the pack and its index are
        written from a thread while the caller adds the next objects: writing and syncing
        64 MB hold no interpreter lock, so they overlap the encoding. One pack is in flight
        at a time: memory holds it and the pack being built."""
        self._await_writing()
        if self.lease is not None:
            self.lease.renew()  # a batch of many packs outlives a third of a lease's life
        if not self._pending:
            return
        want = set(self._pending)  # (never flushed before: add_encoded skips those)
        for _ in range(LOCATE_ATTEMPTS):
            try:
                absent = self.store.missing(want, self._known)
                break
            except NotFound:
                # gc or an erasure replaced a pack since this batch began: its live objects
                # are in the pack that replaced it, so look again in the packs there are now.
                self.store.refresh()
                self._known = self.store.indexes_avoiding(self.avoid_packs)
        else:
            raise Aborted("the packs kept being replaced while this write checked what is "
                          "stored; nothing was sealed; retry", reason="PACKS_CHANGING")
        pending, built, every_person = self._pending, self._pack, self._persons
        self._pending, self._pack, self._persons = {}, packfmt.PackBuffer(), {}
        if not absent:
            return
        if len(absent) < len(pending) or not background:
            # A pack of those not stored already, in digest order (docs/format.md 7): a page
            # of a version reads consecutive ids, which then lie together. Not a full pack of
            # a batch going on: the copy in another order would cost a local ingest a tenth
            # more time (a batch spooled comes in digest order already).
            items = pending.items() if background else sorted(  # (pending: as they came)
                pending.items(), key=lambda item: packfmt.pack_order(item[0], item[1][2]))
            view, built = memoryview(built.data), packfmt.PackBuffer()
            pending = {d: (built.append(kind, view[at:at + n]), n, kind)
                       for d, (at, n, kind) in items if d in absent}
            del view
        persons = {d: every_person[d] for d in pending if d in every_person}
        pack = built.seal()
        pid = packfmt.pack_id(pack)
        if pid in self.avoid_packs:
            # The same bytes as a pack a running gc is deleting (unpublished, or rewritten):
            # publishing our index over it could leave an index whose pack is gone.
            raise Aborted(f"a gc is deleting pack {pid}, which holds exactly the objects this "
                          "write stores; nothing was sealed; retry when the gc ends",
                          reason="GC_IN_PROGRESS", pack=pid)
        entries = [packfmt.Entry(d, at, n, kind) for d, (at, n, kind) in pending.items()]
        index = packfmt.format_index(pid, entries)
        # Before the pack: a person's bytes are never stored unindexed. (Its 256 small files
        # stay in line: from a thread, each call would wait for the lock the encoding holds.)
        self.bytes_written += self.store.persons.write_table(pid, persons)
        self.objects_written += len(entries)
        self.bytes_written += len(pack) + len(index)
        self.packs_written += 1
        self._flushed.update(pending)
        self._indexes_written.append(index)
        if background:
            from concurrent.futures import ThreadPoolExecutor
            if self._thread is None:
                self._thread = ThreadPoolExecutor(1, thread_name_prefix="cas-pack")
            self._writing = (pid, self._thread.submit(self._write_pack, pid, pack, index))
        else:
            self._write_pack(pid, pack, index)
            self._published(pid)

    def _write_pack(self, pid: str, pack: bytes, index: bytes) -> None:
        self.store.backend.put_if_absent(pack_key(pid), pack)
        self.store.backend.put_if_absent(index_key(pid), index)  # publishes the pack

    def _published(self, pid: str) -> None:
        self.store.indexes().insert(0, packfmt.IndexReader(self.store.backend, index_key(pid)))

    def _await_writing(self) -> None:
        """Wait for the pack in flight, if any (its failure is raised here)."""
        if self._writing is not None:
            pid, future = self._writing
            self._writing = None
            future.result()
            self._published(pid)

    def close(self) -> None:
        """Wait for the pack in flight and stop the writing thread; what is pending stays
        unwritten (a batch that failed: its packs so far are garbage that gc collects)."""
        try:
            if self._spool is not None:
                self._spool.close()
                self._spool = None
            if self._writing is not None:
                self._writing[1].exception()  # wait: nothing may write once the batch is over
                self._writing = None
        finally:
            if self._thread is not None:
                self._thread.shutdown()
                self._thread = None

    def __enter__(self) -> "PackWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.flush()
        finally:
            self.close()
