"""Erasure and retirement end to end: two people, three datasets, several versions each.

Erasing one person retires exactly the versions that held their cases, leaves every other
version byte-for-byte as it was, refuses every use of a retired version, lets a new version be
cut, and leaves none of their bytes in any file of the repository. Runs on both backends.
"""

from __future__ import annotations

import json
import os
import time

import pytest

import cas
from cas.storage import leases, maintenance
from cas.storage.backends.memory import MemoryBackend
from support.backends import every_outage
from support.erasure_world import (ALICE, ALICE_MARKERS, ALICE_RUNS, BOB, BOB_RUNS, RETIRED,
                                   UNTOUCHED, FaultyBackend, InjectedFault, all_items,
                                   assert_no_trace, assert_refused_while_pending, build, case_of,
                                   check_after_crash, promote, remove, repository_bytes, review,
                                   seeded, snapshot)
from support.lifecycle import OPERATOR, keys

pytestmark = pytest.mark.usefixtures("as_operator")  # as OPERATOR


def test_erasing_a_person_end_to_end(repo, location):
    ids = build(repo)
    score = repo.record_score(repo.pin("support", 2), metric="resolution", value=0.5)
    experiment = repo.create_experiment("support", 3, "agent-7-baseline")
    kept_score = repo.record_score(repo.pin("billing", 2), metric="resolution", value=1.0)
    before = {v: snapshot(repo, *v) for v in UNTOUCHED}
    bob_runs = {r["run_id"]: repo.run(r["run_id"]) for r in BOB_RUNS}
    # The markers really are in the repository before the erasure (the search can fail).
    files = repository_bytes(repo, location)
    assert any(ALICE_MARKERS[0].encode() in d for d in files.values())
    assert any(ALICE.encode() in d for d in files.values())

    # -- preview: names everything, changes nothing ------------------------------------------
    listing = {k: repo.backend.get(k) for k in repo.backend.list("")}
    preview = repo.erase(ALICE)
    assert {k: repo.backend.get(k) for k in repo.backend.list("")} == listing
    assert preview["cases"] == ids["alice"]
    assert preview["runs"] == [f"alice-run-{i}" for i in range(4)]
    assert len(preview["reviews"]) == 2  # only the reviewed runs had reviews
    assert {(v["dataset"], v["number"]) for v in preview["versions_to_retire"]} == RETIRED
    assert [(s["dataset"], s["version"], s["score_id"]) for s in preview["citing_scores"]] == \
        [("support", 2, score.score_id)]
    assert preview["citing_experiments"] == [{"dataset": "support", "version": 3,
                                              "name": "agent-7-baseline"}]
    assert preview["person"].startswith("pk:") and ALICE not in json.dumps(preview["person"])
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.erase(ALICE, "ct-" + "0" * 32)
    assert info.value.reason == "CONFIRM_TOKEN_MISMATCH"
    assert {k: repo.backend.get(k) for k in repo.backend.list("")} == listing

    # -- confirm ------------------------------------------------------------------------------
    record = repo.erase(ALICE, preview["confirm_token"])
    assert record.cases == ids["alice"] and len(record.runs) == 4
    assert {(r.dataset, r.number) for r in record.retired} == RETIRED
    assert record.objects_deleted >= len(ids["alice"]) + 4 and record.packs_rewritten >= 1
    assert repo.erase(ALICE, preview["confirm_token"]) == record  # a retried confirm: no-op
    assert repo.erasures() == [record]

    for name, number in RETIRED:
        retired = repo.retirement(name, number)
        assert (retired.cause, retired.erasure) == ("PERSON_ERASED", record.id)
        assert repo.version_state(name, number) == "RETIRED"
    for name, number in UNTOUCHED:
        assert repo.version_state(name, number) == "ACTIVE"
        assert snapshot(repo, name, number) == before[(name, number)]  # byte for byte

    # -- every use of a retired version is refused, permanently ------------------------------
    v2 = repo.version("support", 2)  # still shows the set as sealed
    assert v2.item_count == 4
    refusals = [lambda: repo.items("support", 2), lambda: repo.case("support", 2, ids["alice"][0]),
                lambda: repo.prove("support", 3, ids["alice"][0]),
                lambda: repo.diff("support", 1, 2), lambda: repo.provenance("support", 2),
                lambda: repo.pin("support", 3),
                lambda: repo.record_score(score.pin, metric="m", value=1),
                lambda: repo.create_experiment("support", 2, "again"),
                lambda: repo.items("triage", 1)]
    for refusal in refusals:
        with pytest.raises(cas.FailedPrecondition) as info:
            refusal()
        assert info.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"
    # stored scores and experiments stay, and say the version is retired
    [old] = repo.scores("support", 2)
    assert old.score_id == score.score_id and old.version_state == "RETIRED"
    assert repo.scores("billing", 2)[0].version_state == "ACTIVE"
    assert repo.scores("billing") == [kept_score]
    assert [e.name for e in repo.experiments("support")] == [experiment.name]

    # -- the person's runs and reviews are gone, the others' are intact -----------------------
    for r in ALICE_RUNS:
        with pytest.raises(cas.NotFound):
            repo.run(r["run_id"])
    assert repo.runs() == sorted(bob_runs)
    for run_id, run in bob_runs.items():
        assert repo.run(run_id) == run and repo.reviews(run_id) is not None

    # -- no trace in any byte ---------------------------------------------------------------
    assert_no_trace(repository_bytes(repo, location), ALICE_MARKERS + [ALICE])
    report = repo.fsck()
    assert report.ok, report.problems
    assert cas.open(location).fsck().ok

    # -- cutting a new version: an empty removal seals exactly what is left ------------------
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.remove("billing", [], "empty-on-active")
    assert info.value.reason == "EMPTY_REMOVAL"
    recut = remove(repo, "support", [], "recut")
    assert (recut.number, recut.item_count) == (4, 3)
    assert set(all_items(repo, "support", 4)) == set(all_items(repo, "support", 1)) | {
        case_of(repo, "support", 4, "bob-run-2")}
    assert repo.version_state("support", 4) == "ACTIVE"
    repo.record_score(repo.pin("support", 4), metric="resolution", value=0.75)
    # an erased case comes back only if its run is imported again, admitting the person
    # deliberately (a new consent: tests/repo/test_erased.py), and promoted again
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.import_runs([ALICE_RUNS[0]])
    assert (info.value.reason, info.value.fields["run_id"]) == ("PERSON_ERASED_BEFORE",
                                                                "alice-run-0")
    repo.import_runs([ALICE_RUNS[0]], allow_erased_persons=[ALICE])
    back = promote(repo, "support", ["alice-run-0"], "again")
    assert back.item_count == 4
    assert case_of(repo, "support", 5, "alice-run-0") in ids["alice"]  # the same content
    assert repo.version_state("support", 2) == "RETIRED"  # the refusal is permanent
    assert repo.fsck().ok


