"""gc: a dry run predicts exactly what the same gc deletes; stale proposals are collected; a gc
beside a writer that started first defers, beside another gc it steps back."""

from __future__ import annotations

import time

import pytest

import cas
from cas import leases
from cas.backends.memory import MemoryBackend
from cas.store import pack_key

REVIEWER = "Rita <rita@example.com>"


def aged(repo, seconds: float = 7200.0) -> cas.Repository:
    """The repository as seen `seconds` from now (every file is that much older)."""
    return cas.Repository(repo.backend, time=lambda: time.time() + seconds)


def every_kind_of_garbage(repo) -> None:
    """Garbage of every kind gc collects: objects of a deleted version in a mostly-garbage
    pack, small packs to merge, a pack a writer never published, a stale staged proposal (with
    its idempotency claim), and a person index whose pack is gone."""
    repo.create_dataset("ds", author="a")
    repo.commit("ds", base=0, add=[{"input": f"kept {i}"} for i in range(3)], author="a")
    dropped = [{"input": f"dropped {i}", "output": "y" * 3000, "person": "pat"}
               for i in range(20)]
    repo.commit("ds", base=1, add=dropped + [{"input": "survivor"}], author="a")
    repo.commit("ds", base=2, remove=[cas.encode_case(c).case_id for c in dropped], author="a")
    repo.delete_version("ds", 2, author="a")
    for i in range(3):  # small packs, one per version
        repo.commit("ds", base=repo.head("ds"), add=[{"input": f"small {i}"}], author="a")
    repo.backend.put_if_absent(pack_key("ab" * 32), b"an unpublished pack's bytes")
    repo.backend.put_if_absent(f"persons/00/{'cd' * 32}", b"{}")
    repo.import_runs([{"run_id": "r1", "tenant": "t", "person": "pat", "input": "x",
                       "steps": []}], author="a")
    token = repo.add_reviews([{"run_id": "r1", "metric": "dataset_eligibility",
                               "label": "reviewed"}], reviewer=REVIEWER)["confirm_token"]
    ann = repo.add_reviews([{"run_id": "r1", "metric": "dataset_eligibility",
                             "label": "reviewed"}], token, reviewer=REVIEWER)["annotation_ids"]
    repo.promote("ds", [{"subject_kind": "agent_run", "subject_ref": "r1",
                         "review_annotation_id": ann[0]}], "never-sealed", author="a")


@pytest.fixture
def location(tmp_path):
    return str(tmp_path)


def test_a_dry_run_predicts_exactly_what_gc_deletes(location):
    repo = cas.init(location)
    every_kind_of_garbage(repo)
    future = aged(repo)
    before = {k: repo.backend.get(k) for k in repo.backend.list("")}
    dry = future.gc(dry_run=True, grace="1h")
    assert {k: repo.backend.get(k) for k in repo.backend.list("")} == before  # wrote nothing
    real = future.gc(grace="1h")
    assert dry.dry_run and not real.dry_run
    assert dry._replace(dry_run=False) == real
    assert real.objects_deleted >= 20 and real.packs_deleted == 1
    assert real.proposals_deleted == 1 and real.records_deleted == 1
    assert real.packs_rewritten >= 4 and real.bytes_reclaimed > 60_000
    assert future.fsck().ok
    again = future.gc(dry_run=True, grace="1h")
    assert (again.objects_deleted, again.proposals_deleted, again.packs_deleted) == (0, 0, 0)


def test_merging_packs_without_garbage_is_predicted_too(location):
    """The quick start's case: no garbage at all, but small packs merge, and the headers and
    indexes saved are what the real gc reclaims."""
    repo = cas.init(location)
    repo.create_dataset("ds", author="a")
    for i in range(4):
        repo.commit("ds", base=i, add=[{"input": f"case {i}"}], author="a")
    future = aged(repo)
    dry = future.gc(dry_run=True, grace=0)
    assert dry.objects_deleted == 0 and dry.bytes_reclaimed > 0
    assert future.gc(grace=0)._replace(dry_run=True) == dry


def test_stale_proposals_are_collected_with_their_claims(location):
    repo = cas.init(location)
    repo.create_dataset("ds", author="a")
    repo.import_runs([{"run_id": f"r{i}", "tenant": "t", "steps": []} for i in range(2)],
                     author="a")
    req = [{"run_id": f"r{i}", "metric": "dataset_eligibility", "label": "reviewed"}
           for i in range(2)]
    token = repo.add_reviews(req, reviewer=REVIEWER)["confirm_token"]
    ann = repo.add_reviews(req, token, reviewer=REVIEWER)["annotation_ids"]

    def subject(i):
        return [{"subject_kind": "agent_run", "subject_ref": f"r{i}",
                 "review_annotation_id": ann[i]}]
    sealed = repo.promote("ds", subject(0), "k-sealed", author="a")
    repo.seal("ds", sealed["confirm_token"], author="a")
    stale = repo.promote("ds", subject(1), "k-stale", author="a")
    assert repo.gc(grace="1h").proposals_deleted == 0  # young: kept
    report = aged(repo).gc(grace="1h")
    assert report.proposals_deleted == 1
    with pytest.raises(cas.NotFound) as gone:
        repo.seal("ds", stale["confirm_token"], author="a")
    assert gone.value.reason == "PROPOSAL_NOT_FOUND"
    # the sealed one stays: sealing its token again returns the version it sealed
    assert repo.seal("ds", sealed["confirm_token"], author="a").already_sealed
    # the same request with the same key stages anew (its claim went with the proposal)
    again = repo.promote("ds", subject(1), "k-stale", author="a")
    assert again["proposed"]["added"] == stale["proposed"]["added"]
    assert repo.seal("ds", again["confirm_token"], author="a").version.number == 2
    assert repo.fsck().ok


