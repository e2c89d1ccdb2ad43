"""The key layout: every family's format/parse pair round-trips, parsing never raises, each key
belongs to exactly one family, and a real repository holds no key of no family."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
import cas.evals.cassettes
from cas.format import keys as K
from cas.storage import leases
from cas.storage.backends import check_key

NAME = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,24}", fullmatch=True).filter(lambda n: ".." not in n)
NUMBER = st.integers(0, 9_999_999_999)
HEX64 = st.text("0123456789abcdef", min_size=64, max_size=64)
SHARD = st.text("0123456789abcdef", min_size=2, max_size=2)
SEGMENT = st.from_regex(r"[A-Za-z0-9._-]{1,30}", fullmatch=True).filter(
    lambda s: s not in (".", ".."))
TOKEN = st.text("0123456789abcdef", min_size=32, max_size=32).map(lambda h: "ct-" + h)

# The parts of a key of each family, as its parse function returns them.
PARTS = {
    "config": st.just(()),
    "retirement": st.tuples(NAME, NUMBER),
    "person.shards": st.tuples(HEX64, st.sets(SHARD, max_size=5)),
    "person.table": st.tuples(HEX64, st.sets(SHARD, max_size=5)),
    "person.index": st.tuples(SHARD, HEX64),
    "pack": st.tuples(HEX64),
    "pack.index": st.tuples(HEX64),
    "multi.index": st.tuples(HEX64),
    "run.admission": st.tuples(NUMBER),
    "run.import": st.tuples(NUMBER),
    "review.batch": st.tuples(NUMBER),
    "log.index": st.tuples(st.sampled_from(["runs", "reviews"]), NUMBER, NUMBER, HEX64).filter(
        lambda t: t[1] < t[2]),
    "settings": st.tuples(NUMBER),
    "eligibility": st.tuples(NUMBER),
    "metrics": st.tuples(NUMBER),
    "erasure": st.tuples(SEGMENT),
    "dataset.tombstone": st.tuples(NAME),
    "dataset": st.tuples(NAME, NUMBER),
    "version.tombstone": st.tuples(NAME, NUMBER),
    "version": st.tuples(NAME, NUMBER),
    "experiment": st.tuples(NAME, NUMBER),
    "score.batch": st.tuples(NAME, NUMBER),
    "score.withdrawal": st.tuples(NAME, NUMBER),
    "proposal": st.tuples(NAME, TOKEN),
    "idempotency": st.tuples(NAME, HEX64),
    "cassette.log": st.tuples(NAME, NUMBER),
    "lease": st.tuples(st.sampled_from(K.ROLES), SEGMENT),
    "erasure.plan": st.tuples(SEGMENT),
}


def test_every_family_has_parts_to_test():
    assert sorted(PARTS) == sorted(f.name for f in K.FAMILIES)
    assert len(K.BY_NAME) == len(K.FAMILIES)


@pytest.mark.parametrize("name", sorted(PARTS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_format_then_parse_gives_back_the_parts(name, data):
    family = K.BY_NAME[name]
    parts = data.draw(PARTS[name])
    key = family.format(*parts)
    assert check_key(key) == key and key.startswith(family.prefix)
    assert family.parse(key) == parts
    assert family.format(*family.parse(key)) == key
    # exactly one family parses it, and the same one is what fsck and mirror take it for
    assert [f.name for f in K.FAMILIES if f.parse(key) is not None] == [name]
    assert K.family_of(key) is family and K.claimed_by(key) is family


KEYLIKE = st.lists(st.sampled_from(["datasets", "packs", "persons", "shards", "leases",
                                    "erasures", "log", "pending", "runs", "imports", "reviews",
                                    "settings", "versions", "meta", "deleted", "retired",
                                    "scores", "experiments", "proposals", "keys", "tombstone",
                                    "config", "0000000001", "00000000012", "writer.x", "gc.",
                                    "ct-" + "a" * 32, "a" * 64, "ab", "x.pack", "", ".", ".."]),
                   max_size=5).map("/".join)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(max_size=80), KEYLIKE))
def test_parse_never_raises(text):
    for family in K.FAMILIES:
        parts = family.parse(text)
        assert parts is None or isinstance(parts, tuple)
        if parts is not None:
            assert family.format(*parts) == text
        family.claims(text)
    assert len([f for f in K.FAMILIES if f.parse(text) is not None]) <= 1
    assert len([f for f in K.FAMILIES if f.claims(text)]) <= 1
    K.split_dataset_key(text)
    K.dataset_of(text)
    K.parse_number(text)


@pytest.mark.parametrize("value", [None, 7, b"config", ["config"]])
def test_parse_of_what_is_not_text_is_none(value):
    assert all(f.parse(value) is None for f in K.FAMILIES)


def test_an_idempotency_key_is_a_claim_and_numbers_are_read_from_keys():
    assert K.idempotency_key("d", "k") == K.claim_key(
        "d", cas.digest.digest_of("idempotency", b"k")[3:])
    assert K.numbers(["a/0000000002", "a/x", "a/0000000001", "a/12"]) == [1, 2]


# -- a real repository ---------------------------------------------------------------------------
def run(run_id: str, person: str) -> dict:
    return {"run_id": run_id, "tenant": "acme", "person": person, "input": {"q": run_id},
            "output": "done", "steps": [{"type": "message", "role": "user", "content": "hi"}]}


def review(repo, run_id: str) -> str:
    req = [{"run_id": run_id, "metric": "dataset_eligibility", "label": "good"}]
    return repo.add_reviews(req, confirm_token=repo.add_reviews(req)["confirm_token"])[
        "annotation_ids"][0]


def subject(run_id: str, annotation: str) -> dict:
    return {"subject_kind": "agent_run", "subject_ref": run_id,
            "review_annotation_id": annotation}


def unclaimed(repo) -> list[str]:
    return [k for k in repo.backend.list("") if K.family_of(k) is None]


def test_every_key_of_a_lived_in_repository_belongs_to_a_family(tmp_path, monkeypatch):
    monkeypatch.setenv("CAS_USER", "Grace <grace@example.com>")
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "user-config.json"))
    monkeypatch.setattr("cas.storage.pack.PACK_MAX_BYTES", 2_000)  # packs and a multi-pack index
    repo = cas.init(str(tmp_path / "repo"))
    repo.set_content_policy([], author="ops")
    repo.set_eligibility("dataset_eligibility", ["good", "reviewed"], author="ops")
    repo.define_metric("tone", ["calm", "curt"], author="ops")                   # metrics
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=[{"input": f"case {i}", "output": "x" * 200}
                                         for i in range(20)])
    repo.import_runs(io.BytesIO(b"".join(json.dumps(run(r, p)).encode() + b"\n" for r, p in
                                         (("r-0", "bob"), ("r-1", "alice")))))
    anns = {r: review(repo, r) for r in ("r-0", "r-1")}
    staged = repo.promote("evals", [subject(r, a) for r, a in anns.items()], "k-1")
    repo.seal("evals", staged["confirm_token"])                                  # evals@2
    repo.remove("evals", [cas.encode_case({"input": "case 0", "output": "x" * 200}).case_id],
                "k-2")                                                            # staged only
    repo.record_score(repo.pin("evals", 2), metric="acc", value=0.5)
    withdrawn = repo.record_score(repo.pin("evals", 2), metric="acc", value=0.25)
    cas.repo.scores.withdraw_batch(repo.context, "evals", withdrawn.batch, "wrong rubric")
    repo.create_experiment("evals", 2, "baseline")
    cas.evals.cassettes.save(repo, repo.pin("evals", 2), "x:y",
                       {repo.items("evals", 2).items[0]: []})                    # cassette.log
    repo.retire("evals", 1, "CONTAMINATED", "seen in a training mix")
    repo.commit("evals", base=2, add=[{"input": "later"}])                        # evals@3
    repo.delete_version("evals", 3)
    repo.create_dataset("gone", admission="direct")
    repo.commit("gone", base=None, add=[{"input": "g"}])
    repo.delete_dataset("gone")
    with leases.acquire(repo, leases.WRITER, "test"):
        assert unclaimed(repo) == []
    families = {K.family_of(k).name for k in repo.backend.list("")}
    repo.erase("alice", repo.erase("alice")["confirm_token"])
    repo.import_runs([run("r-1", "alice")], allow_erased_persons=["alice"])  # run.admission
    assert unclaimed(repo) == []
    repo.gc(grace=0)
    assert unclaimed(repo) == []
    families |= {K.family_of(k).name for k in repo.backend.list("")}
    # what a lifecycle leaves behind (a lease and an erasure plan exist only while at work; a
    # pack's person index records and person-shards record, only a cas from before person
    # tables wrote)
    assert families >= set(PARTS) - {"lease", "erasure.plan", "person.index",
                                     "person.shards"}, set(PARTS) - families
    assert not families & {"person.index", "person.shards"}
    assert repo.fsck().ok
