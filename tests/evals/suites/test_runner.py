"""The suite runner: outcomes, order, bounded concurrency, the digest, artefacts, shards and
merge, diff, recording, the shipped executors, signals, and `cas suite run/merge/diff`.

Runs are in-process and fast; a second process is used only where it is the point: the digest
of another process, a run killed with SIGKILL, and a run stopped by SIGINT.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from blake3 import blake3
from hypothesis import given, settings
from hypothesis import strategies as st

from support import ROOT
import cas
from cas.format import encoding
from cas.evals.suites import runner
from cas.storage.backends.memory import MemoryBackend
from cas.evals.suites.runner import COMPLETED, ERRORED, INCOMPLETE, Run, SuiteRunner
from cas.evals.suites import Suite, from_version, read_jsonl, write_jsonl
from cas_cli.main import EXIT_CODES

ADA = "Ada <ada@example.com>"


def suite_of(n: int = 6, name: str = "demo", version: str = "v1", tenant: str = "acme") -> Suite:
    return Suite(name, version, [{"id": f"c{i}", "input": {"n": i}, "tenant": tenant}
                                 for i in range(n)])


def run(suite: Suite, executor=runner.echo, **kw) -> runner.SuiteResult:
    return SuiteRunner(executor, **kw).run(suite)


# -- results, order, run ids ----------------------------------------------------------------
def test_echo_answers_every_case_in_suite_order_with_positions_and_run_ids():
    s = suite_of(5)
    r = run(s, concurrency=3, seed=7)
    assert r.ok and r.exit_code == 0 and r.shard is None
    assert r.counts == {COMPLETED: 5, ERRORED: 0, INCOMPLETE: 0}
    assert [(c.id, c.position, c.answer, c.reason, c.scores) for c in r.results] == \
        [(f"c{i}", i, {"n": i}, None, None) for i in range(5)]
    assert [c.run_id for c in r.results] == [runner.run_id("demo", "v1", f"c{i}", 7)
                                             for i in range(5)]
    j = r.to_json()
    assert set(j) == {"suite", "seed", "ok", "exit_code", "digest", "counts", "results"}
    assert j["suite"] == {"name": "demo", "version": "v1"}
    assert set(j["results"][0]) == {"id", "position", "run_id", "outcome", "answer", "reason",
                                    "scores"}


def test_run_id_is_blake3_of_its_own_domain_over_the_canonical_quadruple():
    want = blake3(b"cas:suite-run-id\x00" + b'["demo","v1","c0",7]').hexdigest()[:32]
    assert runner.run_id("demo", "v1", "c0", 7) == "sr-" + want
    assert runner.run_id("demo", "v1", "c0", 8) != runner.run_id("demo", "v1", "c0", 7)


def test_results_come_back_in_suite_order_whatever_order_they_finished_in():
    finished = []
    done = [asyncio.Event() for _ in range(8)]  # one loop runs them all: no race on timing

    async def last_first(case, *, run_id):
        n = case.input["n"]
        if n < 7:  # each case waits for the one after it
            await done[n + 1].wait()
        finished.append(case.id)
        done[n].set()
        return Run(n, case.tenant)
    r = run(suite_of(8), last_first, concurrency=8)
    assert finished[0] == "c7" and finished[-1] == "c0"
    assert [c.answer for c in r.results] == list(range(8))


@pytest.mark.parametrize("sync", [False, True])
def test_concurrency_is_bounded_for_async_and_plain_executors(sync):
    lock, now, peak = threading.Lock(), [0], [0]

    def enter():
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])

    def leave():
        with lock:
            now[0] -= 1

    def plain(case, *, run_id):
        enter()
        time.sleep(0.01)
        leave()
        return {"answer": 1, "tenant": case.tenant}

    async def coro(case, *, run_id):
        enter()
        await asyncio.sleep(0.005)
        leave()
        return Run(1, case.tenant)
    r = run(suite_of(12), plain if sync else coro, concurrency=3)
    assert r.ok and peak[0] == 3


# -- outcomes ---------------------------------------------------------------------------------
class Boom(Exception):
    pass


def _behaviour(case, *, run_id):
    n = case.input["n"]
    table = {
        0: lambda: Run("fine", "acme"),
        1: lambda: (_ for _ in ()).throw(Boom("stale cassette: no recording of search")),
        2: lambda: Run("someone else's", "globex"),
        3: lambda: Run("partial", "acme", terminal=False),
        4: lambda: Run({1, 2}, "acme"),
        5: lambda: Run(float("nan"), "acme"),
        6: lambda: "just a string",
        7: lambda: {"answer": 1, "tenant": "acme", "extra": 2},
        8: lambda: {"answer": [1, 2], "tenant": "acme"},
        9: lambda: {"tenant": "acme"},
        10: lambda: Run(1, None),
    }
    return table[n]()


async def _async_behaviour(case, *, run_id):
    return _behaviour(case, run_id=run_id)


@pytest.mark.parametrize("executor", [_behaviour, _async_behaviour], ids=["plain", "async"])
def test_outcomes_and_their_reasons(executor):
    r = run(suite_of(11), executor)
    got = [(c.outcome, c.answer, c.reason) for c in r.results]
    assert got[0] == (COMPLETED, "fine", None)
    assert got[1] == (ERRORED, None, f"the executor raised {__name__}.Boom: stale cassette: "
                                     "no recording of search")
    # another tenant's answer is never scored under the case's tenant, nor kept
    assert got[2] == (ERRORED, None, "the run answered for tenant 'globex', not the case's "
                                     "tenant 'acme'")
    assert got[3] == (INCOMPLETE, None, "the run came back non-terminal")
    assert got[4][0] == ERRORED and "not a JSON value" in got[4][2] and "a set" in got[4][2]
    assert got[5][0] == ERRORED and "non-finite number" in got[5][2]
    assert got[6][0] == ERRORED and "returned 'just a string' (a str)" in got[6][2]
    assert got[7][0] == ERRORED and "unknown key 'extra'" in got[7][2]
    assert got[8] == (COMPLETED, [1, 2], None)
    assert got[9][0] == ERRORED and "has no answer" in got[9][2]
    assert got[10][0] == ERRORED and "tenant is None, not a string" in got[10][2]
    assert not r.ok and r.exit_code == runner.EXIT_ERRORED == 10
    assert r.counts == {COMPLETED: 2, ERRORED: 8, INCOMPLETE: 1}


def test_exit_codes_do_not_collide_with_the_error_codes_of_the_cli():
    assert {runner.EXIT_ERRORED, runner.EXIT_INCOMPLETE}.isdisjoint(EXIT_CODES.values())
    assert {runner.EXIT_ERRORED, runner.EXIT_INCOMPLETE}.isdisjoint({0, 2})  # ok; click usage

    async def half(case, *, run_id):
        return Run(1, case.tenant, terminal=case.input["n"] % 2 == 0)
    r = run(suite_of(4), half)
    assert (r.ok, r.exit_code) == (False, runner.EXIT_INCOMPLETE)
    assert run(Suite("empty", "v1", [])).exit_code == 0


def test_timeout_marks_the_case_incomplete_for_async_and_plain_executors():
    async def hang(case, *, run_id):
        if case.input["n"] == 1:
            await asyncio.sleep(30)
        return Run(0, case.tenant)

    def plain_hang(case, *, run_id):
        if case.input["n"] == 1:
            time.sleep(2)  # a thread cannot be killed: abandoned, never waited for
        return Run(0, case.tenant)

    async def raises_its_own_timeout(case, *, run_id):
        raise TimeoutError("the model's own deadline")
    for ex in (hang, plain_hang):
        t = time.monotonic()
        r = run(suite_of(3), ex, timeout=0.05)
        assert time.monotonic() - t < 1.5
        assert [c.outcome for c in r.results] == [COMPLETED, INCOMPLETE, COMPLETED]
        assert r.results[1].reason == "timed out after 0.05 s (in the executor)"
    r = run(suite_of(1), raises_its_own_timeout, timeout=5)
    assert r.results[0].outcome == ERRORED  # the executor's TimeoutError is not the runner's
    assert "TimeoutError: the model's own deadline" in r.results[0].reason


def test_arguments_are_checked():
    for bad in (dict(concurrency=0), dict(concurrency=2000), dict(concurrency=True),
                dict(seed=1.5), dict(timeout=0), dict(timeout=float("inf")),
                dict(timeout="1"), dict(shard="0/2"), dict(shard="3/2"), dict(shard="x")):
        with pytest.raises(cas.InvalidArgument):
            SuiteRunner(runner.echo, **bad)
    with pytest.raises(cas.InvalidArgument):
        SuiteRunner(42)
    with pytest.raises(cas.InvalidArgument):
        SuiteRunner(runner.echo).run([{"id": "a"}])


# -- scorers --------------------------------------------------------------------------------
def test_scorers_sync_or_async_and_a_failing_scorer_errors_the_case():
    def exact(case, answer):
        if case.input["n"] == 2:
            raise ValueError("judge unavailable")
        if case.input["n"] == 3:
            return {"accuracy": float("nan")}
        return {"exact": answer == case.input, "len": len(answer)}

    async def async_exact(case, answer):
        return exact(case, answer)
    for scorer in (exact, async_exact):
        r = run(suite_of(4), scorer=scorer)
        assert r.results[0].scores == {"exact": True, "len": 1}
        assert (r.results[2].outcome, r.results[2].answer) == (ERRORED, None)
        assert r.results[2].reason == "the scorer raised ValueError: judge unavailable"
        assert r.results[3].outcome == ERRORED
        assert r.results[3].reason.startswith("the scorer returned an invalid score")
    assert run(suite_of(1), scorer=lambda c, a: [1]).results[0].reason == \
        "the scorer returned [1], not a dict {metric: value}"


# -- the digest ----------------------------------------------------------------------------------
def test_digest_is_the_same_at_concurrency_1_and_16_whatever_the_timings():
    import random

    async def jittery(case, *, run_id):
        await asyncio.sleep(random.random() * 0.003)
        if case.input["n"] % 5 == 0:
            raise RuntimeError(f"case {case.input['n']} fails")
        return Run({"n": case.input["n"], "run": run_id}, case.tenant,
                   terminal=case.input["n"] % 7 != 3)
    s = suite_of(40)
    a = run(s, jittery, concurrency=1, seed=3)
    b = run(s, jittery, concurrency=16, seed=3)
    assert a.digest == b.digest and a == b
    assert run(s, jittery, concurrency=16, seed=4).digest != a.digest  # run ids cover the seed
    want = blake3(b"cas:suite-result\x00" + encoding.encode(
        {"format": 1, "suite": a.suite, "results": list(a.results)})).hexdigest()
    assert a.digest == "b3:" + want


def test_digest_covers_answers_outcomes_reasons_and_scores():
    s = suite_of(3)
    base = run(s, scorer=lambda c, a: {"m": 1})
    seen = {base.digest}
    for executor, scorer in (
            (lambda c, *, run_id: Run(c.input["n"], "acme"), lambda c, a: {"m": 1}),
            (runner.echo, lambda c, a: {"m": 2}),
            (lambda c, *, run_id: Run(c.input, "acme", terminal=False), None)):
        seen.add(run(s, executor, scorer=scorer).digest)
    assert len(seen) == 4


def test_a_second_process_gives_the_same_digest(tmp_path):
    path = tmp_path / "suite.jsonl"
    write_jsonl(path, Suite("demo", "v1", [{"id": f"c{i}", "input": {"n": i, "x": [i, 1.5]},
                                             "tenant": "acme"} for i in range(30)]))
    here = run(read_jsonl(path), concurrency=1, seed=9)
    out = subprocess.run([sys.executable, "-c", "from cas_cli.main import main; main()",
                          "suite", "run", str(path), "--executor", "cas:echo",
                          "--concurrency", "16", "--seed", "9", "--json"],
                         capture_output=True, cwd=tmp_path, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    there = json.loads(out.stdout)
    assert there["digest"] == here.digest
    assert runner.as_result(there) == here


# -- artefacts --------------------------------------------------------------------------------
def read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_artefacts_every_result_is_incomplete_before_the_first_case_runs(tmp_path):
    s = suite_of(4)
    seen = []

    async def look(case, *, run_id):
        if case.input["n"] == 0:
            seen.extend(read(tmp_path / "demo" / f"c{i}" / "result.json")["outcome"]
                        for i in range(4))
            seen.append(sorted(os.listdir(tmp_path / "demo" / "c3")))
        return Run(case.input, case.tenant, terminal=case.input["n"] != 2)
    r = run(s, look, artefacts=tmp_path, concurrency=1)
    assert seen == [INCOMPLETE] * 4 + [["case.json", "result.json"]]
    d = tmp_path / "demo"
    assert sorted(os.listdir(d)) == ["c0", "c1", "c2", "c3"]
    for c in r.results:
        files = sorted(os.listdir(d / c.id))
        assert files == ["case.json", "result.json", "run.json", "timings.json"]  # no temp files
        res = read(d / c.id / "result.json")
        assert res == {"suite": {"name": "demo", "version": "v1"}, "id": c.id,
                       "position": c.position, "run_id": c.run_id, "outcome": c.outcome,
                       "answer": c.answer, "reason": c.reason, "scores": None}
        assert read(d / c.id / "case.json")["input"] == {"n": c.position}
        assert set(read(d / c.id / "timings.json")) == {"started_at", "finished_at", "seconds"}
        assert read(d / c.id / "run.json")["run_id"] == c.run_id
    assert read(d / "c2" / "run.json")["terminal"] is False
    # timings live only in timings.json: a second run's result.json files are byte-identical
    before = {c.id: (d / c.id / "result.json").read_bytes() for c in r.results}
    times = (d / "c0" / "timings.json").read_bytes()
    run(s, look, artefacts=tmp_path, concurrency=4)
    assert {c.id: (d / c.id / "result.json").read_bytes() for c in r.results} == before
    assert (d / "c0" / "timings.json").read_bytes() != times


def _blocking_module(tmp_path: Path) -> None:
    (tmp_path / "blocking.py").write_text(
        "import asyncio, os, pathlib\n"
        "from cas.evals.suites.runner import Run\n"
        "async def executor(case, *, run_id):\n"
        "    if case.input.get('block'):\n"
        "        pathlib.Path(os.environ['MARKS'], case.id).write_text('started')\n"
        "        await asyncio.Event().wait()\n"
        "    return Run(case.input, case.tenant)\n")


def _blocking_run(tmp_path: Path, *extra: str) -> subprocess.Popen:
    """Cases c0, c1 answer, c2 and c3 block for ever (concurrency 2), c4 and c5 never start;
    returns once c2 and c3 have started and c0, c1 are written."""
    _blocking_module(tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    path = tmp_path / "suite.jsonl"
    write_jsonl(path, Suite("demo", "v1", [{"id": f"c{i}", "input": {"block": i in (2, 3)},
                                             "tenant": "acme"} for i in range(6)]))
    proc = subprocess.Popen(
        [sys.executable, "-c", "from cas_cli.main import main; main()", "suite", "run",
         str(path), "--executor", "blocking:executor", "--concurrency", "2",
         "--artefacts", str(tmp_path / "art"), *extra],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MARKS": str(marks)})
    deadline = time.monotonic() + 30
    while sorted(os.listdir(marks)) != ["c2", "c3"]:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    return proc


def test_a_run_killed_with_sigkill_leaves_incomplete_results_saying_so(tmp_path):
    proc = _blocking_run(tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    d = tmp_path / "art" / "demo"
    outcomes = {c: read(d / c / "result.json") for c in sorted(os.listdir(d))}
    assert [o["outcome"] for o in outcomes.values()] == \
        [COMPLETED, COMPLETED, INCOMPLETE, INCOMPLETE, INCOMPLETE, INCOMPLETE]
    assert outcomes["c2"]["reason"] == outcomes["c5"]["reason"] == runner.NOT_STARTED
    assert not (d / "c5" / "run.json").exists()
    assert all(not n.endswith(".json") or n in runner.ARTEFACT_FILES
               for c in outcomes for n in os.listdir(d / c))


def test_sigint_stops_the_run_marks_the_rest_incomplete_and_still_prints(tmp_path):
    proc = _blocking_run(tmp_path, "--json", "--grace", "0.1")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == runner.EXIT_INCOMPLETE, err
    result = json.loads(out)
    assert [(c["outcome"], c["reason"]) for c in result["results"]] == [
        (COMPLETED, None), (COMPLETED, None),
        (INCOMPLETE, "stopped by SIGINT before the case finished"),
        (INCOMPLETE, "stopped by SIGINT before the case finished"),
        (INCOMPLETE, "not started: the suite was stopped by SIGINT"),
        (INCOMPLETE, "not started: the suite was stopped by SIGINT")]
    assert result["ok"] is False and result["exit_code"] == 11
    d = tmp_path / "art" / "demo"
    assert [read(d / f"c{i}" / "result.json")["reason"] for i in (3, 4)] == \
        [result["results"][3]["reason"], result["results"][4]["reason"]]


def test_sigterm_in_process_stops_the_run_and_a_plain_executor_is_abandoned():
    started = threading.Event()

    def plain(case, *, run_id):
        n = case.input["n"]
        if n == 1:
            started.set()
            time.sleep(3)  # a thread cannot be stopped: never waited for past the grace
        if n == 2:
            started.wait()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(3)
        return Run(1, case.tenant)
    t = time.monotonic()
    r = run(suite_of(6), plain, concurrency=2, grace=0.05)
    assert time.monotonic() - t < 2
    assert [c.outcome for c in r.results] == [COMPLETED] + [INCOMPLETE] * 5
    assert r.results[1].reason == r.results[2].reason == \
        "stopped by SIGTERM before the case finished"
    assert r.results[5].reason == "not started: the suite was stopped by SIGTERM"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # restored


def test_cancelling_a_run_from_outside_cancels_its_cases_and_is_not_swallowed():
    async def slow(case, *, run_id):
        await asyncio.sleep(30)

    async def main():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(SuiteRunner(slow).run_async(suite_of(8)), 0.05)
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert asyncio.run(main()) == []


# -- shards and merge -------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 12), count=st.integers(1, 5), data=st.data())
def test_shards_merge_into_exactly_the_unsharded_result(n, count, data):
    s = Suite("demo", "v1", [{"id": f"k{i}", "input": i, "tenant": "acme"} for i in range(n)])

    async def odd(case, *, run_id):
        if case.input % 3 == 1:
            raise ValueError(case.input)
        return Run(case.input, case.tenant)
    whole = run(s, odd, seed=5)
    shards = [run(s, odd, seed=5, shard=f"{i}/{count}") for i in range(1, count + 1)]
    for i, sh in enumerate(shards, 1):
        assert [c.position for c in sh.results] == list(range(i - 1, n, count))
        assert sh.shard == runner.Shard(i, count, n) and sh.to_json()["shard"] == \
            {"index": i, "count": count, "cases": n}
    order = data.draw(st.permutations(shards))
    merged = runner.merge([json.loads(json.dumps(sh.to_json())) for sh in order])
    assert merged == whole and merged.digest == whole.digest
    assert "shard" not in merged.to_json()


def test_merge_refuses_a_missing_or_repeated_shard_naming_it_and_mixed_versions():
    s = suite_of(6)
    a, b, c = (run(s, shard=f"{i}/3").to_json() for i in (1, 2, 3))
    with pytest.raises(cas.InvalidArgument, match=r"shard 2/3 is missing") as e:
        runner.merge([a, c])
    assert e.value.reason == "SHARD_MISSING" and e.value.fields["missing"] == ["2/3"]
    with pytest.raises(cas.InvalidArgument, match=r"shard 1/3 is given twice \(x.json and "
                                                   r"y.json\)") as e:
        runner.merge([a, b, a, c], ["x.json", "b.json", "y.json", "c.json"])
    assert e.value.reason == "SHARD_REPEATED"
    other = run(suite_of(6, version="v2"), shard="2/3").to_json()
    with pytest.raises(cas.FailedPrecondition, match="one suite version") as e:
        runner.merge([a, other, c])
    assert e.value.reason == "SUITE_VERSION_MISMATCH"
    with pytest.raises(cas.InvalidArgument, match="seed"):
        runner.merge([a, run(s, shard="2/3", seed=1).to_json(), c])
    with pytest.raises(cas.InvalidArgument, match="not a shard"):
        runner.merge([run(s).to_json()])
    with pytest.raises(cas.InvalidArgument, match="not shards of one split"):
        runner.merge([a, run(s, shard="2/2").to_json()])


def test_an_edited_result_is_refused():
    j = run(suite_of(3)).to_json()
    j["results"][1]["answer"] = "better"
    with pytest.raises(cas.InvalidArgument) as e:
        runner.as_result(j, "a.json")
    assert e.value.reason == "RESULT_DIGEST_MISMATCH" and "a.json" in e.value.message
    with pytest.raises(cas.InvalidArgument, match="not a suite result"):
        runner.as_result({"suite": 1}, "a.json")


# -- diff ---------------------------------------------------------------------------------------
def test_diff_names_the_cases_whose_answer_or_outcome_changed():
    s = suite_of(4)
    before = run(s)

    async def changed(case, *, run_id):
        n = case.input["n"]
        if n == 1:
            return Run("other", case.tenant)
        if n == 2:
            raise RuntimeError("down")
        return Run(case.input, case.tenant)
    d = runner.diff(before.to_json(), run(s, changed))
    assert d == {"changed": [
        {"id": "c1", "before": {"outcome": COMPLETED, "answer": {"n": 1}, "reason": None},
         "after": {"outcome": COMPLETED, "answer": "other", "reason": None}},
        {"id": "c2", "before": {"outcome": COMPLETED, "answer": {"n": 2}, "reason": None},
         "after": {"outcome": ERRORED, "answer": None,
                   "reason": "the executor raised RuntimeError: down"}}], "unchanged": 2}
    with pytest.raises(cas.FailedPrecondition) as e:
        runner.diff(before, run(suite_of(4, version="v2")))
    assert e.value.reason == "SUITE_VERSION_MISMATCH"
    assert runner.diff(before, run(suite_of(4, version="v2")), allow_versions=True) == \
        {"changed": [], "unchanged": 4}
    # 1 and 1.0 are different answers (canonical JSON tells them apart)
    ints = run(s, lambda c, *, run_id: Run(1, "acme"))
    floats = run(s, lambda c, *, run_id: Run(1.0, "acme"))
    assert len(runner.diff(ints, floats)["changed"]) == 4


# -- the shipped executors, a version as the source, recording -------------------------------
def frozen_case(i: int, tenant: str = "acme") -> dict:
    return {"run_id": f"r-{i}", "tenant": tenant, "input": {"task": f"t{i}"},
            "output": f"done {i}", "outcome": {"status": "success"},
            "steps": [{"type": "tool_call", "tool_name": "ls", "arguments": {},
                       "result": ["a"]},
                      {"type": "tool_call", "tool_name": "rm", "arguments": {"p": "a"},
                       "result": "ok"}]}


@pytest.fixture
def versioned():
    repo = cas.Repository.create(MemoryBackend())
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=[frozen_case(i) for i in range(3)], author=ADA)
    repo.commit("evals", base=1, add=[frozen_case(3)], author=ADA)
    return repo


def test_shipped_executors_replay_echo_and_cassette():
    assert runner.load_executor("cas:cassette") is runner.cassette_executor
    assert runner.takes_cassette(runner.cassette_executor)
    with pytest.raises(cas.FailedPrecondition) as e:  # it needs the suite's cassettes
        run(suite_of(2), "cas:cassette")
    assert e.value.reason == "CASSETTES_REQUIRED"
    with pytest.raises(cas.InvalidArgument) as e:
        runner.load_executor("cas:replay")
    assert e.value.reason == "PLAN_REQUIRED"
    with pytest.raises(cas.InvalidArgument) as e:
        runner.load_executor("cas:echo", plan={})
    assert e.value.reason == "PLAN_UNUSED"
    with pytest.raises(cas.InvalidArgument, match="cas ships no executor"):
        runner.load_executor("cas:bogus")
    for bad in ("nocolon", "no_such_module_xyz:f", "json:no_such", "json:__doc__"):
        with pytest.raises(cas.InvalidArgument):
            runner.load_executor(bad)
    assert runner.load_executor("cas:echo") is runner.echo
    assert runner.load_executor("os.path:join") is os.path.join
    replay = runner.load_executor("cas:replay", plan={"default_effect": "none"})
    with pytest.raises(cas.FailedPrecondition, match="DATASET@N") as e:
        run(suite_of(2), replay)
    assert e.value.reason == "FROZEN_CASE_REQUIRED"


def test_replay_of_a_version_answers_with_the_replayed_output(versioned):
    s = from_version(versioned, "evals", 2)
    r = run(s, runner.replay_executor({"default_effect": "none"}))
    assert r.ok and sorted(c.answer for c in r.results) == [f"done {i}" for i in range(4)]
    assert [c.id for c in r.results] == [c.id for c in s.cases]


def test_record_without_a_scorer_records_completed_per_case(versioned):
    s = from_version(versioned, "evals", 1)

    async def one_fails(case, *, run_id):
        if case.id == s.cases[0].id:
            raise RuntimeError("x")
        return Run(case.expected, case.tenant)
    rec = runner.record(versioned, run(s, one_fails), "baseline", author=ADA)
    assert (rec.dataset, rec.version, rec.experiment, rec.created, rec.scores) == \
        ("evals", 1, "baseline", True, 3)
    got = {(x.item, x.metric, x.value, x.experiment) for x in versioned.scores("evals", 1)}
    assert got == {(c.id, "completed", c.id != s.cases[0].id, "baseline") for c in s.cases}
    # a second run into the same experiment; then compare two experiments of suite runs
    assert runner.record(versioned, run(s), "baseline", author=ADA).created is False
    rec2 = runner.record(versioned, run(s, scorer=lambda c, a: {"exact": a == c.expected}),
                         "candidate", author=ADA)
    assert rec2.scores == 3 and rec2.batch is not None
    assert versioned.compare_experiments("evals", "baseline", "candidate") is not None


def test_record_refusals(versioned):
    s1 = from_version(versioned, "evals", 1)
    runner.record(versioned, run(s1), "e1", author=ADA)
    s2 = from_version(versioned, "evals", 2)
    with pytest.raises(cas.FailedPrecondition) as e:
        runner.check_record(versioned, s2, "e1")
    assert e.value.reason == "EXPERIMENT_VERSION_MISMATCH"
    with pytest.raises(cas.FailedPrecondition) as e:
        runner.record(versioned, run(suite_of(2)), "e2")
    assert e.value.reason == "SUITE_NOT_PINNED"
    forged = Suite("evals", s1.version.replace("evals@1", "evals@2"), [])
    with pytest.raises(cas.FailedPrecondition) as e:
        runner.check_record(versioned, forged, "e2")
    assert e.value.reason == "PIN_MISMATCH"
    versioned.retire("evals", 1, "CONTAMINATED", "leaked", author=ADA)
    with pytest.raises(cas.FailedPrecondition) as e:
        runner.record(versioned, run(s1), "e1", author=ADA)
    assert e.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"


# -- the CLI ------------------------------------------------------------------------------------
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
        "from cas.evals.suites.runner import Run\n"
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
    assert runner.as_result(out).digest == out["digest"]
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
