"""The backend contract (cas.storage.backends.Backend), one suite run against every backend.

To add a backend, add one line to BACKENDS: a name and a factory that makes a fresh, empty
backend from a private temporary directory and the pytest `request` (to reach other fixtures).
"s3" runs against the real SeaweedFS server of conftest.py; "s3-cached" is the same behind the
local cache that remote repositories use.
"""

import itertools
import os
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from cas.storage.backends import check_key, get_ranges
from cas.storage.backends.cache import CachingBackend
from cas.storage.backends.local import LocalBackend
from cas.storage.backends.s3 import S3Backend
from cas.storage.backends.memory import MemoryBackend
from cas.errors import InvalidArgument, NotFound

BACKENDS = {
    "memory": lambda tmp, request: MemoryBackend(),
    "local": lambda tmp, request: LocalBackend(str(tmp / "repo")),
    "s3": lambda tmp, request: S3Backend(request.getfixturevalue("seaweed").url()),
    "s3-cached": lambda tmp, request: CachingBackend(
        S3Backend(request.getfixturevalue("seaweed").url()), str(tmp / "cache")),
}

_fresh = itertools.count()


@pytest.fixture(params=sorted(BACKENDS))
def make_backend(request, tmp_path):
    """A factory of fresh, empty backends of one kind (several per test when needed)."""
    factory = BACKENDS[request.param]

    def make():
        where = tmp_path / f"b{next(_fresh)}"
        where.mkdir()
        return factory(where, request)

    return make


@pytest.fixture
def backend(make_backend):
    return make_backend()


INVALID_KEYS = [
    "", "/", "/a", "a/", "a//b", "..", "../a", "a/../b", "a/..", ".", "./a", "a/./b",
    "a b", " a", "a ", "a\tb", "a\nb", "a\\b", "a\x00b", "é", "a:b", "a*", "~", None, b"a", 1,
]
VALID_KEYS = ["a", "A.b-c_d", "packs/ab.pack", "datasets/x/versions/0000000001", ".hidden",
              "..a", "a..", "a/.b/..c", "-", "_", "0/1/2/3/4/5/6/7/8/9",
              ".tmp", ".tmp/x", "tmp/x"]  # no name is reserved by a backend


# -- get / put_if_absent ------------------------------------------------------------------
def test_fresh_backend_is_empty(backend):
    assert list(backend.list()) == []
    assert list(backend.list("packs/")) == []
    assert not backend.exists("a")


def test_put_then_get_returns_exact_bytes(backend):
    data = bytes(range(256)) * 5
    assert backend.put_if_absent("packs/p1.pack", data) is True
    assert backend.get("packs/p1.pack") == data
    assert backend.exists("packs/p1.pack")


def test_empty_value_is_a_value(backend):
    assert backend.put_if_absent("empty", b"") is True
    assert backend.exists("empty")
    assert backend.get("empty") == b""
    assert list(backend.list()) == ["empty"]
    assert backend.put_if_absent("empty", b"x") is False
    assert backend.get("empty") == b""


def test_put_accepts_bytearray_and_memoryview(backend):
    assert backend.put_if_absent("ba", bytearray(b"abc")) is True
    assert backend.put_if_absent("mv", memoryview(b"xyz123")[1:4]) is True
    assert backend.get("ba") == b"abc"
    assert backend.get("mv") == b"yz1"


def test_put_if_absent_creates_once_and_never_overwrites(backend):
    assert backend.put_if_absent("k", b"first") is True
    assert backend.put_if_absent("k", b"second") is False
    assert backend.put_if_absent("k", b"first") is False
    assert backend.put_if_absent("k", b"") is False
    assert backend.get("k") == b"first"
    assert list(backend.list()) == ["k"]


@pytest.mark.parametrize("key", VALID_KEYS)
def test_every_valid_key_round_trips_and_is_listed(backend, key):
    assert check_key(key) == key
    assert backend.put_if_absent(key, key.encode()) is True
    assert backend.exists(key)
    assert backend.get(key) == key.encode()
    assert list(backend.list()) == [key]
    assert list(backend.list(key)) == [key]
    assert backend.delete(key) is True
    assert list(backend.list()) == []


