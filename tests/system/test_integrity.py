"""Damage and leftovers that must never read as absence, nor hide a person from an erasure:
a lost or damaged person index, a flipped byte in a pack index, a damaged staged proposal, and
a re-import writing the same pack as one gc is deleting."""

from __future__ import annotations

import shutil
import time

import pytest

import cas
from cas.format.keys import PERSON_TABLES, SHARDS, index_key, parse_person_table_key, person_shard
from cas.storage import maintenance, person_index
from cas.storage.backends import backend_for
from support.backends import Interleave
from support.person_files import to_records

PERSON = "dana-4e1f"
RUNS = [{"run_id": f"dana-run-{i}", "tenant": "acme", "person": PERSON,
         "input": f"dana's private note {i}", "steps": []} for i in range(3)]
OTHER = {"run_id": "olaf-run", "tenant": "acme", "person": "olaf", "input": "olaf", "steps": []}
REVIEWER = "Rita <rita@example.com>"


def build(location) -> tuple[cas.Repository, str]:
    """Dana's runs promoted into a version, Olaf's run too; returns the repo and Dana's case."""
    repo = cas.init(location)
    repo.import_runs([dict(r) for r in RUNS] + [dict(OTHER)], author="a")
    req = [{"run_id": r["run_id"], "metric": "dataset_eligibility", "label": "reviewed"}
           for r in RUNS + [OTHER]]
    token = repo.add_reviews(req, reviewer=REVIEWER)["confirm_token"]
    ann = repo.add_reviews(req, token, reviewer=REVIEWER)["annotation_ids"]
    repo.create_dataset("ds", author="a")
    subjects = [{"subject_kind": "agent_run", "subject_ref": r["run_id"],
                 "review_annotation_id": a} for r, a in zip(RUNS + [OTHER], ann)]
    preview = repo.promote("ds", subjects, "k1", author="a")
    repo.seal("ds", preview["confirm_token"], author="a")
    dana = next(c for c in repo.items("ds", 1).items if repo.case("ds", 1, c).person == PERSON)
    return repo, dana


def no_trace(location) -> None:
    backend = backend_for(location)
    for key in backend.list(""):
        data = backend.get(key)
        assert PERSON.encode() not in data and b"private note" not in data, key


def erase(repo):
    token = repo.erase(PERSON)["confirm_token"]
    return repo.erase(PERSON, token)


def dana_index_files(repo, layout: str) -> list[str]:
    """The person index files that list Dana's objects: the person tables of their packs, or
    with layout "records" (the repository converted to what a cas from before person tables
    wrote) the person index records of Dana's shard."""
    shard = person_shard(repo.store.person_digest(PERSON))
    if layout == "records":
        assert to_records(repo.backend)
        return list(repo.backend.list(f"persons/{shard}/"))
    return [key for key in repo.backend.list(PERSON_TABLES)
            if shard in parse_person_table_key(key)[1]]


@pytest.mark.parametrize("layout", ["table", "records"])
@pytest.mark.parametrize("damage", ["deleted", "damaged"])
def test_a_lost_person_index_file_is_reported_and_the_erasure_still_finds_everything(
        tmp_path, damage, layout):
    repo, _ = build(str(tmp_path))
    files = dana_index_files(repo, layout)
    assert files
    for key in files:
        if damage == "deleted":
            (tmp_path / ".cas" / key).unlink()
        elif layout == "records":
            (tmp_path / ".cas" / key).write_bytes(b'{"digest":"b3:00","record":{}}')
        else:  # one byte of Dana's rows: the header still reads, the shard's check fails
            data = bytearray((tmp_path / ".cas" / key).read_bytes())
            shard = person_shard(repo.store.person_digest(PERSON))
            data[person_index.shard_span(bytes(data), shard, key)[0] + 40] ^= 0x01
            (tmp_path / ".cas" / key).write_bytes(bytes(data))
    report = cas.open(str(tmp_path)).fsck()
    assert not report.ok
    assert any(p.where in files for p in report.problems if p.severity == "error")
    repo = cas.open(str(tmp_path))
    preview = repo.erase(PERSON)
    assert len(preview["cases"]) == 3 and len(preview["runs"]) == 3  # read from the packs
    record = repo.erase(PERSON, preview["confirm_token"])
    assert len(record.cases) == 3 and record.retired
    no_trace(str(tmp_path))
    assert cas.open(str(tmp_path)).run("olaf-run").person == "olaf"


