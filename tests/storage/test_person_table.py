"""The person table of a pack (docs/format.md 8.3): its bytes, its checks, the one file a pack
gets, and repositories written before tables (per-shard records) read, erased, checked,
mirrored and collected beside packs written with them."""

from __future__ import annotations

import struct

import pytest
from blake3 import blake3
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.storage import person_table as pt
from cas.errors import CasError, CorruptData
from cas.format.keys import (PERSON_TABLES, PERSONS, SHARDS, parse_person_index_key,
                             parse_person_shards_key, parse_person_table_key, person_table_key)
from support.person_files import tables, to_records

PID = "55" * 32
PERSON = "pk:bbe52a6ec46a1d8af332e9c84bcdf4cc773422c8ea6bbc7a34e12337ca4eb1ab"
DIGEST = "b3:" + "22" * 32
# the test vector of docs/format.md 8.3: the table of pack PID whose one object DIGEST names
# PERSON ends with this checksum
VECTOR_CHECKSUM = "2b6c2ae38218871a360c25b5836cb541a58b04a7baea79db70e53d6cb0812d01"


def by_hand(pid: str, rows: list[tuple[str, str]]) -> bytes:
    """A person table built from the format's text alone (struct and blake3, not cas)."""
    raw = sorted({bytes.fromhex(p[3:]) + bytes.fromhex(d[3:]) for p, d in rows})
    head = b"CASW" + struct.pack(">I", 1) + bytes.fromhex(pid)
    for shard in range(256):
        mine = b"".join(r for r in raw if r[0] == shard)
        head += struct.pack(">I", sum(r[0] <= shard for r in raw)) + blake3(mine).digest()[:16]
    head += blake3(head).digest()
    body = head + b"".join(raw)
    return body + blake3(body).digest()


def test_the_format_as_written_down():
    data, shards = pt.format_table(PID, {bytes.fromhex(DIGEST[3:]): [PERSON]})
    assert data == by_hand(PID, [(PERSON, DIGEST)]) and shards == {"bb"}
    assert len(data) == pt.HEADER_SIZE + 64 + 32 == 5288
    # the test vector of docs/format.md 8.3
    assert data[-32:].hex() == VECTOR_CHECKSUM
    assert person_table_key(PID, shards) == (
        f"persons/packs/{PID}.0000000000000000080000000000000000000000000000000000000000000000")
    empty, none = pt.format_table(PID, {})
    assert empty == by_hand(PID, []) and none == set() and len(empty) == pt.HEADER_SIZE + 32


persons = st.sampled_from([f"pk:{bytes([a, b]).hex()}{'7' * 60}" for a in (0, 1, 0xbb, 0xff)
                           for b in (0, 9)])
digests = st.binary(min_size=32, max_size=32).map(lambda b: "b3:" + b.hex())
rows_of = st.lists(st.tuples(persons, digests), max_size=40)


@settings(max_examples=60, deadline=None)
@given(rows_of)
def test_every_row_comes_back_by_its_shard_and_whole(rows):
    persons_by = {}
    for p, d in rows:
        persons_by.setdefault(bytes.fromhex(d[3:]), set()).add(p)
    data, shards = pt.format_table(PID, persons_by)
    assert data == by_hand(PID, rows)
    pid, whole = pt.parse_table(data, "t")
    assert pid == PID and set(whole) == shards == {p[3:5] for p, _ in rows}
    assert sorted(r for part in whole.values() for r in part) == sorted(set(rows))
    head = data[:pt.HEADER_SIZE]
    assert pt.parse_header(head, "t") == PID
    for s in range(256):
        shard = f"{s:02x}"
        offset, length, _ = pt.shard_span(head, shard, "t")
        got = pt.parse_shard(data[offset:offset + length], head, shard, "t")
        assert got == whole.get(shard, [])


