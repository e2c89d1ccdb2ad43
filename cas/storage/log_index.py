"""Keyed indexes over the run-import and review logs (docs/format.md 8.2).

A fresh process resolves a run id, an annotation id, the reviews of a run or a review batch's
confirm token with a few small reads instead of reading every record of a log. A segment
covers the records (lo, hi] of one log: rows sorted by a keyed 16-byte digest of what is looked
up, each naming the record and the byte span of the entry inside its file, with a check of
those bytes. The log stays the only truth: a row is verified against the record it names,
and a row an erasure's redaction made stale (its bytes moved or are gone) falls back to
reading that record whole. Rows only ever cover more than the records hold, never less, so
whatever a lookup does not find is not in the covered records.

Writers add the segment of each record they land, and merge like a binary counter: record n
also writes the segment of (n - 2^k, n] for every 2^k dividing n, built from the two halves.
A reader's cover is then at most one segment per bit of the log's length.
"""

from __future__ import annotations

import collections
import itertools
import struct
from bisect import bisect_left
from typing import Any, Iterable, NamedTuple

import msgspec
from blake3 import blake3

from cas.digest import log_index_key
from cas.errors import CasError, CorruptData, NotFound, UnsupportedFormat
from cas.format import encoding
from cas.format.keys import (LOG_INDEXES, import_key, log_segment_key, parse_log_segment_key,
                             review_batch_key)
from cas.format.records import Review, ReviewBatch, RunEntry, RunImport, parse_record_file

MAGIC = b"CASL"
FORMAT = 1
HEADER = struct.Struct(">4sIB3xIII")  # magic, format, fan-out bits, lo, hi, rows
ROW = struct.Struct(">16sIII16s")     # key, record number, offset, length, check
SLOT = struct.Struct(">I")
TRAILER = 32
MAX_BITS = 24
OPEN_READ = 4096     # the first read of a segment: a small one arrives whole
WHOLE_BELOW = 1 << 20  # a segment this small is read whole when many keys are looked up
MANY = 64            # keys at once that make reading a whole (small) segment worth it
RECORDS_KEPT = 8     # whole records kept per log (the fallback of stale rows)
SLICES_BELOW = 16    # rows to resolve in one record from which on it is read whole instead
SCAN_FACTOR = 32     # rows per value asked below which the covered records are read whole


class Log(NamedTuple):
    """What one log's index holds: for each entry of `field`, a row per (row field, entry
    attribute); for the record itself, a row per (row field, record attribute) naming it whole."""

    name: str
    key_of: Any
    record_type: type
    field: str
    entry_type: type
    entry_rows: tuple[tuple[str, str], ...]
    record_rows: tuple[tuple[str, str], ...] = ()
    # fields a value of which, once found, a later record never adds to (ids): a lookup that
    # found them reads no newer records
    unique: frozenset[str] = frozenset()


RUNS = Log("runs", import_key, RunImport, "runs", RunEntry,
           (("run-id", "run_id"), ("run", "run")), unique=frozenset({"run-id"}))
REVIEWS = Log("reviews", review_batch_key, ReviewBatch, "reviews", Review,
              (("annotation", "annotation_id"), ("run", "run"), ("run-id", "run_id")),
              (("token", "confirm_token"),), unique=frozenset({"annotation", "token"}))
LOGS = {log.name: log for log in (RUNS, REVIEWS)}
_ATTR = {(log.name, f): a for log in LOGS.values() for f, a in log.entry_rows + log.record_rows}


def _check(data: bytes) -> bytes:
    return blake3(data).digest(length=16)


