"""Replay: plans, dispositions, the plan digest, run diffs, the API, and `cas replay`'s bytes
the same in two processes (its output and refusals: tests/cli/test_datasets_and_versions.py).

Plans against recordings are tables; the invariants are hypothesis properties; the repository
paths run on both backends (`location`) and check that a replay writes nothing.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys

import msgspec
import pytest
from blake3 import blake3
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas.evals.replay import parse_run_document
from cas.format import encoding
from cas_cli.main import cli
from support import ROOT
from support.recordings import (PLAN, C, R, S, U, call, case_of, expected_detail, keys_and_bytes,
                                msg, organised_version, organiser_run, promote_all, write)

ADA = "Ada <ada@example.com>"
DOCS = os.path.join(ROOT, "docs", "replay.md")


# -- building recordings ------------------------------------------------------------------
def dispositions(result) -> list[str]:
    return [d.disposition for d in result.record.steps_detail]


def stub(effect: str) -> dict:
    return {"effect": effect}


# One recording with every kind of step the tables need.
RECORDING = case_of(
    msg("user", "tidy my files"),                               # 0
    call("ls", {"path": "."}, result=["a", "b"]),               # 1 result recorded
    call("ls", {"path": "/tmp"}),                               # 2 nothing recorded
    call("cat", {"path": "a"}, error="permission denied"),      # 3 only an error recorded
    call("mv", {"src": "a", "dst": "b"}, result="ok"),          # 4
    call("mv", {"src": "b", "dst": "c"}),                       # 5
    call("send", {"to": "x@example.com"}, result=None),         # 6 a recorded null
    call(...),                                                  # 7 no tool_name key
    call(""),                                                   # 8 empty tool_name
    call(None),                                                 # 9 null tool_name
    {"type": "thinking", "text": "done?", "tool_name": "mv"},   # 10 not a tool call
    msg("assistant", "done"),                                   # 11
)

E, I = stub("external"), stub("internal")
UNNAMED = [(S, E)] * 3  # steps 7-9: external whatever the plan says
TAIL = [(C, None), (C, None)]

PLAN_TABLE = [
    ("no plan", None,
     [(C, None)] + [(S, E)] * 6 + UNNAMED + TAIL),
    ("empty plan", {},
     [(C, None)] + [(S, E)] * 6 + UNNAMED + TAIL),
    ("explicit default none", {"default_effect": "none"},
     [(C, None), (R, None), (U, None), (R, None), (R, None), (U, None), (R, None)]
     + UNNAMED + TAIL),
    ("default internal", {"default_effect": "internal"},
     [(C, None)] + [(S, I)] * 6 + UNNAMED + TAIL),
    ("reads named, default unset", {"tools": [{"tool_name": "ls", "effect": "none"},
                                              {"tool_name": "cat", "effect": "none"}]},
     [(C, None), (R, None), (U, None), (R, None), (S, E), (S, E), (S, E)] + UNNAMED + TAIL),
    ("default none, writes named",
     {"default_effect": "none", "tools": [{"tool_name": "mv", "effect": "internal"},
                                          {"tool_name": "send", "effect": "external"}]},
     [(C, None), (R, None), (U, None), (R, None), (S, I), (S, I), (S, E)] + UNNAMED + TAIL),
    ("a tool the recording never calls", {"tools": [{"tool_name": "rm", "effect": "none"}]},
     [(C, None)] + [(S, E)] * 6 + UNNAMED + TAIL),
]


@pytest.mark.parametrize("name,plan,expected", PLAN_TABLE, ids=[t[0] for t in PLAN_TABLE])
def test_plan_table(name, plan, expected):
    result = cas.replay_case(RECORDING, plan)
    assert dispositions(result) == [d for d, _ in expected]
    for frozen, replayed, (disposition, marker) in zip(RECORDING["steps"], result.run.steps,
                                                        expected):
        if disposition == S:
            # the answer is discarded, the marker names the effect, everything else is kept
            assert replayed == {**{k: v for k, v in frozen.items()
                                   if k not in ("result", "error")}, "cas_stub": marker}
        else:
            assert replayed == frozen
    record = result.record
    assert (record.steps, record.tool_calls) == (12, 9)
    assert record.replayed == sum(d == R for d, _ in expected)
    assert record.stubbed == sum(d == S for d, _ in expected)
    assert record.unrecorded == sum(d == U for d, _ in expected)
    named_stubs = {RECORDING["steps"][i]["tool_name"] for i, (d, _) in enumerate(expected)
                   if d == S and i not in (7, 8, 9)}
    assert record.stubbed_tools == sorted(named_stubs)
    assert record.plan_digest == cas.plan_digest(plan)


def test_steps_detail_names_types_and_exact_tool_names():
    detail = cas.replay_case(RECORDING, {"default_effect": "none"}).record.steps_detail
    assert [(d.index, d.type, d.tool_name) for d in detail] == [
        (0, "message", None), (1, "tool_call", "ls"), (2, "tool_call", "ls"),
        (3, "tool_call", "cat"), (4, "tool_call", "mv"), (5, "tool_call", "mv"),
        (6, "tool_call", "send"), (7, "tool_call", None), (8, "tool_call", None),
        (9, "tool_call", None), (10, "thinking", None), (11, "message", None)]
    odd = case_of({"type": 7, "x": 1}, {"role": "user"}, call(5, result=1))
    detail = cas.replay_case(odd, {"default_effect": "none"}).record.steps_detail
    assert [(d.type, d.tool_name, d.disposition) for d in detail] == [
        (None, None, C), (None, None, C), ("tool_call", None, S)]


def test_unnamed_calls_are_external_even_under_an_open_default():
    everything_none = {"default_effect": "none", "tools": [{"tool_name": "x", "effect": "none"}]}
    for step in (call(...), call(""), call(None), call(3), call(["ls"])):
        result = cas.replay_case(case_of({**step, "result": "secret"}), everything_none)
        assert dispositions(result) == [S]
        assert result.run.steps[0]["cas_stub"] == E and "result" not in result.run.steps[0]
        assert result.record.stubbed_tools == [] and result.record.stubbed == 1


def test_exact_tool_names_no_folding():
    recording = case_of(call("Read", result=1), call("read", result=2), call("read ", result=3),
                        call("caf\u00e9", result=4), call("cafe\u0301", result=5))
    plan = {"default_effect": "internal", "tools": [{"tool_name": "read", "effect": "none"},
                                                    {"tool_name": "caf\u00e9", "effect": "none"}]}
    result = cas.replay_case(recording, plan)
    assert dispositions(result) == [S, R, S, R, S]
    assert result.record.stubbed_tools == ["Read", "cafe\u0301", "read "]


def test_recorded_answer_is_result_or_error_present_even_null():
    plan = {"default_effect": "none"}
    cases = [({"result": None}, R), ({"error": None}, R), ({"error": "boom"}, R),
             ({"result": [], "error": "partial"}, R), ({}, U), ({"results": [1]}, U)]
    for answer, expected in cases:
        result = cas.replay_case(case_of(call("ls", **answer)), plan)
        assert dispositions(result) == [expected], answer
        assert result.run.steps[0] == call("ls", **answer)  # carried exactly, never filled


def test_unrecorded_absence_is_carried_not_filled():
    frozen = case_of(call("ls", {"path": "."}), call("cat"))
    result = cas.replay_case(frozen, {"default_effect": "none"})
    assert dispositions(result) == [U, U]
    assert result.run_bytes == cas.encode_case(frozen).data
    assert all("result" not in s and "error" not in s for s in result.run.steps)


def test_stub_keeps_sequence_arguments_and_extra_fields_and_replaces_a_recorded_marker():
    step = call("send", {"to": "x"}, result={"id": 9}, error=None)
    step.update({"latency_ms": 12, "cas_stub": "forged"})
    frozen = case_of(msg("user", "hi"), step, msg("assistant", "sent"))
    result = cas.replay_case(frozen, {"tools": [{"tool_name": "send", "effect": "internal"}]})
    assert result.run.steps == [msg("user", "hi"),
                                {"type": "tool_call", "tool_name": "send", "arguments": {"to": "x"},
                                 "latency_ms": 12, "cas_stub": I},
                                msg("assistant", "sent")]
    # a marker recorded on a step that is not stubbed is carried: the record is the authority
    carried = cas.replay_case(frozen, {"default_effect": "none"})
    assert carried.run.steps[1] == step and dispositions(carried) == [C, R, C]


def test_outcome_withheld_and_every_other_field_stay_as_recorded():
    frozen = case_of(call("mv", result="ok"), outcome={"status": "failure", "reason": "x"},
                     withheld=["tool_arguments"], person="user-1", metadata={"model": "m"},
                     started_at="2026-05-01T10:00:00Z")
    run = msgspec.to_builtins(cas.replay_case(frozen).run)
    expected = msgspec.to_builtins(msgspec.convert(frozen, cas.Case))
    assert {k: v for k, v in run.items() if k != "steps"} == \
        {k: v for k, v in expected.items() if k != "steps"}


def test_replayed_bytes_equal_the_frozen_bytes_when_nothing_is_stubbed():
    frozen = case_of(msg("user", "q"), call("ls", result=[1]), call("cat"))
    result = cas.replay_case(frozen, {"default_effect": "none"})
    assert result.run_bytes == cas.encode_case(frozen).data
    assert cas.diff_runs(frozen, result) == cas.RunDiff(identical=True, differences=[])


def test_the_empty_recording():
    result = cas.replay_case(case_of())
    assert result.run.steps == [] and result.record.steps == 0
    assert (result.record.tool_calls, result.record.stubbed_tools) == (0, [])


def test_replay_case_accepts_a_case_a_dict_and_an_encoded_case_alike():
    as_case = msgspec.convert(RECORDING, cas.Case)
    results = [cas.replay_case(x, {"default_effect": "none"})
               for x in (RECORDING, as_case, cas.encode_case(RECORDING))]
    assert results[0] == results[1] == results[2]
    with pytest.raises(cas.InvalidArgument, match="not a case"):
        cas.replay_case({"steps": "nope"})
    with pytest.raises(cas.InvalidJSONValue):
        cas.replay_case(case_of(call("ls", result=float("nan"))))


# -- plan refusals ------------------------------------------------------------------------
EFFECT_REFUSALS = [
    ({"default_effect": "External"}, "$.default_effect", '"External"'),
    ({"default_effect": "NONE"}, "$.default_effect", '"NONE"'),
    ({"default_effect": ""}, "$.default_effect", '""'),
    ({"default_effect": 0}, "$.default_effect", "0"),
    ({"default_effect": False}, "$.default_effect", "false"),
    ({"default_effect": ["none"]}, "$.default_effect", '["none"]'),
    ({"tools": [{"tool_name": "mv", "effect": "Internal"}]}, "$.tools[0].effect", '"Internal"'),
    ({"tools": [{"tool_name": "mv", "effect": "read-only"}]}, "$.tools[0].effect",
     '"read-only"'),
    ({"tools": [{"tool_name": "mv", "effect": None}]}, "$.tools[0].effect", "null"),
    ({"tools": [{"tool_name": "ls", "effect": "none"},
                {"tool_name": "mv", "effect": 2}]}, "$.tools[1].effect", "2"),
]


@pytest.mark.parametrize("plan,path,shown", EFFECT_REFUSALS)
def test_unknown_effect_is_refused_naming_the_accepted_values(plan, path, shown):
    with pytest.raises(cas.InvalidArgument) as info:
        cas.parse_plan(plan)
    assert info.value.reason == "UNKNOWN_EFFECT"
    assert info.value.message == (f"plan: {path}: {shown} is not an effect; accepted values: "
                                  "none, internal, external")
    assert info.value.fields == {"path": path, "accepted": ["none", "internal", "external"]}


PLAN_REFUSALS = [
    ({"tools": [{"tool_name": "mv", "effect": "internal"},
                {"tool_name": "mv", "effect": "internal"}]},
     "DUPLICATE_TOOL", "plan: $.tools[1].tool_name: tool 'mv' is declared twice",
     {"path": "$.tools[1].tool_name", "tool_name": "mv"}),
    ({"tools": [{"tool_name": "mv", "effect": "none"}, {"tool_name": "ls", "effect": "none"},
                {"tool_name": "mv", "effect": "external"}]},
     "DUPLICATE_TOOL", "plan: $.tools[2].tool_name: tool 'mv' is declared twice",
     {"path": "$.tools[2].tool_name", "tool_name": "mv"}),
    ({"default": "none"}, "INVALID_PLAN",
     "plan: $.default: unknown field; a plan has default_effect, tools", {"path": "$.default"}),
    ({"tools": [{"tool_name": "mv", "effect": "none", "why": "x"}]}, "INVALID_PLAN",
     "plan: $.tools[0].why: unknown field; a tool policy has tool_name, effect",
     {"path": "$.tools[0].why"}),
    ({"tools": [{"tool_name": "mv"}]}, "INVALID_PLAN",
     "plan: $.tools[0].effect: required field is missing", {"path": "$.tools[0].effect"}),
    ({"tools": [{"effect": "none"}]}, "INVALID_PLAN",
     "plan: $.tools[0].tool_name: required field is missing", {"path": "$.tools[0].tool_name"}),
    ({"tools": [{"tool_name": "", "effect": "none"}]}, "INVALID_PLAN",
     'plan: $.tools[0].tool_name: must be a non-empty string, not ""',
     {"path": "$.tools[0].tool_name"}),
    ({"tools": [{"tool_name": 5, "effect": "none"}]}, "INVALID_PLAN",
     "plan: $.tools[0].tool_name: must be a non-empty string, not 5",
     {"path": "$.tools[0].tool_name"}),
    ({"tools": {"mv": "none"}}, "INVALID_PLAN",
     'plan: $.tools: must be a JSON array, not {"mv":"none"}', {"path": "$.tools"}),
    ({"tools": ["mv"]}, "INVALID_PLAN",
     'plan: $.tools[0]: a tool policy must be a JSON object, not "mv"', {"path": "$.tools[0]"}),
    ([], "INVALID_PLAN", "plan: $: a plan must be a JSON object, not []", {"path": "$"}),
    ("none", "INVALID_PLAN", "plan: invalid JSON: JSON is malformed: invalid character (byte 4)",
     {}),
    ({"kind": "case"}, "INVALID_PLAN",
     "plan: $.kind: \"case\" is not a plan's kind; expected 'replay.plan'", {"path": "$.kind"}),
]


@pytest.mark.parametrize("plan,reason,message,fields", PLAN_REFUSALS)
def test_plan_refusals(plan, reason, message, fields):
    with pytest.raises(cas.InvalidArgument) as info:
        cas.parse_plan(plan)
    assert (info.value.reason, info.value.message, info.value.fields) == (reason, message, fields)
    with pytest.raises(cas.InvalidArgument):  # every entry point refuses it the same way
        cas.replay_case(RECORDING, plan)
    with pytest.raises(cas.InvalidArgument):
        cas.plan_digest(plan)


def test_plan_refusals_name_the_source_and_unknown_formats_are_refused():
    with pytest.raises(cas.InvalidArgument, match=r"^plan\.json: invalid JSON"):
        cas.parse_plan(b"{", source="plan.json")
    with pytest.raises(cas.UnsupportedFormat) as info:
        cas.parse_plan({"format": 2})
    assert info.value.code == "FAILED_PRECONDITION" and info.value.fields == {"format": 2}


def test_unset_and_null_mean_external_and_a_plan_reads_back_from_its_bytes():
    for plan in (None, {}, {"default_effect": None}, {"tools": None}, b"{}", "{}",
                 {"kind": "replay.plan", "format": 1}):
        assert cas.parse_plan(plan) == cas.Plan(default_effect="external", tools=())
    plan = cas.parse_plan({"default_effect": "none",
                           "tools": [{"tool_name": "mv", "effect": "internal"}]})
    assert cas.parse_plan(cas.format_plan(plan)) == plan
    # a Plan built by hand is normalised too
    messy = cas.Plan(default_effect="none", tools=(
        cas.ToolEffect(tool_name="z", effect="external"),
        cas.ToolEffect(tool_name="a", effect="none")))
    assert cas.parse_plan(messy).tools == (cas.ToolEffect(tool_name="z", effect="external"),)
    with pytest.raises(cas.InvalidArgument, match="declared twice"):
        cas.parse_plan(cas.Plan(tools=(cas.ToolEffect(tool_name="a", effect="none"),) * 2))
    as_tuples = {"tools": ({"tool_name": "mv", "effect": "none"},)}
    assert cas.parse_plan(as_tuples) == cas.parse_plan({"tools": [dict(as_tuples["tools"][0])]})


# -- the plan digest ----------------------------------------------------------------------
EQUIVALENT = [
    [None, {}, {"default_effect": None}, {"default_effect": "external"}, {"tools": []},
     {"tools": [{"tool_name": "ls", "effect": "external"}]},
     {"default_effect": "external", "tools": [{"tool_name": "a", "effect": "external"},
                                              {"tool_name": "b", "effect": "external"}]}],
    [{"default_effect": "none", "tools": [{"tool_name": "mv", "effect": "internal"},
                                          {"tool_name": "send", "effect": "external"}]},
     {"tools": [{"tool_name": "send", "effect": "external"},
                {"tool_name": "mv", "effect": "internal"}], "default_effect": "none"},
     {"default_effect": "none", "tools": [{"tool_name": "ls", "effect": "none"},
                                          {"tool_name": "send", "effect": "external"},
                                          {"tool_name": "cat", "effect": "none"},
                                          {"tool_name": "mv", "effect": "internal"}]},
     b'{"tools":[{"effect":"internal","tool_name":"mv"},{"tool_name":"send","effect":"external"}'
     b'],"default_effect":"none"}'],
    [{"default_effect": "internal"},
     {"default_effect": "internal", "tools": [{"tool_name": "mv", "effect": "internal"}]}],
]
DIFFERENT = [
    None, {"default_effect": "none"}, {"default_effect": "internal"},
    {"tools": [{"tool_name": "mv", "effect": "internal"}]},
    {"tools": [{"tool_name": "mv", "effect": "none"}]},
    {"tools": [{"tool_name": "Mv", "effect": "none"}]},
    {"default_effect": "none", "tools": [{"tool_name": "mv", "effect": "internal"}]},
    {"default_effect": "none", "tools": [{"tool_name": "mv", "effect": "external"}]},
    {"default_effect": "internal", "tools": [{"tool_name": "mv", "effect": "external"}]},
    {"tools": [{"tool_name": "mv", "effect": "none"}, {"tool_name": "ls", "effect": "none"}]},
]


@pytest.mark.parametrize("group", EQUIVALENT)
def test_equivalent_plans_have_one_digest_and_one_output(group):
    digests = {cas.plan_digest(p) for p in group}
    assert len(digests) == 1
    outputs = {cas.replay_case(RECORDING, p).run_bytes for p in group}
    assert len(outputs) == 1


def test_different_behaviour_different_digest_and_internal_is_not_external():
    digests = [cas.plan_digest(p) for p in DIFFERENT]
    assert len(set(digests)) == len(DIFFERENT)
    probe = case_of(*(call(n, result="r") for n in ("mv", "Mv", "ls", "other")))
    outputs = [cas.replay_case(probe, p).run_bytes for p in DIFFERENT]
    assert len(set(outputs)) == len(DIFFERENT)  # each digest stands for its own output


def test_digest_format_and_doc_vectors():
    text = open(DOCS, encoding="utf-8").read()
    vectors = re.findall(r"^plan:   (.*)\nbytes:  (.*)\ndigest: (b3:[0-9a-f]{64})$", text, re.M)
    assert len(vectors) == 2
    for plan_text, canonical, digest in vectors:
        plan = json.loads(plan_text)
        assert cas.format_plan(plan) == canonical.encode("utf-8")
        assert cas.plan_digest(plan) == digest
        # reproducible from the doc alone: BLAKE3 over the domain and the canonical bytes
        raw = blake3(b"cas:replay.plan\x00" + canonical.encode("utf-8")).hexdigest()
        assert digest == "b3:" + raw


# -- hypothesis ---------------------------------------------------------------------------
NAMES = ["ls", "read", "search", "mv", "write", "send", "a/b", "~x", "caf\u00e9", "Read"]
json_leaf = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4) | \
    st.floats(allow_nan=False, allow_infinity=False, width=32)
json_value = st.recursive(json_leaf, lambda kids: st.lists(kids, max_size=3)
                          | st.dictionaries(st.text(max_size=3), kids, max_size=3), max_leaves=6)


@st.composite
def tool_steps(draw):
    step = {"type": "tool_call"}
    name = draw(st.sampled_from(NAMES + [..., None, "", 7]))
    if name is not ...:
        step["tool_name"] = name
    if draw(st.booleans()):
        step["arguments"] = draw(st.dictionaries(st.sampled_from(["path", "to", "x"]), json_leaf,
                                                 max_size=2))
    for key in ("result", "error"):
        if draw(st.integers(0, 2)) == 0:
            step[key] = draw(json_value)
    if draw(st.integers(0, 5)) == 0:
        step["latency"] = draw(json_leaf)
    return step


other_steps = st.builds(msg, st.sampled_from(["user", "assistant"]), st.text(max_size=5)) | \
    st.fixed_dictionaries({"type": st.sampled_from(["thinking", 3]), "text": json_leaf})
recordings = st.builds(lambda steps, outcome: case_of(*steps, outcome=outcome),
                       st.lists(tool_steps() | other_steps, max_size=12), json_value)
effects = st.sampled_from(["none", "internal", "external"])


@st.composite
def plans(draw):
    plan = {}
    default = draw(st.sampled_from([..., None, "none", "internal", "external"]))
    if default is not ...:
        plan["default_effect"] = default
    tools = draw(st.dictionaries(st.sampled_from(NAMES + ["unused"]), effects, max_size=6))
    if tools or draw(st.booleans()):
        plan["tools"] = [{"tool_name": n, "effect": e} for n, e in tools.items()]
    return plan


@st.composite
def equivalent_variant(draw, plan):
    """The same behaviour written otherwise: tools shuffled, the default restated explicitly
    or entries restating it added."""
    default = plan.get("default_effect") or "external"
    tools = list(plan.get("tools", []))
    named = {t["tool_name"] for t in tools}
    extra = draw(st.lists(st.sampled_from([n for n in NAMES + ["other"] if n not in named]),
                          unique=True, max_size=3))
    tools += [{"tool_name": n, "effect": default} for n in extra]
    tools = draw(st.permutations(tools))
    variant = {"tools": [dict(reversed(list(t.items()))) for t in tools]}
    if default != "external" or draw(st.booleans()):
        variant["default_effect"] = default
    return variant


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(recordings, plans())
def test_property_counts_add_up_and_every_step_has_one_disposition(recording, plan):
    result = cas.replay_case(recording, plan)
    record = result.record
    assert [d.index for d in record.steps_detail] == list(range(len(recording["steps"])))
    assert record.steps == len(recording["steps"]) == len(result.run.steps)
    assert all(d.disposition in ("CARRIED", "RECORDED", "UNRECORDED", "STUBBED")
               for d in record.steps_detail)
    tool_calls = sum(s.get("type") == "tool_call" for s in recording["steps"])
    assert record.tool_calls == tool_calls
    assert record.replayed + record.stubbed + record.unrecorded == tool_calls
    count = {d: dispositions(result).count(d) for d in (R, S, U)}
    assert (record.replayed, record.stubbed, record.unrecorded) == (count[R], count[S], count[U])
    assert record.stubbed_tools == sorted({d.tool_name for d in record.steps_detail
                                           if d.disposition == S and d.tool_name is not None})


@FAST
@given(recordings, plans())
def test_property_no_stubbed_step_carries_a_recorded_answer(recording, plan):
    result = cas.replay_case(recording, plan)
    for frozen, replayed, d in zip(recording["steps"], result.run.steps,
                                   result.record.steps_detail):
        if d.disposition == S:
            assert "result" not in replayed and "error" not in replayed
            assert replayed["cas_stub"] in (I, E)
            assert {k: v for k, v in replayed.items() if k != "cas_stub"} == \
                {k: v for k, v in frozen.items() if k not in ("result", "error", "cas_stub")}
        else:
            assert replayed == frozen
        if d.disposition == R:
            assert "result" in frozen or "error" in frozen
        if d.disposition == U:
            assert "result" not in replayed and "error" not in replayed


@FAST
@given(recordings, plans())
def test_property_replay_is_a_pure_function(recording, plan):
    before = copy.deepcopy(recording), copy.deepcopy(plan)
    first = cas.replay_case(recording, plan)
    first.run.steps.append({"type": "message", "role": "mutated"})  # the caller's copy only
    second = cas.replay_case(recording, plan)
    assert (recording, plan) == before
    assert cas.replay_case(recording, plan) == second
    assert first.record == second.record
    assert encoding.encode(second) == encoding.encode(cas.replay_case(
        json.loads(json.dumps(recording)), json.loads(json.dumps(plan))))


@FAST
@given(st.data(), recordings, plans())
def test_property_equivalent_plans_give_one_digest_and_one_output(data, recording, plan):
    variant = data.draw(equivalent_variant(plan))
    assert cas.plan_digest(variant) == cas.plan_digest(plan)
    assert cas.format_plan(variant) == cas.format_plan(plan)
    assert cas.replay_case(recording, variant) == cas.replay_case(recording, plan)


@FAST
@given(recordings, plans(), plans())
def test_property_one_digest_exactly_when_one_behaviour(recording, p, q):
    same_digest = cas.plan_digest(p) == cas.plan_digest(q)
    if same_digest:
        assert cas.replay_case(recording, p) == cas.replay_case(recording, q)
    # a probe that calls every tool either plan names, and one neither names, tells them apart
    names = {t["tool_name"] for t in p.get("tools", []) + q.get("tools", [])} | {"neither"}
    probe = case_of(*(call(n, result=None) for n in sorted(names)))
    same_output = cas.replay_case(probe, p).run_bytes == cas.replay_case(probe, q).run_bytes
    assert same_digest == same_output


@FAST
@given(plans())
def test_property_plan_round_trip(plan):
    parsed = cas.parse_plan(plan)
    assert cas.parse_plan(cas.format_plan(plan)) == parsed
    assert cas.parse_plan(json.dumps(plan).encode()) == parsed
    assert [t.tool_name for t in parsed.tools] == sorted(t.tool_name for t in parsed.tools)
    assert all(t.effect != parsed.default_effect for t in parsed.tools)


@FAST
@given(json_value | st.dictionaries(st.sampled_from(["default_effect", "tools", "kind", "format",
                                                     "x"]), json_value, max_size=3))
def test_property_parse_plan_raises_only_its_documented_errors(value):
    try:
        cas.parse_plan(value)
    except (cas.InvalidArgument, cas.UnsupportedFormat):
        pass


def _apply(value, differences):
    """Apply a diff's `replayed` side to `value` (the pointer syntax of RFC 6901)."""
    value = copy.deepcopy(value)
    for d in differences:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in d["path"].split("/")[1:]]
        parent = value
        for t in tokens[:-1]:
            parent = parent[int(t)] if isinstance(parent, list) else parent[t]
        last = int(tokens[-1]) if isinstance(parent, list) else tokens[-1]
        if "replayed" not in d:
            del parent[last]
        elif isinstance(parent, list) and last == len(parent):
            parent.append(d["replayed"])
        else:
            parent[last] = d["replayed"]
    return value


