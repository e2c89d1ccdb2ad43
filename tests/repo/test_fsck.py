"""fsck (cas/repo/fsck.py): flip one byte anywhere in a repository and fsck names it; every kind
of damage is reported."""

from __future__ import annotations

import json
import os
import random
import re

import msgspec
import pytest

import cas
from cas.format.keys import (admission_key, cassette_log_key, eligibility_key, import_key,
                             index_key, lease_key, meta_key, pack_key, score_batch_key,
                             settings_key, version_key, withdrawal_key)
from cas.format.records import (TYPES, CassetteEntry, CassetteExchange, CassetteLog, CassetteRecord,
                                DatasetRecord, Eligibility, Fence, Lease, ReviewBatch, RunAdmission,
                                RunImport, Score, ScoreBatch, ScoreWithdrawal, Settings,
                                VersionRecord, format_record_file, parse_record_file,
                                parse_record_file_of, request_key)
from cas.repo import cassettes, sealing
from cas.storage import leases
from cas.storage import pack as packfmt
from cas.storage.backends.memory import MemoryBackend
from support.backends import every_outage
from support.erasure_world import ALICE, BOB, seeded
from support.lifecycle import OPERATOR
from support.sample_cases import plain_cases


def build(path) -> cas.Repository:
    repo = cas.init(str(path))
    repo.create_dataset("alpha", description="a", admission="direct")
    repo.create_dataset("beta", admission="direct")
    repo.edit_dataset("beta", tags=["t"])
    big = [{"input": f"case-{i}", "output": {"n": i}} for i in range(90)]
    repo.commit("alpha", base=None, add=big)  # more than a leaf holds: inner nodes
    repo.commit("alpha", base=1, add=[{"input": "extra"}],
                remove=repo.items("alpha", 1, limit=30).items)
    repo.commit("alpha", base=2, add=[{"input": "third"}])
    repo.commit("beta", base=None, add=[{"input": "b1"}, {"input": "b2"}])
    repo.commit("beta", base=1, add=[{"input": "b3"}])
    return repo


def files(root: str) -> list[str]:
    out = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            out.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return sorted(out)


def names_for(root: str, key: str) -> set[str]:
    """What a report may name for damage in `key`: the key, or a digest stored in it."""
    data = open(os.path.join(root, key), "rb").read()
    names = {key}
    if key.endswith(".pack"):
        names |= names_for(root, key[:-len(".pack")] + ".idx")
    elif key.endswith(".idx"):
        names |= {"b3:" + e.digest.hex() for e in packfmt.parse_index(data)[1]}
    elif not key.startswith("persons/packs/"):  # (a person table is named by its key alone)
        record = parse_record_file_of(data, tuple(TYPES.values()), key)
        names.add(cas.digest.digest_of(type(record).__struct_config__.tag,
                                       cas.format.encoding.encode(record)))
        if isinstance(record, VersionRecord):
            names.add(record.content_digest)
    return names


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = tmp_path_factory.mktemp("fsck")
    repo = build(path)
    report = repo.fsck()
    assert report.ok, report.problems
    assert (report.datasets, report.versions) == (2, 5)
    return str(path), repo.backend.root


def baseline(repo) -> set:
    """The problems of the undamaged repository: only notices (see
    test_repository.test_commit_writes_no_unreferenced_objects for why there are any)."""
    report = cas.Repository(repo.backend).fsck()
    assert report.ok, report.problems
    return {(p.severity, p.where) for p in report.problems}


def new_problems(repo, before: set) -> list:
    report = cas.Repository(repo.backend).fsck()
    return [(p.severity, p.where) for p in report.problems
            if (p.severity, p.where) not in before]


def test_clean_repository_is_ok(built):
    path, _ = built
    report = cas.open(path).fsck()
    assert report.ok
    # only tree nodes a commit wrote and a later step replaced, one notice per pack
    assert all(p.severity == "notice" and p.where.startswith("packs/") and re.fullmatch(
        r"\d+ unreferenced objects? \(\d+ bytes: (\d+ tree\.(leaf|node)(, |\)))+; `cas gc` .*",
        p.message) for p in report.problems), report.problems
    assert report.objects > 90 and report.packs == 5