def test_promotion_on_a_retired_head_leaves_the_erased_cases_out(repo):
    ids = build(repo)
    repo.erase(ALICE, repo.erase(ALICE)["confirm_token"])
    v4 = promote(repo, "support", ["bob-run-5"], "after")
    assert repo.version_state("support", 4) == "ACTIVE"
    held = set(all_items(repo, "support", 4))
    assert not held & set(ids["alice"]) and len(held) == v4.item_count == 4
    for c in held:
        repo.case("support", 4, c)  # every case readable
    # a direct commit on a retired base does the same
    t = repo.commit("triage", base=3, add=[{"input": "fresh"}])
    assert t.item_count == 3  # triage@3 never held Alice's case
    assert repo.fsck().ok


def test_a_proposal_staged_before_the_erasure_cannot_seal_it_back(repo):
    ids = build(repo)
    staged = repo.promote("support", [{"subject_kind": "agent_run", "subject_ref": "bob-run-5",
                                       "review_annotation_id": review(repo, "bob-run-5")}], "st")
    repo.erase(ALICE, repo.erase(ALICE)["confirm_token"])
    with pytest.raises(cas.NotFound) as info:
        repo.seal("support", staged["confirm_token"])
    assert info.value.reason == "PROPOSAL_NOT_FOUND"
    assert repo.head("support") == 3
    assert not set(ids["alice"]) & set(repo.store.pack_ids())
    assert repo.fsck().ok


