"""Mirror: copy a repository between any two locations, verifying every digest on the way."""

from __future__ import annotations

import time
from typing import Callable, NamedTuple

from . import pack as packfmt
from .digest import digest_of, from_bytes
from .erasure import STAGING_AGE
from .errors import CorruptData, FailedPrecondition, NotFound
from .objects import (KIND_BY_CODE, TYPES, RepoConfig, parse_record_file,
                      parse_record_file_of)
from .refs import DATASETS
from .store import PACKS, PERSONS

CONFIG_KEY = "config"


class MirrorReport(NamedTuple):
    packs_copied: int
    packs_present: int
    records_copied: int
    records_present: int
    bytes_copied: int
    records_deleted: int = 0   # at the destination, following deletions made at the source
    records_skipped: int = 0   # not copied: the destination deleted them (never resurrected)


def mirror(src, dst, progress: Callable[[str, int, int], None] | None = None) -> MirrorReport:
    """Copy every pack, index and record of `src` that `dst` lacks (both are backends), and
    follow the deletions made at the source.

    Every prefix of a mirror is a consistent repository (docs/format.md section 9, mirror
    rules): what it copies goes in dependency order, retirements first, and it deletes only
    after everything that replaces what it deletes was copied. So a mirror killed anywhere
    leaves `dst` passing fsck with every ACTIVE version fully readable, and never ACTIVE a
    version the source retired (one `dst` already held stays ACTIVE only until its retirement,
    the first thing copied, lands); re-running it finishes the copy. What is already at the
    destination is checked, not trusted blindly. `dst` may be empty (it becomes a copy) or a
    mirror of the same repository; a destination that is another repository, or whose history
    diverged, is refused before anything is copied.
    """
    config = src.get(CONFIG_KEY)
    src_cfg = parse_record_file(config, RepoConfig, f"{src.url}: config")
    try:
        dst_cfg = parse_record_file(dst.get(CONFIG_KEY), RepoConfig, f"{dst.url}: config")
    except NotFound:
        dst_cfg = None
    if dst_cfg is not None and dst_cfg.repository_id != src_cfg.repository_id:
        raise FailedPrecondition(
            f"{dst.url} holds another repository ({dst_cfg.repository_id}, not "
            f"{src_cfg.repository_id}); mirror only into an empty location or a mirror of "
            "the same repository", reason="DIFFERENT_REPOSITORY")
    src_keys = list(src.list(""))
    src_set = set(src_keys)
    dst_keys = set(dst.list(""))
    records = [k for k in src_keys if k.startswith(DATASETS)]
    logs = sorted(k for k in src_keys if k.startswith(REPOSITORY_LOGS))
    redacted = []  # log records an erasure at the source rewrote: replaced at the destination
    for key in logs + records:  # refuse divergence up front, before copying anything
        if key in dst_keys:
            theirs, ours = dst.get(key), src.get(key)
            if theirs == ours:
                continue
            if not _is_redaction(key, ours, theirs):
                raise FailedPrecondition(f"{dst.url} diverged from {src.url} at {key}",
                                         reason="DIVERGED", key=key)
            redacted.append(key)
    gone_at_src = {k.split("/")[1] for k in src_set if _is_dataset_tombstone(k)}
    gone_at_dst = {k.split("/")[1] for k in dst_keys if _is_dataset_tombstone(k)}

    def skipped(key: str) -> bool:
        """What the destination deleted is not brought back, and neither are the leftovers
        of an interrupted deletion at the source."""
        parts = key.split("/")
        name, group = parts[1], parts[2] if len(parts) > 2 else ""
        if name in gone_at_src:  # only what outlives it: its tombstone is then followed
            return not _outlives_dataset(key)
        return name in gone_at_dst or (
            group == "versions" and f"{DATASETS}{name}/deleted/{parts[3]}" in dst_keys)

    copied = present = bytes_copied = 0
    rec_copied = rec_present = rec_deleted = rec_skipped = 0
    if dst_cfg is None:
        dst.put_if_absent(CONFIG_KEY, config)
    # 1. Retirements, first: a version the destination holds that the source retired turns
    #    RETIRED before anything else is copied, and a version copied below arrives retired.
    #    (A retirement ahead of its version is what fsck reads as a mirror in progress.)
    for key in (k for k in records if _is_retirement(k)):
        if key in dst_keys:
            rec_present += 1
        elif skipped(key):
            rec_skipped += 1
        else:
            bytes_copied += _copy_record(src, dst, key)
            rec_copied += 1
    # 2. Objects. The person index of a pack goes before the pack, as when it was written.
    for key in (k for k in src_keys if k.startswith(PERSONS) and k not in dst_keys):
        bytes_copied += _copy_record(src, dst, key)
    packs = [k for k in src_keys if k.startswith(PACKS) and k.endswith(".idx")]
    for n, ikey in enumerate(packs):
        if progress:
            progress("packs", n, len(packs))
        pkey = ikey[:-len(".idx")] + ".pack"
        if ikey in dst_keys:
            present += 1
            continue
        pack = src.get(pkey)
        index = src.get(ikey)
        _verify_pack(pkey, pack, ikey, index)
        dst.put_if_absent(pkey, pack)  # the index publishes the pack, so it goes second
        dst.put_if_absent(ikey, index)
        copied += 1
        bytes_copied += len(pack) + len(index)
    for mkey in (k for k in src_keys if k.startswith(PACKS) and k.endswith(".midx")):
        if mkey in dst_keys:
            present += 1
            continue
        data = src.get(mkey)
        covered, _ = packfmt.parse_multi_index(data, mkey)  # checks its checksum and order
        for pid in covered:
            if f"{PACKS}{pid}.idx" not in src_set:
                raise CorruptData(f"{mkey} covers pack {pid}, which {src.url} lacks", key=mkey)
        dst.put_if_absent(mkey, data)  # after the packs and indexes it covers
        copied += 1
        bytes_copied += len(data)
    # 3. Repository-wide logs (run imports, review batches, settings) in number order, after
    #    the packs holding the runs they name and before the proposals that cite reviews.
    for key in logs:
        if key in redacted:
            data = src.get(key)
            parse_record_file_of(data, tuple(TYPES.values()), f"{src.url}: {key}")
            dst.replace(key, data)
            bytes_copied += len(data)
            rec_copied += 1
            continue
        if key in dst_keys:
            rec_present += 1
            continue
        bytes_copied += _copy_record(src, dst, key)
        rec_copied += 1
    # 4. Erasure records, before the version records and the deletions that need them: a
    #    retired version may lack the cases one lists, which fsck accepts only with the record.
    for key in (k for k in src_keys if k.startswith(ERASURE_LOG) and k not in dst_keys):
        bytes_copied += _copy_record(src, dst, key)
        rec_copied += 1
    # 5. Per dataset: its tombstone, metadata, then by number its version tombstone and its
    #    version, then experiments and scores in number order (they cite versions), staged
    #    proposals and their idempotency claims (which name them); so the destination's logs
    #    never have a gap even when the copy is interrupted.
    records = sorted((k for k in records if not _is_retirement(k)), key=_record_order)
    dst_by_name: dict[str, list[str]] | None = None  # the destination's records by dataset
    for n, key in enumerate(records):
        if progress:
            progress("records", n, len(records))
        parts = key.split("/")
        name, group = parts[1], parts[2] if len(parts) > 2 else ""
        if key in dst_keys:
            rec_present += 1
        elif skipped(key):
            rec_skipped += 1
            continue
        else:
            bytes_copied += _copy_record(src, dst, key)
            rec_copied += 1
        # The tombstone is at the destination: follow the deletion it records (or finish it,
        # when a mirror was interrupted doing so). What the source still has stays.
        if _is_dataset_tombstone(key):
            if dst_by_name is None:
                dst_by_name = {}
                for k in sorted(dst_keys):
                    if k.startswith(DATASETS):
                        dst_by_name.setdefault(k.split("/")[1], []).append(k)
            doomed = sorted((k for k in dst_by_name.get(name, ()) if not _outlives_dataset(k)),
                            key=lambda k: (not k.endswith(f"/meta/{1:010d}"), k))
        elif group == "deleted":
            doomed = [f"{DATASETS}{name}/versions/{parts[3]}"]
        else:
            doomed = []
        for k in doomed:  # for a dataset: meta/0000000001 first, then in key order
            if k in dst_keys and k not in src_set and dst.delete(k):
                rec_deleted += 1
    # 6. Deletions made by an erasure or gc at the source, now that what replaces them is here.
    rec_deleted += _follow_deletions(src_set, dst)
    # A write killed at the destination (this mirror's, or any) left a staging file that may
    # hold bytes erased since; the backend removes those no live writer will publish.
    sweep = getattr(dst, "sweep_staging", None)
    if sweep is not None:
        sweep(time.time() - STAGING_AGE)
    return MirrorReport(copied, present, rec_copied, rec_present, bytes_copied, rec_deleted,
                        rec_skipped)


