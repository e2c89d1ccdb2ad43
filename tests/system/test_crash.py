"""Crash safety: a writer killed anywhere, or failing at any write, leaves no version pointing at
nothing, and every version it reported sealed is intact."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

import cas
from cas.storage import store as storemod
from cas.storage.backends.memory import MemoryBackend
from cas.storage.tree import Trie

SEALER = r"""
import random, sys
import cas
path, name, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(seed)
repo = cas.open(path)
print("READY", flush=True)
i = 0
while True:
    base = repo.head(name)
    removes = []
    if base and rnd.random() < 0.5:
        removes = repo.items(name, base, limit=rnd.randint(1, 20)).items
    adds = [{"input": f"s{seed}-{i}-{j}", "output": "x" * rnd.randint(0, 3000),
             "steps": [{"type": "message", "content": str(j)}]}
            for j in range(rnd.randint(1, 80))]
    rec = repo.commit(name, base=base, add=adds, remove=removes)
    print(f"SEALED {rec.number} {rec.content_digest} {rec.item_count}", flush=True)
    i += 1
"""
from support import ROOT
from support.sample_cases import read_all_items


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def check_intact(path, sealed: dict[int, tuple[str, int]], only=None, verified=None):
    """fsck finds no error, and the reported versions (those in `only`, if given) read back
    exactly as sealed."""
    repo = cas.open(str(path))
    report = repo.fsck()
    errors = [p for p in report.problems if p.severity == "error"]
    assert not errors, errors
    head = repo.head("ds")
    assert repo.refs.version_numbers("ds") == list(range(1, head + 1))
    seen_cases: set[str] = set()
    for number, (digest, count) in sealed.items():
        assert number <= head
        if only is not None and number not in only:
            continue
        record = repo.version("ds", number)
        assert (record.content_digest, record.item_count) == (digest, count)
        ids = read_all_items(repo, "ds", number)
        assert len(ids) == count == len(set(ids))
        # The ids read back rebuild exactly the sealed root (computed here, in memory).
        assert Trie(lambda d: pytest.fail("in-memory build must not load")).build(ids) == digest
        seen_cases.update(ids)
    verified = set() if verified is None else verified
    for cid in seen_cases - verified:  # every case of a reported version is stored and verifies
        assert repo.store.get_bytes(cid)[0] == "case"
        verified.add(cid)
    return repo


def test_sigkill_while_sealing_leaves_reported_versions_intact(location):
    repo = cas.init(location)
    repo.create_dataset("ds", admission="direct")
    sealed: dict[int, tuple[str, int]] = {}
    rnd = random.Random(1234)
    # (seconds after spawn, or None to wait for READY and then a random short delay)
    plan = [0.0, 0.03, 0.08, None, None, None, None, None, None]
    killed_while_sealing = 0
    verified: set[str] = set()
    for it, delay in enumerate(plan):
        child = subprocess.Popen([sys.executable, "-c", SEALER, location, "ds", str(it)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
        try:
            if delay is not None:
                time.sleep(delay)
            else:
                assert child.stdout.readline() == b"READY\n"
                time.sleep(rnd.uniform(0.0, 0.3))
        finally:
            child.send_signal(signal.SIGKILL)
            out, err = child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL, err.decode()
        lines = out.decode().split("\n")[:-1]  # only complete lines (a kill may cut the last)
        new = set()
        for line in lines:
            if line.startswith("SEALED "):
                _, n, digest, count = line.split()
                assert int(n) not in sealed
                sealed[int(n)] = (digest, int(count))
                new.add(int(n))
        if delay is None:
            killed_while_sealing += 1
        repo = check_intact(location, sealed, only=new, verified=verified)
    assert killed_while_sealing >= 5 and len(sealed) >= 3, sealed
    # The repository is still writable after every crash.
    head = repo.head("ds")
    rec = repo.commit("ds", base=head, add=[{"input": "after the crashes"}])
    assert rec.number == head + 1
    sealed[rec.number] = (rec.content_digest, rec.item_count)
    check_intact(location, sealed)


# -- deterministic fault injection ----------------------------------------------------------
class InjectedFault(Exception):
    pass


class FaultyBackend:
    """Fails the `fail_at`-th put_if_absent: before writing it ("before", a crash or an I/O
    error) or after (the write landed but the caller never heard, as a lost reply)."""

    def __init__(self, inner, fail_at: int | None = None, mode: str = "before") -> None:
        self.inner, self.fail_at, self.mode, self.url = inner, fail_at, mode, inner.url
        self.puts: list[str] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def put_if_absent(self, key, data):
        self.puts.append(key)
        if len(self.puts) == self.fail_at:
            if self.mode == "before":
                raise InjectedFault(key)
            self.inner.put_if_absent(key, data)
            raise InjectedFault(key)
        return self.inner.put_if_absent(key, data)


@pytest.fixture(params=[1500, None], ids=["small-packs", "one-pack"])
def pack_size(request, monkeypatch):
    """Packs of a few KB (one commit writes several packs and indexes), or the default size
    (one pack, flushed only when the tree is complete)."""
    if request.param is not None:
        monkeypatch.setattr(storemod.ObjectStore, "writer",
                            lambda self, lease=None: storemod.PackWriter(
                                self, max_bytes=request.param, lease=lease))
    return request.param


def _cases(tag, n):
    return [{"input": f"{tag}-{i}", "output": "y" * 100} for i in range(n)]


def _seeded():
    inner = MemoryBackend()
    repo = cas.Repository.create(inner)
    repo.create_dataset("ds", admission="direct")
    repo.commit("ds", base=None, add=_cases("v1", 90))   # an inner node, so paths are rewritten
    repo.commit("ds", base=1, add=_cases("v2", 10), remove=[cas.encode_case(c).case_id
                                                            for c in _cases("v1", 5)])
    return inner


@pytest.mark.parametrize("mode", ["before", "after"])
def test_fault_at_every_write_of_a_commit(pack_size, mode):
    adds = _cases("new", 40)
    removes = sorted(cas.encode_case(c).case_id for c in _cases("v1", 30)[10:20])
    expected_root = None
    # Count the writes of one clean commit (and learn the root it seals).
    probe = FaultyBackend(_seeded())
    rec = cas.Repository(probe).commit("ds", base=2, add=adds, remove=removes)
    expected_root, expected_count = rec.content_digest, rec.item_count
    positions = len(probe.puts)
    # several packs (or one), their indexes, then the version record
    assert positions >= (5 if pack_size else 3), probe.puts
    assert probe.puts[-1] == "datasets/ds/versions/0000000003"
    for k in range(1, positions + 1):
        inner = _seeded()
        before_keys = set(inner.list(""))
        faulty = FaultyBackend(inner, fail_at=k, mode=mode)
        repo = cas.Repository(faulty)
        with pytest.raises(InjectedFault):
            repo.commit("ds", base=2, add=adds, remove=removes)
        fresh = cas.Repository(inner)
        report = fresh.fsck()
        assert report.ok, (k, report.problems)
        assert all(p.severity == "notice" for p in report.problems)
        version_landed = mode == "after" and k == positions
        assert fresh.head("ds") == (3 if version_landed else 2)
        # Only objects with their person-index records (and a lone version record if its
        # write landed) were added; the writer's lease is gone.
        new_keys = set(inner.list("")) - before_keys
        assert all(key.startswith(("packs/", "persons/")) for key in new_keys
                   if key != "datasets/ds/versions/0000000003"), new_keys
        for n in range(1, fresh.head("ds") + 1):
            v = fresh.version("ds", n)
            assert len(read_all_items(fresh, "ds", n)) == v.item_count
        # Retrying succeeds, on the same handle and on a fresh one, and seals the same set.
        for handle in (repo, cas.Repository(inner)):
            if version_landed:
                record = handle.version("ds", 3)
            else:
                record = handle.commit("ds", base=2, add=adds, remove=removes)
            assert (record.number, record.content_digest, record.item_count) == \
                (3, expected_root, expected_count)
            inner = _reset_version(inner, version_landed)
        final = cas.Repository(inner)
        assert final.fsck().ok


def _reset_version(inner, keep):
    """Drop version 3 again (test-only) so the second handle can retry the same commit."""
    if not keep:
        inner.delete("datasets/ds/versions/0000000003")
    return inner


def test_fault_on_local_directory(tmp_path):
    """The same on real files: an interrupted write leaves no partial key behind."""
    repo = cas.init(str(tmp_path))
    repo.create_dataset("ds", admission="direct")
    repo.commit("ds", base=None, add=_cases("v1", 20))
    for k, mode in ((1, "before"), (2, "before"), (2, "after"), (3, "before")):
        faulty = FaultyBackend(repo.backend, fail_at=k, mode=mode)
        with pytest.raises(InjectedFault):
            cas.Repository(faulty).commit("ds", base=1, add=_cases(f"x{k}{mode}", 30))
        fresh = cas.open(str(tmp_path))
        assert fresh.head("ds") == 1
        report = fresh.fsck()
        assert report.ok, report.problems
    rec = cas.open(str(tmp_path)).commit("ds", base=1, add=_cases("ok", 3))
    assert rec.number == 2 and rec.item_count == 23
    assert cas.open(str(tmp_path)).fsck().ok
