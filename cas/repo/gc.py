"""Garbage collection: delete objects nothing reaches, rewriting packs that are mostly garbage,
merging small packs, and collecting stale proposals.

Reachable: every tree node and case of every live version (retired ones included), their
provenance, every staged proposal's cases, provenance and tree, every imported run, every
cassette a dataset's cassette log names, and every suite result a score batch cites. Only
packs and proposals older than the grace period are candidates. Before deleting anything, gc
publishes a lease naming the packs and proposals it may delete, then waits for the writers
that started before it (leases.py); writers that start later keep clear of those packs. It
then marks again, so a version sealed meanwhile keeps what it reuses.
"""

from __future__ import annotations

from typing import NamedTuple

from cas.digest import to_bytes
from cas.errors import STORAGE_FAILURES, Aborted, CasError, NotFound
from cas.format.keys import (DATASETS, ERASURES, PACKS, PERSON_TABLES, PERSONS, SHARDS, import_key,
                             index_key, pack_key, parse_cassette_log_key, parse_log_key,
                             parse_multi_index_key, parse_pending_key, parse_person_index_key,
                             parse_score_batch_key, split_dataset_key, split_map_key)
from cas.format.records import (CassetteLog, Proposal, RunImport, ScoreBatch, TreeLeaf, TreeNode,
                                parse_record_file)
from cas.repo import checks, erasure
from cas.repo.checks import Progress
from cas.repo.datasets import live_versions
from cas.repo.proposals import delete_proposal, sealed_by
from cas.storage import leases, log_index, maintenance
from cas.storage import pack as packfmt
from cas.storage import store as store_module
from cas.storage.refs import read_log_from

REWRITE_AT = 0.5  # a pack is rewritten once at least this share of its bytes is garbage


class GcReport(NamedTuple):
    dry_run: bool
    packs: int               # packs examined
    packs_rewritten: int     # replaced: rewritten without garbage, or merged with others
    packs_deleted: int       # never published (no index)
    packs_written: int       # new packs replacing the rewritten ones
    objects_deleted: int
    bytes_reclaimed: int
    garbage_kept: int        # unreachable objects left: in young packs, or in mostly live ones
    proposals_deleted: int = 0  # stale unsealed proposals (older than the grace period)
    records_deleted: int = 0    # person index files of packs that are gone
    deferred: int = 0        # writers that started first and were still at work: nothing was
                             # deleted (run gc again)
    multi_indexes_deleted: int = 0  # superseded (a larger one covers their packs), or naming a
                                    # pack that is gone
    log_indexes_deleted: int = 0    # log index segments a wider one covers


def reachable(ctx, skip: frozenset[str] = frozenset()) -> set[bytes]:
    """Raw digests of every object something in the repository still refers to (the staged
    proposals whose keys are in `skip` do not count: gc is collecting them)."""
    seen: set[bytes] = set()
    store = ctx.store

    def walk(root: str) -> None:
        stack = [root]
        while stack:
            digest = stack.pop()
            raw = to_bytes(digest)
            if raw in seen:
                continue
            seen.add(raw)
            try:
                node = store.get(digest, (TreeLeaf, TreeNode))
            except NotFound:
                continue  # fsck reports it; gc only needs to keep what exists
            if isinstance(node, TreeLeaf):
                seen.update(to_bytes(c) for c in node.ids)
            else:
                stack.extend(c.node for c in node.children)

    backend = ctx.backend
    for version in live_versions(ctx):
        walk(version.content_digest)
        if version.provenance:
            seen.add(to_bytes(version.provenance))
    for key in backend.list(DATASETS):
        if parse_cassette_log_key(key) is not None:  # every cassette recorded: history
            try:
                record = parse_record_file(backend.get(key), CassetteLog, key)
            except NotFound:
                continue  # its dataset was just deleted
            seen.update(to_bytes(e.cassette) for e in record.entries)
        elif parse_score_batch_key(key) is not None:  # the suite results batches cite
            try:
                batch = parse_record_file(backend.get(key), ScoreBatch, key)
            except (NotFound, CasError):
                continue  # its dataset was just deleted, or a fence holds the number
            if isinstance(batch.result, str):
                seen.add(to_bytes(batch.result))
        elif _staged_token(key) is not None and key not in skip:
            try:
                p = parse_record_file(backend.get(key), Proposal, key)
            except NotFound:
                continue
            seen.update(to_bytes(c) for c in p.add)
            if p.provenance:
                seen.add(to_bytes(p.provenance))
            walk(p.proposed_root)
    for _, record in read_log_from(backend, import_key, RunImport, 0):
        seen.update(to_bytes(e.run) for e in record.runs)
    return seen


