"""The otel-genai importer: the real sample traces, the conventions it reads, and properties."""

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas.errors import InvalidArgument
from cas.interop import importers
from cas.storage.backends.memory import MemoryBackend

NAME = "otel-genai"

# file -> (runs, tool calls, tool calls with a recorded result)
SAMPLES = {
    "any-agent__AGNO_trace.json": (1, 2, 2),
    "any-agent__GOOGLE_trace.json": (1, 3, 3),
    "any-agent__LANGCHAIN_trace.json": (1, 2, 2),
    "any-agent__LLAMA_INDEX_trace.json": (1, 3, 3),
    "any-agent__OPENAI_trace.json": (1, 2, 2),
    "any-agent__SMOLAGENTS_trace.json": (1, 3, 3),
    "any-agent__TINYAGENT_trace.json": (1, 3, 3),
    "openinference-js__otel_genai_client_span_tool_calls.json": (1, 1, 1),
    "openinference-js__otel_genai_deprecated_client_span_tool_calls.json": (1, 1, 1),
    "openinference-js__otel_genai_tool_execution_span.json": (1, 1, 1),
}


def convert(data: bytes, **kw):
    return importers.convert(data, NAME, source="input", tenant="t", **kw)


def imported(runs):
    return cas.Repository.create(MemoryBackend()).import_runs(runs)


def tools(run):
    return [s for s in run["steps"] if s["type"] == "tool_call"]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_sample_imports(traces, name):
    data = (traces / "otel-genai" / name).read_bytes()
    runs = importers.convert(data, NAME, source=name, tenant="t")
    n_runs, n_calls, n_results = SAMPLES[name]
    assert len(runs) == n_runs
    calls = [c for r in runs for c in tools(r)]
    assert len(calls) == n_calls
    assert sum("result" in c for c in calls) == n_results
    assert imported(runs).new == [r["run_id"] for r in runs]
    assert importers.detect(data, name) == NAME  # auto finds this format, and only it
    assert convert(data) == convert(data)


def test_any_agent_trace(traces):
    data = (traces / "otel-genai" / "any-agent__AGNO_trace.json").read_bytes()
    [run] = convert(data)
    assert run["run_id"] == f"{NAME}:{int(100927429609276267646756448943279827607):032x}" \
        or run["run_id"].startswith(f"{NAME}:")
    assert run["started_at"].endswith("Z") and run["started_at"].startswith("2025-09-16T")
    get_time, write = tools(run)
    # The model's call (no id) joined with the execute_tool span that has the id.
    assert get_time["tool_name"] == "get_current_time" and get_time["call_id"] == "LlAGPjfO0"
    assert get_time["arguments"] == {"timezone": "America/New_York"}
    assert get_time["result"]["timezone"] == "America/New_York"
    assert write["arguments"] == {"text": "2025"} and write["result"] == {}
    assert run["output"] == json.loads(data)["final_output"]
    assert run["input"].startswith("Find what year it is")
    assert run["outcome"] == {"status": "ok"}
    md = run["metadata"]
    assert md["model"] == "mistral/mistral-small-latest" and md["agent"] == "any_agent"
    assert md["usage"]["input_tokens"] == 395 + 483 + 518
    assert md["resource"]["service.name"] == "unknown_service"
    assert [s["name"] for s in md["spans"]][0] == "invoke_agent [any_agent]"
    assert "gen_ai.tool.args" not in md["spans"][2]["attributes"]  # made into the step


def test_recorded_null_result_and_executed_arguments(traces):
    [run] = convert((traces / "otel-genai" / "any-agent__LANGCHAIN_trace.json").read_bytes())
    assert tools(run)[1]["result"] is None  # "null" recorded with type json: a recorded null
    [run] = convert((traces / "otel-genai" / "any-agent__LLAMA_INDEX_trace.json").read_bytes())
    # The model asked with "{}", the tool ran with the real arguments: both kept.
    assert tools(run)[0]["arguments"] == {"timezone": "America/New_York"}
    assert {"step": 2, "field": "arguments", "requested": {"arguments": {}}} in \
        run["metadata"]["conflicts"]


@pytest.mark.parametrize("name", ["openinference-js__otel_genai_client_span_tool_calls.json",
                                  "openinference-js__otel_genai_deprecated_client_span_"
                                  "tool_calls.json"])