@FAST
@given(recordings, plans())
def test_property_diff_identical_exactly_when_bytes_equal_and_patches_frozen_into_replayed(
        recording, plan):
    result = cas.replay_case(recording, plan)
    frozen_bytes = cas.encode_case(recording).data
    diff = cas.diff_runs(frozen_bytes, result)
    assert diff.identical == (frozen_bytes == result.run_bytes)
    assert diff.identical == (diff.differences == [])
    frozen_value = json.loads(frozen_bytes)
    assert _apply(frozen_value, diff.differences) == json.loads(result.run_bytes)
    stubbed = [d.index for d in result.record.steps_detail if d.disposition == S]
    assert {int(d["path"].split("/")[2]) for d in diff.differences} <= set(stubbed)


@FAST
@given(json_value, json_value, json_value, json_value)
def test_property_diff_of_any_two_cases(a, b, c, d):
    a, b = case_of(input=a, outcome=c), case_of(input=b, outcome=d)
    diff = cas.diff_runs(a, b)
    a_bytes, b_bytes = cas.encode_case(a).data, cas.encode_case(b).data
    assert diff.identical == (a_bytes == b_bytes) == (not diff.differences)
    for entry in diff.differences:
        assert "frozen" in entry or "replayed" in entry
        assert entry["path"].startswith(("/input", "/outcome"))
    # arrays of different lengths too: additions in order, then removals from the end
    trimmed = _apply(json.loads(a_bytes), [x for x in diff.differences if "replayed" in x])
    removals = [x for x in reversed(diff.differences) if "replayed" not in x]
    assert _apply(trimmed, removals) == json.loads(b_bytes)


