"""The person table of a pack: which of its objects name which person, in one file per pack.

Rows (keyed person digest, object digest) are sorted, so the rows of one shard (the person
digest's first byte) are contiguous. A header names where each shard's rows end and a check
of them, so an erasure reads the header and one shard's rows: two range reads per pack,
each verified, whatever the pack holds. docs/format.md 8.3.
"""

from __future__ import annotations

import struct
from typing import Iterable

from blake3 import blake3

from cas.digest import PERSON_PREFIX, from_bytes
from cas.errors import CorruptData, DigestMismatch, UnsupportedFormat
from cas.format.keys import SHARD_NAMES

MAGIC = b"CASW"
FORMAT = 1
HEAD = struct.Struct(">4sI32s")  # magic, format, pack id
SLOT = struct.Struct(">I16s")    # rows of shards <= this one, check of this shard's rows
SLOTS_AT = HEAD.size
HEADER_SIZE = SLOTS_AT + 256 * SLOT.size + 32  # ... and the header's own checksum
ROW_SIZE = 64  # raw person digest, raw object digest
CHECK_SIZE = 16
SUM_SIZE = 32


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
