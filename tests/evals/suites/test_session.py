"""A suite session (cas/evals/suites/session.py): a source (a suite file, `NAME@N` or its pin)
made runnable (the content policy re-applied for `cas:replay`, the cassette book, the checks of
recording), then run and recorded; and `cas suite run/merge/diff`, which call it."""

from __future__ import annotations

import json
import sys

import pytest

import cas
from cas.evals.cassettes import LIVE, REPLAY
from cas.evals.suites.files import Suite, write_jsonl
from cas.evals.suites.results import COMPLETED, ERRORED, INCOMPLETE, as_result
from cas.evals.suites.session import cassette_book, open_source, pinned_suite, prepare
from support.evals import ADA, frozen_case, versioned_repo


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


# -- the CLI ----------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _import_path(monkeypatch):
    """`cas suite run` puts the current directory on sys.path: undone after each test."""
    monkeypatch.setattr(sys, "path", list(sys.path))

@pytest.fixture
def suite_file(tmp_path):
    path = tmp_path / "suite.jsonl"
    write_jsonl(path, Suite("demo", "v1", [{"id": f"c{i}", "input": {"n": i}, "tenant": "acme"}
                                           for i in range(4)]))
    (tmp_path / "mine.py").write_text(
        "from cas.runner import Run\n"
        "def flaky(case, *, run_id):\n"
        "    if case.input['n'] == 1:\n"
        "        raise ValueError('no luck')\n"
        "    return {'answer': case.input, 'tenant': case.tenant}\n"
        "async def score(case, answer):\n"
        "    return {'big': answer['n'] > 1}\n")
    sys.modules.pop("mine", None)
    return path

def test_cli_run_json_human_and_exit_codes(run, suite_file, tmp_path):
    r = run("suite", "run", str(suite_file), "--executor", "cas:echo", "--json")
    assert r.exit_code == 0
    out = json.loads(r.stdout)
    assert out["ok"] is True and out["counts"] == {COMPLETED: 4, ERRORED: 0, INCOMPLETE: 0}
    assert as_result(out).digest == out["digest"]
    r = run("suite", "run", str(suite_file), "--executor", "mine:flaky", "--scorer",
            "mine:score")
    assert r.exit_code == 10
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["ERRORED", "1", "c1", "the", "executor", "raised",
                                "ValueError:", "no", "luck"]
    assert lines[1].startswith("suite demo v1: 4 cases in ") and \
        "3 completed, 1 errored, 0 incomplete; NOT ok (exit 10); digest b3:" in lines[1]
    assert len(lines) == 2
    r = run("suite", "run", str(suite_file), "--executor", "mine:flaky", "--scorer",
            "mine:score", "--json")
    assert json.loads(r.stdout)["results"][3]["scores"] == {"big": True}
    r = run("suite", "run", str(suite_file), "--executor", "cas:cassette", "--json")
    assert r.exit_code == 5 and json.loads(r.stderr)["error"]["reason"] == \
        "SUITE_NOT_PINNED"  # its cassettes belong to the cases of a version
    r = run("suite", "run", str(suite_file), "--executor", "cas:echo", "--shard", "5/4")
    assert r.exit_code == 2 and "shard '5/4' is not i/n with 1 <= i <= n" in r.stderr
    r = run("suite", "run", "nowhere", "--executor", "cas:echo")
    assert r.exit_code == 2 and "neither a suite file nor DATASET@N" in r.stderr

def test_cli_shards_merge_and_diff(run, suite_file, tmp_path):
    files = []
    for i in (1, 2):
        r = run("suite", "run", str(suite_file), "--executor", "cas:echo", "--shard",
                f"{i}/2", "--json")
        assert r.exit_code == 0 and json.loads(r.stdout)["shard"]["index"] == i
        files.append(tmp_path / f"s{i}.json")
        files[-1].write_text(r.stdout)
    whole = json.loads(run("suite", "run", str(suite_file), "--executor", "cas:echo",
                           "--json").stdout)
    r = run("suite", "merge", str(files[1]), str(files[0]), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout) == whole
    r = run("suite", "merge", str(files[0]), "--json")
    assert r.exit_code == 2 and "shard 2/2 is missing" in json.loads(r.stderr)["error"]["message"]
    (tmp_path / "whole.json").write_text(json.dumps(whole))
    r = run("suite", "run", str(suite_file), "--executor", "mine:flaky", "--json")
    (tmp_path / "flaky.json").write_text(r.stdout)
    r = run("suite", "diff", str(tmp_path / "whole.json"), str(tmp_path / "flaky.json"),
            "--json")
    assert r.exit_code == 0
    assert json.loads(r.stdout)["unchanged"] == 3
    assert [c["id"] for c in json.loads(r.stdout)["changed"]] == ["c1"]
    r = run("suite", "diff", str(tmp_path / "whole.json"), str(tmp_path / "flaky.json"))
    assert r.stdout.splitlines() == [
        'c1: COMPLETED {"n": 1} -> ERRORED (the executor raised ValueError: no luck)',
        "1 changed, 3 unchanged"]
    write_jsonl(tmp_path / "v2.jsonl", Suite("demo", "v2", [{"id": "c0", "input": 0,
                                                             "tenant": "acme"}]))
    (tmp_path / "v2.json").write_text(run("suite", "run", str(tmp_path / "v2.jsonl"),
                                          "--executor", "cas:echo", "--json").stdout)
    r = run("suite", "diff", str(tmp_path / "whole.json"), str(tmp_path / "v2.json"))
    assert r.exit_code == 5 and "one suite version" in r.stderr
    r = run("suite", "diff", str(tmp_path / "whole.json"), str(tmp_path / "v2.json"),
            "--allow-versions", "--json")
    assert r.exit_code == 0 and len(json.loads(r.stdout)["changed"]) == 4

def test_cli_run_a_version_with_replay_and_record(run, tmp_path):
    repo = cas.init(str(tmp_path))
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=[frozen_case(i) for i in range(3)], author=ADA)
    (tmp_path / "plan.json").write_text('{"default_effect": "none"}')
    r = run("suite", "run", "evals@1", "--executor", "cas:replay", "--plan", "plan.json",
            "--record", "replayed", "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["suite"]["version"] == str(repo.pin("evals", 1))
    assert out["recorded"]["experiment"] == "replayed" and out["recorded"]["scores"] == 3
    assert sorted(c["answer"] for c in out["results"]) == ["done 0", "done 1", "done 2"]
    assert {s.metric for s in cas.open(str(tmp_path)).scores("evals", 1)} == {"completed"}
    r = run("suite", "run", str(repo.pin("evals", 1)), "--executor", "cas:echo", "--json")
    assert r.exit_code == 0
    write_jsonl(tmp_path / "plain.jsonl", Suite("evals", "hand-made", [
        {"id": "x", "input": 1, "tenant": "acme"}]))
    r = run("suite", "run", "plain.jsonl", "--executor", "cas:echo", "--record", "x")
    assert r.exit_code == 5 and "is not a pin" in r.stderr
    r = run("suite", "run", "plain.jsonl", "--executor", "cas:replay", "--plan", "plan.json")
    assert r.exit_code == 5 and "DATASET@N" in r.stderr