# -- diffs --------------------------------------------------------------------------------
def test_diff_paths_escape_and_come_in_document_order():
    frozen = {"b": 1, "a/b": {"m~n": [1, 2, 3]}, "z": None, "\u00e9": "x", "A": True, "k": 1}
    other = {"b": 1.0, "a/b": {"m~n": [1, 5]}, "\u00e9": "x", "A": True, "k": 1, "new": None}
    diff = cas.diff_runs(case_of(metadata=frozen, output="x"), case_of(metadata=other))
    assert diff.identical is False
    assert diff.differences == [
        {"path": "/metadata/a~1b/m~0n/1", "frozen": 2, "replayed": 5},
        {"path": "/metadata/a~1b/m~0n/2", "frozen": 3},
        {"path": "/metadata/b", "frozen": 1, "replayed": 1.0},
        {"path": "/metadata/new", "replayed": None},
        {"path": "/metadata/z", "frozen": None},
        {"path": "/output", "frozen": "x", "replayed": "done"},
    ]


def test_diff_absent_is_not_null_and_types_differ_at_their_path():
    diff = cas.diff_runs(case_of(metadata={"r": None, "s": [1], "t": {"x": 1}, "u": 0.0}),
                         case_of(metadata={"s": {"0": 1}, "t": {"x": 1}, "u": -0.0, "r2": None}))
    assert diff.differences == [
        {"path": "/metadata/r", "frozen": None},
        {"path": "/metadata/r2", "replayed": None},
        {"path": "/metadata/s", "frozen": [1], "replayed": {"0": 1}},
        {"path": "/metadata/u", "frozen": 0.0, "replayed": -0.0},
    ]
    # a recorded null answer against an absent one: present on one side only
    diff = cas.diff_runs(case_of(call("ls", result=None)), case_of(call("ls")))
    assert diff.differences == [{"path": "/steps/0/result", "frozen": None}]