def collect(ctx, dry_run: bool = False, grace: float | str = 86400.0,
            wait: float | str | None = None, progress: Progress | None = None) -> GcReport:
    """Collect garbage (see the module docstring and docs/format.md, section 9). A dry run
    plans exactly as a real one and reports what it would delete, writing nothing. `grace`:
    packs and proposals younger than this are kept; `wait`: how long to wait for writers that
    started before this gc (default leases.GC_WAIT); each in seconds, or as `15m`, `24h`, `7d`."""
    grace = checks.duration(grace, "grace period")
    wait = leases.GC_WAIT if wait is None else checks.duration(wait, "wait")
    checks.progress(progress)
    backend = ctx.backend
    store = ctx.store
    store.refresh()
    cutoff = ctx.time() - grace
    if not dry_run:
        erasure.recover(ctx)  # an erasure in progress finishes before gc copies any object
    erasures_before = set(backend.list(ERASURES))
    stale = stale_proposals(ctx, cutoff)
    keys = list(backend.list(PACKS))
    indexed = {k[len(PACKS):-len(".idx")] for k in keys if k.endswith(".idx")}
    live = reachable(ctx, frozenset(stale))
    batches, kept = _plan(backend, indexed, live, cutoff)
    orphans = [k for k in keys if k.endswith(".pack")
               and k[len(PACKS):-len(".pack")] not in indexed
               and _modified(backend, k) <= cutoff]
    stale_persons = [k for k in backend.list(PERSONS)
                     if _person_pack(k) not in indexed and _modified(backend, k) <= cutoff]
    if dry_run:
        return _predict(ctx, indexed, batches, orphans, kept, stale, stale_persons)
    condemned = sorted({pid for batch in batches for pid, _ in batch}
                       | {k[len(PACKS):-len(".pack")] for k in orphans})
    # Publish what this gc may delete, then look at who else is at work (leases.py): writers
    # that started after this point keep clear of these packs and proposals.
    with leases.acquire(ctx, leases.GC, "gc", packs=condemned, proposals=sorted(stale)) as held:
        # A writer merging small packs holds a gc lease too, beside its writer lease: that
        # writer is waited for below, like any other.
        rivals = [k for k in leases.of_role(held.others, leases.GC)
                  if held.others[k] is None or held.others[k].operation != leases.MERGE]
        if rivals:
            raise Aborted(f"another gc is running ({rivals[0]}); nothing was deleted; retry "
                          "when it ends", reason="GC_IN_PROGRESS", lease=rivals[0])
        writers = leases.of_role(held.others, leases.WRITER)
        busy = leases.wait_for(ctx, writers, wait, progress)
        if busy:
            return GcReport(False, len(indexed), 0, 0, 0, 0, 0, kept, 0, 0, len(busy))
        return _sweep(ctx, held, indexed, batches, orphans, kept, stale, stale_persons,
                      cutoff, erasures_before)


