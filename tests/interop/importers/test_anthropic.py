"""The anthropic importer (cas/importers/anthropic.py): Messages API documents and recorded
traffic as runs, on the real samples in ../shared/traces/anthropic-messages/ and on generated
documents."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
import cas.interop.importers
from cas.interop.importers import anthropic
from cas.interop.importers.common import Options
from cas.repo.runs import parse_run
from cas.storage.backends.memory import MemoryBackend

FAST = settings(max_examples=60, deadline=None)
SAMPLES = "anthropic-messages"


def convert(data, container=None, **options):
    options.setdefault("tenant", "t")
    return cas.interop.importers.convert(data, "anthropic", source="doc", container=container,
                                 **options)


def doc(value, **options) -> list[dict]:
    return convert(json.dumps(value).encode(), **options)


def imported(runs):
    """Every run is valid, and imports into a fresh repository (twice: unchanged)."""
    for i, run in enumerate(runs):
        parse_run(run, f"$[{i}]")
    repo = cas.Repository.create(MemoryBackend())
    first = repo.import_runs(runs)
    assert sorted(first.new) == sorted({r["run_id"] for r in runs})
    assert first.warnings == []  # no tool call is left hidden inside a message step
    again = repo.import_runs(runs)
    assert again.new == [] and again.unchanged == len(runs)
    return runs


def calls(run):
    return [s for s in run["steps"] if s["type"] == "tool_call"]


# -- the real samples --------------------------------------------------------------------------
SDK = "anthropic-sdk-python__TestSyncRunTools__"
# file: (run id, tool names in order, results, errors, outcome's stop_reason or HTTP status)
EXPECTED = {
    SDK + "092be1de-d3f8-4c22-a4ea-a7ad54689836.json":
        ("msg_0147NV7w8PyZ6bSUsNY79cYj", ["code_execution", "get_weather", "get_weather"], 1, 0,
         "tool_use"),
    SDK + "10e53c1d-51be-4c64-b5bf-99adb3fa4719.json":
        ("msg_01GJyhkguJrrqMbZNzEybYFL", ["get_weather"], 0, 1, "end_turn"),
    SDK + "32da0815-2270-4d29-87be-3b5b63ab42e2.json":
        ("msg_011Y4sbfjCq85yJrUA13Dxb3", ["web_search"], 1, 0, "end_turn"),
    SDK + "555fb399-a54c-455b-9ac5-2c9673f18e12.json":
        ("msg_016HxyUMAncysqX7dn1kWNRx", ["get_weather"], 1, 0, "end_turn"),
    SDK + "771c64ff-a0af-4cd9-8080-a5a539da7cb9.json":
        ("msg_0158JyopQTFaomteeJoDpS5q", ["get_weather"], 1, 0, "end_turn"),
    SDK + "956fa2fe-8752-4f7c-8f9a-33735e62b898.json":
        ("msg_019bVBTjMoXMbUV6LJyiDAmM", ["submit_analysis"], 0, 0, "end_turn"),
    SDK + "a8ac789b-f856-48cd-9ff3-d5f36799e432.json":
        ("msg_01LzoWDaDa7jiMvVbBiguxJy", ["get_weather"], 1, 0, "end_turn"),
    SDK + "b38bbf6c-9a76-40ca-b09d-7a3911776e0f.json":
        ("msg_01BZsMQjer9AFLgmdRKJ8NcA", ["get_weather"], 1, 0, "end_turn"),
    SDK + "e075a6c2-de4d-4125-9709-f0e178058190.json":
        ("msg_01BAceCxj9VxXR9GhBedwTm2", ["get_weather", "get_weather"], 1, 0, "tool_use"),
    SDK + "f59a9391-643b-422c-96dc-1f28bc7ea4d7.json":
        ("req_011CYHyk9NPsBYeGbC9LuDNK", ["get_weather"], 1, 0, 400),
    "anthropic-sdk-python__module__64fe7974-681a-4023-9848-b32ba39c8664.json":
        ("msg_01C1RRE9d8CxcudwbihWU9di", ["get_weather"], 1, 0, "end_turn"),
    "openinference-js__anthropic__reasoning-tool-use-non-streaming.json":
        ("msg_01NuGqPL1JZVKeaShZ54fAQj", ["get_weather"], 0, 0, "tool_use"),
    "openinference__anthropic__test_anthropic_instrumentation_tool_use_in_input_with_blocks.yaml":
        ("msg_013r8xmbHsaDMebw7MeyGvhH", ["get_weather"], 1, 0, "end_turn"),
    "otel-contrib__botocore__test_invoke_model_with_content_tool_call_anthropic.claude.yaml":
        ("msg_bdrk_0177fGp1jEHWhhQXD31c6BEm", ["get_current_weather"] * 2, 2, 0, "end_turn"),
}


def sample(traces, name):
    path = traces / SAMPLES / name
    return convert(path.read_bytes(), container="vcr" if path.suffix == ".yaml" else None)


def test_every_sample_file_is_expected(traces):
    assert sorted(p.name for p in (traces / SAMPLES).iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_sample_imports_as_one_run(traces, name):
    run_id, tools, results, errors, outcome = EXPECTED[name]
    (run,) = imported(sample(traces, name))
    assert run["run_id"] == f"anthropic:{run_id}"
    assert run["tenant"] == "t"
    assert [c["tool_name"] for c in calls(run)] == tools
    assert sum("result" in c for c in calls(run)) == results
    assert sum("error" in c for c in calls(run)) == errors
    ended = run["outcome"].get("stop_reason", run["outcome"].get("status"))
    assert ended == outcome
    assert run["metadata"]["model"].startswith("claude")
    # Tool calls come right after the assistant message that made them.
    for i, step in enumerate(run["steps"]):
        if step["type"] == "tool_call":
            before = run["steps"][i - 1]
            assert before["type"] == "tool_call" or before["role"] == "assistant"


def test_a_sample_joins_the_result_to_its_call(traces):
    (run,) = sample(traces, SDK + "a8ac789b-f856-48cd-9ff3-d5f36799e432.json")
    assert run["input"] == "What's the weather in SF in Celsius?"
    (call,) = calls(run)
    assert call["call_id"] == "toolu_013DU6hV4C1M8dJ32ybQFAFi"
    assert call["arguments"] == {"location": "SF", "units": "c"}
    assert json.loads(call["result"])["temperature"] == "20\u00b0C"
    assert run["output"].startswith("The weather in SF is currently **20°C**")
    roles = [s.get("role", s["type"]) for s in run["steps"]]
    # the user message that only carried the result is that result, not a step of its own
    assert roles == ["user", "assistant", "tool_call", "assistant"]


def test_the_is_error_reply_is_the_calls_error(traces):
    (run,) = sample(traces, SDK + "10e53c1d-51be-4c64-b5bf-99adb3fa4719.json")
    (call,) = calls(run)
    assert "result" not in call
    assert call["error"] == "RuntimeError('Unexpected error, try again')"


def test_a_streamed_response_is_reassembled(traces):
    (run,) = sample(traces, SDK + "555fb399-a54c-455b-9ac5-2c9673f18e12.json")
    (call,) = calls(run)
    # input_json_delta partial_json pieces, concatenated and parsed
    assert call["arguments"] == {"location": "San Francisco, CA", "units": "f"}
    assert run["output"].startswith("The weather in San Francisco, CA is currently:\n- **Temp")
    exchanges = run["metadata"]["exchanges"]
    assert [e.get("streamed") for e in exchanges] == [True, True]
    assert exchanges[0]["response"]["stop_reason"] == "tool_use"
    assert run["metadata"]["usage"]["output_tokens"] == 74 + 38


def test_the_http_400_becomes_the_outcome(traces):
    (run,) = sample(traces, SDK + "f59a9391-643b-422c-96dc-1f28bc7ea4d7.json")
    assert run["outcome"]["status"] == 400
    assert run["outcome"]["error"]["type"] == "invalid_request_error"
    assert run["outcome"]["request_id"] == "req_011CYHyk9NPsBYeGbC9LuDNK"
    assert run["output"] is None  # the last assistant turn has no text
    # the client dropped the tool_use turn from its 2nd request, but the call was recorded
    # in the 1st response and the reply names it
    assert calls(run)[0]["result"].startswith("The weather in San Francisco")


def test_a_server_tool_keeps_its_result_and_blocks(traces):
    (run,) = sample(traces, SDK + "32da0815-2270-4d29-87be-3b5b63ab42e2.json")
    (call,) = calls(run)
    assert call["block"]["type"] == "server_tool_use"
    assert call["reply"]["type"] == "web_search_tool_result"
    assert call["result"][0]["type"] == "web_search_result"
    answer = run["steps"][-1] if run["steps"][-1]["type"] == "message" else run["steps"][1]
    assert any(b.get("citations") for b in answer.get("blocks", []))


def test_an_unanswered_call_has_no_result(traces):
    (run,) = sample(traces, SDK + "956fa2fe-8752-4f7c-8f9a-33735e62b898.json")
    (call,) = calls(run)
    assert "result" not in call and "error" not in call
    # the compaction request dropped that turn; it is kept, then the summary request
    assert [s.get("role", s["type"]) for s in run["steps"]] == \
        ["user", "assistant", "tool_call", "user", "assistant"]


def test_thinking_is_kept_on_the_assistant_message(traces):
    (run,) = sample(traces, "openinference-js__anthropic__reasoning-tool-use-non-streaming.json")
    assert run["input"] is None  # only the response was recorded
    message = run["steps"][0]
    assert message["content"] == "Sure! Let me check the weather in San Francisco for you!"
    assert message["blocks"][0]["type"] == "thinking"
    assert message["blocks"][0]["signature"]
    assert "result" not in calls(run)[0]


def test_bedrock_parallel_calls_join_their_results(traces):
    name = "otel-contrib__botocore__test_invoke_model_with_content_tool_call_anthropic.claude.yaml"
    (run,) = sample(traces, name)
    assert [c["result"] for c in calls(run)] == ["50 degrees and raining", "70 degrees and sunny"]
    first = run["metadata"]["exchanges"][0]
    assert first["request"]["anthropic_version"] == "bedrock-2023-05-31"
    assert "bedrock-runtime" in first["uri"]


# -- the mapping -------------------------------------------------------------------------------
def body(*messages, **fields):
    return {"model": "claude-x", "max_tokens": 10, "messages": list(messages), **fields}


def user(content):
    return {"role": "user", "content": content}


def assistant(content):
    return {"role": "assistant", "content": content}


def use(call_id, name="mv", arguments=None):
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments or {"a": 1}}


def reply(call_id, content="ok", **fields):
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **fields}


def test_a_request_body_with_system_and_tools():
    tools = [{"name": "mv", "input_schema": {"type": "object"}}]
    (run,) = imported(doc(body(user("hi"), assistant([{"type": "text", "text": "yo"}]),
                               system=[{"type": "text", "text": "be brief"}], tools=tools,
                               metadata={"user_id": "u-1"}), person_from="metadata.user_id"))
    assert run["steps"][0] == {"type": "message", "role": "system", "content": "be brief"}
    assert run["input"] == "hi" and run["output"] == "yo"
    assert run["outcome"] is None  # no response recorded
    assert run["person"] == "u-1"
    assert run["metadata"]["tools"] == tools
    assert run["metadata"]["exchanges"] == [{"request": {"model": "claude-x", "max_tokens": 10,
                                                         "metadata": {"user_id": "u-1"}}}]
    assert run["run_id"].startswith("anthropic:")


def test_a_reused_id_joins_the_nearest_unanswered_call():
    (run,) = imported(doc(body(user("go"), assistant([use("t1")]), user([reply("t1", "one")]),
                               assistant([use("t1")]), user([reply("t1", "two")]))))
    assert [c["result"] for c in calls(run)] == ["one", "two"]


def test_an_orphan_reply_stays_in_its_message():
    (run,) = imported(doc(body(user([reply("nobody"), {"type": "text", "text": "hm"}]))))
    (message,) = run["steps"]
    assert message["content"] == "hm"
    assert message["blocks"] == [reply("nobody")]


def test_tool_input_that_is_not_an_object_is_kept_and_flagged():
    steps = calls(doc(body(user("go"), assistant([{**use("a"), "input": "not json"},
                                                  {**use("b"), "input": None},
                                                  {**use("c"), "input": 7}])))[0])
    assert steps[0]["arguments_raw"] == "not json" and "arguments" not in steps[0]
    assert steps[1]["arguments_raw"] is None and steps[1]["arguments_error"]
    assert steps[2]["arguments_raw"] == 7 and steps[2]["arguments_error"]


def test_an_exchange_list_is_grouped_into_conversations():
    def exchange(request, text, msg_id):
        return {"request": {"url": "https://api.anthropic.com/v1/messages", "body": request},
                "response": {"status_code": 200, "body": {
                    "id": msg_id, "type": "message", "role": "assistant", "model": "claude-x",
                    "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}}}
    first = body(user("a"))
    second = body(user("a"), assistant([{"type": "text", "text": "b"}]), user("c"))
    other = body(user("z"))
    runs = imported(doc([exchange(first, "b", "m1"), exchange(second, "d", "m2"),
                         exchange(other, "y", "m3")]))
    assert [r["run_id"] for r in runs] == ["anthropic:m2", "anthropic:m3"]
    assert [s["content"] for s in runs[0]["steps"]] == ["a", "b", "c", "d"]  # b once


def test_a_cassette_stream_with_an_error_event():
    events = [{"type": "message_start", "message": {"id": "msg_s", "type": "message",
                                                     "role": "assistant", "content": [],
                                                     "model": "claude-x", "stop_reason": None}},
              {"type": "content_block_start", "index": 0,
               "content_block": {"type": "tool_use", "id": "t", "name": "mv", "input": {}}},
              {"type": "content_block_delta", "index": 0,
               "delta": {"type": "input_json_delta", "partial_json": '{"a": '}},
              {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}]
    sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    cassette = {"interactions": [{
        "request": {"method": "POST", "uri": "https://api.anthropic.com/v1/messages",
                    "body": json.dumps(body(user("go"), stream=True))},
        "response": {"status": {"code": 200}, "body": {"string": sse}}}]}
    (run,) = imported(convert(json.dumps(cassette).encode(), container="vcr"))
    assert run["outcome"] == {"status": 200, "error": {"type": "overloaded_error",
                                                       "message": "busy"}}
    (call,) = calls(run)  # the cut-off input is kept verbatim and flagged
    assert call["arguments_raw"] == '{"a": ' and call["arguments_error"].startswith("not JSON")


def test_a_failed_call_without_a_message_is_the_outcome():
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    (run,) = imported(doc({"request": body(user("go")), "response": {
        "status_code": 529, "body": f"event: error\ndata: {json.dumps(overloaded)}\n\n"}}))
    assert run["outcome"] == {"status": 529, **{k: v for k, v in overloaded.items()
                                                if k != "type"}}
    (run,) = imported(doc({"request": body(user("go")),
                           "response": {"status_code": 502, "body": "Bad Gateway"}}))
    assert run["outcome"] == {"status": 502, "body": "Bad Gateway"}
    assert run["steps"] == [{"type": "message", "role": "user", "content": "go"}]


def test_refusals_say_why():
    openai = {"messages": [{"role": "user", "content": "x"},
                           {"role": "assistant", "content": None, "tool_calls": []}]}
    with pytest.raises(cas.InvalidArgument) as info:
        doc(openai)
    assert info.value.reason == "NOT_THIS_FORMAT"
    assert "messages[1]" in info.value.message and "openai-chat" in info.value.message
    with pytest.raises(cas.InvalidArgument) as info:
        doc({"input": "x", "model": "gpt"})
    assert "expected an Anthropic Messages document" in info.value.message
    other = {"interactions": [{"request": {"uri": "https://api.openai.com/v1/chat/completions",
                                           "body": json.dumps(openai)}, "response": {}}]}
    with pytest.raises(cas.InvalidArgument) as info:
        convert(json.dumps(other).encode(), container="vcr")
    assert "no recorded call to the Anthropic Messages API" in info.value.message
    with pytest.raises(cas.InvalidArgument) as info:
        doc(body(user("x")), tenant=None)
    assert info.value.reason == "TENANT_REQUIRED"


def test_a_plain_messages_array_is_claimed():
    assert anthropic.detect([user("hi"), assistant("yo")])
    assert not anthropic.detect([{"role": "system", "content": "s"}, user("hi")])
    assert not anthropic.detect({"type": "message", "role": "assistant",
                                 "content": [{"type": "output_text", "text": "x"}]})


# -- generated documents -----------------------------------------------------------------------
texts = st.text(max_size=6)
ids = st.sampled_from(["toolu_1", "toolu_2", "toolu_3"])
text_block = st.builds(lambda t: {"type": "text", "text": t}, texts)
use_block = st.builds(lambda i, n, a: {"type": "tool_use", "id": i, "name": n, "input": a},
                      ids, st.sampled_from(["mv", "get_weather"]),
                      st.dictionaries(st.text(max_size=3), st.integers() | texts, max_size=2))
thinking_block = st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "s"}, texts)
reply_block = st.builds(
    lambda i, c, e: {"type": "tool_result", "tool_use_id": i, "content": c,
                     **({"is_error": True} if e else {})},
    ids, texts | st.lists(text_block, max_size=2), st.booleans())
user_message = st.builds(user, texts | st.lists(text_block | reply_block, min_size=1,
                                                max_size=3))
assistant_content = st.lists(text_block | use_block | thinking_block, min_size=1, max_size=3)
assistant_message = st.builds(assistant, texts | assistant_content)


@st.composite
def documents(draw):
    turns = draw(st.lists(st.tuples(user_message, assistant_message), min_size=1, max_size=3))
    messages = [m for pair in turns for m in pair][:draw(st.sampled_from([None, -1]))]
    system = draw(st.none() | texts | st.lists(text_block, min_size=1, max_size=2))
    request = body(*messages, **({} if system is None else {"system": system}))
    if draw(st.booleans()):
        return request
    response = {"id": "msg_" + draw(st.text("abc123", min_size=1, max_size=6)),
                "type": "message", "role": "assistant", "model": "claude-x",
                "content": draw(assistant_content),
                "stop_reason": draw(st.sampled_from(["end_turn", "tool_use"])),
                "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 4}}
    return {"request": request, "response": response}


def blocks_of(document, kind):
    request = document.get("request", document)
    contents = [m["content"] for m in request["messages"]]
    contents.append(document.get("response", {}).get("content", []))
    return [b for c in contents if isinstance(c, list) for b in c if b["type"] == kind]


@FAST
@given(documents())
def test_every_generated_document_converts_and_imports(document):
    data = json.dumps(document).encode()
    assert anthropic.detect(document)
    runs = imported(convert(data))
    assert convert(data) == runs  # deterministic
    (run,) = runs
    assert len(calls(run)) == len(blocks_of(document, "tool_use"))
    answered = sum("result" in c or "error" in c for c in calls(run))
    assert answered <= len(blocks_of(document, "tool_result"))


@FAST
@given(st.recursive(st.none() | st.booleans() | st.integers() | texts,
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(["messages", "role", "content", "type",
                                                       "request", "response", "body"]),
                                      inner, max_size=3), max_leaves=10))
def test_any_json_is_read_or_refused_with_invalid_argument(value):
    assert anthropic.detect(value) in (True, False)
    try:
        runs = anthropic.convert([value], Options(tenant="t"), "doc")
    except cas.InvalidArgument:
        return
    for run in runs:
        parse_run(run, "$")


event_types = st.sampled_from(["message_start", "content_block_start", "content_block_delta",
                               "content_block_stop", "message_delta", "message_stop", "ping",
                               "error"])
event_values = st.recursive(st.none() | st.integers(-1, 2) | texts | st.sampled_from(
    ["text_delta", "input_json_delta", "thinking_delta", "signature_delta", "tool_use"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(
        ["type", "index", "delta", "text", "partial_json", "content_block", "message",
         "usage", "id", "name", "input", "content"]), inner, max_size=3), max_leaves=8)
events = st.lists(st.builds(lambda t, rest: {**rest, "type": t}, event_types,
                            st.dictionaries(st.sampled_from(["index", "delta", "message",
                                                             "content_block", "usage"]),
                                            event_values, max_size=3)), max_size=6)


@FAST
@given(events)
def test_any_stream_is_read_or_refused_with_invalid_argument(payloads):
    start = {"type": "message_start", "message": {"id": "msg_x", "type": "message",
                                                  "role": "assistant", "content": []}}
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in [start, *payloads])
    document = {"request": body(user("go")), "response": {"status_code": 200, "body": sse}}
    try:
        runs = doc(document)
    except cas.InvalidArgument:
        return
    imported(runs)
