"""gc beside writers, deterministically: a gc runs at every storage call of a commit, a commit
whose writer merges small packs and pack indexes, a promotion and its seal, an import and a
review batch; each writer runs at every storage call of a gc; and a merging writer runs at
every storage call of another.
Afterwards every sealed version is complete and fsck is clean, on a local directory and on S3.

The garbage is the dangerous kind (issue 10): a case a deleted version held, in a pack old
enough to collect, that a writer adds again - it finds the case stored and reuses it. gc runs
"in the future" (the repository's time source), so every pack is past its grace period, the
writer's own fresh packs included; only the lease protocol (cas/leases.py) keeps them.
"""

from __future__ import annotations

import shutil
import time
import uuid

import pytest

import cas
import cas.storage.maintenance
import cas.storage.refs
from cas.errors import Aborted, CasError
from cas.storage.backends import backend_for
from support.backends import Interleave
from support.sample_cases import read_all_items as all_items

X = {"input": "the case a deleted version held", "person": "pat", "tenant": "acme"}
RUNS = [{"run_id": f"run-{i}", "tenant": "acme", "person": "pat", "input": f"task {i}",
         "output": f"answer {i}", "steps": [{"type": "message", "role": "user",
                                             "content": f"task {i}"}]} for i in range(3)]
NEW_RUN = {"run_id": "run-new", "tenant": "acme", "input": "new", "steps": []}
REVIEWER = "Rita <rita@example.com>"
COUNTS: dict[str, int] = {}  # interleavings run, by test id (printed by the last test)
# On S3 every call costs a request, so the S3 runs take every S3_STRIDE-th call (all of them
# locally); the calls skipped differ only in which request comes first.
S3_STRIDE = 8


def future(backend, seconds: float = 5.0) -> cas.Repository:
    """The repository as a gc (or writer) `seconds` in the future sees it: every pack is old."""
    return cas.Repository(backend, time=lambda: time.time() + seconds)


def build_seed(repo: cas.Repository) -> list[str]:
    repo.create_dataset("ds", author="a", admission="direct")
    repo.commit("ds", base=0, add=[X, {"input": "kept 1"}, {"input": "kept 2"}], author="a")
    repo.commit("ds", base=1, remove=[cas.encode_case(X).case_id], author="a")
    repo.delete_version("ds", 1, author="a")  # X is garbage now, in an old pack
    repo.import_runs(list(RUNS), author="a")
    saved = repo.add_reviews([{"run_id": r["run_id"], "metric": "dataset_eligibility",
                               "label": "reviewed"} for r in RUNS], reviewer=REVIEWER)
    token = saved["confirm_token"]
    ann = repo.add_reviews([{"run_id": r["run_id"], "metric": "dataset_eligibility",
                             "label": "reviewed"} for r in RUNS], token,
                           reviewer=REVIEWER)["annotation_ids"]
    repo.create_dataset("promo", author="a", admission="direct")
    preview = repo.promote("promo", [subject(0, ann[0]), subject(1, ann[1])], "seed-1", author="a")
    repo.seal("promo", preview["confirm_token"], author="a")
    removal = repo.remove("promo", [preview["proposed"]["added"][0]], "seed-2", author="a")
    repo.seal("promo", removal["confirm_token"], author="a")
    repo.delete_version("promo", 1, author="a")  # run-0's case is garbage now
    return ann


def subject(i: int, annotation: str) -> dict:
    return {"subject_kind": "agent_run", "subject_ref": f"run-{i}",
            "review_annotation_id": annotation}


# -- the writers --------------------------------------------------------------------------
def op_commit(repo, ann):
    head = repo.head("ds")
    return repo.commit("ds", base=head, add=[X, {"input": "brand new"}], author="w")


def op_promote_and_seal(repo, ann):
    preview = repo.promote("promo", [subject(0, ann[0]), subject(2, ann[2])],
                           f"again-{uuid.uuid4().hex}", author="w")
    return repo.seal("promo", preview["confirm_token"], author="w").version


def op_import(repo, ann):
    return repo.import_runs([dict(NEW_RUN), dict(RUNS[0])], author="w")


def op_review(repo, ann):
    req = [{"run_id": "run-2", "metric": "quality", "label": "good"}]
    token = repo.add_reviews(req, reviewer=REVIEWER)["confirm_token"]
    return repo.add_reviews(req, token, reviewer=REVIEWER)


