"""A large JSON Lines file committed by two processes (cas/repo/ingest.py): the same version as one
process makes, the same refusals (numbered as in the whole file), nothing sealed on failure."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas.format.keys import PACKS, parse_multi_index_key
from cas.repo import ingest
from cas.storage.pack import IndexReader
from support.lifecycle import run_obj


@pytest.fixture
def split_small(monkeypatch):
    """Split files of any size, and count the helper processes started."""
    monkeypatch.setattr(ingest, "SPLIT_MIN_BYTES", 1)
    monkeypatch.delenv("CAS_INGEST_PROCESSES", raising=False)
    started = []
    real = ingest._start

    def counting(split, stderr):
        started.append(split)
        return real(split, stderr)
    monkeypatch.setattr(ingest, "_start", counting)
    return started


def write_cases(path, cases: list[dict], bad: dict[int, bytes] | None = None) -> str:
    """A JSON Lines file of `cases`; `bad`: line number -> bytes put there instead."""
    lines = [json.dumps(c).encode() for c in cases]
    for number, text in (bad or {}).items():
        lines[number - 1] = text
    path.write_bytes(b"\n".join(lines) + b"\n")
    return str(path)


def commit_file(repo, name: str, path: str):
    with open(path, "rb") as f:
        return repo.commit(name, base=None, add=cas.read_cases_jsonl(f, "cases.jsonl"))


def in_one_process(monkeypatch, fn):
    with monkeypatch.context() as m:
        m.setenv("CAS_INGEST_PROCESSES", "1")
        return fn()


def refusal(fn) -> cas.CasError:
    with pytest.raises(cas.CasError) as info:
        fn()
    return info.value


def test_two_processes_seal_the_version_one_process_seals(location, tmp_path, split_small,
                                                          monkeypatch):
    """On a local directory and on S3: the same root and count, both halves' cases readable,
    one multi-pack index over the packs of both processes, fsck clean."""
    cases = [{"input": f"q{i}", "output": i % 7, "metadata": {"t": "t" * (i % 3)}}
             for i in range(300)]
    path = write_cases(tmp_path / "cases.jsonl", cases)
    repo = cas.init(location)
    repo.create_dataset("split", admission="direct")
    repo.create_dataset("one", admission="direct")
    split = commit_file(repo, "split", path)
    assert len(split_small) == 1 and split_small[0].start > 0
    one = in_one_process(monkeypatch, lambda: commit_file(repo, "one", path))
    assert len(split_small) == 1  # the second commit used one process
    assert (split.content_digest, split.item_count) == (one.content_digest, 300)
    fresh = cas.open(location)
    ids = [cas.encode_case(c).case_id for c in cases]
    assert [fresh.case("split", 1, i).input for i in (ids[0], ids[150], ids[-1])] == \
        ["q0", "q150", "q299"]
    multi = [k for k in fresh.backend.list(PACKS) if parse_multi_index_key(k)]
    covered = {p for k in multi for p in IndexReader(fresh.backend, k).packs}
    assert len(covered) >= 2  # the helper's pack and this process's
    assert fresh.fsck().ok


def test_this_half_is_stored_before_the_helper_is_waited_for(tmp_path, split_small,
                                                             monkeypatch):
    """The committing process writes the packs of its own half before it waits for the
    helper (the helper started later): by then the first line's case is published. Only the
    tree and its small pack are left for after the helper's end."""
    repo = cas.init(str(tmp_path / "r"))
    repo.create_dataset("d", admission="direct")
    cases = [{"input": f"q{i}"} for i in range(200)]
    first = bytes.fromhex(cas.encode_case(cases[0]).case_id[3:])
    published = []
    start = ingest._start  # (split_small's, counting)

    def watched(split, stderr):
        helper = start(split, stderr)
        communicate = helper.communicate

        def waiting():
            published.append(any(IndexReader(repo.backend, k).lookup(first) is not None
                                 for k in repo.backend.list(PACKS) if k.endswith(".idx")))
            return communicate()
        helper.communicate = waiting
        return helper
    monkeypatch.setattr(ingest, "_start", watched)
    rec = commit_file(repo, "d", write_cases(tmp_path / "cases.jsonl", cases))
    assert published == [True] and len(split_small) == 1
    assert rec.item_count == 200 and repo.fsck().ok


