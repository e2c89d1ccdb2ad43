"""The person index (docs/format.md 4.8.2, 8.3): a pack's person table (its bytes, its checks,
the one file a pack gets), the lookups over tables and over the records written before them,
and repositories written before tables read, erased, checked, mirrored and collected beside
packs written with them."""

from __future__ import annotations

import struct

import pytest
from blake3 import blake3
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.errors import CasError, CorruptData, NotFound
from cas.format.keys import (PERSON_TABLES, PERSONS, SHARDS, parse_person_index_key,
                             parse_person_shards_key, parse_person_table_key, person_index_key,
                             person_shards_key, person_table_key)
from cas.format.records import KIND_CODES
from cas.storage.backends.memory import MemoryBackend
from cas.storage.person_index import (HEADER_SIZE, PersonFiles, Persons, format_table, named_person,
                                      parse_header, parse_shard, parse_table, shard_span)
from support.backends import Counting
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
    data, shards = format_table(PID, {bytes.fromhex(DIGEST[3:]): [PERSON]})
    assert data == by_hand(PID, [(PERSON, DIGEST)]) and shards == {"bb"}
    assert len(data) == HEADER_SIZE + 64 + 32 == 5288
    # the test vector of docs/format.md 8.3
    assert data[-32:].hex() == VECTOR_CHECKSUM
    assert person_table_key(PID, shards) == (
        f"persons/packs/{PID}.0000000000000000080000000000000000000000000000000000000000000000")
    empty, none = format_table(PID, {})
    assert empty == by_hand(PID, []) and none == set() and len(empty) == HEADER_SIZE + 32


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
    data, shards = format_table(PID, persons_by)
    assert data == by_hand(PID, rows)
    pid, whole = parse_table(data, "t")
    assert pid == PID and set(whole) == shards == {p[3:5] for p, _ in rows}
    assert sorted(r for part in whole.values() for r in part) == sorted(set(rows))
    head = data[:HEADER_SIZE]
    assert parse_header(head, "t") == PID
    for s in range(256):
        shard = f"{s:02x}"
        offset, length, _ = shard_span(head, shard, "t")
        got = parse_shard(data[offset:offset + length], head, shard, "t")
        assert got == whole.get(shard, [])


@settings(max_examples=40, deadline=None)
@given(rows_of.filter(bool), st.data())
def test_a_flipped_byte_is_always_caught(rows, data):
    """Whole, every byte is checked; read by shard, the header and the rows read are."""
    persons_by = {}
    for p, d in rows:
        persons_by.setdefault(bytes.fromhex(d[3:]), set()).add(p)
    table, _ = format_table(PID, persons_by)
    at = data.draw(st.integers(0, len(table) - 1))
    damaged = bytearray(table)
    damaged[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CasError):
        parse_table(bytes(damaged), "t")
    if at < HEADER_SIZE:
        with pytest.raises(CasError):
            parse_header(bytes(damaged[:HEADER_SIZE]), "t")
    elif at < len(table) - 32:  # a row: the shard it was in no longer matches its check
        head = bytes(damaged[:HEADER_SIZE])
        parse_header(head, "t")
        shard = f"{table[HEADER_SIZE + (at - HEADER_SIZE) // 64 * 64]:02x}"
        offset, length, _ = shard_span(head, shard, "t")
        with pytest.raises(CorruptData):
            parse_shard(bytes(damaged[offset:offset + length]), head, shard, "t")


def test_truncated_or_other_format_is_refused():
    table, _ = format_table(PID, {b"\x01" * 32: [PERSON]})
    for n in (0, 7, HEADER_SIZE - 1, HEADER_SIZE, len(table) - 1):
        with pytest.raises(CasError):
            parse_table(table[:n], "t")
    other = bytearray(table[:HEADER_SIZE - 32])
    other[4:8] = struct.pack(">I", 2)
    resealed = bytes(other) + blake3(bytes(other)).digest()
    with pytest.raises(cas.errors.UnsupportedFormat):
        parse_header(resealed, "t")


# -- lookups over the person index files of a repository ------------------------------------
A, B = "pk:" + "0a" * 32, "pk:" + "bb" * 32
D1, D2, D3 = ("b3:" + c * 32 for c in ("11", "22", "33"))
OLD = "66" * 32  # a pack written before person tables


def raw(digest: str) -> bytes:
    return bytes.fromhex(digest[3:])