def test_get_missing_raises_not_found_naming_the_key(backend):
    with pytest.raises(NotFound) as info:
        backend.get("packs/missing.pack")
    assert info.value.code == "NOT_FOUND"
    assert info.value.fields["key"] == "packs/missing.pack"
    with pytest.raises(NotFound):
        backend.get_range("packs/missing.pack", 0, 10)
    # a range past any end (as a damaged index row may ask) of an absent key: still absent
    for offset, length in ((10**6, 1), (2**63, 10), (2**64 - 1, 2**32 - 1)):
        with pytest.raises(NotFound):
            backend.get_range("packs/missing.pack", offset, length)


def test_a_key_prefix_is_not_a_key(backend):
    # "a" and "a/b" are different keys: the existence of one says nothing of the other
    # (a directory on disk is not a key).
    backend.put_if_absent("a/b", b"1")
    for key in ("a", "a/b/c"):
        assert not backend.exists(key)
        with pytest.raises(NotFound):
            backend.get(key)
        with pytest.raises(NotFound):
            backend.get_range(key, 0, 1)
        with pytest.raises(NotFound):
            backend.get_range(key, 10**6, 1)
        assert backend.delete(key) is False
    assert backend.get("a/b") == b"1"
    assert list(backend.list()) == ["a/b"]


# -- get_range ----------------------------------------------------------------------------
def test_get_range(backend):
    data = bytes(range(200))
    backend.put_if_absent("r", data)
    assert backend.get_range("r", 0, 200) == data
    assert backend.get_range("r", 0, 10) == data[:10]
    assert backend.get_range("r", 37, 5) == data[37:42]
    assert backend.get_range("r", 190, 50) == data[190:]  # fewer only at the end
    assert backend.get_range("r", 199, 1) == data[199:]
    assert backend.get_range("r", 200, 10) == b""
    assert backend.get_range("r", 500, 10) == b""
    assert backend.get_range("r", 3, 0) == b""
    # offsets and lengths as large as an index row can hold (u64, u32) just reach the end
    assert backend.get_range("r", 2**63, 10) == b""
    assert backend.get_range("r", 2**64 - 1, 2**32 - 1) == b""
    assert backend.get_range("r", 150, 2**32 - 1) == data[150:]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300), offset=st.integers(0, 350), length=st.integers(0, 350))
def test_get_range_matches_slicing(make_backend, data, offset, length):
    backend = make_backend()
    backend.put_if_absent("x", data)
    assert backend.get_range("x", offset, length) == data[offset:offset + length]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300),
       spans=st.lists(st.tuples(st.integers(0, 350), st.integers(0, 350)), max_size=6))
def test_get_ranges_matches_one_get_range_per_span(make_backend, data, spans):
    """backends.get_ranges: each span as get_range would read it, in order (a local file is
    opened once, S3's requests go out together), and NotFound for an absent key (as for
    get_range, a span of no bytes may answer b"" without looking: S3 sends no request)."""
    backend = make_backend()
    backend.put_if_absent("x", data)
    assert get_ranges(backend, "x", spans) == [data[o:o + n] for o, n in spans]
    with pytest.raises(NotFound):
        get_ranges(backend, "absent", [(0, 1)] + spans)


# -- delete -------------------------------------------------------------------------------
def test_delete(backend):
    backend.put_if_absent("d/k", b"v")
    assert backend.delete("d/k") is True
    assert not backend.exists("d/k")
    with pytest.raises(NotFound):
        backend.get("d/k")
    assert backend.delete("d/k") is False
    assert backend.delete("never/was") is False
    assert list(backend.list()) == []
    # a deleted key can be created again (gc and erasure rewrite packs)
    assert backend.put_if_absent("d/k", b"again") is True
    assert backend.get("d/k") == b"again"


def test_replace_sets_the_value_whole_present_or_not(backend):
    backend.replace("r/k", b"new")                 # absent: created
    assert backend.get("r/k") == b"new"
    backend.put_if_absent("r/other", b"o")
    backend.replace("r/k", b"redacted")            # present: swapped whole
    assert backend.get("r/k") == b"redacted"
    assert backend.get_range("r/k", 0, 3) == b"red"
    backend.replace("r/k", b"")
    assert backend.get("r/k") == b""
    assert list(backend.list("r/")) == ["r/k", "r/other"]
    assert backend.get("r/other") == b"o"
    with pytest.raises(InvalidArgument):
        backend.replace("../x", b"v")


def test_modified_is_the_time_of_the_last_write(backend):
    import time
    before = time.time()
    backend.put_if_absent("m/k", b"v")
    first = backend.modified("m/k")
    assert before - 5 <= first <= time.time() + 5  # a server clock may be a little off
    with pytest.raises(NotFound):
        backend.modified("m/absent")
    with pytest.raises(NotFound):
        backend.modified("m")  # a prefix is not a key