def test_the_split_falls_at_a_line_boundary_and_loses_no_line(tmp_path, split_small):
    """Lines of every length around the middle (one far longer than the rest); duplicates
    across the halves are one case."""
    cases = [{"input": "x" * (i * 37 % 500)} for i in range(120)] + \
        [{"input": "y" * 100_000}] + [{"input": f"dup {i % 10}"} for i in range(60)]
    path = write_cases(tmp_path / "cases.jsonl", cases + cases[:30])
    repo = cas.init(str(tmp_path / "r"))
    repo.create_dataset("d", admission="direct")
    rec = commit_file(repo, "d", path)
    assert len(split_small) == 1
    unique = {cas.encode_case(c).case_id for c in cases}
    assert rec.item_count == len(unique)
    assert set(repo.items("d", 1, limit=500).items) == unique


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 40), min_size=1, max_size=60), st.integers(0, 2**16))
def test_deterministic_whatever_the_split(tmp_path_factory, split_small, sizes, salt):
    """Any file: two processes seal the root one process would (a version is its set)."""
    cases = [{"input": f"{salt}-{n}-" + "z" * n} for n in sizes]
    d = tmp_path_factory.mktemp("p")
    path = write_cases(d / "cases.jsonl", cases)
    repo = cas.init(str(d / "r"))
    repo.create_dataset("d", admission="direct")
    rec = commit_file(repo, "d", path)
    mem = cas.Repository.create(cas.storage.backends.memory.MemoryBackend())
    mem.create_dataset("d", admission="direct")
    expected = mem.commit("d", base=None, add=cases)
    assert (rec.content_digest, rec.item_count) == (expected.content_digest, expected.item_count)


@pytest.mark.parametrize("where", ["first half", "second half"])
def test_a_bad_line_is_refused_as_one_process_refuses_it(tmp_path, split_small, monkeypatch,
                                                         where):
    cases = [{"input": f"q{i}"} for i in range(200)]
    number = 40 if where == "first half" else 170
    path = write_cases(tmp_path / "cases.jsonl", cases, {number: b'{"input": NaN}'})
    repo = cas.init(str(tmp_path / "r"))
    repo.create_dataset("d", admission="direct")
    split = refusal(lambda: commit_file(repo, "d", path))
    one = in_one_process(monkeypatch, lambda: refusal(lambda: commit_file(repo, "d", path)))
    assert len(split_small) == 1
    assert (split.code, split.message, split.fields) == (one.code, one.message, one.fields)
    assert split.message.startswith(f"cases.jsonl line {number}: ")
    assert split.fields["line"] == number
    assert repo.head("d") == 0 and repo.fsck().ok  # nothing sealed; only garbage packs


def test_an_erased_person_in_the_second_half_is_refused(tmp_path, split_small, monkeypatch):
    repo = cas.init(str(tmp_path / "r"))
    repo.import_runs([run_obj("a-1", 1, person="alice@example.org")])
    repo.erase("alice@example.org", repo.erase("alice@example.org")["confirm_token"])
    cases = [{"input": f"q{i}"} for i in range(100)]
    cases[80] = {"input": "hers", "person": "alice@example.org"}
    path = write_cases(tmp_path / "cases.jsonl", cases)
    repo.create_dataset("d", admission="direct")
    split = refusal(lambda: commit_file(repo, "d", path))
    one = in_one_process(monkeypatch, lambda: refusal(lambda: commit_file(repo, "d", path)))
    assert split.reason == one.reason == "PERSON_ERASED_BEFORE"
    assert split.message == one.message and split.fields == one.fields
    assert repo.head("d") == 0
    store = cas.open(str(tmp_path / "r")).context.store
    hers = bytes.fromhex(cas.encode_case(cases[80]).case_id[3:])
    assert store.missing({hers}, store.indexes()) == {hers}  # her case was never stored
    assert len(split_small) == 1