_RECORD_RANK = {"tombstone": 0, "meta": 1, "deleted": 2, "versions": 2,
                "experiments": 4, "scores": 5, "proposals": 6, "keys": 7}
ERASURE_LOG = "erasures/log/"


def _is_redaction(key: str, ours: bytes, theirs: bytes) -> bool:
    """Whether the source's log record is the destination's with entries erased (and nothing
    else changed): the only way a record the destination holds may differ."""
    from .objects import ReviewBatch, RunImport
    if not key.startswith(("runs/imports/", "reviews/")):
        return False
    type_, field = (RunImport, "runs") if key.startswith("runs/") else (ReviewBatch, "reviews")
    try:
        new = parse_record_file(ours, type_, key)
        old = parse_record_file(theirs, type_, key)
    except CorruptData:
        return False
    from .erasure import redacted
    kept = getattr(new, field)
    return set(kept) < set(getattr(old, field)) and redacted(old, kept) == new


def _follow_deletions(src_set: set[str], dst) -> int:
    """Delete at the destination what an erasure or gc deleted at the source, in an order that
    keeps every prefix consistent: staged proposals (each idempotency claim before the
    proposal it names), then multi-pack indexes, pack indexes (unpublishing their packs), the
    packs, and their person indexes. A pack goes when the source does not publish it, indexed
    here or not: a mirror killed between a pack and its index left it unpublished, and it may
    hold bytes erased since. Runs after everything the source has was copied."""
    dst_keys = list(dst.list(""))
    published = {k[len(PACKS):-len(".idx")] for k in src_set
                 if k.startswith(PACKS) and k.endswith(".idx")}

    def unpublished(key: str, ext: str) -> bool:
        return key.endswith(ext) and key[len(PACKS):-len(ext)] not in published

    packs = [k for k in dst_keys if k.startswith(PACKS)]
    staged = [k for k in dst_keys if k.startswith(DATASETS) and k not in src_set
              and k.split("/")[2:3] in (["proposals"], ["keys"])]
    doomed = sorted(staged, key=lambda k: (k.split("/")[2] != "keys", k))  # claims first
    doomed += [k for k in packs if k.endswith(".midx") and k not in src_set]
    doomed += [k for k in packs if unpublished(k, ".idx")]
    doomed += [k for k in packs if unpublished(k, ".pack")]
    doomed += [k for k in dst_keys if k.startswith(PERSONS) and k not in src_set]
    deleted = 0
    for key in doomed:
        if dst.delete(key):
            deleted += 1
    return deleted