def test_diff_inputs_and_refusals():
    frozen = msgspec.convert(RECORDING, cas.Case)
    enc = cas.encode_case(RECORDING)
    for a in (frozen, enc, enc.data, json.loads(enc.data), bytearray(enc.data)):
        assert cas.diff_runs(a, frozen).identical
    pretty = json.dumps(json.loads(enc.data), indent=2).encode()
    assert cas.diff_runs(pretty, enc.data).identical  # compared as canonical values
    with pytest.raises(cas.InvalidArgument, match="^replayed run: invalid JSON"):
        cas.diff_runs(frozen, b"{")
    with pytest.raises(cas.InvalidArgument, match=r"^frozen run must be a case \(a JSON object\), "
                                                  r"not \[1\]"):
        cas.diff_runs(b"[1]", frozen)
    with pytest.raises(cas.InvalidArgument, match="^replayed run: not a case: "):
        cas.diff_runs(frozen, {"input": 1, "answer": 2})
    with pytest.raises(cas.InvalidJSONValue):
        cas.diff_runs({"input": float("inf")}, frozen)
    # a dict or bytes is read as a case: fields left out take their defaults
    assert cas.diff_runs({"input": "q"}, cas.Case(input="q")).identical


def test_parse_run_document_reads_a_case_a_replay_reply_and_a_case_reply():
    enc = cas.encode_case(RECORDING)
    case_obj = json.loads(enc.data)
    reply = json.loads(json.dumps(msgspec.to_builtins(cas.replay_case(RECORDING))))
    assert parse_run_document(enc.data) == case_obj
    assert parse_run_document(json.dumps(reply).encode()) == reply["run"]
    assert parse_run_document(json.dumps({"id": enc.case_id, **case_obj}).encode()) == case_obj
    wrong = json.dumps({"id": "b3:" + "0" * 64, **case_obj}).encode()
    with pytest.raises(cas.InvalidArgument) as info:
        parse_run_document(wrong, "f.json")
    assert info.value.reason == "CASE_ID_MISMATCH" and info.value.message.startswith("f.json: ")
    with pytest.raises(cas.InvalidArgument, match="^f.json: a run must be a JSON object"):
        parse_run_document(b"[]", "f.json")