def test_gc_defers_while_a_writer_that_started_first_is_at_work(location):
    repo = cas.init(location)
    repo.create_dataset("ds", author="a")
    repo.commit("ds", base=0, add=[{"input": "x"}], author="a")
    repo.commit("ds", base=1, remove=[cas.encode_case({"input": "x"}).case_id], author="a")
    repo.delete_version("ds", 1, author="a")
    listing = sorted(repo.backend.list("packs/"))
    with leases.writing(repo, "commit"):
        report = aged(repo, 5).gc(grace=0, wait=0.2)  # 5 s: the writer's lease is live
        assert report.deferred == 1 and report.objects_deleted == 0
        assert sorted(repo.backend.list("packs/")) == listing
    assert aged(repo, 5).gc(grace=0, wait=0).objects_deleted >= 1  # once it is done
    assert repo.fsck().ok


def test_a_second_gc_steps_back(location):
    repo = cas.init(location)
    with leases.acquire(repo, leases.GC, "gc"):
        with pytest.raises(cas.Aborted) as caught:
            repo.gc(grace=0)
    assert caught.value.reason == "GC_IN_PROGRESS"
    assert repo.gc(grace=0).deferred == 0
    assert not list(repo.backend.list("leases/"))  # every lease released


def test_a_writer_keeps_clear_of_the_packs_a_running_gc_may_delete():
    backend = MemoryBackend()
    repo = cas.Repository.create(backend)
    repo.create_dataset("ds", author="a")
    x = {"input": "reused"}
    repo.commit("ds", base=0, add=[x], author="a")
    (old_pack,) = [k[6:-5] for k in backend.list("packs/") if k.endswith(".pack")]
    with leases.acquire(repo, leases.GC, "gc", packs=[old_pack]):
        record = repo.commit("ds", base=1, add=[x, {"input": "new"}], author="a")
        writer_packs = {k for k in backend.list("packs/") if k.endswith(".pack")}
        # the new version's objects were written into a pack of its own, not found in the
        # condemned one
        assert len(writer_packs) == 2
    assert repo.case("ds", record.number, cas.encode_case(x).case_id).input == "reused"


# -- leases ---------------------------------------------------------------------------------
def test_a_lease_is_dead_once_expired_or_its_process_is_gone(location):
    repo = cas.init(location)
    held = leases.acquire(repo, leases.WRITER, "commit")
    assert held.key in leases.live(repo)
    later = cas.Repository(repo.backend, time=lambda: time.time() + leases.TTL + 1)
    assert held.key not in leases.live(later)
    held.release()
    # a lease of a process of this host that no longer runs is dead at once
    import subprocess
    import sys
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    ghost = leases.Lease(id="0" * 16, role=leases.WRITER, operation="commit",
                         host=leases._HOST, pid=int(child.stdout), started_at=leases.iso(0),
                         expires_at=leases.iso(time.time() + leases.TTL))
    from cas.objects import format_record_file
    repo.backend.put_if_absent(leases.lease_key(leases.WRITER, ghost.id),
                               format_record_file(ghost))
    assert leases.live(repo) == {}
    assert repo.fsck().ok


def test_a_lease_renews_and_refuses_a_claim_once_it_runs_out(location):
    repo = cas.init(location)
    clock = [time.time()]
    repo.time = lambda: clock[0]
    held = leases.acquire(repo, leases.WRITER, "commit")
    first = held.record.expires_at
    clock[0] += leases.TTL / 2
    held.renew()
    assert held.record.expires_at > first
    assert leases.live(repo)[held.key].expires_at == held.record.expires_at
    held.check()  # renewed in time: fine
    held._renew_at = float("inf")  # a holder that stalled and could not renew
    clock[0] += leases.TTL
    with pytest.raises(cas.Aborted) as caught:
        held.check()
    assert caught.value.reason == "LEASE_EXPIRED"
    held.release()
    assert not list(repo.backend.list("leases/"))


def test_a_writer_waits_for_an_erasure_in_progress_then_gives_up(location, monkeypatch):
    repo = cas.init(location)
    repo.create_dataset("ds", author="a")
    monkeypatch.setattr(leases, "WRITER_WAIT", 0.2)
    with leases.acquire(repo, leases.ERASURE, "erase", erasure="e1"):
        start = time.monotonic()
        with pytest.raises(cas.Aborted) as caught:
            repo.commit("ds", base=0, add=[{"input": "x"}], author="a")
        assert 0.15 < time.monotonic() - start < 5
    assert caught.value.reason == "ERASURE_IN_PROGRESS"
    assert repo.head("ds") == 0 and not list(repo.backend.list("packs/"))
    assert repo.commit("ds", base=0, add=[{"input": "x"}], author="a").number == 1


def test_a_wait_for_writers_is_reported_as_progress(location):
    repo = cas.init(location)
    heard = []
    with leases.writing(repo, "commit"):
        report = repo.gc(grace=0, wait=0.3, progress=lambda *a: heard.append(a))
        assert report.deferred == 1
    assert heard and heard[0] == ("waiting for writers that started first", 1, 0)
    with pytest.raises(cas.InvalidArgument):
        repo.gc(progress=5)
