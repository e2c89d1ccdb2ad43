"""Test vectors of the binary files of docs/format.md (sections 7, 8, 8.1, 8.2, 8.3): a pack,
a pack index, a multi-pack index, a log index segment and a person table, each built from a
few fixed objects or rows.

Each vector is checked three ways: cas's writer gives exactly the golden bytes
(`tests/vectors/<name>.bin`); the bytes laid out by hand from the format's text (struct and blake3,
not cas: every checksum, digest, row key and check recomputed) give them too, field by field,
as `tests/vectors/binary.json` records them (its `layout` is the annotated hex dump section 10
shows); and cas's reader, given the golden bytes, returns every field `binary.json` lists.
Regenerate the golden files only on purpose, as those of test_vectors.py:
CAS_UPDATE_VECTORS=1 python -m pytest tests/format/test_binary_vectors.py
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import struct

import pytest
from blake3 import blake3

from cas.digest import digest_of, log_index_key, person_digest, person_key
from cas.format.keys import index_key, log_segment_key, multi_index_key, pack_key, person_table_key
from cas.format.records import KIND_BY_CODE, decode_object, format_record_file
from cas.storage import log_index, pack, person_index
from cas.storage.backends.memory import MemoryBackend
from support import ROOT

HERE = pathlib.Path(__file__).parents[1] / "vectors"
OBJECTS = json.loads((HERE / "vectors.json").read_text())  # the inputs: object vectors
BINARY = HERE / "binary.json"
NAMES = ("pack", "pack-index", "multi-pack-index", "log-index-segment", "person-table-rows")
REPOSITORY_ID = "00112233445566778899aabbccddeeff"  # that of the `person-digest` vector
CODES = {"case": 1, "tree.leaf": 2}
PACK_A = ("case-minimal", "tree-leaf-empty")  # the objects of the pack vector, in file order
PACK_B = ("tree-leaf",)                       # those of the second pack of the multi-pack index
TABLE_PACK = "55" * 32
TABLE_ROWS = (("user-42", "b3:" + "22" * 32), ("user-42", "b3:" + "33" * 32),
              ("user-7", "b3:" + "44" * 32))


def u32(n: int) -> bytes:
    return struct.pack(">I", n)


def b3(data: bytes, length: int = 32) -> bytes:
    return blake3(data).digest(length=length)


class Layout:
    """A file laid out by hand: (label, hex, times) parts, whose bytes are the file."""

    def __init__(self) -> None:
        self.parts: list[list] = []

    def add(self, label: str, data: bytes, times: int = 1) -> None:
        self.parts.append([label, data.hex(), times])

    def fanout(self, name: str, counts: list[int]) -> None:
        """A fan-out table, a part per run of equal entries."""
        start = 0
        for i in range(1, len(counts) + 1):
            if i == len(counts) or counts[i] != counts[start]:
                span = f"{start:02x}" if i - 1 == start else f"{start:02x}-{i - 1:02x}"
                self.add(f"{name} {span}: {counts[start]}", u32(counts[start]), i - start)
                start = i

    def data(self) -> bytes:
        return layout_bytes(self.parts)


def layout_bytes(parts: list) -> bytes:
    return b"".join(bytes.fromhex(h) * times for _, h, times in parts)


def obj(name: str) -> tuple[int, bytes, str]:
    vec = OBJECTS[name]
    return CODES[vec["kind"]], bytes.fromhex(vec["canonical_hex"]), vec["digest"]


def fanout_of(first_bytes: list[int], buckets: int = 256) -> list[int]:
    return [sum(b <= i for b in first_bytes) for i in range(buckets)]


def runs(values: list) -> list[list]:
    """A table as [first, last, value] per run of equal entries (fields out stay short)."""
    out: list[list] = []
    for i, v in enumerate(values):
        if out and out[-1][2] == v:
            out[-1][1] = i
        else:
            out.append([i, i, v])
    return out


# -- by hand, from the format's text ---------------------------------------------------------
def pack_by_hand(names) -> tuple[Layout, dict]:
    out = Layout()
    out.add('magic "CASP"', b"CASP")
    out.add("format 1", u32(1))
    at, objects = 8, []
    for i, name in enumerate(names):
        code, data, digest = obj(name)
        kind = KIND_BY_CODE[code]
        assert digest == "b3:" + b3(b"cas:" + kind.encode() + b"\0" + data).hex()
        out.add(f"object {i}: kind code {code} ({kind}), length {len(data)}",
                struct.pack(">BI", code, len(data)))
        out.add(f"object {i}: {name} (offset {at + 5})", data)
        objects.append({"offset": at + 5, "length": len(data), "kind": code, "digest": digest})
        at += 5 + len(data)
    trailer = b3(out.data())
    out.add("trailer: BLAKE3 of the bytes before = the pack id", trailer)
    return out, {"objects": objects, "pack_id": trailer.hex()}


def index_rows(objects: list[dict]) -> list[dict]:
    return sorted(objects, key=lambda o: o["digest"])


def index_by_hand(objects: list[dict], pid: str) -> tuple[Layout, dict]:
    rows = index_rows(objects)
    fan = fanout_of([bytes.fromhex(r["digest"][3:])[0] for r in rows])
    out = Layout()
    out.add('magic "CASI"', b"CASI")
    out.add("format 1", u32(1))
    out.fanout("fan-out", fan)
    for i, r in enumerate(rows):
        out.add(f"digest {i}", bytes.fromhex(r["digest"][3:]))
    for i, r in enumerate(rows):
        out.add(f"row {i}: offset {r['offset']}, length {r['length']}, kind {r['kind']}, "
                "3 zero bytes", struct.pack(">QIB3x", r["offset"], r["length"], r["kind"]))
    out.add("pack id", bytes.fromhex(pid))
    checksum = b3(out.data())
    out.add("checksum: BLAKE3 of the bytes before", checksum)
    return out, {"pack_id": pid, "fanout": runs(fan), "entries": rows, "checksum": checksum.hex()}


def multi_by_hand(packs: list[tuple[str, list[dict]]]) -> tuple[Layout, dict]:
    packs = sorted(packs)  # pack ids ascending (section 8.1)
    rows = sorted(({**r, "pack": p} for p, objects in packs for r in objects),
                  key=lambda r: r["digest"])
    fan = fanout_of([bytes.fromhex(r["digest"][3:])[0] for r in rows])
    out = Layout()
    out.add('magic "CASM"', b"CASM")
    out.add("format 1", u32(1))
    out.add(f"P = {len(packs)} packs", u32(len(packs)))
    for i, (pid, _) in enumerate(packs):
        out.add(f"pack {i}", bytes.fromhex(pid))
    out.fanout("fan-out", fan)
    for i, r in enumerate(rows):
        out.add(f"digest {i}", bytes.fromhex(r["digest"][3:]))
    ordinals = [pid for pid, _ in packs]
    for i, r in enumerate(rows):
        o = ordinals.index(r["pack"])
        out.add(f"row {i}: offset {r['offset']}, length {r['length']}, kind {r['kind']}, "
                f"zero byte, pack {o}",
                struct.pack(">QIBxH", r["offset"], r["length"], r["kind"], o))
    checksum = b3(out.data())
    out.add("checksum: BLAKE3 of the bytes before", checksum)
    return out, {"packs": ordinals, "fanout": runs(fan), "entries": rows,
                 "checksum": checksum.hex()}


def canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def segment_by_hand(record_file: bytes, number: int) -> tuple[Layout, dict]:
    key = b3(b"cas:person-key\0" + REPOSITORY_ID.encode())
    record = json.loads(record_file)["record"]
    rows, pos = [], 0
    for entry in record["reviews"]:
        enc = canonical(entry)
        at = record_file.index(enc, pos)
        pos = at + len(enc)
        for field, attr in (("annotation", "annotation_id"), ("run", "run"),
                            ("run-id", "run_id")):
            k = blake3(b"cas:log-index\0" + field.encode() + b"\0" + entry[attr].encode(),
                       key=key).digest(length=16)
            rows.append({"key": k.hex(), "field": field, "value": entry[attr],
                         "record": number, "offset": at, "length": len(enc),
                         "check": b3(enc, 16).hex()})
    assert record["confirm_token"] is None  # so no `token` row
    rows.sort(key=lambda r: r["key"])
    bits = (len(rows) // 8).bit_length()
    fan = fanout_of([int(r["key"][:8], 16) >> (32 - bits) if bits else 0 for r in rows],
                    1 << bits)
    out = Layout()
    out.add('magic "CASL"', b"CASL")
    out.add("format 1", u32(1))
    out.add(f"B = {bits} fan-out bits, 3 zero bytes", bytes([bits, 0, 0, 0]))
    out.add(f"lo = {number - 1}", u32(number - 1))
    out.add(f"hi = {number}", u32(number))
    out.add(f"N = {len(rows)} rows", u32(len(rows)))
    out.fanout("fan-out", fan)
    for i, r in enumerate(rows):
        out.add(f"row {i}: key ({r['field']} {r['value']})", bytes.fromhex(r["key"]))
        out.add(f"row {i}: record {r['record']}, offset {r['offset']}, length {r['length']}",
                struct.pack(">III", r["record"], r["offset"], r["length"]))
        out.add(f"row {i}: check", bytes.fromhex(r["check"]))
    checksum = b3(out.data())
    out.add("checksum: BLAKE3 of the bytes before", checksum)
    return out, {"lo": number - 1, "hi": number, "bits": bits, "fanout": runs(fan), "rows": rows,
                 "checksum": checksum.hex()}


def table_by_hand(pid: str, rows: list[tuple[str, str]]) -> tuple[Layout, dict]:
    raw = sorted({bytes.fromhex(p[3:]) + bytes.fromhex(d[3:]) for p, d in rows})
    slots = []
    for shard in range(256):
        mine = b"".join(r for r in raw if r[0] == shard)
        slots.append((sum(r[0] <= shard for r in raw), b3(mine, 16).hex()))
    out = Layout()
    out.add('magic "CASW"', b"CASW")
    out.add("format 1", u32(1))
    out.add("pack id", bytes.fromhex(pid))
    start = 0
    for i in range(1, 257):
        if i == 256 or slots[i] != slots[start]:
            span = f"{start:02x}" if i - 1 == start else f"{start:02x}-{i - 1:02x}"
            end, check = slots[start]
            out.add(f"shard {span}: end {end}, check",
                    u32(end) + bytes.fromhex(check), i - start)
            start = i
    head_sum = b3(out.data())
    out.add("header checksum: BLAKE3 of the bytes before", head_sum)
    for i, r in enumerate(raw):
        out.add(f"row {i}: person pk:{r[:32].hex()[:8]}...", r[:32])
        out.add(f"row {i}: object b3:{r[32:].hex()[:8]}...", r[32:])
    checksum = b3(out.data())
    out.add("checksum: BLAKE3 of the bytes before", checksum)
    return out, {"pack_id": pid, "shards": runs([list(s) for s in slots]),
                 "header_checksum": head_sum.hex(),
                 "rows": [["pk:" + r[:32].hex(), "b3:" + r[32:].hex()] for r in raw],
                 "checksum": checksum.hex()}


def person_rows() -> list[tuple[str, str]]:
    key = b3(b"cas:person-key\0" + REPOSITORY_ID.encode())
    return [("pk:" + blake3(p.encode(), key=key).hexdigest(), d) for p, d in TABLE_ROWS]


def review_record_file() -> bytes:
    return format_record_file(decode_object(
        "review.batch", bytes.fromhex(OBJECTS["review-batch"]["canonical_hex"])))


def by_hand() -> dict[str, dict]:
    """Every vector: its input, its layout (by hand) and its fields out."""
    pack_a, fields_a = pack_by_hand(PACK_A)
    pack_b, fields_b = pack_by_hand(PACK_B)
    pid_a, pid_b = fields_a["pack_id"], fields_b["pack_id"]
    idx, idx_fields = index_by_hand(fields_a["objects"], pid_a)
    midx, midx_fields = multi_by_hand([(pid_a, fields_a["objects"]),
                                       (pid_b, fields_b["objects"])])
    record_file = review_record_file()
    seg, seg_fields = segment_by_hand(record_file, 1)
    table, table_fields = table_by_hand(TABLE_PACK, person_rows())
    return {
        "pack": {"input": {"objects": list(PACK_A)}, "layout": pack_a.parts,
                 "fields": {**fields_a, "key": pack_key(pid_a)}},
        "pack-index": {"input": {"pack": "pack"}, "layout": idx.parts,
                       "fields": {**idx_fields, "key": index_key(pid_a)}},
        "multi-pack-index": {
            "input": {"packs": {pid_a: list(PACK_A), pid_b: list(PACK_B)},
                      "second_pack": pack_b.data().hex()},
            "layout": midx.parts,
            "fields": {**midx_fields, "key": multi_index_key(midx_fields["checksum"])}},
        "log-index-segment": {
            "input": {"log": "reviews", "repository_id": REPOSITORY_ID,
                      "record_number": 1, "record_file": record_file.decode()},
            "layout": seg.parts,
            "fields": {**seg_fields, "key": log_segment_key(
                "reviews", 0, 1, seg_fields["checksum"])}},
        "person-table-rows": {
            "input": {"pack": TABLE_PACK, "repository_id": REPOSITORY_ID,
                      "rows": [list(r) for r in TABLE_ROWS]},
            "layout": table.parts,
            "fields": {**table_fields, "key": person_table_key(
                TABLE_PACK, {p[3:5] for p, _ in table_fields["rows"]})}},
    }


# -- cas's writers ---------------------------------------------------------------------------
def written() -> dict[str, bytes]:
    pack_a, spans_a = pack.format_pack([obj(n)[:2] for n in PACK_A])
    pack_b, spans_b = pack.format_pack([obj(n)[:2] for n in PACK_B])
    pid_a, pid_b = pack.pack_id(pack_a), pack.pack_id(pack_b)

    def entries(names, spans):
        return [pack.Entry(bytes.fromhex(obj(n)[2][3:]), at, length, obj(n)[0])
                for n, (at, length) in zip(names, spans)]

    idx_a = pack.format_index(pid_a, entries(PACK_A, spans_a))
    idx_b = pack.format_index(pid_b, entries(PACK_B, spans_b))
    in_order = [i for _, i in sorted([(pid_a, idx_a), (pid_b, idx_b)])]
    record_file = review_record_file()
    record = decode_object("review.batch", bytes.fromhex(OBJECTS["review-batch"]["canonical_hex"]))
    secret = person_key(REPOSITORY_ID)
    rows = log_index.rows_of(log_index.REVIEWS, 1, record_file, record, secret)
    persons: dict[bytes, list[str]] = {}
    for p, d in TABLE_ROWS:
        persons.setdefault(bytes.fromhex(d[3:]), []).append(person_digest(p, secret))
    return {"pack": bytes(pack_a), "pack-index": idx_a,
            "multi-pack-index": pack.format_multi_index(in_order),
            "log-index-segment": log_index.format_segment(0, 1, rows),
            "person-table-rows": person_index.format_table(TABLE_PACK, persons)[0]}


# -- cas's readers ---------------------------------------------------------------------------
def read_pack(data: bytes) -> dict:
    objects = [{"offset": at, "length": n, "kind": k,
                "digest": digest_of(KIND_BY_CODE[k], data[at:at + n])}
               for at, n, k in pack.parse_pack(data)]
    pid = pack.pack_id(data)
    return {"objects": objects, "pack_id": pid, "key": pack_key(pid)}


def _entry(e: pack.Entry) -> dict:
    return {"offset": e.offset, "length": e.length, "kind": e.kind,
            "digest": "b3:" + e.digest.hex()}


def read_index(data: bytes) -> dict:
    pid, entries = pack.parse_index(data)
    key = index_key(pid)
    backend = MemoryBackend()
    backend.put_if_absent(key, data)
    reader = pack.IndexReader(backend, key)
    for e in entries:  # a lookup through the fan-out answers each row
        assert reader.lookup(e.digest) == (pid, e)
    checksum = data[-32:].hex()
    return {"pack_id": pid, "fanout": runs(list(reader.fanout)),
            "entries": [_entry(e) for e in entries],
            "checksum": checksum, "key": key}


def read_multi(data: bytes) -> dict:
    packs, rows = pack.parse_multi_index(data)
    key = multi_index_key(data[-32:].hex())
    backend = MemoryBackend()
    backend.put_if_absent(key, data)
    reader = pack.IndexReader(backend, key)
    for e, o in rows:
        assert reader.lookup(e.digest) == (packs[o], e)
    assert reader.packs == packs
    return {"packs": packs, "fanout": runs(list(reader.fanout)),
            "entries": [{**_entry(e), "pack": packs[o]} for e, o in rows],
            "checksum": data[-32:].hex(), "key": key}


def read_segment(data: bytes, labels: dict[str, tuple[str, str]]) -> dict:
    """`labels`: row key -> (field, value), which a segment cannot tell (its keys are keyed
    digests); every row's key is looked up through the fan-out too."""
    key = log_segment_key("reviews", 0, 1, data[-32:].hex())
    lo, hi, raw = log_index.parse_segment(data, key)
    backend = MemoryBackend()
    backend.put_if_absent(key, data)
    seg = log_index.Segment(backend, key, lo, hi)
    rows = []
    for row in raw:
        k, number, offset, length, check = log_index.ROW.unpack(row)
        assert seg.rows(k) == [(number, offset, length, check)]
        field, value = labels[k.hex()]
        assert log_index_key(field, value, person_key(REPOSITORY_ID)) == k
        rows.append({"key": k.hex(), "field": field, "value": value, "record": number,
                     "offset": offset, "length": length, "check": check.hex()})
    bits = seg.bits
    fan = list(struct.unpack_from(f">{1 << bits}I", data, log_index.HEADER.size))
    return {"lo": lo, "hi": hi, "bits": bits, "fanout": runs(fan), "rows": rows,
            "checksum": data[-32:].hex(), "key": key}


