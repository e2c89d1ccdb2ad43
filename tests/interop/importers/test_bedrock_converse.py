"""The bedrock-converse importer (cas/interop/importers/bedrock_converse.py): Converse and
ConverseStream calls as runs, from a real LangChain cassette and from documents in the shapes
the API reference gives."""

from __future__ import annotations

import json

import cas
import cas.interop.importers
from cas.interop.importers import bedrock_converse
from cas.repo.runs import parse_run

REQUEST = {"system": [{"text": "be brief"}],
           "messages": [{"role": "user", "content": [{"text": "weather in Oslo?"}]}],
           "toolConfig": {"tools": [{"toolSpec": {"name": "weather", "inputSchema": {
               "json": {"type": "object"}}}}]},
           "inferenceConfig": {"maxTokens": 100}}
RESPONSE = {"output": {"message": {"role": "assistant", "content": [
                {"text": "Looking."},
                {"toolUse": {"toolUseId": "tu_1", "name": "weather", "input": {"city": "Oslo"}}}]}},
            "stopReason": "tool_use", "usage": {"inputTokens": 10, "outputTokens": 5,
                                                "totalTokens": 15},
            "metrics": {"latencyMs": 300}}


def convert(value, fmt="bedrock-converse", **flags):
    flags.setdefault("tenant", "t")
    data = value if isinstance(value, bytes) else json.dumps(value).encode()
    runs = cas.interop.importers.convert(data, fmt, source="doc.json", **flags)
    for run in runs:
        parse_run(run, "$")
    return runs


def test_a_request_and_its_response_are_one_run():
    (run,) = convert({"request": REQUEST, "response": RESPONSE})
    assert run["steps"] == [
        {"type": "message", "role": "system", "content": "be brief"},
        {"type": "message", "role": "user", "content": "weather in Oslo?"},
        {"type": "message", "role": "assistant", "content": "Looking."},
        {"type": "tool_call", "tool_name": "weather", "call_id": "tu_1",
         "arguments": {"city": "Oslo"}}]
    assert (run["input"], run["output"], run["outcome"]) == (
        "weather in Oslo?", "Looking.", {"stop_reason": "tool_use"})
    assert run["metadata"]["usage"] == {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
    assert run["metadata"]["calls"] == [{"request": {"inferenceConfig": {"maxTokens": 100}},
                                         "response": {"stopReason": "tool_use",
                                                      "usage": RESPONSE["usage"],
                                                      "metrics": {"latencyMs": 300}}}]
    assert cas.interop.importers.detect(json.dumps({"request": REQUEST,
                                                    "response": RESPONSE}).encode()) == NAME


NAME = bedrock_converse.NAME


def test_a_tool_result_with_status_error_is_the_calls_error():
    follow = dict(REQUEST, messages=REQUEST["messages"] + [
        RESPONSE["output"]["message"],
        {"role": "user", "content": [{"toolResult": {"toolUseId": "tu_1", "status": "error",
                                                     "content": [{"text": "no such city"}]}}]}])
    (run,) = convert(follow)
    (call,) = [s for s in run["steps"] if s["type"] == "tool_call"]
    assert call["error"] == [{"text": "no such city"}] and "result" not in call
    assert run["outcome"] is None  # no response recorded


def test_a_stream_is_reassembled_with_its_reasoning_and_padding_left_out():
    events = [{"messageStart": {"role": "assistant", "p": "abc"}},
              {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {
                  "reasoningContent": {"text": "Think"}}}},
              {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {
                  "reasoningContent": {"text": "ing.", "signature": "sig"}}}},
              {"contentBlockStop": {"contentBlockIndex": 0}},
              {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"text": "Hi"}}},
              {"contentBlockStop": {"contentBlockIndex": 1}},
              {"contentBlockStart": {"contentBlockIndex": 2, "start": {
                  "toolUse": {"toolUseId": "tu_2", "name": "f"}}}},
              {"contentBlockDelta": {"contentBlockIndex": 2, "delta": {
                  "toolUse": {"input": '{"a": '}}}},
              {"contentBlockDelta": {"contentBlockIndex": 2, "delta": {
                  "toolUse": {"input": "1}"}}}},
              {"contentBlockStop": {"contentBlockIndex": 2}},
              {"messageStop": {"stopReason": "tool_use", "p": "xy"}},
              {"metadata": {"usage": {"inputTokens": 1, "outputTokens": 2}}},
              {"somethingNew": {"x": 1}}]
    response, error = bedrock_converse.reassemble(events)
    assert error is None
    assert response == {
        "output": {"message": {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "Thinking.", "signature": "sig"}}},
            {"text": "Hi"},
            {"toolUse": {"toolUseId": "tu_2", "name": "f", "input": {"a": 1}}}]}},
        "stopReason": "tool_use", "usage": {"inputTokens": 1, "outputTokens": 2},
        "stream_events": [{"somethingNew": {"x": 1}}]}
    (run,) = convert({"request": REQUEST, "response": events})
    assert run["output"] == "Hi"
    assert run["steps"][2]["blocks"] == [response["output"]["message"]["content"][0]]


def test_the_real_langchain_cassette(traces):
    data = (traces / "vcr-dialects/langchain-aws__test_agent_loop_streaming_v1.yaml.gz")
    (run,) = convert(data.read_bytes(), "auto", container="vcr")
    assert run["metadata"]["model"] == "us.anthropic.claude-sonnet-5"
    stream, plain = run["metadata"]["calls"]
    assert stream["streamed"] and stream["response"]["stopReason"] == "tool_use"
    assert stream["response"]["usage"]["inputTokens"] == 446
    assert plain["response"]["usage"]["totalTokens"] == 537
    assert run["metadata"]["usage"]["inputTokens"] == 446 + 512
    assert [s["type"] for s in run["steps"]] == ["message", "message", "tool_call", "message"]


def test_a_document_of_another_format_is_refused():
    try:
        convert({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5})
    except cas.InvalidArgument as exc:
        assert exc.reason == "NOT_THIS_FORMAT"
        assert exc.message.startswith("doc.json: not a bedrock-converse document: expected")
    else:
        raise AssertionError("not refused")
