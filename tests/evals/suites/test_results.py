"""Suite results (cas/evals/suites/results.py): run ids, the result digest (the same at any
concurrency and in another process, covering answers, outcomes, reasons and scores), shards
merged back into the unsharded result, edited results refused, and diffs."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import msgspec
import pytest
from blake3 import blake3
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.evals.suites.executors import Run, echo
from cas.evals.suites.files import Suite, read_jsonl, write_jsonl
from cas.evals.suites.results import (COMPLETED, ERRORED, EXIT_ERRORED, EXIT_INCOMPLETE, INCOMPLETE,
                                      CaseResult, Shard, SuiteRef, as_result, diff, finish, merge,
                                      result_digest, run_id)
from cas.format import encoding
from cas_cli.main import EXIT_CODES
from support import ROOT
from support.evals import run_suite as run
from support.evals import suite_of


def _one_repetition(rows) -> list[dict]:
    """Entries as a result of one repetition writes them: without `repetition` and `seed`."""
    return [{k: v for k, v in msgspec.structs.asdict(r).items() if k not in ("repetition", "seed")}
            for r in rows]


# -- run ids ----------------------------------------------------------------------------------
def test_run_id_is_blake3_of_its_own_domain_over_the_canonical_quadruple():
    want = blake3(b"cas:suite-run-id\x00" + b'["demo","v1","c0",7]').hexdigest()[:32]
    assert run_id("demo", "v1", "c0", 7) == "sr-" + want
    assert run_id("demo", "v1", "c0", 8) != run_id("demo", "v1", "c0", 7)


# -- the digest -------------------------------------------------------------------------------
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
        {"format": 1, "suite": a.suite, "results": _one_repetition(a.results)})).hexdigest()
    assert a.digest == "b3:" + want

def test_digest_covers_answers_outcomes_reasons_and_scores():
    s = suite_of(3)
    base = run(s, scorer=lambda c, a: {"m": 1})
    seen = {base.digest}
    for executor, scorer in (
            (lambda c, *, run_id: Run(c.input["n"], "acme"), lambda c, a: {"m": 1}),
            (echo, lambda c, a: {"m": 2}),
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
    assert as_result(there) == here


# -- outcomes and exit codes ------------------------------------------------------------------
def test_exit_codes_do_not_collide_with_the_error_codes_of_the_cli():
    assert {EXIT_ERRORED, EXIT_INCOMPLETE}.isdisjoint(EXIT_CODES.values())
    assert {EXIT_ERRORED, EXIT_INCOMPLETE}.isdisjoint({0, 2})  # ok; click usage

    async def half(case, *, run_id):
        return Run(1, case.tenant, terminal=case.input["n"] % 2 == 0)
    r = run(suite_of(4), half)
    assert (r.ok, r.exit_code) == (False, EXIT_INCOMPLETE)
    assert run(Suite("empty", "v1", [])).exit_code == 0


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
        assert sh.shard == Shard(i, count, n) and sh.to_json()["shard"] == \
            {"index": i, "count": count, "cases": n}
    order = data.draw(st.permutations(shards))
    merged = merge([json.loads(json.dumps(sh.to_json())) for sh in order])
    assert merged == whole and merged.digest == whole.digest
    assert "shard" not in merged.to_json()

def test_merge_refuses_a_missing_or_repeated_shard_naming_it_and_mixed_versions():
    s = suite_of(6)
    a, b, c = (run(s, shard=f"{i}/3").to_json() for i in (1, 2, 3))
    with pytest.raises(cas.InvalidArgument, match=r"shard 2/3 is missing") as e:
        merge([a, c])
    assert e.value.reason == "SHARD_MISSING" and e.value.fields["missing"] == ["2/3"]
    with pytest.raises(cas.InvalidArgument, match=r"shard 1/3 is given twice \(x.json and "
                                                   r"y.json\)") as e:
        merge([a, b, a, c], ["x.json", "b.json", "y.json", "c.json"])
    assert e.value.reason == "SHARD_REPEATED"
    other = run(suite_of(6, version="v2"), shard="2/3").to_json()
    with pytest.raises(cas.FailedPrecondition, match="one suite version") as e:
        merge([a, other, c])
    assert e.value.reason == "SUITE_VERSION_MISMATCH"
    with pytest.raises(cas.InvalidArgument, match="seed"):
        merge([a, run(s, shard="2/3", seed=1).to_json(), c])
    with pytest.raises(cas.InvalidArgument, match="not a shard"):
        merge([run(s).to_json()])
    with pytest.raises(cas.InvalidArgument, match="not shards of one split"):
        merge([a, run(s, shard="2/2").to_json()])

def test_an_edited_result_is_refused():
    j = run(suite_of(3)).to_json()
    j["results"][1]["answer"] = "better"
    with pytest.raises(cas.InvalidArgument) as e:
        as_result(j, "a.json")
    assert e.value.reason == "RESULT_DIGEST_MISMATCH" and "a.json" in e.value.message
    with pytest.raises(cas.InvalidArgument, match="not a suite result"):
        as_result({"suite": 1}, "a.json")


def test_what_a_run_by_a_locked_name_prints_beside_the_result_is_read_past():
    """`cas suite run NAME --json` (a name cas.lock resolved) prints `resolved` beside the
    result; merge and compare read that output back (docs/ci.md), as a file and as an object."""
    here = run(suite_of(3))
    printed = dict(here.to_json(), resolved={"dataset": "demo", "version": 1, "pin": "demo@1#b3:"
                                             + "0" * 64, "lock": "cas.lock", "repository": None})
    assert as_result(printed) == here
    assert as_result(json.dumps(printed).encode()) == here
    with pytest.raises(cas.InvalidArgument, match="unknown field `resolvd`"):
        as_result(json.dumps(dict(here.to_json(), resolvd=1)))


# -- diff -------------------------------------------------------------------------------------
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
    d = diff(before.to_json(), run(s, changed))
    assert d == {"changed": [
        {"id": "c1", "before": {"outcome": COMPLETED, "answer": {"n": 1}, "reason": None},
         "after": {"outcome": COMPLETED, "answer": "other", "reason": None}},
        {"id": "c2", "before": {"outcome": COMPLETED, "answer": {"n": 2}, "reason": None},
         "after": {"outcome": ERRORED, "answer": None,
                   "reason": "the executor raised RuntimeError: down"}}], "unchanged": 2}
    with pytest.raises(cas.FailedPrecondition) as e:
        diff(before, run(suite_of(4, version="v2")))
    assert e.value.reason == "SUITE_VERSION_MISMATCH"
    assert diff(before, run(suite_of(4, version="v2")), allow_versions=True) == \
        {"changed": [], "unchanged": 4}
    # 1 and 1.0 are different answers (canonical JSON tells them apart)
    ints = run(s, lambda c, *, run_id: Run(1, "acme"))
    floats = run(s, lambda c, *, run_id: Run(1.0, "acme"))
    assert len(diff(ints, floats)["changed"]) == 4


# -- the verdict and its shard ----------------------------------------------------------------
def _row(i: int, outcome: str) -> CaseResult:
    return CaseResult(id=f"c{i}", position=i, run_id=run_id("demo", "v1", f"c{i}"),
                      outcome=outcome, answer=i if outcome == COMPLETED else None)


def test_a_verdict_is_ok_only_when_every_case_completed_and_errored_wins_over_incomplete():
    ref = SuiteRef("demo", "v1")
    empty = finish(ref, 0, [], None)
    assert (empty.ok, empty.exit_code) == (True, 0)
    mixed = finish(ref, 0, [_row(0, COMPLETED), _row(1, INCOMPLETE), _row(2, ERRORED)], None)
    assert (mixed.ok, mixed.exit_code) == (False, EXIT_ERRORED)
    assert mixed.counts == {COMPLETED: 1, ERRORED: 1, INCOMPLETE: 1}
    assert finish(ref, 0, [_row(0, INCOMPLETE)], None).exit_code == EXIT_INCOMPLETE
    assert mixed.digest == result_digest(ref, mixed.results)


def test_a_shard_is_read_from_text_a_pair_or_a_shard_and_refused_otherwise():
    assert Shard.parse("2/4") == Shard.parse((2, 4)) == Shard.parse(Shard(2, 4)) == Shard(2, 4)
    assert str(Shard(2, 4)) == "2/4" and list(Shard(2, 4).positions(9)) == [1, 5]
    for bad in ("0/2", "3/2", "x", "1/", "\u00b2/3", (1, 2, 3), 5, (True, 2)):
        with pytest.raises(cas.InvalidArgument) as e:
            Shard.parse(bad)
        assert e.value.reason == "INVALID_SHARD"


def test_a_shards_digest_covers_its_place_in_the_split():
    ref, rows = SuiteRef("demo", "v1"), [_row(0, COMPLETED)]
    shard = Shard(1, 2, 2)
    want = blake3(b"cas:suite-result\x00" + encoding.encode(
        {"format": 1, "suite": ref, "results": _one_repetition(rows),
         "shard": shard})).hexdigest()
    assert result_digest(ref, rows, shard) == "b3:" + want
    assert len({result_digest(ref, rows), result_digest(ref, rows, shard),
                result_digest(ref, rows, Shard(1, 2, 3))}) == 3
