"""Pack files (objects appended in batches), their sorted indexes with a fan-out table, and
multi-pack indexes that answer for all the packs of one large batch."""

from __future__ import annotations

import itertools
import os
import struct
from bisect import bisect_left
from math import isqrt
from typing import Iterable, Iterator, NamedTuple

from blake3 import blake3

from cas.errors import CorruptData, DigestMismatch, NotFound, UnsupportedFormat
from cas.format.keys import PACKS, parse_index_key
from cas.format.records import KIND_CODES
from cas.storage.backends import get_ranges

PACK_MAX_BYTES = 64 << 20  # a writer's batch is flushed as one pack once it holds this much
PACK_MAGIC = b"CASP"
INDEX_MAGIC = b"CASI"
MULTI_MAGIC = b"CASM"
PACK_FORMAT = 1
INDEX_FORMAT = 1
MULTI_FORMAT = 1
HEADER = struct.Struct(">4sI")        # magic, format
ENTRY_HEAD = struct.Struct(">BI")     # kind code, length
ROW = struct.Struct(">QIB3x")         # offset of the object bytes, length, kind code
MULTI_ROW = struct.Struct(">QIBxH")   # offset, length, kind code, pack ordinal
COUNT = struct.Struct(">I")
FANOUT = struct.Struct(">256I")
DIGEST_LEN = 32
FANOUT_AT = HEADER.size
DIGESTS_AT = FANOUT_AT + FANOUT.size
SCAN_BELOW = 128  # a remaining search range this small is read in one request
OPEN_PACKS = 256  # a multi-pack index over at most this many packs is opened with one read
OPEN_REMOTE = 32 << 10  # a remote index is opened with a read this long: a small one (a seal's
# pack, a merged one of a few hundred objects) is then read whole, with no second request
# Digests are uniform (BLAKE3), so where one sits in a sorted column is known to within a few
# dozen entries from its value: a lookup reads a window of entries there, and bisects only in
# a column too skewed for the estimate to hold.
WINDOW_SPREAD = 8         # a lookup's window spans this many times sqrt(entries) entries,
MAPPED_SPREAD = 2         # or this many in a mapped index (a probe outside costs no request)


class Entry(NamedTuple):
    digest: bytes      # raw 32 bytes
    offset: int        # of the object's bytes within the pack
    length: int
    kind: int


class PackBuffer:
    """A pack being built: each object's bytes are appended as it comes (the one copy a writer
    keeps of them), and the trailer is added once, by `seal`."""

    def __init__(self) -> None:
        self.data = bytearray(HEADER.pack(PACK_MAGIC, PACK_FORMAT))

    def __len__(self) -> int:
        return len(self.data)

    def append(self, kind: int, data: bytes) -> int:
        """Add an object; the offset of its bytes."""
        buf = self.data
        buf += ENTRY_HEAD.pack(kind, len(data))
        at = len(buf)
        buf += data
        return at

    def seal(self) -> bytearray:
        """The pack: what was appended and its checksum, hashed in one call (a call per object
        cost three times the copy). It is written as it is and never changed."""
        body = len(self.data)
        self.data += bytes(DIGEST_LEN)
        with memoryview(self.data) as view:
            self.data[body:] = blake3(view[:body]).digest()
        return self.data


# A writer keeps tree nodes in the order they were added (as a Trie emits them: a new tree's
# leaves in id order, its inner nodes each before those below it), ahead of a pack's other
# objects, which it writes in digest order (docs/format.md 7): a walk reads a subtree or a
# run of leaves at once, a page of consecutive ids one range.
TREE_CODES = frozenset({KIND_CODES["tree.leaf"], KIND_CODES["tree.node"]})


def pack_order(digest: bytes, kind: int) -> bytes:
    """An object's place in a pack a writer writes, as the key of a stable sort of objects in
    the order they came: tree nodes first (as they came), then the others by raw digest."""
    return b"" if kind in TREE_CODES else digest


