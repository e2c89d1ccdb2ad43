"""Capture stores (cas/evals/capture/stores.py): the local store (torn lines, retention by day),
the repository store (runs ready for review, erasure by the keyed person digest, an erased
person's new captures left out, failures into an eval set); no user, session or metadata value
ever reaches a stored byte (the import of a local store, `cas runs import --from-captures`:
tests/cli/test_runs.py)."""

from __future__ import annotations

import asyncio
import logging
import os
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas.evals.capture import pipeline as capture
from cas.evals.capture.records import CaptureRecord, RecordedTool
from cas.evals.capture.stores import (LocalCaptureStore, RepositoryCaptureStore, import_captures,
                                      record_of, run_of)
from cas.evals.evalset import scenarios
from cas.storage.backends.memory import MemoryBackend
from support.evals import ADA, event, every_byte, record


# -- the local store --------------------------------------------------------------------------
class Clock:
    def __init__(self, when: datetime) -> None:
        self.now = when

    def __call__(self) -> datetime:
        return self.now


def test_local_store_skips_and_reports_a_torn_last_line_and_starts_clean_after_it(tmp_path,
                                                                                 caplog):
    clock = Clock(datetime(2026, 12, 1, 10, tzinfo=timezone.utc))
    store = LocalCaptureStore(tmp_path, clock=clock)
    asyncio.run(store.start())
    asyncio.run(store.append(record(1)))
    path = tmp_path / "captures-2026-12-01.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"agent_name":"support","captured_at":"2026-12-01T10:0')  # a crash mid-append
    with caplog.at_level(logging.WARNING, logger="cas.capture"):
        assert [r.id for r in asyncio.run(store.list())] == ["cr-1"]
    assert store.torn == [(str(path), 2)] and "capture.torn_line" in caplog.text
    asyncio.run(store.append(record(2, "2026-12-01T11:00:00.000000Z")))
    assert [r.id for r in asyncio.run(store.list())] == ["cr-2", "cr-1"]

def test_local_store_keeps_retention_days_across_a_day_change(tmp_path):
    clock = Clock(datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc))
    store = LocalCaptureStore(tmp_path, retention_days=2, clock=clock)
    asyncio.run(store.start())
    for day in range(4):  # one record a day, the clock moving past midnight each time
        asyncio.run(store.append(record(day, f"2026-12-0{1 + day}T23:59:00.000000Z")))
        clock.now += timedelta(days=1)
    names = sorted(os.listdir(tmp_path))
    assert names == ["captures-2026-12-03.jsonl", "captures-2026-12-04.jsonl"]
    assert [r.id for r in asyncio.run(store.list(since="2026-12-04"))] == ["cr-3"]
    assert [r.id for r in asyncio.run(store.list(limit=1))] == ["cr-3"]
    clock.now += timedelta(days=5)
    asyncio.run(LocalCaptureStore(tmp_path, retention_days=2, clock=clock).start())
    assert os.listdir(tmp_path) == []



def test_local_store_compares_since_as_a_time_whatever_its_offset(tmp_path):
    """00:27 UTC on the 5th is before 20:00 on the 4th in New York (01:00 UTC on the 5th), although
    its text sorts after; a form that names no time is refused, never matching nothing."""
    clock = Clock(datetime(2026, 12, 5, 0, 27, tzinfo=timezone.utc))
    store = LocalCaptureStore(tmp_path, clock=clock)
    asyncio.run(store.start())
    asyncio.run(store.append(record(1, "2026-12-05T00:27:36.000000Z")))
    asyncio.run(store.append(record(2, "2026-12-05T02:00:00.000000Z")))
    assert [r.id for r in asyncio.run(store.list(since="2026-12-04T20:00:00-05:00"))] == ["cr-2"]
    assert [r.id for r in asyncio.run(store.list(since="2026-12-05"))] == ["cr-2", "cr-1"]
    ny = timezone(timedelta(hours=-5))
    assert [r.id for r in asyncio.run(store.list(since=datetime(2026, 12, 4, 19, tzinfo=ny)))] \
        == ["cr-2", "cr-1"]
    with pytest.raises(cas.InvalidArgument) as refused:
        asyncio.run(store.list(since="yesterday"))
    assert refused.value.reason == "INVALID_TIME"

