"""Object store: typed objects by digest, written in packs, verified on every read."""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Iterable, NamedTuple

import msgspec

from cas.storage import leases
from cas.storage import pack as packfmt
from cas.storage import person_table
from cas.storage.backends import get_ranges
from cas.digest import digest_of, from_bytes, person_digest, to_bytes
from cas.errors import Aborted, CasError, CorruptData, DigestMismatch, NotFound
# (PERSONS, person_shards_key and parse_person_shards_key are imported from here by others)
from cas.format.keys import (PACKS, PERSON_TABLES, PERSONS, SHARDS, index_key, multi_index_key,
                             pack_key, parse_index_key, parse_multi_index_key, parse_pack_key,
                             parse_person_shards_key, person_index_key, person_shard,
                             person_shards_key, person_table_key, split_map_key)
from cas.format.records import (KIND_BY_CODE, KIND_CODES, Object, PersonIndex, decode_object,
                                encode_object, parse_record_file)

PACK_MAX_BYTES = 64 << 20  # a batch is flushed as one pack once it holds this much
NODE_CACHE = 8192  # inner tree nodes kept in memory
LEAF_CACHE = 256   # tree leaves kept in memory (each holds up to 64 ids)
READ_GAP = 64 << 10  # objects of a pack this close together are read in one request
LOCATE_ATTEMPTS = 20  # listings of the indexes one lookup may take while packs are replaced
PERSON_DIGESTS_KEPT = 1 << 16  # keyed digests of people a store remembers (a few MB)
TABLE_SHARDS_KEPT = 1 << 12  # person table shards whose rows a store remembers
# Packs that maintain themselves (docs/format.md 8.1): once a writer sees this many pack
# indexes that no multi-pack index covers, it merges them into one; once there are this many
# multi-pack indexes too, it merges every pack index into one. A lookup then searches a few
# indexes however many writes made the packs.
AUTO_MULTI_INDEX_AT = 16
MERGE_MULTI_INDEXES_AT = 8
# Packs smaller than this are merged: by that writer, those among the indexes it merges (when no
# one else is at work), and by gc, every one past its grace period. One per promotion adds up.
SMALL_PACK = 4 << 20
MAX_MULTI_PACKS = 65535  # a multi-pack index row names its pack by a 16-bit ordinal
# the objects that name a person (a cassette names its case's)
PERSON_KINDS = (KIND_CODES["case"], KIND_CODES["run"], KIND_CODES["cassette"])


class _PersonOnly(msgspec.Struct):
    person: str | None = None


_read_person = msgspec.json.Decoder(_PersonOnly).decode


class PersonFiles(NamedTuple):
    """The person index files a pack has, as listed: the key of its person table, and that of
    its person-shards record (a pack written before person tables); None for neither. Each
    key ends with the map of the shards its files list people in."""

    table: str | None
    records: str | None

    def names(self, shard: str, table_only: bool = False) -> bool:
        """Whether its files (its person table alone, with `table_only`) list people in
        `shard`."""
        bit = 1 << int(shard, 16)
        return any(key is not None and int(key[-64:], 16) & bit
                   for key in (self[:1] if table_only else self))

    def record_shards(self) -> set[str]:
        """The shards of its person index records (written before person tables)."""
        return parse_person_shards_key(self.records)[1] if self.records is not None else set()


class Rewrite(NamedTuple):
    new_pack: str | None    # None: every object was dropped, no pack replaces it
    dropped: int            # objects left out
    bytes_dropped: int
    bytes_before: int       # of the old pack and its index
    bytes_written: int      # of the new pack and its index
    index: bytes | None = None  # the new pack's index, as written (None in a dry run)


