"""Pack files, pack indexes and multi-pack indexes: round trips, lookups by range reads, and
parsers that raise only cas errors on any input."""

import os
import random
import struct

import pytest
from blake3 import blake3
from hypothesis import given, settings
from hypothesis import strategies as st

from cas.errors import CasError, CorruptData, DigestMismatch, UnsupportedFormat
from cas.storage.backends.memory import MemoryBackend
from cas.storage.pack import (DIGEST_LEN, DIGESTS_AT, ROW, SCAN_BELOW, Entry, IndexReader, _slot,
                              format_index, format_multi_index, format_pack, pack_id, parse_index,
                              parse_multi_index, parse_pack)

SETTINGS = settings(max_examples=80, deadline=None)

objects_st = st.lists(st.tuples(st.integers(0, 255), st.binary(max_size=80)), max_size=25)
digest_st = st.binary(min_size=32, max_size=32)
entries_st = st.dictionaries(
    digest_st,
    st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1), st.integers(0, 255)),
    max_size=40,
).map(lambda d: [Entry(k, *v) for k, v in d.items()])
pid_st = st.binary(min_size=32, max_size=32).map(bytes.hex)


def _pack(objects):
    return format_pack(objects)[0]


def _reseal(body: bytes) -> bytes:
    """A body with a correct trailer: what a buggy or hostile writer could produce."""
    return body + blake3(body).digest()


# -- packs --------------------------------------------------------------------------------
@SETTINGS
@given(objects_st)
def test_pack_round_trip(objects):
    pack, spans = format_pack(objects)
    parsed = list(parse_pack(pack))
    assert [(off, length) for off, length, _ in parsed] == spans
    assert [(kind, pack[off:off + length]) for off, length, kind in parsed] == \
        [(k, d) for k, d in objects]
    assert pack[:4] == b"CASP"
    assert pack_id(pack) == blake3(pack[:-DIGEST_LEN]).hexdigest()
    assert len(pack) == 8 + sum(5 + len(d) for _, d in objects) + DIGEST_LEN


def test_pack_layout_is_as_specified():
    pack, spans = format_pack([(1, b"abc"), (3, b"")])
    body = b"CASP" + struct.pack(">I", 1) + b"\x01" + struct.pack(">I", 3) + b"abc" \
        + b"\x03" + struct.pack(">I", 0)
    assert pack == body + blake3(body).digest()
    assert spans == [(13, 3), (21, 0)]


def test_empty_pack_round_trips():
    pack = _pack([])
    assert list(parse_pack(pack)) == []


def test_pack_ids_differ_with_content():
    assert pack_id(_pack([(1, b"a")])) != pack_id(_pack([(1, b"b")]))
    assert pack_id(_pack([(1, b"a")])) != pack_id(_pack([(2, b"a")]))


def test_every_single_byte_flip_of_a_pack_is_detected():
    pack = _pack([(1, b'{"input":"hello"}'), (2, b'{"ids":[]}'), (3, b"x" * 40)])
    for i in range(len(pack)):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(pack)
            bad[i] ^= mask
            with pytest.raises(CasError):
                list(parse_pack(bytes(bad)))


def test_pack_trailer_mismatch_names_both_digests():
    pack = bytearray(_pack([(1, b"data")]))
    pack[10] ^= 1
    with pytest.raises(DigestMismatch) as info:
        list(parse_pack(bytes(pack), where="packs/p.pack"))
    assert info.value.expected == bytes(pack[-32:]).hex()
    assert info.value.got == blake3(bytes(pack[:-32])).hexdigest()
    assert "packs/p.pack" in str(info.value)


def test_pack_truncation_and_extension_are_detected():
    pack = _pack([(1, b"abcdef"), (1, b"ghi")])
    for n in range(len(pack)):
        with pytest.raises(CasError):
            list(parse_pack(pack[:n]))
    with pytest.raises(CasError):
        list(parse_pack(pack + b"\x00"))


def test_unknown_pack_format_is_refused():
    body = b"CASP" + struct.pack(">I", 2)
    with pytest.raises(UnsupportedFormat):
        list(parse_pack(_reseal(body)))


