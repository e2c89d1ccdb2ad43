"""Mirror: copy a repository between any two locations, verifying every digest on the way."""

from __future__ import annotations

import os
import time
from typing import NamedTuple

from cas.digest import digest_of, from_bytes, to_bytes
from cas.errors import (STORAGE_FAILURES, CasError, CorruptData, FailedPrecondition,
                        InvalidArgument, NotFound)
from cas.format import keys as K
from cas.format.records import (KIND_BY_CODE, KIND_CODES, TYPES, RepoConfig, ReviewBatch, RunImport,
                                decode_object, parse_record_file, parse_record_file_of)
from cas.repo.checks import Progress
from cas.repo.erasure import redacted
from cas.storage import log_index
from cas.storage import pack as packfmt
from cas.storage import person_index
from cas.storage.backends import backend_for, is_remote

CONFIG_KEY = K.CONFIG


class MirrorReport(NamedTuple):
    packs_copied: int
    packs_present: int
    records_copied: int
    records_present: int
    bytes_copied: int
    records_deleted: int = 0   # at the destination, following deletions made at the source
    records_skipped: int = 0   # not copied: the destination deleted them (never resurrected)


def copy(source: str, destination: str, progress: Progress | None = None) -> MirrorReport:
    """Mirror the repository at location `source` (a directory or an s3:// URL) into
    `destination`, which is created if it is a missing local directory."""
    for what, location in (("source", source), ("destination", destination)):
        if not isinstance(location, str):
            raise InvalidArgument(f"{what} must be a location (a directory or an s3:// URL)",
                                  argument=what)
        try:
            os.fsencode(location)  # the bytes of a path (undecodable ones come back as such)
        except UnicodeEncodeError:
            location = "\x00"
        if "\x00" in location:  # no path holds these
            raise InvalidArgument(f"{what} is not a location: it holds a NUL character or a "
                                  "lone surrogate", argument=what)
    src = backend_for(source)
    # The source is read, never opened: opening may finish an erasure, which writes.
    if not src.exists(K.CONFIG):
        hint = f"cas init {source}" if is_remote(source) else "cas init"
        where = source if is_remote(source) else src.url
        raise NotFound(f"no cas repository at {where} (run `{hint}` to create one)",
                       location=where)
    return mirror(src, backend_for(destination, create=True), progress=progress)


def mirror(src, dst, progress: Progress | None = None) -> MirrorReport:
    """Copy every pack, index and record of `src` that `dst` lacks (both are backends), and
    follow the deletions made at the source.

    Every prefix of a mirror is a consistent repository (docs/format.md section 9, mirror
    rules): what it copies goes in dependency order, retirements first, and it deletes only
    after everything that replaces what it deletes was copied. So a mirror killed anywhere
    leaves `dst` passing fsck with every ACTIVE version fully readable, and never ACTIVE a
    version the source retired (one `dst` already held stays ACTIVE only until its retirement,
    the first thing copied, lands); re-running it finishes the copy. `dst` may be empty (it
    becomes a copy) or a mirror of the same repository; a destination that is another
    repository, or whose history diverged, is refused before anything is copied.

    First a plan (two listings, and reads of only what may differ), then the copy.
    """
    return _Copy(src, dst, _plan(src, dst), progress).run()


# -- the plan ---------------------------------------------------------------------------------
class _Plan(NamedTuple):
    config: bytes | None            # the source's config, to create at the destination
    by_family: dict[str, list[str]]  # the source's keys a mirror copies, by family
    src_set: set[str]
    dst_keys: set[str]
    redacted: dict[str, bytes]      # log records an erasure at the source rewrote: replaced
    gone_at_src: set[str]           # datasets with a tombstone there
    gone_at_dst: set[str]