def test_erasing_a_person_with_no_data_records_nothing_and_retires_nothing(repo):
    build(repo)
    listing = {k: repo.backend.get(k) for k in repo.backend.list("")}
    preview = repo.erase("nobody@example.com")
    assert preview["cases"] == preview["runs"] == preview["versions_to_retire"] == []
    assert preview["matched"] is False and len(preview["warnings"]) == 1
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.erase("nobody@example.com", preview["confirm_token"])
    assert info.value.reason == "NOTHING_TO_ERASE"
    assert repo.erasures() == []
    assert {k: repo.backend.get(k) for k in repo.backend.list("")} == listing
    assert all(repo.version_state(n, v) == "ACTIVE" for n, v in RETIRED | UNTOUCHED)
    for bad in ("", None, "x" * 513):
        with pytest.raises(cas.InvalidArgument):
            repo.erase(bad)


@pytest.mark.parametrize("after", [False, True], ids=["before-write", "lost-reply"])
def test_a_fault_at_every_mutation_of_an_erase(after):
    outcomes, total = set(), 0
    for total, inner in _killed_erasures(after):
        outcomes.add(check_after_crash(inner))
    assert total >= 10
    # the erasure's lease, then the journal, are the first writes: failing them leaves
    # nothing; once the journal landed, the next writer completes the erasure
    assert outcomes == {"not started", "complete"}


def test_sigkill_during_erase(tmp_path):
    """A real process killed at random points of an erasure of a local repository."""
    import random
    import signal
    import subprocess
    import sys
    import time
    base = tmp_path / "seed"
    build(cas.init(str(base)))
    rng = random.Random(7)
    outcomes = []
    for attempt in range(6):
        where = tmp_path / f"r{attempt}"
        subprocess.run(["cp", "-a", str(base), str(where)], check=True)
        token = cas.open(str(where)).erase(ALICE)["confirm_token"]
        code = (f"import cas; r = cas.open({str(where)!r}); print('go', flush=True); "
                f"r.erase({ALICE!r}, {token!r}); print('done', flush=True)")
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                 env=dict(os.environ, CAS_USER=OPERATOR))
        assert child.stdout.readline() == b"go\n"
        time.sleep(rng.uniform(0, 0.05))
        child.send_signal(signal.SIGKILL)
        child.wait()
        before = sorted(p.relative_to(where) for p in where.rglob("*"))
        repo = cas.open(str(where))
        assert sorted(p.relative_to(where) for p in where.rglob("*")) == before  # read only
        if list(repo.backend.list("erasures/pending/")):
            assert_refused_while_pending(repo)
        repo.finish_erasures()  # the journal was written: the erasure completes
        report = repo.fsck()
        assert report.ok, report.problems
        if repo.erasures():
            assert_no_trace(repository_bytes(repo, str(where)), ALICE_MARKERS + [ALICE])
            outcomes.append("complete")
        else:
            assert all(repo.version_state(n, v) == "ACTIVE" for n, v in RETIRED | UNTOUCHED)
            outcomes.append("not started")
        for name, number in UNTOUCHED:
            all_items(repo, name, number)
    assert len(outcomes) == 6  # each attempt ended in one of the two states checked above


def test_a_version_sealed_on_a_base_erased_meanwhile_is_retired_too(repo, monkeypatch):
    build(repo)
    other = cas.Repository(repo.backend)  # another process erasing while this one commits
    token = other.erase(ALICE)["confirm_token"]
    append = repo.refs.append_version

    def racing(record):
        if record.dataset == "support" and not list(repo.backend.list("erasures/")):
            # confirmed after this commit read its base, before it lands: the erasure retires
            # the base, then waits for this writer (which started first) to be done
            with pytest.raises(cas.Aborted) as waiting:
                other.erase(ALICE, token, wait=0)
            assert waiting.value.reason == "ERASURE_WAITING"
            assert repo.version_state("support", 3) == "RETIRED"
        return append(record)

    monkeypatch.setattr(repo.refs, "append_version", racing)
    late = repo.commit("support", base=3, add=[{"input": "late case"}])
    assert late.number == 4
    # the writer is done: the erasure completes (here, when the next writer finishes it) and
    # finds the version sealed meanwhile, which holds the erased cases
    (done,) = cas.Repository(repo.backend).finish_erasures()
    assert cas.Repository(repo.backend).erasures() == [done]
    assert done.id == token and repo.version_state("support", 4) == "RETIRED"
    assert repo.retirement("support", 4).erasure == token
    assert repo.fsck().ok
    # the next version cut from it leaves the erased cases out and is active
    recut = repo.commit("support", base=4, add=[{"input": "after"}])
    assert repo.version_state("support", recut.number) == "ACTIVE"
    assert recut.item_count == 5  # 3 of bob's, "late case", "after"
    for c in all_items(repo, "support", recut.number):
        repo.case("support", recut.number, c)