def op_commit_merging(repo, ann, dataset="ds", add=(X, {"input": "brand new"}), retry=False):
    """A commit whose writer merges the small packs into one and the pack indexes into a
    multi-pack index (the thresholds are lowered for it: the seed has a handful of packs), or
    the indexes alone when someone else is at work (maintenance.maintain)."""
    maintenance = cas.storage.maintenance
    saved = maintenance.AUTO_MULTI_INDEX_AT, maintenance.MERGE_MULTI_INDEXES_AT
    maintenance.AUTO_MULTI_INDEX_AT, maintenance.MERGE_MULTI_INDEXES_AT = 2, 1
    try:
        return repo.commit(dataset, base=repo.head(dataset), add=list(add), author="w",
                           retry=retry)
    finally:
        maintenance.AUTO_MULTI_INDEX_AT, maintenance.MERGE_MULTI_INDEXES_AT = saved


WRITERS = {"commit": op_commit, "promote+seal": op_promote_and_seal, "import": op_import,
           "review": op_review, "commit+merge": op_commit_merging}


def expect(op: str, repo: cas.Repository, result) -> None:
    """What a writer that succeeded must have left behind, readable."""
    x = cas.encode_case(X).case_id
    if op.startswith("commit"):
        assert repo.case("ds", result.number, x).input == X["input"]
    elif op == "promote+seal":
        assert result is not None and result.item_count == 2
        for case_id in all_items(repo, "promo", result.number):
            repo.case("promo", result.number, case_id)
    elif op == "import":
        assert repo.run("run-new").input == "new"
    else:
        assert [r.label for r in repo.reviews("run-2") if r.metric == "quality"] == ["good"]


def check_consistent(backend) -> None:
    repo = cas.Repository(backend)
    report = repo.fsck()
    assert report.ok, [p for p in report.problems if p.severity == "error"]
    for name in repo.datasets():
        for number in repo.refs.version_numbers(name):
            if repo.backend.exists(f"datasets/{name}/deleted/{number:010d}"):
                continue
            for case_id in all_items(repo, name, number):
                repo.case(name, number, case_id)


def allowed_failure(exc: Exception, gc_report) -> bool:
    """A writer may fail because of a gc only with a retryable ABORTED that says so - or, for a
    seal, because the gc collected its (by then stale) proposal, as documented."""
    if isinstance(exc, Aborted) and exc.reason == "GC_IN_PROGRESS":
        return True
    return (isinstance(exc, CasError) and exc.reason in ("PROPOSAL_NOT_FOUND", "PROPOSAL_STALE")
            and gc_report is not None and getattr(gc_report, "proposals_deleted", 0) > 0)


# -- backends ---------------------------------------------------------------------------------
class LocalSeeds:
    stride = 1

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.seed = tmp_path / "seed"
        self.ann = build_seed(cas.init(str(self.seed)))
        self.n = 0

    def fresh(self):
        self.n += 1
        target = self.tmp / f"r{self.n}"
        shutil.copytree(self.seed, target)
        return backend_for(str(target)), backend_for(str(target))


class S3Seeds:
    stride = S3_STRIDE

    def __init__(self, seaweed, tmp_path, monkeypatch):
        monkeypatch.setenv("CAS_CACHE_DIR", str(tmp_path / "cache"))
        self.server = seaweed
        url = seaweed.url()
        self.ann = build_seed(cas.init(url))
        self.seed = backend_for(url)
        self.keys = {k: self.seed.get(k) for k in self.seed.list("")}

    def fresh(self):
        url = self.server.url()
        target = backend_for(url)
        for key, data in self.keys.items():
            target.put_if_absent(key, data)
        return target, backend_for(url)


@pytest.fixture(params=["local", "s3"])
def seeds(request, tmp_path, monkeypatch):
    if request.param == "local":
        return LocalSeeds(tmp_path)
    return S3Seeds(request.getfixturevalue("seaweed"), tmp_path, monkeypatch)


def calls_of(seeds, run) -> int:
    """How many storage calls `run(backend)` makes on a fresh copy."""
    backend, _ = seeds.fresh()
    probe = Interleave(backend)
    run(probe)
    return probe.calls


@pytest.mark.parametrize("op", list(WRITERS))
def test_a_gc_at_every_storage_call_of_a_writer(seeds, op, request):
    writer = WRITERS[op]
    total = calls_of(seeds, lambda b: writer(cas.Repository(b), seeds.ann))
    assert total >= 10
    outcomes = {"ran": 0, "deferred": 0, "failed": 0}
    # the merging writer's calls are mostly its commit's (interleaved above): on S3, every
    # other stride of them
    stride = seeds.stride * (2 if op == "commit+merge" and seeds.stride > 1 else 1)
    points = range(1, total + 1, stride)
    for k in points:
        backend, other = seeds.fresh()
        collector = future(other)
        wrapped = Interleave(backend, k, lambda: collector.gc(grace=0, wait=0))
        repo = cas.Repository(wrapped)
        try:
            result = writer(repo, seeds.ann)
        except Exception as exc:  # noqa: BLE001 - which failures are allowed is the point
            assert allowed_failure(exc, wrapped.outcome), (k, exc)
            outcomes["failed"] += 1
        else:
            expect(op, cas.Repository(other), result)
        report = wrapped.outcome
        assert report is not None, k
        outcomes["deferred" if report.deferred else "ran"] += 1
        check_consistent(other)
        future(other).gc(grace=0, wait=0)  # and a gc once the writer is done loses nothing
        check_consistent(other)
    # Both kinds of interleaving happened: a gc that ran (before the writer's lease, or after
    # it was released) and one that found the writer at work and deferred.
    assert outcomes["ran"] and outcomes["deferred"], outcomes
    COUNTS[request.node.name] = len(points)