def test_current_and_deprecated_attributes_agree(traces, name):
    [run] = convert((traces / "otel-genai" / name).read_bytes())
    assert [(s["type"], s.get("role")) for s in run["steps"]] == [
        ("message", "user"), ("message", "assistant"), ("tool_call", None),
        ("message", "assistant")]
    [call] = tools(run)
    assert call == {"type": "tool_call", "tool_name": "get_weather", "call_id": "1234",
                    "arguments": {"location": "Paris"}, "result": "rainy, 57°F"}
    assert run["output"].startswith("The weather in Paris is currently rainy")
    assert "started_at" not in run and run["metadata"]["model"] == "gpt-4-0613"


def test_tool_execution_span(traces):
    [run] = convert((traces / "otel-genai" /
                     "openinference-js__otel_genai_tool_execution_span.json").read_bytes())
    [call] = tools(run)
    assert call["call_id"] == "1234" and call["arguments"] == {"city": "New York"}
    assert call["result"].startswith('{"status": "success"')


# -- synthetic spans ---------------------------------------------------------------------------
def otlp_doc(spans, resource=None):
    def kv(attrs):
        out = []
        for k, v in attrs.items():
            value = ({"boolValue": v} if isinstance(v, bool) else {"intValue": str(v)}
                     if isinstance(v, int) else {"stringValue": v})
            out.append({"key": k, "value": value})
        return out
    return {"resourceSpans": [{"resource": {"attributes": kv(resource or {})},
                               "scopeSpans": [{"scope": {"name": "t"}, "spans": [
                                   {**s, "attributes": kv(s["attributes"])} for s in spans]}]}]}


def chat(i, trace, inputs, outputs, **attrs):
    return {"traceId": trace, "spanId": f"{i:016x}", "parentSpanId": "", "name": "chat m",
            "startTimeUnixNano": str(1_700_000_000_000_000_000 + i * 1000),
            "status": {"code": 1}, "attributes": {
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                "gen_ai.input.messages": json.dumps(inputs),
                "gen_ai.output.messages": json.dumps(outputs), **attrs}}


def tool_span(i, trace, name, call_id, args, result=None, error=None):
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
             "gen_ai.tool.call.id": call_id, "gen_ai.tool.call.arguments": args}
    if result is not None:
        attrs["gen_ai.tool.call.result"] = result
    if error:
        attrs["error.type"] = error
    return {"traceId": trace, "spanId": f"{i:016x}", "name": f"execute_tool {name}",
            "startTimeUnixNano": str(1_700_000_000_000_000_000 + i * 1000),
            "status": {"code": 2 if error else 0}, "attributes": attrs}


def user(text):
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def call_msg(call_id, name, args):
    return {"role": "assistant", "parts": [{"type": "tool_call", "id": call_id, "name": name,
                                            "arguments": args}]}


def reply(call_id, result, key="response"):
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id,
                                       key: result}]}


T = "0af7651916cd43dd8448eb211c80319c"


def test_history_is_read_once_and_tool_spans_join():
    h1 = [user("hi")]
    o1 = [call_msg("c1", "ls", {"d": "/"})]
    h2 = h1 + o1 + [reply("c1", "a b", key="result")]
    o2 = [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]
    spans = [chat(1, T, h1, o1), tool_span(2, T, "ls", "c1", '{"d": "/"}', "a b"),
             chat(3, T, h2, o2)]
    [run] = convert(json.dumps(otlp_doc(spans, {"service.name": "svc"})).encode())
    assert run["run_id"] == f"{NAME}:{T}"
    assert run["steps"] == [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "tool_call", "tool_name": "ls", "call_id": "c1", "arguments": {"d": "/"},
         "result": "a b"},
        {"type": "message", "role": "assistant", "content": "done"}]
    assert run["started_at"] == "2023-11-14T22:13:20.000001Z"
    assert run["metadata"]["resource"] == {"service.name": "svc"}
    assert "conflicts" not in run["metadata"] and "orphan_tool_replies" not in run["metadata"]


def test_reused_call_ids_unrecorded_results_errors_and_bad_arguments():
    o1 = [{"role": "assistant", "parts": [
        {"type": "tool_call", "id": "x", "name": "a", "arguments": "{not json"},
        {"type": "tool_call", "id": "x", "name": "b", "arguments": {}}]}]
    spans = [chat(1, T, [user("go")], o1), tool_span(2, T, "b", "x", "{}", error="Timeout")]
    [run] = convert(json.dumps(otlp_doc(spans)).encode())
    a, b = tools(run)
    assert a["arguments_raw"] == "{not json" and "arguments_error" in a
    assert "result" not in a and "error" not in a  # never answered: unrecorded, not null
    assert b["error"] == {"status": "error", "type": "Timeout"} and "result" not in b
    # The first root span (the model call) succeeded; the failed tool is listed.
    assert run["outcome"]["status"] == "ok"
    assert run["outcome"]["errors"][0]["type"] == "Timeout"
    assert imported([run]).new == [run["run_id"]]