REPOSITORY_LOGS = ("runs/imports/", "reviews/", "settings/")


def _copy_record(src, dst, key: str) -> int:
    """Copy one record file after checking it parses and its digest holds; its size."""
    data = src.get(key)
    parse_record_file_of(data, tuple(TYPES.values()), f"{src.url}: {key}")
    dst.put_if_absent(key, data)
    return len(data)


def _record_order(key: str):
    parts = key.split("/")
    group = parts[2] if len(parts) > 2 else ""
    tail = parts[3] if len(parts) > 3 else ""
    # at one number, a version's tombstone goes before the version (an interrupted deletion)
    return parts[1], _RECORD_RANK.get(group, 5), tail, group != "deleted", key


def _is_retirement(key: str) -> bool:
    return key.startswith(DATASETS) and key.split("/")[2:3] == ["retired"]


def _is_dataset_tombstone(key: str) -> bool:
    return key.startswith(DATASETS) and key.count("/") == 2 and key.endswith("/tombstone")


def _outlives_dataset(key: str) -> bool:
    """What a deleted dataset keeps: its tombstone and its citation logs (only fences)."""
    parts = key.split("/")
    return _is_dataset_tombstone(key) or (len(parts) == 4 and
                                          parts[2] in ("scores", "experiments"))


def _verify_pack(pkey: str, pack: bytes, ikey: str, index: bytes) -> None:
    spans = {off: (length, kind) for off, length, kind in packfmt.parse_pack(pack, pkey)}
    pid, entries = packfmt.parse_index(index, ikey)
    if pid != packfmt.pack_id(pack) or pkey != f"{PACKS}{pid}.pack":
        raise CorruptData(f"{ikey} does not describe {pkey}", key=ikey)
    for e in entries:
        if spans.get(e.offset) != (e.length, e.kind):
            raise CorruptData(f"{ikey} points at no object at offset {e.offset}", key=ikey)
        kind = KIND_BY_CODE.get(e.kind)
        digest = from_bytes(e.digest)
        if kind is None or digest_of(kind, pack[e.offset:e.offset + e.length]) != digest:
            raise CorruptData(f"object {digest} in {pkey} does not match its digest",
                              key=pkey, digest=digest)