# -- realistic recordings through the repository -----------------------------------------


@pytest.fixture
def person(monkeypatch, tmp_path):
    monkeypatch.setenv("CAS_USER", ADA)
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "user-config.json"))


@pytest.fixture
def organised(location, person):
    """A repository on each backend with one version holding both organiser runs."""
    return organised_version(location)


def test_realistic_replay_through_the_repository_on_both_backends(organised):
    location, repo, number, ids = organised
    before = keys_and_bytes(repo)
    with_results = cas.replay_item(repo, "evals", number, ids["with"], PLAN)
    assert [d.disposition for d in with_results.record.steps_detail] == [
        C, C, R, R, R, S, S, C, S, C, S, C]
    assert msgspec.to_builtins(with_results.record) == {
        "plan_digest": cas.plan_digest(PLAN), "steps": 12, "tool_calls": 7, "replayed": 3,
        "stubbed": 4, "unrecorded": 0, "stubbed_tools": ["move_file", "send_email", "write_file"],
        "steps_detail": expected_detail([C, C, R, R, R, S, S, C, S, C, S, C])}
    steps = with_results.run.steps
    assert steps[5] == call("move_file", {"src": "inbox/inv-1.pdf", "dst": "invoices/inv-1.pdf"},
                            cas_stub=I)
    assert steps[6] == call("move_file", {"src": "inbox/inv-2.pdf", "dst": "invoices/inv-2.pdf"},
                            cas_stub=I)
    assert steps[10]["cas_stub"] == E and "result" not in steps[10]
    assert with_results.run.outcome == {"status": "success", "checks": {"filed": 2}}

    # today's recordings: no tool answers, so reads are UNRECORDED and effects STUBBED
    without = cas.replay_item(repo, "evals", number, ids["without"], PLAN)
    assert [d.disposition for d in without.record.steps_detail] == [
        C, C, U, U, U, S, S, C, S, C, S, C]
    assert (without.record.replayed, without.record.unrecorded) == (0, 3)

    # the frozen case diffed against its replay: only the stubbed calls differ
    frozen = repo.case("evals", number, ids["with"])
    diff = cas.diff_runs(frozen, with_results)
    assert [d["path"] for d in diff.differences] == [
        "/steps/5/cas_stub", "/steps/5/result", "/steps/6/cas_stub", "/steps/6/error",
        "/steps/8/cas_stub", "/steps/8/result", "/steps/10/cas_stub", "/steps/10/result"]
    assert diff.differences[3] == {"path": "/steps/6/error", "frozen": "destination exists"}
    assert keys_and_bytes(repo) == before  # a replay writes nothing

    reopened = cas.open(location)  # and another process sees the same answer
    assert encoding.encode(cas.replay_item(reopened, "evals", number, ids["with"], PLAN)) == \
        encoding.encode(with_results)


