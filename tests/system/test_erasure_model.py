"""Erasure and operator retirement against a model (hypothesis stateful; issue 5).

The machine imports, reviews and promotes runs of a few people, commits and removes cases,
retires versions by hand, erases people, cuts datasets back into use and collects garbage. After
every step each version reads exactly as the model says: an ACTIVE version lists and reads its
set, a RETIRED one refuses with its cause, and its record still describes the set as sealed.

The tests at the end pin, as regressions, the bugs the machine found on the way.
"""

from __future__ import annotations

import datetime
import itertools

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import cas
from cas.format.records import VersionRef
from cas.storage.backends.memory import MemoryBackend

REVIEWER = "Ada <ada@example.com>"
# Distinctive ids: after an erasure no stored byte may contain them.
PEOPLE = ["alice-3f9e", "bob-77c1", "carol-a0d2"]
DATASETS = ["ds-a", "ds-b"]
RUNS = [(p, i) for p in PEOPLE for i in range(2)]
CAUSES = ("CONTAMINATED", "INVALID_LABELS", "OPERATOR_REQUEST")
RETIRED = "EVALUATION_DATASET_VERSION_RETIRED"
NO_CASE = "b3:" + "0" * 64


@pytest.fixture(autouse=True)
def person(monkeypatch, tmp_path):
    """A configured person for reviews, and never the real user's config file."""
    monkeypatch.setenv("CAS_USER", REVIEWER)
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "user-config.json"))


def person_run(person: str, i: int) -> dict:
    return {"run_id": f"{person}-run-{i}", "tenant": "acme", "person": person,
            "started_at": "2026-05-01T10:00:00Z", "input": {"task": f"task {i} of {person}"},
            "output": f"done {i}",
            "steps": [{"type": "message", "role": "user", "content": f"secret {i} of {person}"},
                      {"type": "tool_call", "tool_name": "ls", "arguments": {"path": "."},
                       "result": ["a", "b"]}],
            "outcome": {"status": "success"}, "metadata": {"model": "m-1"}}


def run_case_id(run: dict) -> str:
    """The id of the case a run freezes to with no content withheld (written out here, not
    taken from cas.format.projection.freeze)."""
    keys = ("run_id", "started_at", "input", "output", "steps", "outcome", "metadata",
            "tenant", "person")
    return cas.encode_case({**{k: run[k] for k in keys}, "withheld": []}).case_id


def direct_case(person: str | None, k: int) -> dict:
    """A case committed directly; person None: a case of nobody, which no erasure touches."""
    about = person if person is not None else "nobody"
    return {"input": {"note": f"case {k} about {about}"}, "tenant": "acme", "person": person}


def review(repo, run_id: str, label: str) -> str:
    req = [{"run_id": run_id, "metric": "dataset_eligibility", "label": label}]
    token = repo.add_reviews(req)["confirm_token"]
    return repo.add_reviews(req, confirm_token=token)["annotation_ids"][0]


def subject(run_id: str, annotation_id: str) -> dict:
    return {"subject_kind": "agent_run", "subject_ref": run_id,
            "review_annotation_id": annotation_id}


def spell(cause: str, mask: int) -> str:
    """`cause` in a letter case chosen by the bits of `mask`."""
    return "".join(c.lower() if mask >> i & 1 else c for i, c in enumerate(cause))


def ticking_clock():
    """A clock that ticks per call, so an example replays with the same times and tokens."""
    ticks = itertools.count(1)
    start = datetime.datetime(2026, 5, 1, tzinfo=datetime.timezone.utc)
    return lambda: (start + datetime.timedelta(seconds=next(ticks))).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")


def keys(repo) -> list[str]:
    return sorted(repo.backend.list(""))


def error_of(call) -> cas.CasError:
    with pytest.raises(cas.CasError) as info:
        call()
    return info.value


class Version:
    """The model of one sealed version: its set as sealed, its record, its provenance (the
    (case id, annotation id) of each case a promotion added, or (case id, author) of each a
    commit added; None if it added none), its retirement."""

    def __init__(self, ids: frozenset, record, provenance: tuple | None) -> None:
        self.ids = ids
        self.record = record
        self.provenance = provenance
        self.retirement = None


class ErasureMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.backend = MemoryBackend()
        self.repo = cas.Repository.create(self.backend, clock=ticking_clock())
        # The team's rule: every judgment this model gives (on metric m) admits a run
        self.repo.set_eligibility("m", ["bad", "good"], author="t")
        self.versions: dict[str, list[Version]] = {n: [] for n in DATASETS}
        self.owner: dict[str, str | None] = {}            # case id -> person (None: nobody)
        self.stored = {p: set() for p in PEOPLE}          # case ids whose bytes are stored
        # Cases only a proposal an erasure deleted reached: gc may or may not have taken them.
        self.orphans = {p: set() for p in PEOPLE}
        self.gone: set[str] = set()                       # erased, and not stored again since
        self.ever_erased: set[str] = set()
        self.runs: set[str] = set()                       # run ids imported and not erased
        self.erased_runs: set[str] = set()
        self.erased_people: set[str] = set()  # a direct commit naming one of them is refused
        self.reviews: dict[str, set] = {}                 # run id -> its annotation ids
        self.confirmed: dict[tuple, list] = {}            # review request -> ids it saved
        self.review_run: dict[str, str] = {}              # annotation id -> run id
        self.proposals: dict[str, dict] = {}              # confirm token -> what it proposes
        self.scores = {n: [] for n in DATASETS}           # name -> [(version, id, metric)]
        self.pins: dict[tuple, cas.Pin] = {}
        self.erasure_tokens: set[str] = set()
        self.digest_of: dict[frozenset, str] = {}         # set of ids -> its content_digest
        self.counter = itertools.count(1)                 # fresh keys and labels

    @initialize()
    def datasets(self):
        for name in DATASETS:
            self.repo.create_dataset(name, author="t", admission="direct")

    # -- the model ------------------------------------------------------------------------
    def head(self, name) -> int:
        return len(self.versions[name])

    def head_version(self, name) -> Version | None:
        return self.versions[name][-1] if self.versions[name] else None

    def left(self, v: Version | None) -> frozenset:
        """The cases of a version that are still stored: a new version cut from it holds
        exactly these."""
        return v.ids - self.gone if v is not None else frozenset()

    def store_cases(self, ids) -> None:
        for c in ids:
            if self.owner[c] is not None:
                self.stored[self.owner[c]].add(c)
                self.orphans[self.owner[c]].discard(c)
            self.gone.discard(c)

    def refused(self, call, code, reason=None) -> cas.CasError:
        before = keys(self.repo)
        err = error_of(call)
        assert (err.code, err.reason if reason else None) == (code, reason), err.to_json()
        assert keys(self.repo) == before  # a refusal stores nothing
        return err

    def key(self) -> str:
        return f"key-{next(self.counter)}"

    def sealed(self, name, record, ids: frozenset, base: int, provenance=None) -> None:
        assert (record.dataset, record.number, record.parent) == (name, base + 1, base or None)
        assert record.item_count == len(ids)
        self.versions[name].append(Version(ids, record, provenance))

    # -- runs and reviews -----------------------------------------------------------------
    def import_runs(self, picks) -> None:
        ids = {f"{p}-run-{i}" for p, i in picks}
        new = sorted(ids - self.runs)
        before = keys(self.repo)
        # a person erased before comes back only by a deliberate admission (a new consent)
        result = self.repo.import_runs([person_run(p, i) for p, i in picks],
                                       allow_erased_persons=sorted({p for p, _ in picks}))
        assert result == (new, len(ids) - len(new))
        if not new:
            assert keys(self.repo) == before
        for r in new:
            self.reviews[r] = set()
            assert self.repo.reviews(r) == []  # an erased run's reviews never come back
        self.runs.update(new)
        self.erased_runs.difference_update(new)
        assert self.repo.runs() == sorted(self.runs)

    def review_runs(self, run_ids, labels) -> list[str]:
        """Review runs in one batch. The same request confirmed again saves nothing new (a
        retried command), unless an erasure deleted one of its runs since: then it is a new
        review of the run imported again."""
        request = tuple(zip(run_ids, labels))
        requests = [{"run_id": r, "metric": "m", "label": lab} for r, lab in request]
        before = keys(self.repo)
        token = self.repo.add_reviews(requests)["confirm_token"]
        saved = self.repo.add_reviews(requests, confirm_token=token)["annotation_ids"]
        assert len(saved) == len(run_ids)
        if request in self.confirmed:
            assert saved == self.confirmed[request] and keys(self.repo) == before
            return saved
        assert not set(saved) & set(self.review_run)
        self.confirmed[request] = saved
        for ann, r in zip(saved, run_ids):
            self.reviews[r].add(ann)
            self.review_run[ann] = r
        for r in set(run_ids):
            assert {x.annotation_id for x in self.repo.reviews(r)} == self.reviews[r]
        return saved

    @rule(picks=st.lists(st.sampled_from(RUNS), min_size=1, max_size=4))
    def import_batch(self, picks):
        """One import may hold runs of several people: an erasure keeps the others."""
        self.import_runs(picks)

    @precondition(lambda self: self.runs)
    @rule(data=st.data())
    def review_batch(self, data):
        picks = data.draw(st.lists(st.tuples(st.sampled_from(sorted(self.runs)),
                                             st.sampled_from(["good", "bad"])),
                                   min_size=1, max_size=3))
        self.review_runs([r for r, _ in picks], [lab for _, lab in picks])

    # -- promotion, commit, removal ------------------------------------------------------
    def stage(self, name, call, adds=frozenset(), removes=frozenset(), operation="promote",
              review_of=None):
        """Stage a proposal on the head and check its preview; returns its token, or None
        when the head is one a known bug makes unusable. `review_of`: case id -> the
        annotation of the first subject that promotes it."""
        v = self.head_version(name)
        base_ids = v.ids if v is not None else frozenset()
        left = self.left(v)
        added = adds - left
        removed = (removes | (base_ids & self.gone)) - added
        result = (left - removes) | adds
        p = call()
        proposed = p["proposed"]
        assert p["base_version"] == (None if v is None else {
            "number": v.record.number, "item_count": v.record.item_count,
            "content_digest": v.record.content_digest})
        assert proposed["added"] == sorted(added) and proposed["removed"] == sorted(removed)
        assert proposed["item_count"] == len(result)
        assert proposed["carried"] == sorted(left - removes)
        assert proposed["carried_count"] == len(left - removes)
        recut = operation == "remove" and not removes
        assert p["changes"] is bool(added or removed or recut)
        token = p["confirm_token"]
        assert token not in self.proposals
        self.proposals[token] = {"name": name, "base": self.head(name), "add": added,
                                 "result": result, "root": proposed["content_digest"],
                                 "changes": p["changes"], "operation": operation,
                                 "live": True, "sealed": None, "provenance": tuple(sorted(
                                     (c, review_of[c]) for c in added)) if added and
                                 review_of else None}
        self.store_cases(added)
        return token

    def seal(self, token) -> None:
        p = self.proposals[token]
        name = p["name"]
        if not p["live"]:  # deleted by an erasure
            self.refused(lambda: self.repo.seal(name, token), "NOT_FOUND", "PROPOSAL_NOT_FOUND")
            return
        if not p["changes"]:
            before = keys(self.repo)
            assert self.repo.seal(name, token) == (None, False)
            assert keys(self.repo) == before
            return
        if p["sealed"] is not None:
            before = keys(self.repo)
            assert self.repo.seal(name, token) == (
                self.versions[name][p["sealed"] - 1].record, True)
            assert keys(self.repo) == before
            return
        if self.head(name) != p["base"]:
            self.refused(lambda: self.repo.seal(name, token), "FAILED_PRECONDITION",
                         "PROPOSAL_STALE")
            return
        result = self.repo.seal(name, token, author="sealer")
        assert result.already_sealed is False
        record = result.version
        assert (record.content_digest, record.operation, record.proposal) == (
            p["root"], p["operation"], token)
        self.sealed(name, record, p["result"], p["base"], p["provenance"])
        p["sealed"] = record.number

    @precondition(lambda self: any(self.reviews[r] for r in self.runs))
    @rule(data=st.data(), name=st.sampled_from(DATASETS),
          seal_now=st.sampled_from([True, True, True, False]))
    def promote(self, data, name, seal_now):
        """Promote reviewed runs; now and then leave the proposal staged (sealed later, made
        stale, or deleted by an erasure)."""
        anns = data.draw(st.lists(st.sampled_from(sorted(
            a for r in self.runs for a in self.reviews[r])), min_size=1, max_size=2))
        review_of = {}
        for a in anns:
            person_, i = self.review_run[a].rsplit("-run-", 1)
            c = run_case_id(person_run(person_, int(i)))
            self.owner[c] = person_
            # one run named with two judgments: the smaller annotation id speaks for its case
            # (whatever the subjects' order, as the request digest says)
            review_of[c] = min(a, review_of.get(c, a))
        subjects = [subject(self.review_run[a], a) for a in anns]
        token = self.stage(name, lambda: self.repo.promote(name, subjects, self.key()),
                           adds=frozenset(review_of), review_of=review_of)
        if token is not None and seal_now:
            self.seal(token)

    @precondition(lambda self: any(p["changes"] and p["sealed"] is None
                                   for p in self.proposals.values()))
    @rule(data=st.data())
    def seal_staged(self, data):
        self.seal(data.draw(st.sampled_from(sorted(
            t for t, p in self.proposals.items() if p["changes"] and p["sealed"] is None))))

    @rule(data=st.data(), name=st.sampled_from(DATASETS),
          who=st.sampled_from(PEOPLE + [None]),
          ks=st.sets(st.integers(0, 2), min_size=1, max_size=2))
    def commit(self, data, name, who, ks):
        v = self.head_version(name)
        cases = [direct_case(who, k) for k in sorted(ks)]
        adds = set()
        for case in cases:
            c = cas.encode_case(case).case_id
            self.owner[c] = who
            adds.add(c)
        left = self.left(v)
        removes = data.draw(st.sets(st.sampled_from(sorted(left - adds)), max_size=1)) \
            if left - adds else set()
        result = frozenset((left - removes) | adds)
        base = self.head(name)
        call = lambda: self.repo.commit(name, base=base or None, add=cases,  # noqa: E731
                                        remove=sorted(removes), author="t", message="m")
        if who in self.erased_people:
            self.refused(call, "FAILED_PRECONDITION", "PERSON_ERASED_BEFORE")
            return
        if v is not None and v.retirement is None and result == v.ids:
            self.refused(call, "FAILED_PRECONDITION", "NO_CHANGES")
            return
        record = call()
        self.store_cases(adds)
        assert record.operation == "commit"
        # its provenance names the cases new to the base's tree, each committed by "t"
        new = sorted(adds - (v.ids if v is not None else set()))
        self.sealed(name, record, result, base, tuple((c, "t") for c in new) or None)

    @precondition(lambda self: any(self.left(self.head_version(n)) for n in DATASETS))
    @rule(data=st.data())
    def remove(self, data):
        name = data.draw(st.sampled_from([n for n in DATASETS
                                          if self.left(self.head_version(n))]))
        ids = data.draw(st.sets(st.sampled_from(sorted(self.left(self.head_version(name)))),
                                min_size=1, max_size=2))
        token = self.stage(name, lambda: self.repo.remove(name, sorted(ids), self.key()),
                           removes=frozenset(ids), operation="remove")
        if token is not None:
            self.seal(token)

    @rule(name=st.sampled_from(DATASETS))
    def empty_removal(self, name):
        """Accepted only on a retired head: it seals the cases that are left, ACTIVE."""
        v = self.head_version(name)
        if v is None or v.retirement is None:
            self.refused(lambda: self.repo.remove(name, [], self.key()), "FAILED_PRECONDITION",
                         "EMPTY_REMOVAL")
            return
        token = self.stage(name, lambda: self.repo.remove(name, [], self.key()),
                           operation="remove")
        if token is not None:
            self.seal(token)
            assert self.head_version(name).ids == self.left(v)
            assert self.repo.version_state(name, self.head(name)) == "ACTIVE"

    # -- retirement by an operator ---------------------------------------------------------
    @precondition(lambda self: any(self.versions.values()))
    @rule(data=st.data(), cause=st.sampled_from(CAUSES), mask=st.integers(0, 2 ** 16 - 1),
          how=st.sampled_from(["retire"] * 5 + ["reserved", "unknown", "missing"]))
    def retire(self, data, cause, mask, how):
        name = data.draw(st.sampled_from([n for n in DATASETS if self.versions[n]]))
        n = data.draw(st.integers(1, self.head(name)))
        note = f"note {next(self.counter)}"
        if how == "reserved":
            self.refused(lambda: self.repo.retire(name, n, spell("PERSON_ERASED", mask), note),
                         "INVALID_ARGUMENT", "CAUSE_RESERVED")
            return
        if how == "unknown":
            self.refused(lambda: self.repo.retire(name, n, "LEAKED", note), "INVALID_ARGUMENT",
                         "CAUSE_INVALID")
            return
        if how == "missing":
            self.refused(lambda: self.repo.retire(name, self.head(name) + 1, cause, note),
                         "NOT_FOUND")
            return
        v = self.versions[name][n - 1]
        if v.retirement is None:
            record = self.repo.retire(name, n, spell(cause, mask), note, author="ops")
            assert (record.dataset, record.number, record.cause, record.note, record.author,
                    record.erasure) == (name, n, cause, note, "ops", None)
            assert self.repo.retirement(name, n) == record
            v.retirement = record
        # a second retirement is refused, whatever its cause: the first one stands
        err = self.refused(lambda: self.repo.retire(name, n, spell(cause, ~mask), "again"),
                           "FAILED_PRECONDITION", "VERSION_ALREADY_RETIRED")
        assert (err.fields["cause"], err.fields["retired_at"]) == (
            v.retirement.cause, v.retirement.retired_at)

    # -- scores --------------------------------------------------------------------------
    @precondition(lambda self: any(v.retirement is None for vs in self.versions.values()
                                   for v in vs))
    @rule(data=st.data())
    def score(self, data):
        name, n = data.draw(st.sampled_from([
            (name, n) for name in DATASETS for n, v in enumerate(self.versions[name], 1)
            if v.retirement is None]))
        pin = self.repo.pin(name, n)
        assert pin == cas.Pin(name, n, self.versions[name][n - 1].record.content_digest)
        s = self.repo.record_score(pin, metric="acc", value=1)
        self.scores[name].append((n, s.score_id, "acc"))
        self.pins[(name, n)] = pin

    # -- erasure -------------------------------------------------------------------------
    @rule(who=st.sampled_from(PEOPLE),
          how=st.sampled_from(["confirm"] * 4 + ["preview", "wrong_token"]))
    def erase(self, who, how):
        before = keys(self.repo)
        preview = self.repo.erase(who)
        assert keys(self.repo) == before  # a preview stores nothing
        cases = set(preview["cases"])
        assert preview["cases"] == sorted(cases)
        assert self.stored[who] <= cases <= self.stored[who] | self.orphans[who]
        runs = sorted(r for r in self.runs if r.startswith(f"{who}-run-"))
        assert preview["runs"] == runs
        assert preview["reviews"] == sorted(a for r in runs for a in self.reviews[r])
        holders = [(name, n) for name in DATASETS
                   for n, v in enumerate(self.versions[name], 1) if v.ids & cases]
        assert preview["versions_to_retire"] == [{
            "dataset": name, "number": n,
            "state": "ACTIVE" if self.versions[name][n - 1].retirement is None else "RETIRED",
            "item_count": self.versions[name][n - 1].record.item_count,
            "content_digest": self.versions[name][n - 1].record.content_digest}
            for name, n in holders]
        assert preview["citing_scores"] == [
            {"dataset": name, "version": n, "score_id": s, "metric": m}
            for name in DATASETS for n, s, m in self.scores[name] if (name, n) in holders]
        # a staged proposal whose proposed set holds one of the cases is deleted with it
        doomed = sorted(t for t, p in self.proposals.items() if p["live"] and
                        p["result"] & cases)
        assert preview["proposals_to_delete"] == sorted(
            f"{self.proposals[t]['name']}/{t}" for t in doomed)
        token = preview["confirm_token"]
        if how == "preview":
            return
        if how == "wrong_token":
            self.refused(lambda: self.repo.erase(who, "ct-" + "0" * 32), "FAILED_PRECONDITION",
                         "CONFIRM_TOKEN_MISMATCH")
            return
        if not preview["matched"]:  # nothing names them: nothing is recorded
            self.refused(lambda: self.repo.erase(who, token), "FAILED_PRECONDITION",
                         "NOTHING_TO_ERASE")
            return
        record = self.repo.erase(who, token)
        self.erased_people.add(who)
        self.erasure_tokens.add(token)
        event(f"erasure retiring {('0', '1', '2+')[min(len(holders), 2)]} versions, deleting "
              f"{('0', '1', '2+')[min(len(doomed), 2)]} proposals")
        assert (record.cases, record.reviews, len(record.runs)) == (
            preview["cases"], preview["reviews"], len(runs))
        assert record.retired == [VersionRef(dataset=name, number=n) for name, n in holders]
        assert list(self.backend.list("erasures/pending/")) == []
        assert record in self.repo.erasures()
        # the model after the erasure
        for name, n in holders:
            v = self.versions[name][n - 1]
            if v.retirement is None:  # else the first retirement stands
                r = self.repo.retirement(name, n)
                assert (r.cause, r.erasure, r.retired_at) == (
                    "PERSON_ERASED", record.id, record.started_at)
                v.retirement = r
        self.gone |= cases
        self.ever_erased |= cases
        self.stored[who] = set()
        self.orphans[who] = set()
        for r in runs:
            self.runs.discard(r)
            self.erased_runs.add(r)
            for a in self.reviews.pop(r):
                del self.review_run[a]
        for t in doomed:
            self.proposals[t]["live"] = False
        for request in [q for q in self.confirmed if any(r in runs for r, _ in q)]:
            del self.confirmed[request]
        reachable = set().union(*(v.ids for vs in self.versions.values() for v in vs),
                                *(p["add"] for p in self.proposals.values() if p["live"]))
        for p in PEOPLE:
            lost = self.stored[p] - reachable
            self.stored[p] -= lost
            self.orphans[p] |= lost
        # the person's runs are gone, everyone else's stay with their reviews
        assert self.repo.runs() == sorted(self.runs)
        for r in runs:
            self.refused(lambda: self.repo.run(r), "NOT_FOUND", "RUN_NOT_FOUND")
        for r in sorted(self.runs):
            p, i = r.rsplit("-run-", 1)
            assert self.repo.run(r).steps == person_run(p, int(i))["steps"]
            assert {x.annotation_id for x in self.repo.reviews(r)} == self.reviews[r]
        # not one stored byte (nor key) names the person any more
        needle = who.encode()
        assert not [k for k in self.backend.list("")
                    if needle in k.encode() or needle in self.backend.get(k)]
        # a retried confirmation returns the same record and erases nothing twice
        after = keys(self.repo)
        assert self.repo.erase(who, token) == record
        assert keys(self.repo) == after
        report = self.repo.fsck()
        assert report.ok, report.problems

    @precondition(lambda self: self.erased_runs)
    @rule(data=st.data(), name=st.sampled_from(DATASETS))
    def re_promote_erased_run(self, data, name):
        """An erased run imported and promoted again: its case comes back only in the new
        version; the versions retired by the erasure stay retired."""
        r = data.draw(st.sampled_from(sorted(self.erased_runs)))
        p, i = r.rsplit("-run-", 1)
        self.import_runs([(p, int(i))])
        [ann] = self.review_runs([r], ["good"])
        c = run_case_id(person_run(p, int(i)))
        self.owner[c] = p
        head = self.head(name)
        token = self.stage(name, lambda: self.repo.promote(name, [subject(r, ann)], self.key()),
                           adds=frozenset({c}), review_of={c: ann})
        if token is None:
            return
        self.seal(token)
        assert c in self.head_version(name).ids and self.repo.version_state(
            name, self.head(name)) == "ACTIVE"
        assert self.head(name) == head + (1 if self.proposals[token]["changes"] else 0)

    # -- garbage collection --------------------------------------------------------------
    @rule()
    def gc(self):
        """gc of every pack changes nothing a reader or an erasure can see. (The packs are
        aged past the grace period, the staged proposals are not: collecting stale proposals
        is tested on its own, in tests/repo/test_gc.py.)"""
        previews = {p: self.repo.erase(p) for p in PEOPLE}
        before = keys(self.repo)
        for key in self.backend._times:
            if key.startswith(("packs/", "persons/")):
                self.backend._times[key] = 0.0
        assert self.repo.gc(dry_run=True, grace=60).dry_run is True
        assert keys(self.repo) == before
        assert self.repo.gc(grace=60).dry_run is False
        for p in PEOPLE:
            was, now = previews[p], self.repo.erase(p)
            for field in ("runs", "reviews", "versions_to_retire", "citing_scores"):
                assert now[field] == was[field]
            # only a case that nothing reached any more may have been collected
            assert set(now["cases"]) <= set(was["cases"])
            assert set(was["cases"]) - set(now["cases"]) <= self.orphans[p]
            self.orphans[p] &= set(now["cases"])
        report = self.repo.fsck()
        assert report.ok, report.problems

    # -- invariants ----------------------------------------------------------------------
    @invariant()
    def versions_read_as_modelled(self):
        before = keys(self.repo)
        for name in DATASETS:
            assert self.repo.head(name) == self.head(name)
            for n, v in enumerate(self.versions[name], 1):
                # the record still describes the set as sealed, retired or not
                assert self.repo.version(name, n) == v.record
                assert v.record.item_count == len(v.ids)
                assert self.digest_of.setdefault(v.ids, v.record.content_digest) == \
                    v.record.content_digest  # the same set has the same root, wherever
                assert self.repo.retirement(name, n) == v.retirement
                if v.retirement is None:
                    assert self.repo.version_state(name, n) == "ACTIVE"
                    assert not v.ids & self.gone  # no active version lost a case
                    ids, after = [], None
                    while True:  # small pages: the cursor is exercised too
                        page = self.repo.items(name, n, after=after, limit=2)
                        ids += page.items
                        if not page.has_more:
                            break
                        after = page.next_cursor
                    assert ids == sorted(v.ids)
                    assert tuple((e.case_id, e.annotation_id if e.promoted else e.committed_by)
                                 for e in self.repo.provenance(name, n)) == (v.provenance or ())
                    for c in ids:
                        case = self.repo.case(name, n, c)
                        assert case.person == self.owner[c]
                        assert cas.encode_case(case).case_id == c
                    continue
                assert self.repo.version_state(name, n) == "RETIRED"
                member = min(v.ids) if v.ids else NO_CASE
                calls = [lambda: self.repo.items(name, n), lambda: self.repo.case(name, n, member),
                         lambda: self.repo.pin(name, n), lambda: self.repo.provenance(name, n),
                         lambda: self.repo.create_experiment(name, n, "x")]
                if (name, n) in self.pins:
                    calls.append(lambda: self.repo.record_score(self.pins[(name, n)],
                                                                metric="acc", value=0))
                for call in calls:
                    err = error_of(call)
                    assert (err.code, err.reason) == ("FAILED_PRECONDITION", RETIRED)
                    assert (err.fields["retirement_cause"], err.fields["retired_at"]) == (
                        v.retirement.cause, v.retirement.retired_at)
            # scores outlive a retirement and say what became of their version
            assert [(s.version, s.score_id, s.metric, s.version_state)
                    for s in self.repo.scores(name)] == [
                (n, s, m, "ACTIVE" if self.versions[name][n - 1].retirement is None
                 else "RETIRED") for n, s, m in self.scores[name]]
        assert keys(self.repo) == before  # reads and refusals store nothing

    def teardown(self):
        fresh = cas.Repository(self.backend)  # another process sees the same states
        for name in DATASETS:
            for n, v in enumerate(self.versions[name], 1):
                assert fresh.retirement(name, n) == v.retirement
        report = fresh.fsck()
        assert report.ok, report.problems