def test_older_conventions_events_and_flattened_attributes():
    events = [{"name": "gen_ai.system.message", "attributes": {"content": "be brief"}},
              {"name": "gen_ai.user.message", "attributes": {"content": "2+2?"}},
              {"name": "gen_ai.choice", "body": {"index": 0, "finish_reason": "stop",
                                                 "message": {"content": "4"}}}]
    span = {"name": "chat", "context": {"trace_id": "0x" + T, "span_id": "0x01"},
            "start_time": "2024-01-02T03:04:05.123456789Z", "status": {"status_code": "OK"},
            "attributes": {"gen_ai.system": "openai"}, "events": events}
    flat = {"name": "chat", "context": {"trace_id": T[::-1], "span_id": "02"},
            "start_time": 1_700_000_000.5, "attributes": {
                "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "x?",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.tool_calls.0.id": "k",
                "gen_ai.completion.0.tool_calls.0.name": "f",
                "gen_ai.completion.0.tool_calls.0.arguments": '{"q": 1}'}}
    first, second = convert(json.dumps([span, flat]).encode())
    assert first["started_at"] == "2023-11-14T22:13:20.5Z"
    assert [s["type"] for s in first["steps"]] == ["message", "tool_call"]
    assert tools(first)[0] == {"type": "tool_call", "tool_name": "f", "call_id": "k",
                               "arguments": {"q": 1}}
    assert second["started_at"] == "2024-01-02T03:04:05.123456789Z"
    assert [(s["role"], s["content"]) for s in second["steps"]] == [
        ("system", "be brief"), ("user", "2+2?"), ("assistant", "4")]
    assert second["steps"][2]["finish_reason"] == "stop"
    assert second["metadata"]["provider"] == "openai"


def test_refusals_and_identity():
    with pytest.raises(InvalidArgument, match="not OpenTelemetry spans"):
        convert(b'{"hello": "world"}')
    with pytest.raises(InvalidArgument, match="no span carries gen_ai"):
        convert(json.dumps([{"name": "GET /", "attributes": {"http.method": "GET"}}]).encode())
    spans = [chat(1, T, [user("hi")], [], **{"enduser.id": "u-1"})]
    with pytest.raises(InvalidArgument, match="no tenant"):
        importers.convert(json.dumps(otlp_doc(spans)).encode(), NAME)
    [run] = importers.convert(json.dumps(otlp_doc(spans)).encode(), NAME, tenant="t",
                              person_from="enduser.id")
    assert run["person"] == "u-1"


# -- properties --------------------------------------------------------------------------------
texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=8)


@st.composite
def span_sets(draw):
    spans, n = [], 0
    for t in range(draw(st.integers(1, 2))):
        trace = f"{t + 1:032x}"
        history = [user(draw(texts))]
        for _ in range(draw(st.integers(1, 3))):
            n += 1
            cid = draw(st.sampled_from(["c1", "c2", "c3"]))
            args = draw(st.sampled_from(['{"a": 1}', "not json", "", "[1]"]))
            out = [call_msg(cid, "t", args)] if draw(st.booleans()) else \
                [{"role": "assistant", "parts": [{"type": "text", "content": draw(texts)}]}]
            spans.append(chat(n, trace, history, out))
            history = history + out
            if out[0]["parts"][0]["type"] == "tool_call" and draw(st.booleans()):
                n += 1
                res = draw(st.none() | texts)
                spans.append(tool_span(n, trace, "t", cid, args, res,
                                       draw(st.none() | st.just("E"))))
                history = history + [reply(cid, res or "")]
    return spans


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(span_sets(), st.randoms(use_true_random=False), st.booleans())
def test_generated_spans_convert_deterministically_and_reimport(spans, rnd, typed):
    data = json.dumps(otlp_doc(spans) if typed else spans_flat(spans)).encode()
    runs = convert(data)
    assert len(runs) == len({s["traceId"] for s in spans})
    shuffled = list(spans)
    rnd.shuffle(shuffled)
    again = json.dumps(otlp_doc(shuffled) if typed else spans_flat(shuffled)).encode()
    assert convert(again) == runs
    repo = cas.Repository.create(MemoryBackend())
    assert len(repo.import_runs(runs).new) == len(runs)
    second = repo.import_runs(convert(data))
    assert second.new == [] and second.unchanged == len(runs)