def test_a_helper_that_dies_leaves_the_rest_to_the_commit(tmp_path, split_small, monkeypatch):
    """A helper that ends without an answer (killed, out of memory, unable to start): a
    warning names its status and message, and this process stores the second half itself:
    the same version."""
    script = tmp_path / "dies.sh"
    script.write_text("#!/bin/sh\necho 'out of luck' >&2\nexit 3\n")
    script.chmod(0o755)
    cases = [{"input": i} for i in range(50)]
    path = write_cases(tmp_path / "cases.jsonl", cases)
    repo = cas.init(str(tmp_path / "r"))
    repo.create_dataset("d", admission="direct")
    with monkeypatch.context() as m:
        m.setattr(ingest.sys, "executable", str(script))
        with pytest.warns(RuntimeWarning, match=r"status 3 \(out of luck\)"):
            rec = commit_file(repo, "d", path)
    assert len(split_small) == 1
    mem = cas.Repository.create(cas.storage.backends.memory.MemoryBackend())
    mem.create_dataset("d", admission="direct")
    assert rec.content_digest == mem.commit("d", base=None, add=cases).content_digest
    assert rec.item_count == 50 and repo.fsck().ok


def test_what_is_not_split(tmp_path, monkeypatch):
    """Small files, text streams, lines given as a list, a memory repository, and
    CAS_INGEST_PROCESSES=1 are read by one process."""
    monkeypatch.delenv("CAS_INGEST_PROCESSES", raising=False)
    path = write_cases(tmp_path / "cases.jsonl", [{"input": i} for i in range(50)])
    local = cas.init(str(tmp_path / "r")).backend
    mem = cas.Repository.create(cas.storage.backends.memory.MemoryBackend()).backend
    with open(path, "rb") as f:
        assert ingest.split_point(cas.read_cases_jsonl(f), local) is None  # below the size
        monkeypatch.setattr(ingest, "SPLIT_MIN_BYTES", 1)
        assert ingest.split_point(cas.read_cases_jsonl(f), local) is not None
        assert ingest.split_point(cas.read_cases_jsonl(f), mem) is None
        assert ingest.split_point(cas.read_cases_jsonl(list(f)), local) is None
        monkeypatch.setenv("CAS_INGEST_PROCESSES", "1")
        assert ingest.split_point(cas.read_cases_jsonl(f), local) is None
    with open(path, "r") as f:
        monkeypatch.delenv("CAS_INGEST_PROCESSES")
        assert ingest.split_point(cas.read_cases_jsonl(f), local) is None


def _running(pid: int) -> bool:
    """Whether process `pid` runs (a zombie left for a reaper does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_helper_does_not_outlive_the_commit(tmp_path):
    """A helper whose commit's process is killed ends at once, even while it waits to read:
    its writes are covered by that process's lease alone, and once that is gone an erasure may
    start (a pack written after it could name the person)."""
    repo = cas.init(str(tmp_path / "r"))
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)  # opening it blocks the helper until someone writes: no one will
    script = (
        "import os, signal, tempfile\n"
        "from cas.repo import ingest\n"
        f"split = ingest.Split(location={repo.backend.root!r}, path={str(fifo)!r}, start=0,\n"
        "    source='x', person_key=None, erased={}, avoid_packs=[], max_bytes=1 << 20,\n"
        "    parent=os.getpid())\n"
        "helper = ingest._start(split, tempfile.TemporaryFile())\n"
        "print(helper.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(cas.__file__)))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=60)
    pid = int(done.stdout.split()[0])
    try:
        deadline = time.monotonic() + 10
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(pid)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