TestErasureModel = ErasureMachine.TestCase
TestErasureModel.settings = settings(max_examples=100, stateful_step_count=40, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])


# -- regressions: bugs the machine found, each fixed ---------------------------------------
@pytest.fixture
def mem():
    return cas.Repository.create(MemoryBackend())


def erase(repo, who):
    return repo.erase(who, repo.erase(who)["confirm_token"])


# Regression (found by the machine): cas.repo.erasure.complete deletes every proposal based on a
# version it retires, sealed ones included, and drops their provenance objects: the ACTIVE
# version such a proposal sealed, which the erasure does not retire, loses its provenance
# (provenance() raises NotFound, fsck reports it missing)
def test_an_erasure_keeps_the_provenance_of_a_version_it_does_not_retire(mem):
    for name in ("ds", "other"):
        mem.create_dataset(name, admission="direct")
    bob = direct_case("bob-77c1", 0)
    mem.commit("ds", base=None, add=[bob])
    erase(mem, "bob-77c1")                                     # ds@1 retired, bob's case gone
    run = person_run("alice-3f9e", 0)
    mem.import_runs([run])
    p = mem.promote("ds", [subject(run["run_id"], review(mem, run["run_id"], "reviewed"))], "k")
    mem.seal("ds", p["confirm_token"])                         # ds@2 = alice's case, ACTIVE
    # (bob's case cannot be committed again: he is erased; the second erasure is carol's)
    mem.commit("other", base=None, add=[direct_case("carol-5d2a", 0)])
    erase(mem, "carol-5d2a")                                   # retires other@1 only
    assert mem.version_state("ds", 2) == "ACTIVE"
    assert [e.run_id for e in mem.provenance("ds", 2)] == [run["run_id"]]  # NotFound
    report = mem.fsck()
    assert report.ok, report.problems


