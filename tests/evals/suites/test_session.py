"""A suite session (cas/evals/suites/session.py): a source (a suite file, `NAME@N` or its pin)
made runnable (the content policy re-applied for `cas:replay`, the cassette book, the checks of
recording), then run and recorded (`cas suite run/merge/diff`, which call it:
tests/cli/test_suite.py)."""

from __future__ import annotations

import pytest

import cas
from cas.evals.cassettes import LIVE, REPLAY
from cas.evals.suites.files import Suite, write_jsonl
from cas.evals.suites.session import cassette_book, open_source, pinned_suite, prepare
from support.evals import ADA, versioned_repo


@pytest.fixture
def versioned():
    return versioned_repo()


def opener(repo):
    """An `open_repo` that counts its calls."""
    def open_repo():
        open_repo.calls += 1
        return repo
    open_repo.calls = 0
    return open_repo


# -- the source -------------------------------------------------------------------------------
def test_a_source_is_a_suite_file_a_version_or_its_pin(versioned, tmp_path):
    path = tmp_path / "suite.jsonl"
    write_jsonl(path, Suite("demo", "v1", [{"id": "c0", "input": 0, "tenant": "acme"}]))
    nothing = opener(None)
    assert open_source(str(path), nothing) == (Suite("demo", "v1", [
        {"id": "c0", "input": 0, "tenant": "acme"}]), None)
    assert nothing.calls == 0  # a suite file needs no repository
    by_name = open_source("evals@2", opener(versioned))
    pin = str(versioned.pin("evals", 2))
    assert (by_name.suite.version, by_name.dataset, len(by_name.suite.cases)) == (pin, "evals", 4)
    assert open_source(pin, opener(versioned)) == by_name == pinned_suite(pin, opener(versioned))
    with pytest.raises(cas.InvalidArgument, match="neither a suite file nor DATASET@N") as e:
        open_source(str(tmp_path / "nowhere"), nothing)
    assert e.value.reason == "USAGE" and nothing.calls == 0


def test_a_pin_that_no_longer_matches_or_a_retired_version_is_refused(versioned):
    forged = str(versioned.pin("evals", 1)).replace("evals@1", "evals@2")
    with pytest.raises(cas.FailedPrecondition) as e:
        open_source(forged, opener(versioned))
    assert e.value.reason == "PIN_MISMATCH"
    with pytest.raises(cas.InvalidArgument) as e:
        pinned_suite("evals@1", opener(versioned))  # a version, but no pin
    assert e.value.reason == "INVALID_PIN"
    pin = str(versioned.pin("evals", 1))
    versioned.retire("evals", 1, "CONTAMINATED", "leaked", author=ADA)
    for source in ("evals@1", pin):
        with pytest.raises(cas.FailedPrecondition) as e:
            open_source(source, opener(versioned))
        assert e.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"


# -- preparing and running --------------------------------------------------------------------
def test_prepare_loads_before_it_reads_and_run_records(versioned):
    nothing = opener(None)
    with pytest.raises(cas.InvalidArgument) as e:
        prepare("evals@1", "cas:replay", open_repo=nothing)
    assert e.value.reason == "PLAN_REQUIRED" and nothing.calls == 0
    with pytest.raises(cas.InvalidArgument) as e:
        prepare("evals@1", "cas:echo", scorer="no_such_module_xyz:f", open_repo=nothing)
    assert e.value.reason == "INVALID_CALLABLE" and nothing.calls == 0
    session = prepare("evals@1", "cas:replay", open_repo=opener(versioned),
                      plan=b'{"default_effect": "none"}', experiment="replayed")
    result, recorded = session.run(concurrency=2, seed=3)
    assert result.ok and result.seed == 3 and session.dataset == "evals"
    assert (recorded.experiment, recorded.scores, recorded.created) == ("replayed", 3, True)
    assert session.run(shard="1/2")[0].shard.count == 2


def test_replay_of_a_version_leaves_out_what_its_content_policy_withholds_now(versioned):
    versioned.set_content_policy(["output"], author=ADA, dataset="evals")
    session = prepare("evals@1", "cas:replay", open_repo=opener(versioned),
                      plan={"default_effect": "none"})
    result, _ = session.run()
    assert result.ok and [r.answer for r in result.results] == [None, None, None]


def test_cassettes_are_opened_for_an_executor_that_takes_them_and_refused_for_others(versioned,
                                                                                 tmp_path):
    session = prepare("evals@1", "cas:cassette", open_repo=opener(versioned),
                      cassette_mode="record-missing", cassette_ordered=True)
    assert session.cassettes.mode == "record-missing" and session.cassettes.ordered
    assert session.run()[0].ok and session.cassettes.pending == 0
    with pytest.raises(cas.InvalidArgument) as e:
        prepare("evals@1", "cas:echo", open_repo=opener(versioned), cassette_mode="replay")
    assert e.value.reason == "CASSETTE_UNUSED_BY_EXECUTOR"
    assert prepare("evals@1", "cas:echo", open_repo=opener(versioned)).cassettes is None
    path = tmp_path / "suite.jsonl"
    write_jsonl(path, Suite("demo", "v1", [{"id": "c0", "input": 0, "tenant": "acme"}]))
    nothing = opener(None)
    with pytest.raises(cas.FailedPrecondition) as e:  # before asking for a repository
        cassette_book("v1", "cas:cassette", REPLAY, open_repo=nothing)
    assert e.value.reason == "SUITE_NOT_PINNED" and nothing.calls == 0
    assert cassette_book("v1", "x:y", LIVE, open_repo=nothing).pin is None


def test_recording_is_checked_before_the_run(versioned, tmp_path):
    path = tmp_path / "plain.jsonl"
    write_jsonl(path, Suite("evals", "hand-made", [{"id": "x", "input": 1, "tenant": "acme"}]))
    with pytest.raises(cas.FailedPrecondition) as e:
        prepare(str(path), "cas:echo", open_repo=opener(versioned), experiment="x")
    assert e.value.reason == "SUITE_NOT_PINNED"
    prepare("evals@1", "cas:echo", open_repo=opener(versioned), experiment="e1").run()
    with pytest.raises(cas.FailedPrecondition) as e:
        prepare("evals@2", "cas:echo", open_repo=opener(versioned), experiment="e1")
    assert e.value.reason == "EXPERIMENT_VERSION_MISMATCH"