def test_named_person_reads_the_person_of_the_kinds_that_name_one():
    named = b'{"format":1,"kind":"case","person":"ada","input":"x"}'
    for kind in ("case", "run", "cassette"):
        assert named_person(KIND_CODES[kind], named) == "ada"
    assert named_person(KIND_CODES["case"], b'{"person":null}') is None
    assert named_person(KIND_CODES["run"], b'{"input":"x"}') is None
    # a provenance object names the people of its cases, not by a field of its own; a tree
    # node names no one (its bytes are not even read)
    assert named_person(KIND_CODES["provenance"], named) is None
    assert named_person(KIND_CODES["tree.leaf"], b"not json") is None


def test_person_files_tell_their_shards_by_their_names():
    files = PersonFiles(person_table_key(PID, {"0a", "bb"}), person_shards_key(PID, {"01", "0a"}))
    assert files.names("0a") and files.names("bb") and files.names("01")
    assert not files.names("01", table_only=True) and not files.names("ff")
    assert files.record_shards() == {"01", "0a"}
    assert PersonFiles(files.table, None).record_shards() == set()
    assert not PersonFiles(None, None).names("0a")


def two_generations() -> tuple[MemoryBackend, Persons]:
    """Pack OLD indexed by records (as a cas before tables wrote them), pack PID by a table."""
    backend = MemoryBackend()
    persons = Persons(backend)
    persons.write_table(OLD, {raw(D3): [B]})
    to_records(backend)
    written = persons.write_table(PID, {raw(D1): [A], raw(D2): [A, B]})
    (key,) = backend.list(PERSON_TABLES)
    assert written == len(backend.get(key)) and parse_person_table_key(key) == (PID, {"0a", "bb"})
    return backend, persons


def test_the_files_rows_and_entries_of_both_generations():
    backend, persons = two_generations()
    files = persons.files()
    assert files == {PID: PersonFiles(person_table_key(PID, {"0a", "bb"}), None),
                     OLD: PersonFiles(None, person_shards_key(OLD, {"bb"}))}
    assert persons.files([OLD]) == {OLD: files[OLD]} and persons.files([]) == {}
    assert sorted(persons.rows(PID, files[PID])) == [(A, D1), (A, D2), (B, D2)]
    assert persons.rows(OLD, files[OLD]) == [(B, D3)]
    assert persons.entries([PID, OLD]) == {raw(D1): {A}, raw(D2): {A, B}, raw(D3): {B}}
    # a file lost or damaged is passed over (a rewrite indexes cases and runs anew)
    backend.replace(files[PID].table, b"damaged")
    backend.delete(person_index_key("bb", OLD))
    assert persons.rows(PID, files[PID]) == [] and persons.rows(OLD, files[OLD]) == []


def test_a_table_shard_costs_two_range_reads_once():
    inner = MemoryBackend()
    counted = Counting(inner)
    persons = Persons(counted)
    persons.write_table(PID, {raw(D1): [A], raw(D2): [A, B]})
    key = person_table_key(PID, {"0a", "bb"})
    counted.calls.clear()
    assert persons.table_shard(key, "bb") == [(B, D2)]
    assert counted.calls == {"get_range": 2}
    assert persons.table_shard(key, "bb") == [(B, D2)]  # a table never changes under its name
    assert persons.table_shard(key, "77") == [] and counted.calls == {"get_range": 3}
    elsewhere = person_table_key("77" * 32, {"0a", "bb"})
    inner.put_if_absent(elsewhere, inner.get(key))  # this table under another pack's name
    with pytest.raises(CorruptData):
        persons.table_shard(elsewhere, "0a")
    with pytest.raises(NotFound):
        persons.table_shard(person_table_key("88" * 32, set()), "0a")


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

    class CountingLocal(LocalBackend):
        def get(self, key):
            calls.append(("get", key))
            return super().get(key)

        def get_range(self, key, offset, length):
            calls.append(("range", key))
            return super().get_range(key, offset, length)

    counted = cas.Repository(CountingLocal(repo.backend.root))
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
    from cas.repo.mirror import mirror
    from cas.storage.backends.local import LocalBackend
    repo = cas.init(str(tmp_path / "src"))
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=people(10))
    mirror(repo.backend, LocalBackend(str(tmp_path / "dst")))
    assert tables(LocalBackend(str(tmp_path / "dst"))) == tables(repo.backend)
    repo.commit("d", base=1, add=people(10, "more-"))
    [new] = set(tables(repo.backend)) - set(tables(LocalBackend(str(tmp_path / "dst"))))
    key = tables(repo.backend)[new][0]
    damaged = bytearray(repo.backend.get(key))
    damaged[HEADER_SIZE + 3] ^= 0x10
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
