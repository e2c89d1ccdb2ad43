"""Concurrent writers: several OS processes sealing into one dataset never share or lose a number."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import cas
from cas.storage.backends.local import LocalBackend
from support import ROOT

WORKER = r"""
import json, os, sys, time
import cas
path, name, wid, k, go, stale, retry, tag, fixed = sys.argv[1:10]
k, stale, retry, fixed = int(k), stale == "1", retry == "1", int(fixed)
repo = cas.open(path)
while not os.path.exists(go):      # start together, to collide as much as possible
    time.sleep(0.0005)
for i in range(k):
    adds = [{"input": f"{tag}w{wid}-c{i}-{j}", "metadata": {"worker": wid}} for j in range(3)]
    base = 0 if stale else fixed if fixed >= 0 else repo.head(name)
    try:
        rec = repo.commit(name, base=base, add=adds, retry=retry, author=f"w{wid}")
    except cas.VersionConflict as exc:
        print(json.dumps({"conflict": exc.head, "base": exc.base, "code": exc.code}), flush=True)
        continue
    print(json.dumps({"number": rec.number, "i": i}), flush=True)
"""


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_workers(path, name, workers, k, *, stale=(), retry=True, tmp, tag="", base=-1):
    """Start `workers` processes that wait for one signal, then each seal `k` versions: from
    base 0 if in `stale`, else from `base` if given, else from the head they read."""
    go = tmp / f"go-{time.monotonic_ns()}"
    procs = [subprocess.Popen(
        [sys.executable, "-c", WORKER, str(path), name, str(w), str(k), str(go),
         "1" if w in stale else "0", "1" if retry else "0", tag, str(base)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), text=True)
        for w in range(workers)]
    try:
        time.sleep(0.3)  # let every interpreter start and reach the barrier
        go.write_text("go")
        results = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            results.append([json.loads(line) for line in out.splitlines()])
        return results
    finally:
        for p in procs:  # never leave a worker behind, whatever failed
            if p.poll() is None:
                p.kill()
                p.wait()


def test_processes_sealing_into_one_dataset(location, tmp_path):
    repo = cas.init(location)
    repo.create_dataset("shared", admission="direct")
    workers, k = 4, 8
    # Two workers always start from the stale base 0, so every one of their commits goes
    # through the retry path; the other two start from the head they just read.
    results = run_workers(location, "shared", workers, k, stale={1, 3}, tmp=tmp_path)
    total = workers * k

    numbers = [r["number"] for res in results for r in res]
    assert sorted(numbers) == list(range(1, total + 1)), "numbers shared or lost"
    for res in results:  # a worker's own versions are sealed in the order it made them
        assert [r["i"] for r in res] == list(range(k))
        mine = [r["number"] for r in res]
        assert mine == sorted(mine)

    repo = cas.open(location)
    assert repo.head("shared") == total
    assert repo.refs.version_numbers("shared") == list(range(1, total + 1))
    expected = {cas.encode_case({"input": f"w{w}-c{i}-{j}", "metadata": {"worker": str(w)}}).case_id
                for w in range(workers) for i in range(k) for j in range(3)}
    for n in range(1, total + 1):
        v = repo.version("shared", n)
        assert v.parent == (n - 1 or None)
        assert v.item_count == 3 * n
        assert (v.added, v.removed) == (3, 0)
        if n > 1:  # each version adds exactly one worker's one commit to its parent
            d = repo.diff("shared", n - 1, n)
            assert d.removed == [] and len(d.added) == 3
            authors = {repo.case("shared", n, c).metadata["worker"] for c in d.added}
            assert authors == {v.author[1:]}
    final, after = [], None
    while True:
        page = repo.items("shared", total, after=after, limit=50)
        final += page.items
        if page.next_cursor is None:
            break
        after = page.next_cursor
    assert set(final) == expected and len(final) == len(expected)
    report = repo.fsck()
    assert report.ok, report.problems
    assert report.versions == total


def test_racing_without_retry_exactly_one_wins(location, tmp_path):
    repo = cas.init(location)
    repo.create_dataset("race", admission="direct")
    repo.commit("race", base=None, add=[{"input": "seed"}])
    for rnd in range(3):
        base = repo.head("race")
        results = run_workers(location, "race", 2, 1, retry=False, tmp=tmp_path, tag=f"r{rnd}",
                              base=base)
        flat = [r for res in results for r in res]
        wins = [r for r in flat if "number" in r]
        losses = [r for r in flat if "conflict" in r]
        assert len(wins) == 1 and len(losses) == 1, flat
        assert wins[0]["number"] == base + 1
        assert losses[0] == {"conflict": base + 1, "base": base, "code": "ABORTED"}
        assert repo.head("race") == base + 1
    assert repo.fsck().ok


class RivalFirst:
    """Runs `rival()` just before this backend publishes its first version record, so the
    rival wins the number after this writer has already checked its base and stored objects."""

    def __init__(self, inner, rival):
        self.inner, self.rival, self.url = inner, rival, inner.url

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def put_if_absent(self, key, data):
        if "/versions/" in key and self.rival is not None:
            rival, self.rival = self.rival, None
            rival()
        return self.inner.put_if_absent(key, data)


@pytest.mark.parametrize("retry", [False, True])
def test_lost_append_race(tmp_path, retry):
    cas.init(str(tmp_path)).create_dataset("ds", admission="direct")
    root = str(tmp_path / ".cas")
    first = cas.Repository(LocalBackend(root))
    first.commit("ds", base=None, add=[{"input": "a"}, {"input": "b"}])
    a_id = cas.encode_case({"input": "a"}).case_id
    rival = cas.Repository(LocalBackend(root))
    sealed = []
    loser = cas.Repository(RivalFirst(LocalBackend(root), lambda: sealed.append(
        rival.commit("ds", base=1, add=[{"input": "rival"}]))))
    if not retry:
        with pytest.raises(cas.VersionConflict) as info:
            loser.commit("ds", base=1, add=[{"input": "mine"}], remove=[a_id])
        assert (info.value.base, info.value.head) == (1, 2)
        assert first.head("ds") == 2
        assert first.version("ds", 2) == sealed[0]
    else:
        rec = loser.commit("ds", base=1, add=[{"input": "mine"}], remove=[a_id], retry=True)
        assert (rec.number, rec.parent) == (3, 2)
        items = set(first.items("ds", 3).items)
        assert items == {cas.encode_case({"input": x}).case_id for x in ("b", "rival", "mine")}
        assert (rec.added, rec.removed, rec.item_count) == (1, 1, 3)
    report = first.fsck()
    assert report.ok, report.problems


def test_retry_after_the_rival_removed_the_same_case(tmp_path):
    cas.init(str(tmp_path)).create_dataset("ds", admission="direct")
    root = str(tmp_path / ".cas")
    first = cas.Repository(LocalBackend(root))
    first.commit("ds", base=None, add=[{"input": "a"}, {"input": "b"}])
    a_id = cas.encode_case({"input": "a"}).case_id
    rival = cas.Repository(LocalBackend(root))
    loser = cas.Repository(RivalFirst(LocalBackend(root),
                                      lambda: rival.commit("ds", base=1, remove=[a_id])))
    with pytest.raises(cas.NotFound):
        loser.commit("ds", base=1, remove=[a_id], retry=True)
    assert first.head("ds") == 2
    assert first.fsck().ok
