"""Mirror: every prefix of a mirror is a consistent repository, and erased bytes never survive
at the destination (not in an unpublished pack, not in a staging file). A mirror carries every
record (runs, reviews, settings, proposals, multi-pack indexes), between a local directory and
S3 both ways, resumes when interrupted, refuses another repository or a divergence, and
follows deletions and erasures."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

import cas
from cas.repo.mirror import mirror
from cas.storage.backends import backend_for
from cas.storage.backends.local import LocalBackend
from cas.storage.backends.memory import MemoryBackend
from support.backends import every_outage
from support.erasure_world import ALICE_MARKERS as ERASURE_MARKERS
from support.erasure_world import RETIRED, FaultyBackend
from support.erasure_world import InjectedFault as Killed
from support.erasure_world import assert_no_trace
from support.erasure_world import build as build_for_erasure
from support.erasure_world import repository_bytes, seeded
from support.faultproxy import FaultProxy
from support.lifecycle import OPERATOR, multi_keys
from support.sample_cases import case_id
from support.sample_cases import padded_cases as midx_cases
from support.sample_cases import plain_cases as score_cases
from support.sample_cases import tool_cases as cases

ALICE = "alice.moreau@example.org"   # the person erased
BOB = "bob-17"
ALICE_MARKERS = ["IBAN FR76-3000-6000-0112", "14 rue des Lilas", "ALICE-SECRET-7731"]


pytestmark = pytest.mark.usefixtures("as_operator")  # as OPERATOR


def alice_case(i: int) -> dict:
    return {"run_id": f"alice-{i}", "person": ALICE, "input": f"{ALICE_MARKERS[i % 3]} #{i}",
            "output": ALICE_MARKERS[2]}


def bob_case(i: int) -> dict:
    return {"run_id": f"bob-{i}", "person": BOB, "input": f"printer jam {i}", "output": "fixed"}


def plain(tag: str, n: int) -> list[dict]:
    return [{"input": f"{tag} {i}", "output": "x" * 300} for i in range(n)]


def run(run_id: str, person: str, secret: str) -> dict:
    return {"run_id": run_id, "tenant": "acme", "person": person,
            "input": {"message": secret}, "output": f"resolved ({secret})",
            "steps": [{"type": "message", "role": "user", "content": secret}]}



def build(repo) -> None:
    """Several datasets and versions, scores, an experiment, a staged proposal holding Alice's
    case, an operator retirement, a deleted version and a deleted dataset, run and review logs,
    and (small packs) a multi-pack index."""
    repo.import_runs([run("alice-run-0", ALICE, ALICE_MARKERS[0]),
                      run("bob-run-0", BOB, "order arrived damaged")])
    req = [{"run_id": "alice-run-0", "metric": "dataset_eligibility", "label": "rejected"}]
    repo.add_reviews(req, confirm_token=repo.add_reviews(req)["confirm_token"])
    for name in ("support", "billing", "gone"):
        repo.create_dataset(name, admission="direct")
    repo.commit("support", base=None, add=[bob_case(0), bob_case(1)])          # support@1
    repo.commit("support", base=1, add=[alice_case(0), bob_case(2)])           # support@2
    repo.commit("support", base=2, add=[alice_case(1)] + plain("bulk", 80))    # support@3
    repo.commit("billing", base=None, add=plain("bill", 3))                     # billing@1
    repo.commit("billing", base=1, add=[bob_case(3), alice_case(2)])           # billing@2
    repo.commit("billing", base=2, add=plain("scratch", 2))                     # billing@3
    repo.commit("gone", base=None, add=plain("gone", 2))
    repo.record_score(repo.pin("support", 1), metric="acc", value=0.5)
    repo.record_score(repo.pin("support", 3), metric="acc", value=0.75)
    repo.create_experiment("billing", 2, "baseline")
    repo.retire("billing", 1, "CONTAMINATED", "seen in a training mix")
    repo.delete_version("billing", 3)
    repo.delete_dataset("gone")
    # staged, never sealed: its proposed set holds Alice's case
    repo.remove("support", [case_id(bob_case(2))], "stage-1")
    repo.create_dataset("temp", admission="direct")  # deleted later
    repo.commit("temp", base=None, add=plain("temp", 2))
    repo.commit("temp", base=1, add=[bob_case(5)])
    repo.remove("temp", [case_id(bob_case(5))], "stage-2")


def erase_and_gc(repo) -> None:
    """At the source: erase Alice (retires support@2, support@3 and billing@2, rewrites
    packs, deletes the staged proposal, redacts the logs), seal on a retired base, delete a
    version and a dataset, gc."""
    repo.erase(ALICE, repo.erase(ALICE)["confirm_token"])
    repo.commit("support", base=3, add=[bob_case(4)])                          # support@4
    repo.delete_version("support", 2)
    repo.delete_dataset("temp")
    repo.gc(grace=0)


def KillAt(inner, kill_at=None):
    """The destination backend, killed at its k-th mutating call (before it lands)."""
    return FaultyBackend(inner, fail_at=kill_at)


def contents(backend) -> dict[str, bytes]:
    return {k: backend.get(k) for k in backend.list("")}


def versions_at(repo):
    for name in repo.datasets():
        deleted = set(repo.refs.deleted_numbers(name))
        for number in repo.refs.version_numbers(name):
            if number not in deleted:
                yield name, number


def active_versions(backend) -> set:
    if not backend.exists("config"):
        return set()
    repo = cas.Repository(backend)
    return {v for v in versions_at(repo) if repo.version_state(*v) == "ACTIVE"}


def read_all(repo, name, number) -> int:
    after, n = None, 0
    while True:
        page = repo.items(name, number, after=after, limit=7)
        for c in page.items:
            repo.case(name, number, c)
            n += 1
        if not page.has_more:
            return n
        after = page.next_cursor


def check_prefix(dst, src_keys: set, active_before: set, retirements_done: bool) -> None:
    """A killed mirror left a consistent repository: fsck finds no error, every ACTIVE version
    is fully readable, and none is a version the source retired (but one that was already at
    the destination before this mirror, until its retirement is copied)."""
    if not dst.exists("config"):
        assert list(dst.list("")) == []  # the config is the first write
        return
    repo = cas.Repository(dst)
    report = repo.fsck()
    assert report.ok, [p for p in report.problems if p.severity == "error"]
    for name, number in versions_at(repo):
        if repo.version_state(name, number) != "ACTIVE":
            continue
        assert read_all(repo, name, number) == repo.version(name, number).item_count
        if f"datasets/{name}/retired/{number:010d}" in src_keys:
            assert (name, number) in active_before and not retirements_done, (name, number)


def kill_at_every_call(src, reset, dst_of, label) -> int:
    """Run the mirror src -> dst killed at each mutating call in turn; check each prefix, then
    finish it and compare. `reset()` prepares the destination, `dst_of()` opens it."""
    reset()
    active_before = active_versions(dst_of())
    before = set(dst_of().list(""))
    probe = KillAt(dst_of())
    mirror(src, probe)
    total = probe.mutations
    src_keys = set(src.list(""))
    dst_keys = set(dst_of().list(""))
    assert dst_keys == src_keys
    # the config (of a new copy), then the retirements are the first writes
    first = ("config" not in before) + sum(1 for k in src_keys - before if "/retired/" in k)
    for k in range(1, total + 1):
        reset()
        with pytest.raises(Killed):
            mirror(src, KillAt(dst_of(), kill_at=k))
        check_prefix(dst_of(), src_keys, active_before, retirements_done=k > first)
        mirror(src, dst_of())
        assert contents(dst_of()) == contents(src), (label, k)
    return total


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """(before, after): copies of one source repository before and after the erasure."""
    root = tmp_path_factory.mktemp("sources")
    mp = pytest.MonkeyPatch()
    mp.setenv("CAS_USER", OPERATOR)
    mp.setenv("CAS_CONFIG", str(root / "user-config.json"))
    mp.setattr("cas.storage.pack.PACK_MAX_BYTES", 8_000)  # several packs, a multi-pack index
    try:
        repo = cas.init(str(root / "before"))
        build(repo)
        shutil.copytree(root / "before", root / "after")
        erase_and_gc(cas.open(str(root / "after")))
    finally:
        mp.undo()
    before = backend_for(str(root / "before"))
    assert any(k.endswith(".midx") for k in before.list("packs/"))
    assert list(before.list("datasets/support/proposals/"))
    return before, backend_for(str(root / "after"))


def test_killed_fresh_mirror_leaves_a_consistent_copy(sources, tmp_path):
    _, src = sources
    root = tmp_path / "dst"

    def reset():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()

    total = kill_at_every_call(src, reset, lambda: LocalBackend(str(root)), "fresh")
    assert total == len(list(src.list(""))) >= 30  # one write per key
    print(f"fresh mirror: {total} killed prefixes checked")


def test_killed_mirror_after_an_erasure_and_gc(sources, tmp_path):
    before, src = sources
    seed, root = tmp_path / "seed", tmp_path / "dst"
    seed.mkdir()
    mirror(before, LocalBackend(str(seed)))
    assert active_versions(LocalBackend(str(seed))) >= {("support", 2), ("billing", 2)}

    def reset():
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(seed, root)

    total = kill_at_every_call(src, reset, lambda: LocalBackend(str(root)), "incremental")
    assert total >= 15
    print(f"incremental mirror: {total} killed prefixes checked")
    everything = b"".join(contents(LocalBackend(str(root))).values())
    assert not any(m.encode() in everything for m in ALICE_MARKERS)


def test_killed_mirror_to_s3(tmp_path, seaweed, monkeypatch):
    """A smaller source, a fresh SeaweedFS destination for each killed prefix."""
    monkeypatch.setenv("CAS_CACHE_DIR", str(tmp_path / "cache"))
    repo = cas.init(str(tmp_path / "src"))
    repo.create_dataset("support", admission="direct")
    repo.commit("support", base=None, add=[bob_case(0)])
    repo.commit("support", base=1, add=[alice_case(0)])
    repo.erase(ALICE, repo.erase(ALICE)["confirm_token"])
    repo.commit("support", base=2, add=[bob_case(1)])
    src = repo.backend
    url = [None]

    def reset():
        url[0] = seaweed.url()

    total = kill_at_every_call(src, reset, lambda: backend_for(url[0], create=True), "s3")
    assert total >= 8
    print(f"s3 mirror: {total} killed prefixes checked")


def test_fsck_tolerates_a_retirement_ahead_of_its_version(tmp_path):
    repo = cas.init(str(tmp_path))
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=plain("a", 2))
    repo.commit("d", base=1, add=plain("b", 1))
    repo.commit("d", base=2, add=plain("c", 1))
    repo.retire("d", 2, "OPERATOR_REQUEST", "because")
    repo.retire("d", 3, "OPERATOR_REQUEST", "because")
    backend = repo.backend
    v3 = backend.get("datasets/d/versions/0000000003")
    backend.delete("datasets/d/versions/0000000003")  # as a mirror that has not copied it yet
    report = repo.fsck()
    assert report.ok, report.problems
    assert [p.where for p in report.problems if "not here yet" in p.message] == [
        "datasets/d/retired/0000000003"]
    # inside the range of numbers, a retirement of a missing version stays an error
    backend.put_if_absent("datasets/d/versions/0000000003", v3)
    backend.delete("datasets/d/versions/0000000002")
    errors = {(p.where, p.message) for p in repo.fsck().problems if p.severity == "error"}
    assert ("datasets/d/retired/0000000002", "retires a version that does not exist") in errors


# -- erased bytes left at the destination by a killed mirror ----------------------------------
_KILLER = textwrap.dedent("""
    import os, signal, sys
    from cas.storage.backends import backend_for
    from cas.storage.backends.local import LocalBackend
    from cas.repo.mirror import mirror
    src, dst, suffix = sys.argv[1:4]
    real = os.link
    def link(a, b, *args, **kw):
        if b.endswith(suffix):
            os.kill(os.getpid(), signal.SIGKILL)  # staged, not published: a kill mid-write
        return real(a, b, *args, **kw)
    os.link = link
    mirror(backend_for(src), LocalBackend(dst))
