"""The local directory backend: the backend contract, and what a directory adds (staging files
that never survive a write, keys that are files under the root and nowhere else)."""

import os
import threading

import pytest

from cas.errors import InvalidArgument
from cas.storage.backends.local import LocalBackend
from support.backend_contract import BackendContract, fresh_dirs


@pytest.fixture
def make_backend(tmp_path):
    where = fresh_dirs(tmp_path)
    return lambda: LocalBackend(str(where() / "repo"))


class TestLocalBackend(BackendContract):
    """Every test of the backend contract, on a LocalBackend."""


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