def spans_flat(spans):
    """The same spans as a JSON array in the OTel SDK's span JSON shape."""
    out = []
    for s in spans:
        out.append({"name": s["name"], "context": {"trace_id": "0x" + s["traceId"],
                                                   "span_id": "0x" + s["spanId"]},
                    "parent_id": None, "start_time": int(s["startTimeUnixNano"]),
                    "status": {"status_code": {0: "UNSET", 1: "OK", 2: "ERROR"}[
                        s["status"]["code"]]}, "attributes": s["attributes"]})
    return out


def test_shuffled_file_is_the_same_runs(traces):
    doc = json.loads((traces / "otel-genai" / "any-agent__GOOGLE_trace.json").read_bytes())
    runs = convert(json.dumps(doc).encode())
    random.Random(4).shuffle(doc["spans"])
    assert convert(json.dumps(doc).encode()) == runs


# -- nested spans, re-sent history, and the JS SDK's span JSON (issue 33) ----------------------
def test_nested_spans_that_repeat_one_call_give_one_call():
    o1 = [call_msg("c1", "ls", {"d": "/", "all": True})]
    o2 = [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]
    # an outer LLM span and two inner ones each list the same call; the next call re-sends
    # the history with the arguments re-serialised (other key order, spacing) and the tool
    # reply's text spaced differently
    resent = [call_msg("c1", "ls", '{ "all": true, "d": "/" }')]
    h2 = [user("hi")] + resent + [reply("c1", "a b")]
    spans = [chat(1, T, [user("hi")], o1), chat(2, T, [user("hi")], o1),
             chat(3, T, [user("hi")], o1), tool_span(4, T, "ls", "c1", '{"d":"/","all":true}',
                                                     "a b"),
             chat(5, T, h2, o2), chat(6, T, h2, o2)]
    [run] = convert(json.dumps(otlp_doc(spans)).encode())
    assert run["steps"] == [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "tool_call", "tool_name": "ls", "call_id": "c1",
         "arguments": {"d": "/", "all": True}, "result": "a b"},
        {"type": "message", "role": "assistant", "content": "done"}]


