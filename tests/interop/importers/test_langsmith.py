"""The `langsmith` importer: LangSmith run trees, run lists and post/patch batches to runs."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cas.errors import InvalidArgument
from cas.interop.importers import convert, langsmith
from cas.interop.importers.common import Options
from support.lifecycle import import_checked

OPTS = Options(tenant="t")
TRACE = "00000000-0000-0000-0000-000000000001"


def _node(run_id, run_type, order, **fields):
    return {"id": run_id, "trace_id": TRACE, "run_type": run_type, "name": fields.pop(
        "name", run_type), "dotted_order": order, "inputs": fields.pop("inputs", {}),
        "outputs": fields.pop("outputs", None), "error": fields.pop("error", None), **fields}


def _agent_tree():
    """chain -> llm (asks for two tools) -> tool (answers c1) -> llm (sees both replies)."""
    ask = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}},
        {"id": "c2", "type": "function", "function": {"name": "mul", "arguments": "{bad"}}]}
    user = {"role": "user", "content": "sum?"}
    root = "20240101T000000000000Z" + TRACE
    return _node(TRACE, "chain", root, name="agent", inputs={"q": "sum?"},
                 outputs={"answer": "2"}, start_time="2024-01-01T00:00:00Z", tags=["x"],
                 extra={"metadata": {"user_id": "u-9", "org": "acme"}}, child_runs=[
        _node("L1", "llm", root + ".20240101T000001000000ZL1",
              inputs={"messages": [user]}, outputs={"choices": [{"message": ask}],
                                                    "usage_metadata": {"total_tokens": 5}}),
        _node("T1", "tool", root + ".20240101T000002000000ZT1", name="add",
              inputs={"a": 1}, outputs={"output": {"tool_call_id": "c1", "content": "2"}}),
        _node("T0", "tool", root + ".20240101T000002500000ZT0", name="lookup",
              inputs={"k": "v"}, error="KeyError: v"),
        _node("L2", "llm", root + ".20240101T000003000000ZL2", inputs={"messages": [
            user, ask, {"role": "tool", "tool_call_id": "c1", "content": "2"},
            {"role": "tool", "tool_call_id": "c2", "content": "6"}]},
            outputs={"generations": [[{"text": "2", "message": {
                "lc": 1, "type": "constructor", "id": ["langchain", "AIMessage"],
                "kwargs": {"content": "It is 2."}}}]], "usage_metadata": {"total_tokens": 7}}),
    ])


# -- the real samples --------------------------------------------------------------------------
@pytest.mark.parametrize("name, run_id, started_at", [
    ("langsmith-sdk__langsmith_js_wrap_openai_default.json",
     "langsmith:dc34609e-3eeb-459d-bc2a-6fedb01d2e6e", "2024-10-13T07:05:37.170Z"),
    ("langsmith-sdk__langsmith_py_wrap_openai_.json",
     "langsmith:d0d84d31-923d-4cb5-94a8-40a0a0087578", "2024-10-11T20:58:23.298773+00:00"),
    ("langsmith-sdk__langsmith_py_wrap_openai_stream.json",
     "langsmith:fe8ffecb-72ce-4cd2-bdb7-01f34654c391", "2024-10-11T20:58:20.695375+00:00"),
])
def test_sdk_payload_batchesimport_checked(traces, name, run_id, started_at):
    data = (traces / "langsmith" / name).read_bytes()
    runs = convert(data, "langsmith", source=name, tenant="t")
    assert [r["run_id"] for r in runs] == [run_id]
    run = runs[0]
    assert [(s["role"], s["content"]) for s in run["steps"]] == [
        ("user", "howdy"), ("assistant", "Howdy! How can I assist you today?")]
    assert run["started_at"] == started_at
    assert run["outcome"] == {"status": "success"}
    assert run["output"]["choices"][0]["message"]["content"].startswith("Howdy!")
    meta = run["metadata"]
    assert meta["model"] == "gpt-4o-mini" and meta["usage"]["total_tokens"] == 18
    assert meta["langsmith.project"] == "default"
    assert meta["langsmith.metadata"]["ls_provider"] == "openai"
    summary, = meta["langsmith.runs"]
    assert summary["end_time"] and summary["run_type"] == "llm"  # the patch merged in
    _, result = import_checked(runs)
    assert result.new == [run_id]


def test_stream_events_are_kept(traces):
    data = (traces / "langsmith/langsmith-sdk__langsmith_py_wrap_openai_stream.json").read_bytes()
    run, = convert(data, "langsmith", source="s", tenant="t")
    events = run["metadata"]["langsmith.runs"][0]["events"]
    assert events and all(e["name"] == "new_token" for e in events)


# -- the mapping -------------------------------------------------------------------------------
def test_run_tree_steps_in_order_with_tools_joined():
    run, = langsmith.convert([_agent_tree()], OPTS, "tree")
    assert run["run_id"] == f"langsmith:{TRACE}"
    kinds = [(s["type"], s.get("role") or s.get("tool_name")) for s in run["steps"]]
    assert kinds == [("message", "user"), ("message", "assistant"), ("tool_call", "add"),
                     ("tool_call", "mul"), ("tool_call", "lookup"), ("message", "assistant")]
    add, mul, lookup = (s for s in run["steps"] if s["type"] == "tool_call")
    assert add["call_id"] == "c1" and add["arguments"] == {"a": 1}
    assert add["result"] == {"output": {"tool_call_id": "c1", "content": "2"}}
    assert add["langsmith"]["run_id"] == "T1"
    assert mul["arguments_raw"] == "{bad" and mul["result"] == "6"  # from the next llm input
    assert lookup["error"] == "KeyError: v" and "result" not in lookup
    assert run["steps"][-1]["content"] == "It is 2."
    assert run["input"] == {"q": "sum?"} and run["output"] == {"answer": "2"}
    assert run["metadata"]["usage"] == {"total_tokens": 12}
    assert run["metadata"]["tags"] == ["x"]
    assert [r["id"] for r in run["metadata"]["langsmith.runs"]] == [TRACE, "L1", "T1", "T0",
                                                                    "L2"]
    import_checked([run])


def test_flat_run_list_in_any_order_is_one_trace():
    tree = _agent_tree()
    flat = [{k: v for k, v in r.items() if k != "child_runs"} | {"parent_run_id": TRACE}
            for r in tree["child_runs"]] + [{k: v for k, v in tree.items() if k != "child_runs"}]
    flat.reverse()
    from_list, = langsmith.convert([flat], OPTS, "list")
    from_tree, = langsmith.convert([tree], OPTS, "tree")
    assert from_list["steps"] == from_tree["steps"]
    lines = b"\n".join(json.dumps(r).encode() for r in flat)
    assert convert(lines, "langsmith", source="l", tenant="t")[0]["steps"] == from_tree["steps"]


def test_a_call_no_tool_answered_stays_unrecorded_and_errors_reach_the_outcome():
    tree = _agent_tree()
    tree["child_runs"] = tree["child_runs"][:1]
    tree["error"] = "Timeout"
    run, = langsmith.convert([tree], OPTS, "t")
    assert all("result" not in s for s in run["steps"] if s["type"] == "tool_call")
    assert run["outcome"] == {"status": "error", "error": "Timeout"}


def test_tenant_and_person_from_fields():
    run, = langsmith.convert([_agent_tree()], Options(tenant_from="extra.metadata.org",
                                                      person_from="user_id"), "t")
    assert (run["tenant"], run["person"]) == ("acme", "u-9")


def test_batch_patch_without_id_merges_by_dotted_order():
    order = "20240101T000000000000Z" + TRACE
    post = _node(TRACE, "llm", order, inputs={"messages": [{"role": "user", "content": "hi"}]},
                 start_time=1704067200000)
    patch = {"dotted_order": order, "trace_id": TRACE, "end_time": 1704067201000,
             "outputs": {"choices": [{"message": {"role": "assistant", "content": "yo"}}]}}
    run, = langsmith.convert([{"post": [post], "patch": [patch]}], OPTS, "b")
    assert [s["content"] for s in run["steps"]] == ["hi", "yo"]
    assert run["started_at"] == "2024-01-01T00:00:00.000Z"


@pytest.mark.parametrize("value", [
    {"role": "user", "content": "hi"},                                   # an OpenAI message
    {"model": "gpt", "messages": [{"role": "user", "content": "x"}]},    # a chat request
    {"type": "message", "role": "assistant", "content": []},             # an Anthropic reply
    {"resourceSpans": []},                                               # OTLP
    {"name": "s", "context": {"trace_id": "1"}, "attributes": {}},       # an SDK span
    {"run_type": "llm"},                                                 # no inputs or ids
    {"post": []},
])
def test_detect_is_strict(value):
    assert not langsmith.detect(value)


def test_refusals():
    with pytest.raises(InvalidArgument, match="not a LangSmith run") as info:
        langsmith.convert([{"role": "user"}], OPTS, "x")
    assert info.value.reason == "NOT_THIS_FORMAT"
    with pytest.raises(InvalidArgument, match="without `id` or `dotted_order`"):
        langsmith.convert([{"run_type": "llm", "inputs": {}}], OPTS, "x")


# -- properties --------------------------------------------------------------------------------
text = st.text(max_size=12)
names = st.sampled_from(["add", "mul", "search"])


@st.composite
def traces_(draw):
    trace = draw(st.uuids()).hex
    root = "20240101T000000000000Z" + trace
    children, history = [], [{"role": "user", "content": draw(text)}]
    for i in range(draw(st.integers(0, 5))):
        order = f"{root}.20240101T00000{i}000000Z{trace}{i}"
        if draw(st.booleans()):
            calls = [{"id": f"c{draw(st.integers(0, 2))}", "type": "function",
                      "function": {"name": draw(names), "arguments": draw(st.sampled_from(
                          ['{"a": 1}', "", "[1]", "no"]))}}
                     for _ in range(draw(st.integers(0, 2)))]
            reply = {"role": "assistant", "content": draw(text), "tool_calls": calls or None}
            children.append(_node(f"{trace}{i}", "llm", order, trace_id=trace,
                                  inputs={"messages": list(history)},
                                  outputs={"choices": [{"message": reply}]}))
            history.append(reply)
        else:
            call_id = f"c{draw(st.integers(0, 2))}"
            children.append(_node(f"{trace}{i}", "tool", order, name=draw(names), trace_id=trace,
                                  inputs={"x": draw(text)},
                                  outputs=draw(st.one_of(st.none(), st.just(
                                      {"output": {"tool_call_id": call_id, "content": "r"}}))),
                                  error=draw(st.one_of(st.none(), text))))
            history.append({"role": "tool", "tool_call_id": call_id, "content": "r"})
    return _node(trace, "chain", root, trace_id=trace, child_runs=children,
                 start_time="2024-01-01T00:00:00Z", end_time=draw(st.one_of(st.none(), text)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(traces_(), min_size=1, max_size=3, unique_by=lambda t: t["id"]))
def test_every_generated_trace_converts_deterministically_and_imports_once(trees):
    data = json.dumps(trees).encode()
    runs = convert(data, "langsmith", source="gen.json", tenant="t")
    assert runs == convert(data, "langsmith", source="gen.json", tenant="t")
    assert len(runs) == len(trees)
    # Every tool run is one tool_call step: its own, or the llm call it answered.
    tools = sorted(r["id"] for t in trees for r in t["child_runs"] if r["run_type"] == "tool")
    assert sorted(s["langsmith"]["run_id"] for r in runs for s in r["steps"]
                  if "run_id" in s.get("langsmith", {})) == tools
    repo, first = import_checked(runs)
    assert len(first.new) == len(runs)
    again = repo.import_runs(convert(data, "langsmith", source="gen.json", tenant="t"))
    assert again.new == [] and again.unchanged == len(runs)