def _plan(src, dst) -> _Plan:
    """What to copy: both listings, the configs compared, and divergence refused up front."""
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
    dst_keys = set(dst.list(""))
    by_family: dict[str, list[str]] = {f.name: [] for f in K.FAMILIES}
    for key in src_keys:
        family = K.claimed_by(key)
        if family is not None:  # (a key of no family is not copied: fsck reports it)
            by_family[family.name].append(key)
    redacted = _compare(src, dst, by_family, dst_keys)
    return _Plan(None if dst_cfg is not None else config, by_family, set(src_keys), dst_keys,
                 redacted, _deleted_datasets(by_family["dataset.tombstone"]),
                 _deleted_datasets(k for k in dst_keys if K.parse_tombstone_key(k)))


def _deleted_datasets(tombstones) -> set[str]:
    return {K.parse_tombstone_key(k)[0] for k in tombstones}


def _compare(src, dst, by_family, dst_keys) -> dict[str, bytes]:
    """Read at both ends only the records both hold that may differ: those that may be deleted
    and created again (retirements, tombstones, proposals, claims), the run and review logs
    while the source has an erasure the destination has not recorded (it may have redacted
    them), and the newest record both hold of every numbered log (a destination written to
    on its own diverges there first). A record the destination holds under the same key of an
    immutable family was verified when it was copied. Returns the redacted records."""
    erasing = _erasing(by_family, dst_keys)
    heads: dict[tuple, str] = {}  # (family, parts before the number) -> newest common key
    for family in K.FAMILIES:
        if family.numbered:
            for key in by_family[family.name]:
                parts = family.parse(key)
                if key in dst_keys and parts is not None:
                    log = (family.name, *parts[:-1])
                    heads[log] = max(heads.get(log, key), key)  # 10 digits: text order
    wanted = set(heads.values())
    redacted = {}
    for key in _logs(by_family) + sorted(_dataset_keys(by_family)):
        family = K.claimed_by(key)
        if key not in dst_keys or not (key in wanted or family.change == K.VOLATILE or (
                family.change == K.REDACTED and erasing)):
            continue
        theirs, ours = dst.get(key), src.get(key)
        if theirs == ours:
            continue
        if not _is_redaction(key, ours, theirs):
            raise FailedPrecondition(f"{dst.url} diverged from {src.url} at {key}",
                                     reason="DIVERGED", key=key)
        redacted[key] = ours
    return redacted


def _erasing(by_family, dst_keys) -> bool:
    """Whether an erasure may have redacted the logs of one end since they were copied: one in
    progress at either end, or one recorded at one end only (at the destination, one of its
    own: a divergence). A copy brings the redacted logs before the erasure's record."""
    pending = by_family["erasure.plan"] or any(k.startswith(K.PENDING) for k in dst_keys)
    return bool(pending) or set(by_family["erasure"]) != {
        k for k in dst_keys if k.startswith(K.LOG)}


def _logs(by_family) -> list[str]:
    return sorted(k for f in K.FAMILIES if f.step == K.M_LOGS for k in by_family[f.name])


def _dataset_keys(by_family) -> list[str]:
    """The dataset records of the source, retirements included."""
    return [k for f in K.FAMILIES if f.prefix == K.DATASETS for k in by_family[f.name]]


def _is_redaction(key: str, ours: bytes, theirs: bytes) -> bool:
    """Whether the source's log record is the destination's with entries erased (and nothing
    else changed): the only way a record the destination holds may differ."""
    family = K.claimed_by(key)
    if family is None or family.change != K.REDACTED:
        return False
    type_, field = (RunImport, "runs") if family.name == "run.import" else (ReviewBatch,
                                                                            "reviews")
    try:
        new = parse_record_file(ours, type_, key)
        old = parse_record_file(theirs, type_, key)
    except CorruptData:
        return False
    kept = getattr(new, field)
    return set(kept) < set(getattr(old, field)) and redacted(old, kept) == new


