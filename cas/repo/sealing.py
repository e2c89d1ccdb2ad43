"""Sealing: a new version is (base - remove) | add, its tree stored before its record."""

from __future__ import annotations

import gc
from typing import Any, Iterable

import msgspec

from cas.digest import from_bytes, parse_digest, to_bytes
from cas.errors import FailedPrecondition, InvalidArgument, NotFound, VersionConflict
from cas.format import encoding
from cas.format.cases import EncodedCase
from cas.format.keys import version_key
from cas.format.records import Case, Provenance, ProvenanceEntry, VersionRecord
from cas.format.version_names import check_version_number
from cas.repo import checks, datasets, ingest, retirement
from cas.repo.erased import erased_persons
from cas.storage import claims, leases
from cas.storage.tree import EMPTY_ROOT


def commit(ctx, name: str, *, base: int | None, add: Iterable[Any] = (),
           remove: Iterable[str] = (), message: str = "", author: str | None = None,
           operation: str = "commit", retry: bool = False) -> VersionRecord:
    """Seal version base+1 = (version `base` - remove) | add (numbers of deleted versions
    are skipped: a number is never used twice).

    `base` is None for a dataset's first version; once the dataset has versions it must be
    named. If another writer sealed base+1 first, this raises VersionConflict naming the head,
    or with `retry` re-applies the same change on the new head. Objects are written before
    the version record claims its number, so a crash leaves only unreferenced objects.
    A case naming a person an erasure deleted is refused (`PERSON_ERASED_BEFORE`): a direct
    commit cannot admit them again (there is no record to say so; import their runs with
    `allow_erased_persons` and promote them).

    Only a `direct` dataset takes added cases (`ADMISSION_REVIEWED_ONLY` otherwise; a removal
    is accepted by both). The version's provenance records `author` as each added case's.
    """
    rule = datasets.dataset(ctx, name).admits
    if base is not None and base != 0:
        check_version_number(base, "base")
    checks.many(add, "add", "cases (dicts, cas.Case or EncodedCase)",
                (Case, EncodedCase, str, bytes, bytearray, dict))
    remove = checks.strings(remove, "remove", "case ids")
    encoding.check_text(message, "message")
    encoding.check_text(operation, "operation")
    author = checks.author(author)
    removes = sorted({parse_digest(r, "case id") for r in remove})
    if rule != "direct":
        add = iter(add)
        if next(add, _NONE) is not _NONE:
            raise FailedPrecondition(
                f"dataset {name!r} admits only reviewed runs: cases are added by promotion "
                "(`cas promote`), never committed; a hand-authored set belongs in a dataset "
                "created with --admission direct", reason="ADMISSION_REVIEWED_ONLY",
                dataset=name, admission=rule)
    if base is None:
        head = ctx.refs.head(name)
        if head:
            raise InvalidArgument(f"dataset {name!r} has versions; name the one to build on "
                                  f"with base (--base; its newest is {head})",
                                  reason="BASE_REQUIRED", head=head)
    base = _check_base(ctx, name, base or 0, retry)
    # The lease says what the holder does (a commit), whatever label the version records
    with leases.writing(ctx, "commit") as lease, \
            ctx.store.writer(lease) as writer:
        # Read under the lease: an erasure that started earlier has finished by now.
        inserts = _store_cases(ctx, writer, add, erased_persons(ctx))
        # (a set of the removed ids, not of the inserts: a million of them cost half a second)
        both = {to_bytes(r) for r in removes}.intersection(inserts) if removes else ()
        if both:
            raise InvalidArgument(f"case {from_bytes(min(both))} is both added and removed",
                                  case_id=from_bytes(min(both)))
        for _ in claims.attempts(f"a version of dataset {name!r}", dataset=name):
            # A first version's tree is built from the raw digests; an edit of a base takes ids.
            adds = [from_bytes(raw) for raw in inserts] if base else inserts
            provenance = _commit_provenance(ctx, writer, name, base, adds, author)
            record = seal_tree(ctx, name, base, adds, removes, writer, message, author,
                               operation)
            record = msgspec.structs.replace(record, provenance=provenance)
            lease.check()
            if ctx.refs.append_version(record):
                settle(ctx, record)
                return record
            head = ctx.refs.head(name)
            if not retry:
                raise VersionConflict(name, base, head)
            base = head


_NONE = object()


