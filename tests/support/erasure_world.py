"""The erasure world: two people (one to erase), three datasets and their versions, the bytes
of a repository, and a backend that fails its k-th mutation."""

from __future__ import annotations

import json
import os

import pytest

import cas
from cas.storage.backends.memory import MemoryBackend

ALICE = "alice.moreau@example.org"   # the person erased
BOB = "bob-17"
# Distinctive strings of Alice's runs: each must be gone from every byte of the repository.
ALICE_MARKERS = ["Ticket 88231: refund to IBAN FR76-3000-6000-0112-3456-7890-189",
                 "alice-run-", "moreau.alice@", "14 rue des Lilas", "ALICE-SECRET-7731"]




def agent_run(run_id: str, person: str, n: int, secret: str) -> dict:
    """A realistic multi-turn support-agent run: messages, read-only tools, effectful tools."""
    return {
        "run_id": run_id, "tenant": "acme-support", "person": person,
        "started_at": f"2026-10-{n % 28 + 1:02d}T09:{n % 60:02d}:00Z",
        "input": {"ticket": f"#{1000 + n}", "message": f"Hello, I need help. {secret}"},
        "output": f"Your request #{1000 + n} is resolved. ({secret})",
        "steps": [
            {"type": "message", "role": "user", "content": f"Customer says: {secret}"},
            {"type": "tool_call", "tool_name": "crm.search",
             "arguments": {"query": secret[:20]}, "result": [{"id": n, "match": secret}]},
            {"type": "tool_call", "tool_name": "kb.read", "arguments": {"doc": "refunds.md"},
             "result": "Refunds go to the account on file."},
            {"type": "message", "role": "assistant", "content": "Issuing the refund now."},
            {"type": "tool_call", "tool_name": "payments.refund",
             "arguments": {"ticket": n, "note": secret}, "result": {"ok": True}},
            {"type": "tool_call", "tool_name": "email.send",
             "arguments": {"to": f"{person}", "body": f"Done: {secret}"}},
        ],
        "outcome": {"status": "success" if n % 3 else "failure"},
        "metadata": {"model": "agent-7", "customer_note": secret},
    }


ALICE_RUNS = [agent_run(f"alice-run-{i}", ALICE, i, f"{ALICE_MARKERS[i % 5]} {ALICE_MARKERS[4]}")
              for i in range(4)]
BOB_RUNS = [agent_run(f"bob-run-{i}", BOB, 10 + i, f"bob's order {i} arrived damaged")
            for i in range(6)]


def review(repo, run_id: str) -> str:
    req = [{"run_id": run_id, "metric": "dataset_eligibility", "label": "reviewed"}]
    token = repo.add_reviews(req)["confirm_token"]
    return repo.add_reviews(req, confirm_token=token)["annotation_ids"][0]


def promote(repo, name: str, run_ids, key: str):
    subjects = [{"subject_kind": "agent_run", "subject_ref": r,
                 "review_annotation_id": review(repo, r)} for r in run_ids]
    preview = repo.promote(name, subjects, key)
    return repo.seal(name, preview["confirm_token"]).version


def remove(repo, name: str, ids, key: str):
    preview = repo.remove(name, list(ids), key)
    return repo.seal(name, preview["confirm_token"]).version


def build(repo) -> dict:
    """Three datasets; Alice's cases enter `support` at v2 and `triage` at v1 (direct commit);
    `billing` never holds one. Returns the case ids by person."""
    repo.import_runs(ALICE_RUNS + BOB_RUNS)
    for name in ("support", "billing", "triage"):
        repo.create_dataset(name, admission="direct")
    promote(repo, "support", ["bob-run-0", "bob-run-1"], "s1")          # support@1: bob only
    promote(repo, "support", ["alice-run-0", "bob-run-2"], "s2")        # support@2: alice
    promote(repo, "support", ["alice-run-1"], "s3")                     # support@3
    promote(repo, "billing", ["bob-run-3"], "b1")                       # billing@1
    promote(repo, "billing", ["bob-run-4", "bob-run-5"], "b2")          # billing@2
    alice_case = {"run_id": "alice-run-9", "person": ALICE, "tenant": "acme-support",
                  "input": ALICE_MARKERS[3], "output": ALICE_MARKERS[4]}
    bob_case = {"run_id": "bob-run-9", "person": BOB, "input": "printer jam", "output": "fixed"}
    repo.commit("triage", base=None, add=[bob_case, alice_case])        # triage@1: alice
    repo.commit("triage", base=1, remove=[cas.encode_case(alice_case).case_id])  # triage@2
    repo.commit("triage", base=2, add=[{"input": "no person", "output": "x"}])   # triage@3
    return {
        "alice": sorted({cas.encode_case(alice_case).case_id} |
                        {case_of(repo, "support", 3, r) for r in ("alice-run-0", "alice-run-1")}),
    }


def case_of(repo, name, number, run_id):
    return next(c for c in all_items(repo, name, number)
                if repo.case(name, number, c).run_id == run_id)


def all_items(repo, name, number) -> list[str]:
    out, after = [], None
    while True:
        page = repo.items(name, number, after=after, limit=2)
        out += page.items
        if not page.has_more:
            return out
        after = page.next_cursor


def snapshot(repo, name, number):
    """What a reader sees of a version: the record, each case id and its exact bytes."""
    record = repo.version(name, number)
    return record, {c: repo.store.get_bytes(c)[1] for c in all_items(repo, name, number)}


