"""gc: a dry run predicts exactly what the same gc deletes; stale proposals are collected; a gc
beside a writer that started first defers, beside another gc it steps back."""

from __future__ import annotations

import time

import pytest

import cas
from cas.format.keys import pack_key
from cas.storage import leases
from cas.storage.backends.memory import MemoryBackend
from support.backends import every_outage
from support.erasure_world import (ALICE, ALICE_MARKERS, RETIRED, UNTOUCHED, FaultyBackend,
                                   InjectedFault, assert_no_trace, build, check_after_crash,
                                   deleted_version_garbage, seeded, snapshot)

REVIEWER = "Rita <rita@example.com>"


def aged(repo, seconds: float = 7200.0) -> cas.Repository:
    """The repository as seen `seconds` from now (every file is that much older)."""
    return cas.Repository(repo.backend, time=lambda: time.time() + seconds)


def every_kind_of_garbage(repo) -> None:
    """Garbage of every kind gc collects: objects of a deleted version in a mostly-garbage
    pack, small packs to merge, a pack a writer never published, a stale staged proposal (with
    its idempotency claim), and a person index whose pack is gone."""
    repo.create_dataset("ds", author="a", admission="direct")
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
def local(tmp_path):
    """A local directory (the `location` fixture is every backend)."""
    return str(tmp_path)


def test_a_dry_run_predicts_exactly_what_gc_deletes(local):
    repo = cas.init(local)
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


def test_merging_packs_without_garbage_is_predicted_too(local):
    """The quick start's case: no garbage at all, but small packs merge, and the headers and
    indexes saved are what the real gc reclaims."""
    repo = cas.init(local)
    repo.create_dataset("ds", author="a", admission="direct")
    for i in range(4):
        repo.commit("ds", base=i, add=[{"input": f"case {i}"}], author="a")
    future = aged(repo)
    dry = future.gc(dry_run=True, grace=0)
    assert dry.objects_deleted == 0 and dry.bytes_reclaimed > 0
    assert future.gc(grace=0)._replace(dry_run=True) == dry


def test_stale_proposals_are_collected_with_their_claims(local):
    repo = cas.init(local)
    repo.create_dataset("ds", author="a", admission="direct")
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


def test_gc_defers_while_a_writer_that_started_first_is_at_work(local):
    repo = cas.init(local)
    repo.create_dataset("ds", author="a", admission="direct")
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


def test_a_second_gc_steps_back(local):
    repo = cas.init(local)
    with leases.acquire(repo, leases.GC, "gc"):
        with pytest.raises(cas.Aborted) as caught:
            repo.gc(grace=0)
    assert caught.value.reason == "GC_IN_PROGRESS"
    assert repo.gc(grace=0).deferred == 0
    assert not list(repo.backend.list("leases/"))  # every lease released


def test_a_writer_keeps_clear_of_the_packs_a_running_gc_may_delete():
    backend = MemoryBackend()
    repo = cas.Repository.create(backend)
    repo.create_dataset("ds", author="a", admission="direct")
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
def test_a_lease_is_dead_once_expired_or_its_process_is_gone(local):
    repo = cas.init(local)
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
    from cas.format.records import format_record_file
    repo.backend.put_if_absent(leases.lease_key(leases.WRITER, ghost.id),
                               format_record_file(ghost))
    assert leases.live(repo) == {}
    assert repo.fsck().ok


def test_a_lease_renews_and_refuses_a_claim_once_it_runs_out(local):
    repo = cas.init(local)
    clock = [time.time()]
    repo.context.time = lambda: clock[0]
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


def test_a_writer_waits_for_an_erasure_in_progress_then_gives_up(local, monkeypatch):
    repo = cas.init(local)
    repo.create_dataset("ds", author="a", admission="direct")
    monkeypatch.setattr(leases, "WRITER_WAIT", 0.2)
    with leases.acquire(repo, leases.ERASURE, "erase", erasure="e1"):
        start = time.monotonic()
        with pytest.raises(cas.Aborted) as caught:
            repo.commit("ds", base=0, add=[{"input": "x"}], author="a")
        assert 0.15 < time.monotonic() - start < 5
    assert caught.value.reason == "ERASURE_IN_PROGRESS"
    assert repo.head("ds") == 0 and not list(repo.backend.list("packs/"))
    assert repo.commit("ds", base=0, add=[{"input": "x"}], author="a").number == 1