def test_a_withheld_tool_results_policy_makes_reads_unrecorded(location, person):
    repo = cas.init(location)
    repo.set_content_policy(["tool_results"])
    number = promote_all(repo, [organiser_run("with", True)])
    (case_id,) = repo.items("evals", number).items
    result = cas.replay_item(repo, "evals", number, case_id, PLAN)
    assert [d.disposition for d in result.record.steps_detail] == [
        C, C, U, U, U, S, S, C, S, C, S, C]
    assert result.run.withheld == ["tool_results"]


def test_the_current_content_policy_controls_what_a_replay_includes(location, person):
    """A policy set after the case was frozen still applies: the replay leaves the class out
    and names it; the frozen case is unchanged."""
    repo = cas.init(location)
    number = promote_all(repo, [organiser_run("with", True)])
    (case_id,) = repo.items("evals", number).items
    assert dispositions(cas.replay_item(repo, "evals", number, case_id, PLAN))[2:5] == [R, R, R]
    repo.set_content_policy(["tool_results", "input"])
    result = cas.replay_item(repo, "evals", number, case_id, PLAN)
    assert dispositions(result)[2:5] == [U, U, U]
    assert (result.run.withheld, result.run.input) == (["input", "tool_results"], None)
    assert not any("result" in s or "error" in s for s in result.run.steps)
    frozen = repo.case("evals", number, case_id)
    assert frozen.withheld == [] and frozen.input is not None


