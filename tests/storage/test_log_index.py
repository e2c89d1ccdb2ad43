"""The keyed indexes of the run and review logs (docs/format.md 8.2): a fresh process resolves
ids in a few small reads; lookups always agree with reading the logs whole, through erasures,
lost segments, gc and copies cut short."""

from __future__ import annotations

import collections

import pytest
from blake3 import blake3
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import cas
from cas.digest import log_index_key
from cas.errors import CorruptData, UnsupportedFormat
from cas.repo import reviews, runs
from cas.storage import log_index
from cas.storage.backends.memory import MemoryBackend
from support import ROOT
from support.lifecycle import REVIEWER, run_obj

DOC = ROOT / "docs" / "format.md"


class Counting:
    """A backend that counts calls and bytes read, and which keys were read whole."""

    def __init__(self, inner) -> None:
        self.inner, self.calls, self.read = inner, collections.Counter(), 0
        self.whole: list[str] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def get(self, key):
        self.calls["get"] += 1
        data = self.inner.get(key)
        self.whole.append(key)
        self.read += len(data)
        return data

    def get_range(self, key, offset, length):
        self.calls["get_range"] += 1
        data = self.inner.get_range(key, offset, length)
        self.read += len(data)
        return data

    def list(self, prefix=""):
        self.calls["list"] += 1
        return self.inner.list(prefix)

    def exists(self, key):
        self.calls["exists"] += 1
        return self.inner.exists(key)


def import_batches(repo, batches: int, size: int, person=lambda i: f"user-{i % 7}"):
    for b in range(batches):
        runs = [run_obj(f"r-{b}-{i}", b * size + i, person=person(b * size + i))
                for i in range(size)]
        repo.import_runs(runs)


def save_review(repo, run_id: str, label: str = "ok") -> None:
    req = [{"run_id": run_id, "metric": "m", "label": label}]
    token = repo.add_reviews(req, reviewer=REVIEWER)["confirm_token"]
    repo.add_reviews(req, confirm_token=token, reviewer=REVIEWER)


def test_the_row_key_vector():
    """docs/format.md 8.2: the keyed row key, computed here with blake3 directly."""
    key = blake3(b"cas:person-key\x00" + b"00112233445566778899aabbccddeeff").digest()
    want = blake3(b"cas:log-index\x00run-id\x00r-17", key=key).digest(length=16)
    assert log_index_key("run-id", "r-17", key) == want
    assert want.hex() in DOC.read_text()