# -- the repository store, erasure, import ----------------------------------------------------
def test_repository_store_makes_reviewable_runs_that_erasure_finds_without_the_user_id():
    repo = cas.Repository.create(MemoryBackend())
    store = RepositoryCaptureStore(repo, "acme")
    capture.register_store("repo", store)
    capture.rule(lambda e: e.failed, store="repo")
    capture.redactor(lambda r: r)  # keep content: it is what the erasure must delete
    for i in range(3):
        capture.submit(event(i, status="failed" if i < 2 else "completed",
                             user_id="alice" if i == 0 else "bob"))
    assert capture.flush(5)
    runs = repo.runs()
    assert len(runs) == 2 and all(r.startswith("capture-cr-") for r in runs)
    queued = repo.review_queue()
    assert len(queued.runs if hasattr(queued, "runs") else queued["runs"]) == 2
    stored = every_byte(repo.backend)
    for secret in (b"alice", b"bob", b"SESSION-", b"META-", b"USER-"):
        assert secret not in stored
    assert b"question 0" in stored
    person = repo.run(runs[0]).person
    assert person.startswith("pk:") and person in (repo.store.person_digest("alice"),
                                                    repo.store.person_digest("bob"))
    preview = repo.erase("alice")
    assert len(preview["runs"]) == 1
    repo.erase("alice", confirm_token=preview["confirm_token"], author=ADA)
    stored = every_byte(repo.backend)
    assert b"question 0" not in stored and b"question 1" in stored
    assert [r.id for r in asyncio.run(store.list())] == [record_of(repo.run(r)).id
                                                         for r in repo.runs()]
    assert repo.fsck().ok

def test_the_repository_store_leaves_out_an_erased_persons_new_captures(caplog):
    repo = cas.Repository.create(MemoryBackend())
    store = RepositoryCaptureStore(repo, "acme")
    capture.register_store("repo", store)
    capture.rule(lambda e: True, store="repo")
    capture.submit(event(0, user_id="alice"))
    assert capture.flush(5)
    repo.erase("alice", confirm_token=repo.erase("alice")["confirm_token"], author=ADA)
    with caplog.at_level(logging.INFO, logger="cas.capture"):
        capture.submit(event(1, user_id="alice"))  # erased: stays erased
        capture.submit(event(2, user_id="bob"))    # the same batch or not, bob's is kept
        assert capture.flush(5)
    assert [record_of(repo.run(r)).invocation_id for r in repo.runs()] == ["inv-2"]
    assert store.erased_skipped == 1 and "capture.skipped reason=person_erased" in caplog.text
    assert capture.stats().get("failed", 0) == 0


def test_a_local_store_with_a_repository_names_the_keyed_person_and_erasure_reaches_it(tmp_path):
    repo = cas.Repository.create(MemoryBackend())
    caps = tmp_path / "caps"
    capture.register_store("local", LocalCaptureStore(caps, repo=repo))
    capture.rule(lambda e: True, store="local")
    capture.redactor(lambda r: r)  # keep content: it is what the erasure must delete
    capture.submit(event(0, user_id="alice-7Q2"))
    capture.submit(event(1, user_id="bob-3Z9"))
    assert capture.flush(5) and capture.stats()["stored"] == 2
    files = b"".join(p.read_bytes() for p in caps.iterdir())
    assert repo.store.person_digest("alice-7Q2").encode() in files
    result, torn = import_captures(repo, caps, "acme")
    assert len(result.new) == 2 and result.warnings == [] and torn == []
    preview = repo.erase("alice-7Q2")
    assert len(preview["runs"]) == 1
    repo.erase("alice-7Q2", confirm_token=preview["confirm_token"], author=ADA)
    assert [record_of(repo.run(r)).invocation_id for r in repo.runs()] == ["inv-1"]
    stored = every_byte(repo.backend)
    assert b"question 0" not in stored and b"question 1" in stored
    for user in (b"alice-7Q2", b"bob-3Z9"):
        assert user not in stored and user not in files
    assert repo.fsck().ok