def test_resealed_pack_with_overlong_entry_is_corrupt():
    body = b"CASP" + struct.pack(">I", 1) + b"\x01" + struct.pack(">I", 10) + b"short"
    with pytest.raises(CorruptData):
        list(parse_pack(_reseal(body)))
    body = b"CASP" + struct.pack(">I", 1) + b"\x01\x00\x00"  # a cut entry header
    with pytest.raises(CorruptData):
        list(parse_pack(_reseal(body)))


@SETTINGS
@given(st.binary(max_size=200))
def test_parse_pack_on_arbitrary_bytes_raises_only_cas_errors(data):
    try:
        list(parse_pack(data))
    except CasError:
        pass


@SETTINGS
@given(st.binary(max_size=120))
def test_parse_pack_on_arbitrary_resealed_bodies(tail):
    # With a correct trailer the structure itself must be checked: every span yielded lies
    # inside the body, and the spans tile it exactly.
    body = b"CASP" + struct.pack(">I", 1) + tail
    pack = _reseal(body)
    try:
        parsed = list(parse_pack(pack))
    except CasError:
        return
    pos = 8
    for off, length, kind in parsed:
        assert off == pos + 5 and off + length <= len(body)
        assert pack[pos] == kind
        pos = off + length
    assert pos == len(body)
    assert _pack([(k, pack[o:o + n]) for o, n, k in parsed]) == pack


@SETTINGS
@given(objects_st, st.data())
def test_parse_pack_on_mutated_packs_raises_only_cas_errors(objects, data):
    pack = bytearray(_pack(objects))
    reseal = data.draw(st.booleans())
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        i = data.draw(st.integers(0, max(len(pack) - 1, 0)))
        if op == "flip" and pack:
            pack[i] ^= data.draw(st.integers(1, 255))
        elif op == "cut":
            del pack[i:i + data.draw(st.integers(1, 8))]
        else:
            pack[i:i] = data.draw(st.binary(min_size=1, max_size=8))
    if reseal and len(pack) >= DIGEST_LEN:
        pack = bytearray(_reseal(bytes(pack[:-DIGEST_LEN])))
    try:
        list(parse_pack(bytes(pack)))
    except CasError:
        pass


# -- indexes ------------------------------------------------------------------------------
@SETTINGS
@given(pid_st, entries_st)
def test_index_round_trip(pid, entries):
    data = format_index(pid, entries)
    got_pid, got = parse_index(data)
    assert got_pid == pid
    assert got == sorted(entries)
    assert len(data) == DIGESTS_AT + len(entries) * (32 + 16) + 64
    # fan-out entry i counts digests whose first byte is <= i
    fanout = struct.unpack_from(">256I", data, 8)
    for i in (0, 1, 127, 254, 255):
        assert fanout[i] == sum(1 for e in entries if e.digest[0] <= i)


@SETTINGS
@given(pid_st, entries_st)
def test_index_is_independent_of_entry_order(pid, entries):
    shuffled = list(entries)
    random.Random(len(entries)).shuffle(shuffled)
    assert format_index(pid, shuffled) == format_index(pid, entries)


def test_every_single_byte_flip_of_an_index_is_detected():
    rnd = random.Random(1)
    entries = [Entry(rnd.randbytes(32), rnd.randrange(2**40), rnd.randrange(2**20), 1)
               for _ in range(5)]
    data = format_index("ab" * 32, entries)
    for i in range(len(data)):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(data)
            bad[i] ^= mask
            with pytest.raises(CasError):
                parse_index(bytes(bad))


def test_index_truncation_is_detected():
    data = format_index("cd" * 32, [Entry(bytes([i]) * 32, i, i, 1) for i in range(3)])
    for n in range(len(data)):
        with pytest.raises(CasError):
            parse_index(data[:n])
    with pytest.raises(CasError):
        parse_index(data + b"\x00")


def test_unknown_index_format_is_refused():
    data = bytearray(format_index("00" * 32, []))
    data[4:8] = struct.pack(">I", 7)
    with pytest.raises(UnsupportedFormat):
        parse_index(_reseal(bytes(data[:-DIGEST_LEN])))


def _index_body(fanout, digests, rows, pid=b"\x00" * 32):
    return (b"CASI" + struct.pack(">I", 1) + struct.pack(">256I", *fanout) + b"".join(digests)
            + b"".join(struct.pack(">QIB3x", *r) for r in rows) + pid)