def committed(path, frozen: dict):
    """A local repository whose raw@1 holds `frozen`, committed directly; (repo, case id)."""
    repo = cas.init(str(path))
    repo.create_dataset("raw", admission="direct")
    repo.commit("raw", base=None, add=[frozen])
    return repo, cas.encode_case(frozen).case_id


def test_a_committed_case_with_an_unnamed_call(tmp_path):
    frozen = case_of(call(..., {"x": 1}, result="leaked?"), call("ls", result=[]))
    repo, case_id = committed(tmp_path, frozen)
    result = cas.replay_item(repo, "raw", 1, case_id, {"default_effect": "none"})
    assert dispositions(result) == [S, R]
    assert result.run.steps[0] == {"type": "tool_call", "arguments": {"x": 1}, "cas_stub": E}


def test_replay_item_refusals(tmp_path):
    repo, case_id = committed(tmp_path, case_of(call("ls")))
    with pytest.raises(cas.InvalidArgument, match="UNKNOWN|not an effect"):
        cas.replay_item(repo, "no-such-dataset", 1, case_id, {"default_effect": "open"})
    with pytest.raises(cas.NotFound):
        cas.replay_item(repo, "raw", 2, case_id)
    with pytest.raises(cas.NotFound) as info:
        cas.replay_item(repo, "raw", 1, "b3:" + "0" * 64)
    assert "is not in raw@1" in info.value.message
    with pytest.raises(cas.InvalidArgument):
        cas.replay_item(repo, "raw", 1, "not-a-digest")


