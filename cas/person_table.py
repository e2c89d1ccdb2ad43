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

from .errors import CorruptData, DigestMismatch, UnsupportedFormat

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
    return data + blake3(data).digest(), {f"{row[0]:02x}" for row in rows}


def parse_header(head: bytes, where: str) -> tuple[str, list[tuple[int, bytes]]]:
    """(pack id, per shard (rows of shards up to it, check of its rows)) of a table's first
    HEADER_SIZE bytes, checked."""
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
    slots = [SLOT.unpack_from(head, SLOTS_AT + s * SLOT.size) for s in range(256)]
    if any(slots[s][0] > slots[s + 1][0] for s in range(255)):
        raise CorruptData(f"{where}: its shard table is not in order", key=where)
    return pid.hex(), slots


def shard_span(slots: list[tuple[int, bytes]], shard: str) -> tuple[int, int]:
    """(offset, length) of the rows of `shard` (two hex digits) in the table."""
    s = int(shard, 16)
    start = slots[s - 1][0] if s else 0
    return HEADER_SIZE + start * ROW_SIZE, (slots[s][0] - start) * ROW_SIZE


def parse_shard(rows: bytes, slots: list[tuple[int, bytes]], shard: str,
                where: str) -> list[tuple[str, str]]:
    """(keyed person, object digest) of each row of `shard`, read as `shard_span` says and
    checked against the header."""
    s = int(shard, 16)
    if len(rows) != shard_span(slots, shard)[1] or _check(rows) != slots[s][1]:
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
        out.append((f"pk:{row[:32].hex()}", f"b3:{row[32:].hex()}"))
    return out


def parse_table(data: bytes, where: str) -> tuple[str, dict[str, list[tuple[str, str]]]]:
    """(pack id, shard -> its rows) of a whole table, every byte checked."""
    if len(data) < HEADER_SIZE + SUM_SIZE:
        raise CorruptData(f"{where} is truncated ({len(data)} bytes)", key=where)
    got = blake3(memoryview(data)[:-SUM_SIZE]).digest()
    if got != data[-SUM_SIZE:]:
        raise DigestMismatch(data[-SUM_SIZE:].hex(), got.hex(), where)
    pid, slots = parse_header(data, where)
    if len(data) != HEADER_SIZE + slots[255][0] * ROW_SIZE + SUM_SIZE:
        raise CorruptData(f"{where}: size does not match its {slots[255][0]} rows", key=where)
    shards = {}
    for s in range(256):
        shard = f"{s:02x}"
        offset, length = shard_span(slots, shard)
        if length:
            shards[shard] = parse_shard(data[offset:offset + length], slots, shard, where)
        elif slots[s][1] != _check(b""):
            raise CorruptData(f"{where}: the check of empty shard {shard} is wrong", key=where)
    return pid, shards