def test_resealed_index_with_unsorted_or_duplicate_digests_is_corrupt():
    a, b = b"\x01" * 32, b"\x01" + b"\x02" * 31
    fanout = [0] + [2] * 255
    for digests in ([b, a], [a, a]):
        with pytest.raises(CorruptData):
            parse_index(_reseal(_index_body(fanout, digests, [(0, 0, 1)] * 2)))


def test_resealed_index_with_a_wrong_fanout_is_corrupt():
    a, b = b"\x01" * 32, b"\x05" * 32
    rows = [(0, 1, 1), (1, 1, 1)]
    good = [0] + [1] * 4 + [2] * 251
    parse_index(_reseal(_index_body(good, [a, b], rows)))
    wrong_bucket = [0] + [1] * 3 + [2] * 252  # b counted in bucket 4
    with pytest.raises(CorruptData):
        parse_index(_reseal(_index_body(wrong_bucket, [a, b], rows)))
    # A fan-out that is wrong only in a bucket no entry falls in, or decreasing, is still
    # wrong: IndexReader trusts it for lookups.
    decreasing = [9] + [1] * 4 + [2] * 251
    with pytest.raises(CorruptData):
        parse_index(_reseal(_index_body(decreasing, [a, b], rows)))
    empty_with_garbage = [5] + [0] * 255
    with pytest.raises(CorruptData):
        parse_index(_reseal(_index_body(empty_with_garbage, [], [])))


@SETTINGS
@given(st.binary(max_size=1200))
def test_parse_index_on_arbitrary_bytes_raises_only_cas_errors(data):
    try:
        parse_index(data)
    except CasError:
        pass


@SETTINGS
@given(pid_st, entries_st, st.data())
def test_parse_index_on_mutated_indexes_raises_only_cas_errors(pid, entries, data):
    raw = bytearray(format_index(pid, entries))
    reseal = data.draw(st.booleans())
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert", "fanout"]))
        i = data.draw(st.integers(0, len(raw) - 1))
        if op == "flip":
            raw[i] ^= data.draw(st.integers(1, 255))
        elif op == "cut":
            del raw[i:i + data.draw(st.integers(1, 48))]
        elif op == "insert":
            raw[i:i] = data.draw(st.binary(min_size=1, max_size=48))
        elif len(raw) >= DIGESTS_AT:
            b = data.draw(st.integers(0, 255))
            raw[8 + 4 * b: 12 + 4 * b] = struct.pack(">I", data.draw(st.integers(0, 2**32 - 1)))
    if reseal and len(raw) >= DIGEST_LEN:
        raw = bytearray(_reseal(bytes(raw[:-DIGEST_LEN])))
    try:
        got_pid, got = parse_index(bytes(raw))
    except CasError:
        return
    # Whatever parse_index accepts is exactly a well-formed index of what it returned.
    assert format_index(got_pid, got) == bytes(raw)


# -- IndexReader ----------------------------------------------------------------------------
class CountingBackend(MemoryBackend):
    def __init__(self):
        super().__init__()
        self.bytes_read = 0
        self.whole_reads = 0
        self.requests = 0

    def get(self, key):
        self.whole_reads += 1
        return super().get(key)

    def get_range(self, key, offset, length):
        self.requests += 1
        got = MemoryBackend.get(self, key)[offset:offset + length]
        self.bytes_read += len(got)
        return got


class CountingView:
    """A file's bytes as a mapped index sees them, counting the probes (slices) made."""

    def __init__(self, data: bytes) -> None:
        self.data, self.slices = data, 0

    def __getitem__(self, span):
        self.slices += 1
        return self.data[span]


class MappingBackend(CountingBackend):
    """A backend that maps files, as a local directory does (IndexReader then probes memory)."""

    def map(self, key):
        self.view = CountingView(MemoryBackend.get(self, key))
        return self.view


def _reader(entries, key="packs/x.idx", mapped=False):
    backend = MappingBackend() if mapped else CountingBackend()
    backend.put_if_absent(key, format_index("ee" * 32, entries))
    return backend, IndexReader(backend, key)


def _entries(digests):
    return [Entry(d, 1000 + i, i + 1, 1 + i % 3) for i, d in enumerate(digests)]