def _commit_provenance(ctx, writer, name: str, base: int, inserts: list[str],
                       author: str) -> str | None:
    """Store the provenance of the cases a commit adds to `base` (those it does not already
    hold): each committed by `author`. It names case ids and the author only, no person's
    data, so it is not indexed under the people its cases name (a promotion's names their
    runs); an erasure that retires its version drops it as it drops a promotion's. A first
    version adds every case it holds: one record names the author of them all
    (`committed_by`, no entries; it names no case, so an erasure leaves it). None if nothing
    is added."""
    if not base:
        return writer.add(Provenance(entries=[], committed_by=author)) if inserts else None
    root = ctx.refs.read_version(name, base).content_digest
    trie = ctx.trie()
    inserts = [c for c in inserts if not trie.contains(root, c)]
    if not inserts:
        return None
    return writer.add(Provenance(entries=[ProvenanceEntry(case_id=c, committed_by=author)
                                          for c in inserts]))


def _store_cases(ctx, writer, add: Iterable[Any], erased: dict) -> list[bytes]:
    """Encode and stage every case of `add`; their raw digests, sorted (a first version's
    tree is built from them: its ids as strings never all exist at once). A case naming an
    erased person (`erased`: keyed digest -> Erased) is refused before it is staged (a huge
    commit may have written packs of the cases before it: unreferenced garbage that gc
    collects, naming nobody erased). The cases of a large file are staged by two processes
    (cas/repo/ingest.py)."""
    # The bulk loop allocates millions of small objects and frees none of them: the cyclic
    # garbage collector would only rescan them (about a fifth of ingest time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        point = ingest.split_point(add, ctx.backend)
        if point is not None:
            return ingest.stage_split(ctx, writer, add, point, erased)
        ids: set[bytes] = set()
        ingest.stage_cases(ctx.store, writer, add, erased, ids)
        return sorted(ids)
    finally:
        if collecting:
            gc.enable()


def _check_base(ctx, name: str, base: int, retry: bool) -> int:
    """The base to build on: `base` itself, or with `retry` the head if `base` is stale."""
    if base and not ctx.backend.exists(version_key(name, base)):
        ctx.refs.read_version(name, base)  # NotFound, saying so if it was deleted
        raise NotFound(f"dataset {name!r} has no version {base}", dataset=name, version=base)
    if ctx.backend.exists(version_key(name, ctx.refs.next_number(name, base))):
        head = ctx.refs.head(name)
        if not retry:
            raise VersionConflict(name, base, head)
        return head
    return base


def seal_tree(ctx, name: str, base: int, inserts: list[str], removes: list[str], writer,
              message: str, author: str, operation: str) -> VersionRecord:
    """The record of version base+1 = (base - removes) | inserts, with its tree stored (the
    record itself is not: the caller claims its number). Cases of `inserts` are stored; on
    no base (a first version) they may be given as raw digests."""
    trie = ctx.trie(writer.add)
    retired = False
    if base:
        parent = ctx.refs.read_version(name, base)
        old_root, old_count = parent.content_digest, parent.item_count
        retired = ctx.refs.read_retirement(name, base) is not None
    else:
        old_root, old_count = EMPTY_ROOT, 0
    for case_id in removes:
        if not trie.contains(old_root, case_id):
            raise NotFound(f"case {case_id} is not in {name}@{base}", case_id=case_id,
                           dataset=name, version=base)
    if retired:  # a version cut from a retired one holds exactly the cases that are left
        adding = set(inserts)
        lost = [c for c in retirement.lost_cases(ctx, parent) if c not in adding]
        removes = sorted(set(removes).union(lost))
    root = trie.apply(old_root, inserts, removes) if base else trie.build(inserts)
    if root == old_root and base and not retired:
        raise FailedPrecondition(f"nothing to seal: {name}@{base} already holds exactly "
                                 "this set of cases", reason="NO_CHANGES")
    count = trie.count(root)
    writer.add(trie.node(root))  # the root itself, even when it is the shared empty leaf
    writer.flush()  # objects and tree are stored before the record that names them
    return VersionRecord(
        dataset=name, number=ctx.refs.next_number(name, base), parent=base or None,
        content_digest=root,
        item_count=count, operation=operation, added=count - old_count + len(removes),
        removed=len(removes), author=author, sealed_at=ctx.clock(), message=message)


def settle(ctx, record: VersionRecord) -> None:
    """After sealing: if an erasure retired the base while this version was being built on
    it, this version holds cases whose bytes are gone, and is retired the same way (the
    erasure's own final sweep covers versions sealed before it ends; this, the rest)."""
    if not record.parent:
        return
    base = ctx.refs.read_retirement(record.dataset, record.parent)
    if base is None or base.erasure is None:
        return
    if retirement.lost_cases(ctx, record):
        retirement.write_erased(ctx.backend, record, base.erasure, base.author, ctx.clock())