# A spooled object: raw digest, kind code, length, length of the keyed digests of the people
# it names (newline-separated, before the object's bytes).
SPOOL_HEAD = struct.Struct(">32sBII")  # (a provenance names every person of its cases)
SPOOL_BUFFER = 64 << 10  # per range file: a few records a write call
SPOOL_PREFIX = "cas-spool-"  # then the writing process's id


def _sweep_spools(directory: str) -> None:
    """Delete the spools of processes that are gone (killed mid-batch): they hold cases, and
    a person's bytes must not outlive an erasure on a disk nobody looks at."""
    import shutil
    for name in os.listdir(directory):
        if not name.startswith(SPOOL_PREFIX):
            continue
        try:
            os.kill(int(name[len(SPOOL_PREFIX):].split("-")[0]), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
        except (ValueError, OSError):
            pass  # not a spool's name, or a process alive that is not ours to signal


class PackSpool:
    """The objects of a batch too large for one pack, kept in local files by the first byte
    of their digest and read back in digest order: each pack the batch then writes holds one
    range of digests, so a page of a version (consecutive ids) lies in one or two packs,
    not in every pack of the batch. Memory holds one range file at a time as it is read."""

    def __init__(self, directory: str | None = None) -> None:
        import tempfile
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
        self.directory = tempfile.mkdtemp(prefix=f"{SPOOL_PREFIX}{os.getpid()}-", dir=directory)
        self._files: list = [None] * 256
        self.bytes = 0
        _sweep_spools(os.path.dirname(self.directory))

    def add(self, raw: bytes, kind: int, data, persons: Iterable[str] | None = None) -> None:
        f = self._files[raw[0]]
        if f is None:
            f = self._files[raw[0]] = open(os.path.join(self.directory, f"{raw[0]:02x}"),
                                           "w+b", buffering=SPOOL_BUFFER)
        named = "\n".join(sorted(persons)).encode() if persons else b""
        f.write(SPOOL_HEAD.pack(raw, kind, len(data), len(named)) + named)
        f.write(data)
        self.bytes += SPOOL_HEAD.size + len(named) + len(data)

    def drain(self) -> Iterator[tuple[bytes, int, memoryview, set[str] | None]]:
        """(raw digest, kind, bytes, keyed digests of people or None) of every object added,
        in digest order; each range file is deleted once read."""
        for i, f in enumerate(self._files):
            if f is None:
                continue
            f.seek(0)
            blob = f.read()
            f.close()
            self._files[i] = None
            os.unlink(f.name)
            records, pos, head = [], 0, SPOOL_HEAD
            while pos < len(blob):
                raw, kind, n, p = head.unpack_from(blob, pos)
                pos += head.size
                records.append((raw, kind, pos, p, n))
                pos += p + n
            records.sort()
            view = memoryview(blob)
            for raw, kind, at, p, n in records:
                persons = set(blob[at:at + p].decode().split("\n")) if p else None
                yield raw, kind, view[at + p:at + p + n], persons

    def close(self) -> None:
        """Delete the files (what was not read is dropped)."""
        import shutil
        for f in self._files:
            if f is not None:
                f.close()
        self._files = [None] * 256
        shutil.rmtree(self.directory, ignore_errors=True)


def format_pack(objects: Iterable[tuple[int, bytes]]) -> tuple[bytearray, list[tuple[int, int]]]:
    """Pack bytes for (kind code, data) pairs, and each object's (offset, length)."""
    pack = PackBuffer()
    spans = [(pack.append(kind, data), len(data)) for kind, data in objects]
    return pack.seal(), spans


def pack_id(pack: bytes) -> str:
    """A pack is named by its trailer: the BLAKE3 of everything before it."""
    return pack[-DIGEST_LEN:].hex()


def index_pack(index: bytes) -> str:
    """The pack an index is of (it is named before the index's own checksum)."""
    return index[-2 * DIGEST_LEN:-DIGEST_LEN].hex()


def _check_header(data: bytes, min_size: int, magic: bytes, fmt: int, what: str,
                  where: str) -> None:
    if len(data) < min_size:
        raise CorruptData(f"{where} is truncated ({len(data)} bytes)", key=where)
    got_magic, got_fmt = HEADER.unpack_from(data, 0)
    if got_magic != magic:
        raise CorruptData(f"{where} does not start with the {what} magic", key=where)
    if got_fmt != fmt:
        raise UnsupportedFormat(f"{where} has {what} format {got_fmt}; this cas reads {fmt}",
                                key=where, format=got_fmt)


def parse_pack(pack: bytes, where: str = "pack") -> Iterator[tuple[int, int, int]]:
    """Check a whole pack and yield (offset, length, kind) of each object, in file order."""
    _check_header(pack, HEADER.size + DIGEST_LEN, PACK_MAGIC, PACK_FORMAT, "pack", where)
    body_end = len(pack) - DIGEST_LEN
    got = blake3(memoryview(pack)[:body_end]).digest()
    if got != pack[body_end:]:
        raise DigestMismatch(pack[body_end:].hex(), got.hex(), where)
    pos = HEADER.size
    while pos < body_end:
        if pos + ENTRY_HEAD.size > body_end:
            raise CorruptData(f"{where}: entry header at {pos} runs past the end", key=where)
        kind, length = ENTRY_HEAD.unpack_from(pack, pos)
        pos += ENTRY_HEAD.size
        if pos + length > body_end:
            raise CorruptData(f"{where}: entry at {pos} runs past the end", key=where)
        yield pos, length, kind
        pos += length


def format_index(pid: str, entries: list[Entry]) -> bytes:
    """The index of a pack: entries sorted by digest, a fan-out table, and a checksum."""
    entries = sorted(entries, key=_by_digest)
    digests = [e.digest for e in entries]
    pack_row = ROW.pack
    parts = [HEADER.pack(INDEX_MAGIC, INDEX_FORMAT), FANOUT.pack(*_fanout(digests)),
             b"".join(digests), b"".join([pack_row(e.offset, e.length, e.kind) for e in entries]),
             bytes.fromhex(pid)]
    return _with_checksum(parts)


def _by_digest(entry: Entry) -> bytes:
    return entry.digest


def _fanout(sorted_digests: list[bytes]) -> list[int]:
    """Entry b: how many digests have a first byte <= b."""
    return [bisect_left(sorted_digests, bytes([b + 1])) for b in range(255)] + [len(sorted_digests)]


def _check_fanout(fanout, sorted_digests: list[bytes], where: str) -> None:
    """Readers trust every fan-out slot, including those of empty buckets: all must agree."""
    for b, (got, total) in enumerate(zip(fanout, _fanout(sorted_digests))):
        if got != total:
            raise CorruptData(f"{where}: fan-out table entry {b} is {got}, "
                              f"but {total} digests start with a byte <= {b}", key=where)


def _with_checksum(parts: list[bytes]) -> bytes:
    h = blake3()
    for part in parts:  # hash the parts, then join once
        h.update(part)
    parts.append(h.digest())
    return b"".join(parts)


def parse_index(data: bytes, where: str = "index") -> tuple[str, list[Entry]]:
    """Check a whole index (checksum, order, fan-out) and return (pack id, entries)."""
    _check_header(data, DIGESTS_AT + 2 * DIGEST_LEN, INDEX_MAGIC, INDEX_FORMAT, "index", where)
    got = blake3(memoryview(data)[:-DIGEST_LEN]).digest()
    if got != data[-DIGEST_LEN:]:
        raise DigestMismatch(data[-DIGEST_LEN:].hex(), got.hex(), where)
    fanout = FANOUT.unpack_from(data, FANOUT_AT)
    n = fanout[255]
    rows_at = DIGESTS_AT + n * DIGEST_LEN
    if len(data) != rows_at + n * ROW.size + 2 * DIGEST_LEN:
        raise CorruptData(f"{where}: size does not match its {n} entries", key=where)
    entries = []
    prev = b""
    for i in range(n):
        d = data[DIGESTS_AT + i * DIGEST_LEN: DIGESTS_AT + (i + 1) * DIGEST_LEN]
        if d <= prev:
            raise CorruptData(f"{where}: entries are not strictly sorted at {i}", key=where)
        if not (fanout[d[0] - 1] if d[0] else 0) <= i < fanout[d[0]]:
            raise CorruptData(f"{where}: fan-out table disagrees with entry {i}", key=where)
        prev = d
        row_at = rows_at + i * ROW.size
        if data[row_at + 13: row_at + 16] != b"\0\0\0":
            raise CorruptData(f"{where}: row {i} has non-zero padding", key=where)
        offset, length, kind = ROW.unpack_from(data, row_at)
        entries.append(Entry(d, offset, length, kind))
    _check_fanout(fanout, [e.digest for e in entries], where)
    pid = data[rows_at + n * ROW.size: rows_at + n * ROW.size + DIGEST_LEN].hex()
    return pid, entries


class IndexReader:
    """Looks digests up in one stored index with a few small range reads, never the whole file.

    Works for a pack index (`.idx`, one pack) and a multi-pack index (`.midx`); `lookup`
    returns the key of the pack holding the object and its entry.
    """

    def __init__(self, backend, key: str) -> None:
        self.backend = backend
        self.key = key
        self.multi = key.endswith(".midx")
        self._fanout: tuple[int, ...] | None = None
        self._packs: list[str] = []
        self._digests_at = DIGESTS_AT
        self._mapped = None  # the file held locally (backend.map: slices are bytes, no call)
        # (first position, bytes) of the rows read with the last window: one tuple, replaced
        # whole, so a thread reads a consistent pair (the file never changes, so any window's
        # rows are right for the positions they cover)
        self._rows: tuple[int, bytes] = (0, b"")

    def _read(self, key: str, offset: int, length: int) -> bytes:
        if self._mapped is not None:
            return self._mapped[offset:offset + length]
        return self.backend.get_range(key, offset, length)

    def confirm(self) -> None:
        """Raise NotFound if this index is gone. A held index answers after it was deleted
        (gc or an erasure replaced its pack): what it found is confirmed with one call, as a
        range read of a deleted index would have failed."""
        if self._mapped is not None and not self.backend.exists(self.key):
            raise NotFound(f"no such key {self.key!r}", key=self.key)

    def _open(self) -> None:
        # A local index is held open once: each probe is then a pread, not a call (an
        # index is immutable; one deleted since keeps answering, so what it finds is confirmed).
        mapper = getattr(type(self.backend), "map", None)
        if mapper is not None:
            self._mapped = mapper(self.backend, self.key)
        keep = getattr(self.backend, "keep", None)  # a cache in front of a remote store
        opening = (HEADER.size + COUNT.size + OPEN_PACKS * DIGEST_LEN + FANOUT.size
                   if self.multi else DIGESTS_AT)
        if self._mapped is None and keep is not None:
            opening = max(opening, OPEN_REMOTE)
        prefix = self._read(self.key, 0, opening)
        if self.multi:
            # One read of a prefix that holds the header, the pack table and the fan-out of
            # any index over up to OPEN_PACKS packs; a second only for a larger table.
            head = prefix[:HEADER.size + COUNT.size]
            _check_header(head, HEADER.size + COUNT.size, MULTI_MAGIC, MULTI_FORMAT,
                          "multi-pack index", self.key)
            (count,) = COUNT.unpack_from(head, HEADER.size)
            table_at = HEADER.size + COUNT.size
            fanout_at = table_at + count * DIGEST_LEN
            rest = prefix[table_at:fanout_at + FANOUT.size] if count <= OPEN_PACKS else \
                self._read(self.key, table_at, count * DIGEST_LEN + FANOUT.size)
            if len(rest) != count * DIGEST_LEN + FANOUT.size:
                raise CorruptData(f"{self.key} is truncated", key=self.key)
            self._packs = [rest[i:i + DIGEST_LEN].hex()
                           for i in range(0, count * DIGEST_LEN, DIGEST_LEN)]
            self._fanout = FANOUT.unpack_from(rest, count * DIGEST_LEN)
            self._digests_at = fanout_at + FANOUT.size
        else:
            head = prefix[:DIGESTS_AT]
            _check_header(head, DIGESTS_AT, INDEX_MAGIC, INDEX_FORMAT, "index", self.key)
            self._fanout = FANOUT.unpack_from(head, FANOUT_AT)
            self._packs = [_pack_of(self.key)]
        if self._mapped is None and keep is not None:
            # Its copy may be fetched now that its size is known (small ones are, at once;
            # one the opening read held whole is kept as read).
            n = self._fanout[255]
            rows = MULTI_ROW if self.multi else ROW
            size = self._digests_at + n * (DIGEST_LEN + rows.size) + DIGEST_LEN * (
                1 if self.multi else 2)  # (a pack index names its pack before its checksum)
            self._mapped = keep(self.key, size, prefix if len(prefix) == size else None)

    @property
    def fanout(self) -> tuple[int, ...]:
        if self._fanout is None:
            self._open()
        return self._fanout

    @property
    def packs(self) -> list[str]:
        """Ids of the packs this index answers for."""
        if not self.multi:  # named by its key: no read needed
            return [_pack_of(self.key)]
        if self._fanout is None:
            self._open()
        return self._packs

    def __len__(self) -> int:
        return self.fanout[255]

    def lookup(self, digest: bytes, confirm: bool = True) -> tuple[str, Entry] | None:
        """The pack holding `digest` and its entry, or None. `confirm=False` is for a caller
        that reads the object from that pack next: a pack is deleted after its index (gc, an
        erasure), so a mapped index's stale hit fails that read, and the call that would
        confirm it is saved."""
        found = self._find(digest)
        if found is not None and confirm:
            self.confirm()
        return found

    def _find(self, digest: bytes) -> tuple[str, Entry] | None:
        """`lookup` without the confirmation that the index is still there."""
        fanout = self.fanout
        at = self._digests_at
        lo = fanout[digest[0] - 1] if digest[0] else 0
        hi = fanout[digest[0]]
        read = self._read
        block = None  # the entries [lo, hi) that answer, once read
        if hi - lo > SCAN_BELOW:
            lo, hi, block = self._window(digest, lo, hi)
        if block is None:
            # A small bucket is read whole; in a skewed column, what the window left is
            # bisected a probe at a time down to SCAN_BELOW entries, read at once.
            while hi - lo > SCAN_BELOW:
                mid = (lo + hi) // 2
                probe = read(self.key, at + mid * DIGEST_LEN, DIGEST_LEN)
                if probe < digest:
                    lo = mid + 1
                elif probe > digest:
                    hi = mid
                else:
                    return self._row(digest, mid)
            if lo >= hi:
                return None
            block = read(self.key, at + lo * DIGEST_LEN, (hi - lo) * DIGEST_LEN)
        pos = _slot(block, digest)
        return None if pos is None else self._row(digest, lo + pos)

    def _window(self, digest: bytes, lo: int, hi: int) -> tuple[int, int, bytes | None]:
        """One read of the entries around where `digest`'s value puts it in [lo, hi)
        (WINDOW_SPREAD * sqrt(n) of them, at least SCAN_BELOW: of n uniform keys, how many lie
        below a value is binomial, its standard deviation at most sqrt(n)/2, so the window is
        16 standard deviations wide; MAPPED_SPREAD, 4 wide, in a mapped index, where a miss
        costs a few slices, not a request): the window's bounds and bytes when it brackets
        `digest`, or else the narrowed range left to bisect and None (a skewed column, or a
        mapped estimate off)."""
        span = hi - lo
        spread = WINDOW_SPREAD if self._mapped is None else MAPPED_SPREAD
        half = max(SCAN_BELOW, spread * isqrt(span)) // 2
        est = lo + int.from_bytes(digest[1:9], "big") * span // (1 << 64)
        a, b = max(lo, est - half), min(hi, est + half)
        block = self._read_window(a, b)
        if len(block) != (b - a) * DIGEST_LEN:
            raise CorruptData(f"{self.key} is truncated or its fan-out table is corrupt",
                              key=self.key)
        if a > lo and block[:DIGEST_LEN] > digest:
            return lo, a, None  # below the window: what it read still narrows the range
        if b < hi and block[-DIGEST_LEN:] < digest:
            return b, hi, None
        return a, b, block

    def _read_window(self, a: int, b: int) -> bytes:
        """The digests of positions [a, b). Where the backend takes requests at once (a remote
        store) and the index is not mapped, their rows are read in the same round trip, kept
        for `_row`: a lookup then waits for one round trip, not two."""
        at, size = self._digests_at, (b - a) * DIGEST_LEN
        if self._mapped is not None or not getattr(type(self.backend), "CONCURRENT_CALLS",
                                                   False):
            return self._read(self.key, at + a * DIGEST_LEN, size)
        rows = MULTI_ROW if self.multi else ROW
        rows_at = at + self.fanout[255] * DIGEST_LEN + a * rows.size
        block, rows_read = get_ranges(self.backend, self.key, [
            (at + a * DIGEST_LEN, size), (rows_at, (b - a) * rows.size)])
        self._rows = (a, rows_read)
        return block

    def _row(self, digest: bytes, lo: int) -> tuple[str, Entry]:
        """The pack and entry of the row at position `lo`, whose digest is `digest`."""
        n = self.fanout[255]
        at = self._digests_at
        read = self._read
        row_struct = MULTI_ROW if self.multi else ROW
        first, rows_read = self._rows
        start = (lo - first) * row_struct.size
        if 0 <= start and start + row_struct.size <= len(rows_read):
            row = rows_read[start:start + row_struct.size]  # read with its window
        else:
            row = read(self.key, at + n * DIGEST_LEN + lo * row_struct.size, row_struct.size)
        if len(row) != row_struct.size:  # the fan-out promised more entries than the file holds
            raise CorruptData(f"{self.key} is truncated or its fan-out table is corrupt",
                              key=self.key)
        if self.multi:
            offset, length, kind, ordinal = MULTI_ROW.unpack(row)
            if ordinal >= len(self._packs):
                raise CorruptData(f"{self.key}: row names pack {ordinal} of {len(self._packs)}",
                                  key=self.key)
        else:
            offset, length, kind = ROW.unpack(row)
            ordinal = 0
        return self._packs[ordinal], Entry(digest, offset, length, kind)

    def lookup_many(self, digests: list[bytes],
                    confirm: bool = True) -> dict[bytes, tuple[str, Entry]]:
        """Where each of `digests` (sorted) is, of those this index holds: one read of the
        digest column between the first and the last, one of their rows (a page of a
        version's ids lies close together in the sorted column). Falls back to one lookup
        each when the span between them is much wider than their number. `confirm` as in
        `lookup`."""
        if not digests:
            return {}
        fanout = self.fanout
        first, last = digests[0], digests[-1]
        lo = fanout[first[0] - 1] if first[0] else 0
        hi = fanout[last[0]]
        at = self._digests_at
        block = None
        if hi - lo > SCAN_BELOW + 16 * len(digests):
            # Consecutive ids (a page of a version) lie together in a wide column: the window
            # their values put them in, if it is narrow, brackets them in one read.
            lo, hi, block = self._span(first, last, lo, hi, len(digests))
            if block is None:
                out = {d: found for d in digests if (found := self._find(d)) is not None}
                if out and confirm:
                    self.confirm()  # once for the batch, as the read below is confirmed once
                return out
        keys = _digests(block if block is not None else
                        self._read(self.key, at + lo * DIGEST_LEN, (hi - lo) * DIGEST_LEN))
        positions = {}
        for d in digests:
            i = _position(keys, d)
            if i is not None:
                positions[d] = lo + i
        if not positions:
            return {}
        row_struct = MULTI_ROW if self.multi else ROW
        start, stop = min(positions.values()), max(positions.values()) + 1
        rows_at = at + fanout[255] * DIGEST_LEN + start * row_struct.size
        rows = self._read(self.key, rows_at, (stop - start) * row_struct.size)
        if len(rows) != (stop - start) * row_struct.size:
            raise CorruptData(f"{self.key} is truncated or its fan-out table is corrupt",
                              key=self.key)
        out = {}
        for d, pos in positions.items():
            fields = row_struct.unpack_from(rows, (pos - start) * row_struct.size)
            ordinal = fields[3] if self.multi else 0
            if ordinal >= len(self._packs):
                raise CorruptData(f"{self.key}: row names pack {ordinal} of "
                                  f"{len(self._packs)}", key=self.key)
            out[d] = self._packs[ordinal], Entry(d, fields[0], fields[1], fields[2])
        if confirm:
            self.confirm()
        return out

    def _span(self, first: bytes, last: bytes, lo: int, hi: int,
              count: int) -> tuple[int, int, bytes | None]:
        """The window of [lo, hi) that the values of `first` and `last` put them between
        (widened as `_window` widens one digest's), read, when it is narrow for `count`
        digests and brackets both; else (lo, hi, None)."""
        span = hi - lo
        spread = WINDOW_SPREAD if self._mapped is None else MAPPED_SPREAD
        half = max(SCAN_BELOW, spread * isqrt(span)) // 2
        # (a position by value over the whole range: the fan-out buckets between first and
        # last are all spanned, so one linear estimate serves both ends)
        lo_value = first[0] << 64
        hi_value = (last[0] + 1) << 64

        def estimate(d: bytes) -> int:
            value = (d[0] << 64) + int.from_bytes(d[1:9], "big")
            return lo + (value - lo_value) * span // (hi_value - lo_value)
        a, b = max(lo, estimate(first) - half), min(hi, estimate(last) + half)
        if b - a > SCAN_BELOW + 16 * count + 2 * half:
            return lo, hi, None
        block = self._read(self.key, self._digests_at + a * DIGEST_LEN, (b - a) * DIGEST_LEN)
        if len(block) != (b - a) * DIGEST_LEN:
            raise CorruptData(f"{self.key} is truncated or its fan-out table is corrupt",
                              key=self.key)
        if (a > lo and block[:DIGEST_LEN] > first) or (b < hi and block[-DIGEST_LEN:] < last):
            return lo, hi, None  # the estimate is off (a skewed column): one lookup each
        return a, b, block

    def all_digests(self) -> set[bytes]:
        """Every digest of this index in one read (for bulk existence checks)."""
        n = len(self)
        block = self._read(self.key, self._digests_at, n * DIGEST_LEN)
        self.confirm()
        return set(_digests(block))


def _digests(block: bytes) -> list[bytes]:
    """The digests of a slice of an index's digest column."""
    return [block[i:i + DIGEST_LEN] for i in range(0, len(block), DIGEST_LEN)]


def _slot(block: bytes, digest: bytes) -> int | None:
    """Where `digest` is among the digests of `block` (a slice of a digest column), or None:
    the bytes searched for at C speed, a match kept only where it starts a digest."""
    i = block.find(digest)
    while i > 0 and i % DIGEST_LEN:
        i = block.find(digest, i + 1)
    return None if i < 0 else i // DIGEST_LEN


def _position(keys: list[bytes], digest: bytes) -> int | None:
    """Where `digest` is in the sorted `keys`, or None."""
    i = bisect_left(keys, digest)
    return i if i < len(keys) and keys[i] == digest else None


def format_multi_index(indexes: list[bytes]) -> bytes:
    """One index over several packs, merged from their (sorted) pack indexes.

    The merge goes a fan-out bucket at a time (the entries of one first byte, from every
    index, sorted together), so it needs little more memory than the result; a row's pack
    ordinal is the position of its pack's index in `indexes`. An object several of the packs
    hold gets one row: the smallest (offset, length, kind, ordinal).
    """
    pack_ids, columns = [], []
    for ordinal, blob in enumerate(indexes):
        fanout = FANOUT.unpack_from(blob, FANOUT_AT)
        rows_at = DIGESTS_AT + fanout[255] * DIGEST_LEN
        end = rows_at + fanout[255] * ROW.size
        pack_ids.append(blob[end:end + DIGEST_LEN])
        tail = b"\0" + ordinal.to_bytes(2, "big")  # a pack row's first 13 bytes, then this
        columns.append((blob, fanout, rows_at, tail))
    # Columns built in place: a million rows as a list of bytes objects each would cost
    # about 120 MB for a result of 48 MB.
    digests, rows, by_first_byte = bytearray(), bytearray(), [0] * 256
    for first in range(256):
        bucket: list[tuple[bytes, bytes]] = []
        for blob, fanout, rows_at, tail in columns:
            bucket += [(blob[DIGESTS_AT + i * DIGEST_LEN:DIGESTS_AT + (i + 1) * DIGEST_LEN],
                        blob[rows_at + i * ROW.size:rows_at + i * ROW.size + 13] + tail)
                       for i in range(fanout[first - 1] if first else 0, fanout[first])]
        bucket.sort(reverse=True)
        unique = dict(bucket)  # per digest the row inserted last: the smallest
        digests += b"".join(reversed(unique.keys()))
        rows += b"".join(reversed(unique.values()))
        by_first_byte[first] = len(unique)
    return _with_checksum([
        HEADER.pack(MULTI_MAGIC, MULTI_FORMAT), COUNT.pack(len(pack_ids)), b"".join(pack_ids),
        FANOUT.pack(*itertools.accumulate(by_first_byte)), digests, rows])


def parse_multi_index(data: bytes, where: str = "multi-pack index"
                      ) -> tuple[list[str], list[tuple[Entry, int]]]:
    """Check a whole multi-pack index and return (pack ids, [(entry, pack ordinal)])."""
    _check_header(data, HEADER.size + COUNT.size + FANOUT.size + DIGEST_LEN, MULTI_MAGIC,
                  MULTI_FORMAT, "multi-pack index", where)
    got = blake3(memoryview(data)[:-DIGEST_LEN]).digest()
    if got != data[-DIGEST_LEN:]:
        raise DigestMismatch(data[-DIGEST_LEN:].hex(), got.hex(), where)
    (count,) = COUNT.unpack_from(data, HEADER.size)
    table_at = HEADER.size + COUNT.size
    fanout_at = table_at + count * DIGEST_LEN
    if count == 0 or len(data) < fanout_at + FANOUT.size + DIGEST_LEN:
        raise CorruptData(f"{where}: pack table does not fit", key=where)
    packs = [data[table_at + i * DIGEST_LEN: table_at + (i + 1) * DIGEST_LEN].hex()
             for i in range(count)]
    fanout = FANOUT.unpack_from(data, fanout_at)
    n = fanout[255]
    digests_at = fanout_at + FANOUT.size
    rows_at = digests_at + n * DIGEST_LEN
    if len(data) != rows_at + n * MULTI_ROW.size + DIGEST_LEN:
        raise CorruptData(f"{where}: size does not match its {n} entries", key=where)
    out = []
    prev = b""
    for i in range(n):
        d = data[digests_at + i * DIGEST_LEN: digests_at + (i + 1) * DIGEST_LEN]
        if d <= prev:
            raise CorruptData(f"{where}: entries are not strictly sorted at {i}", key=where)
        prev = d
        row_at = rows_at + i * MULTI_ROW.size
        if data[row_at + 13] != 0:
            raise CorruptData(f"{where}: row {i} has non-zero padding", key=where)
        offset, length, kind, ordinal = MULTI_ROW.unpack_from(data, row_at)
        if ordinal >= count:
            raise CorruptData(f"{where}: row {i} names pack {ordinal} of {count}", key=where)
        out.append((Entry(d, offset, length, kind), ordinal))
    _check_fanout(fanout, [e.digest for e, _ in out], where)
    return packs, out


def _pack_of(key: str) -> str:
    """The pack a pack index answers for, told by its key (a key of another form, which only a
    damaged repository holds, by what stands between `packs/` and `.idx`)."""
    found = parse_index_key(key)
    return found[0] if found else key[len(PACKS):-len(".idx")]
