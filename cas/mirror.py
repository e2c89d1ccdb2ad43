"""Mirror: copy a repository between any two locations, verifying every digest on the way."""

from __future__ import annotations

from typing import Callable, NamedTuple

from . import pack as packfmt
from .digest import digest_of, from_bytes
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
    """Copy every pack, index and record of `src` that `dst` lacks (both are backends).

    Safe to interrupt and re-run: only create-if-absent is used, packs go before the records
    that name them, and what is already at the destination is checked, not trusted blindly.
    `dst` may be empty (it becomes a copy) or a mirror of the same repository; a destination
    that is another repository, or whose history diverged, is refused before anything is copied.
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
    copied = present = bytes_copied = 0
    if dst_cfg is None:
        dst.put_if_absent(CONFIG_KEY, config)
    # The person index of a pack goes before the pack, as when it was written.
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
    rec_copied = rec_present = rec_deleted = rec_skipped = 0
    # Repository-wide logs (run imports, review batches, settings) in number order, after the
    # packs holding the runs they name and before the proposals that cite reviews.
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
    # Per dataset: its tombstone, metadata, versions and version tombstones in number order,
    # then experiments and scores in number order (they cite versions), so the destination's
    # logs never have a gap even when the copy is interrupted.
    records.sort(key=_record_order)
    gone_at_src = {k.split("/")[1] for k in src_set if _is_dataset_tombstone(k)}
    gone_at_dst = {k.split("/")[1] for k in dst_keys if _is_dataset_tombstone(k)}
    for n, key in enumerate(records):
        if progress:
            progress("records", n, len(records))
        parts = key.split("/")
        name, group = parts[1], parts[2] if len(parts) > 2 else ""
        if key in dst_keys:
            rec_present += 1
            continue
        # What the destination deleted is not brought back, and neither are the leftovers of
        # an interrupted deletion at the source.
        if name in gone_at_dst or (name in gone_at_src and not _outlives_dataset(key)) or (
                group == "versions" and f"{DATASETS}{name}/deleted/{parts[3]}" in dst_keys):
            rec_skipped += 1
            continue
        bytes_copied += _copy_record(src, dst, key)
        rec_copied += 1
        # The tombstone is at the destination now: follow the deletion it records.
        if _is_dataset_tombstone(key):
            doomed = [k for k in dst.list(f"{DATASETS}{name}/") if not _outlives_dataset(k)]
        elif group == "deleted":
            vkey = f"{DATASETS}{name}/versions/{parts[3]}"
            doomed = [vkey] if vkey in dst_keys and vkey not in src_set else []
        else:
            doomed = []
        for k in doomed:
            dst.delete(k)
            rec_deleted += 1
    # Erasures last: their records say the deletions below are complete at the source.
    for key in (k for k in src_keys if k.startswith(ERASURE_LOG) and k not in dst_keys):
        bytes_copied += _copy_record(src, dst, key)
        rec_copied += 1
    rec_deleted += _follow_erasures(src_set, dst)
    return MirrorReport(copied, present, rec_copied, rec_present, bytes_copied, rec_deleted,
                        rec_skipped)


_RECORD_RANK = {"tombstone": 0, "meta": 1, "deleted": 2, "versions": 2, "retired": 3,
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


def _follow_erasures(src_set: set[str], dst) -> int:
    """Delete at the destination what an erasure (or gc) deleted at the source: packs that were
    rewritten (their multi-pack indexes first, then index, pack, person index), and staged
    proposals with their keys. Runs after everything the source has was copied."""
    deleted = 0
    dst_keys = list(dst.list(""))
    gone_packs = {k[len(PACKS):-len(".idx")] for k in dst_keys
                  if k.startswith(PACKS) and k.endswith(".idx") and k not in src_set}
    doomed = [k for k in dst_keys if k.startswith(PACKS) and k.endswith(".midx")
              and k not in src_set]
    doomed += [k for k in dst_keys if k.startswith(PACKS) and not k.endswith(".midx")
               and k[len(PACKS):].split(".")[0] in gone_packs]
    doomed += [k for k in dst_keys if k.startswith(PERSONS) and k not in src_set]
    doomed += [k for k in dst_keys if k.startswith(DATASETS) and k not in src_set
               and k.split("/")[2:3] in (["proposals"], ["keys"])]
    for key in sorted(doomed, key=lambda k: (not k.endswith(".midx"), not k.endswith(".idx"))):
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