class ObjectStore:
    def __init__(self, backend, cache_dir: str | None = None,
                 person_key: bytes | None = None) -> None:
        self.backend = backend
        # Objects naming a person are indexed by the keyed digest of the person, so that an
        # erasure finds them without reading the repository (cas/erasure.py).
        self.person_key = person_key
        self._person_digests: dict[str, str] = {}
        # The rows of person table shards read: a confirmed erasure looks its person up twice
        self._table_shards: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._indexes: list[packfmt.IndexReader] | None = None
        self._verified: set[str] = set()  # index keys checked whole (verify_indexes)
        self._answered: set[str] = set()  # index keys that held objects of the last batch
        self._cache: dict[str, Object] = {}
        self._leaves: OrderedDict[str, None] = OrderedDict()  # the cached leaves, oldest first
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

    def get_bytes(self, digest: str) -> tuple[str, bytes]:
        """(kind, bytes) of one object, its digest verified."""
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
            try:
                data = self.backend.get_range(key, entry.offset, entry.length)
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
        got = digest_of(kind, data)
        if got != digest:
            raise DigestMismatch(digest, got, key)
        if self.cache_dir:
            self._write_cache(digest, kind, data)
        return kind, data

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
        for pack, entries in by_pack.items():
            entries.sort(key=lambda e: e.offset)
            runs, run = [], [entries[0]]
            for e in entries[1:]:
                if e.offset - (run[-1].offset + run[-1].length) > READ_GAP:
                    runs.append(run)
                    run = []
                run.append(e)
            runs.append(run)
            spans = [(run[0].offset, run[-1].offset + run[-1].length - run[0].offset)
                     for run in runs]
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
        and small packs (`maintain`). Without a lease (tests, tools) it does neither."""
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

    def maintain(self, lease: leases.Held) -> int:
        """Merge pack indexes into a multi-pack index once AUTO_MULTI_INDEX_AT of them are
        uncovered (all of them into one once MERGE_MULTI_INDEXES_AT multi-pack indexes exist
        too), merging the small packs among them into one pack first; returns the bytes
        written (0: nothing to do). Only for a writer holding its `lease`: the packs a running
        gc may delete are left out. Every index merged is verified whole first, so damage is
        never copied into a valid-looking multi-pack index; a pack replaced meanwhile (gc,
        erasure) just skips the merge."""
        self.refresh()
        avoid = lease.avoid_packs
        found = self.indexes()
        singles = [i.packs[0] for i in found if not i.multi and i.packs[0] not in avoid]
        if len(singles) < AUTO_MULTI_INDEX_AT:
            return 0
        multis = [i for i in found if i.multi]
        packs = set(singles)
        if len(multis) + 1 >= MERGE_MULTI_INDEXES_AT:
            packs.update(p for m in multis for p in m.packs if p not in avoid)
        blobs, sizes = {}, {}
        for pid in sorted(packs)[:MAX_MULTI_PACKS]:
            try:
                data = self.backend.get(index_key(pid))
                _, entries = packfmt.parse_index(data, index_key(pid))
            except CasError:  # NotFound (replaced meanwhile) or damage (fsck's to report)
                return 0
            blobs[pid] = data
            sizes[pid] = sum(e.length for e in entries)
        batch, total = [], 0
        for pid in sorted(blobs, key=lambda p: (sizes[p], p)):  # the smallest first
            if sizes[pid] >= SMALL_PACK or (batch and total + sizes[pid] > PACK_MAX_BYTES):
                break
            batch.append(pid)
            total += sizes[pid]
        try:
            merged = self.merge_packs(batch, lease) if len(batch) >= 2 else None
        except CasError:  # (a pack replaced meanwhile, damage, or storage failing mid-merge)
            self.refresh()  # which packs are left is unknown: index them next time
            return 0
        written = 0
        if merged is not None:
            for pid in batch:
                del blobs[pid]
            written += merged.bytes_written
            if merged.new_pack is not None:
                blobs[merged.new_pack] = merged.index
        if len(blobs) >= 2:
            data = packfmt.format_multi_index([blobs[p] for p in sorted(blobs)])
            self.backend.put_if_absent(multi_index_key(data[-packfmt.DIGEST_LEN:].hex()), data)
            written += len(data)
        self.refresh()
        return written

    def merge_packs(self, pids: list[str], lease: leases.Held) -> Rewrite | None:
        """Merge packs `pids` into one, as gc would but dropping nothing, for the holder of a
        writer's `lease`, and only while no one else is at work: it first publishes a gc lease
        naming the packs (writers that start later keep clear of them, and a gc or erasure that
        starts later waits for the writer's lease), then looks at the other leases and gives
        up if any is live (a writer, gc or erasure that started first). Returns the rewrite, or
        None when it gave way; a pack replaced or damaged meanwhile raises (rewrite_packs)."""
        with leases.acquire(lease.repo, leases.GC, leases.MERGE, packs=sorted(pids)) as claim:
            if any(key != lease.key for key in claim.others):
                return None
            return self.rewrite_packs(sorted(pids), set())

    def pack_ids(self) -> list[str]:
        return [found[0] for found in map(parse_index_key, self.backend.list(PACKS)) if found]

    def write_person_index(self, pid: str, persons: dict[bytes, Iterable[str]]) -> int:
        """Write the person table of pack `pid` (raw digest -> keyed persons: one for a case or
        a run, those of its cases for a provenance object; one file, possibly of no rows).
        Returns bytes."""
        data, shards = person_table.format_table(pid, persons)
        self.backend.put_if_absent(person_table_key(pid, shards), data)
        return len(data)

    def rewrite_pack(self, pid: str, drop: set[bytes]) -> Rewrite:
        """Replace pack `pid` by one without the objects in `drop` (raw digests), or delete it
        if nothing is left (see `rewrite_packs`)."""
        return self.rewrite_packs([pid], drop)

    def rewrite_packs(self, pids: list[str], drop: set[bytes], dry_run: bool = False) -> Rewrite:
        """Replace packs `pids` by one pack holding their objects except those in `drop` (raw
        digests), or by none if nothing is left. The new pack, its index and person index are
        written before the old ones are deleted, so every kept object stays readable
        throughout; a crash leaves both (the same objects twice), never neither.
        Deterministic: the same packs and drop set give the same new pack, so a repeated
        rewrite is a no-op. A dry run computes the same result and writes nothing."""
        backend = self.backend
        kept, shards, new_persons, seen = [], {}, {}, set()
        dropped = bytes_dropped = before = written = 0
        # Objects that do not name their people (provenance) keep the entries they had.
        carried = self._person_entries(pids)
        for pid in pids:
            index = backend.get(index_key(pid))
            _, entries = packfmt.parse_index(index, index_key(pid))
            pack = backend.get(pack_key(pid))
            before += len(pack) + len(index)
            list(packfmt.parse_pack(pack, pack_key(pid)))  # verify the whole pack first
            shards[pid] = set()
            for e in sorted(entries, key=lambda e: e.offset):
                data = pack[e.offset:e.offset + e.length]
                if digest_of(KIND_BY_CODE[e.kind], data) != from_bytes(e.digest):
                    raise DigestMismatch(from_bytes(e.digest),
                                         digest_of(KIND_BY_CODE[e.kind], data), pack_key(pid))
                person = _read_person(data).person if e.kind in PERSON_KINDS else None
                if person is not None and self.person_key is not None:
                    shards[pid].add(person_shard(self.person_digest(person)))
                if e.digest in drop:
                    dropped += 1
                    bytes_dropped += e.length
                    continue
                if e.digest in seen:  # the same object in two of the packs: keep it once
                    continue
                seen.add(e.digest)
                kept.append((e.digest, e.kind, data))
                if person is not None and self.person_key is not None:
                    new_persons[e.digest] = {self.person_digest(person)}
                elif e.kind not in PERSON_KINDS and e.digest in carried:
                    new_persons[e.digest] = carried[e.digest]
        new_pid = None
        if kept:
            new_pack, spans = packfmt.format_pack((kind, data) for _, kind, data in kept)
            new_pid = packfmt.pack_id(new_pack)
            if pids == [new_pid]:
                return Rewrite(new_pid, 0, 0, before, before)
            index = packfmt.format_index(new_pid, [
                packfmt.Entry(d, off, length, kind)
                for (d, kind, _), (off, length) in zip(kept, spans)])
            if dry_run:
                return Rewrite(new_pid, dropped, bytes_dropped, before, len(new_pack) + len(index))
            self.write_person_index(new_pid, new_persons)
            backend.put_if_absent(pack_key(new_pid), new_pack)
            backend.put_if_absent(index_key(new_pid), index)
            written += len(new_pack) + len(index)
        if dry_run:
            return Rewrite(None, dropped, bytes_dropped, before, 0)
        self.drop_packs({pid: shards[pid] for pid in pids if pid != new_pid})
        for raw in drop:
            self.evict(from_bytes(raw))
        return Rewrite(new_pid, dropped, bytes_dropped, before, written,
                       index if new_pid is not None else None)

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
            named = _read_person(data).person
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
            person = _read_person(data).person if kind in PERSON_KINDS else None
            if person is not None and self.person_key is not None:
                shards.add(person_shard(self.person_digest(person)))
        return digests, shards

    def _person_entries(self, pids: list[str]) -> dict[bytes, set[str]]:
        """Raw digest -> keyed persons, as the person index files of packs `pids` say."""
        out: dict[bytes, set[str]] = {}
        for pid, files in self.person_files(pids).items():
            for person, digest in self.person_rows(pid, files):
                out.setdefault(to_bytes(digest), set()).add(person)
        return out

    def person_rows(self, pid: str, files: PersonFiles) -> list[tuple[str, str]]:
        """(keyed person, digest) of every row the person index files of pack `pid` hold. A
        file lost or damaged is passed over: a rewrite indexes the pack's cases and runs anew
        from their bytes, and only provenance objects keep what the index said."""
        rows: list[tuple[str, str]] = []
        if files.table is not None:
            try:
                rows += [row for part in person_table.parse_table(
                    self.backend.get(files.table), files.table)[1].values() for row in part]
            except (NotFound, CorruptData, DigestMismatch):
                pass
        for shard in sorted(files.record_shards()):
            key = person_index_key(shard, pid)
            try:
                record = parse_record_file(self.backend.get(key), PersonIndex, key)
            except (NotFound, CorruptData, DigestMismatch):
                continue
            rows += [(e.person, e.digest) for e in record.entries]
        return rows

    def person_table_shard(self, key: str, shard: str) -> list[tuple[str, str]]:
        """The rows of one shard of a person table: its header, then those rows (two range
        reads, each checked). NotFound if it is gone; CorruptData if damaged."""
        kept = self._table_shards.get((key, shard))
        if kept is not None:  # a table never changes under its name (its pack's id and map)
            return kept
        head = self.backend.get_range(key, 0, person_table.HEADER_SIZE)
        found = split_map_key(key, PERSON_TABLES)
        if found is None or person_table.parse_header(head, key) != found[0]:
            raise CorruptData(f"{key} is not the person table of the pack its name says",
                              key=key)
        offset, length, _ = person_table.shard_span(head, shard, key)
        rows = self.backend.get_range(key, offset, length) if length else b""
        parsed = person_table.parse_shard(rows, head, shard, key)
        if len(self._table_shards) >= TABLE_SHARDS_KEPT:
            self._table_shards.clear()
        self._table_shards[(key, shard)] = parsed
        return parsed

    def person_files(self, pids: Iterable[str] | None = None) -> dict[str, PersonFiles]:
        """Pack id -> the person index files it has, for `pids` (every pack if None), by one
        listing of the person tables and one of the person-shards records."""
        wanted = None if pids is None else set(pids)
        found: dict[str, list] = {}
        for at, prefix in enumerate((PERSON_TABLES, SHARDS)):
            for key in self.backend.list(prefix):
                if wanted is not None and key[len(prefix):len(prefix) + 64] not in wanted:
                    continue
                parsed = split_map_key(key, prefix)
                if parsed is not None:
                    found.setdefault(parsed[0], [None, None])[at] = key
        return {pid: PersonFiles(*slot) for pid, slot in found.items()}

    def drop_pack(self, pid: str, shards: Iterable[str] = ()) -> None:
        self.drop_packs({pid: shards})

    def drop_packs(self, shards_by_pack: dict[str, Iterable[str]]) -> None:
        """Delete packs: first every multi-pack index covering one (the packs' own indexes
        answer instead), then per pack its index (unpublishing it), the pack, and its person
        index files (those listed, and those the shards given, read from the pack, name)."""
        if not shards_by_pack:
            return
        backend = self.backend
        listed = self.person_files(shards_by_pack)
        for key in list(backend.list(PACKS)):
            if parse_multi_index_key(key) and not shards_by_pack.keys().isdisjoint(
                    packfmt.IndexReader(backend, key).packs):
                backend.delete(key)
        for pid, shards in shards_by_pack.items():
            shards = set(shards)
            backend.delete(index_key(pid))
            backend.delete(pack_key(pid))
            files = listed.get(pid, PersonFiles(None, None))
            for key in {files.table, person_table_key(pid, shards)} - {None}:
                backend.delete(key)
            if files.table is None or files.records is not None:  # written before tables
                named = files.record_shards()
                for shard in sorted(shards | named):
                    backend.delete(person_index_key(shard, pid))
                for key in {files.records, person_shards_key(pid, shards)} - {None}:
                    backend.delete(key)
        self.refresh()


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
                 avoid_packs: frozenset[str] | None = None) -> None:
        self.store = store
        self.max_bytes = max_bytes or PACK_MAX_BYTES
        self.lease = lease
        if avoid_packs is None:
            avoid_packs = lease.avoid_packs if lease is not None else frozenset()
        self.avoid_packs = avoid_packs
        # Deduplicate against the packs that existed when this batch began, plus what it has
        # flushed itself; rereading its own indexes on every flush would cost O(flushes^2).
        self._known = store.indexes_avoiding(self.avoid_packs)
        self._flushed: set[bytes] = set()
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
        self._pending[raw] = (self._pack.append(code, data), len(data), code)
        if self.store.person_key is not None:
            if persons:
                named = {p for p in (person, *persons) if p is not None}
                self._persons[raw] = {self.store.person_digest(p) for p in named}
            elif person is not None:  # (a case or a run: the loop of a large ingest)
                self._persons[raw] = {self.store.person_digest(person)}
        if len(self._pack) >= self.max_bytes:
            self._flush_pending(background=True)
        return raw

    def pending(self, digest: str) -> bool:
        return to_bytes(digest) in self._pending

    def flush(self) -> None:
        """Write what is pending; once a batch has written several packs, also one index
        over all of them, so readers search one index instead of one per pack."""
        self._flush_pending()  # (waits for the pack in flight first)
        if len(self._indexes_written) >= 2:
            data = packfmt.format_multi_index(self._indexes_written)
            key = multi_index_key(data[-packfmt.DIGEST_LEN:].hex())
            self.store.backend.put_if_absent(key, data)  # after every pack and index it covers
            self.bytes_written += len(data)
            self._indexes_written = []
            self.store.refresh()
        if self.packs_written and self.lease is not None and not self._maintained:
            self._maintained = True  # once per batch: its later flushes add a pack or two
            # Estimated from the indexes this batch started with (no storage call): most
            # writes are far from the threshold and must not pay a listing for it.
            uncovered = sum(not i.multi for i in self._known) + (self.packs_written == 1)
            if uncovered >= AUTO_MULTI_INDEX_AT:
                self.bytes_written += self.store.maintain(self.lease)
                # It may have merged this batch's packs away: a later flush (a commit
                # retried on a new head) must not publish a multi-pack index naming them.
                self._indexes_written = []

    def write_packs(self) -> list[bytes]:
        """Write what is pending and return the indexes of the packs this writer wrote since
        (a helper process storing part of a batch: the batch's own writer adopts them)."""
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
        if len(absent) < len(pending):  # some were stored already: a pack of the others
            old, built = built.data, packfmt.PackBuffer()
            pending = {d: (built.append(kind, old[at:at + n]), n, kind)
                       for d, (at, n, kind) in pending.items() if d in absent}
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
        self.bytes_written += self.store.write_person_index(pid, persons)
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