def test_fsck_tolerates_erased_cases_only_in_retired_versions(repo):
    from cas.digest import to_bytes
    ids = build(repo)
    repo.erase(ALICE, repo.erase(ALICE)["confirm_token"])
    assert repo.fsck().ok
    # a case of an active version deleted the same way is reported, named by its id
    bob_case = all_items(repo, "billing", 1)[0]
    pid = repo.store.locate(bob_case)[0][len("packs/"):-len(".pack")]
    maintenance.rewrite_pack(repo.store, pid, {to_bytes(bob_case)})
    problems = [p for p in repo.fsck().problems if p.severity == "error"]
    assert (bob_case, "case is missing") in {(p.where, p.message) for p in problems}
    assert not any(p.where in ids["alice"] for p in problems)


def test_fsck_checks_retirement_and_person_index_records(repo):
    build(repo)
    repo.retire("billing", 1, "operator_request", "superseded")
    key = "datasets/billing/retired/0000000001"
    good = repo.backend.get(key)
    repo.backend.replace(key, good.replace(b"OPERATOR_REQUEST", b"OPERATOR_REQUESU"))
    assert key in {p.where for p in repo.fsck().problems if p.severity == "error"}
    repo.backend.replace(key, good)
    assert repo.fsck().ok
    # a person table naming an object its pack does not hold is damage, not a leftover
    from support.person_files import tables, write_table
    pid, (_, rows) = next((pid, t) for pid, t in sorted(tables(repo.backend).items()) if t[1])
    pkey = write_table(repo.backend, pid, sorted([*rows, (rows[0][0], "b3:" + "0" * 64)]))
    errors = [p for p in repo.fsck().problems if p.severity == "error"]
    assert [(p.where, p.message) for p in errors] == [
        (pkey, f"lists b3:{'0' * 64}, which pack {pid} does not hold")]


def test_an_erasure_reads_each_version_record_once(tmp_path):
    """An erasure walks every live version several times (its preview, then before and after
    waiting for writers); the records it has listed are read once per repository, since a
    record never changes under its key. A version deleted since is still left out: the
    listing says what exists, the memory only what a record holds."""
    from cas.repo.datasets import live_versions
    from cas.storage.backends.local import LocalBackend
    repo = cas.init(str(tmp_path))
    repo.create_dataset("d", admission="direct")
    for k in range(6):
        repo.commit("d", base=k or None, add=[{"input": f"c{k}", "person": ALICE if k == 3
                                              else BOB}])
    gets = []

    class Counting(LocalBackend):
        def get(self, key):
            gets.append(key)
            return super().get(key)

    counted = cas.Repository(Counting(repo.backend.root))
    preview = counted.erase(ALICE)
    done = counted.erase(ALICE, preview["confirm_token"])
    assert [(v.dataset, v.number) for v in done.retired] == [("d", n) for n in (4, 5, 6)]
    records = [k for k in gets if "/versions/" in k]
    assert sorted(records) == sorted(set(records)) and len(set(records)) == 6, records
    counted.delete_version("d", 2)
    assert [v.number for v in live_versions(counted.context)] == [1, 3, 4, 5, 6]
    assert counted.fsck().ok


def test_a_directly_committed_case_naming_a_person_is_erased_like_a_promoted_one(mem):
    mem.create_dataset("gold", admission="direct")
    mem.commit("gold", base=None, add=[{"input": "mine", "person": "p-1"},
                                       {"input": "other"}])
    preview = mem.erase("p-1")
    assert preview["matched"] is True
    mem.erase("p-1", preview["confirm_token"])
    assert mem.version_state("gold", 1) == "RETIRED"
    everything = b"".join(mem.backend.get(k) for k in keys(mem))
    assert b"mine" not in everything and b"p-1" not in everything
    assert mem.fsck().ok