@settings(max_examples=40, deadline=None)
@given(rows_of.filter(bool), st.data())
def test_a_flipped_byte_is_always_caught(rows, data):
    """Whole, every byte is checked; read by shard, the header and the rows read are."""
    persons_by = {}
    for p, d in rows:
        persons_by.setdefault(bytes.fromhex(d[3:]), set()).add(p)
    table, _ = pt.format_table(PID, persons_by)
    at = data.draw(st.integers(0, len(table) - 1))
    damaged = bytearray(table)
    damaged[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CasError):
        pt.parse_table(bytes(damaged), "t")
    if at < pt.HEADER_SIZE:
        with pytest.raises(CasError):
            pt.parse_header(bytes(damaged[:pt.HEADER_SIZE]), "t")
    elif at < len(table) - 32:  # a row: the shard it was in no longer matches its check
        head = bytes(damaged[:pt.HEADER_SIZE])
        pt.parse_header(head, "t")
        shard = f"{table[pt.HEADER_SIZE + (at - pt.HEADER_SIZE) // 64 * 64]:02x}"
        offset, length, _ = pt.shard_span(head, shard, "t")
        with pytest.raises(CorruptData):
            pt.parse_shard(bytes(damaged[offset:offset + length]), head, shard, "t")


def test_truncated_or_other_format_is_refused():
    table, _ = pt.format_table(PID, {b"\x01" * 32: [PERSON]})
    for n in (0, 7, pt.HEADER_SIZE - 1, pt.HEADER_SIZE, len(table) - 1):
        with pytest.raises(CasError):
            pt.parse_table(table[:n], "t")
    other = bytearray(table[:pt.HEADER_SIZE - 32])
    other[4:8] = struct.pack(">I", 2)
    resealed = bytes(other) + blake3(bytes(other)).digest()
    with pytest.raises(cas.errors.UnsupportedFormat):
        pt.parse_header(resealed, "t")


def pack_of(key: str) -> str:
    """The pack a person index file (of either layout) belongs to."""
    found = parse_person_table_key(key) or parse_person_shards_key(key)
    return found[0] if found else parse_person_index_key(key)[1]


def people(n: int, prefix: str = "p") -> list[dict]:
    return [{"input": f"{prefix}{i}", "person": f"user-{i % 7}"} for i in range(n)] + [
        {"input": f"{prefix}-nobody"}]


def test_every_pack_gets_one_table_and_no_record_per_shard(location, small_packs):
    repo = cas.init(location)
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=people(300))
    packs = set(repo.store.pack_ids())
    assert len(packs) > 2
    found = tables(repo.backend)
    assert set(found) == packs  # one table a pack, even a pack that holds no one's objects
    assert [k for k in repo.backend.list(PERSONS) if not k.startswith(PERSON_TABLES)] == []
    listed = sorted((person, digest) for _, rows in found.values() for person, digest in rows)
    want = sorted((repo.store.person_digest(f"user-{i % 7}"),
                   cas.encode_case({"input": f"p{i}", "person": f"user-{i % 7}"}).case_id)
                  for i in range(300))
    assert listed == want
    assert repo.fsck().ok


def test_an_erasure_reads_two_ranges_of_each_table_with_the_shard(tmp_path, as_operator):
    from cas.storage.backends.local import LocalBackend
    repo = cas.init(str(tmp_path))
    repo.create_dataset("d", admission="direct")
    for k in range(3):
        repo.commit("d", base=k or None, add=people(20, f"b{k}-"))
    calls = []

    class Counting(LocalBackend):
        def get(self, key):
            calls.append(("get", key))
            return super().get(key)

        def get_range(self, key, offset, length):
            calls.append(("range", key))
            return super().get_range(key, offset, length)

    counted = cas.Repository(Counting(repo.backend.root))
    preview = counted.erase("user-3")
    assert len(preview["cases"]) == 3 * 3
    read = [(kind, key) for kind, key in calls if key.startswith(PERSONS)]
    assert read and all(kind == "range" and key.startswith(PERSON_TABLES) for kind, key in read)
    shard = repo.store.person_digest("user-3")[3:5]
    with_shard = [k for k in repo.backend.list(PERSON_TABLES)
                  if shard in parse_person_table_key(k)[1]]
    assert sorted(key for _, key in read) == sorted(with_shard * 2)
    # the erasure itself finds the person again: the same shards (a table never changes
    # under its name) are not read again by the same repository; the rewrite of each pack
    # then reads its table whole, once, to write the new pack's
    calls.clear()
    done = counted.erase("user-3", preview["confirm_token"])
    assert sorted(done.cases) == sorted(preview["cases"])
    again = [(kind, key) for kind, key in calls if key in with_shard]
    assert sorted(again) == sorted(("get", key) for key in with_shard), again
    assert counted.fsck().ok


