"""The person index: which objects of each pack name which person (docs/format.md 4.8.2, 8.3).

A pack's index is one file, its person table. Rows (keyed person digest, object digest) are
sorted, so the rows of one shard (the person digest's first byte) are contiguous. A header
names where each shard's rows end and a check of them, so an erasure reads the header and one
shard's rows: two range reads per pack, each verified, whatever the pack holds. Packs written
before person tables have a person index record per shard and a person-shards record instead.
"""

from __future__ import annotations

import struct
from typing import Iterable, NamedTuple

import msgspec
from blake3 import blake3

from cas.digest import PERSON_PREFIX, from_bytes, to_bytes
from cas.errors import CorruptData, DigestMismatch, NotFound, UnsupportedFormat
from cas.format.keys import (PERSON_TABLES, SHARD_NAMES, SHARDS, parse_person_shards_key,
                             person_index_key, person_table_key, split_map_key)
from cas.format.records import KIND_CODES, PersonIndex, parse_record_file

MAGIC = b"CASW"
FORMAT = 1
HEAD = struct.Struct(">4sI32s")  # magic, format, pack id
SLOT = struct.Struct(">I16s")    # rows of shards <= this one, check of this shard's rows
SLOTS_AT = HEAD.size
HEADER_SIZE = SLOTS_AT + 256 * SLOT.size + 32  # ... and the header's own checksum
ROW_SIZE = 64  # raw person digest, raw object digest
CHECK_SIZE = 16
SUM_SIZE = 32
TABLE_SHARDS_KEPT = 1 << 12  # person table shards whose rows a reader remembers
# the objects that name a person (a cassette names its case's)
PERSON_KINDS = (KIND_CODES["case"], KIND_CODES["run"], KIND_CODES["cassette"])


class _PersonOnly(msgspec.Struct):
    person: str | None = None


_read_person = msgspec.json.Decoder(_PersonOnly).decode


def named_person(kind: int, data: bytes) -> str | None:
    """The person an object names, read from its bytes (`kind`: its kind code); None for an
    object of a kind that names no one, or that names no one itself."""
    return _read_person(data).person if kind in PERSON_KINDS else None


def _check(rows: bytes) -> bytes:
    return blake3(rows).digest(CHECK_SIZE)


def format_table(pid: str, persons: dict[bytes, Iterable[str]]) -> tuple[bytes, set[str]]:
    """The table of pack `pid` (`persons`: raw object digest -> keyed person digests) and the
    shards it has rows in."""
    rows = sorted({bytes.fromhex(person[3:]) + raw
                   for raw, keyed in persons.items() for person in keyed})
    body = b"".join(rows)
    slots, end = [], 0
    for shard in range(256):
        start = end
        while end < len(rows) and rows[end][0] == shard:
            end += 1
        slots.append(SLOT.pack(end, _check(body[start * ROW_SIZE:end * ROW_SIZE])))
    head = HEAD.pack(MAGIC, FORMAT, bytes.fromhex(pid)) + b"".join(slots)
    head += blake3(head).digest()
    data = head + body
    return data + blake3(data).digest(), {SHARD_NAMES[row[0]] for row in rows}


def parse_header(head: bytes, where: str) -> str:
    """The pack id of a table whose first HEADER_SIZE bytes are `head`, once they are checked
    (magic, format, the header's checksum)."""
    if len(head) < HEADER_SIZE:
        raise CorruptData(f"{where} is truncated ({len(head)} bytes)", key=where)
    magic, fmt, pid = HEAD.unpack_from(head, 0)
    if magic != MAGIC:
        raise CorruptData(f"{where} does not start with the person table magic", key=where)
    if fmt != FORMAT:
        raise UnsupportedFormat(f"{where} has person table format {fmt}; this cas reads "
                                f"{FORMAT}", key=where, format=fmt)
    got = blake3(memoryview(head)[:HEADER_SIZE - SUM_SIZE]).digest()
    if got != head[HEADER_SIZE - SUM_SIZE:HEADER_SIZE]:
        raise DigestMismatch(head[HEADER_SIZE - SUM_SIZE:HEADER_SIZE].hex(), got.hex(), where)
    return pid.hex()


def shard_span(head: bytes, shard: str, where: str) -> tuple[int, int, bytes]:
    """(offset, length, check) of the rows of `shard` (two hex digits), as a checked header
    `head` says. Only the two slots it needs are read (an erasure reads one shard of many
    tables)."""
    s = int(shard, 16)
    start = SLOT.unpack_from(head, SLOTS_AT + (s - 1) * SLOT.size)[0] if s else 0
    end, check = SLOT.unpack_from(head, SLOTS_AT + s * SLOT.size)
    if start > end:
        raise CorruptData(f"{where}: its shard table is not in order at shard {shard}",
                          key=where)
    return HEADER_SIZE + start * ROW_SIZE, (end - start) * ROW_SIZE, check


