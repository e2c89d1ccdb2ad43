"""Deletion (cas/repo/deletion.py): a version or dataset nothing cites is deleted, a cited
one never is, even against concurrent citations and withdrawals; a deleted number is never
used again; the Python API on both backends (`cas version delete`, `cas dataset delete`:
tests/cli/test_version.py, tests/cli/test_dataset.py)."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas.format.keys import deleted_key, tombstone_key, version_key, withdrawal_key
from cas.format.records import (DatasetTombstone, ScoreWithdrawal, VersionTombstone,
                                format_record_file)
from cas.repo import deletion
from cas.repo import scores as scoresmod
from cas.storage.backends.memory import MemoryBackend
from support.citing import ADA, keys, snapshot, two_versions
from support.sample_cases import plain_cases

ops = st.lists(st.tuples(st.sampled_from(["seal", "score", "delete", "delete-dataset"]),
                         st.integers(1, 6)), max_size=25)


@pytest.fixture
def repo(location, monkeypatch):
    return two_versions(location, monkeypatch)


def test_a_cited_version_or_dataset_is_not_deletable(repo):
    s = repo.record_score(repo.pin("evals", 1), metric="acc", value=0.5)
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.delete_version("evals", 1)
    assert info.value.reason == "VERSION_CITED"
    assert info.value.fields["cited_by"] == s.score_id
    assert info.value.message == (
        f"version evals@1 is cited by score {s.score_id} (acc=0.5 on evals@1, recorded "
        f"{s.recorded_at} by Ada <ada@example.com>); a cited version cannot be deleted")
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.delete_dataset("evals")
    assert info.value.reason == "VERSION_CITED" and s.score_id in info.value.message
    assert repo.version("evals", 1) and repo.datasets() == ["evals"]
    assert keys(repo, "datasets/evals/deleted/") == []
    assert not repo.backend.exists(tombstone_key("evals"))
    assert repo.fsck().ok


def test_a_version_cited_by_an_experiment_is_not_deletable(repo):
    repo.create_experiment("evals", 2, "baseline")
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.delete_version("evals", 2)
    assert info.value.message == (
        "version evals@2 is cited by experiment 'baseline' (datasets/evals/experiments/"
        "0000000001, over evals@2); a cited version cannot be deleted")
    repo.delete_version("evals", 1)  # nothing cites version 1


def test_a_deleted_number_is_never_reused(repo):
    v2 = repo.version("evals", 2)
    tomb = repo.delete_version("evals", 2)
    assert tomb == VersionTombstone(dataset="evals", number=2, content_digest=v2.content_digest,
                                    item_count=v2.item_count, author="Ada <ada@example.com>",
                                    deleted_at=tomb.deleted_at)
    with pytest.raises(cas.NotFound) as info:
        repo.version("evals", 2)
    assert info.value.reason == "VERSION_DELETED"
    assert info.value.message == (f"version 2 of dataset 'evals' was deleted "
                                  f"({tomb.deleted_at} by Ada <ada@example.com>)")
    assert repo.head("evals") == 1 and repo.refs.last_number("evals") == 2
    # sealing on the head after deleting the newest version gets the next number
    v3 = repo.commit("evals", base=1, add=plain_cases(1, "third"))
    assert (v3.number, v3.parent) == (3, 1)
    # a writer still on base 1 conflicts with 3 instead of reusing 2
    with pytest.raises(cas.VersionConflict) as conflict:
        repo.commit("evals", base=1, add=plain_cases(1, "stale"))
    assert conflict.value.head == 3
    assert [v.number for v in repo.versions("evals").versions] == [3, 1]
    page = repo.versions("evals", limit=1)
    assert [v.number for v in page.versions] == [3] and page.next_before == 3
    assert [v.number for v in repo.versions("evals", before=3).versions] == [1]
    with pytest.raises(cas.NotFound) as info:
        repo.delete_version("evals", 2)
    assert info.value.message.startswith("version 2 of dataset 'evals' was already deleted")
    # every version deleted: the next seal is a first version with a new number
    repo.delete_version("evals", 3)
    repo.delete_version("evals", 1)
    assert repo.head("evals") == 0 and repo.versions("evals").versions == []
    v4 = repo.commit("evals", base=None, add=plain_cases(1, "fresh"))
    assert (v4.number, v4.parent) == (4, None)
    report = repo.fsck()
    assert report.ok, report.problems
    assert report.versions == 1


def test_a_stale_claim_of_a_deleted_number_is_withdrawn(repo):
    """A writer that chose number 3 just before version 3 was deleted never keeps it."""
    v3 = repo.commit("evals", base=2, add=plain_cases(1, "x"))
    repo.delete_version("evals", 3)
    assert repo.refs.append_version(v3) is False
    assert not repo.backend.exists(version_key("evals", 3))


def test_deleting_a_dataset(repo):
    repo.create_dataset("other", admission="direct")
    tomb = repo.delete_dataset("evals")
    assert (tomb.dataset, tomb.head, tomb.author) == ("evals", 2, "Ada <ada@example.com>")
    assert repo.datasets() == ["other"]
    msg = f"dataset 'evals' was deleted ({tomb.deleted_at} by Ada <ada@example.com>)"
    for read in (lambda: repo.dataset("evals"), lambda: repo.version("evals", 1),
                 lambda: repo.scores("evals"), lambda: repo.experiments("evals"),
                 lambda: repo.pin("evals", 1)):
        with pytest.raises(cas.NotFound) as info:
            read()
        assert info.value.reason == "DATASET_DELETED" and info.value.message == msg
    with pytest.raises(cas.AlreadyExists) as info:
        repo.create_dataset("evals", admission="direct")
    assert info.value.reason == "DATASET_DELETED"
    assert info.value.message == (f"dataset 'evals' was deleted ({tomb.deleted_at} by Ada "
                                  "<ada@example.com>); the name of a deleted dataset cannot "
                                  "be used again")
    with pytest.raises(cas.NotFound) as info:
        repo.delete_dataset("evals")
    assert info.value.message.startswith("dataset 'evals' was already deleted")
    # the tombstone and one fence per citation log stay; every other record is gone
    assert keys(repo, "datasets/evals/") == ["datasets/evals/experiments/0000000001",
                                             "datasets/evals/scores/0000000001",
                                             "datasets/evals/tombstone"]
    report = repo.fsck()
    assert report.ok, report.problems
    assert report.datasets == 1


def test_an_interrupted_dataset_deletion_is_finished_by_running_it_again(repo):
    # as if the process died right after writing the tombstone
    tomb = DatasetTombstone(dataset="evals", head=2, author="x", deleted_at="t")
    repo.backend.put_if_absent(tombstone_key("evals"), format_record_file(tomb))
    assert repo.datasets() == []
    with pytest.raises(cas.AlreadyExists):
        repo.create_dataset("evals", admission="direct")
    report = repo.fsck()
    assert report.ok and any("interrupted deletion" in p.message for p in report.problems)
    assert repo.delete_dataset("evals") == tomb
    assert keys(repo, "datasets/evals/") == ["datasets/evals/experiments/0000000001",
                                             "datasets/evals/scores/0000000001",
                                             "datasets/evals/tombstone"]
    assert repo.fsck().ok


def test_a_citation_that_races_a_deletion_wins(repo, monkeypatch):
    """A score claimed after the deletion scanned the log (and before its fence) is found by
    the fence: the deletion is withdrawn and refused, and the version stays."""
    real_scan = deletion._scan

    def scan_then_score(r, name, target, what, rollback=None, **fields):
        heads = real_scan(r, name, target, what, rollback, **fields)
        repo.record_score(repo.pin("evals", 1), metric="late", value=1)
        return heads

    monkeypatch.setattr(deletion, "_scan", scan_then_score)
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.delete_version("evals", 1)
    assert info.value.fields["cited_by"] == "datasets/evals/scores/0000000001#0"
    assert not repo.backend.exists(deleted_key("evals", 1))
    assert repo.version("evals", 1).number == 1
    assert repo.fsck().ok


def test_a_citation_after_the_tombstone_is_refused(repo):
    """While a version is being deleted (tombstone written, file not yet removed), nothing
    new may cite it."""
    v = repo.version("evals", 1)
    tomb = VersionTombstone(dataset="evals", number=1, content_digest=v.content_digest,
                            item_count=v.item_count, author="x", deleted_at="t")
    repo.backend.put_if_absent(deleted_key("evals", 1), format_record_file(tomb))
    pin = cas.Pin("evals", 1, v.content_digest)
    with pytest.raises(cas.NotFound) as info:
        repo.record_score(pin, metric="acc", value=1)
    assert info.value.message == "version 1 of dataset 'evals' is being deleted"
    with pytest.raises(cas.NotFound):
        repo.create_experiment("evals", 1, "base")
    with pytest.raises(cas.NotFound):
        repo.resolve_pin(pin)
    assert repo.scores("evals") == [] and repo.experiments("evals") == []
    # the interrupted deletion is reported as a notice and finished by running it again
    assert [p.severity for p in repo.fsck().problems if "being deleted" in p.message] == \
        ["notice"]
    repo.delete_version("evals", 1)
    assert not repo.backend.exists(version_key("evals", 1))


@given(ops)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_versions_cited_by_any_score_are_never_deletable(steps):
    repo = cas.Repository.create(MemoryBackend())
    repo.create_dataset("d", admission="direct")
    live: dict[int, str] = {}   # version -> content_digest
    used: set[int] = set()
    cited: set[int] = set()
    deleted_dataset = False
    for op, n in steps:
        if deleted_dataset:
            break
        if op == "seal":
            base = repo.head("d")
            v = repo.commit("d", base=base or None, add=plain_cases(1, f"{len(used)}"))
            assert v.number not in used and v.number > max(used, default=0)
            used.add(v.number)
            live[v.number] = v.content_digest
        elif op == "score" and n in live:
            repo.record_score(repo.pin("d", n), metric="m", value=n)
            cited.add(n)
        elif op == "delete":
            if n in cited:
                with pytest.raises(cas.FailedPrecondition) as info:
                    repo.delete_version("d", n)
                assert info.value.reason == "VERSION_CITED"
                assert repo.version("d", n).content_digest == live[n]
            elif n in live:
                repo.delete_version("d", n)
                del live[n]
            else:
                with pytest.raises(cas.NotFound):
                    repo.delete_version("d", n)
        elif op == "delete-dataset":
            if cited:
                with pytest.raises(cas.FailedPrecondition):
                    repo.delete_dataset("d")
            else:
                repo.delete_dataset("d")
                deleted_dataset = True
    if not deleted_dataset:
        assert {v.number for v in repo.versions("d", limit=100).versions} == set(live)
        assert {s.version for s in repo.scores("d")} == cited
    assert repo.fsck().ok


def test_withdrawing_a_batch_lets_its_version_be_deleted(repo):
    a = repo.record_scores(repo.pin("evals", 1), [{"metric": "acc", "value": 1}])
    b = repo.record_score(repo.pin("evals", 2), metric="acc", value=0)
    batch = scoresmod.parse_batch_id(a[0].batch)
    assert batch == ("evals", 1)
    w = scoresmod.withdraw_batch(repo.context, "evals", a[0].batch, "wrong rubric")
    assert w == ScoreWithdrawal(dataset="evals", batch=1, reason="wrong rubric", author=ADA,
                                withdrawn_at=w.withdrawn_at)
    assert repo.backend.get(withdrawal_key("evals", 1)) == format_record_file(w)
    assert [(s.score_id, s.withdrawn) for s in repo.scores("evals")] == [
        (a[0].score_id, True), (b.score_id, False)]
    before = snapshot(repo)
    with pytest.raises(cas.AlreadyExists) as info:
        scoresmod.withdraw_batch(repo.context, "evals", 1, "again")
    assert info.value.reason == "SCORE_BATCH_ALREADY_WITHDRAWN"
    assert info.value.message == (
        f"score batch datasets/evals/scores/0000000001 was already withdrawn ({w.withdrawn_at} "
        f"by {ADA}: wrong rubric); a batch is withdrawn once")
    for batch, reason, error in ((9, "x", cas.NotFound), ("datasets/other/scores/0000000001",
                                                          "x", cas.InvalidArgument),
                                 (2, "", cas.InvalidArgument), (2, "x" * 4097,
                                                                cas.InvalidArgument)):
        with pytest.raises(error):
            scoresmod.withdraw_batch(repo.context, "evals", batch, reason)
    assert snapshot(repo) == before
    with pytest.raises(cas.FailedPrecondition):
        repo.delete_version("evals", 2)  # batch 2 still cites it
    repo.delete_version("evals", 1)  # cited only by a withdrawn batch
    assert repo.backend.exists(a[0].batch)  # the batch stays as it was
    assert [s.withdrawn for s in repo.scores("evals")] == [True, False]


def test_a_withdrawal_racing_a_deletion_never_frees_a_cited_version(repo, monkeypatch):
    """The deletion scans, a new batch citing the version arrives, and the old one is
    withdrawn: the fence finds the new batch, so the version stays."""
    old = repo.record_score(repo.pin("evals", 1), metric="acc", value=1)
    real_scan = deletion._scan

    def scan_then_race(ctx, name, target, what, rollback=None, **fields):
        with pytest.raises(cas.FailedPrecondition):  # the old batch still cites: refused
            real_scan(ctx, name, target, what, rollback, **fields)
        scoresmod.withdraw_batch(repo.context, "evals", 1, "wrong rubric")
        heads = real_scan(ctx, name, target, what, rollback, **fields)  # now passes
        repo.record_score(repo.pin("evals", 1), metric="late", value=2)
        return heads

    monkeypatch.setattr(deletion, "_scan", scan_then_race)
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.delete_version("evals", 1)
    assert info.value.fields["cited_by"] == "datasets/evals/scores/0000000002#0"
    assert repo.version("evals", 1).number == 1
    assert [s.withdrawn for s in repo.scores("evals")] == [True, False]
    assert old.batch == "datasets/evals/scores/0000000001"


def test_withdrawals_and_deletions_in_threads(repo):
    """Many threads withdraw, score and delete at once: whatever the order, a version that a
    batch not withdrawn cites is never deleted."""
    for _ in range(3):
        repo.record_score(repo.pin("evals", 1), metric="acc", value=1)
    errors: list[BaseException] = []

    def attempt(call):
        try:
            call()
        except cas.CasError:
            pass
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    calls = [lambda n=n: scoresmod.withdraw_batch(repo.context, "evals", n, "redo")
             for n in (1, 2, 3)]
    calls += [lambda: repo.record_score(repo.pin("evals", 1), metric="late", value=1),
              lambda: repo.delete_version("evals", 1), lambda: repo.delete_version("evals", 1)]
    threads = [threading.Thread(target=attempt, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    live = [s for s in repo.scores("evals") if not s.withdrawn and s.version == 1]
    deleted = repo.refs.read_version_tombstone("evals", 1) is not None and \
        not repo.backend.exists("datasets/evals/versions/0000000001")
    assert not (live and deleted)


def test_a_dataset_cited_only_by_withdrawn_batches_can_be_deleted(repo):
    repo.record_score(repo.pin("evals", 1), metric="acc", value=1)
    scoresmod.withdraw_batch(repo.context, "evals", 1, "redo")
    repo.delete_dataset("evals")
    # the batch and its withdrawal stay, beside the tombstone and the fences
    assert sorted(repo.backend.list("datasets/evals/")) == [
        "datasets/evals/experiments/0000000001", "datasets/evals/scores/0000000001",
        "datasets/evals/scores/0000000002", "datasets/evals/tombstone",
        "datasets/evals/withdrawn/0000000001"]
    with pytest.raises(cas.NotFound):
        scoresmod.withdraw_batch(repo.context, "evals", 1, "again")