def read_table(data: bytes) -> dict:
    pid, shards = person_index.parse_table(data, "table")
    head = data[:person_index.HEADER_SIZE]
    slots = []
    for s in range(256):
        offset, length, check = person_index.shard_span(head, f"{s:02x}", "table")
        slots.append([(offset + length - person_index.HEADER_SIZE) // 64, check.hex()])
    key = person_table_key(pid, set(shards))
    backend = MemoryBackend()
    backend.put_if_absent(key, data)
    persons = person_index.Persons(backend)
    for shard, rows in shards.items():
        assert persons.table_shard(key, shard) == rows
    return {"pack_id": pid, "shards": runs(slots),
            "header_checksum": head[-32:].hex(),
            "rows": [list(r) for s in sorted(shards) for r in shards[s]],
            "checksum": data[-32:].hex(), "key": key}


def read(name: str, data: bytes, vec: dict) -> dict:
    if name == "log-index-segment":
        labels = {r["key"]: (r["field"], r["value"]) for r in vec["fields"]["rows"]}
        return read_segment(data, labels)
    return {"pack": read_pack, "pack-index": read_index, "multi-pack-index": read_multi,
            "person-table-rows": read_table}[name](data)


# -- section 10 ------------------------------------------------------------------------------
def dump(parts: list) -> str:
    """The annotated hex dump section 10 shows: offset (decimal), bytes, field; a part of many
    bytes on lines of 32, a repeated part once with its count."""
    lines, at = [], 0
    for label, hexed, times in parts:
        chunks = [hexed[i:i + 64] for i in range(0, len(hexed), 64)] or [""]
        note = f"{label} (x {times})" if times > 1 else label
        for i, chunk in enumerate(chunks):
            lines.append(f"{at + i * 32:>5}  {chunk:<64}  {note if i == 0 else ''}".rstrip())
        at += len(hexed) // 2 * times
    return "\n".join(lines)


def to_text(vectors: dict) -> str:
    """binary.json's text: indented, each list of plain values on one line."""
    text = json.dumps(vectors, indent=1, ensure_ascii=False)
    return re.sub(r"\[\n\s*([^\[\]{}]*?)\n\s*\]",
                  lambda m: "[" + re.sub(r",\n\s*", ", ", m.group(1)) + "]", text) + "\n"


def golden() -> dict:
    return json.loads(BINARY.read_text())


def test_binary_vectors_match_golden_files():
    got = written()
    want = by_hand()
    for name in NAMES:  # the writer and the format's text agree before anything is stored
        assert got[name] == layout_bytes(want[name]["layout"]), name
    text = to_text(want)
    if os.environ.get("CAS_UPDATE_VECTORS"):
        old = golden() if BINARY.exists() else {}
        changed = sorted(n for n in NAMES if old.get(n) != want[n]
                         or not (HERE / f"{n}.bin").exists()
                         or (HERE / f"{n}.bin").read_bytes() != got[n])
        for name in NAMES:
            path = HERE / f"{name}.bin"
            if not path.exists() or path.read_bytes() != got[name]:
                path.write_bytes(got[name])
        if not BINARY.exists() or BINARY.read_text() != text:
            BINARY.write_text(text)
        pytest.skip(f"CAS_UPDATE_VECTORS: wrote binary vectors; changed: {', '.join(changed)}"
                    if changed else "CAS_UPDATE_VECTORS: binary vectors unchanged")
    stored = golden()
    assert sorted(stored) == sorted(NAMES)
    for name in NAMES:
        assert (HERE / f"{name}.bin").read_bytes() == got[name], name
        assert stored[name] == want[name], name
    assert BINARY.read_text() == text  # exactly what the update flag would write


@pytest.mark.parametrize("name", NAMES)
def test_reader_returns_every_field_of_the_golden_bytes(name):
    vec = golden()[name]
    data = (HERE / f"{name}.bin").read_bytes()
    assert layout_bytes(vec["layout"]) == data
    assert read(name, data, vec) == vec["fields"]


@pytest.mark.parametrize("name", NAMES)
def test_checksums_recompute_from_the_golden_bytes_alone(name):
    """With the blake3 package only: each file's checksum, each digest and check inside it."""
    vec = golden()[name]
    data = (HERE / f"{name}.bin").read_bytes()
    fields = vec["fields"]
    assert b3(data[:-32]).hex() == data[-32:].hex()
    assert fields.get("pack_id" if name == "pack" else "checksum") == data[-32:].hex()
    named = fields["key"].rsplit("/", 1)[-1]  # a file is named by its pack or its checksum
    assert named.split(".")[1 if name == "log-index-segment" else 0] in (
        data[-32:].hex(), fields.get("pack_id"))
    if name == "pack":
        for o in fields["objects"]:
            body = data[o["offset"]:o["offset"] + o["length"]]
            kind = KIND_BY_CODE[o["kind"]].encode()
            assert "b3:" + b3(b"cas:" + kind + b"\0" + body).hex() == o["digest"]
    if name == "pack-index":
        assert data[-64:-32].hex() == fields["pack_id"] == golden()["pack"]["fields"]["pack_id"]
        assert fields["entries"] == index_rows(golden()["pack"]["fields"]["objects"])
    if name == "multi-pack-index":
        second = bytes.fromhex(vec["input"]["second_pack"])
        assert b3(second[:-32]) == second[-32:]
        assert sorted(fields["packs"]) == fields["packs"] == sorted(
            [golden()["pack"]["fields"]["pack_id"], second[-32:].hex()])
    if name == "log-index-segment":
        record_file = vec["input"]["record_file"].encode()
        key = b3(b"cas:person-key\0" + REPOSITORY_ID.encode())
        for r in fields["rows"]:
            body = record_file[r["offset"]:r["offset"] + r["length"]]
            assert b3(body, 16).hex() == r["check"]
            attr = {"annotation": "annotation_id", "run": "run"}.get(r["field"], "run_id")
            assert json.loads(body)[attr] == r["value"]
            msg = b"cas:log-index\0" + r["field"].encode() + b"\0" + r["value"].encode()
            assert blake3(msg, key=key).digest(length=16).hex() == r["key"]
        record = json.loads(record_file)
        assert record["digest"] == "b3:" + b3(
            b"cas:review.batch\0" + canonical(record["record"])).hex()
    if name == "person-table-rows":
        size = person_index.HEADER_SIZE
        assert b3(data[:size - 32]).hex() == fields["header_checksum"] == data[size - 32:size].hex()
        rows = data[size:-32]
        start = 0
        for first, last, (end, check) in fields["shards"]:
            for s in range(first, last + 1):
                mine = rows[start * 64:end * 64]
                assert b3(mine, 16).hex() == check and all(r == s for r in mine[::64])
                start = end
        assert start * 64 == len(rows)


ABOUT = {  # each binary vector's section and input, as section 10 introduces them
    "pack": ("section 7", (
        "Input: the canonical bytes of the object vectors `case-minimal` (kind code 1) and "
        "`tree-leaf-empty` (kind code 2), in that order.")),
    "pack-index": ("section 8", "Input: the pack id and the objects of the `pack` vector."),
    "multi-pack-index": ("section 8.1", (
        "Input: the index of the `pack` vector and that of a second pack, which holds the "
        "object vector `tree-leaf` alone (kind code 2) and whose bytes are, in hex:")),
    "log-index-segment": ("section 8.2", (
        "Input: record 1 of the review log, whose file (section 6) holds the `review-batch` "
        "vector (one review, no `confirm_token`, so no `token` row), in a repository whose id "
        f"is `{REPOSITORY_ID}` (the person key of the `person-digest` vector). Its file:")),
    "person-table-rows": ("section 8.3", (
        f"Input: pack `{TABLE_PACK}`, in a repository whose id is `{REPOSITORY_ID}`, whose "
        "objects name these people (the person digests are keyed with the person key of the "
        "`person-digest` vector):")),
}


def _cell(value) -> str:
    return f"`{value}`" if isinstance(value, str) else str(value)


def fields_out(fields: dict) -> list[str]:
    """Fields out as section 10 lists them: rows as tables, tables of runs as their runs."""
    out = ["Fields out:", ""]
    tables = []
    for k, v in fields.items():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            cols = list(v[0])
            tables += ["", f"`{k}`:", "", "| " + " | ".join(cols) + " |",
                       "|" + "---|" * len(cols)]
            tables += ["| " + " | ".join(_cell(r[c]) for c in cols) + " |" for r in v]
        elif k == "rows":  # a person table's: (person digest, object digest)
            tables += ["", "`rows`:", "", "| person | object |", "|---|---|"]
            tables += [f"| `{p}` | `{d}` |" for p, d in v]
        elif k in ("fanout", "shards"):
            what = "end, check" if k == "shards" else "count"
            out.append(f"- `{k}` (entries first-last: {what}): " + "; ".join(
                f"{a:02x}{'' if a == b else f'-{b:02x}'}: "
                + (f"{x[0]}, `{x[1]}`" if k == "shards" else str(x)) for a, b, x in v))
        elif isinstance(v, list):
            out.append(f"- `{k}`: " + ", ".join(_cell(x) for x in v))
        else:
            out.append(f"- `{k}`: {_cell(v)}")
    return out + tables


def doc_section(name: str, vec: dict) -> str:
    """What section 10 shows of a binary vector: its input, hex dump and fields out."""
    where, about = ABOUT[name]
    out = [f"### `{name}` ({where})", "", about]
    inp = vec["input"]
    if name == "multi-pack-index":
        hexed = inp["second_pack"]
        out += ["", "```"] + [hexed[i:i + 64] for i in range(0, len(hexed), 64)] + ["```"]
    if name == "log-index-segment":
        out += ["", "```", inp["record_file"], "```"]
    if name == "person-table-rows":
        out += ["", "| person id | object |", "|---|---|"]
        out += [f"| `{p}` | `{d}` |" for p, d in inp["rows"]]
    size = len(layout_bytes(vec["layout"]))
    out += ["", f"Bytes ({size:,}; offset in decimal, bytes in hex, field):", "", "```",
            dump(vec["layout"]), "```", ""] + fields_out(vec["fields"])
    return "\n".join(out) + "\n"


def test_format_document_shows_every_binary_vector():
    doc = (ROOT / "docs" / "format.md").read_text()
    for name, vec in golden().items():
        assert doc_section(name, vec) in doc, name