# -- the copy ---------------------------------------------------------------------------------
class _Copy:
    """Carries out a plan in the order of docs/format.md section 9 (mirror), counting."""

    def __init__(self, src, dst, plan: _Plan, progress: Progress | None) -> None:
        self.src, self.dst, self.plan, self.progress = src, dst, plan, progress
        self.dst_now = set(plan.dst_keys)  # the destination's keys as this copy leaves them
        self.copied = self.present = self.bytes = 0
        self.rec_copied = self.rec_present = self.rec_deleted = self.rec_skipped = 0

    def run(self) -> MirrorReport:
        plan, fam = self.plan, self.plan.by_family
        if plan.config is not None:
            self.dst.put_if_absent(CONFIG_KEY, plan.config)
            self.dst_now.add(CONFIG_KEY)
        # 1. Retirements, first: a version the destination holds that the source retired turns
        #    RETIRED before anything else is copied, and a version copied below arrives retired.
        #    (A retirement ahead of its version is what fsck reads as a mirror in progress.)
        for key in fam["retirement"]:
            self._record(key)
        self._objects()
        # 3. Repository-wide logs (run imports, review batches, settings) in number order, after
        #    the packs holding the runs they name and before the proposals that cite reviews.
        for key in _logs(fam):
            if key in plan.redacted:
                data = plan.redacted[key]
                parse_record_file_of(data, tuple(TYPES.values()), f"{self.src.url}: {key}")
                self.dst.replace(key, data)
                self.bytes += len(data)
                self.rec_copied += 1
            else:
                self._record(key, skip=False)
        #    Then the segments of the log indexes, checked whole, after the records they index.
        for key in fam["log.index"]:
            if key not in plan.dst_keys:
                data = self.src.get(key)
                log_index.parse_segment(data, key)
                self._put(key, data)
        # 4. Erasure records, before the version records and the deletions that need them: a
        #    retired version may lack the cases one lists, which fsck accepts only with the record.
        for key in fam["erasure"]:
            if key not in plan.dst_keys:
                self._copy_record(key)
                self.rec_copied += 1
        self._datasets()
        # 6. Deletions made by an erasure or gc at the source, now that what replaces them is here.
        self._follow_deletions()
        # A write killed at the destination (this mirror's, or any) left a staging file that may
        # hold bytes erased since; the backend removes those no live writer will publish.
        sweep = getattr(self.dst, "sweep_staging", None)
        if sweep is not None:
            sweep(time.time() - K.STAGING_AGE)
        return MirrorReport(self.copied, self.present, self.rec_copied, self.rec_present,
                            self.bytes, self.rec_deleted, self.rec_skipped)

    def _objects(self) -> None:
        """2. Objects. The person index of a pack goes before the pack, as when it was written;
        a pack before its index (which publishes it), and after the packs holding the cases
        its provenance describes (_publish_order); a multi-pack index after its packs."""
        fam, dst_keys = self.plan.by_family, self.plan.dst_keys
        for key in sorted(fam["person.index"] + fam["person.shards"]):
            if key not in dst_keys:
                self._copy_record(key)
        for key in fam["person.table"]:
            if key not in dst_keys:
                data = self.src.get(key)
                pid, shards = person_index.parse_table(data, f"{self.src.url}: {key}")
                if K.person_table_key(pid, shards) != key:
                    raise CorruptData(f"{self.src.url}: {key} is the person table of pack "
                                      f"{pid}, shards {sorted(shards)}", key=key)
                self._put(key, data)
        indexes = _publish_order(self.src, fam["pack.index"], dst_keys)
        for n, ikey in enumerate(indexes):
            if self.progress:
                self.progress("packs", n, len(indexes))
            if ikey in dst_keys:
                self.present += 1
                continue
            pkey = ikey[:-len(".idx")] + ".pack"
            pack, index = self.src.get(pkey), self.src.get(ikey)
            _verify_pack(pkey, pack, ikey, index)
            self._put(pkey, pack)
            self._put(ikey, index)
            self.copied += 1
        for mkey in fam["multi.index"]:
            if mkey in dst_keys:
                self.present += 1
                continue
            data = self.src.get(mkey)
            covered, _ = packfmt.parse_multi_index(data, mkey)  # checks its checksum and order
            for pid in covered:
                if K.index_key(pid) not in self.plan.src_set:
                    raise CorruptData(f"{mkey} covers pack {pid}, which {self.src.url} lacks",
                                      key=mkey)
            self._put(mkey, data)
            self.copied += 1

    def _datasets(self) -> None:
        """5. Per dataset: its tombstone, metadata, then by number its version tombstone and its
        version, then experiments and scores in number order (they cite versions), staged
        proposals and their idempotency claims (which name them); so the destination's logs
        never have a gap even when the copy is interrupted. A tombstone there is followed."""
        records = sorted((k for k in _dataset_keys(self.plan.by_family)
                          if K.claimed_by(k).name != "retirement"), key=_record_order)
        for n, key in enumerate(records):
            if self.progress:
                self.progress("records", n, len(records))
            if not self._record(key):
                continue
            name, group, tail = K.split_dataset_key(key)
            # The tombstone is at the destination: follow the deletion it records (or finish
            # it, when a mirror was interrupted doing so). What the source still has stays.
            if tail is None and group == "tombstone":
                doomed = sorted((k for k in self.plan.dst_keys if K.dataset_of(k) == name
                                 and not _outlives_dataset(k)),
                                key=lambda k: (K.parse_meta_key(k) != (name, 1), k))
            elif group == "deleted" and K.parse_number(tail) is not None:
                doomed = [K.version_key(name, K.parse_number(tail))]
            else:
                doomed = []
            for k in doomed:  # for a dataset: meta/0000000001 first, then in key order
                if k in self.plan.dst_keys and k not in self.plan.src_set and self._delete(k):
                    self.rec_deleted += 1

    def _record(self, key: str, skip: bool = True) -> bool:
        """Copy one record unless the destination holds it (or, `skip`, deleted it); whether
        it is at the destination now."""
        if key in self.plan.dst_keys:
            self.rec_present += 1
            return True
        if skip and self._skipped(key):
            self.rec_skipped += 1
            return False
        self._copy_record(key)
        self.rec_copied += 1
        return True

    def _skipped(self, key: str) -> bool:
        """What the destination deleted is not brought back, and neither are the leftovers
        of an interrupted deletion at the source."""
        name, group, tail = K.split_dataset_key(key)
        if name in self.plan.gone_at_src:  # only what outlives it: its tombstone is then followed
            return not _outlives_dataset(key)
        return name in self.plan.gone_at_dst or (
            group == "versions" and K.deleted_key(name, K.parse_number(tail))
            in self.plan.dst_keys)

    def _copy_record(self, key: str) -> None:
        """Copy one record file after checking it parses and its digest holds."""
        data = self.src.get(key)
        parse_record_file_of(data, tuple(TYPES.values()), f"{self.src.url}: {key}")
        self._put(key, data)

    def _put(self, key: str, data: bytes) -> None:
        self.dst.put_if_absent(key, data)
        self.dst_now.add(key)
        self.bytes += len(data)

    def _delete(self, key: str) -> bool:
        self.dst_now.discard(key)
        return self.dst.delete(key)

    def _follow_deletions(self) -> None:
        """Delete at the destination what an erasure or gc deleted at the source, in an order
        that keeps every prefix consistent: staged proposals (each idempotency claim before
        the proposal it names), then multi-pack indexes, pack indexes (unpublishing their
        packs), the packs, and their person indexes. A pack goes when the source does not
        publish it, indexed here or not: a mirror killed between a pack and its index left it
        unpublished, and it may hold bytes erased since. Runs after everything the source has
        was copied."""
        src_set = self.plan.src_set
        published = {_pack_id(k) for k in self.plan.by_family["pack.index"]}
        dst_keys = sorted(self.dst_now)
        family = {k: _family_name(k) for k in dst_keys}
        staged = [k for k in dst_keys if family[k] in ("proposal", "idempotency")
                  and k not in src_set]
        doomed = sorted(staged, key=lambda k: (family[k] != "idempotency", k))  # claims first
        doomed += [k for k in dst_keys if family[k] == "multi.index" and k not in src_set]
        for ext in ("pack.index", "pack"):
            doomed += [k for k in dst_keys if family[k] == ext and _pack_id(k) not in published]
        doomed += [k for k in dst_keys if k.startswith(K.PERSONS) and k not in src_set]
        for key in doomed:
            if self._delete(key):
                self.rec_deleted += 1


