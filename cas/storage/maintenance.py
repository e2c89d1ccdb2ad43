"""Pack maintenance: merging small packs and pack indexes, rewriting and deleting packs.

Each function works over an object store (cas.storage.store.ObjectStore, passed in): the
writers' own upkeep (`maintain`), and the rewrites gc and erasure make (`rewrite_packs`,
`drop_packs`). A rewrite writes the new pack, its index and its person table before it deletes
the old ones, so every object kept stays readable throughout (docs/format.md 8.1, section 9).
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from cas.digest import digest_of, from_bytes
from cas.errors import CasError, DigestMismatch
from cas.format.keys import (PACKS, index_key, multi_index_key, pack_key, parse_multi_index_key,
                             person_index_key, person_shard, person_shards_key, person_table_key)
from cas.format.records import KIND_BY_CODE
from cas.storage import leases
from cas.storage import pack as packfmt
from cas.storage.person_index import PERSON_KINDS, PersonFiles, named_person

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


class Rewrite(NamedTuple):
    new_pack: str | None    # None: every object was dropped, no pack replaces it
    dropped: int            # objects left out
    bytes_dropped: int
    bytes_before: int       # of the old pack and its index
    bytes_written: int      # of the new pack and its index
    index: bytes | None = None  # the new pack's index, as written (None in a dry run)


def maintain(store, lease: leases.Held, uncovered: int) -> int | None:
    """Merge pack indexes into a multi-pack index once AUTO_MULTI_INDEX_AT of them are
    uncovered (all of them into one once MERGE_MULTI_INDEXES_AT multi-pack indexes exist
    too), merging the small packs among them into one pack first; returns the bytes
    written, or None without a look when `uncovered` (a writer's estimate from the indexes
    its batch started with: most writes are far from the threshold and must not pay a
    listing for it) is under the threshold. Only for a writer holding its `lease`: the packs
    a running gc may delete are left out. Every index merged is verified whole first, so
    damage is never copied into a valid-looking multi-pack index; a pack replaced meanwhile
    (gc, erasure) just skips the merge."""
    if uncovered < AUTO_MULTI_INDEX_AT:
        return None
    store.refresh()
    avoid = lease.avoid_packs
    found = store.indexes()
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
            data = store.backend.get(index_key(pid))
            _, entries = packfmt.parse_index(data, index_key(pid))
        except CasError:  # NotFound (replaced meanwhile) or damage (fsck's to report)
            return 0
        blobs[pid] = data
        sizes[pid] = sum(e.length for e in entries)
    batch, total = [], 0
    for pid in sorted(blobs, key=lambda p: (sizes[p], p)):  # the smallest first
        if sizes[pid] >= SMALL_PACK or (batch and total + sizes[pid] > packfmt.PACK_MAX_BYTES):
            break
        batch.append(pid)
        total += sizes[pid]
    try:
        merged = merge_packs(store, batch, lease) if len(batch) >= 2 else None
    except CasError:  # (a pack replaced meanwhile, damage, or storage failing mid-merge)
        store.refresh()  # which packs are left is unknown: index them next time
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
        store.backend.put_if_absent(multi_index_key(data[-packfmt.DIGEST_LEN:].hex()), data)
        written += len(data)
    store.refresh()
    return written


def merge_packs(store, pids: list[str], lease: leases.Held) -> Rewrite | None:
    """Merge packs `pids` into one, as gc would but dropping nothing, for the holder of a
    writer's `lease`, and only while no one else is at work: it first publishes a gc lease
    naming the packs (writers that start later keep clear of them, and a gc or erasure that
    starts later waits for the writer's lease), then looks at the other leases and gives
    up if any is live (a writer, gc or erasure that started first). Returns the rewrite, or
    None when it gave way; a pack replaced or damaged meanwhile raises (rewrite_packs)."""
    with leases.acquire(lease.ctx, leases.GC, leases.MERGE, packs=sorted(pids)) as claim:
        if any(key != lease.key for key in claim.others):
            return None
        return rewrite_packs(store, sorted(pids), set())


def rewrite_pack(store, pid: str, drop: set[bytes]) -> Rewrite:
    """Replace pack `pid` by one without the objects in `drop` (raw digests), or delete it
    if nothing is left (see `rewrite_packs`)."""
    return rewrite_packs(store, [pid], drop)


def rewrite_packs(store, pids: list[str], drop: set[bytes], dry_run: bool = False) -> Rewrite:
    """Replace packs `pids` by one pack holding their objects except those in `drop` (raw
    digests), or by none if nothing is left. The new pack, its index and person index are
    written before the old ones are deleted, so every kept object stays readable
    throughout; a crash leaves both (the same objects twice), never neither.
    Deterministic: the same packs and drop set give the same new pack, so a repeated
    rewrite is a no-op. A dry run computes the same result and writes nothing."""
    backend = store.backend
    keyed = store.person_key is not None
    kept, shards, new_persons, seen = [], {}, {}, set()
    dropped = bytes_dropped = before = written = 0
    # Objects that do not name their people (provenance) keep the entries they had.
    carried = store.persons.entries(pids)
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
            person = named_person(e.kind, data)
            if person is not None and keyed:
                shards[pid].add(person_shard(store.person_digest(person)))
            if e.digest in drop:
                dropped += 1
                bytes_dropped += e.length
                continue
            if e.digest in seen:  # the same object in two of the packs: keep it once
                continue
            seen.add(e.digest)
            kept.append((e.digest, e.kind, data))
            if person is not None and keyed:
                new_persons[e.digest] = {store.person_digest(person)}
            elif e.kind not in PERSON_KINDS and e.digest in carried:
                new_persons[e.digest] = carried[e.digest]
    new_pid = None
    if kept and not dropped and len(pids) == 1:  # the same objects: the pack stays, whatever
        return Rewrite(pids[0], 0, 0, before, before)  # order it holds them in
    if kept:
        kept.sort(key=lambda obj: packfmt.pack_order(obj[0], obj[1]))  # (docs/format.md 7)
        new_pack, spans = packfmt.format_pack((kind, data) for _, kind, data in kept)
        new_pid = packfmt.pack_id(new_pack)
        if pids == [new_pid]:
            return Rewrite(new_pid, 0, 0, before, before)
        index = packfmt.format_index(new_pid, [
            packfmt.Entry(d, off, length, kind)
            for (d, kind, _), (off, length) in zip(kept, spans)])
        if dry_run:
            return Rewrite(new_pid, dropped, bytes_dropped, before, len(new_pack) + len(index))
        store.persons.write_table(new_pid, new_persons)
        backend.put_if_absent(pack_key(new_pid), new_pack)
        backend.put_if_absent(index_key(new_pid), index)
        written += len(new_pack) + len(index)
    if dry_run:
        return Rewrite(None, dropped, bytes_dropped, before, 0)
    drop_packs(store, {pid: shards[pid] for pid in pids if pid != new_pid})
    for raw in drop:
        store.evict(from_bytes(raw))
    return Rewrite(new_pid, dropped, bytes_dropped, before, written,
                   index if new_pid is not None else None)


def drop_pack(store, pid: str, shards: Iterable[str] = ()) -> None:
    drop_packs(store, {pid: shards})


def drop_packs(store, shards_by_pack: dict[str, Iterable[str]]) -> None:
    """Delete packs: first every multi-pack index covering one (the packs' own indexes
    answer instead), then per pack its index (unpublishing it), the pack, and its person
    index files (those listed, and those the shards given, read from the pack, name)."""
    if not shards_by_pack:
        return
    backend = store.backend
    listed = store.persons.files(shards_by_pack)
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
    store.refresh()
