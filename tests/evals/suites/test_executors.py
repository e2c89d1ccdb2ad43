"""Executors (cas/evals/suites/executors.py): the shipped ones (`cas:echo`, `cas:replay`,
`cas:cassette`), `module:function` loaded by name, whether one takes a cassette, and what an
executor returned read as a run or refused with the reason."""

from __future__ import annotations

import asyncio
import os

import pytest

import cas
from cas.evals.cassettes import RECORD, REPLAY, Cassette
from cas.evals.suites.executors import (Run, cassette_executor, check_cassettes, echo,
                                        load_callable, load_executor, load_scorer, replay_executor,
                                        returned_run, takes_cassette)
from cas.evals.suites.files import from_version
from support.evals import run_suite as run
from support.evals import suite_of, versioned_repo


@pytest.fixture
def versioned():
    return versioned_repo()


# -- the shipped executors --------------------------------------------------------------------
def test_shipped_executors_replay_echo_and_cassette():
    assert load_executor("cas:cassette") is cassette_executor
    assert takes_cassette(cassette_executor)
    with pytest.raises(cas.FailedPrecondition) as e:  # it needs the suite's cassettes
        run(suite_of(2), "cas:cassette")
    assert e.value.reason == "CASSETTES_REQUIRED"
    with pytest.raises(cas.InvalidArgument) as e:
        load_executor("cas:replay")
    assert e.value.reason == "PLAN_REQUIRED"
    with pytest.raises(cas.InvalidArgument) as e:
        load_executor("cas:echo", plan={})
    assert e.value.reason == "PLAN_UNUSED"
    with pytest.raises(cas.InvalidArgument, match="cas ships no executor"):
        load_executor("cas:bogus")
    for bad in ("nocolon", "no_such_module_xyz:f", "json:no_such", "json:__doc__"):
        with pytest.raises(cas.InvalidArgument):
            load_executor(bad)
    assert load_executor("cas:echo") is echo
    assert load_executor("os.path:join") is os.path.join
    replay = load_executor("cas:replay", plan={"default_effect": "none"})
    with pytest.raises(cas.FailedPrecondition, match="DATASET@N") as e:
        run(suite_of(2), replay)
    assert e.value.reason == "FROZEN_CASE_REQUIRED"

def test_replay_of_a_version_answers_with_the_replayed_output(versioned):
    s = from_version(versioned, "evals", 2)
    r = run(s, replay_executor({"default_effect": "none"}))
    assert r.ok and sorted(c.answer for c in r.results) == [f"done {i}" for i in range(4)]
    assert [c.id for c in r.results] == [c.id for c in s.cases]


def test_replay_leaves_out_what_is_withheld_and_names_its_plan(versioned):
    s = from_version(versioned, "evals", 1)
    plain = replay_executor({"default_effect": "none"})
    without = replay_executor({"default_effect": "none"}, withheld=["output"])
    assert plain.plan_digest == without.plan_digest and plain.needs_frozen
    case = s.cases[0]
    assert asyncio.run(plain(case, run_id="r")) == Run(case.expected, "acme")
    assert asyncio.run(without(case, run_id="r")) == Run(None, "acme")


def test_cas_cassette_answers_each_tool_call_from_the_cassette(versioned):
    case = from_version(versioned, "evals", 1).cases[0]
    recording = Cassette(mode=RECORD)
    assert asyncio.run(cassette_executor(case, run_id="r", cassette=recording)) == \
        Run(case.expected, "acme")
    assert [(e.name, e.request, e.response) for e in recording.exchanges] == [
        ("ls", {"arguments": {}}, {"result": ["a"]}),
        ("rm", {"arguments": {"p": "a"}}, {"result": "ok"})]
    replaying = Cassette(recording.exchanges, REPLAY)
    asyncio.run(cassette_executor(case, run_id="r", cassette=replaying))
    replaying.check()
    with pytest.raises(cas.FailedPrecondition) as e:
        asyncio.run(cassette_executor(suite_of(1).cases[0], run_id="r", cassette=replaying))
    assert e.value.reason == "FROZEN_CASE_REQUIRED"


# -- executors by name ------------------------------------------------------------------------
class Agent:
    @staticmethod
    def run_case(case, *, run_id):
        return Run(case.input, case.tenant)


def test_module_function_names_a_dotted_attribute_and_a_refusal_says_what_is_wrong():
    assert load_callable(f"{__name__}:Agent.run_case") is Agent.run_case
    assert load_scorer("os.path:join") is os.path.join
    for spec, says in (("nocolon", "is not module:function"), ("a:b:c", "not module:function"),
                       ("no_such_module_xyz:f", "cannot import 'no_such_module_xyz'"),
                       ("json:no_such", "has no 'no_such'"), ("json:__doc__", "a str, not")):
        with pytest.raises(cas.InvalidArgument, match=says) as e:
            load_callable(spec, "scorer")
        assert e.value.reason == "INVALID_CALLABLE" and "scorer" in e.value.message
    assert run(suite_of(2), f"{__name__}:Agent.run_case").ok


def test_a_cassette_parameter_is_what_takes_a_cassette_and_cassettes_for_others_are_refused():
    async def keyword(case, *, run_id, cassette):
        pass

    def positional(case, run_id, cassette):
        pass

    def anything(*args, **kwargs):
        pass
    assert takes_cassette(keyword) and takes_cassette(positional)
    assert not takes_cassette(anything) and not takes_cassette(echo)
    assert not takes_cassette(print)  # a builtin without a signature takes none
    assert check_cassettes(keyword, True) and not check_cassettes(echo, False)
    with pytest.raises(cas.InvalidArgument, match="executor cas:echo takes no cassette") as e:
        check_cassettes(echo, True, "cas:echo")
    assert e.value.reason == "CASSETTE_UNUSED_BY_EXECUTOR"


# -- what an executor returned ----------------------------------------------------------------
def test_a_run_or_a_dict_of_its_fields_is_a_run_and_anything_else_says_why_not():
    assert returned_run(Run(1, "acme")) == (Run(1, "acme"), None)
    assert returned_run({"answer": [1], "tenant": "acme"}) == (Run([1], "acme"), None)
    assert returned_run({"answer": 1, "tenant": "acme", "terminal": False}) == \
        (Run(1, "acme", False), None)
    for value, says in (
            ("text", "the executor returned 'text' (a str), not a cas.runner.Run(answer, "
                     "tenant, terminal=True) or a dict with those keys"),
            ({"tenant": "acme"}, "the executor returned a dict that has no answer; a run is "
                                 "cas.runner.Run(answer, tenant, terminal=True)"),
            ({}, "has no answer and no tenant"),
            ({"answer": 1, "tenant": "acme", "x": 2}, "has unknown key 'x'"),
            (Run(1, 7), "the run's tenant is 7, not a string"),
            ({"answer": 1, "tenant": "acme", "terminal": 1}, "the run's terminal is 1, not "
                                                             "true or false")):
        run_, problem = returned_run(value)
        assert run_ is None and says in problem