@pytest.mark.parametrize("layout", ["table", "records"])
def test_a_pack_without_person_index_files_is_scanned(tmp_path, layout):
    """Repositories written before packs recorded their shards (and packs whose person table
    is gone): the erasure reads the packs."""
    repo, _ = build(str(tmp_path))
    for key in dana_index_files(repo, layout):
        repo.backend.delete(key)
    for key in list(repo.backend.list(SHARDS)):
        repo.backend.delete(key)
    assert len(erase(cas.open(str(tmp_path))).cases) == 3
    no_trace(str(tmp_path))


def flip_a_digest_byte(tmp_path, repo, case_id: str) -> str:
    """Flip one byte of `case_id` in the digest column of the index that holds it."""
    pack = repo.store.locate(case_id)[0][len("packs/"):-len(".pack")]
    path = tmp_path / ".cas" / index_key(pack)
    data = bytearray(path.read_bytes())
    at = data.index(bytes.fromhex(case_id[3:]))
    data[at + 31] ^= 0x01
    path.write_bytes(bytes(data))
    return index_key(pack)


def test_a_flipped_byte_in_an_index_is_data_loss_not_absence(tmp_path):
    repo, dana = build(str(tmp_path))
    damaged = flip_a_digest_byte(tmp_path, repo, dana)
    fresh = cas.open(str(tmp_path))
    with pytest.raises(cas.DataLoss) as read:
        fresh.case("ds", 1, dana)
    assert damaged in read.value.message or read.value.fields.get("where") == damaged
    with pytest.raises(cas.DataLoss):  # an erasure preview refuses rather than under-count
        cas.open(str(tmp_path)).erase(PERSON)
    from click.testing import CliRunner

    from cas_cli.main import cli
    result = CliRunner().invoke(cli, ["--repo", str(tmp_path), "case", "ds", "1", dana])
    assert result.exit_code == 7, result.output


def test_a_damaged_staged_proposal_never_blocks_an_erasure(tmp_path):
    repo, _ = build(str(tmp_path))
    ann = repo.reviews("dana-run-0")[0].annotation_id
    repo.create_dataset("other", author="a")
    staged = repo.promote("other", [{"subject_kind": "agent_run", "subject_ref": "dana-run-0",
                                     "review_annotation_id": ann}], "k-other", author="a")
    tree = staged["proposed"]["content_digest"]
    # lose the proposed tree's root node (as an over-eager gc once could): rewrite its pack
    located = repo.store.locate(tree)[0][len("packs/"):-len(".pack")]
    from cas.digest import to_bytes
    maintenance.rewrite_pack(repo.store, located, {to_bytes(tree)})
    record = erase(cas.open(str(tmp_path)))
    assert record.proposals_deleted >= 1
    assert not list(repo.backend.list("datasets/other/proposals/"))
    no_trace(str(tmp_path))


def test_a_reimport_of_the_pack_a_gc_is_deleting(tmp_path):
    """An import killed between its pack and its index left the pack; a gc deletes it while
    the same import runs again (the same runs make the same pack, by name): the import either
    lands with its pack, or gives up with a retryable ABORTED. Never an index without a pack."""
    seed = tmp_path / "seed"
    cas.init(str(seed))
    runs = [{"run_id": f"r{i}", "tenant": "t", "input": "x" * 100, "steps": []}
            for i in range(5)]

    class KilledAtIndex(Exception):
        pass

    class Killing:
        def __init__(self, inner):
            self.inner, self.url = inner, inner.url

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def put_if_absent(self, key, data):
            if key.startswith("packs/") and key.endswith(".idx"):
                raise KilledAtIndex(key)
            return self.inner.put_if_absent(key, data)
    with pytest.raises(KilledAtIndex):
        cas.Repository(Killing(backend_for(str(seed)))).import_runs(
            [dict(r) for r in runs], author="a")
    for key in list(backend_for(str(seed)).list("leases/")):
        backend_for(str(seed)).delete(key)  # the killed process's lease (dead once it exits)
    total = None
    outcomes = {"landed": 0, "aborted": 0}
    k = 1
    while total is None or k <= total:
        target = tmp_path / f"r{k}"
        shutil.copytree(seed, target)
        other = backend_for(str(target))
        collector = cas.Repository(other, time=lambda: time.time() + 5)
        wrapped = Interleave(backend_for(str(target)), k,
                             lambda: collector.gc(grace=0, wait=0))
        try:
            cas.Repository(wrapped).import_runs([dict(r) for r in runs], author="a")
            outcomes["landed"] += 1
            assert cas.Repository(other).run("r3").input == "x" * 100
        except cas.Aborted as exc:
            assert exc.reason == "GC_IN_PROGRESS", exc
            outcomes["aborted"] += 1
        total = total or wrapped.calls
        report = cas.Repository(other).fsck()
        assert report.ok, [p for p in report.problems if p.severity == "error"]
        k += 1
    assert outcomes["landed"]