# Regression (found by the machine): cas.repo.erasure.complete drops the provenance object of every
# proposal it deletes; the same reviewed run promoted into two datasets gives the same
# provenance object, so erasing someone else's case from the second dataset deletes the
# provenance of the first, ACTIVE one
def test_an_erasure_keeps_the_provenance_of_another_dataset(mem):
    for name in ("ds-a", "ds-b"):
        mem.create_dataset(name, admission="direct")
    run = person_run("bob-77c1", 0)
    mem.import_runs([run])
    ann = review(mem, run["run_id"], "reviewed")
    mem.commit("ds-b", base=None, add=[direct_case("alice-3f9e", 0)])
    for name in ("ds-a", "ds-b"):                              # ds-a@1, ds-b@2: bob's case
        p = mem.promote(name, [subject(run["run_id"], ann)], "k")
        mem.seal(name, p["confirm_token"])
    erase(mem, "alice-3f9e")                                   # retires ds-b@1 and ds-b@2
    assert mem.version_state("ds-a", 1) == "ACTIVE"
    assert [e.annotation_id for e in mem.provenance("ds-a", 1)] == [ann]  # NotFound
    report = mem.fsck()
    assert report.ok, report.problems


# Regression (found by the machine): Repository.lost_cases counts every case an erasure ever
# deleted, even one stored again since: a version cut from an operator-retired version drops a
# re-promoted case whose bytes are there
def test_recut_of_an_operator_retired_version_keeps_a_re_promoted_case(mem):
    mem.create_dataset("ds", admission="direct")
    run = person_run("alice-3f9e", 0)
    mem.import_runs([run])
    p = mem.promote("ds", [subject(run["run_id"], review(mem, run["run_id"], "reviewed"))], "k1")
    mem.seal("ds", p["confirm_token"])
    erase(mem, "alice-3f9e")                                   # ds@1 retired, case erased
    mem.import_runs([run], allow_erased_persons=["alice-3f9e"])  # (a new consent)
    p = mem.promote("ds", [subject(run["run_id"], review(mem, run["run_id"], "accepted"))], "k2")
    mem.seal("ds", p["confirm_token"])                         # ds@2 holds the case again
    [case_id] = mem.items("ds", 2).items
    mem.retire("ds", 2, "CONTAMINATED", "leaked")
    p = mem.remove("ds", [], "k3")
    assert p["proposed"]["removed"] == []                      # got [case_id]
    v3 = mem.seal("ds", p["confirm_token"]).version
    assert mem.items("ds", v3.number).items == [case_id]      # got []