def test_delete_leaves_other_keys(backend):
    for k in ("p/a", "p/b", "p/c"):
        backend.put_if_absent(k, k.encode())
    assert backend.delete("p/b") is True
    assert list(backend.list()) == ["p/a", "p/c"]
    assert backend.get("p/a") == b"p/a"


# -- list ---------------------------------------------------------------------------------
KEYS = ["config", "packs/ab01.idx", "packs/ab01.pack", "packs/abff.pack", "packs/b0.pack",
        "packs2/x", "datasets/d1/meta/0000000001", "datasets/d1/versions/0000000001",
        "datasets/d1/versions/0000000002", "datasets/d10/versions/0000000001",
        "datasets/d2/versions/0000000001", "p", "pa", "Z", "_x", "-y", ".z"]


@pytest.fixture
def filled(backend):
    for k in KEYS:
        assert backend.put_if_absent(k, k.encode()) is True
    return backend


@pytest.mark.parametrize("prefix", [
    "", "p", "pa", "pac", "packs", "packs/", "packs/a", "packs/ab", "packs/ab01", "packs/ab01.",
    "packs/ab01.pack", "packs/ab01.packx", "packs/abf", "packs/c", "packs2", "packs2/",
    "datasets/", "datasets/d1", "datasets/d1/", "datasets/d1/versions/", "datasets/d1/versions/0",
    "datasets/d1/v", "datasets/d2/meta/", "zzz", "nope/", "nope/deeper/", "c", "config",
    "config/", "Z", ".", ".z", "_", "-",
])
def test_list_prefix_sorted_and_filtered(filled, prefix):
    got = list(filled.list(prefix))
    assert got == sorted(k for k in KEYS if k.startswith(prefix))
    assert got == sorted(got, key=lambda k: k.encode())  # ascending byte order


def test_list_all_is_sorted_by_bytes(filled):
    assert list(filled.list()) == sorted(KEYS, key=lambda k: k.encode())
    assert list(filled.list("")) == list(filled.list())


@pytest.mark.parametrize("prefix", ["../", "..", "/", "//", "packs//", "/packs/", "../repo/",
                                    "../../", "packs/../", "a b", "\x00"])
def test_list_with_a_prefix_no_key_can_have_is_empty(filled, prefix):
    # and never reaches outside the backend (a local directory must not list its parent)
    assert list(filled.list(prefix)) == []


def test_list_does_not_show_deleted_keys(filled):
    filled.delete("packs/ab01.pack")
    filled.delete("config")
    expected = sorted(set(KEYS) - {"packs/ab01.pack", "config"})
    assert list(filled.list()) == expected
    assert list(filled.list("packs/ab")) == ["packs/ab01.idx", "packs/abff.pack"]


# -- invalid keys -------------------------------------------------------------------------
@pytest.mark.parametrize("key", INVALID_KEYS, ids=repr)
def test_invalid_keys_are_refused_by_every_operation(backend, key):
    ops = [
        lambda: backend.get(key),
        lambda: backend.get_range(key, 0, 1),
        lambda: backend.put_if_absent(key, b"x"),
        lambda: backend.delete(key),
        lambda: backend.exists(key),
    ]
    for op in ops:
        with pytest.raises(InvalidArgument) as info:
            op()
        assert info.value.code == "INVALID_ARGUMENT"
    assert list(backend.list()) == []


@pytest.mark.parametrize("key", INVALID_KEYS, ids=repr)
def test_check_key_refuses(key):
    with pytest.raises(InvalidArgument):
        check_key(key)