def test_a_segment_is_checked_whole_and_refuses_a_flipped_byte():
    rows = [log_index.ROW.pack(bytes([i]) * 16, 1, 10 * i, 5, bytes(16)) for i in range(40)]
    data = log_index.format_segment(0, 1, reversed(rows))
    assert log_index.parse_segment(data, "s") == (0, 1, rows)
    for at in (0, 7, log_index.HEADER.size + 2, len(data) // 2, len(data) - 1):
        bad = bytearray(data)
        bad[at] ^= 1
        with pytest.raises((CorruptData, UnsupportedFormat)):
            log_index.parse_segment(bytes(bad), "s")
    with pytest.raises(CorruptData, match="outside"):  # a row of a record the range lacks
        log_index.parse_segment(log_index.format_segment(1, 2, rows), "s")


def test_a_fresh_process_resolves_ids_in_a_few_small_reads():
    backend = MemoryBackend()
    repo = cas.Repository.create(backend)
    import_batches(repo, 40, 25)  # 1,000 runs in 40 imports
    for i in range(0, 40, 4):
        save_review(repo, f"r-{i}-3")
    # the binary counter: 40 = 32 + 8, so a cover of two segments, and each merge deleted
    # what it covers
    runs = sorted(k for k in backend.list("indexes/runs/"))
    assert [k.split("/")[2].split(".")[0] for k in runs] == [
        "0000000000-0000000032", "0000000032-0000000040"]
    # a covered segment left behind (a merge interrupted before its deletions) goes at gc
    record = backend.get("runs/imports/0000000005")
    parsed = cas.format.records.parse_record_file(record, cas.format.records.RunImport, "r")
    left = log_index.format_segment(4, 5, log_index.rows_of(
        log_index.RUNS, 5, record, parsed, repo.store.person_key))
    backend.put_if_absent(f"indexes/runs/0000000004-0000000005.{left[-32:].hex()}", left)
    assert repo.gc(grace=0).log_indexes_deleted == 1
    assert sorted(backend.list("indexes/runs/")) == runs
    counting = Counting(backend)
    cold = cas.Repository(counting)
    wanted = [f"r-{b}-{i}" for b, i in ((0, 0), (3, 7), (17, 24), (31, 1), (39, 12))]
    for run_id in wanted:
        assert cold.run(run_id).run_id == run_id
    assert [r.metric for r in cold.reviews("r-8-3")] == ["m"] and cold.reviews("r-8-4") == []
    with pytest.raises(cas.NotFound):
        cold.run("r-99-0")
    # nothing of either log was read whole, and a handful of KB were read in all
    assert not [k for k in counting.whole if k.startswith(("runs/", "reviews/"))], counting.whole
    assert counting.read < 64 << 10, counting.read
    assert cold.fsck().ok


def test_lookups_agree_with_the_logs_after_an_erasure_redacts_records():
    backend = MemoryBackend()
    repo = cas.Repository.create(backend)
    import_batches(repo, 8, 10, person=lambda i: "alice" if i % 10 == 3 else f"p-{i}")
    for run_id in ("r-2-3", "r-2-4"):
        save_review(repo, run_id)
    replaced = []
    real_replace = backend.replace
    backend.replace = lambda key, data: (replaced.append(key), real_replace(key, data))[1]
    preview = repo.erase("alice")
    assert len(preview["runs"]) == 8 and len(preview["reviews"]) == 1
    repo.erase("alice", preview["confirm_token"], author=REVIEWER)
    # only the records holding alice's runs and their review were rewritten
    assert sorted(k for k in replaced if not k.startswith("erasures/")) == [
        "reviews/0000000001"] + [f"runs/imports/{n:010d}" for n in range(1, 9)]
    cold = cas.Repository(backend)
    for b in range(8):
        with pytest.raises(cas.NotFound):
            cold.run(f"r-{b}-3")
        assert cold.run(f"r-{b}-4").run_id == f"r-{b}-4"  # its row is stale: the record is read
    assert cold.reviews("r-2-4")[0].label == "ok"
    assert sorted(cold.runs()) == sorted(f"r-{b}-{i}" for b in range(8) for i in range(10)
                                         if i != 3)
    assert cold.fsck().ok
    # an erased run id imported again (a new consent) is found again, with its new content
    again = run_obj("r-5-3", 999, person="alice")
    cold.import_runs([again], allow_erased_persons=["alice"])
    assert cas.Repository(backend).run("r-5-3").output == "done 999"


def test_lost_segments_and_a_segment_beyond_the_log_change_no_answer():
    backend = MemoryBackend()
    repo = cas.Repository.create(backend)
    import_batches(repo, 12, 3)
    for key in list(backend.list("indexes/runs/"))[::2]:
        backend.delete(key)  # gaps in the cover: those records are read whole
    cold = cas.Repository(backend)
    assert [cold.run(f"r-{b}-1").run_id for b in range(12)] == [f"r-{b}-1" for b in range(12)]
    # a segment over records the log does not hold (a copy cut short): ignored, and the next
    # import takes the next number of the log, leaving no hole
    fake = log_index.format_segment(12, 20, [])
    backend.put_if_absent(f"indexes/runs/0000000012-0000000020.{fake[-32:].hex()}", fake)
    fresh = cas.Repository(backend)
    assert fresh.import_runs([run_obj("new-1")]).new == ["new-1"]
    assert backend.exists("runs/imports/0000000013")
    assert cas.Repository(backend).run("new-1").run_id == "new-1"
    problems = cas.Repository(backend).fsck().problems
    assert [p.where for p in problems if p.severity == "error"] == [
        f"indexes/runs/0000000012-0000000020.{fake[-32:].hex()}"]


def test_fsck_finds_a_segment_that_lacks_a_row():
    backend = MemoryBackend()
    repo = cas.Repository.create(backend)
    import_batches(repo, 1, 5)
    [key] = backend.list("indexes/runs/")
    lo, hi, rows = log_index.parse_segment(backend.get(key), key)
    short = log_index.format_segment(lo, hi, rows[1:])
    backend.delete(key)
    bad = f"indexes/runs/0000000000-0000000001.{short[-32:].hex()}"
    backend.put_if_absent(bad, short)
    [problem] = repo.fsck().problems
    assert problem.where == bad and "lacks 1 row(s) of runs/imports/0000000001" in problem.message


def test_a_mirror_copies_the_segments():
    from cas.repo.mirror import mirror
    backend, copy = MemoryBackend(), MemoryBackend()
    repo = cas.Repository.create(backend)
    import_batches(repo, 4, 3)
    mirror(backend, copy)
    assert sorted(copy.list("indexes/")) == sorted(backend.list("indexes/")) != []
    dst = cas.Repository(copy)
    assert dst.run("r-3-2").run_id == "r-3-2" and dst.fsck().ok


class LogIndexMachine(RuleBasedStateMachine):
    """Imports, reviews, erasures, gc and lost segments in any order: in a fresh process every
    run id and annotation id resolves to what reading the logs whole gives."""

    def __init__(self) -> None:
        super().__init__()
        self.backend = MemoryBackend()
        self.repo = cas.Repository.create(self.backend)
        self.n = 0

    @rule(ids=st.lists(st.integers(0, 15), min_size=1, max_size=4, unique=True),
          persons=st.lists(st.sampled_from(["ann", "bo", "cy"]), min_size=1, max_size=3))
    def import_runs(self, ids, persons):
        # ids from a small pool: a run id comes back after an erasure, with other content;
        # people mixed in one import: an erasure leaves the others' entries in its records
        self.n += 1
        runs = [run_obj(f"r{i}", self.n, person=persons[k % len(persons)])
                for k, i in enumerate(ids)]
        try:
            self.repo.import_runs(runs, allow_erased_persons=persons)
        except cas.FailedPrecondition as exc:
            assert exc.reason == "RUN_ID_CONFLICT"  # an id still recorded, other content

    @rule(pick=st.integers(0, 50), label=st.sampled_from(["ok", "bad"]))
    def review(self, pick, label):
        ids = self.repo.runs()
        if ids:
            save_review(self.repo, ids[pick % len(ids)], label)

    @rule(person=st.sampled_from(["ann", "bo", "cy"]))
    def erase(self, person):
        preview = self.repo.erase(person)
        if not preview["matched"]:
            return  # nothing names them (not imported yet, or erased already)
        self.repo.erase(person, preview["confirm_token"], author=REVIEWER)

    @rule()
    def gc(self):
        self.repo.gc(grace=0)

    @rule(pick=st.integers(0, 50))
    def lose_a_segment(self, pick):
        found = sorted(self.backend.list("indexes/"))
        if found:
            self.backend.delete(found[pick % len(found)])

    @invariant()
    def lookups_agree_with_the_logs(self):
        fresh = cas.Repository(self.backend)
        by_log = runs.index(fresh.context).all()  # every import record, read whole
        probe = cas.Repository(self.backend)
        for run_id, digest in by_log.items():
            assert probe.run(run_id).run_id == run_id
            assert log_index.LogIndex(self.backend, log_index.RUNS,
                                      probe.context.store.person_key).find("run-id", run_id)[-1][
                1].run == digest
        whole = reviews.index(fresh.context).all()
        for r in whole:
            assert reviews.index(probe.context).get(r.annotation_id) == r
            assert r in probe.reviews(r.run_id)
        assert sum(len(probe.reviews(run_id)) for run_id in by_log) == len(whole)


TestLogIndexMachine = LogIndexMachine.TestCase
TestLogIndexMachine.settings = settings(max_examples=40, stateful_step_count=20, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
