"""Mirror: copy a repository between any two locations, verifying every digest on the way."""

from __future__ import annotations

from typing import Callable, NamedTuple

from . import pack as packfmt
from .digest import digest_of, from_bytes
from .errors import CorruptData, FailedPrecondition, NotFound
from .objects import KIND_BY_CODE, DatasetRecord, RepoConfig, VersionRecord, parse_record_file
from .refs import DATASETS
from .store import PACKS

CONFIG_KEY = "config"


class MirrorReport(NamedTuple):
    packs_copied: int
    packs_present: int
    records_copied: int
    records_present: int
    bytes_copied: int


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
    for key in records:  # refuse divergence up front, before copying anything
        if key in dst_keys and dst.get(key) != src.get(key):
            raise FailedPrecondition(f"{dst.url} diverged from {src.url} at {key}",
                                     reason="DIVERGED", key=key)
    copied = present = bytes_copied = 0
    if dst_cfg is None:
        dst.put_if_absent(CONFIG_KEY, config)
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
    rec_copied = rec_present = 0
    # Metadata before versions, and versions in number order, so the destination's logs never
    # have a gap even when the copy is interrupted.
    records.sort(key=lambda k: (k.split("/")[1], k.split("/")[2] != "meta", k))
    for n, key in enumerate(records):
        if progress:
            progress("records", n, len(records))
        if key in dst_keys:
            rec_present += 1
            continue
        data = src.get(key)
        type_ = VersionRecord if "/versions/" in key else DatasetRecord
        parse_record_file(data, type_, f"{src.url}: {key}")
        dst.put_if_absent(key, data)
        rec_copied += 1
        bytes_copied += len(data)
    return MirrorReport(copied, present, rec_copied, rec_present, bytes_copied)


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
