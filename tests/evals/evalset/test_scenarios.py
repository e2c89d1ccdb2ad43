"""The eval set (cas/evals/evalset/scenarios.py): a tagged dataset of scenarios; capture and
dedup, eviction of the oldest failures at capacity (never a win), attached inputs, capture
records as failures, concurrent writers, and erasure."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.errors import FailedPrecondition, InvalidArgument, NotFound, VersionConflict
from cas.evals.capture.records import RecordedTool
from cas.evals.evalset import scenarios as evalset
from support.evals import AUTHOR, capture_record, clocked_repo, fill


def test_open_creates_a_tagged_direct_dataset_and_refuses_another_dataset():
    repo = clocked_repo()
    es = evalset.open(repo, "regressions")
    assert es.version is None and es.pin is None and es.cases() == []
    d = repo.dataset("regressions")
    assert d.tags == ["evalset"] and d.admits == "direct"
    repo.create_dataset("plain", admission="direct")
    with pytest.raises(FailedPrecondition) as refused:
        evalset.open(repo, "plain")
    assert refused.value.reason == "NOT_AN_EVAL_SET"
    with pytest.raises(NotFound):
        evalset.open(repo, "missing", create=False)

def test_every_change_seals_a_version_and_a_capture_again_seals_nothing():
    repo = clocked_repo()
    es = evalset.open(repo, "es")
    a = es.capture("s1", "failure", ["b", "a", "b"], {"success": 0.0}, notes="n",
                   author=AUTHOR)
    assert es.version == 1 and a.signature == ("a", "b") and a.session_id == "s1"
    again = es.capture_report("s1", "failure", ["a", "b"], {"success": 1.0}, author=AUTHOR)
    assert again.scenario == a and not again.sealed and es.version == 1
    es.capture("s1", "win", ["a", "b"], {"success": 1.0}, author=AUTHOR)   # another kind
    es.capture("s1", "failure", ["a"], {"success": 0.0}, author=AUTHOR)    # another signature
    assert es.version == 3 and len(es.cases()) == 3
    assert str(es.pin) == str(repo.pin("es", 3))
    case = repo.case("es", 1, a.id)
    assert case.tenant == "evalset" and case.metadata["evalset"]["kind"] == "failure"
    assert cas.encode_case(case).case_id == a.id

def test_notes_are_scrubbed():
    es = evalset.open(clocked_repo(), "es")
    s = es.capture("s1", "failure", [], {"success": 0}, notes="write to bob@example.com",
                   author=AUTHOR)
    assert "bob@example.com" not in s.notes and "[REDACTED:email]" in s.notes

def test_at_capacity_the_oldest_failures_are_evicted_in_the_same_commit():
    repo = clocked_repo()
    es = evalset.open(repo, "es", capacity=3)
    f0, w1, f2 = fill(es, "fwf")
    report = es.capture_report("s9", "failure", [], {"success": 0.0}, author=AUTHOR)
    assert report.evicted == (f0.id,) and report.version == 4
    v = repo.version("es", 4)
    assert (v.added, v.removed, v.item_count) == (1, 1, 3)
    assert [s.id for s in es.cases()] == [w1.id, f2.id, report.scenario.id]
    es.capture("s10", "win", [], {"success": 1.0}, author=AUTHOR)   # a win evicts a failure too
    assert [s.kind for s in es.cases()] == ["win", "failure", "win"]
    assert f2.id not in [s.id for s in es.cases()]

def test_wins_are_never_evicted_and_a_corpus_full_of_wins_refuses():
    repo = clocked_repo()
    es = evalset.open(repo, "es", capacity=2)
    wins = fill(es, "ww")
    for kind in ("failure", "win"):
        with pytest.raises(FailedPrecondition) as refused:
            es.capture("new", kind, [], {"success": 0.0}, author=AUTHOR)
        assert refused.value.reason == "EVAL_SET_FULL_OF_WINS"
        assert refused.value.fields["wins"] == 2
    assert es.version == 2 and [s.id for s in es.cases()] == [w.id for w in wins]
    # a capture already held is still answered: nothing needs room
    assert es.capture("s0", "win", ["label0"], {"success": 1.0}, author=AUTHOR) == wins[0]

def test_a_smaller_capacity_evicts_enough_failures_or_refuses():
    repo = clocked_repo()
    big = evalset.open(repo, "es", capacity=10)
    f0, f1, w2, f3 = fill(big, "ffwf")
    small = evalset.open(repo, "es", capacity=2)
    report = small.capture_report("x", "failure", [], {"success": 0}, author=AUTHOR)
    assert report.evicted == tuple(sorted([f0.id, f1.id, f3.id]))
    assert [s.id for s in small.cases()] == [w2.id, report.scenario.id]

def test_attach_input_replaces_the_case_in_a_new_version():
    repo = clocked_repo()
    es = evalset.open(repo, "es")
    old = es.capture("s1", "failure", ["x"], {"success": 0}, author=AUTHOR)
    new = es.attach_input(old.id, {"input_text": "hello"}, author=AUTHOR)
    assert new.id != old.id and new.replay_input == {"input_text": "hello"}
    assert (new.session_id, new.signature, new.captured_at) == \
        (old.session_id, old.signature, old.captured_at)
    assert es.version == 2 and [s.id for s in es.cases()] == [new.id]
    assert es.attach_input(new.id, {"input_text": "hello"}, author=AUTHOR) == new
    assert es.version == 2  # the same input again seals nothing
    with pytest.raises(NotFound) as missing:
        es.attach_input(old.id, "x", author=AUTHOR)
    assert missing.value.reason == "SCENARIO_NOT_FOUND"
    with pytest.raises(InvalidArgument):
        es.attach_input(new.id, None, author=AUTHOR)

def test_matching_gives_failures_holding_every_label_newest_first_and_kind_filters():
    es = evalset.open(clocked_repo(), "es")
    a = es.capture("s1", "failure", ["tool_failed:search", "failed"], {"s": 0}, author=AUTHOR)
    b = es.capture("s2", "failure", ["tool_failed:search"], {"s": 0}, author=AUTHOR)
    es.capture("s3", "win", ["tool_failed:search", "failed"], {"s": 1}, author=AUTHOR)
    c = es.capture("s4", "failure", ["failed"], {"s": 0}, author=AUTHOR)
    assert es.matching(["tool_failed:search"]) == [b, a]
    assert es.matching(["failed", "tool_failed:search"]) == [a]
    assert es.matching(["nothing"]) == []
    assert [s.id for s in es.cases("failure")] == [a.id, b.id, c.id]
    assert [s.session_id for s in es.cases("win")] == ["s3"]
    with pytest.raises(InvalidArgument):
        es.matching([])
    with pytest.raises(InvalidArgument):
        es.cases("loss")

def test_capture_failure_from_a_capture_record():
    repo = clocked_repo()
    es = evalset.open(repo, "es")
    s = es.capture_failure(capture_record(), author=AUTHOR)
    assert s.kind == "failure" and s.session_id == "capture-r1"
    assert s.signature == ("error_type:TimeoutError", "failed")
    assert s.baseline_scores == {"success": 0.0} and s.replay_input is None  # omitted
    assert s.notes == "agent support: failed (TimeoutError)"
    person = "pk:" + "ab" * 32
    redacted = capture_record(id="r2", status="completed", error_type=None, content="redacted",
                      input_text="where is [REDACTED:email]'s order?", person=person,
                      tool_calls=(RecordedTool(name="search", failed=True),
                                  RecordedTool(name="open", failed=False)))
    t = es.capture_failure(redacted, author=AUTHOR)
    assert t.signature == ("tool_failed:search",)
    assert t.replay_input == {"input_text": "where is [REDACTED:email]'s order?"}
    assert repo.case("es", es.version, t.id).person == person
    assert es.capture_failure(redacted, author=AUTHOR) == t  # dedup
    with pytest.raises(InvalidArgument):
        es.capture_failure({"id": "r1"}, author=AUTHOR)

@pytest.mark.parametrize("args,field", [
    (dict(kind="loss"), "kind"),
    (dict(signature="failed"), "signature"),
    (dict(signature=["ok", ""]), "signature"),
    (dict(baseline_scores={"success": "high"}), "baseline_scores"),
    (dict(baseline_scores={"success": float("nan")}), "baseline_scores"),
    (dict(baseline_scores=[("success", 1)]), "baseline_scores"),
    (dict(baseline_scores={"regression": 1}), "baseline_scores"),
    (dict(session_id=""), "session_id"),
])
def test_bad_arguments_are_refused_naming_the_field_and_nothing_is_sealed(args, field):
    es = evalset.open(clocked_repo(), "es")
    given = {"session_id": "s", "kind": "failure", "signature": ["a"],
             "baseline_scores": {"success": 0}, **args}
    with pytest.raises(InvalidArgument) as refused:
        es.capture(**given, author=AUTHOR)
    assert refused.value.fields.get("field") == field
    assert es.version is None

def test_other_bad_arguments():
    repo = clocked_repo()
    with pytest.raises(InvalidArgument):
        evalset.open(repo, "es", capacity=0)
    with pytest.raises(InvalidArgument):
        evalset.open(repo, "es", capacity=True)
    es = evalset.open(repo, "es")
    with pytest.raises(InvalidArgument):
        es.capture("s", "win", [], {"s": 1}, replay_input={"x": float("inf")}, author=AUTHOR)

def test_a_conflicting_writer_is_retried_and_dedup_is_checked_again():
    repo = clocked_repo()
    es = evalset.open(repo, "es")
    other = evalset.open(repo, "es")
    commit, calls = repo.commit, []

    def racing_commit(*args, **kwargs):
        calls.append(kwargs["base"])
        if len(calls) == 1:  # another writer captures the same scenario first
            repo.commit = commit
            other.capture("s1", "failure", ["a"], {"success": 0}, author=AUTHOR)
            repo.commit = racing_commit
        return commit(*args, **kwargs)
    repo.commit = racing_commit
    report = es.capture_report("s1", "failure", ["a"], {"success": 0}, author=AUTHOR)
    assert calls == [0] and not report.sealed and es.version == 1
    report = es.capture_report("s2", "failure", ["a"], {"success": 0}, author=AUTHOR)
    assert report.sealed and report.version == 2

    def always_conflicts(*args, **kwargs):
        raise VersionConflict("es", 2, 3)
    repo.commit = always_conflicts
    with pytest.raises(VersionConflict):
        es.capture("s3", "failure", [], {"success": 0}, author=AUTHOR)

def test_an_erasure_deletes_the_persons_scenarios_and_the_next_capture_renews():
    repo = clocked_repo()
    es = evalset.open(repo, "es")
    kept = es.capture("s1", "failure", [], {"success": 0}, author=AUTHOR)
    es.capture("s2", "failure", [], {"success": 0}, person="user-42", author=AUTHOR)
    preview = repo.erase("user-42", author=AUTHOR)
    repo.erase("user-42", preview["confirm_token"], author=AUTHOR)
    assert repo.version_state("es", 2) == "RETIRED"
    with pytest.raises(FailedPrecondition):
        es.cases()
    assert es.renew(author=AUTHOR) == 3 and es.renew(author=AUTHOR) is None
    assert [s.id for s in es.cases()] == [kept.id]

def test_erasing_the_user_of_a_capture_record_deletes_its_scenario():
    repo = clocked_repo()
    es = evalset.open(repo, "es")
    # a capture record names the store's keyed digest of its user, never the user id
    digest = repo.store.person_digest("user-7")
    kept = es.capture("s1", "win", [], {"success": 1}, author=AUTHOR)
    es.capture_failure(capture_record(person=digest), author=AUTHOR)
    preview = repo.erase("user-7", author=AUTHOR)
    assert len(preview["cases"]) == 1
    repo.erase("user-7", preview["confirm_token"], author=AUTHOR)
    es.capture("s2", "win", [], {"success": 1}, author=AUTHOR)  # renews the retired head first
    assert [s.session_id for s in es.cases()] == ["s1", "s2"] and es.cases()[0] == kept
    assert es.version == 4


# -- the invariant ----------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(capacity=st.integers(1, 4),
       captures=st.lists(st.tuples(st.sampled_from(["failure", "win"]), st.integers(0, 5)),
                         max_size=10))
def test_the_corpus_never_exceeds_capacity_and_no_win_is_ever_evicted(capacity, captures):
    repo = clocked_repo()
    es = evalset.open(repo, "es", capacity=capacity)
    wins: set[str] = set()
    for kind, session in captures:
        head = es.version
        try:
            report = es.capture_report(f"s{session}", kind, [], {"m": 1}, author=AUTHOR)
        except FailedPrecondition as exc:
            assert exc.reason == "EVAL_SET_FULL_OF_WINS" and len(wins) >= capacity
            assert es.version == head  # nothing sealed
            continue
        if report.scenario.kind == "win":
            wins.add(report.scenario.id)
        held = {s.id for s in es.cases()}
        assert len(held) <= capacity and wins <= held
        assert es.version == (head if not report.sealed else report.version)