def _family_name(key: str) -> str | None:
    family = K.claimed_by(key)
    return family.name if family else None


def _pack_id(key: str) -> str:
    """The pack a key under packs/ names (what stands between `packs/` and its extension)."""
    return key[len(K.PACKS):key.rindex(".")]


def _record_order(key: str):
    _, group, tail = K.split_dataset_key(key)
    # at one number, a version's tombstone goes before the version (an interrupted deletion)
    return K.dataset_of(key), K.claimed_by(key).rank, tail or "", group != "deleted", key


def _outlives_dataset(key: str) -> bool:
    """What a deleted dataset keeps: its tombstone and its citation logs (only fences)."""
    family = K.claimed_by(key)
    return family is not None and family.outlives


_CASE, _PROVENANCE = KIND_CODES["case"], KIND_CODES["provenance"]


def _publish_order(src, indexes: list[str], dst_keys: set[str]) -> list[str]:
    """The pack indexes of `src`, in the order a copy publishes them: each pack after the
    packs to copy that hold the cases its provenance objects describe. Its person table lists
    a provenance under the people of those cases, which fsck accepts only while a published
    pack holds them (the source wrote them first); in key order a mirror killed between the
    two left a table listing an object under a person it does not name (issue 32). Packs
    holding no provenance go first, in key order; a cycle (never written) keeps key order."""
    first, held, wants = [], {}, {}
    for ikey in indexes:
        found = None if ikey in dst_keys else _provenance_entries(src, ikey)
        if found is None:
            first.append(ikey)
            continue
        cases, described = found
        held[ikey] = cases
        wants[ikey] = described - cases
    holders: dict[bytes, set[str]] = {}
    for ikey, cases in held.items():
        for raw in cases:
            holders.setdefault(raw, set()).add(ikey)
    order, done, left = [], set(), sorted(wants)
    while left:
        ready = [k for k in left if all(raw not in holders or holders[raw] & done
                                        for raw in wants[k])]
        for ikey in ready or left:  # (nothing ready: a cycle, copied in key order)
            done.add(ikey)
            order.append(ikey)
        left = [k for k in left if k not in done]
    return first + order