# -- fsck of a killed erasure: its documented pending state, never damage -------------------------
def _killed_erasures(after: bool):
    """(k, backend) of an erasure of Alice killed at its k-th mutation, for every k."""
    probe = FaultyBackend(seeded())
    repo = cas.Repository(probe)
    token = repo.erase(ALICE)["confirm_token"]
    start = probe.mutations
    repo.erase(ALICE, token)
    for k in range(1, probe.mutations - start + 1):
        inner = seeded()
        faulty = FaultyBackend(inner)
        repo = cas.Repository(faulty)
        token = repo.erase(ALICE)["confirm_token"]
        faulty.fail_at, faulty.after = faulty.mutations + k, after
        with pytest.raises(InjectedFault):
            repo.erase(ALICE, token)
        yield k, inner


@pytest.mark.parametrize("after", [False, True], ids=["before-write", "lost-reply"])
def test_fsck_of_an_erasure_killed_at_every_mutation_is_a_notice_never_damage(after):
    """Before any other writer runs: the plan names what is gone (runs still listed by their
    import, proposals not yet deleted, cases gone from packs), and fsck says so in a notice
    and passes (issue 32: it reported "run ... is missing" as damage)."""
    pending = 0
    for k, inner in _killed_erasures(after):
        report = cas.Repository(inner).fsck()
        assert report.ok, (k, [p for p in report.problems if p.severity == "error"])
        plans = list(inner.list("erasures/pending/"))
        assert [e["key"] for e in report.pending_erasures] == plans
        notices = [p.message for p in report.problems if p.where in plans]
        assert len(notices) == len(plans), k
        for message in notices:
            assert "is pending" in message and "the next command that writes" in message
            assert "cas erase --person ID --confirm-token ct-" in message
        pending += bool(plans)
    assert pending >= 20  # most kills leave the erasure pending: those are the point


def _kill_after_the_purge(repo, monkeypatch) -> str:
    """Confirm Alice's erasure and kill it once her bytes are purged, before the log records
    naming her runs are redacted; returns the erasure's id."""
    from cas.repo import erasure

    def killed(*args):
        raise InjectedFault("killed after the purge")
    token = repo.erase(ALICE)["confirm_token"]
    monkeypatch.setattr(erasure, "_redact", killed)
    with pytest.raises(InjectedFault):
        repo.erase(ALICE, token)
    return token


def test_a_loss_a_pending_erasure_does_not_explain_is_still_damage(monkeypatch):
    from cas.digest import to_bytes
    from cas.format.records import ErasurePlan, RunImport, parse_record_file
    inner = seeded()
    repo = cas.Repository(inner)
    bob_active = case_of(repo, "billing", 1, "bob-run-3")   # only in an active version
    bob_retired = case_of(repo, "support", 2, "bob-run-2")  # only in versions being retired
    key = "runs/imports/0000000001"
    imported = parse_record_file(inner.get(key), RunImport, key)
    bob_run = next(e.run for e in imported.runs if e.run_id == "bob-run-0")
    token = _kill_after_the_purge(repo, monkeypatch)
    key = f"erasures/pending/{token}"
    plan = parse_record_file(inner.get(key), ErasurePlan, key)
    fresh = cas.Repository(inner)
    assert not any(fresh.store.contains(d) for d in plan.cases + plan.runs)  # purged
    report = fresh.fsck()
    assert report.ok, [p for p in report.problems if p.severity == "error"]
    assert [e["erasure"] for e in report.pending_erasures] == [token]
    # the same kind of loss, of what the plan does not name: damage, each named
    for digest in (bob_active, bob_retired, bob_run):
        pid = fresh.store.locate(digest)[0][len("packs/"):-len(".pack")]
        maintenance.rewrite_pack(fresh.store, pid, {to_bytes(digest)})
    report = cas.Repository(inner).fsck()
    assert not report.ok
    errors = {(p.where, p.message) for p in report.problems if p.severity == "error"}
    assert (bob_active, "case is missing") in errors
    assert (bob_retired, "case is missing") in errors
    assert ("runs/imports/0000000001", f"run 'bob-run-0' ({bob_run}) is missing") in errors
    named = set(plan.cases) | set(plan.runs)
    assert not any(digest in where or digest in message
                   for where, message in errors for digest in named)