def _sweep(ctx, held, indexed, batches, orphans, kept, stale, stale_persons, cutoff,
           erasures_before) -> GcReport:
    """The deleting half of a gc, under its lease `held` once the earlier writers are done."""
    backend, store = ctx.backend, ctx.store
    rewritten = written = deleted = objects = reclaimed = 0
    new_packs: set[str] = set()
    proposals = sum(delete_proposal(ctx, key, p) for key, p in stale.items())
    # Packs never published (a writer died between a pack and its index), first: a rewrite
    # below may publish the very same pack (same bytes, same name) again.
    for key in orphans:
        if not backend.exists(key[:-len(".pack")] + ".idx"):
            reclaimed += _size(backend, key)
            backend.delete(key)
            deleted += 1
    # Mark again: anything a writer sealed, staged or imported since is kept after all.
    live = reachable(ctx)
    for batch in batches:
        held.check("it rewrote more packs")  # renewed and live: writers keep clear of them
        drop = {d for _, garbage in batch for d in garbage if d not in live}
        try:
            result = maintenance.rewrite_packs(store, [pid for pid, _ in batch], drop)
        except NotFound:
            continue  # an erasure or another gc replaced one of these packs meanwhile
        rewritten += len(batch)
        written += result.new_pack is not None
        new_packs |= {result.new_pack} - {None}
        objects += result.dropped
        reclaimed += result.bytes_before - result.bytes_written
    _purge_erasures(ctx, erasures_before, new_packs)
    sweep = getattr(backend, "sweep_staging", None)
    if sweep is not None:  # staging files of writes killed before they published
        sweep(cutoff)
    packs_now = set(store.pack_ids())
    records = 0
    for key in stale_persons:
        if _person_pack(key) not in packs_now:
            records += backend.delete(key)
    superseded = _superseded(ctx)
    segments = _superseded_segments(ctx)
    for key in superseded + segments:  # readers no longer search them; one that did lists again
        backend.delete(key)
    store.refresh()
    return GcReport(False, len(indexed), rewritten, deleted, written, objects, reclaimed, kept,
                    proposals, records, multi_indexes_deleted=len(superseded),
                    log_indexes_deleted=len(segments))


def _purge_erasures(ctx, erasures_before: set[str], new_packs: set[str]) -> None:
    """Purge once more what erasures that ran beside this gc removed. One that ran while we
    copied objects into new packs may have missed a copy (it was still a live object when we
    read it), and one still at work left our unpublished packs alone (erasure.purge): the
    erasures recorded since this gc began, and every erasure pending now. Our new packs are
    published by now, so their copies are found and rewritten: the cases and runs each names,
    and what else of the person we copied (provenance naming the cases, cassettes, results:
    erasure.copies_in)."""
    for key in sorted(ctx.backend.list(ERASURES)):
        logged, pending = parse_log_key(key), parse_pending_key(key)
        if logged is not None and key not in erasures_before:
            record = erasure.read_log(ctx, logged[0])
        elif pending is not None:
            record = erasure.read_plan(ctx, pending[0])
        else:
            continue
        if record is not None:
            erasure.purge(ctx, set(record.cases) | set(record.runs)
                          | erasure.copies_in(ctx, record, new_packs))


def _superseded(ctx, condemned: frozenset[str] = frozenset()) -> list[str]:
    """The multi-pack indexes readers need not search, leaving out those covering a pack in
    `condemned` (a rewrite drops them anyway): those naming a pack that is gone, index and
    all (readers look past them; an earlier build's writer published one when a commit it
    retried flushed again after merging its own packs), and those a larger one supersedes
    (writers merge indexes, maintenance.maintain)."""
    readers = [packfmt.IndexReader(ctx.backend, k) for k in ctx.backend.list(PACKS)
               if parse_multi_index_key(k)]
    try:
        readers = [r for r in readers if condemned.isdisjoint(r.packs)]
        # Listed after them: every pack a multi-pack index names was stored before it was.
        present = set(ctx.backend.list(PACKS))
        broken = {r.key for r in readers if any(
            index_key(p) not in present and pack_key(p) not in present for p in r.packs)}
        return sorted(broken) + store_module.superseded_multi_indexes(
            [r for r in readers if r.key not in broken])
    except NotFound:  # one was dropped since the listing (an erasure): leave it for next time
        return []


def _predict(ctx, indexed, batches, orphans, kept, stale, stale_persons) -> GcReport:
    """What `_sweep` would delete if nothing changed meanwhile, computed by the same rewrite
    without writing (so merged packs' saved headers and indexes count, byte for byte)."""
    rewritten = written = objects = reclaimed = 0
    for batch in batches:
        try:
            result = maintenance.rewrite_packs(ctx.store, [pid for pid, _ in batch],
                                               {d for _, garbage in batch for d in garbage},
                                               dry_run=True)
        except NotFound:
            continue  # replaced meanwhile: a real gc would skip it too (_sweep)
        rewritten += len(batch)
        written += result.new_pack is not None
        objects += result.dropped
        reclaimed += result.bytes_before - result.bytes_written
    reclaimed += sum(_size(ctx.backend, k) for k in orphans)
    condemned = frozenset(pid for batch in batches for pid, _ in batch)
    return GcReport(True, len(indexed), rewritten, len(orphans), written, objects, reclaimed,
                    kept, len(stale), len(stale_persons),
                    multi_indexes_deleted=len(_superseded(ctx, condemned)),
                    log_indexes_deleted=len(_superseded_segments(ctx)))