def test_a_wait_for_writers_is_reported_as_progress(local):
    repo = cas.init(local)
    heard = []
    with leases.writing(repo, "commit"):
        report = repo.gc(grace=0, wait=0.3, progress=lambda *a: heard.append(a))
        assert report.deferred == 1
    assert heard and heard[0] == ("waiting for writers that started first", 1, 0)
    with pytest.raises(cas.InvalidArgument):
        repo.gc(progress=5)


# -- after an erasure's build (test_erasure.py), on both backends -------------------------
@pytest.mark.usefixtures("as_operator")
def test_gc_deletes_only_unreachable_objects_in_old_packs(repo):
    build(repo)
    deleted_version_garbage(repo)
    readable = {(n, v): snapshot(repo, n, v) for n, v in RETIRED | UNTOUCHED}
    listing = {k: repo.backend.get(k) for k in repo.backend.list("")}
    young = repo.gc()  # default grace: every pack is younger than a day
    assert young.objects_deleted == 0 and young.garbage_kept >= 40
    dry = repo.gc(dry_run=True, grace=0)
    assert dry.dry_run and dry.objects_deleted >= 40 and dry.bytes_reclaimed > 80_000
    assert {k: repo.backend.get(k) for k in repo.backend.list("")} == listing
    done = repo.gc(grace="0s")
    assert done.objects_deleted == dry.objects_deleted and done.packs_rewritten >= 1
    survivor = cas.encode_case({"input": "survivor"}).case_id
    assert repo.case("scratch", 3, survivor).input == "survivor"
    assert done.bytes_reclaimed > 80_000
    assert not any(b"dropped 1" in repo.backend.get(k) for k in repo.backend.list(""))
    for (n, v), snap in readable.items():
        assert snapshot(repo, n, v) == snap
    assert repo.fsck().ok
    assert repo.gc(grace=0).objects_deleted == 0  # nothing left to collect
    with pytest.raises(cas.InvalidArgument):
        repo.gc(grace="soon")


@pytest.mark.usefixtures("as_operator")
@pytest.mark.parametrize("after", [False, True], ids=["before-write", "lost-reply"])
def test_a_fault_at_every_mutation_of_gc(after):
    probe = FaultyBackend(seeded())
    cas.Repository(probe).gc(grace=0)
    total = probe.mutations
    assert total >= 4  # the new pack and its index, then the old index and pack
    for k in range(1, total + 1):
        inner = seeded()
        repo = cas.Repository(FaultyBackend(inner, fail_at=k, after=after))
        with pytest.raises(InjectedFault):
            repo.gc(grace=0)
        assert check_after_crash(inner) == "not started"
        # A later gc finishes the job (once the crashed one's lease is dead: a killed process
        # on this host at once, any other after the lease's lifetime).
        again = cas.Repository(inner, time=lambda: time.time() + leases.TTL + 1)
        again.gc(grace=0)
        assert again.fsck().ok and again.gc(grace=0).objects_deleted == 0


@pytest.mark.usefixtures("as_operator")
def test_gc_merges_small_packs_and_an_erasure_still_finds_its_objects(repo):
    build(repo)
    packs = len(repo.store.pack_ids())
    assert packs >= 8  # about one per promotion and commit
    readable = {(n, v): snapshot(repo, n, v) for n, v in RETIRED | UNTOUCHED}
    report = repo.gc(grace=0)
    assert (report.packs_rewritten, report.packs_written, report.objects_deleted) == (packs, 1, 0)
    assert len(repo.store.pack_ids()) == 1
    again = cas.Repository(repo.backend)
    for (n, v), snap in readable.items():
        assert snapshot(again, n, v) == snap
    assert again.gc(grace=0).packs_rewritten == 0  # one pack, nothing to drop: left alone
    # the merged pack's person index lets an erasure find Alice's objects
    preview = again.erase(ALICE)
    assert len(preview["cases"]) == 3 and len(preview["runs"]) == 4
    again.erase(ALICE, preview["confirm_token"])
    assert_no_trace({k: repo.backend.get(k) for k in repo.backend.list("")},
                    ALICE_MARKERS + [ALICE])
    assert again.fsck().ok