def _absent_near(digests):
    """Digests that are not members but sort right next to members (and at the ends)."""
    present = set(digests)
    out = {b"\x00" * 32, b"\xff" * 32}
    for d in digests[:50]:
        n = int.from_bytes(d, "big")
        for delta in (-1, 1):
            if 0 <= n + delta < 2**256:
                out.add((n + delta).to_bytes(32, "big"))
    return sorted(out - present)


@SETTINGS
@given(st.lists(digest_st, unique=True, max_size=300), st.booleans())
def test_lookup_finds_every_digest_and_nothing_else(digests, mapped):
    entries = _entries(digests)
    _, reader = _reader(entries, mapped=mapped)
    assert len(reader) == len(entries)
    for e in entries:
        assert reader.lookup(e.digest) == (reader.packs[0], e)
    for d in _absent_near(digests):
        assert reader.lookup(d) is None


@pytest.mark.parametrize("bucket_size", [SCAN_BELOW - 1, SCAN_BELOW, SCAN_BELOW + 1,
                                         3 * SCAN_BELOW + 7, 40 * SCAN_BELOW])
@pytest.mark.parametrize("first_byte", [0x00, 0x7A, 0xFF])
@pytest.mark.parametrize("mapped", [False, True])
def test_lookup_in_a_large_fanout_bucket(bucket_size, first_byte, mapped):
    # All entries share their first byte: the fan-out cannot help and lookup must
    # search the bucket with range reads (or probes of the map) before scanning a small block.
    rnd = random.Random(bucket_size * 256 + first_byte)
    digests = {bytes([first_byte]) + rnd.randbytes(31) for _ in range(bucket_size)}
    digests |= {bytes([rnd.randrange(256)]) + rnd.randbytes(31) for _ in range(50)}
    digests = sorted(digests)
    entries = _entries(digests)
    backend, reader = _reader(entries, mapped=mapped)
    for e in entries:
        assert reader.lookup(e.digest) == (reader.packs[0], e)
    for d in _absent_near(digests) + [bytes([first_byte]) + rnd.randbytes(31) for _ in range(200)]:
        if d not in digests:
            assert reader.lookup(d) is None
    assert backend.whole_reads == 0


def test_lookup_reads_a_few_kib_not_the_whole_index():
    rnd = random.Random(7)
    digests = sorted({rnd.randbytes(32) for _ in range(60_000)})
    entries = _entries(digests)
    backend, reader = _reader(entries)
    size = len(backend.get("packs/x.idx"))
    backend.bytes_read = 0
    probes = [digests[i] for i in range(0, len(digests), 6007)]
    for d in probes:
        assert reader.lookup(d)[1].digest == d
    per_lookup = backend.bytes_read / len(probes)
    assert per_lookup < 8 * 1024, per_lookup
    assert size > 2_000_000


@pytest.mark.parametrize("mapped", [False, True])
@pytest.mark.parametrize("shape", ["clustered", "two-clusters", "ramp"])
def test_lookup_in_a_skewed_column(shape, mapped):
    """Digests far from uniform (an index no BLAKE3 writer makes, but one a parser must still
    read right): where a value predicts a position is wrong, and the search still finds every
    member and no neighbour."""
    rnd = random.Random(shape)
    if shape == "clustered":  # a thousand keys packed into a sliver of one bucket
        digests = {b"\x42" + b"\x00" * 6 + rnd.randbytes(25) for _ in range(1000)}
    elif shape == "two-clusters":
        digests = {b"\x42" + bytes([side]) * 4 + rnd.randbytes(27) for side in (0, 255)
                   for _ in range(600)}
    else:  # keys whose density grows steeply across the bucket
        digests = {b"\x42" + (int((i / 1500) ** 8 * 2**64) % 2**64).to_bytes(8, "big")
                   + rnd.randbytes(23) for i in range(1500)}
    digests = sorted(digests | {rnd.randbytes(32) for _ in range(100)})
    entries = _entries(digests)
    _, reader = _reader(entries, mapped=mapped)
    for e in entries:
        assert reader.lookup(e.digest) == (reader.packs[0], e)
    for d in _absent_near(digests):
        assert reader.lookup(d) is None


@pytest.fixture(scope="module")
def uniform_index():
    rnd = random.Random(11)
    return _entries(sorted({rnd.randbytes(32) for _ in range(100_000)}))