def parse_shard(rows: bytes, head: bytes, shard: str, where: str) -> list[tuple[str, str]]:
    """(keyed person, object digest) of each row of `shard`, read as `shard_span` says and
    checked against the header."""
    s = int(shard, 16)
    _, length, check = shard_span(head, shard, where)
    if len(rows) != length or _check(rows) != check:
        raise CorruptData(f"{where}: the rows of shard {shard} do not match its header "
                          "(damaged or truncated)", key=where)
    out = []
    prev = b""
    for at in range(0, len(rows), ROW_SIZE):
        row = rows[at:at + ROW_SIZE]
        if row[0] != s or row <= prev:
            raise CorruptData(f"{where}: row {at // ROW_SIZE} of shard {shard} is out of "
                              "place", key=where)
        prev = row
        out.append((PERSON_PREFIX + row[:32].hex(), from_bytes(row[32:])))
    return out


def parse_table(data: bytes, where: str) -> tuple[str, dict[str, list[tuple[str, str]]]]:
    """(pack id, shard -> its rows) of a whole table, every byte checked."""
    if len(data) < HEADER_SIZE + SUM_SIZE:
        raise CorruptData(f"{where} is truncated ({len(data)} bytes)", key=where)
    got = blake3(memoryview(data)[:-SUM_SIZE]).digest()
    if got != data[-SUM_SIZE:]:
        raise DigestMismatch(data[-SUM_SIZE:].hex(), got.hex(), where)
    pid = parse_header(data, where)
    spans = [shard_span(data, shard, where) for shard in SHARD_NAMES]  # (checks the order)
    rows = (len(data) - HEADER_SIZE - SUM_SIZE) // ROW_SIZE
    if len(data) != HEADER_SIZE + rows * ROW_SIZE + SUM_SIZE or \
            spans[255][0] + spans[255][1] != HEADER_SIZE + rows * ROW_SIZE:
        raise CorruptData(f"{where}: size does not match the rows its shard table counts",
                          key=where)
    shards = {}
    for shard, (offset, length, check) in zip(SHARD_NAMES, spans):
        if length:
            shards[shard] = parse_shard(data[offset:offset + length], data, shard, where)
        elif check != _check(b""):
            raise CorruptData(f"{where}: the check of empty shard {shard} is wrong", key=where)
    return pid, shards


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


class Persons:
    """The person index files of a repository's packs, read and written through its backend.
    The shards of tables read are kept: a confirmed erasure looks its person up twice, and a
    table never changes under its name (its pack's id and map)."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self._table_shards: dict[tuple[str, str], list[tuple[str, str]]] = {}

    def write_table(self, pid: str, persons: dict[bytes, Iterable[str]]) -> int:
        """Write the person table of pack `pid` (raw digest -> keyed persons: one for a case or
        a run, those of its cases for a provenance object; one file, possibly of no rows).
        Returns bytes."""
        data, shards = format_table(pid, persons)
        self.backend.put_if_absent(person_table_key(pid, shards), data)
        return len(data)

    def files(self, pids: Iterable[str] | None = None) -> dict[str, PersonFiles]:
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

    def rows(self, pid: str, files: PersonFiles) -> list[tuple[str, str]]:
        """(keyed person, digest) of every row the person index files of pack `pid` hold. A
        file lost or damaged is passed over: a rewrite indexes the pack's cases and runs anew
        from their bytes, and only provenance objects keep what the index said."""
        rows: list[tuple[str, str]] = []
        if files.table is not None:
            try:
                rows += [row for part in parse_table(
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

    def entries(self, pids: list[str]) -> dict[bytes, set[str]]:
        """Raw digest -> keyed persons, as the person index files of packs `pids` say."""
        out: dict[bytes, set[str]] = {}
        for pid, files in self.files(pids).items():
            for person, digest in self.rows(pid, files):
                out.setdefault(to_bytes(digest), set()).add(person)
        return out

    def table_shard(self, key: str, shard: str) -> list[tuple[str, str]]:
        """The rows of one shard of a person table: its header, then those rows (two range
        reads, each checked). NotFound if it is gone; CorruptData if damaged."""
        kept = self._table_shards.get((key, shard))
        if kept is not None:
            return kept
        head = self.backend.get_range(key, 0, HEADER_SIZE)
        found = split_map_key(key, PERSON_TABLES)
        if found is None or parse_header(head, key) != found[0]:
            raise CorruptData(f"{key} is not the person table of the pack its name says",
                              key=key)
        offset, length, _ = shard_span(head, shard, key)
        rows = self.backend.get_range(key, offset, length) if length else b""
        parsed = parse_shard(rows, head, shard, key)
        if len(self._table_shards) >= TABLE_SHARDS_KEPT:
            self._table_shards.clear()
        self._table_shards[(key, shard)] = parsed
        return parsed