RETIRED = {("support", 2), ("support", 3), ("triage", 1)}
UNTOUCHED = {("support", 1), ("billing", 1), ("billing", 2), ("triage", 2), ("triage", 3)}


def repository_bytes(repo, location) -> dict[str, bytes]:
    """Every stored file: the repository directory (local) or every object under the prefix and
    the local cache directory (S3)."""
    files = {}
    roots = [os.path.join(location, ".cas")] if not cas.storage.backends.is_remote(location) else []
    if cas.storage.backends.is_remote(location):
        for key in repo.backend.list(""):
            files[key] = repo.backend.get(key)
        roots.append(os.environ["CAS_CACHE_DIR"])
    for root in roots:
        for dirpath, _, names in os.walk(root):
            for n in names:
                with open(os.path.join(dirpath, n), "rb") as f:
                    files[os.path.join(dirpath, n)] = f.read()
    return files


def decoded_texts(data: bytes) -> list[str]:
    """The content of a file as text after decoding: each packed object's JSON re-serialised
    without escapes (so a string stored as \\u escapes is found too), or the JSON file's."""
    from cas.storage import pack as packfmt
    texts = []
    if data[:4] == packfmt.PACK_MAGIC:
        for off, length, _ in packfmt.parse_pack(data):
            texts.append(json.dumps(json.loads(data[off:off + length]), ensure_ascii=False))
    elif data[:1] == b"{":
        texts.append(json.dumps(json.loads(data), ensure_ascii=False))
    return texts


def assert_no_trace(files: dict[str, bytes], needles: list[str]) -> None:
    assert files
    for where, data in files.items():
        for needle in needles:
            assert needle.encode() not in data, (where, needle)
            for text in decoded_texts(data):
                assert needle not in text, (where, needle)


class InjectedFault(Exception):
    pass


class FaultyBackend:
    """Fails the k-th mutation (create, replace, delete), before or after it lands."""

    def __init__(self, inner, fail_at=None, after=False):
        self.inner, self.fail_at, self.after, self.url = inner, fail_at, after, inner.url
        self.mutations = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _mutate(self, call, *args):
        self.mutations += 1
        if self.mutations == self.fail_at:
            if self.after:
                call(*args)
            raise InjectedFault(args[0])
        return call(*args)

    def put_if_absent(self, key, data):
        return self._mutate(self.inner.put_if_absent, key, data)

    def replace(self, key, data):
        return self._mutate(self.inner.replace, key, data)

    def delete(self, key):
        return self._mutate(self.inner.delete, key)


# -- garbage for gc -----------------------------------------------------
def deleted_version_garbage(repo):
    """A pack that is mostly garbage (40 large cases only a deleted version held) with one live
    case in it, which gc must rewrite rather than delete."""
    repo.create_dataset("scratch", admission="direct")
    repo.commit("scratch", base=None, add=[{"input": f"kept {i}"} for i in range(5)])
    dropped = [{"input": f"dropped {i}", "output": "y" * 2000} for i in range(40)]
    repo.commit("scratch", base=1, add=dropped + [{"input": "survivor"}])
    repo.commit("scratch", base=2, remove=[cas.encode_case(c).case_id for c in dropped])
    repo.delete_version("scratch", 2)


# -- a crash anywhere during an erase or a gc -------------------------------------
SEED: dict[str, bytes] = {}


def seeded() -> MemoryBackend:
    if not SEED:
        inner = MemoryBackend()
        repo = cas.Repository.create(inner)
        build(repo)
        deleted_version_garbage(repo)
        SEED.update({k: inner.get(k) for k in inner.list("")})
    inner = MemoryBackend()
    for k, v in SEED.items():
        inner.put_if_absent(k, v)
    inner._times = dict.fromkeys(inner._times, 0.0)  # old enough for any grace period
    return inner


def check_after_crash(inner) -> str:
    """Reopen and check: opening writes nothing, and reads refuse Alice's run while her
    erasure is pending; the next writer (here `finish_erasures`) completes it. Then fsck is
    clean, the erasure complete or not started, no active version lost a case. Returns which."""
    before = {k: inner.get(k) for k in inner.list("")}
    repo = cas.Repository(inner)
    assert {k: inner.get(k) for k in inner.list("")} == before  # opening never writes
    if list(inner.list("erasures/pending/")):
        assert_refused_while_pending(repo)
    repo.finish_erasures()
    report = repo.fsck()
    assert report.ok, report.problems
    assert not list(inner.list("erasures/pending/"))
    done = repo.erasures()
    for name, number in RETIRED | UNTOUCHED:
        if repo.version_state(name, number) == "ACTIVE":
            for c in all_items(repo, name, number):
                repo.case(name, number, c)  # every case of an active version is there
    if done:
        assert {(n, v) for n, v in RETIRED if repo.version_state(n, v) == "RETIRED"} == RETIRED
        everything = b"".join(inner.get(k) for k in inner.list(""))
        for needle in ALICE_MARKERS + [ALICE]:
            assert needle.encode() not in everything
        return "complete"
    assert all(repo.version_state(n, v) == "ACTIVE" for n, v in RETIRED | UNTOUCHED)
    assert repo.run("alice-run-0").person == ALICE
    return "not started"


def assert_refused_while_pending(repo) -> None:
    """A pending erasure's run is never read: refused as being erased (or gone already)."""
    with pytest.raises((cas.FailedPrecondition, cas.NotFound)) as refused:
        repo.run("alice-run-0")
    assert refused.value.reason in ("ERASURE_PENDING", "RUN_NOT_FOUND")