def test_a_lookup_in_a_mapped_index_slices_one_window_around_the_digest(uniform_index):
    """100k uniform digests (390 to a fan-out bucket): by bisection a lookup sliced the map
    about 9 times, by interpolation 5.3 for a hit and 4.5 for a miss; now one slice of the
    entries around where the digest's value puts it, searched at C speed, and one of the row
    of a hit."""
    backend, reader = _reader(uniform_index, mapped=True)
    reader.fanout
    rnd = random.Random(5)
    hits = [uniform_index[i].digest for i in range(0, len(uniform_index), 997)]
    misses = [rnd.randbytes(32) for _ in range(100)]
    before = backend.view.slices
    for d in hits:
        assert reader.lookup(d)[1].digest == d
    assert backend.view.slices - before == 2 * len(hits)
    before = backend.view.slices
    for d in misses:
        assert reader.lookup(d) is None
    assert backend.view.slices - before == len(misses)


def test_a_lookup_by_requests_reads_one_window_around_the_digest(uniform_index):
    """The same index read by range requests: one request for the entries around where the
    digest's value puts it, and one for the row of a hit (by bisection: 4 for a hit, 3 for a
    miss)."""
    backend, reader = _reader(uniform_index)
    reader.fanout
    rnd = random.Random(6)
    hits = [uniform_index[i].digest for i in range(0, len(uniform_index), 997)]
    misses = [rnd.randbytes(32) for _ in range(100)]
    before = backend.requests
    for d in hits:
        assert reader.lookup(d)[1].digest == d
    assert backend.requests - before == 2 * len(hits)
    before = backend.requests
    for d in misses:
        assert reader.lookup(d) is None
    assert backend.requests - before == len(misses)


def test_lookup_at_bucket_boundaries():
    digests = sorted({bytes([b]) + bytes([x]) * 31 for b in (0, 1, 2, 254, 255) for x in (0, 255)})
    entries = _entries(digests)
    _, reader = _reader(entries)
    for e in entries:
        assert reader.lookup(e.digest) == (reader.packs[0], e)
    for b in (3, 128, 253):
        assert reader.lookup(bytes([b]) * 32) is None


def test_lookup_on_an_empty_index():
    _, reader = _reader([])
    assert len(reader) == 0
    assert reader.lookup(os.urandom(32)) is None
    assert reader.lookup(b"\x00" * 32) is None
    assert reader.lookup(b"\xff" * 32) is None
    assert reader.all_digests() == set()


def test_all_digests():
    rnd = random.Random(3)
    digests = {rnd.randbytes(32) for _ in range(500)}
    _, reader = _reader(_entries(sorted(digests)))
    assert reader.all_digests() == digests


def test_index_reader_refuses_bad_headers():
    backend = MemoryBackend()
    good = format_index("00" * 32, [])
    backend.put_if_absent("packs/short.idx", good[:100])
    backend.put_if_absent("packs/magic.idx", b"XXXX" + good[4:])
    backend.put_if_absent("packs/format.idx", good[:4] + struct.pack(">I", 9) + good[8:])
    with pytest.raises(CorruptData):
        IndexReader(backend, "packs/short.idx").lookup(b"\x00" * 32)
    with pytest.raises(CorruptData):
        IndexReader(backend, "packs/magic.idx").lookup(b"\x00" * 32)
    with pytest.raises(UnsupportedFormat):
        IndexReader(backend, "packs/format.idx").lookup(b"\x00" * 32)


def test_pack_and_index_together():
    objs = [(1, b"case-%d" % i) for i in range(300)]
    pack, spans = format_pack(objs)
    pid = pack_id(pack)
    entries = [Entry(blake3(d).digest(), off, n, k) for (k, d), (off, n) in zip(objs, spans)]
    backend = MemoryBackend()
    backend.put_if_absent(f"packs/{pid}.pack", pack)
    backend.put_if_absent(f"packs/{pid}.idx", format_index(pid, entries))
    reader = IndexReader(backend, f"packs/{pid}.idx")
    assert parse_index(backend.get(f"packs/{pid}.idx"))[0] == pid
    for k, d in objs:
        found_pid, e = reader.lookup(blake3(d).digest())
        assert found_pid == pid and e.kind == k
        assert backend.get_range(f"packs/{pid}.pack", e.offset, e.length) == d