# Regression (found by the machine): cas.repo.erasure.erase: the token names only the preview's
# content, and confirming a token of a completed erasure returns that record; a second erasure
# whose preview equals the first (e.g. the same run imported again, not yet reviewed) erases
# nothing
def test_a_second_erasure_with_the_same_preview_erases_again(mem):
    run = person_run("alice-3f9e", 0)
    mem.import_runs([run])
    first = erase(mem, "alice-3f9e")
    mem.import_runs([run], allow_erased_persons=["alice-3f9e"])  # (a new consent)
    assert mem.erase("alice-3f9e")["runs"] == [run["run_id"]]
    second = erase(mem, "alice-3f9e")
    assert mem.runs() == []                                    # got ['alice-3f9e-run-0']
    assert second != first
    assert not any(b"alice-3f9e" in mem.backend.get(k) for k in mem.backend.list(""))


# Regression (found by the machine): cas.repo.promotion.preview: promoting an erased case again onto
# the retired version that lost it lists the case both as added and as carried (carried_count +
# added != item_count)
def test_a_promotion_preview_does_not_carry_the_case_it_adds_again(mem):
    mem.create_dataset("ds", admission="direct")
    run = person_run("alice-3f9e", 0)
    mem.import_runs([run])
    p = mem.promote("ds", [subject(run["run_id"], review(mem, run["run_id"], "reviewed"))], "k1")
    mem.seal("ds", p["confirm_token"])
    erase(mem, "alice-3f9e")
    mem.import_runs([run], allow_erased_persons=["alice-3f9e"])  # (a new consent)
    p = mem.promote("ds", [subject(run["run_id"], review(mem, run["run_id"], "accepted"))], "k2")
    proposed = p["proposed"]
    assert proposed["added"] == [run_case_id(run)] and proposed["item_count"] == 1
    assert proposed["carried"] == [] and proposed["carried_count"] == 0   # got [id], 1
