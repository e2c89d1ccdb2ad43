"""The local cache in front of a remote backend: the backend contract (on S3, as a remote
repository uses it), and the cached copies of indexes it keeps."""

import os

import pytest

from cas.errors import NotFound
from cas.storage.backends.cache import CachingBackend
from cas.storage.backends.memory import MemoryBackend
from cas.storage.backends.s3 import S3Backend
from support.backend_contract import BackendContract, fresh_dirs


@pytest.fixture
def make_backend(seaweed, tmp_path):
    where = fresh_dirs(tmp_path)
    return lambda: CachingBackend(S3Backend(seaweed.url()), str(where() / "cache"))


class TestCachingBackend(BackendContract):
    """Every test of the backend contract, on a CachingBackend in front of SeaweedFS."""

    # SeaweedFS makes same-key losers wait in whole-second steps: fewer racers, fewer rounds.
    RACERS, RACE_ROUNDS = 4, 3


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


def test_an_uncached_index_is_read_by_ranges_and_fetched_whole_on_demand(tmp_path, monkeypatch):
    """A new machine's first command reads the ranges its lookups need, not the whole of a
    large multi-pack index (issue 37); a machine that keeps looking up fetches it once,
    checked, and the next process maps it. (This index is small: WHOLE_BELOW at 0 makes it
    large, and FETCH_FRACTION at 1 fetches it once as many bytes as it holds came by ranges, as
    1/8 of a large one would.)"""
    import cas
    from cas.storage.backends import cache
    monkeypatch.setattr(cache, "FETCH_FRACTION", 1)
    monkeypatch.setattr(cache, "WHOLE_BELOW", 0)
    remote = MemoryBackend()
    repo = cas.Repository.create(remote)
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=[{"input": f"case {i}"} for i in range(300)])
    ids = repo.items("d", 1, limit=300).items
    inputs = {c: repo.case("d", 1, c).input for c in ids}

    class IndexReads:
        """The remote, counting what is read of its indexes: ranges and bytes, and wholes."""

        def __init__(self):
            self.ranges = self.bytes = self.wholes = 0

        def __getattr__(self, name):
            return getattr(remote, name)

        def get(self, key):
            data = remote.get(key)
            if key.endswith((".idx", ".midx")):
                self.wholes += 1
                self.bytes += len(data)
            return data

        def get_range(self, key, offset, length):
            data = remote.get_range(key, offset, length)
            if key.endswith((".idx", ".midx")):
                self.ranges += 1
                self.bytes += len(data)
            return data

    def fresh(where):
        reads = IndexReads()
        return cas.Repository(CachingBackend(reads, str(tmp_path / where))), reads

    cold, reads = fresh("cache")
    assert cold.case("d", 1, ids[0]).input == inputs[ids[0]]
    assert reads.wholes == 0 and 1 <= reads.ranges <= 8  # (fan-out, window, row) per lookup
    assert not [f for f in os.listdir(tmp_path / "cache" / "packs")
                if not f.endswith(".ranges")]  # nothing fetched whole: a few ranges were enough
    # the count is the machine's, not the process's: a few light commands fill the cache
    second, second_reads = fresh("cache")
    for case_id in ids[1:10]:
        assert second.case("d", 1, case_id).input == inputs[case_id]
    assert second_reads.wholes == 1
    assert not [f for f in os.listdir(tmp_path / "cache" / "packs") if f.endswith(".ranges")]
    cold, reads = fresh("other")  # a process of its own that looks up many: fetched once
    for case_id in ids[:40]:
        assert cold.case("d", 1, case_id).input == inputs[case_id]
    assert reads.wholes == 1 and os.listdir(tmp_path / "other" / "packs")
    then = (reads.ranges, reads.wholes)
    for case_id in ids[40:80]:
        assert cold.case("d", 1, case_id).input == inputs[case_id]
    assert (reads.ranges, reads.wholes) == then  # served from the local copy
    warm, warm_reads = fresh("other")  # the next process maps the cached copy
    assert warm.case("d", 1, ids[5]).input == inputs[ids[5]]
    assert (warm_reads.ranges, warm_reads.wholes) == (0, 0)