@pytest.mark.parametrize("mapped", [False, True])
def test_a_digest_found_across_two_neighbours_is_not_a_match(mapped):
    """A window is searched for the digest's bytes, which may also occur straddling two
    neighbouring entries P and Q: that is not a match (absent), nor does it stop the search
    short of the digest's own entry further on (present)."""
    rnd = random.Random(3)
    tail = rnd.randbytes(29)
    p, q = b"\x42\x42\x50" + tail, b"\x42\x42\x51" + rnd.randbytes(29)
    straddling = p[1:] + q[:1]  # 42 50 ...: sorts after both, in the same bucket
    digests = sorted({b"\x42" + rnd.randbytes(31) for _ in range(400)} | {p, q})
    digests = [d for d in digests if not p < d < q and d != straddling]
    column = b"".join(digests)
    assert column.find(straddling) == digests.index(p) * 32 + 1  # the trap is there
    _, reader = _reader(_entries(digests), mapped=mapped)
    assert reader.lookup(straddling) is None
    with_it = sorted(digests + [straddling])
    assert _slot(b"".join(with_it), straddling) == with_it.index(straddling)
    entries = _entries(with_it)
    _, reader = _reader(entries, mapped=mapped)
    want = next(e for e in entries if e.digest == straddling)
    assert reader.lookup(straddling) == (reader.packs[0], want)


# -- multi-pack indexes: one index over every pack of a large batch ------------------------
rows_st = st.lists(st.tuples(st.binary(min_size=32, max_size=32), st.integers(0, 2**40),
                             st.integers(0, 2**31), st.integers(1, 3), st.integers(0, 2)),
                   unique_by=lambda r: r[0], max_size=200)


@settings(max_examples=60, deadline=None)
@given(rows_st)
def test_round_trip_and_lookup(rows):
    packs = [os.urandom(32).hex() for _ in range(3)]
    entries = [(Entry(d, off, n, k), p) for d, off, n, k, p in rows]
    data = format_multi_index([format_index(pid, [e for e, p in entries if p == i])
                               for i, pid in enumerate(packs)])
    got_packs, got = parse_multi_index(data)
    assert got_packs == packs and got == sorted(entries)
    backend = MemoryBackend()
    backend.put_if_absent("packs/m.midx", data)
    reader = IndexReader(backend, "packs/m.midx")
    assert reader.packs == packs and len(reader) == len(entries)
    for e, p in entries:
        assert reader.lookup(e.digest) == (packs[p], e)
    assert reader.lookup(b"\x7f" * 32) is None or any(e.digest == b"\x7f" * 32 for e, _ in entries)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_damage_is_a_cas_error(data):
    packs = [os.urandom(32).hex() for _ in range(2)]
    blob = bytearray(format_multi_index([
        format_index(pid, [Entry(os.urandom(32), i * 10, 10, 1) for i in range(10)])
        for pid in packs]))
    pos = data.draw(st.integers(0, len(blob) - 1))
    blob[pos] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CasError):
        parse_multi_index(bytes(blob))


def test_an_object_two_packs_hold_gets_one_row():
    d = os.urandom(32)
    a, b = os.urandom(32).hex(), os.urandom(32).hex()
    data = format_multi_index([format_index(a, [Entry(d, 5, 10, 1)]),
                               format_index(b, [Entry(d, 5, 10, 1), Entry(b"\xff" * 32, 9, 3, 1)])])
    packs, rows = parse_multi_index(data)  # strictly sorted: it parses
    assert packs == [a, b] and [e.digest for e, _ in rows] == [d, b"\xff" * 32]


def test_a_page_of_consecutive_digests_in_a_wide_column_costs_two_reads():
    """A page of a version's ids lies together in the sorted digest column of a large
    (multi-pack) index: one read of the window their values put them in and one of their
    rows, not two reads each (issue 37: a cold page on S3 fetched the whole index after a
    hundred one-at-a-time lookups)."""
    rng = random.Random(5)
    digests = sorted({rng.randbytes(32) for _ in range(200_000)})  # ~780 per fan-out slot
    backend, reader = _reader(_entries(digests))
    assert len(reader) == len(digests)  # opened: header and fan-out read
    for start in (0, 1234, 100_000, len(digests) - 20):
        page = digests[start:start + 20]  # a page too small to read its slots whole
        backend.requests = 0
        found = reader.lookup_many(page, confirm=False)
        assert sorted(found) == page
        assert [found[d][1].offset for d in page] == [1000 + start + i for i in range(20)]
        assert backend.requests == 2, (start, backend.requests)
    # digests spread over the column: still right, one lookup each
    spread = digests[::6000]
    assert sorted(reader.lookup_many(spread, confirm=False)) == spread