def _bits(rows: int) -> int:
    """Fan-out width: about 8 rows a bucket, so a lookup reads two slots and one bucket."""
    return min(MAX_BITS, (rows // 8).bit_length())


def _bucket(key: bytes, bits: int) -> int:
    return int.from_bytes(key[:4], "big") >> (32 - bits) if bits else 0


# -- the format (pure) --------------------------------------------------------------------------
def format_segment(lo: int, hi: int, rows: Iterable[bytes]) -> bytes:
    """A segment over records (lo, hi] from packed rows (any order; duplicates kept once)."""
    rows = sorted(set(rows))
    bits = _bits(len(rows))
    slots = [0] * (1 << bits)
    for row in rows:
        slots[_bucket(row, bits)] += 1
    total = 0
    for b, n in enumerate(slots):
        total += n
        slots[b] = total
    body = b"".join([HEADER.pack(MAGIC, FORMAT, bits, lo, hi, len(rows)),
                     struct.pack(f">{len(slots)}I", *slots), *rows])
    return body + blake3(body).digest()


def rows_of(log: Log, number: int, data: bytes, record, secret: bytes) -> list[bytes]:
    """The rows of record `number` (`data`: its file, `record`: the record it holds). Each
    entry's span is found in the file from where the previous one ended; an entry whose
    canonical bytes are not found there (never expected) is indexed as the whole record."""
    rows = []
    pos = 0
    for entry in getattr(record, log.field):
        enc = encoding.encode(entry)
        at = data.find(enc, pos)
        span = (at, len(enc), _check(enc)) if at >= 0 else (0, 0, bytes(16))
        if at >= 0:
            pos = at + len(enc)
        for field, attr in log.entry_rows:
            rows.append(ROW.pack(log_index_key(field, getattr(entry, attr), secret), number,
                                 *span))
    for field, attr in log.record_rows:
        value = getattr(record, attr)
        if value is not None:
            rows.append(ROW.pack(log_index_key(field, value, secret), number, 0, 0, bytes(16)))
    return rows


def parse_segment(data: bytes, where: str) -> tuple[int, int, list[bytes]]:
    """Check a whole segment (fsck, merges): (lo, hi, rows)."""
    if len(data) < HEADER.size + TRAILER:
        raise CorruptData(f"{where} is truncated ({len(data)} bytes)", key=where)
    magic, fmt, bits, lo, hi, count = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptData(f"{where} does not start with the log index magic", key=where)
    if fmt != FORMAT:
        raise UnsupportedFormat(f"{where} has log index format {fmt}; this cas reads {FORMAT}",
                                key=where, format=fmt)
    if blake3(memoryview(data)[:-TRAILER]).digest() != data[-TRAILER:]:
        raise CorruptData(f"{where}: its checksum does not match its bytes", key=where)
    if bits != _bits(count) or not lo < hi:
        raise CorruptData(f"{where}: fan-out bits {bits} for {count} rows, records ({lo}, "
                          f"{hi}]", key=where)
    rows_at = HEADER.size + SLOT.size * (1 << bits)
    if len(data) != rows_at + count * ROW.size + TRAILER:
        raise CorruptData(f"{where}: its length does not match its {count} rows", key=where)
    rows = [data[i:i + ROW.size] for i in range(rows_at, rows_at + count * ROW.size, ROW.size)]
    if any(a >= b for a, b in zip(rows, rows[1:])):
        raise CorruptData(f"{where}: its rows are not sorted", key=where)
    slots = [0] * (1 << bits)
    for row in rows:
        slots[_bucket(row, bits)] += 1
        number = int.from_bytes(row[16:20], "big")
        if not lo < number <= hi:
            raise CorruptData(f"{where}: a row names record {number}, outside ({lo}, {hi}]",
                              key=where)
    if list(itertools.accumulate(slots)) != list(
            struct.unpack_from(f">{len(slots)}I", data, HEADER.size)):
        raise CorruptData(f"{where}: its fan-out table does not match its rows", key=where)
    return lo, hi, rows


class Segment:
    """One stored segment, read with range reads (or whole, once many keys are asked)."""

    def __init__(self, backend, key: str, lo: int, hi: int) -> None:
        self.backend, self.key, self.lo, self.hi = backend, key, lo, hi
        self._head: bytes | None = None
        self._whole: bytes | None = None
        self.bits = self.count = 0

    def _read(self, offset: int, length: int) -> bytes:
        if self._whole is not None:
            return self._whole[offset:offset + length]
        if self._head is not None and offset + length <= len(self._head):
            return self._head[offset:offset + length]
        return self.backend.get_range(self.key, offset, length)

    def _open(self) -> None:
        if self._head is None:
            mapper = getattr(type(self.backend), "map", None)
            if mapper is not None and self._whole is None:  # a local file: probes are slices
                self._whole = mapper(self.backend, self.key)
            head = self._read(0, OPEN_READ)
            if len(head) < HEADER.size or head[:4] != MAGIC:
                raise CorruptData(f"{self.key} is not a log index segment", key=self.key)
            magic, fmt, bits, lo, hi, count = HEADER.unpack_from(head)
            if fmt != FORMAT:
                raise UnsupportedFormat(f"{self.key} has log index format {fmt}; this cas "
                                        f"reads {FORMAT}", key=self.key, format=fmt)
            if bits > MAX_BITS or (lo, hi) != (self.lo, self.hi):
                raise CorruptData(f"{self.key}: its header does not match its name", key=self.key)
            self._head, self.bits, self.count = head, bits, count

    def rows_held(self) -> int:
        self._open()
        return self.count

    def size(self) -> int:
        self._open()
        return HEADER.size + SLOT.size * (1 << self.bits) + self.count * ROW.size + TRAILER

    def load_whole(self) -> None:
        self._open()
        if self._whole is None:
            data = self.backend.get(self.key)
            parse_segment(data, self.key)
            self._whole = data

    def rows(self, key: bytes) -> list[tuple[int, int, int, bytes]]:
        """(record number, offset, length, check) of every row of `key`."""
        self._open()
        b = _bucket(key, self.bits)
        if b:
            first, last = struct.unpack(">II", self._read(HEADER.size + SLOT.size * (b - 1), 8))
        else:
            first, last = 0, SLOT.unpack(self._read(HEADER.size, SLOT.size))[0]
        if first >= last:
            return []
        rows_at = HEADER.size + SLOT.size * (1 << self.bits)
        block = self._read(rows_at + first * ROW.size, (last - first) * ROW.size)
        if len(block) != (last - first) * ROW.size or last > self.count:
            raise CorruptData(f"{self.key} is truncated or its fan-out table is corrupt",
                              key=self.key)
        out = []
        for i in range(0, len(block), ROW.size):
            k, number, offset, length, check = ROW.unpack_from(block, i)
            if k == key:
                out.append((number, offset, length, check))
        return out


def _cover(found: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """From (lo, hi, key) of the stored segments, a chain from 0 taking the widest at each
    step; where none starts, the chain jumps to the next one (the records between are read
    whole). Of two segments over the same records the smaller key is taken."""
    by_lo: dict[int, tuple[int, int, str]] = {}
    for seg in sorted(found, key=lambda s: (s[0], -s[1], s[2])):
        by_lo.setdefault(seg[0], seg)
    chain, pos = [], 0
    starts = sorted(by_lo)
    while True:
        seg = by_lo.get(pos)
        if seg is None:
            i = bisect_left(starts, pos)
            if i == len(starts):
                return chain
            seg = by_lo[starts[i]]
        chain.append(seg)
        pos = seg[1]


def stored_segments(backend, log: Log) -> list[tuple[int, int, str]]:
    """(lo, hi, key) of every segment of `log` (one listing)."""
    out = []
    for key in backend.list(f"{LOG_INDEXES}{log.name}/"):
        parsed = parse_log_segment_key(key)
        if parsed is not None and parsed[0] == log.name:
            out.append((parsed[1], parsed[2], key))
    return out


def superseded(found: list[tuple[int, int, str]]) -> list[str]:
    """The keys of segments another one covers (gc deletes them): records within its range,
    or the same range under a larger key."""
    out, widest = [], -1
    # In this order every segment that could cover one comes before it.
    for lo, hi, key in sorted(found, key=lambda s: (s[0], -s[1], s[2])):
        if hi <= widest:
            out.append(key)
        widest = max(widest, hi)
    return sorted(out)


# -- reading --------------------------------------------------------------------------------
class LogIndex:
    """Keyed lookups in one log: the segments of a cover, then the records after it (and in
    its gaps), read whole and kept. `refresh` reads the records landed since; `head` is the
    number of the last record, exactly as reading the log from 1 would find it."""

    def __init__(self, backend, log: Log, secret: bytes) -> None:
        self.backend, self.log, self.secret = backend, log, secret
        self._segments: list[Segment] | None = None
        self._tail: dict[bytes, list[tuple[int, Any]]] = {}  # row key -> (number, object)
        self.head = 0
        self._records: dict[int, Any] = {}  # whole records read for stale rows (a few)
        self._found: dict[tuple[str, str], list] = {}  # (field, value) -> what segments hold
        self._prefetched: set[tuple[str, str]] = set()

    def _load(self) -> None:
        found = stored_segments(self.backend, self.log)
        chain = _cover(found)
        # The log's last record must be there: a segment beyond it (a mirror's copy cut short)
        # must not move the head, or the next writer would leave a hole in the log.
        while chain and not self.backend.exists(self.log.key_of(chain[-1][1])):
            chain.pop()
        self._segments, self._tail, self.head = [], {}, 0
        for lo, hi, key in chain:
            self._read_records(self.head, lo)  # a gap: no segment starts there
            self._segments.append(Segment(self.backend, key, lo, hi))
            self.head = hi
        self.refresh()

    def _read_records(self, after: int, upto: int | None) -> None:
        n = after
        while upto is None or n < upto:
            key = self.log.key_of(n + 1)
            try:
                data = self.backend.get(key)
            except NotFound:
                if upto is None:
                    break
                n += 1  # a hole before a segment: damage fsck reports; look past it
                continue
            n += 1
            self._remember(n, parse_record_file(data, self.log.record_type, key))
        if upto is None:
            self.head = max(self.head, n)

    def _remember(self, number: int, record) -> None:
        """Put a record read whole into the tail, by the keys of its rows."""
        for entry in getattr(record, self.log.field):
            for field, attr in self.log.entry_rows:
                k = log_index_key(field, getattr(entry, attr), self.secret)
                self._tail.setdefault(k, []).append((number, entry))
        for field, attr in self.log.record_rows:
            value = getattr(record, attr)
            if value is not None:
                k = log_index_key(field, value, self.secret)
                self._tail.setdefault(k, []).append((number, record))

    def refresh(self) -> int:
        """Read the records landed since; returns the head."""
        if self._segments is None:
            self._load()
            return self.head
        self._read_records(self.head, None)
        return self.head

    def reload(self) -> None:
        """Forget everything read (an erasure redacted records, or a segment went away)."""
        self._segments, self._tail, self.head, self._records = None, {}, 0, {}
        self._found, self._prefetched = {}, set()

    def _record(self, number: int):
        if number not in self._records:
            if len(self._records) >= RECORDS_KEPT:
                self._records.pop(next(iter(self._records)))
            key = self.log.key_of(number)
            try:
                self._records[number] = parse_record_file(self.backend.get(key),
                                                          self.log.record_type, key)
            except NotFound:
                self._records[number] = None
        return self._records[number]

    def find(self, field: str, value: str) -> list[tuple[int, Any]]:
        """(record number, entry or record) of every `field` == `value`, oldest first."""
        return self.find_many(field, [value])[value]

    def find_many(self, field: str, values: Iterable[str]) -> dict[str, list[tuple[int, Any]]]:
        """`find` for each of `values`, in one pass. The records landed since are read first,
        except when every value was found before in a field of ids (`Log.unique`) or is one
        `prefetch` just looked up."""
        values = list(dict.fromkeys(values))
        for _ in range(2):
            try:
                return self._find_many(field, values)
            except NotFound:  # gc deleted a superseded segment since the listing
                self.reload()
        return self._find_many(field, values)

    def prefetch(self, field: str, values: Iterable[str]) -> None:
        """Look up many values at once, before a bulk caller (a batch of reviews, a promotion
        of many runs) asks for each: its next `find` of each is answered from this."""
        values = list(dict.fromkeys(values))
        self.find_many(field, values)
        self._prefetched.update((field, v) for v in values)

    def _find_many(self, field: str, values: list[str]) -> dict[str, list[tuple[int, Any]]]:
        asked = [(field, v) for v in values]
        settled = all(a in self._prefetched for a in asked) or (
            field in self.log.unique and all(self._found.get(a) for a in asked))
        self._prefetched.difference_update(asked)
        if not settled:
            self.refresh()
        elif self._segments is None:
            self._load()
        attr = _ATTR[self.log.name, field]
        todo = [v for v in values if (field, v) not in self._found]
        if todo:
            self._look_up(field, attr, todo)
        out = {}
        for value in values:
            tail = self._tail.get(log_index_key(field, value, self.secret), ()) \
                if self._tail else ()
            out[value] = self._found[field, value] + [
                (n, obj) for n, obj in tail if getattr(obj, attr) == value]
        return out

    def _look_up(self, field: str, attr: str, values: list[str]) -> None:
        """What the segments hold of each of `values`, verified, into `_found`."""
        if len(values) >= MANY and sum(seg.rows_held() for seg in self._segments) <= len(
                values) * SCAN_FACTOR:
            return self._scan(field, attr, values)
        keys = {v: log_index_key(field, v, self.secret) for v in values}
        # Many keys: a segment a bucket read per key would mostly fetch anyway is read whole.
        whole_below = max(WHOLE_BELOW, len(values) * 4096) if len(values) >= MANY else 0
        spans: dict[str, dict[int, list[tuple[int, int, bytes]]]] = {v: {} for v in values}
        for seg in self._segments:
            if whole_below and seg.size() <= whole_below:
                seg.load_whole()
            for value, key in keys.items():
                for number, offset, length, check in seg.rows(key):
                    spans[value].setdefault(number, []).append((offset, length, check))
        per_record = collections.Counter(n for by_number in spans.values() for n in by_number)
        whole: dict[int, dict[str, list]] = {}  # records read whole here: value -> its entries
        for value, by_number in spans.items():
            found = []
            for number in sorted(by_number):
                entries = None
                if per_record[number] < SLICES_BELOW:
                    entries = self._slices(number, by_number[number], attr, value)
                if entries is None:  # many rows there, a stale row, or one naming the record
                    if number not in whole:
                        whole[number] = self._by_value(self._record(number), field, attr)
                    entries = whole[number].get(value, [])
                found += [(number, e) for e in entries]
            self._found[field, value] = found

    def _scan(self, field: str, attr: str, values: list[str]) -> None:
        """`_look_up` by reading the covered records whole: cheaper when the values asked
        are many beside the rows there are."""
        found: dict[str, list] = {v: [] for v in values}
        for seg in self._segments:
            for number in range(seg.lo + 1, seg.hi + 1):
                key = self.log.key_of(number)
                try:
                    record = parse_record_file(self.backend.get(key), self.log.record_type, key)
                except NotFound:
                    continue
                for value, entries in self._by_value(record, field, attr).items():
                    if value in found:
                        found[value] += [(number, e) for e in entries]
        for value, entries in found.items():
            self._found[field, value] = entries

    def _slices(self, number: int, spans, attr: str, value: str) -> list | None:
        """The entries at `spans` of record `number`, or None unless every one verifies."""
        entries = []
        for offset, length, check in spans:
            if not length:
                return None
            try:
                data = self.backend.get_range(self.log.key_of(number), offset, length)
            except NotFound:
                return None
            if _check(data) != check:
                return None
            entry = msgspec.json.decode(data, type=self.log.entry_type)
            if getattr(entry, attr) != value:
                return None
            entries.append(entry)
        return entries

    def _by_value(self, record, field: str, attr: str) -> dict[str, list]:
        """What a record holds by the value of `field`: its entries, or itself for a field of
        the record."""
        out: dict[str, list] = {}
        if record is None:
            return out
        if (field, attr) in self.log.record_rows:
            out[getattr(record, attr)] = [record]
            return out
        for entry in getattr(record, self.log.field):
            out.setdefault(getattr(entry, attr), []).append(entry)
        return out

    def records_with(self, field: str, values: Iterable[str]) -> set[int]:
        """The numbers of every record that may hold an entry with `field` in `values` (rows
        name more than the records hold after a redaction, never less)."""
        self.refresh()
        out = set()
        for value in values:
            key = log_index_key(field, value, self.secret)
            for seg in self._segments:
                out.update(number for number, *_ in seg.rows(key))
            out.update(n for n, _ in self._tail.get(key, ()))
        return out


# -- writing --------------------------------------------------------------------------------
def extend(backend, log: Log, secret: bytes, number: int, data: bytes) -> None:
    """After record `number` (file bytes `data`) landed: its segment, and the merges the binary
    counter asks for, each deleting the segments it covers. An index is derived: a failure
    here costs later readers time (they read the records it would have covered), never a
    record, so it does not fail the write."""
    try:
        record = parse_record_file(data, log.record_type, log.key_of(number))
        one = format_segment(number - 1, number, rows_of(log, number, data, record, secret))
        backend.put_if_absent(log_segment_key(log.name, number - 1, number, _name(one)), one)
        size = 2
        found = None
        while number % size == 0:
            if found is None:
                found = stored_segments(backend, log)
            merged = _merge(backend, log, secret, number - size, number, found)
            key = log_segment_key(log.name, number - size, number, _name(merged))
            backend.put_if_absent(key, merged)
            # What it covers is deleted now, not at the next gc, so that a reader's listing
            # stays about one segment per bit of the log's length (one that listed a deleted
            # segment lists again).
            within = [s for s in found if number - size <= s[0] and s[1] <= number]
            for _, _, old in within:
                if old != key:
                    backend.delete(old)
            found = [s for s in found if s not in within] + [(number - size, number, key)]
            size *= 2
    except (CasError, OSError):
        return


def _name(segment: bytes) -> str:
    return segment[-TRAILER:].hex()


def _merge(backend, log: Log, secret: bytes, lo: int, hi: int, found) -> bytes:
    """The segment over (lo, hi]: the rows of the widest stored segments within it, and of
    the records none covers, read whole."""
    within = [s for s in found if lo <= s[0] and s[1] <= hi]
    rows: list[bytes] = []
    pos = lo
    for s_lo, s_hi, key in _cover([(a - lo, b - lo, k) for a, b, k in within]):
        s_lo, s_hi = s_lo + lo, s_hi + lo
        rows += _record_rows(backend, log, secret, pos, s_lo)
        rows += parse_segment(backend.get(key), key)[2]
        pos = s_hi
    rows += _record_rows(backend, log, secret, pos, hi)
    return format_segment(lo, hi, rows)


def _record_rows(backend, log: Log, secret: bytes, after: int, upto: int) -> list[bytes]:
    rows = []
    for n in range(after + 1, upto + 1):
        key = log.key_of(n)
        try:
            data = backend.get(key)
        except NotFound:
            continue
        rows += rows_of(log, n, data, parse_record_file(data, log.record_type, key), secret)
    return rows