def _superseded_segments(ctx) -> list[str]:
    """The log index segments a wider one covers (writers merge them as the logs grow)."""
    return [key for log in log_index.LOGS.values()
            for key in log_index.superseded(log_index.stored_segments(ctx.backend, log))]


def stale_proposals(ctx, cutoff: float) -> dict:
    """key -> proposal of every staged proposal never sealed and last written before `cutoff`
    (previews nobody confirmed, or that lost a race and were staged again)."""
    out = {}
    for key in ctx.backend.list(DATASETS):
        token = _staged_token(key)
        if token is None or _modified(ctx.backend, key) > cutoff:
            continue
        try:
            p = parse_record_file(ctx.backend.get(key), Proposal, key)
        except NotFound:
            continue
        except STORAGE_FAILURES:
            raise  # unread is not damaged: deleting it as such would lose a good proposal
        except CasError:
            out[key] = None  # damaged: it can never be sealed
            continue
        if sealed_by(ctx, p.dataset, p.base, token) is None:
            out[key] = p
    return out


def _plan(backend, indexed, live, cutoff) -> tuple[list[list[tuple[str, dict]]], int]:
    """Which packs to rewrite, in batches that each become one pack: the packs older than the
    grace period that are mostly garbage or small, grouped up to the pack size. Returns the
    batches (each a list of (pack id, {garbage digest: length})) and how many unreachable
    objects stay (in young packs, or in large mostly live ones)."""
    candidates, kept = [], 0
    for pid in sorted(indexed):
        try:
            data = backend.get(index_key(pid))
        except NotFound:
            # Replaced since the listing (an erasure, or a writer merging small packs, wrote
            # the new pack and index, then deleted these): its live objects are in the new
            # pack, which this gc did not list and so leaves alone; the next gc sees it.
            # Skipping is safe because gc deletes only packs it planned from an index it
            # read; aborting would fail every gc that meets a merge, for nothing.
            continue
        _, entries = packfmt.parse_index(data, index_key(pid))
        garbage = {e.digest: e.length for e in entries if e.digest not in live}
        total = sum(e.length for e in entries)
        old = _modified(backend, pack_key(pid)) <= cutoff
        small = total < maintenance.SMALL_PACK
        if old and (sum(garbage.values()) >= REWRITE_AT * total or small):
            candidates.append((pid, garbage, total - sum(garbage.values())))
        else:
            kept += len(garbage)
    batches, batch, size = [], [], 0
    for pid, garbage, live_bytes in candidates:
        if batch and size + live_bytes > packfmt.PACK_MAX_BYTES:  # as set now (tests)
            batches.append(batch)
            batch, size = [], 0
        batch.append((pid, garbage))
        size += live_bytes
    if batch:
        batches.append(batch)
    # A lone pack with nothing to drop would be rewritten as itself.
    kept_batches = [b for b in batches if len(b) > 1 or b[0][1]]
    return kept_batches, kept


def _staged_token(key: str) -> str | None:
    """The token of a key under a dataset's `proposals/` (what gc reads as a staged proposal:
    one whose record is damaged, or whose name is malformed, can never be sealed)."""
    split = split_dataset_key(key)
    return split[2] if split is not None and split[1] == "proposals" and split[2] else None


def _person_pack(key: str) -> str:
    """The pack a person table (`persons/packs/<pack>.<map>`), person index file
    (`persons/<shard>/<pack>`) or person-shards record (`persons/shards/<pack>.<map>`) belongs
    to."""
    for prefix in (PERSON_TABLES, SHARDS):
        found = split_map_key(key, prefix)
        if found is not None:
            return found[0]
    index = parse_person_index_key(key)
    return index[1] if index is not None else key.rsplit("/", 1)[1].split(".")[0]


def _modified(backend, key: str) -> float:
    try:
        return backend.modified(key)
    except NotFound:
        return float("inf")  # being replaced right now: young


def _size(backend, key: str) -> int:
    try:
        return len(backend.get(key))
    except NotFound:
        return 0