class ConcurrentBackend(CountingBackend):
    """A backend that takes requests at once, as S3 does: a lookup reads its window's rows in
    the same round trip as its digests. Records each read's length."""

    CONCURRENT_CALLS = True

    def __init__(self):
        super().__init__()
        self.lengths = []

    def get_range(self, key, offset, length):
        self.lengths.append(length)
        return super().get_range(key, offset, length)


def test_a_remote_lookup_reads_its_rows_with_its_window_and_finds_the_same():
    """On a remote store a lookup waits for one round trip, not two: the rows of the window
    come with its digests, and the row it needs is taken from them (never read alone)."""
    rng = random.Random(8)
    digests = sorted({rng.randbytes(32) for _ in range(100_000)})
    entries = _entries(digests)
    backend = ConcurrentBackend()
    backend.put_if_absent("packs/x.idx", format_index("ee" * 32, entries))
    reader = IndexReader(backend, "packs/x.idx")
    _, plain = _reader(entries)
    len(reader)
    for d in rng.sample(digests, 200) + _absent_near(digests)[:50]:
        backend.lengths.clear()
        found = reader.lookup(d, confirm=False)
        assert found == plain.lookup(d, confirm=False)
        if found is not None:
            assert backend.requests and ROW.size not in backend.lengths  # no lone row read


# -- the spool of a large batch ----------------------------------------------------------------
@SETTINGS
@given(st.dictionaries(digest_st, st.tuples(
    st.integers(1, 10), st.binary(max_size=300),
    st.none() | st.sets(st.text("pk:0123456789abcdef", min_size=1, max_size=20), min_size=1,
                        max_size=3)), max_size=60))
def test_a_spool_gives_back_what_it_was_given_in_digest_order(tmp_path_factory, objects):
    from cas.storage.pack import PackSpool
    where = tmp_path_factory.mktemp("spool")
    spool = PackSpool(str(where))
    for raw, (kind, data, persons) in objects.items():
        spool.add(raw, kind, data, persons)
    got = [(raw, kind, bytes(data), persons) for raw, kind, data, persons in spool.drain()]
    assert got == [(raw, *objects[raw]) for raw in sorted(objects)]
    assert os.listdir(spool.directory) == []  # each range file deleted once read
    spool.close()
    assert os.listdir(where) == []


def test_a_spool_keeps_an_object_that_names_more_people_than_a_short_counts(tmp_path):
    """A provenance names every person of the cases it describes: 50k of them in one
    promotion (their keyed digests, 3.2 MB) must spool, not overflow a 16-bit length."""
    from cas.storage.pack import PackSpool
    people = {f"pk:{i:064x}" for i in range(70_000)}
    spool = PackSpool(str(tmp_path))
    spool.add(bytes(32), 5, b"provenance", people)
    [(raw, kind, data, persons)] = list(spool.drain())
    assert (raw, kind, bytes(data), persons) == (bytes(32), 5, b"provenance", people)
    spool.close()


def test_a_spool_left_by_a_process_that_is_gone_is_deleted_by_the_next(tmp_path):
    """A batch killed mid-way leaves its spool (cases, people's among them) on local disk: the
    next spool in the same directory deletes it, and leaves a live process's alone."""
    import subprocess
    import sys

    from cas.storage.pack import SPOOL_PREFIX, PackSpool
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = tmp_path / f"{SPOOL_PREFIX}{int(gone.stdout)}-abc"
    live = tmp_path / f"{SPOOL_PREFIX}{os.getppid()}-def"
    for d in (dead, live):
        d.mkdir()
        (d / "00").write_bytes(b"a case")
    spool = PackSpool(str(tmp_path))
    assert not dead.exists() and live.exists() and os.path.isdir(spool.directory)
    spool.close()