@pytest.mark.parametrize("op", ["commit", "promote+seal", "import"])
def test_a_writer_at_every_storage_call_of_a_gc(seeds, op, request):
    writer = WRITERS[op]
    total = calls_of(seeds, lambda b: future(b).gc(grace=0, wait=0))
    assert total >= 10
    outcomes = {"ok": 0, "aborted": 0}
    points = range(1, total + 1, seeds.stride)
    for k in points:
        backend, other = seeds.fresh()
        results = []

        def intrude():
            try:
                results.append(writer(cas.Repository(other), seeds.ann))
            except Aborted as exc:
                assert exc.reason == "GC_IN_PROGRESS", exc
                results.append(exc)
        wrapped = Interleave(backend, k, intrude)
        future(wrapped).gc(grace=0, wait=0)
        assert len(results) == 1, k
        if isinstance(results[0], Aborted):
            outcomes["aborted"] += 1
        else:
            outcomes["ok"] += 1
            expect(op, cas.Repository(other), results[0])
        check_consistent(other)
    assert outcomes["ok"], outcomes
    COUNTS[request.node.name] = len(points)


def test_the_merging_writer_does_merge(tmp_path):
    """What the interleavings of "commit+merge" exercise: alone, that commit merges every
    (small) pack of the seed and its own into one, and lookups search its index alone."""
    seeds = LocalSeeds(tmp_path)
    backend, _ = seeds.fresh()
    assert len(cas.Repository(backend).store.pack_ids()) > 3
    op_commit_merging(cas.Repository(backend), seeds.ann)
    fresh = cas.Repository(backend)
    assert len(fresh.store.pack_ids()) == 1
    assert [r.packs for r in fresh.store.indexes()] == [fresh.store.pack_ids()]
    check_consistent(backend)


@pytest.mark.parametrize("where,rival", [("local", "promo"), ("s3", "promo"), ("local", "ds")])
def test_a_merging_writer_at_every_storage_call_of_another(where, rival, tmp_path, monkeypatch,
                                                           request):
    """Two writers that both merge packs, the second at every storage call of the first: at
    most one merges (the other sees its lease, or it sees the other's), neither fails, and
    every object of every pack either started with stays readable. With a `rival` on the
    same dataset the first commits with retry: where the second takes its number, it flushes
    again after its own merge (CI once caught that writer indexing the pack it merged away)."""
    seeds = LocalSeeds(tmp_path) if where == "local" else S3Seeds(
        request.getfixturevalue("seaweed"), tmp_path, monkeypatch)
    merges: list[bool] = []
    real = cas.storage.maintenance.merge_packs

    def counted(store, pids, lease):
        result = real(store, pids, lease)
        merges.append(result is not None)
        return result
    monkeypatch.setattr(cas.storage.maintenance, "merge_packs", counted)
    lost_claims = []  # a writer's claim of a number another took first: it retries
    claim = cas.storage.refs.RefsLog.append_version

    def claimed(self, record):
        won = claim(self, record)
        lost_claims.append(not won)
        return won
    monkeypatch.setattr(cas.storage.refs.RefsLog, "append_version", claimed)
    other_cases = ({"input": "the other writer's"}, {"input": "and its second"})
    retry = rival == "ds"
    total = calls_of(seeds, lambda b: op_commit_merging(cas.Repository(b), seeds.ann))
    points = range(1, total + 1, seeds.stride * 2)
    for k in points:
        backend, other = seeds.fresh()
        results = []
        wrapped = Interleave(backend, k, lambda: results.append(op_commit_merging(
            cas.Repository(other), seeds.ann, rival, other_cases)))
        first = op_commit_merging(cas.Repository(wrapped), seeds.ann, retry=retry)
        assert len(results) == 1, k
        expect("commit", cas.Repository(other), first)
        seen = cas.Repository(other)
        assert seen.case(rival, results[0].number,
                         cas.encode_case(other_cases[0]).case_id).input == other_cases[0]["input"]
        if retry and first.number > results[0].number:  # the rival's number came first:
            # the first built on it, so it holds the rival's case as well
            assert seen.case(rival, first.number, cas.encode_case(other_cases[0]).case_id)
        check_consistent(other)
    assert True in merges and False in merges, merges  # some merged, some gave way
    assert any(lost_claims) == retry, "a retry happened exactly where the rival shares the dataset"
    COUNTS[request.node.name] = len(points)


