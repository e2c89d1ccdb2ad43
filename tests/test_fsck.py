"""fsck: flip one byte anywhere in a repository and fsck names it; every kind of damage is reported."""

from __future__ import annotations

import os
import random

import pytest

import cas
from cas import pack as packfmt
from cas.objects import VersionRecord, DatasetRecord, RepoConfig, parse_record_file
from cas.store import index_key, pack_key


def build(path) -> cas.Repository:
    repo = cas.init(str(path))
    repo.create_dataset("alpha", description="a")
    repo.create_dataset("beta")
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
    else:
        type_ = (RepoConfig if key == "config" else
                 VersionRecord if "/versions/" in key else DatasetRecord)
        record = parse_record_file(data, type_, key)
        names.add(cas.digest.digest_of(type_.__struct_config__.tag, cas.encoding.encode(record)))
        if type_ is VersionRecord:
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
    assert all(p.severity == "notice" and p.message.startswith("unreferenced tree.")
               for p in report.problems), report.problems
    assert report.objects > 90 and report.packs == 5


def test_flip_one_byte_in_every_file_is_named(built):
    path, root = built
    keys = files(root)
    assert "config" in keys
    assert sum(k.endswith(".pack") for k in keys) == 5 and sum(k.endswith(".idx") for k in keys) == 5
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


def test_pack_without_index_is_only_a_notice(repo):
    before = baseline(repo)
    pack, _ = packfmt.format_pack([(1, b'{"format":1,"input":"orphan","kind":"case"}')])
    pid = packfmt.pack_id(pack)
    assert repo.backend.put_if_absent(pack_key(pid), pack)
    assert cas.Repository(repo.backend).fsck().ok
    assert new_problems(repo, before) == [("notice", pack_key(pid))]


def test_unreferenced_objects_are_notices(repo):
    before = baseline(repo)
    with repo.store.writer() as w:
        digest = w.add(cas.Case(input="nobody refers to me"))
    assert cas.Repository(repo.backend).fsck().ok
    assert new_problems(repo, before) == [("notice", digest)]


def test_missing_config(repo):
    handle = cas.Repository(repo.backend)
    assert repo.backend.delete("config")
    report = handle.fsck()
    assert any(p.where == "config" and p.severity == "error" for p in report.problems)


def test_progress_reports(repo):
    calls = []
    cas.Repository(repo.backend).fsck(progress=lambda *a: calls.append(a))
    assert {c[0] for c in calls} >= {"packs", "versions"}