@pytest.mark.parametrize("lasting", [True, False], ids=["server-gone", "blink"])
def test_an_outage_at_any_read_of_an_erase_preview_is_unavailable(lasting):
    """A proposal, person table or tree the preview could not read is not "damaged": it is
    never listed for deletion (confirming would delete a good proposal) nor skipped; the
    preview raises UNAVAILABLE, or is exactly the preview of the whole read."""
    world = seeded()
    repo = cas.Repository(world)
    repo.promote("support", [{"subject_kind": "agent_run", "subject_ref": "bob-run-5",
                              "review_annotation_id": review(repo, "bob-run-5")}], "staged")
    other = repo.promote("billing", [{"subject_kind": "agent_run", "subject_ref": "bob-run-0",
                                      "review_annotation_id": review(repo, "bob-run-0")}],
                         "other")["confirm_token"]  # holds no case of Alice's
    files = {k: world.get(k) for k in world.list("")}

    def fresh() -> MemoryBackend:
        backend = MemoryBackend()
        for key, data in files.items():
            backend.put_if_absent(key, data)
        return backend

    n, preview = every_outage(fresh, lambda b: cas.Repository(b).erase(ALICE), lasting)
    assert preview["matched"] and n > 20
    assert len(preview["proposals_to_delete"]) == 3
    assert all(p.startswith("support/") for p in preview["proposals_to_delete"])
    assert f"billing/{other}" in {"/".join(k.split("/")[1::2]) for k in files}


def test_an_erasure_id_is_the_confirm_token_of_exactly_the_documented_bytes(repo):
    """docs/format.md 4.8.3: `ct-` + 32 hex of BLAKE3("cas:confirm-token" NUL canonical
    {"kind": "erase", "request": {after, cases, person, reviews, runs, versions}}), recomputed
    here from the stored records alone, for a first erasure (`after` empty) and a second."""
    from blake3 import blake3

    from cas.format import encoding

    def documented(record, versions, after):
        request = {"after": after, "cases": record.cases, "person": record.person,
                   "reviews": record.reviews, "runs": record.runs, "versions": versions}
        for field in ("after", "cases", "reviews", "runs"):
            assert request[field] == sorted(set(request[field]))
        assert versions == sorted(versions)
        data = encoding.encode({"kind": "erase", "request": request})
        assert data.startswith(b'{"kind":"erase","request":{"after":')
        return "ct-" + blake3(b"cas:confirm-token\x00" + data).hexdigest()[:32]

    build(repo)
    done = []
    for person in (ALICE, BOB):
        preview = repo.erase(person)
        record = repo.erase(person, preview["confirm_token"])
        versions = [[v["dataset"], v["number"]] for v in preview["versions_to_retire"]]
        assert record.id == preview["confirm_token"] == documented(record, versions, done)
        done = sorted(done + [record.id])
    assert len(done) == 2


def test_an_erasure_waits_for_one_that_started_before_it(repo, monkeypatch):
    """Two erasures never purge at once (each could delete a pack the other has written and
    not yet published): one that finds an older erasure's lease waits for it, and if it is
    still at work after `wait`, refuses (ERASURE_IN_PROGRESS) having changed nothing; of two
    that see each other, the older goes on."""
    build(repo)
    preview = repo.erase(ALICE)
    other = leases.acquire(repo.context, leases.ERASURE, "erase", erasure="e-other")
    listing = {k: repo.backend.get(k) for k in repo.backend.list("") if not
               k.startswith("leases/")}
    with pytest.raises(cas.Aborted) as info:
        repo.erase(ALICE, preview["confirm_token"], wait=0.2)
    assert info.value.reason == "ERASURE_IN_PROGRESS"
    assert {k: repo.backend.get(k) for k in repo.backend.list("")
            if not k.startswith("leases/")} == listing
    other.release()
    # one that started after it (its lease is younger) is not waited for: it waits instead
    later = cas.Repository(repo.backend, time=lambda: time.time() + 100)
    younger = leases.acquire(later.context, leases.ERASURE, "erase", erasure="e-younger")
    record = repo.erase(ALICE, preview["confirm_token"], wait=0.2)
    assert record.cases == preview["cases"]
    with pytest.raises(cas.Aborted):
        leases.erasing(later.context, "e-younger-2", wait=0.0).release()
    younger.release()