# -- concurrency --------------------------------------------------------------------------
def test_racing_put_if_absent_has_exactly_one_winner(make_backend):
    backend = make_backend()
    # SeaweedFS makes same-key losers wait in whole-second steps: race 4 writers there, in
    # 3 rounds (16 writers in 5 rounds elsewhere).
    on_s3 = isinstance(getattr(backend, "inner", backend), S3Backend)
    n = 4 if on_s3 else 16
    for round_ in range(3 if on_s3 else 5):
        backend = make_backend()
        barrier = threading.Barrier(n)
        results = [None] * n

        def put(i):
            barrier.wait()
            results[i] = backend.put_if_absent("versions/0000000001", b"writer %d " % i * 1000)

        threads = [threading.Thread(target=put, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results.count(True) == 1, results
        assert results.count(False) == n - 1
        winner = results.index(True)
        assert backend.get("versions/0000000001") == b"writer %d " % winner * 1000
        assert list(backend.list()) == ["versions/0000000001"]


def test_concurrent_writers_of_distinct_keys_all_succeed(backend):
    n, per = 8, 25

    def put(i):
        for j in range(per):
            assert backend.put_if_absent(f"w{i}/k{j:03d}", b"%d-%d" % (i, j)) is True

    threads = [threading.Thread(target=put, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    keys = list(backend.list())
    assert keys == sorted(f"w{i}/k{j:03d}" for i in range(n) for j in range(per))
    for i in range(n):
        for j in range(per):
            assert backend.get(f"w{i}/k{j:03d}") == b"%d-%d" % (i, j)


def test_reader_never_sees_a_partial_value(backend):
    size = 4 << 20
    values = [bytes([i]) * size for i in range(1, 6)]
    seen = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            for i in range(len(values)):
                try:
                    got = backend.get(f"big/{i}")
                except NotFound:
                    continue
                seen.append(i)
                assert got == values[i], f"partial read of big/{i}: {len(got)} bytes"
                if backend.exists(f"big/{i}"):
                    rng = backend.get_range(f"big/{i}", size - 10, 100)
                    assert rng == values[i][-10:]

    errors = []

    def guarded():
        try:
            reader()
        except BaseException as exc:  # surface the failure in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded) for _ in range(2)]
    for t in threads:
        t.start()
    for i, v in enumerate(values):
        assert backend.put_if_absent(f"big/{i}", v) is True
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert [backend.get(f"big/{i}") == v for i, v in enumerate(values)] == [True] * len(values)


# -- model-based: random operations against a dict ----------------------------------------
_segment = st.text(alphabet="ab.-_09", min_size=1, max_size=3).filter(lambda s: s not in (".", ".."))
_key = st.lists(_segment, min_size=1, max_size=3).map("/".join)


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_backend_matches_a_dict_model(name, tmp_path, request):
    counter = itertools.count()

    class Model(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            where = tmp_path / f"m{next(counter)}"
            where.mkdir()
            self.backend = BACKENDS[name](where, request)
            self.model = {}
            self.ever: set[str] = set()

        def _conflicts(self, key):
            # A local directory cannot hold both "a" and "a/b" (one would be a directory), and
            # SeaweedFS's filer may keep the directory "a" after "a/b" is deleted. cas never
            # lays keys out like that (no key is ever a prefix directory of another); keep the
            # model off that case, against every key it ever wrote.
            return any(k != key and (k.startswith(key + "/") or key.startswith(k + "/"))
                       for k in self.ever)

        @rule(key=_key, data=st.binary(max_size=20))
        def put(self, key, data):
            if self._conflicts(key):
                return
            created = self.backend.put_if_absent(key, data)
            assert created == (key not in self.model)
            self.model.setdefault(key, data)
            self.ever.add(key)

        @rule(key=_key)
        def delete(self, key):
            assert self.backend.delete(key) == (key in self.model)
            self.model.pop(key, None)

        @rule(key=_key)
        def get(self, key):
            if key in self.model:
                assert self.backend.get(key) == self.model[key]
                assert self.backend.exists(key)
            else:
                with pytest.raises(NotFound):
                    self.backend.get(key)
                assert not self.backend.exists(key)

        @rule(prefix=st.text(alphabet="ab.-_09/", max_size=5))
        def list_prefix(self, prefix):
            assert list(self.backend.list(prefix)) == sorted(
                k for k in self.model if k.startswith(prefix))

        @invariant()
        def listing(self):
            assert list(self.backend.list()) == sorted(self.model)

    Model.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)
    Model.TestCase().runTest()


# -- local directory specifics ------------------------------------------------------------
def _all_files(root):
    out = set()
    for dirpath, _, filenames in os.walk(root):
        for f in filenames:
            out.add(os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/"))
    return out


def test_local_leaves_no_temporary_files(tmp_path):
    backend = LocalBackend(str(tmp_path / "repo"))
    keys = [f"packs/{i:02x}.pack" for i in range(20)] + ["config", "datasets/a/meta/0000000001"]
    for k in keys:
        assert backend.put_if_absent(k, os.urandom(1000)) is True
    for k in keys[:5]:
        assert backend.put_if_absent(k, b"loser") is False  # a failed create leaves nothing
    assert list(backend.list()) == sorted(keys)
    # every file on disk is a key: no staging file survives a write, published or refused
    assert _all_files(backend.root) == set(keys)


def test_local_racing_writers_leave_no_temporary_files(tmp_path):
    backend = LocalBackend(str(tmp_path / "repo"))
    barrier = threading.Barrier(8)

    def put(i):
        barrier.wait()
        for j in range(10):
            backend.put_if_absent(f"k/{j}", b"%d" % i)

    threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    keys = {f"k/{j}" for j in range(10)}
    assert set(backend.list()) == keys
    assert _all_files(backend.root) == keys


def test_local_sweep_staging_deletes_only_old_staging_files(tmp_path):
    import time
    backend = LocalBackend(str(tmp_path / "repo"))
    backend.put_if_absent("k", b"v")
    staging = tmp_path / "repo" / "~tmp"
    (staging / "dead").write_bytes(b"left by a killed writer")
    os.utime(staging / "dead", (time.time() - 3600, time.time() - 3600))
    (staging / "live").write_bytes(b"a write in flight")
    assert backend.sweep_staging(time.time() - 60) == 1
    assert sorted(os.listdir(staging)) == ["live"]
    assert backend.get("k") == b"v"


def test_local_values_persist_across_instances(tmp_path):
    LocalBackend(str(tmp_path / "repo")).put_if_absent("a/b", b"durable")
    again = LocalBackend(str(tmp_path / "repo"))
    assert again.get("a/b") == b"durable"
    assert list(again.list()) == ["a/b"]
    assert again.put_if_absent("a/b", b"other") is False


def test_local_keys_are_files_under_the_root_only(tmp_path):
    (tmp_path / "outside.txt").write_bytes(b"secret")
    backend = LocalBackend(str(tmp_path / "repo"))
    backend.put_if_absent("inside", b"1")
    assert list(backend.list()) == ["inside"]
    assert list(backend.list("../")) == []
    assert list(backend.list("..")) == []
    with pytest.raises(InvalidArgument):
        backend.get("../outside.txt")


def test_cached_index_ranges_are_clamped_like_any_backend(tmp_path):
    from blake3 import blake3
    body = bytes(range(256)) * 4
    data = body + blake3(body).digest()  # an index ends with the BLAKE3 of what precedes it
    inner = MemoryBackend()
    inner.put_if_absent("packs/p.idx", data)
    cached = CachingBackend(inner, str(tmp_path / "cache"))
    assert cached.get_range("packs/p.idx", 1000, 2**32 - 1) == data[1000:]
    for offset, length in ((len(data), 1), (2**63, 10), (2**64 - 1, 2**32 - 1)):
        assert cached.get_range("packs/p.idx", offset, length) == b""
    assert cached.get_range("packs/p.idx", 3, 0) == b""
    with pytest.raises(NotFound):
        cached.get_range("packs/absent.idx", 2**63, 10)


def test_a_cached_index_deleted_while_it_is_read_reads_from_the_remote_or_is_not_found(
        tmp_path, monkeypatch):
    """Another thread's `delete` may unlink the local copy between the check that it exists
    and the open: the read then asks the remote (found in the concurrent erasure tests, as a
    bare FileNotFoundError)."""
    from blake3 import blake3
    body = b"index body " * 10
    data = body + blake3(body).digest()
    inner = MemoryBackend()
    inner.put_if_absent("packs/p.idx", data)
    cached = CachingBackend(inner, str(tmp_path / "cache"))
    assert cached.get("packs/p.idx") == data  # now cached locally
    local = cached._local("packs/p.idx")
    real_open = open

    def racing_open(path, *args, **kwargs):
        if path == local:
            os.unlink(local)  # as a concurrent delete() would, just before this open
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", racing_open)
    assert cached.get("packs/p.idx") == data
    monkeypatch.setattr("builtins.open", real_open)
    cached.get("packs/p.idx")  # cached again
    monkeypatch.setattr("builtins.open", racing_open)
    assert cached.get_range("packs/p.idx", 5, 10) == data[5:15]
    # deleted remotely too, while the local copy is still there: NotFound, never a bare
    # FileNotFoundError
    monkeypatch.setattr("builtins.open", real_open)
    cached.get("packs/p.idx")
    inner.delete("packs/p.idx")
    monkeypatch.setattr("builtins.open", racing_open)
    with pytest.raises(NotFound):
        cached.get("packs/p.idx")