def erase_pat(backend) -> object:
    """An erasure of the person the seed's runs and cases name (X, run-0..run-2): it rewrites
    the packs holding them, writing each new pack and index before deleting the old ones."""
    repo = cas.Repository(backend)
    token = repo.erase("pat", author="e")["confirm_token"]
    return repo.erase("pat", token, author="e")


class Killed(Exception):
    pass


def erase_pat_killed(backend) -> str:
    """The same erasure, killed once it purged the person's bytes (before it redacts the log
    records): left pending, for the next writer to finish."""
    from cas.repo import erasure

    def killed(*args):
        raise Killed()
    redact, erasure._redact = erasure._redact, killed
    try:
        erase_pat(backend)
    except Killed:
        return "pending"
    finally:
        erasure._redact = redact
    raise AssertionError("the erasure was not killed")


REWRITERS = {"merge": lambda backend, ann: op_commit_merging(cas.Repository(backend), ann),
             "erasure": lambda backend, ann: erase_pat(backend),
             "killed erasure": lambda backend, ann: erase_pat_killed(backend)}


def check_live(backend) -> None:
    """fsck clean, and every case of every active version readable (an erasure retires the
    versions that held the person's cases: reading those is refused, as it must be)."""
    repo = cas.Repository(backend)
    report = repo.fsck()
    assert report.ok, [p for p in report.problems if p.severity == "error"]
    for name in repo.datasets():
        for number in repo.refs.version_numbers(name):
            if not repo.backend.exists(f"datasets/{name}/deleted/{number:010d}") and \
                    repo.version_state(name, number) == "ACTIVE":
                for case_id in all_items(repo, name, number):
                    repo.case(name, number, case_id)


@pytest.mark.parametrize("rival", list(REWRITERS))
def test_a_pack_rewrite_at_every_storage_call_of_a_gc(rival, tmp_path, monkeypatch, request):
    """issue 32: a merge of small packs, or an erasure's rewrite, replacing packs at every
    storage call of a gc. gc used to stop with NOT_FOUND "no such key packs/....idx" (a pack
    it listed was replaced before it read the index): it skips such a pack, whose live
    objects are in the pack that replaced it. And an erasure at work beside gc's sweep used
    to delete gc's new pack between the pack and its index (an unpublished pack holding
    erased objects), leaving an index with no pack and live tree nodes lost: it leaves it to
    the gc, which purges the erasure once its packs are published. gc never fails, nothing
    live is lost, the person is gone."""
    seeds = LocalSeeds(tmp_path)
    merges: list[bool] = []
    real = cas.storage.maintenance.merge_packs

    def counted(store, pids, lease):
        result = real(store, pids, lease)
        merges.append(result is not None)
        return result
    monkeypatch.setattr(cas.storage.maintenance, "merge_packs", counted)
    total = calls_of(seeds, lambda b: future(b).gc(grace=0, wait=0))
    assert total >= 50
    for k in range(1, total + 1):
        backend, other = seeds.fresh()
        results = []
        wrapped = Interleave(backend, k, lambda: results.append(REWRITERS[rival](other,
                                                                                 seeds.ann)))
        future(wrapped).gc(grace=0, wait=0)  # never NOT_FOUND, never any error
        assert len(results) == 1, k
        if rival == "merge":
            expect("commit", cas.Repository(other), results[0])
        else:  # (a pending erasure's bytes too: gc purges what every pending plan names)
            blob = b"".join(other.get(key) for key in other.list(""))
            assert b'"pat"' not in blob and b"task 0" not in blob, k
        check_live(other)  # (a pending erasure is a notice: docs/concepts.md, "fsck")
        cas.Repository(other).finish_erasures()
        future(other).gc(grace=0, wait=0)  # and the next gc loses nothing either
        check_live(other)
    if rival == "merge":  # merged before the gc published its lease, gave way after
        assert True in merges and False in merges, merges
    COUNTS[request.node.name] = total


def test_zz_report_interleavings(capsys):
    """Prints how many interleavings the tests above ran (run with -s to see it)."""
    with capsys.disabled():
        total = sum(COUNTS.values())
        if COUNTS:
            print(f"\ninterleavings: {total} ({', '.join(f'{k}: {v}' for k, v in COUNTS.items())})")
    assert all(v >= 5 for v in COUNTS.values())
