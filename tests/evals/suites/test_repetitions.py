"""Repetitions (cas/evals/suites/repetitions.py, and the runner and results with --repeat): every
case run N times with its own run ids and seeds, kept whole in the result and its digest; shards
split cases, never repetitions; the per-case summary (passes of completed, pass@k and pass^k by
the unbiased estimators, mean/spread/interval) does not depend on repetition order; flaky cases
named; an interrupted run names its INCOMPLETE repetitions."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
from fractions import Fraction

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.evals.suites.executors import Run
from cas.evals.suites.repetitions import case_values, parse_pass_k, pass_at_k, pass_hat_k, summarize
from cas.evals.suites.results import (COMPLETED, ERRORED, INCOMPLETE, CaseResult, SuiteRef,
                                      as_result, finish, merge, repetition_seed, run_id)
from cas.evals.suites.runner import SuiteRunner
from support.evals import run_suite as run
from support.evals import suite_of


# -- the estimators, against their definition by enumeration ----------------------------------
def _by_enumeration(n: int, c: int, k: int) -> tuple[Fraction, Fraction]:
    """pass@k and pass^k by drawing every k-subset of n runs of which c passed."""
    runs = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    any_pass = sum(any(runs[i] for i in s) for s in subsets)
    all_pass = sum(all(runs[i] for i in s) for s in subsets)
    return Fraction(any_pass, len(subsets)), Fraction(all_pass, len(subsets))


@given(st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n),
                                                     st.integers(1, n))))
def test_pass_at_k_and_pass_hat_k_are_the_subset_averages(nck):
    n, c, k = nck
    at, hat = _by_enumeration(n, c, k)
    assert math.isclose(pass_at_k(n, c, k), float(at), abs_tol=1e-12)
    assert math.isclose(pass_hat_k(n, c, k), float(hat), abs_tol=1e-12)


def test_estimators_at_their_edges_and_refusals():
    assert pass_at_k(5, 0, 1) == 0.0 and pass_at_k(5, 5, 5) == 1.0
    assert pass_at_k(5, 1, 5) == 1.0 and pass_hat_k(5, 4, 5) == 0.0
    assert pass_at_k(3, 2, 4) is None and pass_hat_k(3, 2, 4) is None  # k above n: no estimate
    for bad in ((3, 4, 1), (3, 1, 0), (-1, 0, 1), (3.0, 1, 1)):
        with pytest.raises(cas.InvalidArgument):
            pass_at_k(*bad)
    assert parse_pass_k("5,1,3,1") == (1, 3, 5) and parse_pass_k([2]) == (2,)
    for bad in ("", "1,,2", "0", "a", "1 2", [0], 3):
        with pytest.raises(cas.InvalidArgument) as e:
            parse_pass_k(bad)
        assert e.value.reason == "INVALID_PASS_K"


# -- the runner with repetitions ----------------------------------------------------------------
def test_every_case_runs_n_times_with_its_own_run_ids_and_seeds_in_suite_then_repetition_order():
    seen = []

    async def agent(case, *, run_id, repetition, seed):
        await asyncio.sleep(random.random() * 0.002)
        seen.append((case.id, repetition, seed, run_id))
        return Run({"n": case.input["n"], "rep": repetition}, case.tenant)
    s = suite_of(4)
    r = run(s, agent, repeat=3, seed=11, concurrency=5)
    assert r.repeat == 3 and len(r.results) == 12 and r.ok
    assert [(x.id, x.repetition) for x in r.results] == \
        [(f"c{i}", k) for i in range(4) for k in range(3)]
    for x in r.results:
        assert x.seed == repetition_seed(11, x.repetition)
        assert x.run_id == run_id("demo", "v1", x.id, 11, x.repetition)
        assert x.answer == {"n": x.position, "rep": x.repetition}
    assert sorted(seen) == sorted((x.id, x.repetition, x.seed, x.run_id) for x in r.results)
    assert len({x.run_id for x in r.results}) == 12 and len({x.seed for x in r.results}) == 3
    # repetition 0 keeps the run id and seed of a run without repetitions
    one = run(s, seed=11)
    assert [x.run_id for x in one.results] == [x.run_id for x in r.results if x.repetition == 0]
    assert all(x.seed == 11 and x.repetition == 0 for x in one.results)


def test_an_executor_gets_only_what_it_declares():
    async def only_seed(case, *, run_id, seed):
        return Run(seed, case.tenant)

    def plain_with_repetition(case, *, run_id, repetition):
        return {"answer": repetition, "tenant": case.tenant}
    r = run(suite_of(2), only_seed, repeat=2, seed=3)
    assert [x.answer for x in r.results] == [3, repetition_seed(3, 1)] * 2
    r = run(suite_of(2), plain_with_repetition, repeat=2)
    assert [x.answer for x in r.results] == [0, 1, 0, 1]
    with pytest.raises(cas.InvalidArgument) as e:
        SuiteRunner("cas:echo", repeat=0)
    assert e.value.reason == "INVALID_REPEAT"


def test_concurrency_is_bounded_over_all_case_repetition_pairs():
    running = peak = 0

    async def agent(case, *, run_id):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.002)
        running -= 1
        return Run(None, case.tenant)
    run(suite_of(3), agent, repeat=6, concurrency=4)
    assert peak == 4  # 18 pairs, at most 4 at once (and the bound is reached)


def test_a_run_without_repeat_keeps_its_bytes_and_digest():
    r = run(suite_of(3), seed=2)
    out = r.to_json()
    assert "repeat" not in out and all("repetition" not in e and "seed" not in e
                                       for e in out["results"])
    assert run(suite_of(3), seed=2, repeat=1) == r
    assert as_result(json.dumps(out)) == r


def test_the_digest_covers_every_repetition():
    async def agent(case, *, run_id, repetition):
        return Run(repetition, case.tenant)
    a = run(suite_of(2), agent, repeat=3)
    again = as_result(a.to_json())
    assert again == a
    def doc_of(result):
        doc = result.to_json()
        doc["results"] = list(doc["results"])
        return doc
    doc = doc_of(a)
    doc["results"][5]["answer"] = 7  # the last repetition of the last case, edited
    with pytest.raises(cas.InvalidArgument) as e:
        as_result(doc)
    assert e.value.reason == "RESULT_DIGEST_MISMATCH"
    doc = doc_of(a)
    doc["results"][4], doc["results"][5] = doc["results"][5], doc["results"][4]  # reordered
    with pytest.raises(cas.InvalidArgument) as e:
        as_result(doc)
    assert e.value.reason == "INVALID_SUITE_RESULT"
    doc = doc_of(a)
    doc["results"][1]["seed"] += 1  # a seed the run did not give
    with pytest.raises(cas.InvalidArgument):
        as_result(doc)
    doc = doc_of(a)
    del doc["results"][2:4]  # a case short of its repetitions
    with pytest.raises(cas.InvalidArgument):
        as_result(doc)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(2, 4), st.data())
def test_the_digest_covers_each_repetition_s_answer_and_its_place(cases, repeat, data):
    ref = SuiteRef("demo", "v1")
    answers = data.draw(st.lists(st.integers(0, 3), min_size=cases * repeat,
                                 max_size=cases * repeat))

    def digest_of(values):
        rows = [CaseResult(id=f"c{p}", position=p, run_id=run_id("demo", "v1", f"c{p}", 0, k),
                           outcome=COMPLETED, answer=values[p * repeat + k], repetition=k)
                for p in range(cases) for k in range(repeat)]
        return finish(ref, 0, rows, None, repeat).digest
    base = digest_of(answers)
    i = data.draw(st.integers(0, len(answers) - 1))
    changed = list(answers)
    changed[i] += 1
    assert digest_of(changed) != base  # any one repetition's answer
    j = data.draw(st.integers(0, len(answers) - 1))
    swapped = list(answers)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    # which repetition gave which answer is covered too (a swap of equal answers changes nothing)
    assert (digest_of(swapped) == base) == (answers[i] == answers[j])


@settings(max_examples=30, deadline=None)
@given(cases=st.integers(1, 7), repeat=st.integers(1, 4), count=st.integers(1, 5))
def test_shards_split_cases_never_repetitions_and_merge_back(cases, repeat, count):
    async def agent(case, *, run_id, repetition):
        return Run([case.input["n"], repetition], case.tenant)
    s = suite_of(cases)
    whole = run(s, agent, repeat=repeat, seed=5)
    shards = [run(s, agent, repeat=repeat, seed=5, shard=f"{i}/{count}")
              for i in range(1, count + 1)]
    for sh in shards:
        by_case: dict[str, list[int]] = {}
        for x in sh.results:
            by_case.setdefault(x.id, []).append(x.repetition)
        assert all(reps == list(range(repeat)) for reps in by_case.values())
    owners = [{x.id for x in sh.results} for sh in shards]
    assert sum(len(o) for o in owners) == cases  # each case in exactly one shard
    assert merge([sh.to_json() for sh in shards]) == whole


def test_merge_refuses_shards_of_different_repetitions():
    s = suite_of(4)
    a = run(s, repeat=2, shard="1/2")
    b = run(s, repeat=3, shard="2/2")
    with pytest.raises(cas.InvalidArgument) as e:
        merge([a, b])
    assert e.value.reason == "REPEAT_MISMATCH"


def test_an_interrupted_run_names_its_incomplete_repetitions():
    runner = None

    async def agent(case, *, run_id, repetition):
        if case.input["n"] == 1 and repetition == 1:
            runner.stop("stopped by the test")
            await asyncio.sleep(10)
        return Run(None, case.tenant)
    runner = SuiteRunner(agent, repeat=3, concurrency=1, grace=0.05, handle_signals=False)
    r = runner.run(suite_of(3))
    assert not r.ok and r.exit_code == 11
    incomplete = [(x.id, x.repetition, x.reason) for x in r.results if x.outcome == INCOMPLETE]
    assert incomplete[0] == ("c1", 1, "stopped by the test before the case finished")
    assert [(i, k) for i, k, _ in incomplete] == [("c1", 1), ("c1", 2), ("c2", 0), ("c2", 1),
                                                  ("c2", 2)]
    assert all(why == "not started: the suite was stopped by the test"
               for _, _, why in incomplete[1:])
    summary = summarize(r)
    c1 = summary.cases[1]
    assert (c1.completed, c1.incomplete, c1.repetitions) == (1, 2, 3)


def test_artefacts_of_each_repetition_go_to_their_own_directory(tmp_path):
    r = run(suite_of(2), repeat=2, artefacts=tmp_path)
    case_dir = tmp_path / "demo" / "c1"
    assert sorted(p.name for p in case_dir.iterdir()) == ["0", "1", "case.json"]
    doc = json.loads((case_dir / "1" / "result.json").read_text())
    assert (doc["repetition"], doc["seed"], doc["run_id"], doc["outcome"]) == \
        (1, r.results[3].seed, r.results[3].run_id, COMPLETED)
    assert sorted(p.name for p in (case_dir / "1").iterdir()) == \
        ["result.json", "run.json", "timings.json"]


# -- the summary ----------------------------------------------------------------------------------
def _flaky_agent(fails):
    """An executor answering each (case, repetition) with whether it passes: `fails` is the
    set of (case n, repetition) that fail."""
    async def agent(case, *, run_id, repetition):
        return Run({"pass": (case.input["n"], repetition) not in fails}, case.tenant)
    return agent


def _score(case, answer):
    return {"pass": answer["pass"], "tokens": 10 + case.input["n"]}


def test_a_planted_flaky_case_is_named_flaky_with_its_figures():
    # case 1 fails one time in five; case 2 always fails; case 0 always passes
    fails = {(1, 3)} | {(2, k) for k in range(5)}
    r = run(suite_of(3), _flaky_agent(fails), scorer=_score, repeat=5)
    s = summarize(r, "1,3,5")
    assert s.flaky == ("c1",) and [c.flaky for c in s.cases] == [False, True, False]
    m = s.cases[1].metrics["pass"]
    assert (m.kind, m.passes, m.completed) == ("pass", 4, 5)
    assert m.pass_at_k == {"1": 0.8, "3": 1.0, "5": 1.0}
    assert m.pass_hat_k["1"] == 0.8 and math.isclose(m.pass_hat_k["3"], 0.4)
    assert m.pass_hat_k["5"] == 0.0
    assert s.cases[2].metrics["pass"].pass_at_k["5"] == 0.0  # always failing: not flaky
    tokens = s.cases[1].metrics["tokens"]
    assert (tokens.kind, tokens.n, tokens.mean, tokens.stdev) == ("number", 5, 11.0, 0.0)
    assert (tokens.low, tokens.high) == (11.0, 11.0)
    # default k: 1 and N
    assert set(summarize(r).cases[1].metrics["pass"].pass_at_k) == {"1", "5"}


def test_errored_and_incomplete_repetitions_are_counted_never_passes_or_failures():
    async def agent(case, *, run_id, repetition):
        if repetition == 0:
            raise RuntimeError("down")
        if repetition == 1:
            return Run(None, case.tenant, terminal=False)
        return Run({"pass": repetition == 2}, case.tenant)
    r = run(suite_of(1), agent, scorer=_score, repeat=4)
    c = summarize(r, [1, 2, 3]).cases[0]
    assert (c.repetitions, c.completed, c.errored, c.incomplete) == (4, 2, 1, 1)
    m = c.metrics["pass"]
    assert (m.passes, m.completed, m.flaky) == (1, 2, True)
    assert set(m.pass_at_k) == {"1", "2"}  # k = 3 is above the 2 completed: left out


def test_without_a_scorer_the_metric_is_completed():
    r = run(suite_of(2), repeat=3)
    s = summarize(r)
    assert [set(c.metrics) for c in s.cases] == [{"completed"}, {"completed"}]
    assert case_values(r)["c0"] == {"completed": [True, True, True]}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([COMPLETED, ERRORED, INCOMPLETE]), st.booleans(),
                          st.floats(-1e6, 1e6, allow_nan=False)), min_size=1, max_size=8),
       st.randoms(use_true_random=False))
def test_repetition_order_never_matters_for_the_summary(reps, rnd):
    ref = SuiteRef("demo", "v1")

    def result_of(order):
        rows = []
        for k, (outcome, ok, x) in enumerate(order):
            done = outcome == COMPLETED
            rows.append(CaseResult(id="c0", position=0, run_id=run_id("demo", "v1", "c0", 0, k),
                                   outcome=outcome, repetition=k,
                                   reason=None if done else "why",
                                   scores={"ok": ok, "x": x} if done else None))
        return finish(ref, 0, rows, None, len(order))
    shuffled = list(reps)
    rnd.shuffle(shuffled)
    a, b = summarize(result_of(reps)), summarize(result_of(shuffled))
    assert msgspec.json.encode(a) == msgspec.json.encode(b)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=2, max_size=6), min_size=1, max_size=5))
def test_flaky_is_exactly_disagreement_among_completed_repetitions(table):
    repeat = max(len(row) for row in table)
    fails = {(i, k) for i, row in enumerate(table) for k in range(repeat)
             if not (row[k] if k < len(row) else row[-1])}
    r = run(suite_of(len(table)), _flaky_agent(fails), scorer=_score, repeat=repeat)
    want = tuple(f"c{i}" for i in range(len(table))
                 if 0 < sum((i, k) not in fails for k in range(repeat)) < repeat)
    assert summarize(r).flaky == want
