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