def test_a_retired_version_is_refused(tmp_path, person):
    repo, case_id = committed(tmp_path, case_of(call("ls")))
    assert cas.replay_item(repo, "raw", 1, case_id).record.stubbed == 1
    repo.retire("raw", 1, cause="OPERATOR_REQUEST", note="leaked into training data")
    with pytest.raises(cas.FailedPrecondition) as info:
        cas.replay_item(repo, "raw", 1, case_id)
    assert info.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"
    r = CliRunner().invoke(cli, ["--repo", str(tmp_path), "--json", "replay", "raw", "1",
                                 case_id])
    assert (r.exit_code, r.stdout) == (5, "")
    assert json.loads(r.stderr)["error"]["reason"] == "EVALUATION_DATASET_VERSION_RETIRED"


def test_same_bytes_in_two_separate_processes(organised, tmp_path):
    location, repo, number, ids = organised  # the S3 settings reach the children by env
    plan = write(tmp_path / "plan.json", PLAN)
    code = "import sys; from cas_cli.main import main; sys.argv[0] = 'cas'; main()"
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", code, "--repo", location, "replay",
                               "evals", str(number), ids["with"], "--plan", plan, "--json"],
                              capture_output=True, env=env, check=True)
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1] and outputs[0]
    in_process = CliRunner().invoke(cli, ["--repo", location, "replay", "evals", str(number),
                                          ids["with"], "--plan", plan, "--json"])
    assert in_process.stdout.encode() == outputs[0]
    # and the library's canonical bytes, from a fresh process
    lib = ("import sys, cas; from cas.format import encoding; repo = cas.open(sys.argv[1]); "
           "r = cas.replay_item(repo, 'evals', int(sys.argv[2]), sys.argv[3], "
           "open(sys.argv[4], 'rb').read()); sys.stdout.buffer.write(encoding.encode(r))")
    procs = [subprocess.run([sys.executable, "-c", lib, location, str(number), ids["with"], plan],
                            capture_output=True, env={**os.environ, "PYTHONHASHSEED": s},
                            check=True).stdout for s in ("3", "4")]
    assert procs[0] == procs[1] == encoding.encode(
        cas.replay_item(repo, "evals", number, ids["with"], PLAN))


def test_diff_item_replays_or_diffs_a_given_run_and_refuses_a_plan_with_it(organised):
    """The library's diff of a version's case: the case replayed under a plan, or a run given
    as it is (its JSON); a plan with a given run would do nothing and is refused."""
    _, repo, number, ids = organised
    case = repo.case("evals", number, ids["with"])
    stub_all = {"default_effect": "external"}
    assert cas.evals.replay.diff_item(repo, "evals", number, ids["with"], stub_all) == \
        cas.diff_runs(case, cas.replay_case(case, stub_all))
    same = json.dumps(msgspec.to_builtins(case)).encode()
    assert cas.evals.replay.diff_item(repo, "evals", number, ids["with"], against=same).identical
    with pytest.raises(cas.InvalidArgument) as info:
        cas.evals.replay.diff_item(repo, "evals", number, ids["with"], stub_all, against=same)
    assert info.value.reason == "PLAN_UNUSED"