def test_a_repository_from_before_tables_is_erased_checked_and_collected(location,
                                                                          as_operator):
    """Packs with per-shard records (a cas before person tables) beside packs with tables."""
    repo = cas.init(location)
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=people(30, "old-"))
    assert to_records(repo.backend) == len(repo.store.pack_ids())
    assert list(repo.backend.list(SHARDS)) and not list(repo.backend.list(PERSON_TABLES))
    assert repo.fsck().ok
    repo = cas.open(location)
    repo.commit("d", base=1, add=people(30, "new-"))  # this cas writes a table
    assert len(tables(repo.backend)) == 1 and repo.fsck().ok
    preview = repo.erase("user-2")
    assert len(preview["cases"]) == 2 * len(range(2, 30, 7))
    record = repo.erase("user-2", preview["confirm_token"])
    assert record.packs_rewritten == 2
    assert repo.fsck().ok
    # the rewritten packs have tables; the old pack's records went with it
    assert {pack_of(key) for key in repo.backend.list(PERSONS)} == set(repo.store.pack_ids())
    assert not list(repo.backend.list(SHARDS))
    for digest in preview["cases"]:
        assert repo.store.locate(digest) is None
    repo.gc(grace=0)
    assert repo.fsck().ok
    assert {pack_of(key) for key in repo.backend.list(PERSONS)} <= set(repo.store.pack_ids())


def test_a_mirror_copies_tables_and_refuses_a_damaged_one(tmp_path):
    from cas.storage.backends.local import LocalBackend
    from cas.repo.mirror import mirror
    repo = cas.init(str(tmp_path / "src"))
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=people(10))
    mirror(repo.backend, LocalBackend(str(tmp_path / "dst")))
    assert tables(LocalBackend(str(tmp_path / "dst"))) == tables(repo.backend)
    repo.commit("d", base=1, add=people(10, "more-"))
    [new] = set(tables(repo.backend)) - set(tables(LocalBackend(str(tmp_path / "dst"))))
    key = tables(repo.backend)[new][0]
    damaged = bytearray(repo.backend.get(key))
    damaged[pt.HEADER_SIZE + 3] ^= 0x10
    repo.backend.replace(key, bytes(damaged))
    with pytest.raises(CasError) as refused:
        mirror(repo.backend, LocalBackend(str(tmp_path / "dst")))
    assert key in refused.value.message
    dst = LocalBackend(str(tmp_path / "dst"))
    assert not dst.exists(key) and not dst.exists(f"packs/{new}.idx")


def test_a_table_under_another_packs_name_is_not_trusted(tmp_path, as_operator, small_packs):
    """A table whose header names another pack (copied or renamed by hand) is damage: fsck says
    so, and an erasure reads the pack itself."""
    repo = cas.init(str(tmp_path))
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=people(200))
    found = tables(repo.backend)
    holders = sorted(pid for pid, (_, rows) in found.items()
                     if any(p == repo.store.person_digest("user-3") for p, _ in rows))
    other = next(pid for pid in sorted(found) if pid != holders[0])
    key = found[holders[0]][0]
    data = repo.backend.get(found[other][0])
    repo.backend.delete(key)
    repo.backend.put_if_absent(key, data)  # the other pack's table, under this pack's name
    assert key in {p.where for p in repo.fsck().problems if p.severity == "error"}
    preview = cas.open(str(tmp_path)).erase("user-3")
    want = {cas.encode_case(c).case_id for c in people(200) if c.get("person") == "user-3"}
    assert set(preview["cases"]) == want