""")


def _killed_mirror(src: str, dst: str, suffix: str) -> None:
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(cas.__file__)))
    proc = subprocess.run([sys.executable, "-c", _KILLER, src, dst, suffix], env=env,
                          capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()


def test_a_mirror_removes_erased_bytes_a_killed_mirror_left(tmp_path):
    src = cas.init(str(tmp_path / "src"))
    src.create_dataset("support", admission="direct")
    src.commit("support", base=None, add=[bob_case(0)])
    src.commit("support", base=1, add=[alice_case(i) for i in range(3)])   # one pack
    src.commit("support", base=2, add=[alice_case(i) for i in range(3, 6)])  # another
    held = [k.split("/")[1] for k in sorted(src.backend.list("packs/")) if k.endswith(".pack")
            and ALICE_MARKERS[0].encode() in src.backend.get(k)]
    first, second = held  # in the order a mirror copies them
    dst = tmp_path / "dst"
    dst.mkdir()
    # killed while staging the first of Alice's packs: a staging file holding her bytes
    _killed_mirror(str(tmp_path / "src"), str(dst), first)
    # killed while staging the index of the second: that pack published there, unindexed
    _killed_mirror(str(tmp_path / "src"), str(dst), second.replace(".pack", ".idx"))
    staged = [p for p in (dst / "~tmp").iterdir() if ALICE_MARKERS[0].encode() in p.read_bytes()]
    assert staged and (dst / "packs" / second).exists()
    assert not (dst / "packs" / second.replace(".pack", ".idx")).exists()
    src.erase(ALICE, src.erase(ALICE)["confirm_token"])
    mirror(src.backend, LocalBackend(str(dst)))
    found = [(str(p), m) for p in dst.rglob("*") if p.is_file()
             for m in ALICE_MARKERS + [ALICE] if m.encode() in p.read_bytes()]
    assert found == []
    assert contents(LocalBackend(str(dst))) == contents(src.backend)
    assert cas.Repository(LocalBackend(str(dst))).fsck().ok


def test_sweep_keeps_live_writers_and_removes_dead_ones(tmp_path):
    from cas.storage.backends import local
    backend = LocalBackend(str(tmp_path))
    backend.put_if_absent("k", b"v")
    staging = tmp_path / "~tmp"
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    me = local.staging_name()
    dead = me.rsplit("-", 2)[0] + f"-{proc.pid}-" + "0" * 24
    other_host = "elsewhere-1-" + "0" * 24
    for name in (me, dead, other_host, "0" * 24):
        (staging / name).write_bytes(b"staged")
    assert backend.sweep_staging(0) == 1  # only the dead writer's file on this host
    assert sorted(p.name for p in staging.iterdir()) == sorted([me, other_host, "0" * 24])
    os.utime(staging / other_host, (1, 1))
    os.utime(staging / ("0" * 24), (1, 1))
    assert backend.sweep_staging(100) == 2  # other hosts, and old names: by age only
    assert [p.name for p in staging.iterdir()] == [me]


# -- after an erasure (test_erasure.py's repository) ----------------------------------------
def test_mirror_follows_an_erasure(tmp_path):
    src = cas.init(str(tmp_path / "a"))
    build_for_erasure(src)
    from cas.repo.mirror import mirror
    from cas.storage.backends import backend_for
    dst_backend = backend_for(str(tmp_path / "b"), create=True)
    mirror(src.backend, dst_backend)
    assert any(ALICE.encode() in d for d in repository_bytes(cas.open(str(tmp_path / "b")),
                                                             str(tmp_path / "b")).values())
    src.erase(ALICE, src.erase(ALICE)["confirm_token"])
    mirror(src.backend, dst_backend)
    dst = cas.open(str(tmp_path / "b"))
    assert_no_trace(repository_bytes(dst, str(tmp_path / "b")), ERASURE_MARKERS + [ALICE])
    assert dst.fsck().ok, dst.fsck().problems
    assert {(n, v) for n, v in RETIRED if dst.version_state(n, v) == "RETIRED"} == RETIRED
    assert dst.erasures() == src.erasures()
    assert sorted(dst.backend.list("")) == sorted(src.backend.list(""))


# -- between a local directory and S3 ----------------------------------------------------
def test_mirror_local_to_s3_and_back(tmp_path, s3_url):
    local = cas.init(str(tmp_path / "a"))
    local.create_dataset("evals", admission="direct")
    local.commit("evals", base=None, add=cases(30))
    local.commit("evals", base=1, add=cases(5, "more"))
    report = mirror(local.backend, backend_for(s3_url, create=True))
    assert report.packs_copied == 2 and report.records_copied == 3
    again = mirror(local.backend, backend_for(s3_url))
    assert again.packs_copied == again.records_copied == 0
    back = backend_for(str(tmp_path / "b"), create=True)
    mirror(backend_for(s3_url), back)
    copy = cas.open(str(tmp_path / "b"))
    assert copy.fsck().ok
    assert copy.version("evals", 2) == local.version("evals", 2)
    assert copy.items("evals", 2, limit=100) == local.items("evals", 2, limit=100)


def test_interrupted_mirror_resumes(tmp_path, seaweed, monkeypatch):
    monkeypatch.setenv("CAS_CACHE_DIR", str(tmp_path / "cache"))
    local = cas.init(str(tmp_path / "a"))
    local.create_dataset("evals", admission="direct")
    for v in range(3):
        local.commit("evals", base=v or None, add=cases(10, f"v{v}"))
    with FaultProxy(seaweed.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        monkeypatch.setattr("cas.storage.backends.s3.BACKOFF_S", 0.001)
        url = seaweed.url()
        puts = []

        def plan(method, path, n):
            if method == "PUT":
                puts.append(path)
                if len(puts) > 4:
                    return "503"
            return None
        proxy.plan = plan
        with pytest.raises(cas.CasError) as info:
            mirror(local.backend, backend_for(url, create=True))
        assert info.value.code == "UNAVAILABLE"
        proxy.plan = lambda method, path, n: None
        partial = cas.open(url)
        assert partial.fsck().ok  # what was copied is consistent: no record without its objects
        mirror(local.backend, backend_for(url))
        assert cas.open(url).version("evals", 3) == local.version("evals", 3)
        assert cas.open(url).fsck().ok


def test_mirror_refuses_another_repository_and_divergence(tmp_path, s3_url):
    a = cas.init(str(tmp_path / "a"))
    a.create_dataset("evals", admission="direct")
    a.commit("evals", base=None, add=cases(3))
    other = cas.init(s3_url)
    with pytest.raises(cas.FailedPrecondition, match="another repository"):
        mirror(a.backend, other.backend)
    b_backend = backend_for(str(tmp_path / "b"), create=True)
    mirror(a.backend, b_backend)
    b = cas.open(str(tmp_path / "b"))
    a.commit("evals", base=1, add=cases(1, "in-a"))
    b.commit("evals", base=1, add=cases(1, "in-b"))
    with pytest.raises(cas.FailedPrecondition, match="diverged") as info:
        mirror(a.backend, b.backend)
    assert info.value.reason == "DIVERGED"


def test_mirror_carries_runs_reviews_settings_and_proposals(tmp_path, s3_url, monkeypatch):
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    local = cas.init(str(tmp_path / "a"))
    local.import_runs([{"run_id": f"r-{i}", "tenant": "acme", "steps": [
        {"type": "tool_call", "tool_name": "ls", "arguments": {}, "result": [i]}]}
        for i in range(3)])
    local.set_content_policy(["metadata"])
    request = [{"run_id": "r-1", "metric": "dataset_eligibility", "label": "reviewed"}]
    token = local.add_reviews(request)["confirm_token"]
    annotation = local.add_reviews(request, confirm_token=token)["annotation_ids"][0]
    local.create_dataset("evals", admission="direct")
    subjects = [{"subject_kind": "agent_run", "subject_ref": "r-1",
                 "review_annotation_id": annotation}]
    preview = local.promote("evals", subjects, "k1")
    local.seal("evals", preview["confirm_token"])
    report = mirror(local.backend, backend_for(s3_url, create=True))
    assert report.records_copied >= 6
    remote = cas.open(s3_url)
    assert remote.fsck().ok, remote.fsck().problems
    assert remote.runs() == ["r-0", "r-1", "r-2"]
    assert [r.annotation_id for r in remote.reviews("r-1")] == [annotation]
    assert remote.settings().withheld == ["metadata"]
    # the same request with the same key is the same proposal at the mirror
    assert remote.promote("evals", subjects, "k1")["confirm_token"] == preview["confirm_token"]
    assert remote.seal("evals", preview["confirm_token"]).already_sealed


# -- deletions, multi-pack indexes -------------------------------------------------------
def test_mirror_follows_deletions_and_never_resurrects(tmp_path, monkeypatch):
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    src = cas.init(str(tmp_path / "src"))
    src.create_dataset("evals", admission="direct")
    src.create_dataset("gone", admission="direct")
    for name in ("evals", "gone"):
        src.commit(name, base=None, add=score_cases(2, name))
        src.commit(name, base=1, add=score_cases(1, name + "2"))
    src.record_score(src.pin("evals", 1), metric="acc", value=1)
    dst = LocalBackend(str(tmp_path / "dst" / ".cas"))
    (tmp_path / "dst" / ".cas").mkdir(parents=True)
    mirror(src.backend, dst)
    old = LocalBackend(str(tmp_path / "old" / ".cas"))
    (tmp_path / "old" / ".cas").mkdir(parents=True)
    mirror(src.backend, old)  # a copy from before the deletions
    src.delete_version("evals", 2)
    src.delete_dataset("gone")
    report = mirror(src.backend, dst)
    assert report.records_deleted == 4  # evals@2, and gone's meta and two versions
    copy = cas.Repository(dst)
    assert copy.datasets() == ["evals"] and copy.head("evals") == 1
    assert copy.fsck().ok, copy.fsck().problems
    # mirroring the old copy into the new one brings nothing deleted back
    report = mirror(old, dst)
    assert report.records_copied == 0 and report.records_skipped == 4
    assert copy.datasets() == ["evals"] and copy.head("evals") == 1
    with pytest.raises(cas.NotFound):
        copy.version("evals", 2)
    assert copy.fsck().ok


def test_mirror_copies_multi_indexes(tmp_path, small_packs):
    repo = cas.init(str(tmp_path / "a"))
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=midx_cases(150))
    dst = LocalBackend(str(tmp_path / "b" / ".cas"))
    mirror(repo.backend, dst)
    assert multi_keys(dst) == multi_keys(repo.backend)
    copy = cas.open(str(tmp_path / "b"))
    assert copy.fsck().ok and copy.items("d", 1, limit=200) == repo.items("d", 1, limit=200)


class ListedFirst:
    """A source that lists the pack indexes `first` before its other keys (a listing order
    is the backend's: a mirror must not depend on it)."""

    def __init__(self, inner, first: set[str]) -> None:
        self.inner, self.first, self.url = inner, first, inner.url

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def list(self, prefix: str):
        return sorted(self.inner.list(prefix), key=lambda k: (k not in self.first, k))


def provenance_packs(backend) -> dict[str, set[str]]:
    """Index key -> the cases its provenance objects describe that its pack does not hold."""
    from cas.format.records import KIND_CODES, decode_object
    from cas.storage import pack as packfmt
    out = {}
    for ikey in (k for k in backend.list("packs/") if k.endswith(".idx")):
        _, entries = packfmt.parse_index(backend.get(ikey), ikey)
        pack = backend.get(ikey[:-len(".idx")] + ".pack")
        held = {cas.digest.from_bytes(e.digest) for e in entries}
        for e in entries:
            if e.kind == KIND_CODES["provenance"]:
                obj = decode_object("provenance", pack[e.offset:e.offset + e.length])
                out.setdefault(ikey, set()).update(
                    x.case_id for x in obj.entries if x.case_id not in held)
    return out


def test_a_provenance_pack_is_published_after_the_cases_it_describes(tmp_path, monkeypatch):
    """Issue 32. A promotion's provenance is indexed under the people of the cases it
    describes; with small packs those cases are in an earlier pack. A mirror that published
    the provenance's pack first (its key, or the listing, came first), killed before the
    cases' pack, left a person table fsck read as listing an object under a person it does
    not name. Whatever the listing order, every killed prefix passes fsck."""
    from support.lifecycle import promote_and_seal, review, run_obj
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    monkeypatch.setattr("cas.storage.pack.PACK_MAX_BYTES", 2_000)
    repo = cas.init(str(tmp_path / "src"))
    runs = [run_obj(f"r-{i}", i, person=f"user-{i}") for i in range(6)]
    repo.import_runs(runs)
    anns = {r["run_id"]: review(repo, r["run_id"]) for r in runs}
    repo.create_dataset("evals", admission="direct")
    promote_and_seal(repo, anns, [r["run_id"] for r in runs], "k1")
    ahead = {k for k, cases in provenance_packs(repo.backend).items() if cases}
    assert ahead  # a provenance whose cases are in another pack
    src = ListedFirst(repo.backend, ahead)
    root = tmp_path / "dst"

    def reset():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()

    assert kill_at_every_call(src, reset, lambda: LocalBackend(str(root)), "provenance") >= 20


@pytest.mark.parametrize("lasting", [True, False], ids=["server-gone", "blink"])
@pytest.mark.parametrize("end", ["source", "destination"])
def test_an_outage_at_any_read_of_a_mirror_is_unavailable(end, lasting):
    """Whichever read of either end fails, the mirror raises UNAVAILABLE (or, a read it made
    again, copies exactly what it would have): never a record skipped as absent. After the
    failure, mirroring again completes the copy and it passes fsck."""
    world = seeded()
    files = {k: world.get(k) for k in world.list("")}
    copies: list = []  # the destinations, of a source that fails

    def fresh():
        backend = MemoryBackend()
        if end == "source":
            for key, data in files.items():
                backend.put_if_absent(key, data)
        return backend

    def run(wrapped):
        if end == "destination":
            return mirror(world, wrapped)
        copies.append(MemoryBackend())
        return mirror(wrapped, copies[-1])

    def finish(inner) -> None:
        dst = copies[-1] if end == "source" else inner
        mirror(world, dst)
        assert {k: dst.get(k) for k in dst.list("")} == files
        assert cas.Repository(dst).fsck().ok

    n, report = every_outage(fresh, run, lasting, check=finish)
    assert report.packs_copied == 12 and n >= (20 if end == "source" else 2)