def _provenance_entries(src, ikey: str):
    """(raw digests of its cases, raw digests of the cases its provenance objects describe)
    of the pack `ikey` publishes, or None if it holds no provenance. Only to order the copy:
    a pack or index that fails to parse is reported by _verify_pack when its turn comes."""
    try:
        _, entries = packfmt.parse_index(src.get(ikey), ikey)
    except STORAGE_FAILURES:
        raise
    except CasError:
        return None
    provenances = [e for e in entries if e.kind == _PROVENANCE]
    if not provenances:
        return None
    described = set()
    pkey = ikey[:-len(".idx")] + ".pack"
    for e in provenances:
        try:
            obj = decode_object("provenance", src.get_range(pkey, e.offset, e.length), pkey)
            described.update(to_bytes(entry.case_id) for entry in obj.entries)
        except STORAGE_FAILURES:
            raise
        except (CasError, ValueError):  # (a case id that is no digest)
            continue
    return {e.digest for e in entries if e.kind == _CASE}, described


def _verify_pack(pkey: str, pack: bytes, ikey: str, index: bytes) -> None:
    spans = {off: (length, kind) for off, length, kind in packfmt.parse_pack(pack, pkey)}
    pid, entries = packfmt.parse_index(index, ikey)
    if pid != packfmt.pack_id(pack) or pkey != K.pack_key(pid):
        raise CorruptData(f"{ikey} does not describe {pkey}", key=ikey)
    for e in entries:
        if spans.get(e.offset) != (e.length, e.kind):
            raise CorruptData(f"{ikey} points at no object at offset {e.offset}", key=ikey)
        kind = KIND_BY_CODE.get(e.kind)
        digest = from_bytes(e.digest)
        if kind is None or digest_of(kind, pack[e.offset:e.offset + e.length]) != digest:
            raise CorruptData(f"object {digest} in {pkey} does not match its digest",
                              key=pkey, digest=digest)
