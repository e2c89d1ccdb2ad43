"""The suite runner (cas/evals/suites/runner.py): results in suite order, bounded concurrency,
each outcome and its reason, timeouts, scorers, argument checks, artefacts, and stops (SIGKILL
leaves INCOMPLETE results saying so; SIGINT and SIGTERM stop the run and still return it).

Runs are in-process and fast; a second process is used only where it is the point: a run
killed with SIGKILL, and a run stopped by SIGINT.
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

import cas
from cas.evals.suites.executors import Run, echo
from cas.evals.suites.files import Suite, write_jsonl
from cas.evals.suites.results import (COMPLETED, ERRORED, EXIT_ERRORED, EXIT_INCOMPLETE, INCOMPLETE,
                                      run_id)
from cas.evals.suites.runner import ARTEFACT_FILES, NOT_STARTED, SuiteRunner
from support import ROOT
from support.evals import run_suite as run
from support.evals import suite_of


# -- results, order ---------------------------------------------------------------------------
def test_echo_answers_every_case_in_suite_order_with_positions_and_run_ids():
    s = suite_of(5)
    r = run(s, concurrency=3, seed=7)
    assert r.ok and r.exit_code == 0 and r.shard is None
    assert r.counts == {COMPLETED: 5, ERRORED: 0, INCOMPLETE: 0}
    assert [(c.id, c.position, c.answer, c.reason, c.scores) for c in r.results] == \
        [(f"c{i}", i, {"n": i}, None, None) for i in range(5)]
    assert [c.run_id for c in r.results] == [run_id("demo", "v1", f"c{i}", 7)
                                             for i in range(5)]
    j = r.to_json()
    assert set(j) == {"suite", "seed", "ok", "exit_code", "digest", "counts", "results"}
    assert j["suite"] == {"name": "demo", "version": "v1"}
    assert set(j["results"][0]) == {"id", "position", "run_id", "outcome", "answer", "reason",
                                    "scores"}

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
    assert not r.ok and r.exit_code == EXIT_ERRORED == 10
    assert r.counts == {COMPLETED: 2, ERRORED: 8, INCOMPLETE: 1}

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
            SuiteRunner(echo, **bad)
    with pytest.raises(cas.InvalidArgument):
        SuiteRunner(42)
    with pytest.raises(cas.InvalidArgument):
        SuiteRunner(echo).run([{"id": "a"}])


# -- scorers ----------------------------------------------------------------------------------
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

def test_a_run_removes_the_temporary_artefacts_a_killed_run_left_in_its_case_directories(
        tmp_path):
    s = suite_of(2)
    run(s, echo, artefacts=tmp_path)
    c0 = tmp_path / "demo" / "c0"
    ours = ["result.json.tmp-4242-139871", "run.json.tmp-1-2", "case.json.tmp-99-7",
            "timings.json.tmp-3-4"]
    theirs = ["notes.txt.tmp-4242-1", "result.json.tmp-x-1", "result.json.tmp-1-2.bak",
              "mine.txt"]
    for name in ours + theirs:  # as SIGKILL mid-write leaves them: whole or partial
        (c0 / name).write_bytes(b'{"outcome": "COMPL')
    (tmp_path / "demo" / "gone").mkdir()  # a case no longer in the suite: not this run's
    (tmp_path / "demo" / "gone" / ours[0]).write_bytes(b"{")
    run(s, echo, artefacts=tmp_path)
    assert sorted(os.listdir(c0)) == sorted(list(ARTEFACT_FILES) + theirs)
    assert os.listdir(tmp_path / "demo" / "gone") == [ours[0]]


def _blocking_module(tmp_path: Path) -> None:
    (tmp_path / "blocking.py").write_text(
        "import asyncio, os, pathlib\n"
        "from cas.runner import Run\n"
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
    assert outcomes["c2"]["reason"] == outcomes["c5"]["reason"] == NOT_STARTED
    assert not (d / "c5" / "run.json").exists()
    assert all(not n.endswith(".json") or n in ARTEFACT_FILES
               for c in outcomes for n in os.listdir(d / c))

def test_sigint_stops_the_run_marks_the_rest_incomplete_and_still_prints(tmp_path):
    proc = _blocking_run(tmp_path, "--json", "--grace", "0.1")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == EXIT_INCOMPLETE, err
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
