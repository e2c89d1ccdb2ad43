"""The whole lifecycle across modules (the Python API): runs, reviews, content policy,
promote/remove/seal and provenance together, on a fresh process view and against a model.

The tests of each module live in tests/repo/test_runs.py, test_reviews.py and test_promotion.py.
"""

from __future__ import annotations

import datetime
import io
import itertools

import msgspec
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import cas
from cas.storage.backends.memory import MemoryBackend
from support.lifecycle import REVIEWER, jsonl, run_obj, subject

pytestmark = pytest.mark.usefixtures("as_reviewer")


def test_lifecycle_on_a_fresh_process_view(staged, location):
    """A second Repository opened on the same location sees runs, reviews and proposals."""
    repo, anns = staged
    p = repo.promote("evals", [subject("r-0", anns["r-0"])], "k")
    again = cas.open(location)
    assert again.runs() == repo.runs()
    assert again.reviews("r-0") == repo.reviews("r-0")
    assert again.seal("evals", p["confirm_token"]).version.number == 1
    assert repo.seal("evals", p["confirm_token"]).already_sealed is True
    report = again.fsck()
    assert report.ok, report.problems


# -- the lifecycle against a model (hypothesis stateful) --------------------------------------
POOL = [f"run-{i}" for i in range(6)]
DATASETS = ["ds-a", "ds-b"]
KEYS = ["k0", "k1", "k2", "k3"]
CLASSES = ["input", "output", "tool_arguments", "tool_results", "metadata"]


def pool_run(run_id: str, variant: int) -> dict:
    """Two different recordings per run id (a conflict when both are imported)."""
    steps = [{"type": "message", "role": "user", "content": run_id},
             {"type": "tool_call", "tool_name": "ls", "arguments": {"v": variant},
              "result": None if variant else ["a"]},
             {"type": "tool_call", "tool_name": "rm", "arguments": {}, "error": "denied"}]
    return run_obj(run_id, int(run_id.split("-")[1]), steps=steps, output=f"out {variant}")


def expected_case(run: dict, withheld: frozenset) -> dict:
    """The frozen projection of a run, written out independently of cas.format.projection.freeze."""
    steps = []
    for s in run["steps"]:
        s = dict(s)
        if s["type"] == "tool_call":
            if "tool_arguments" in withheld:
                s.pop("arguments", None)
            if "tool_results" in withheld:
                s.pop("result", None)
                s.pop("error", None)
        steps.append(s)
    return {"run_id": run["run_id"], "started_at": run.get("started_at"),
            "input": None if "input" in withheld else run.get("input"),
            "output": None if "output" in withheld else run.get("output"),
            "steps": steps, "outcome": run.get("outcome"),
            "metadata": {} if "metadata" in withheld else run.get("metadata", {}),
            "tenant": run["tenant"], "person": run.get("person"), "withheld": sorted(withheld)}


class LifecycleMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.backend = MemoryBackend()
        # A clock that ticks per call: review times and so annotation ids and tokens are the
        # same on every replay of an example (hypothesis needs reproducible draws).
        ticks = itertools.count(1)
        start = datetime.datetime(2026, 5, 1, tzinfo=datetime.timezone.utc)
        self.repo = cas.Repository.create(self.backend, clock=lambda: (
            start + datetime.timedelta(seconds=next(ticks))).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
        for name in DATASETS:
            self.repo.create_dataset(name, author="t")
        # The team's rule: every judgment this model gives, on metric m, admits a run (the
        # rule itself is tested in tests/repo/test_settings.py)
        self.repo.set_eligibility("m", ["bad", "good"], author="t")
        self.runs: dict[str, tuple[int, dict]] = {}      # run id -> (variant, run)
        self.review_of: dict[str, str] = {}              # annotation id -> run id
        self.reviewed_at: dict[str, str] = {}
        self.review_tokens: dict[tuple, str] = {}        # request -> token it previewed with
        self.confirmed: dict = {}  # confirm token -> annotation ids saved
        self.withheld: frozenset = frozenset()
        self.versions = {n: [] for n in DATASETS}        # name -> [(set, record, provenance)]
        self.proposals: dict[str, dict] = {}             # token -> what it proposes
        self.claims: dict[tuple, tuple] = {}             # (name, key) -> (request, token)
        self.case_of: dict[tuple, str] = {}              # (run id, withheld) -> case id

    @initialize()
    def some_reviewed_runs(self):
        self.repo.import_runs(io.BytesIO(jsonl(*(pool_run(r, 0) for r in POOL[:3]))))
        self.runs.update({r: (0, pool_run(r, 0)) for r in POOL[:3]})
        reqs = [{"run_id": r, "metric": "m", "label": "good"} for r in POOL[:3]]
        token = self.repo.add_reviews(reqs)["confirm_token"]
        saved = self.repo.add_reviews(reqs, confirm_token=token)
        # the same request made again by the `review` rule is this confirmation, repeated
        self.review_tokens[tuple((r, "m", "good") for r in POOL[:3])] = token
        self.confirmed[token] = saved["annotation_ids"]
        for ann, row in zip(saved["annotation_ids"], saved["reviews"]):
            self.review_of[ann] = row["run_id"]
            self.reviewed_at[ann] = row["reviewed_at"]

    def keys(self):
        return sorted(self.backend.list(""))

    def head(self, name):
        return len(self.versions[name])

    def head_set(self, name):
        return self.versions[name][-1][0] if self.versions[name] else frozenset()

    def refused(self, call, code, reason=None):
        before = self.keys()
        with pytest.raises(cas.CasError) as info:
            call()
        assert (info.value.code, info.value.reason if reason else None) == (code, reason), \
            info.value.to_json()
        assert self.keys() == before
        return info.value

    def case_id(self, run_id):
        case = expected_case(self.runs[run_id][1], self.withheld)
        cid = cas.encode_case(case).case_id
        # same run under the same policy -> same case id, for the whole life of the repository
        assert self.case_of.setdefault((run_id, self.withheld), cid) == cid
        return cid

    # -- rules ---------------------------------------------------------------------------
    @rule(picks=st.lists(st.tuples(st.sampled_from(POOL), st.sampled_from([0, 0, 0, 1])),
                         min_size=1, max_size=4),
          bad_line=st.sampled_from([None, None, None, 0, 2]))
    def import_runs(self, picks, bad_line):
        lines = [pool_run(r, v) for r, v in picks]
        if bad_line is not None:
            lines.insert(min(bad_line, len(lines)), {"run_id": "broken", "tenant": "t"})
        data = io.BytesIO(jsonl(*lines))
        variants: dict[str, set] = {}
        for r, v in picks:
            variants.setdefault(r, set()).add(v)
        if bad_line is not None or any(len(v) > 1 for v in variants.values()):
            self.refused(lambda: self.repo.import_runs(data), "INVALID_ARGUMENT")
            return
        conflict = [r for r, v in variants.items() if r in self.runs and self.runs[r][0] not in v]
        if conflict:
            err = self.refused(lambda: self.repo.import_runs(data), "FAILED_PRECONDITION",
                               "RUN_ID_CONFLICT")
            assert err.fields["run_id"] in conflict
            return
        new = sorted(r for r in variants if r not in self.runs)
        before = self.keys()
        result = self.repo.import_runs(data)
        assert result == (new, len(variants) - len(new))
        if not new:
            assert self.keys() == before
        for r, v in picks:
            self.runs.setdefault(r, (v, pool_run(r, v)))
        assert self.repo.runs() == sorted(self.runs)

    @rule(data=st.data(), mode=st.sampled_from(["confirm", "confirm", "preview", "wrong",
                                                 "stale"]),
          wrong=st.binary(min_size=16, max_size=16), ghost=st.sampled_from([False] * 5 + [True]))
    def review(self, data, mode, wrong, ghost):
        reqs = data.draw(st.lists(st.tuples(st.sampled_from(sorted(self.runs)),
                                            st.sampled_from(["m"]),
                                            st.sampled_from(["good", "bad"])),
                                  min_size=1, max_size=3))
        if ghost:
            reqs = reqs + [("ghost", "m", "good")]
        requests = [{"run_id": r, "metric": m, "label": lab} for r, m, lab in reqs]
        if any(r not in self.runs for r, _, _ in reqs):
            self.refused(lambda: self.repo.add_reviews(requests), "NOT_FOUND", "RUN_NOT_FOUND")
            return
        before = self.keys()
        token = self.repo.add_reviews(requests)["confirm_token"]
        assert self.keys() == before
        request = tuple(reqs)
        assert self.review_tokens.setdefault(request, token) == token  # deterministic
        if mode == "preview":
            return
        if mode in ("wrong", "stale"):
            others = [t for q, t in self.review_tokens.items() if t != token]
            bad = "ct-" + wrong.hex() if mode == "wrong" or not others else others[0]
            self.refused(lambda: self.repo.add_reviews(requests, confirm_token=bad),
                         "FAILED_PRECONDITION", "CONFIRM_TOKEN_MISMATCH")
            return
        saved = self.repo.add_reviews(requests, confirm_token=token)
        assert len(saved["annotation_ids"]) == len(requests)
        if token in self.confirmed:  # a repeated confirmation saves nothing new
            assert saved["annotation_ids"] == self.confirmed[token]
            return
        self.confirmed[token] = saved["annotation_ids"]
        for ann, row, (r, m, lab) in zip(saved["annotation_ids"], saved["reviews"], reqs):
            assert ann not in self.review_of
            assert (row["run_id"], row["metric"], row["label"], row["reviewer"]) == (
                r, m, lab, REVIEWER)
            self.review_of[ann] = r
            self.reviewed_at[ann] = row["reviewed_at"]
        for r in {r for r, _, _ in reqs}:
            assert sorted(x.annotation_id for x in self.repo.reviews(r)) == sorted(
                a for a, rr in self.review_of.items() if rr == r)

    @rule(withheld=st.sets(st.sampled_from(CLASSES), max_size=2))
    def set_policy(self, withheld):
        record = self.repo.set_content_policy(sorted(withheld), author="ops")
        assert record.withheld == sorted(withheld)
        self.withheld = frozenset(withheld)

    @precondition(lambda self: self.review_of)
    @rule(data=st.data(), name=st.sampled_from(DATASETS), key=st.sampled_from(KEYS),
          fault=st.sampled_from([None] * 6 + ["no_review", "other_review", "unknown_run",
                                              "bad_kind", "run_id_mismatch", "unknown_review"]),
          native=st.booleans())
    def promote(self, data, name, key, fault, native):
        anns = data.draw(st.lists(st.sampled_from(list(self.review_of)), min_size=1,
                                  max_size=3))
        kind = "SUBJECT_KIND_AGENT_RUN" if native else "agent_run"
        subjects = [{"subject_kind": kind, "subject_ref": self.review_of[a],
                     "review_annotation_id": a} for a in anns]
        if fault is not None:
            s = subjects[-1]
            other = [a for a, r in self.review_of.items() if r != s["subject_ref"]]
            if fault == "no_review":
                del s["review_annotation_id"]
                expect = ("FAILED_PRECONDITION", "REVIEW_REQUIRED")
            elif fault == "other_review" and other:
                s["review_annotation_id"] = other[0]
                expect = ("FAILED_PRECONDITION", "REVIEW_RUN_MISMATCH")
            elif fault == "unknown_run":
                s["subject_ref"] = "ghost"
                expect = ("NOT_FOUND", "RUN_NOT_FOUND")
            elif fault == "bad_kind":
                s["subject_kind"] = "SUBJECT_KIND_DATASET_ITEM"
                expect = ("INVALID_ARGUMENT", "SUBJECT_KIND_INVALID")
            elif fault == "run_id_mismatch":
                s["run_id"] = "ghost"
                expect = ("INVALID_ARGUMENT", "RUN_MISMATCH")
            else:
                s["review_annotation_id"] = "ann-" + "0" * 32
                expect = ("NOT_FOUND", "REVIEW_NOT_FOUND")
            self.refused(lambda: self.repo.promote(name, subjects, key), *expect)
            return
        request = ("promote", tuple(sorted((self.review_of[a], a) for a in anns)), self.withheld)
        self.stage(name, key, request, lambda: self.repo.promote(name, subjects, key),
                   adds=[(self.review_of[a], a) for a in anns])

    @precondition(lambda self: any(self.versions.values()))
    @rule(data=st.data(), key=st.sampled_from(KEYS),
          fault=st.sampled_from([None] * 5 + ["non_member", "empty"]))
    def remove(self, data, key, fault):
        name = data.draw(st.sampled_from([n for n in DATASETS if self.versions[n]]))
        head = sorted(self.head_set(name))
        ids = data.draw(st.lists(st.sampled_from(head), min_size=1, max_size=3)) if head else []
        if fault == "empty" or not ids:
            self.refused(lambda: self.repo.remove(name, [], key), "FAILED_PRECONDITION",
                         "EMPTY_REMOVAL")
            return
        if fault == "non_member":
            ids = ids + [cas.encode_case({"input": "never promoted"}).case_id]
        request = ("remove", tuple(sorted(set(ids))))
        self.stage(name, key, request, lambda: self.repo.remove(name, ids, key),
                   removes=sorted(set(ids)))

    def stage(self, name, key, request, call, adds=(), removes=()):
        claim = self.claims.get((name, key))
        if claim is not None:
            if claim[0] != request:
                self.refused(call, "FAILED_PRECONDITION", "IDEMPOTENCY_KEY_REUSED")
                return
            before = self.keys()
            p = call()  # a replay: the same proposal, nothing stored
            assert p["confirm_token"] == claim[1] and self.keys() == before
            known = self.proposals[claim[1]]
            assert p["proposed"]["content_digest"] == known["root"]
            # a replay on a moved head says so (unless it was sealed, or seals nothing)
            assert p["stale"] is (known["sealed"] is None and known["changes"]
                                  and self.head(name) != known["base"])
            assert (p["restage"] is not None) is p["stale"]
            return
        base_set = self.head_set(name)
        if any(r not in base_set for r in removes):
            self.refused(call, "NOT_FOUND", "ITEM_NOT_IN_VERSION")
            return
        # runs that freeze to one case: the first by (run id, annotation id) speaks for it,
        # whatever the order the subjects were listed in
        provenance = {}
        for run_id, ann in sorted(adds):
            provenance.setdefault(self.case_id(run_id), (run_id, ann))
        added = sorted(set(provenance) - base_set)
        result = (base_set - set(removes)) | set(provenance)
        p = call()
        token = p["confirm_token"]
        assert token not in self.proposals
        base = self.head(name)
        assert p["base_version"] == (None if base == 0 else {
            "number": base, "item_count": len(base_set),
            "content_digest": self.versions[name][-1][1].content_digest})
        proposed = p["proposed"]
        assert proposed["added"] == added and proposed["removed"] == list(removes)
        assert proposed["item_count"] == len(result)
        assert proposed["carried_count"] == len(base_set) - len(removes)
        assert proposed["carried"] == sorted(base_set - set(removes))
        assert p["withheld"] == {c: sorted(self.withheld) for c in added}
        assert p["changes"] is bool(added or removes)
        self.claims[(name, key)] = (request, token)
        self.proposals[token] = {
            "name": name, "key": key, "base": base, "result": frozenset(result), "root":
            proposed["content_digest"], "changes": bool(added or removes), "sealed": None,
            "added": len(added), "removed": len(removes),
            "operation": request[0], "provenance": [
                (c, provenance[c][0], provenance[c][1]) for c in added]}

    @precondition(lambda self: any(p["sealed"] is None and p["changes"]
                                   and p["base"] == self.head(p["name"])
                                   for p in self.proposals.values()))
    @rule(data=st.data())
    def seal_fresh(self, data):
        """Seal a proposal made on the current head (the common, successful path)."""
        token = data.draw(st.sampled_from([
            t for t, p in self.proposals.items() if p["sealed"] is None and p["changes"]
            and p["base"] == self.head(p["name"])]))
        self.seal_token(self.proposals[token]["name"], token)

    @precondition(lambda self: self.proposals)
    @rule(data=st.data(), name=st.sampled_from(DATASETS),
          how=st.sampled_from(["known"] * 4 + ["stale", "sealed", "other_dataset", "unknown",
                                                "malformed"]),
          unknown=st.binary(min_size=16, max_size=16))
    def seal(self, data, name, how, unknown):
        mine = [t for t, p in self.proposals.items() if p["name"] == name]
        if how == "malformed":
            self.refused(lambda: self.repo.seal(name, "ct-" + unknown.hex()[:10]),
                         "INVALID_ARGUMENT")
            return
        theirs = [t for t in self.proposals if t not in mine]
        if how == "unknown" or not mine and not theirs:
            self.refused(lambda: self.repo.seal(name, "ct-" + unknown.hex()), "NOT_FOUND",
                         "PROPOSAL_NOT_FOUND")
            return
        if how == "other_dataset" and theirs or not mine:
            token = data.draw(st.sampled_from(theirs))
            self.refused(lambda: self.repo.seal(name, token), "NOT_FOUND",
                         "PROPOSAL_NOT_FOUND")
            return
        # prefer a stale or an already sealed token when asked for one and there is one
        wanted = {"stale": lambda p: p["sealed"] is None and p["changes"]
                  and p["base"] != self.head(name),
                  "sealed": lambda p: p["sealed"] is not None}.get(how, lambda p: True)
        pick = [t for t in mine if wanted(self.proposals[t])] or mine
        self.seal_token(name, data.draw(st.sampled_from(pick)))

    def seal_token(self, name, token):
        p = self.proposals[token]
        before = self.keys()
        if not p["changes"]:
            assert self.repo.seal(name, token) == (None, False)
            assert self.keys() == before
            return
        if p["sealed"] is not None:
            result = self.repo.seal(name, token)
            assert result == (self.versions[name][p["sealed"] - 1][1], True)
            assert self.keys() == before
            return
        if self.head(name) != p["base"]:
            err = self.refused(lambda: self.repo.seal(name, token), "FAILED_PRECONDITION",
                               "PROPOSAL_STALE")
            assert err.fields == {"base": p["base"], "head": self.head(name),
                                  "idempotency_key": p["key"]}
            return
        v = self.repo.seal(name, token, author="sealer", message="m")
        assert v.already_sealed is False
        v = v.version
        assert (v.dataset, v.number, v.parent) == (name, p["base"] + 1, p["base"] or None)
        assert (v.item_count, v.content_digest, v.operation) == (
            len(p["result"]), p["root"], p["operation"])
        assert (v.added, v.removed, v.proposal, v.author) == (
            p["added"], p["removed"], token, "sealer")
        provenance = [(c, r, a, REVIEWER, self.reviewed_at[a]) for c, r, a in p["provenance"]]
        got = [(e.case_id, e.run_id, e.annotation_id, e.reviewer, e.reviewed_at)
               for e in self.repo.provenance(name, v.number)]
        assert got == provenance
        p["sealed"] = v.number
        self.versions[name].append((p["result"], v, got))

    # -- invariants ----------------------------------------------------------------------
    @invariant()
    def sealed_versions_never_change(self):
        for name, versions in self.versions.items():
            assert self.repo.head(name) == len(versions)  # numbers 1..n, no gaps
            for n, (ids, record, provenance) in enumerate(versions, 1):
                assert self.repo.version(name, n) == record
                page = self.repo.items(name, n, limit=500)
                assert page.items == sorted(ids) and not page.has_more
                assert [(e.case_id, e.run_id, e.annotation_id, e.reviewer, e.reviewed_at)
                        for e in self.repo.provenance(name, n)] == provenance
            if versions:  # every case of the head is readable, and is what its run froze to
                ids = versions[-1][0]
                cases = {c: self.repo.case(name, len(versions), c) for c in ids}
                for (run_id, withheld), cid in self.case_of.items():
                    if cid in cases:
                        got = msgspec.to_builtins(cases[cid])
                        want = expected_case(self.runs[run_id][1], withheld)
                        assert {k: got[k] for k in want} == want

    def teardown(self):
        report = cas.Repository(self.backend).fsck()
        assert report.ok, report.problems


TestLifecycle = LifecycleMachine.TestCase
TestLifecycle.settings = settings(max_examples=30, stateful_step_count=25, deadline=None,
                                  suppress_health_check=[HealthCheck.too_slow])