def test_calls_without_ids_are_known_by_name_and_parsed_arguments():
    o1 = [{"role": "assistant", "parts": [{"type": "tool_call", "name": "ls",
                                           "arguments": '{"d": "/"}'}]}]
    h2 = [user("hi"), {"role": "assistant", "parts": [
        {"type": "tool_call", "name": "ls", "arguments": {"d": "/"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "response": "x"}]}]
    o2 = [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]
    spans = [chat(1, T, [user("hi")], o1), chat(2, T, [user("hi")], o1), chat(3, T, h2, o2)]
    [run] = convert(json.dumps(otlp_doc(spans)).encode())
    assert [s["tool_name"] for s in tools(run)] == ["ls"]
    # ... while a call the model makes again (a new output) stays a second call
    o3 = [{"role": "assistant", "parts": [{"type": "tool_call", "name": "ls",
                                           "arguments": '{"d": "/"}'}]}]
    spans = [chat(1, T, [user("hi")], o1), chat(3, T, h2, o3)]
    [run] = convert(json.dumps(otlp_doc(spans)).encode())
    assert [s["tool_name"] for s in tools(run)] == ["ls", "ls"]


# The Vercel AI SDK captures (otel-js/, SOURCES.md section 12): each span its own trace, so
# one run per span; no tool calls in these captures.
OTEL_JS = {
    "openinference-js__vercel__ai-generateText.json": [
        ("700d5f98fe2420adcf6ab0822f7a323c", "2026-02-03T15:19:52.241Z",
         [("user", "Write a haiku about programming.")],
         "Lines of code align,  \nLogic dances through the night—  \nDreams in data flow."),
        ("673a889f59126f8b4c90dce5a1f99368", "2026-02-03T15:19:54.023Z",
         [("system", "You are a helpful assistant."), ("user", "What is 2 + 2?"),
          ("assistant", "2 + 2 equals 4."), ("user", "And what is 3 + 3?")],
         "3 + 3 equals 6.")],
    "openinference-js__vercel__ai-generateText-doGenerate.json": [
        ("b3e700af9eab81e19f72f964d62a35af", "2026-02-03T15:19:52.242Z",
         [("user", "Write a haiku about programming.")],
         "Lines of code align,  \nLogic dances through the night—  \nDreams in data flow."),
        ("edff2fc5854be6170e8cccccec0c82cf", "2026-02-03T15:19:54.023Z",
         [("system", "You are a helpful assistant."), ("user", "What is 2 + 2?"),
          ("assistant", "2 + 2 equals 4."), ("user", "And what is 3 + 3?")],
         "3 + 3 equals 6.")],
    "openinference-js__vercel__ai-streamText.json": [
        ("8185b815e471184c6525a601a042be42", "2026-02-03T15:20:00.594Z",
         [("user", "Write a short poem about TypeScript.")], None)],
    "openinference-js__vercel__ai-streamText-doStream.json": [
        ("478d4dcc697ecfabc5e7a3d6e4216291", "2026-02-03T15:20:00.598Z",
         [("user", "Write a short poem about TypeScript.")], None)],
}


@pytest.mark.parametrize("name", sorted(OTEL_JS))
def test_otel_js_span_json_one_trace_one_run(traces, name):
    data = (traces / "otel-js" / name).read_bytes()
    spans = json.loads(data)
    runs = importers.convert(data, "auto", source=name, tenant="t")
    assert [r["run_id"] for r in runs] == [f"{NAME}:{t}" for t, *_ in OTEL_JS[name]]
    for run, (trace, start, asked, answer), span in zip(runs, OTEL_JS[name], spans):
        assert run["started_at"] == start
        assert [(s["role"], s["content"]) for s in run["steps"][:-1]] == asked
        assert run["steps"][-1]["role"] == "assistant"
        assert run["output"] == run["steps"][-1]["content"] == span["attributes"][
            "ai.response.text"]
        if answer is not None:
            assert run["output"] == answer
        assert tools(run) == []  # none recorded in these captures
        assert run["metadata"]["spans"][0]["span_id"] == span["spanContext"]["spanId"]
    assert importers.convert(data, "auto", source=name, tenant="t") == runs
    assert imported(runs).new == sorted(r["run_id"] for r in runs)


def test_js_span_json_with_parents_tool_calls_and_hrtime():
    def span(i, trace, parent, op, attrs, start):
        return {"name": op, "spanContext": {"traceId": trace, "spanId": f"{i:016x}"},
                **({"parentSpanContext": {"spanId": parent}} if parent else {}),
                "startTime": [1770000000 + start, 5], "endTime": [1770000000 + start, 9],
                "status": {"code": 0}, "attributes": {"ai.operationId": op, **attrs},
                "events": []}
    calls = json.dumps([{"toolCallId": "t1", "toolName": "weather",
                         "input": '{"city":"Oslo"}'}])
    msgs = json.dumps([{"role": "user", "content": [{"type": "text", "text": "weather?"}]}])
    msgs2 = json.dumps([
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "t1",
                                           "toolName": "weather",
                                           "input": {"city": "Oslo"}}]},
        {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "t1",
                                      "toolName": "weather",
                                      "output": {"type": "json", "value": {"c": 3}}}]}])
    A, B = "a" * 32, "b" * 32
    spans = []
    for trace in (A, B):  # two traces: two runs, whatever else they share
        spans += [span(1, trace, None, "ai.generateText",
                       {"ai.prompt": '{"prompt":"weather?"}', "ai.response.text": "3 C"}, 0),
                  span(2, trace, "0000000000000001", "ai.generateText.doGenerate",
                       {"ai.prompt.messages": msgs, "ai.response.toolCalls": calls}, 1),
                  span(3, trace, "0000000000000001", "ai.toolCall",
                       {"ai.toolCall.name": "weather", "ai.toolCall.id": "t1",
                        "ai.toolCall.args": '{"city": "Oslo"}',
                        "ai.toolCall.result": '{"c": 3}'}, 2),
                  span(4, trace, "0000000000000001", "ai.generateText.doGenerate",
                       {"ai.prompt.messages": msgs2, "ai.response.text": "3 C"}, 3)]
    runs = convert(json.dumps(spans).encode())
    assert [r["run_id"] for r in runs] == [f"{NAME}:{A}", f"{NAME}:{B}"]
    for run in runs:
        assert run["steps"] == [
            {"type": "message", "role": "user", "content": "weather?"},
            {"type": "tool_call", "tool_name": "weather", "call_id": "t1",
             "arguments": {"city": "Oslo"}, "result": {"c": 3}},
            {"type": "message", "role": "assistant", "content": "3 C"}]
        assert run["started_at"] == "2026-02-02T02:40:00.000000005Z"
        assert run["output"] == "3 C"
        assert run["metadata"]["spans"][1]["parent_id"] == "0000000000000001"