def test_a_long_batch_renews_its_lease_as_it_writes_packs(local, monkeypatch):
    """A commit of many packs that takes longer than a lease lives (here each pack takes half
    of it) renews its lease as it writes them: it claims its version, and its lease never
    looked dead to a gc or an erasure meanwhile."""
    repo = cas.init(local)
    repo.create_dataset("big", admission="direct")
    clock = [time.time()]
    repo.context.time = lambda: clock[0]
    monkeypatch.setattr("cas.storage.pack.PACK_MAX_BYTES", 4_000)
    seen = []
    real = cas.storage.person_index.Persons.write_table

    def slow_pack(self, pid, persons):  # each pack "takes" half a lease's life
        clock[0] += leases.TTL / 2
        live = [r.expires_at for r in leases.live(repo).values() if r.role == leases.WRITER]
        seen.append((clock[0], live))
        return real(self, pid, persons)
    monkeypatch.setattr(cas.storage.person_index.Persons, "write_table", slow_pack)
    rec = repo.commit("big", base=None, add=[{"input": "x" * 500 + str(i)} for i in range(60)])
    assert rec.item_count == 60 and len(seen) >= 5
    # at every pack the commit's lease was live, and by more than the margin a claim needs
    assert all(len(live) == 1 and leases.seconds_of(live[0]) > now + leases.MARGIN
               for now, live in seen), seen


# -- a read the storage could not answer -------------------------------------------------------
def _proposals(backend) -> list[str]:
    return [k for k in backend.list("datasets/") if "/proposals/" in k or "/keys/" in k]


@pytest.mark.parametrize("lasting", [True, False], ids=["server-gone", "blink"])
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "gc"])
def test_an_outage_at_any_read_of_gc_is_unavailable_and_deletes_nothing_it_could_not_read(
        as_operator, lasting, dry_run):
    """The erasure world's sealed proposals are kept by gc; one whose read failed is not
    "damaged, it can never be sealed" and deleted: gc raises UNAVAILABLE and keeps it, and a
    dry run never predicts what the whole run would not do."""
    kept = _proposals(seeded())
    assert kept

    def intact(inner) -> None:
        assert _proposals(inner) == kept  # sealed: nothing may delete them
        check_after_crash(inner)

    n, report = every_outage(seeded, lambda b: cas.Repository(b).gc(dry_run=dry_run),
                             lasting, check=None if dry_run else intact)
    assert report.proposals_deleted == 0 and report.packs_rewritten and n > 100


@pytest.mark.usefixtures("as_operator")
def test_an_erasure_beside_a_gc_leaves_no_copy_in_the_pack_the_gc_writes(repo, monkeypatch):
    """An erasure that runs while a gc has copied the person's objects into a new pack and
    not yet published it leaves that pack to the gc (it may not delete a pack a gc is
    publishing), and the gc purges it once published: of the cases and runs the erasure
    names, and of every other object the person's erasure removed (the provenance naming
    them, their cassettes), none stays in the gc's pack."""
    build(repo)
    backend = repo.backend
    put = backend.put_if_absent
    erased = []

    def publishing(key, data):
        if key.endswith(".idx") and not erased and leases.of_role(
                {k: None for k in backend.list("leases/")}, leases.GC):
            erased.append(None)  # (the erasure's own writes pass straight through)
            other = cas.Repository(backend)
            erased[0] = other.erase(ALICE, other.erase(ALICE)["confirm_token"])
        return put(key, data)
    monkeypatch.setattr(backend, "put_if_absent", publishing)
    report = repo.gc(grace=0)
    assert erased and erased[0].cases and report.packs_written == 1
    assert_no_trace({k: backend.get(k) for k in backend.list("")}, ALICE_MARKERS + [ALICE])
    again = cas.Repository(backend)
    assert again.fsck().ok