def test_flip_one_byte_in_every_file_is_named(built):
    path, root = built
    keys = files(root)
    assert "config" in keys
    assert sum(k.endswith(".pack") for k in keys) == 5
    assert sum(k.endswith(".idx") for k in keys) == 5
    assert sum("/versions/" in k for k in keys) == 5 and sum("/meta/" in k for k in keys) == 3
    rnd = random.Random(20240601)
    clean = cas.open(path).fsck().problems
    checked = 0
    for key in keys:
        file = os.path.join(root, key)
        original = open(file, "rb").read()
        allowed = names_for(root, key)
        n = len(original)
        positions = sorted({0, 1, n // 2, n - 2, n - 1} | {rnd.randrange(n) for _ in range(6)})
        for pos in positions:
            for mask in (0x01, rnd.randint(1, 255)):
                damaged = bytearray(original)
                damaged[pos] ^= mask
                repo = cas.open(path)  # a fresh handle: no state from before the damage
                with open(file, "wb") as f:
                    f.write(damaged)
                try:
                    report = repo.fsck()
                finally:
                    with open(file, "wb") as f:
                        f.write(original)
                errors = [p for p in report.problems if p.severity == "error"]
                assert errors, f"flip {mask:#x} at {pos} of {key} went unnoticed"
                assert any(p.where in allowed for p in errors), (key, pos, errors)
                checked += 1
    assert checked > 300
    assert cas.open(path).fsck().problems == clean


def test_truncated_and_emptied_files_are_named(built):
    path, root = built
    for key in files(root):
        file = os.path.join(root, key)
        original = open(file, "rb").read()
        allowed = names_for(root, key)
        for damaged in (original[:-1], original[: len(original) // 2], b"", original + b"\0"):
            repo = cas.open(path)
            with open(file, "wb") as f:
                f.write(damaged)
            try:
                report = repo.fsck()
            finally:
                with open(file, "wb") as f:
                    f.write(original)
            errors = [p for p in report.problems if p.severity == "error"]
            assert any(p.where in allowed for p in errors), (key, len(damaged), errors)
    assert cas.open(path).fsck().ok


def _pack_of(repo, digest):
    return repo.store.locate(digest)[0][len("packs/"):-len(".pack")]


@pytest.fixture
def repo(tmp_path):
    return build(tmp_path)


def test_missing_index(repo):
    root = repo.store.locate(repo.version("alpha", 1).content_digest)
    pid = root[0][len("packs/"):-len(".pack")]
    listed = {"b3:" + e.digest.hex()
              for e in packfmt.parse_index(repo.backend.get(index_key(pid)))[1]}
    assert repo.backend.delete(index_key(pid))
    report = cas.Repository(repo.backend).fsck()
    assert not report.ok
    errors = [p for p in report.problems if p.severity == "error"]
    assert any(p.where in listed and "missing" in p.message for p in errors), errors
    assert any(p.where == pack_key(pid) and p.severity == "notice" for p in report.problems)


def test_missing_pack(repo):
    pid = _pack_of(repo, repo.version("beta", 2).content_digest)
    assert repo.backend.delete(pack_key(pid))
    report = cas.Repository(repo.backend).fsck()
    assert not report.ok
    assert any(p.where == index_key(pid) and p.severity == "error" for p in report.problems)


def test_deleted_version_in_the_middle_is_a_gap(repo):
    assert repo.backend.delete("datasets/alpha/versions/0000000002")
    report = cas.Repository(repo.backend).fsck()
    assert not report.ok
    gap = [p for p in report.problems if p.where == "datasets/alpha/versions/"]
    assert gap and gap[0].severity == "error" and "[2]" in gap[0].message


def test_deleted_metadata_revision_is_a_gap(repo):
    assert repo.backend.delete("datasets/beta/meta/0000000001")
    report = cas.Repository(repo.backend).fsck()
    assert any(p.where == "datasets/beta/meta/" and p.severity == "error" and "[1]" in p.message
               for p in report.problems)


def test_version_without_dataset_metadata(repo):
    for key in list(repo.backend.list("datasets/beta/meta/")):
        repo.backend.delete(key)
    report = cas.Repository(repo.backend).fsck()
    assert any(p.where == "datasets/beta/" and p.severity == "error" for p in report.problems)


def test_version_record_moved_to_another_number(repo):
    data = repo.backend.get("datasets/beta/versions/0000000002")
    assert repo.backend.put_if_absent("datasets/beta/versions/0000000003", data)
    report = cas.Repository(repo.backend).fsck()
    assert any(p.where == "datasets/beta/versions/0000000003" and p.severity == "error"
               for p in report.problems), report.problems


@pytest.mark.parametrize("key", ["stray.txt", "packs/notes", "packs/abc.pack.bak",
                                 "datasets/alpha/extra/0000000001",
                                 "datasets/alpha/versions/latest", "datasets/alpha/versions/12",
                                 "datasets/readme", "config.old"])
def test_unexpected_key_reported(repo, key):
    assert repo.backend.put_if_absent(key, b"hello")
    report = cas.Repository(repo.backend).fsck()
    assert not report.ok
    assert any(p.where == key and p.severity == "error" for p in report.problems), report.problems


def test_a_key_of_every_family_is_expected(tmp_path):
    """The unexpected-key check follows the key layout (cas.format.keys.FAMILIES): a key of any
    family is checked as a record of it, never reported as unexpected, even when damaged."""
    from cas.format.keys import FAMILIES
    repo = cas.init(str(tmp_path))
    examples = {"config": (), "person.shards": ("a" * 64, {"0f"}), "person.index": ("0f", "a" * 64),
                "person.table": ("a" * 64, {"0f"}),
                "pack": ("b" * 64,), "pack.index": ("b" * 64,), "multi.index": ("c" * 64,),
                "run.admission": (1,), "run.import": (1,), "review.batch": (1,),
                "settings": (1,), "eligibility": (1,), "metrics": (1,),
                "dataset.tombstone": ("d",), "proposal": ("d", "ct-" + "e" * 32),
                "idempotency": ("d", "f" * 64), "lease": ("gc", "0123"),
                "erasure": ("ct-" + "1" * 32,), "erasure.plan": ("ct-" + "2" * 32,),
                "log.index": ("runs", 0, 1, "3" * 64)}
    keys = [f.format(*examples.get(f.name, ("d", 1))) for f in FAMILIES]  # ("d", 1): d@1
    for key in keys:
        repo.backend.put_if_absent(key, b"damaged")
    unexpected = {p.where for p in repo.fsck().problems
                  if p.message == "unexpected key in the repository"}
    assert unexpected.isdisjoint(keys)
    assert repo.backend.put_if_absent("datasets/d/unknown/0000000001", b"damaged")
    assert "datasets/d/unknown/0000000001" in {
        p.where for p in cas.Repository(repo.backend).fsck().problems
        if p.message == "unexpected key in the repository"}


def test_pack_without_index_is_only_a_notice(repo):
    before = baseline(repo)
    pack, _ = packfmt.format_pack([(1, b'{"format":1,"input":"orphan","kind":"case"}')])
    pid = packfmt.pack_id(pack)
    assert repo.backend.put_if_absent(pack_key(pid), pack)
    report = cas.Repository(repo.backend).fsck()
    assert report.ok
    assert new_problems(repo, before) == [("notice", pack_key(pid))]
    message = next(p.message for p in report.problems if p.where == pack_key(pid))
    assert message.startswith("pack has no index") and "its 1 object (43 bytes)" in message


def test_unreferenced_objects_are_notices(repo):
    before = baseline(repo)
    with repo.store.writer() as w:
        digest = w.add(cas.Case(input="nobody refers to me"))
    report = cas.Repository(repo.backend).fsck()
    assert report.ok
    pkey = repo.store.locate(digest)[0]
    assert new_problems(repo, before) == [("notice", pkey)]
    size = repo.store.locate(digest)[1].length
    assert [p.message for p in report.problems if p.where == pkey] == [
        f"1 unreferenced object ({size} bytes: 1 case); `cas gc` reclaims them once the pack "
        "is older than the grace period (default 24h)"]


class _FailingImportClaim:
    """A backend whose run-import claim fails: an import interrupted after its pack landed."""

    def __init__(self, inner):
        self.inner, self.url = inner, inner.url

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def put_if_absent(self, key, data):
        if key.startswith("runs/imports/"):
            raise OSError("killed")
        return self.inner.put_if_absent(key, data)


def test_an_interrupted_import_is_one_notice_per_pack_not_one_per_run(tmp_path):
    import json

    from click.testing import CliRunner

    from cas_cli.main import cli
    repo = cas.init(str(tmp_path))
    runs = [{"run_id": f"r-{i}", "tenant": "t", "steps": []} for i in range(3000)]
    with pytest.raises(OSError):
        cas.Repository(_FailingImportClaim(repo.backend)).import_runs(runs)
    report = cas.open(str(tmp_path)).fsck()
    assert report.ok and report.unreferenced == 3000 and report.unreferenced_bytes > 3000 * 30
    notices = [p for p in report.problems if p.severity == "notice"]
    assert len(notices) == len(repo.store.pack_ids()) == 1, notices
    assert notices[0].message.startswith(f"3000 unreferenced objects ({report.unreferenced_bytes}"
                                          " bytes: 3000 run); `cas gc` reclaims them")
    result = CliRunner().invoke(cli, ["--repo", str(tmp_path), "fsck"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"notice: {notices[0].where}: 3000 unref")
    assert lines[1].endswith(": ok")
    out = json.loads(CliRunner().invoke(cli, ["--repo", str(tmp_path), "--json", "fsck"]).stdout)
    assert out["unreferenced"] == {"objects": 3000, "bytes": report.unreferenced_bytes}
    assert len(out["problems"]) == 1


def test_missing_config(repo):
    handle = cas.Repository(repo.backend)
    assert repo.backend.delete("config")
    report = handle.fsck()
    assert any(p.where == "config" and p.severity == "error" for p in report.problems)


def test_progress_reports(repo):
    calls = []
    cas.Repository(repo.backend).fsck(progress=lambda *a: calls.append(a))
    assert {c[0] for c in calls} >= {"packs", "versions"}


# -- cross-checks: deletions that leave no gap in any numbering --------------------------------


def build_lifecycle(repo) -> cas.Repository:
    """Runs of two people, one review batch, two sealed promotions and a staged one, two
    settings revisions, an experiment a score names, and cases naming people committed directly."""
    repo.import_runs([{"run_id": f"{who}-{i}", "tenant": "acme", "person": person,
                       "input": f"{who} asks {i}", "output": i,
                       "steps": [{"type": "tool_call", "tool_name": "crm",
                                  "arguments": {"i": i}, "result": [i]}]}
                      for who, person in (("alice", ALICE), ("bob", BOB)) for i in range(3)])
    repo.set_content_policy(["metadata"])
    repo.set_content_policy(["tool_results"])
    reviewed = ["alice-0", "bob-0", "bob-1", "bob-2"]
    req = [{"run_id": r, "metric": "dataset_eligibility", "label": "reviewed"} for r in reviewed]
    anns = dict(zip(reviewed, repo.add_reviews(
        req, confirm_token=repo.add_reviews(req)["confirm_token"])["annotation_ids"]))

    def subjects(*runs):
        return [{"subject_kind": "agent_run", "subject_ref": r, "review_annotation_id": anns[r]}
                for r in runs]
    repo.create_dataset("evals", admission="direct")
    repo.seal("evals", repo.promote("evals", subjects("alice-0", "bob-0"), "k1")["confirm_token"])
    repo.seal("evals", repo.promote("evals", subjects("bob-1"), "k2")["confirm_token"])
    repo.promote("evals", subjects("bob-2"), "k3")  # staged, never sealed
    repo.create_dataset("direct", admission="direct")
    repo.commit("direct", base=None, add=[{"input": "a", "person": ALICE},
                                          {"input": "b", "person": BOB}, {"input": "nobody"}])
    repo.create_experiment("evals", 2, "baseline")
    repo.record_score(repo.pin("evals", 2), metric="acc", value=0.5, experiment="baseline")
    return repo


@pytest.fixture
def lifecycle(tmp_path, monkeypatch):
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "user-config.json"))
    repo = build_lifecycle(cas.init(str(tmp_path / "repo")))
    report = cas.Repository(repo.backend).fsck()
    assert report.ok and not report.problems, report.problems
    return repo


def problems_of(repo, severity="error") -> list[tuple[str, str]]:
    return [(p.where, p.message) for p in cas.Repository(repo.backend).fsck().problems
            if p.severity == severity]


def test_a_healthy_repository_stays_clean_through_erasure_and_gc(lifecycle):
    repo = lifecycle
    assert list(repo.backend.list("persons/"))  # there is a person index to check
    repo.erase(ALICE, repo.erase(ALICE)["confirm_token"])  # retires evals@1, @2 and direct@1
    repo.seal("evals", repo.remove("evals", [], "k4")["confirm_token"])  # evals@3, active
    assert problems_of(repo) == []
    repo.gc(grace=0)
    report = cas.Repository(repo.backend).fsck()
    assert report.ok and problems_of(repo) == [], report.problems
    assert all(p.where.startswith(("packs/", "datasets/evals/proposals/"))
               for p in report.problems), report.problems


def test_deleting_the_only_review_batch_is_an_error(lifecycle):
    repo = lifecycle
    assert list(repo.backend.list("reviews/")) == ["reviews/0000000001"]
    assert repo.backend.delete("reviews/0000000001")
    errors = problems_of(repo)
    # the log index names the batch too
    [(index, message)] = [(w, m) for w, m in errors if w.startswith("indexes/reviews/")]
    assert "indexes records up to 1, which reviews/0000000001 is not" in message
    errors.remove((index, message))
    assert {w for w, _ in errors} == {"datasets/evals/versions/0000000001",
                                      "datasets/evals/versions/0000000002"}, errors
    assert all("which no review batch holds" in m for _, m in errors)
    # the staged proposal names one too: a notice (sealing it would make it an error)
    staged = [w for w, m in problems_of(repo, "notice") if "no review batch holds" in m]
    assert len(staged) == 1 and "/proposals/" in staged[0]


def test_a_run_import_deleted_and_its_runs_collected_is_an_error(lifecycle):
    repo = lifecycle
    assert repo.backend.delete("runs/imports/0000000001")
    repo.gc(grace=0)  # nothing reaches the runs now: gc deletes them
    errors = [(w, m) for w, m in problems_of(repo) if not (
        w.startswith("indexes/runs/") and "which runs/imports/0000000001 is not" in m)]
    assert len(errors) == 4 and all(w == "reviews/0000000001" and "which is missing" in m
                                    for w, m in errors), errors


def test_deleting_an_experiment_a_score_names_is_an_error(lifecycle):
    repo = lifecycle
    assert repo.backend.delete("datasets/evals/experiments/0000000001")
    assert problems_of(repo) == [
        ("datasets/evals/scores/0000000001#0",
         "names experiment 'baseline', which dataset 'evals' does not have")]


def test_deleting_a_settings_revision_is_a_gap(lifecycle):
    repo = lifecycle
    assert repo.backend.delete("settings/0000000001")
    assert problems_of(repo) == [("settings/", "numbers are not contiguous from 1; missing [1]")]


def test_a_missing_idempotency_claim_is_reported(lifecycle):
    from cas.format.keys import idempotency_key
    repo = lifecycle
    sealed = repo.version("evals", 1).proposal
    assert repo.backend.delete(idempotency_key("evals", "k1"))
    assert problems_of(repo) == []  # a mirror in progress looks the same: a notice
    notices = problems_of(repo, "notice")
    assert [w for w, m in notices] == [f"datasets/evals/proposals/{sealed}"]
    assert "sealed as version 1" in notices[0][1] and "claim of its key" in notices[0][1]
    assert repo.backend.delete(idempotency_key("evals", "k3"))  # the staged proposal's
    assert problems_of(repo) == []
    assert sorted(m.split(":")[0] for _, m in problems_of(repo, "notice")) == [
        f"sealed as version 1, but the idempotency claim of its key "
        f"({idempotency_key('evals', 'k1')}) is missing",
        f"staged proposal without the idempotency claim of its key "
        f"({idempotency_key('evals', 'k3')})"]


def _person_file_of(repo, person, case, layout):
    """(key, rows (keyed person, digest), keyed person, pack id) of the person index file
    listing `case` (in its pack) under `person`: the pack's person table, or with layout
    "records" the person index record of its shard (a repository from before person tables,
    made by converting this one's)."""
    from cas.format.keys import person_index_key, person_shard
    from cas.format.records import PersonIndex
    from support.person_files import tables, to_records
    pid = repo.store.locate(case)[0][len("packs/"):-len(".pack")]
    keyed = repo.store.person_digest(person)
    if layout == "table":
        key, rows = tables(repo.backend)[pid]
        return key, rows, keyed, pid
    assert to_records(repo.backend) and problems_of(repo) == []
    key = person_index_key(person_shard(keyed), pid)
    record = parse_record_file(repo.backend.get(key), PersonIndex, key)
    return key, [(e.person, e.digest) for e in record.entries], keyed, pid


def _write_person_file(repo, key, pid, rows, layout) -> str:
    from cas.format.records import PersonIndex, PersonObject, format_record_file
    from support.person_files import write_table
    if layout == "table":
        return write_table(repo.backend, pid, rows)
    repo.backend.replace(key, format_record_file(PersonIndex(pack=pid, entries=[
        PersonObject(person=p, digest=d) for p, d in sorted(rows)])))
    return key


@pytest.mark.parametrize("layout", ["table", "records"])
def test_a_lost_or_damaged_person_index_is_an_error(lifecycle, layout):
    repo = lifecycle
    case = cas.encode_case({"input": "a", "person": ALICE}).case_id
    key, _, keyed, pid = _person_file_of(repo, ALICE, case, layout)
    original = repo.backend.get(key)
    assert repo.backend.delete(key)
    # (a record of the pack's shards, where there is one, may report it too)
    errors = [(w, m) for w, m in problems_of(repo) if not w.startswith("persons/shards/")]
    assert {w for w, _ in errors} == {key}, errors
    assert any(m.startswith(f"missing: pack {pid} holds ") and
               f"in shard {keyed[3:5]} (e.g. " in m for _, m in errors), errors
    damaged = bytearray(original)
    damaged[len(damaged) // 2] ^= 0x01
    repo.backend.replace(key, bytes(damaged))
    errors = [(w, m) for w, m in problems_of(repo) if not w.startswith("persons/shards/")]
    assert {w for w, _ in errors} == {key} and any(m.startswith("unreadable: pack " + pid)
                                                   for _, m in errors), errors
    repo.backend.replace(key, original)
    assert problems_of(repo) == []


@pytest.mark.parametrize("layout", ["table", "records"])
def test_a_missing_or_misattributed_person_index_entry_is_an_error(lifecycle, layout):
    repo = lifecycle
    case = cas.encode_case({"input": "a", "person": ALICE}).case_id
    key, rows, keyed, pid = _person_file_of(repo, ALICE, case, layout)
    original = repo.backend.get(key)
    kept = [row for row in rows if row[1] != case]
    assert len(kept) == len(rows) - 1
    key = _write_person_file(repo, key, pid, kept, layout)
    errors = problems_of(repo)
    assert [w for w, _ in errors] == [key], errors
    assert errors[0][1].startswith(f"does not list {case} of pack {pid} under its person {keyed}")
    # the entry under another person (of the same shard): missing for one, wrong for the other
    other = keyed[:5] + ("0" if keyed[5] != "0" else "1") + keyed[6:]
    key = _write_person_file(repo, key, pid, sorted(kept + [(other, case)]), layout)
    messages = [m for w, m in problems_of(repo) if w == key]
    assert len(messages) == 2 and messages[1] == (
        f"lists {case} under {other}, a person that object does not name"), messages
    repo.backend.replace(key, original)
    assert problems_of(repo) == []


def test_fsck_checks_the_new_records(location, monkeypatch):
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    r = cas.init(location)
    r.create_dataset("evals", admission="direct")
    v = r.commit("evals", base=None, add=plain_cases(2))
    r.record_score(r.pin("evals", 1), metric="acc", value=1)
    assert r.fsck().ok
    # a gap in the score log, a score citing a version that does not exist, a bad fence
    bad = ScoreBatch(dataset="evals", number=3, scores=[Score(
        dataset="evals", version=7, content_digest=v.content_digest, metric="m", value=1,
        author="x", recorded_at="t")])
    r.backend.put_if_absent(score_batch_key("evals", 3), format_record_file(bad))
    r.backend.put_if_absent("datasets/evals/experiments/0000000001", format_record_file(
        Fence(dataset="evals", log="scores", number=1, reason="r", author="x", written_at="t")))
    r.backend.put_if_absent("datasets/evals/scores/notes", b"x")
    problems = {(p.where, p.message) for p in r.fsck().problems if p.severity == "error"}
    assert problems == {
        ("datasets/evals/scores/", "numbers are not contiguous from 1; missing [2]"),
        ("datasets/evals/scores/0000000003#0", "cites evals@7, which is missing or deleted"),
        ("datasets/evals/experiments/0000000001", "fence of the 'scores' log"),
        ("datasets/evals/scores/notes", "unexpected key under datasets/"),
    }


def test_fsck_accepts_a_withdrawn_batch_of_a_deleted_version(mem, monkeypatch):
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    repo = mem
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=plain_cases(2))
    repo.record_score(repo.pin("evals", 1), metric="acc", value=1)
    repo.withdraw_batch("evals", 1, "redo")
    repo.delete_version("evals", 1)
    assert [p for p in repo.fsck().problems if p.severity == "error"] == []


def test_fsck_reports_an_unknown_or_changed_admission_rule(mem):
    mem.create_dataset("evals")
    changed = DatasetRecord(name="evals", revision=2, author="a", edited_at="t",
                            admission="direct")
    assert mem.refs.append_meta(changed)
    [problem] = [p for p in mem.fsck().problems if p.severity == "error"]
    assert problem.where == meta_key("evals", 2)
    assert "differs from the one the dataset was created with ('reviewed')" in problem.message
    mem.refs.append_meta(DatasetRecord(name="bogus", revision=1, author="a", edited_at="t",
                                       admission="open"))
    assert any("admission 'open' is not a rule; known: reviewed, direct" in p.message
               for p in mem.fsck().problems)


# -- a read the storage could not answer is no verdict ---------------------------------------
@pytest.fixture(scope="module")
def erased_world():
    """The erasure world (tests/support/erasure_world.py) after Alice's erasure: packs, logs,
    log indexes, person tables, retirements, an erasure record, sealed proposals and claims."""
    env = pytest.MonkeyPatch()
    env.setenv("CAS_USER", OPERATOR)
    env.setenv("CAS_CONFIG", os.devnull)
    try:
        backend = seeded()
        repo = cas.Repository(backend)
        repo.erase(ALICE, repo.erase(ALICE)["confirm_token"])
        assert repo.fsck().ok
        return {k: backend.get(k) for k in backend.list("")}
    finally:
        env.undo()


def _memory(files: dict[str, bytes]) -> MemoryBackend:
    backend = MemoryBackend()
    for key, data in files.items():
        backend.put_if_absent(key, data)
    return backend


@pytest.mark.parametrize("lasting", [True, False], ids=["server-gone", "blink"])
def test_an_outage_at_any_read_stops_fsck_with_unavailable_never_a_report(erased_world,
                                                                          lasting):
    """Whichever read fails (the server gone from then on, or one blink), fsck raises
    UNAVAILABLE: never a report calling the unread record damaged, never "ok" without it."""
    n, report = every_outage(lambda: _memory(erased_world), lambda b: cas.Repository(b).fsck(),
                             lasting, strict=True)
    assert report.ok and n > 60


def test_fsck_over_s3_with_the_server_failing_exits_8_naming_the_key(seaweed, tmp_path,
                                                                     monkeypatch):
    """The issue's case: S3 answering 503 part way through `cas fsck` is exit 8 UNAVAILABLE
    naming what could not be read, not exit 7 "fsck found damage"."""
    from click.testing import CliRunner

    from cas_cli.main import cli
    from support.faultproxy import FaultProxy
    monkeypatch.setattr("cas.storage.backends.s3.READ_BACKOFF_S", 0.001)
    monkeypatch.setenv("CAS_CACHE_DIR", str(tmp_path / "cache"))
    with FaultProxy(seaweed.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        url = seaweed.url()
        repo = cas.init(url)
        repo.create_dataset("evals", admission="direct")
        repo.commit("evals", base=None, add=plain_cases(3))
        runner = CliRunner()
        assert runner.invoke(cli, ["--repo", url, "--json", "fsck"]).exit_code == 0
        # the listing answers; then every read of a version record fails
        proxy.plan = lambda method, path, n: "503" if "/versions/" in path else None
        result = runner.invoke(cli, ["--repo", url, "--json", "fsck"])
        assert result.exit_code == 8, result.output
        assert result.stdout == ""
        err = json.loads(result.stderr)["error"]
        assert err["code"] == "UNAVAILABLE" and err["key"] == "datasets/evals/versions/0000000001"
        assert "cannot read 'datasets/evals/versions/0000000001'" in err["message"]
        human = runner.invoke(cli, ["--repo", url, "fsck"])
        assert human.exit_code == 8 and "damage" not in human.output
        assert human.stderr.startswith("cas: error: cannot read 'datasets/evals/versions/")


# -- the MUSTs of single records (docs/format.md 4.6.1.1, 4.7.4, 4.7.4.1, 4.9), issue 32 --------
# Each forges one record with its digest recomputed (format_record_file), as a writer other than
# cas could, next to an honest repository using the same feature.
def _forge(repo, key, record) -> None:
    assert repo.backend.put_if_absent(key, format_record_file(record))


def _about(repo, key, severity="error") -> list[str]:
    return [p.message for p in repo.fsck().problems if p.where == key and p.severity == severity]


def _scored(repo) -> None:
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=plain_cases(2))
    for _ in range(3):
        repo.record_score(repo.pin("evals", 1), metric="acc", value=1, author="a")


def test_fsck_names_a_score_withdrawal_without_a_reason(mem):
    _scored(mem)
    mem.withdraw_batch("evals", 1, "scored with the wrong rubric", author="a")
    assert mem.fsck().problems == []
    for number, reason in ((2, ""), (3, " \n")):
        key = withdrawal_key("evals", number)
        _forge(mem, key, ScoreWithdrawal(dataset="evals", batch=number, reason=reason,
                                         author="a", withdrawn_at="t"))
        assert _about(mem, key) == [
            f"a withdrawal's reason is 1-4096 characters, not only white space "
            f"(docs/format.md 4.6.1.1); this one has {len(reason)}"]


@pytest.mark.parametrize("accepted", [["reviewed", "accepted"], ["ok", "ok"], []])
def test_fsck_names_eligibility_labels_not_sorted_once(mem, accepted):
    mem.set_eligibility("quality", ["reviewed", "accepted", "reviewed"], author="a")
    assert mem.fsck().problems == []
    _forge(mem, eligibility_key(2), Eligibility(revision=2, metric="quality", accepted=accepted,
                                                author="a", edited_at="t"))
    assert _about(mem, eligibility_key(2)) == [
        f"accepted labels must be at least one, sorted, each once; they are {accepted!r}"]


def test_fsck_names_an_eligibility_metric_that_is_not_text(mem):
    _forge(mem, eligibility_key(1), Eligibility(revision=1, metric="a\nb", accepted=["x"],
                                                author="a", edited_at="t"))
    [message] = _about(mem, eligibility_key(1))
    assert message.startswith("the metric ") and "control character U+000A" in message


def _policies(repo) -> None:
    """Honest: a default, an override, an override following the default, a deleted dataset's."""
    repo.create_dataset("evals", admission="direct")
    repo.create_dataset("gone", admission="direct")
    repo.set_content_policy(["tool_results", "input"], author="a")
    repo.set_content_policy([], author="a", dataset="evals")
    repo.set_content_policy(["metadata"], author="a", dataset="gone")
    repo.set_content_policy(None, author="a", dataset="evals")
    repo.delete_dataset("gone", author="a")
    assert repo.fsck().problems == []


def test_fsck_names_a_repository_default_with_a_null_policy(mem):
    _policies(mem)
    _forge(mem, settings_key(5), Settings(revision=5, withheld=None, author="a", edited_at="t"))
    assert _about(mem, settings_key(5)) == [
        "the repository default's withheld is null: only an override may follow the default; "
        "the default names its classes ([] for none)"]


@pytest.mark.parametrize("dataset", [msgspec.UNSET, "evals"])
def test_fsck_names_an_unknown_content_class(mem, dataset):
    _policies(mem)
    _forge(mem, settings_key(5), Settings(revision=5, withheld=["input", "secrets"], author="a",
                                          edited_at="t", dataset=dataset))
    assert _about(mem, settings_key(5)) == [
        "withholds unknown content class(es) 'secrets'; known: input, output, tool_arguments, "
        "tool_results, metadata"]


def test_fsck_names_content_classes_not_sorted_once(mem):
    _policies(mem)
    _forge(mem, settings_key(5), Settings(revision=5, withheld=["output", "input", "input"],
                                          author="a", edited_at="t"))
    assert _about(mem, settings_key(5)) == [
        "withheld content classes are not sorted, each once"]


def test_an_override_of_a_dataset_that_never_existed_is_a_notice(mem):
    _policies(mem)
    _forge(mem, settings_key(5), Settings(revision=5, withheld=["input"], author="a",
                                          edited_at="t", dataset="ghost"))
    report = mem.fsck()
    assert report.ok and [(p.severity, p.where) for p in report.problems] == [
        ("notice", settings_key(5))]
    assert "'ghost', which has no revision and no tombstone" in report.problems[0].message


def test_a_held_lease_of_every_documented_operation_is_clean(mem):
    _scored(mem)
    for role, operations in leases.OPERATIONS.items():
        for operation in operations:
            fields = {"erasure": "e1"} if role == leases.ERASURE else \
                {"packs": ["5" * 64], "proposals": ["datasets/evals/proposals/ct-x"]} \
                if operation == "gc" else {"packs": ["5" * 64]} if role == leases.GC else {}
            with leases.acquire(mem.context, role, operation, **fields):
                assert mem.fsck().problems == [], (role, operation)


_T0, _T1 = "2026-11-30T12:00:00.000000Z", "2026-11-30T12:05:00.000000Z"


@pytest.mark.parametrize("fields, message", [
    (dict(operation="test"), "a writer lease's operation is one of 'commit', 'promote', "
     "'remove', 'seal', 'import', 'review', 'record cassettes', 'record a suite result', "
     "not 'test'"),
    (dict(role="gc", operation="commit"), "a gc lease's operation is one of 'gc', "
     "'merge small packs', not 'commit'"),
    (dict(role="erasure", operation="gc", erasure="e1"),
     "an erasure lease's operation is one of 'erase', not 'gc'"),
    (dict(host=""), "names no holder: host '', pid 4242"),
    (dict(pid=0), "names no holder: host 'build-7', pid 0"),
    (dict(started_at="2026-11-30T12:00:00Z"), "started_at and expires_at are UTC times "
     "YYYY-MM-DDTHH:MM:SS.ffffffZ; they are '2026-11-30T12:00:00Z' and "
     f"'{_T1}'"),
    (dict(expires_at="2026-02-30T12:00:00.000000Z"), "started_at and expires_at are UTC times "
     f"YYYY-MM-DDTHH:MM:SS.ffffffZ; they are '{_T0}' and '2026-02-30T12:00:00.000000Z'"),
    (dict(started_at=_T1, expires_at=_T0), f"expires at {_T0}, before it started ({_T1})"),
    (dict(packs=["5" * 64]), "packs are a gc lease's, proposals a gc's (not a merge's), and an "
     "erasure lease (only) names its plan"),
    (dict(role="gc", operation="merge small packs", proposals=["p"]), "packs are a gc "
     "lease's, proposals a gc's (not a merge's), and an erasure lease (only) names its plan"),
    (dict(role="erasure", operation="erase"), "packs are a gc lease's, proposals a gc's (not a "
     "merge's), and an erasure lease (only) names its plan"),
    (dict(erasure="e1"), "packs are a gc lease's, proposals a gc's (not a merge's), and an "
     "erasure lease (only) names its plan"),
    (dict(role="gc", operation="gc", packs=["6" * 64, "5" * 64]),
     "packs must be sorted pack ids (64 lowercase hex digits), each once"),
    (dict(role="gc", operation="gc", packs=["pack-1"]),
     "packs must be sorted pack ids (64 lowercase hex digits), each once"),
])
def test_fsck_names_lease_fields_outside_the_documented_values(mem, fields, message):
    record = Lease(**{**dict(id="0123456789abcdef", role="writer", operation="commit",
                             host="build-7", pid=4242, started_at=_T0, expires_at=_T1),
                      **fields})
    key = lease_key(record.role, record.id)
    _forge(mem, key, record)
    assert _about(mem, key) == [message]


# -- every MUST of section 4: cassettes, admissions, direct commits (docs/format.md 9.1) -------
MALLORY = "Mallory <mallory@example.com>"


def _case_of(repo, name: str, number: int, person: str | None) -> str:
    """The id of the case of name@number naming `person` (None: naming nobody)."""
    [found] = [c for c in repo.items(name, number).items
               if repo.context.store.get(c).person == person]
    return found


def _exchanges(n: int) -> list[CassetteExchange]:
    """A call and an HTTP exchange with the request keys a recorder gives them."""
    http = {"method": "GET", "uri": f"https://api.test/{n}", "body": None}
    name = f"GET https://api.test/{n}"
    return [CassetteExchange(adapter="call", name="search", request={"q": n}, response=[n],
                             key=request_key("call", "search", {"q": n})),
            CassetteExchange(adapter="http", name=name, key=request_key("http", name, http),
                             request={**http, "headers": {"accept": "application/json"}},
                             response={"status": {"code": 200}, "headers": {},
                                       "body": {"string": "ok"}})]


def _features(repo) -> None:
    """On the lifecycle repository, honestly: cassettes of cases naming a person and nobody,
    a reviewed dataset with a promotion and a commit that only removes, and a direct commit
    onto a version."""
    bob, nobody = _case_of(repo, "direct", 1, BOB), _case_of(repo, "direct", 1, None)
    cassettes.save(repo.context, str(repo.pin("direct", 1)), "x:y",
                   {bob: _exchanges(1), nobody: _exchanges(2)})
    key = "reviews/0000000001"
    batch = parse_record_file(repo.backend.get(key), ReviewBatch, key)
    ann = {r.run_id: r.annotation_id for r in batch.reviews}
    repo.create_dataset("rev")
    repo.seal("rev", repo.promote("rev", [{"subject_kind": "agent_run", "subject_ref": "bob-0",
                                           "review_annotation_id": ann["bob-0"]}],
                                  "r1")["confirm_token"])
    repo.commit("rev", base=1, remove=repo.items("rev", 1).items)
    repo.commit("direct", base=1, add=[{"input": "c", "person": BOB}])
    assert problems_of(repo) == [] and problems_of(repo, "notice") == []


def _forge_cassette(repo, record: CassetteRecord, number: int) -> str:
    """Store `record` as a writer would (person index, pack, index) and log it as `number`."""
    with repo.context.store.writer() as writer:
        digest = writer.add(record)
    entry = CassetteEntry(case_id=record.case_id, executor=record.executor, cassette=digest)
    assert repo.backend.put_if_absent(cassette_log_key(record.dataset, number), format_record_file(
        CassetteLog(dataset=record.dataset, number=number, entries=[entry], author="a",
                    recorded_at="2026-11-30T12:00:00.000000Z")))
    return digest


def test_a_cassette_naming_another_person_than_its_case_is_an_error(lifecycle):
    repo = lifecycle
    _features(repo)
    bob = _case_of(repo, "direct", 1, BOB)
    digest = _forge_cassette(repo, CassetteRecord(
        dataset="direct", case_id=bob, executor="x:z", person=ALICE, exchanges=_exchanges(3)), 2)
    keyed = repo.context.store.person_digest
    assert problems_of(repo) == [(digest, (
        f"cassette names person {keyed(ALICE)}, but its case {bob} names {keyed(BOB)}: an "
        "erasure of the case's person would not find it (4.10)"))]


def test_a_cassette_exchange_keyed_off_its_request_is_an_error(lifecycle):
    repo = lifecycle
    _features(repo)
    bob = _case_of(repo, "direct", 1, BOB)
    call, http = _exchanges(4)
    # a key of another request, and an HTTP key over the headers too (matching ignores them)
    wrong_call = msgspec.structs.replace(call, key=request_key("call", "search", {"q": 5}))
    wrong_http = msgspec.structs.replace(http, key=request_key("http", http.name, http.request))
    one = _forge_cassette(repo, CassetteRecord(dataset="direct", case_id=bob, executor="x:1",
                                               person=BOB, exchanges=[wrong_call, http]), 2)
    two = _forge_cassette(repo, CassetteRecord(dataset="direct", case_id=bob, executor="x:2",
                                               person=BOB, exchanges=[call, wrong_http]), 3)
    assert sorted(problems_of(repo)) == sorted([
        (one, (f"exchange 0 ('search') has request key {wrong_call.key}, but its request's "
               f"is {call.key} (4.10)")),
        (two, (f"exchange 1 ({http.name!r}) has request key {wrong_http.key}, but its "
               f"request's is {http.key} (4.10)"))])


def test_an_erased_persons_run_back_without_its_admission_is_an_error(lifecycle):
    repo = lifecycle
    repo.erase(ALICE, repo.erase(ALICE)["confirm_token"])
    repo.import_runs([{"run_id": "alice-back", "tenant": "acme", "person": ALICE,
                       "input": "again", "steps": []}], allow_erased_persons=[ALICE])
    assert problems_of(repo) == []
    [key] = repo.backend.list("runs/admissions/")
    original = repo.backend.get(key)
    record = parse_record_file(original, RunAdmission, key)
    keyed = repo.context.store.person_digest(ALICE)
    assert record.persons == [keyed]
    ikey = import_key(record.number)
    [run] = [e.run for e in parse_record_file(repo.backend.get(ikey), RunImport, ikey).runs]
    error = [(ikey, (
        f"run 'alice-back' ({run}) is of person "
        f"{keyed}, whom an erasure deleted, but {admission_key(record.number)} does not admit "
        "that person: an import of an erased person's data needs a run.admission (4.7.2.1)"))]
    # changed to admit someone else, then removed: Alice's run stays, unadmitted
    repo.backend.replace(key, format_record_file(msgspec.structs.replace(
        record, persons=[repo.context.store.person_digest(BOB)])))
    assert problems_of(repo) == error
    assert repo.backend.delete(key)
    assert problems_of(repo) == error
    assert repo.backend.put_if_absent(key, original) and problems_of(repo) == []


def test_a_reviewed_dataset_whose_commit_added_cases_is_an_error(lifecycle, monkeypatch):
    repo = lifecycle
    _features(repo)
    # a writer that did not read the rule: everything it stores is otherwise what a commit is
    read = sealing.datasets.dataset
    monkeypatch.setattr(sealing.datasets, "dataset", lambda ctx, name: msgspec.structs.replace(
        read(ctx, name), admission="direct"))
    repo.commit("rev", base=2, add=[{"input": "unreviewed"}])
    monkeypatch.undo()
    assert problems_of(repo) == [(version_key("rev", 3), (
        "a commit added 1 case(s) to a dataset whose admission is 'reviewed': only a "
        "promotion adds cases there (4.4)"))]


def test_a_commit_whose_provenance_names_another_author_is_an_error(lifecycle, monkeypatch):
    repo = lifecycle
    _features(repo)
    write = sealing._commit_provenance
    monkeypatch.setattr(sealing, "_commit_provenance",
                        lambda ctx, writer, name, base, adds, author:
                        write(ctx, writer, name, base, adds, MALLORY))
    v = repo.commit("direct", base=2, add=[{"input": "d"}])
    repo.create_dataset("first", admission="direct")  # its first commit: the compact form
    w = repo.commit("first", base=None, add=[{"input": "e"}])
    monkeypatch.undo()
    assert problems_of(repo) == [
        (version_key(name, number), (
            f"provenance {prov} gives committed_by {MALLORY!r}, but the commit's author is "
            "'Ada <ada@example.com>': a commit's provenance names its author as each added "
            "case's (4.7.7)"))
        for name, number, prov in (("direct", 3, v.provenance), ("first", 1, w.provenance))]


def test_a_commit_that_added_cases_without_provenance_is_an_error(lifecycle, monkeypatch):
    repo = lifecycle
    _features(repo)
    # a dataset from before admission rules (its record has none): its commits had none
    assert repo.refs.append_meta(DatasetRecord(name="old", revision=1, author="a",
                                               edited_at="2026-11-30T12:00:00.000000Z"))
    monkeypatch.setattr(sealing, "_commit_provenance", lambda *args: None)
    repo.commit("direct", base=2, add=[{"input": "f"}])
    repo.commit("old", base=None, add=[{"input": "g"}])
    monkeypatch.undo()
    assert problems_of(repo) == [(version_key("direct", 3), (
        "a commit added 1 case(s) with no provenance: a dataset created with an admission "
        "rule ('direct') records who committed each case it added (4.7.7)"))]


def test_a_commit_holds_a_commit_lease_whatever_operation_its_version_records(mem, monkeypatch):
    held, acquire = [], leases.acquire

    def recording(ctx, role, operation, *args, **kwargs):
        held.append((role, operation))
        return acquire(ctx, role, operation, *args, **kwargs)

    monkeypatch.setattr(leases, "acquire", recording)
    mem.create_dataset("evals", admission="direct")
    version = mem.commit("evals", base=None, add=plain_cases(1), operation="import csv")
    assert version.operation == "import csv" and held == [(leases.WRITER, "commit")]


def test_a_retirement_an_erasure_names_and_lost_is_an_error(erased_world):
    """A completed erasure record witnesses the versions it retired: losing one of their
    retirement records (the version reads as ACTIVE again, its erased cases gone) is damage."""
    repo = cas.Repository(_memory(erased_world))
    retired = sorted(k for k in erased_world if "/retired/" in k)
    assert retired
    repo.backend.delete(retired[0])
    errors = [p for p in repo.fsck().problems if p.severity == "error"]
    assert retired[0] in {p.where for p in errors}
    [message] = [p.message for p in errors if p.where == retired[0]]
    assert message.startswith("is missing: ") and "was retired by erasure ct-" in message


# -- issue 36: comments, corrections, declared metrics, K reviewers --------------------------------
def test_fsck_names_a_comment_out_of_limits_and_a_null_correction(mem, monkeypatch, tmp_path):
    from cas.format.keys import review_batch_key
    from cas.format.records import ReviewBatch
    from support.lifecycle import run_obj
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "c.json"))
    mem.import_runs([run_obj("r-1")])
    saved = mem.review("r-1", "m", "x", comment="fine", correction=[1], reviewer="a")
    assert [p for p in mem.fsck().problems if p.severity == "error"] == []
    [honest] = mem.reviews("r-1")
    bad = [msgspec.structs.replace(honest, annotation_id=f"ann-{i:032x}", **change)
           for i, change in enumerate(({"comment": "x" * 4097}, {"comment": "a\x00b"},
                                       {"correction": None}))]
    _forge(mem, review_batch_key(2), ReviewBatch(number=2, reviews=bad))
    about = _about(mem, review_batch_key(2))
    assert sum("comment is not 1 to 4096 characters" in m for m in about) == 2
    assert any("correction is null" in m for m in about)
    assert saved["annotation_ids"]


def test_fsck_names_metrics_and_eligibility_rules_outside_the_format(mem):
    from cas.format.keys import metrics_key
    from cas.format.records import Metrics, MetricSpec
    mem.define_metric("tone", ["calm", "curt"], author="a")
    mem.set_eligibility(reviewers=2, rule="majority", author="a")
    assert mem.fsck().problems == []
    _forge(mem, metrics_key(2), Metrics(revision=2, author="a", edited_at="t", metrics=[
        MetricSpec(name="z", labels=["a", "a"]), MetricSpec(name="b", labels=[])]))
    about = _about(mem, metrics_key(2))
    assert any("not sorted by name" in m for m in about)
    assert sum("must have at least one label, each once" in m for m in about) == 2
    _forge(mem, eligibility_key(2), Eligibility(revision=2, metric="m", accepted=["ok"],
                                                author="a", edited_at="t", reviewers=0,
                                                rule="plurality"))
    about = _about(mem, eligibility_key(2))
    assert any("reviewers is 0" in m for m in about) and any("'plurality'" in m for m in about)
    _forge(mem, eligibility_key(3), Eligibility(revision=3, metric="m", accepted=["ok"],
                                                author="a", edited_at="t", reviewers=2))
    assert any("both present" in m for m in _about(mem, eligibility_key(3)))


def test_a_lost_judgment_of_one_of_k_reviewers_is_named_by_the_provenance(mem):
    """Under a rule of two reviewers a promoted case's provenance names both admitting
    judgments: losing the newest review batch (no gap in the log) is damage fsck names, with
    the judgment that is gone (issue 36)."""
    import io

    from support.lifecycle import jsonl, run_obj
    mem.import_runs(io.BytesIO(jsonl(run_obj("r-1", 1))), author=OPERATOR)
    mem.set_eligibility(reviewers=2, author=OPERATOR)
    mem.review("r-1", "dataset_eligibility", "reviewed", reviewer="Ada <ada@example.com>")
    second = mem.review("r-1", "dataset_eligibility", "reviewed",
                        reviewer="Grace <grace@example.com>")["annotation_ids"][0]
    mem.create_dataset("evals", author=OPERATOR)
    preview = mem.promote_reviewed("evals", "k-1", author=OPERATOR)
    mem.seal("evals", preview["confirm_token"], author=OPERATOR)
    assert mem.fsck().ok
    [newest] = sorted(mem.backend.list("reviews/"))[-1:]
    assert mem.backend.delete(newest)
    for key in list(mem.backend.list("indexes/reviews/")):  # the segment would name it too
        mem.backend.delete(key)
    errors = [p for p in mem.fsck().problems if p.severity == "error"]
    assert [p.where for p in errors] == ["datasets/evals/versions/0000000001"], errors
    assert f"names review {second} of run 'r-1'" in errors[0].message