def test_a_local_store_without_a_repository_is_named_at_import_and_keys_never_mix(tmp_path):
    repo, other = (cas.Repository.create(MemoryBackend()) for _ in range(2))
    plain, keyed = tmp_path / "plain", tmp_path / "keyed"
    asyncio.run(LocalCaptureStore(plain).append(record(1)))
    result, _ = import_captures(repo, plain, "acme")
    assert result.new == ["capture-cr-1"]
    assert result.warnings == [f"the captures in {plain} were made by a LocalCaptureStore "
                               "opened without a repository: their runs name nobody, so `cas "
                               "erase --person` cannot find them (open the store with repo= "
                               "to keep the keyed person digest)"]
    store = LocalCaptureStore(keyed, repo=other)
    asyncio.run(store.start())
    asyncio.run(store.append(record(2).replace(person=store.person_key("carol"))))
    with pytest.raises(cas.FailedPrecondition) as e:  # its digests would name nobody here
        import_captures(repo, keyed, "acme")
    assert e.value.reason == "CAPTURE_KEY_MISMATCH" and repo.runs() == ["capture-cr-1"]
    for directory, opened_with in ((keyed, repo), (keyed, None), (plain, repo)):
        with pytest.raises(cas.FailedPrecondition) as e:  # one directory, one key (or none)
            asyncio.run(LocalCaptureStore(directory, repo=opened_with).start())
        assert e.value.reason in ("CAPTURE_KEY_MISMATCH", "CAPTURE_REPOSITORY_REQUIRED")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=12, max_size=20))
def test_no_user_session_or_metadata_value_reaches_a_stored_byte(tmp_path_factory, token):
    capture.reset()
    repo = cas.Repository.create(MemoryBackend())
    local = LocalCaptureStore(tmp_path_factory.mktemp("caps"))
    capture.register_store("repo", RepositoryCaptureStore(repo, "acme"))
    capture.rule(lambda e: True, store="repo")
    capture.redactor(lambda r: r)
    capture.submit(event(0, user_id=f"u{token}", session_id=f"s{token}",
                         metadata={"k": f"m{token}", f"key{token}": 1}))
    assert capture.flush(5)
    assert token.encode() not in every_byte(repo.backend)
    capture.reset()
    capture.register_store("local", local)
    capture.rule(lambda e: True, store="local")
    capture.submit(event(0, user_id=f"u{token}", session_id=f"s{token}",
                         metadata={"k": f"m{token}"}))
    assert capture.flush(5)
    written = b"".join(p.read_bytes() for p in local_dir(local))
    assert written and token.encode() not in written

def local_dir(store: LocalCaptureStore):
    import pathlib
    return list(pathlib.Path(store.directory).iterdir())

def test_the_repository_store_on_each_backend(location, monkeypatch):
    """Captures into a local directory and into S3 (SeaweedFS): the runs are there for any
    process that opens the repository, and the erasure of the user deletes them."""
    monkeypatch.setenv("CAS_USER", ADA)
    repo = cas.init(location)
    capture.register_store("repo", RepositoryCaptureStore(repo, "acme"))
    capture.rule(lambda e: e.failed, store="repo")
    capture.redactor(lambda r: r)
    capture.submit(event(5, status="failed", user_id="dana"))
    assert capture.flush(10)
    other = cas.open(location)
    [run_id] = other.runs()
    assert other.run(run_id).input == "question 5"
    other.erase("dana", confirm_token=other.erase("dana")["confirm_token"], author=ADA)
    assert cas.open(location).runs() == [] and cas.open(location).fsck().ok


def test_a_run_of_a_record_is_read_back_as_the_record():
    record = CaptureRecord(id="cr-9", captured_at="2026-12-01T10:00:00.000000Z",
                           agent_name="support", invocation_id="inv-9", reasons=("sample",),
                           status="completed", input_text="q", output_text="a",
                           content="redacted", person="pk:" + "0" * 64,
                           tool_calls=(RecordedTool(name="lookup", failed=True,
                                                    arguments={"id": 1}, error="gone"),))
    run = run_of(record, "acme")
    assert run["run_id"] == "capture-cr-9" and run["outcome"] == {"status": "partial"}
    repo = cas.Repository.create(MemoryBackend())
    repo.import_runs([run])
    assert record_of(repo.run("capture-cr-9")) == record
    omitted = run_of(record.replace(content="omitted", input_text="", output_text=""), "acme")
    assert omitted["input"] is None and omitted["output"] is None


def test_failures_captured_into_a_repository_also_become_failures_of_its_eval_set():
    repo = cas.Repository.create(MemoryBackend())
    capture.register_store("repo", RepositoryCaptureStore(repo, "acme", evalset="regressions",
                                                          author=ADA))
    capture.rule(lambda e: True, store="repo")
    capture.submit(event(0, status="failed", error_type="Timeout"))
    capture.submit(event(1))  # completed, no tool failed: not a failure
    assert capture.flush(5)
    assert len(repo.runs()) == 2
    [failure] = scenarios.open(repo, "regressions", create=False).cases()
    assert failure.kind == "failure" and failure.session_id.startswith("capture-cr-")
    assert failure.signature == ("error_type:Timeout", "failed")
