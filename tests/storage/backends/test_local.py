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


# -- what the file system refuses ----------------------------------------------------------------
NOBODY = 65534


def _unprivileged(call):
    """`call()` as a user the file modes bind (root is never refused: a forked child drops to
    `nobody` first). Returns what it returned or (type name, code, message, fields) of a
    CasError it raised."""
    import pickle

    from cas.errors import CasError

    def outcome():
        try:
            return call()
        except CasError as exc:
            return type(exc).__name__, exc.code, exc.message, exc.fields
        except Exception as exc:  # (what no CasError says: reported, never lost in the child)
            return type(exc).__name__, None, str(exc), {"key": None}
    if os.geteuid() != 0:
        return outcome()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(write, pickle.dumps(outcome()))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


@pytest.fixture
def shared_dir():
    """A directory any user may reach (the tests' own scratch space is private to root)."""
    import shutil
    import tempfile
    where = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    os.chmod(where, 0o755)
    yield where
    for dirpath, dirs, _ in os.walk(where):
        for d in dirs:
            os.chmod(os.path.join(dirpath, d), 0o755)
    shutil.rmtree(where)


def test_a_read_only_directory_is_permission_denied_on_a_write_not_unavailable(shared_dir):
    root = os.path.join(shared_dir, "repo")
    backend = LocalBackend(root)
    assert backend.put_if_absent("datasets/evals/meta/0000000001", b"kept")
    for dirpath, dirs, _ in os.walk(root):
        os.chmod(dirpath, 0o555)  # read-only: readable, nothing can be created in it
    assert _unprivileged(lambda: backend.get("datasets/evals/meta/0000000001")) == b"kept"
    for write in (lambda: backend.put_if_absent("datasets/evals/meta/0000000002", b"new"),
                  lambda: backend.replace("datasets/evals/meta/0000000001", b"new"),
                  lambda: backend.put_if_absent("packs/p.pack", b"new"),
                  lambda: backend.delete("datasets/evals/meta/0000000001")):
        name, code, message, fields = _unprivileged(write)
        assert (name, code) == ("PermissionDenied", "PERMISSION_DENIED"), message
        assert message.startswith("permission denied: cannot ") and root in message
        assert fields["location"] == root and fields["key"] in message
    assert backend.get("datasets/evals/meta/0000000001") == b"kept"


def test_a_file_or_directory_it_may_not_read_is_permission_denied_never_absent(shared_dir):
    """A listing that skipped a directory it may not read would pass its keys off as absent
    (fsck would say "ok" without reading them; gc would take them for garbage)."""
    root = os.path.join(shared_dir, "repo")
    backend = LocalBackend(root)
    backend.put_if_absent("datasets/evals/meta/0000000001", b"secret")
    backend.put_if_absent("packs/p.pack", b"pack")
    os.chmod(os.path.join(root, "packs", "p.pack"), 0o000)
    os.chmod(os.path.join(root, "datasets", "evals"), 0o000)
    for call, key in ((lambda: backend.get("packs/p.pack"), "packs/p.pack"),
                      (lambda: backend.get_range("packs/p.pack", 0, 2), "packs/p.pack"),
                      (lambda: list(backend.list("")), ""),
                      (lambda: list(backend.list("datasets/")), "datasets/"),
                      (lambda: backend.modified("datasets/evals/meta/0000000001"),
                       "datasets/evals/meta/0000000001")):
        name, code, message, fields = _unprivileged(call)
        assert (name, code, fields["key"]) == ("PermissionDenied", "PERMISSION_DENIED", key)


def test_a_held_file_reads_as_its_bytes_after_deletion_and_maps_nothing(tmp_path):
    """`map` (how pack and log indexes are probed) holds the file open and reads each slice
    with pread: the same bytes as slicing the file's bytes, clamped at its end, still there
    once the key is deleted, and no page of it in the process's memory map (a mapped
    index's touched pages stayed resident: most of a 48 MB index at 1M cases)."""
    backend = LocalBackend(str(tmp_path / "repo"))
    data = os.urandom(3 * 4096 + 17)
    backend.put_if_absent("packs/ab.idx", data)
    backend.put_if_absent("packs/empty.idx", b"")
    held = backend.map("packs/ab.idx")
    assert backend.map("packs/empty.idx") == b""
    spans = [(0, 0), (0, 12), (4000, 4200), (len(data) - 5, len(data) + 100),
             (len(data), len(data) + 8), (len(data) + 50, len(data) + 60), (7, 3), (0, None)]
    assert len(held) == len(data)
    assert [held[a:b] for a, b in spans] == [data[a:b] for a, b in spans]
    if os.path.exists("/proc/self/maps"):
        with open("/proc/self/maps") as f:
            assert os.path.join(backend.root, "packs", "ab.idx") not in f.read()
    assert backend.delete("packs/ab.idx")
    assert held[100:200] == data[100:200]  # a reader that opened it keeps its answers
    with pytest.raises(ValueError):
        held[0:10:2]
