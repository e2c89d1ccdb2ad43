"""The vcr container (cas/interop/importers/vcr.py): cassettes of every recorder read as
exchanges, bodies decoded and read as JSON, text or a stream of events, exchanges grouped into
conversations; real compressed and dialect cassettes imported exactly; hostile files refused."""

from __future__ import annotations

import base64
import gzip
import json
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.interop.importers import common, vcr
from cas.repo.runs import MAX_LINE, parse_run
from cas.storage.backends.memory import MemoryBackend
from support.cli import refused

CASSETTE = {"interactions": [
    {"request": {"uri": "https://api.example/v1/chat/completions", "method": "POST",
                 "body": json.dumps({"messages": [{"role": "user", "content": "hi"}]})},
     "response": {"status": {"code": 200}, "body": {"string": json.dumps({"id": "r1"})}}},
    {"request": {"uri": "https://api.example/v1/chat/completions", "method": "POST",
                 "body": json.dumps({"messages": [{"role": "user", "content": "hi"},
                                                  {"role": "assistant", "content": "yo"},
                                                  {"role": "user", "content": "more"}]})},
     "response": {"status": {"code": 200},
                  "body": {"string": 'data: {"a": 1}\n\ndata: {"a": 2}\n\ndata: [DONE]\n'}}},
    {"request": {"uri": "https://api.example/v1/chat/completions", "method": "POST",
                 "body": json.dumps({"messages": [{"role": "user", "content": "other"}]})},
     "response": {"status": {"code": 400}, "body": {"string": "not json"}}},
]}


def test_a_cassette_is_read_as_exchanges_and_grouped_into_conversations():
    exchanges = vcr.read_cassette(json.dumps(CASSETTE).encode(), "c.json")
    assert [e.status for e in exchanges] == [200, 200, 400]
    assert exchanges[0].response == {"id": "r1"} and not exchanges[0].streamed
    assert exchanges[1].response == [{"a": 1}, {"a": 2}] and exchanges[1].streamed
    assert exchanges[2].response == "not json"
    groups = vcr.conversations(exchanges, lambda request: request["messages"])
    assert [len(g) for g in groups] == [2, 1]  # the third call starts a history of its own


def test_a_yaml_cassette_needs_no_more_than_pyyaml():
    yaml = pytest.importorskip("yaml")  # the vcr extra; the test command installs it
    exchanges = vcr.read_cassette(yaml.safe_dump(CASSETTE).encode(), "c.yaml")
    assert len(exchanges) == 3
    with pytest.raises(cas.InvalidArgument) as info:
        vcr.read_cassette(b"just: text\n", "c.yaml")
    assert info.value.reason == "NOT_THIS_FORMAT"


# -- real files: compressed bodies and other recorders ----------------------------------------
# What each file holds, read from it (docs/importers.md): run id (the API's response id),
# started_at (the response's `created`), outcome, the start of the final answer, and each
# tool call as (name, call id, arguments, result or its start).
REAL = {
    "vcr-compressed/dd-trace-py__anthropic_completion_beta_tools_stream.yaml":
        ("anthropic:msg_0162isBHX3JcLbJ4NFHthYxA", None, {"stop_reason": "tool_use"},
         "Let me search for a weather tool to help answer your question!Found it! ...",
         [("tool_search_tool_regex", "srvtoolu_01TbRQZ9sz7wNun27iQQ8zKf", {"pattern": "weather"},
           {"type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}]}),
          ("get_weather", "toolu_01SHf2kbTahK9zYYPDyvNp5r", {"location": "San Francisco, CA"},
           None)]),
    "vcr-compressed/dd-trace-py__anthropic_completion_tools_call_with_tool_result.yaml":
        ("anthropic:msg_016CpjbSjMnkUfjwJbgpEsZP", None, {"stop_reason": "end_turn"},
         "Based on the result from the get_weather tool, the current weather in San Francisco, "
         "CA is 73°F.",
         [("get_weather", "toolu_01DYJo37oETVsCdLTTcCWcdq", {"location": "San Francisco, CA"},
           [{"type": "text", "text": "The weather is 73f"}])]),
    "vcr-compressed/dd-trace-py__chat_completion_tool_call_follow_up.yaml":
        ("openai-chat:chatcmpl-BpJL9Gh6OKDLbSp4q5sknvL9MjT56", "2025-07-03T18:52:51Z",
         {"finish_reason": "stop"}, "David Nguyen is a sophomore majoring in computer science ...",
         [("extract_student_info", "call_FJStsEjxdODw9tBmQRRkm6vY",
           {"name": "David Nguyen", "major": "computer science", "school": "Stanford University",
            "grades": 3.8, "clubs": ["Chess Club", "South Asian Student Association"]},
           '{"status": "success", "gpa_verified": true}')]),
    "vcr-compressed/dd-trace-py__test_agent_with_tool_errors.yaml":
        ("openai-responses:resp_67dd612092dc8191826dcbc863e9240603f95947d96c3963",
         "2025-03-21T12:52:48Z", {"status": "completed"},
         "It seems there was an error while trying to calculate the sum. ...",
         [("add", "call_HkEqS6psuoEKEXO0hPh87fgm", {"a": 1, "b": 2},
           "An error occurred while running the tool. Please try again. Error: This is a test "
           "error")]),
    "vcr-compressed/dd-trace-py__test_multiple_agent_handoffs.yaml":
        ("openai-responses:resp_67dc70dc58d8819186d7fae66be333070833a3e13699eecf",
         "2025-03-20T19:47:40Z", {"status": "completed"},
         "I'm sorry, but I don't have that information.",
         [("research", "call_Z6lolsgR1GQ3A7vExkNGSrwY", {"query": "soccer news October 4 2023"},
           "united beat liverpool 2-1 yesterday."),
          ("transfer_to_summarizer", "call_foCVeHcptx4J3EddQVXaQ0f8", {},
           "{'assistant': 'Summarizer'}")]),
    "vcr-compressed/logfire__test_instrument_langchain.yaml":
        ("openai-responses:resp_033ba4b7d827c976006978a46a8e2c81a288eed3c07ab06db8",
         "2026-01-27T11:41:30Z", {"status": "completed"}, "579",
         [("add", "call_XlgatTV1bBqLX1fOZTbu7cxO", {"a": 123, "b": 456}, "579.0")]),
    "vcr-compressed/openinference__agno__agent_run_reasoning.yaml":  # brotli
        ("openai-responses:resp_050aa87fc2b0b69e006a623b5348648194af9b49a0db871c83",
         "2026-07-23T16:03:31Z", {"status": "completed"},
         "The letter “r” appears 3 times in the word “strawberry.”", []),
    "vcr-dialects/dd-trace-py__azure_openai_deployments_gpt-4.1-mini_chat_completions_post_"
    "5836d4fe.json":
        ("openai-chat:chatcmpl-CRj28rdRKqhnTBkcKCmXlz0vReldy", "2025-10-17T18:00:00Z",
         {"finish_reason": "stop"}, 'Certainly! The phrase **"I think, therefore I am"** ...', []),
    "vcr-dialects/dd-trace-py__azure_openai_deployments_gpt-4.1-mini_chat_completions_post_"
    "5836d4fe.yaml":
        ("openai-chat:chatcmpl-CRj28rdRKqhnTBkcKCmXlz0vReldy", "2025-10-17T18:00:00Z",
         {"finish_reason": "stop"}, 'Certainly! The phrase **"I think, therefore I am"** ...', []),
    "vcr-dialects/dd-trace-py__litellm__completion_azure_stream.yaml":
        ("openai-chat:chatcmpl-DmfZu2BjJmBGSSHpj9hWtFQYBUxYn", "2026-06-03T13:05:42Z",
         {"finish_reason": "stop"},
         "Not much—here and ready to help. What do you want to talk about or work on?", []),
    "vcr-dialects/dd-trace-py__mistral_v1_chat_completions_post_1798d156.json":
        ("openai-chat:378d4d9fd4914db088d7c448257ed0d2", "2026-07-20T17:04:56Z",
         {"finish_reason": "tool_calls"}, "",
         [("get_weather", "aX2gaLIyo", {"location": "New York City"}, None)]),
    "vcr-dialects/logfire__test_openrouter_streaming_reasoning.yaml":
        ("openai-chat:gen-1751918758-SZqPQwzFgmd8JdDUxRuL", "2025-07-07T20:05:59Z",
         {"finish_reason": "stop"}, "That's a clever way to put it! ...", []),
    "vcr-dialects/openinference__together__test_chat_stream.yaml":
        ("openai-chat:ovCb55p-zfFMX-a273a0f90faa9289", "2026-08-07T04:44:54Z",
         {"finish_reason": "stop"}, "1, 2, 3, 4, 5.", []),
    "vcr-dialects/otel-contrib__botocore__test_invoke_model_with_response_stream_with_content_"
    "tool_call_anthropic.claude.yaml":
        ("anthropic:msg_bdrk_014iAAMKoJRdnetrFEau569K", None, {"stop_reason": "end_turn"},
         "\n\nBased on the results, here's the weather information for Seattle and San "
         "Francisco today: ...",
         [("get_current_weather", "toolu_bdrk_01KatiGijVFb9yuMPcnVk38e", {"location": "Seattle"},
           "50 degrees and raining"),
          ("get_current_weather", "toolu_bdrk_01Tzb35EydKHWz4UZP3puTbF",
           {"location": "San Francisco"}, "70 degrees and sunny")]),
    "vcr-dialects/otel-js-contrib__bedrock-invokemodelwithstreams-adds-claude-model-attributes-"
    "to-span.json":
        ("anthropic:msg_bdrk_01XT2XEQnNbdz91baTQTnbp1", None, {"stop_reason": "max_tokens"},
         "Hello! I'm doing well, thank you for asking.", []),
    "vcr-dialects/otel-js-contrib__openai-chat-completions-records-tool-calls.json":
        ("openai-chat:chatcmpl-BuC0RWtqOwuGmjmhnEbVkzMHfn3yD", "2025-07-17T06:03:38Z",
         {"finish_reason": "stop"},
         "The weather in New York City is 25 degrees and sunny, while in London, it is 15 "
         "degrees and raining.",
         [("get_weather", "call_PXP2udMH0QECumyxuh4lpn3y", {"location": "New York City"},
           "25 degrees and sunny"),
          ("get_weather", "call_TKk9c7b7gvDqCQzv80Loc7fT", {"location": "London"},
           "15 degrees and raining")]),
    "vcr-dialects/vercel-ai__anthropic-fallback-tool-call.sse":  # created: 0 (sanitised)
        ("openai-chat:msg_sanitized", "1970-01-01T00:00:00Z", {"finish_reason": "tool_calls"},
         "Reading it.", [("read_file", "toolu_sanitized", {"path": "a.txt"}, None)]),
    "vcr-dialects/langchain-aws__test_agent_loop_streaming_v1.yaml.gz":  # Converse: no ids
        ("bedrock-converse:390fd343c402fbe0c2db07c971a5c828", None, {"stop_reason": "end_turn"},
         "The weather in San Francisco, CA is currently sunny! ☀️",
         [("get_weather", "tooluse_q8A6U9X7S4apz8TPXNx4Kq", {"location": "San Francisco, CA"},
           [{"text": "It's sunny."}])]),
    "vcr-dialects/vercel-ai__groq-tool-call.chunks.txt":
        ("openai-chat:chatcmpl-b610d559-f156-4aca-8827-24b4fe6af54f", "2026-02-11T00:47:23Z",
         {"finish_reason": "tool_calls"}, None, [("weather", "tk85n1k4m", {}, None)]),
}


def convert(data: bytes, source: str = "c.yaml", **flags) -> list[dict]:
    flags.setdefault("tenant", "t")
    return cas.interop.importers.convert(data, "auto", source=source, container="vcr", **flags)


def stored(runs: list[dict]) -> list[dict]:
    """The runs pass the run schema and import into a fresh repository."""
    for run in runs:
        parse_run(run, "$")
    repo = cas.Repository.create(MemoryBackend())
    assert sorted(repo.import_runs(runs).new) == sorted({r["run_id"] for r in runs})
    return runs


def test_every_real_file_of_these_classes_is_listed(traces):
    names = {f"{d}/{p.name}" for d in ("vcr-compressed", "vcr-dialects")
             for p in (traces / d).iterdir()}
    assert names == set(REAL)


@pytest.mark.parametrize("name", sorted(REAL))
def test_a_real_cassette_imports_as_the_file_holds_it(traces, name):
    run_id, started, outcome, answer, expected_calls = REAL[name]
    said: list = []
    (run,) = stored(convert((traces / name).read_bytes(), name, warnings=said))
    assert (run["run_id"], run.get("started_at"), run["outcome"]) == (run_id, started, outcome)
    if answer is not None and answer.endswith(" ..."):  # (the start of a long answer)
        assert run["output"].startswith(answer[:-4])
    else:
        assert run["output"] == answer
    got = [(s["tool_name"], s.get("call_id"), s.get("arguments"), s.get("result"))
           for s in run["steps"] if s["type"] == "tool_call"]
    assert len(got) == len(expected_calls)
    for (name_, call_id, arguments, result), want in zip(got, expected_calls):
        assert (name_, call_id, arguments) == want[:3]
        if isinstance(want[3], str):
            assert isinstance(result, str) and result.startswith(want[3])
        else:
            assert result == want[3]
    assert not any(s.get("arguments_error") for s in run["steps"])
    assert [w for w in said if "undecoded" in w.message] == []


def test_two_recorders_of_one_exchange_give_the_same_run(traces):
    stem = "vcr-dialects/dd-trace-py__azure_openai_deployments_gpt-4.1-mini_chat_completions_post_"
    (a,) = convert((traces / (stem + "5836d4fe.yaml")).read_bytes())
    (b,) = convert((traces / (stem + "5836d4fe.json")).read_bytes())
    drop = ("calls",)  # the request headers differ (the recorders ran on other machines)
    assert {k: v for k, v in a.items() if k != "metadata"} == \
        {k: v for k, v in b.items() if k != "metadata"}
    assert {k: v for k, v in a["metadata"].items() if k not in drop} == \
        {k: v for k, v in b["metadata"].items() if k not in drop}
    # the YAML's `\\xE9` escape is the é of René
    assert "René Descartes" in a["output"]


def test_what_a_stream_carries_beside_its_deltas_is_kept(traces):
    (together,) = convert((traces / "vcr-dialects/openinference__together__test_chat_stream"
                                     ".yaml").read_bytes())
    choice = together["metadata"]["choice"]
    assert choice["seed"] == 1395002666759424000  # > 2**53, exact
    assert choice["text"] == "1, 2, 3, 4, 5."  # Together's `text` beside each delta
    assert len(choice["delta_values"]["token_id"]) == 15  # a token id per chunk
    (openrouter,) = convert((traces / "vcr-dialects/logfire__test_openrouter_streaming_"
                                       "reasoning.yaml").read_bytes())
    assert openrouter["metadata"]["choice"]["native_finish_reason"] == "STOP"
    (groq,) = convert((traces / "vcr-dialects/vercel-ai__groq-tool-call.chunks.txt")
                      .read_bytes())
    x_groq = groq["metadata"]["calls"][0]["response"]["x_groq"]
    assert x_groq["id"] == "req_01kh52nj5yfcat8hrmvrk2j2hj" and x_groq["seed"] == 689520654
    assert x_groq["usage"]["total_tokens"] == 225  # from the last chunk, beside the first's
    (bedrock,) = convert((traces / "vcr-dialects/otel-js-contrib__bedrock-invokemodelwith"
                                   "streams-adds-claude-model-attributes-to-span.json")
                         .read_bytes())
    stale, answered = bedrock["metadata"]["exchanges"]
    assert stale["status"] == 403 and stale["error"]["body"]["message"].startswith(
        "Signature expired: 20250325T235114Z")
    assert answered["response"]["stream_events"] == [
        {"type": "message_stop", "amazon-bedrock-invocationMetrics": {
            "inputTokenCount": 22, "outputTokenCount": 12, "invocationLatency": 512,
            "firstByteLatency": 389}}]


def test_a_compressed_cassette_is_one_run_per_conversation(traces):
    """(Before bodies were decoded, the three calls of the handoff cassette became runs with
    digest ids, and one conversation two overlapping runs.)"""
    data = (traces / "vcr-compressed/dd-trace-py__test_multiple_agent_handoffs.yaml").read_bytes()
    exchanges = vcr.read_cassette(data, "c.yaml")
    assert [e.response["id"] for e in exchanges] == [
        "resp_67dc70dc58d8819186d7fae66be333070833a3e13699eecf",
        "resp_67dc70ddc60c8191816ff07dab8cda0b0833a3e13699eecf",
        "resp_67dc70df16e08191a99808583575997a0833a3e13699eecf"]
    assert len(convert(data)) == 1


def test_langchain_gzip_cassette_is_read_as_exchanges(traces):
    data = (traces / "vcr-dialects/langchain-aws__test_agent_loop_streaming_v1.yaml.gz")
    exchanges = vcr.read_cassette(data.read_bytes(), "c.yaml.gz")
    stream, plain = exchanges
    assert stream.uri.endswith("/converse-stream") and plain.uri.endswith("/converse")
    assert stream.streamed and len(stream.response) == 11
    assert stream.response[0] == {"messageStart": {"p": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
                                                   "KLMNOPQRSTUVW", "role": "assistant"}} \
        or "messageStart" in stream.response[0]
    assert stream.request["messages"][0]["content"] == [
        {"text": "What is the weather in San Francisco, CA?"}]
    assert plain.request["messages"][1]["content"][0]["toolUse"]["name"] == "get_weather"


# -- dialects built from the formats' documentation --------------------------------------------
CHAT_URI = "https://api.example/v1/chat/completions"
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "weather in Paris?"}]}
RESPONSE = {"id": "chatcmpl-9", "object": "chat.completion", "created": 1700000000,
            "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Checking.", "tool_calls": [{
                    "id": "call_1", "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]}}]}


def cassette(body, headers=None, status=200, uri=CHAT_URI, request=REQUEST) -> bytes:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_dump({"interactions": [{
        "request": {"uri": uri, "method": "POST", "body": json.dumps(request)},
        "response": {"status": {"code": status, "message": "x"}, "headers": headers or {},
                     "body": {"string": body}}}]}).encode()


def pack(data: bytes, chain: list[str]) -> bytes:
    brotli = pytest.importorskip("brotli")
    for coding in chain:
        data = gzip.compress(data, mtime=0) if coding == "gzip" else \
            zlib.compress(data) if coding == "deflate" else brotli.compress(data)
    return data


STORED = ("binary", "latin-1 text", "base64 text", "betamax base64", "nock hex")


def stored_as(packed: bytes, form: str):
    if form == "binary":
        return packed
    if form == "latin-1 text":
        return packed.decode("latin-1")
    if form == "base64 text":
        return base64.b64encode(packed).decode()
    return None  # the other two are whole recorders: see recorded_as


def recorded_as(packed: bytes, chain: list[str], form: str) -> bytes:
    headers = {"Content-Encoding": [", ".join(chain)]} if chain else {}
    if form == "betamax base64":
        return json.dumps({"http_interactions": [{
            "request": {"uri": CHAT_URI, "body": {"string": json.dumps(REQUEST)}},
            "response": {"status": {"code": 200}, "headers": headers,
                         "body": {"base64_string": base64.b64encode(packed).decode()}}}]}).encode()
    if form == "nock hex":
        return json.dumps([{"scope": "https://api.example:443", "method": "POST",
                            "path": "/v1/chat/completions", "body": REQUEST, "status": 200,
                            "response": [packed.hex()], "responseIsBinary": True,
                            "rawHeaders": [k for kv in headers.items() for k in
                                           (kv[0], kv[1][0])]}]).encode()
    if not chain and form != "binary":
        return cassette(packed.decode())
    return cassette(stored_as(packed, form), headers)


def test_a_compressed_error_body_is_the_error_never_null():
    error = {"error": {"message": "Rate limit reached", "type": "requests", "code": "429"}}
    (run,) = convert(cassette(pack(json.dumps(error).encode(), ["gzip"]),
                              {"Content-Encoding": ["gzip"]}, status=429))
    assert run["outcome"]["error"] == error["error"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["gzip", "deflate", "br"]), max_size=3),
       st.sampled_from(STORED))
def test_a_bodys_encoding_never_changes_what_is_imported(chain, form):
    plain = json.dumps(RESPONSE).encode()
    (expected,) = convert(cassette(plain.decode()))
    (run,) = convert(recorded_as(pack(plain, chain), chain, form))
    # the recorders differ in where they keep the URI and headers, never in the run
    assert {k: v for k, v in run.items() if k != "metadata"} == \
        {k: v for k, v in expected.items() if k != "metadata"}
    assert run["metadata"]["calls"][0]["response"] == expected["metadata"]["calls"][0]["response"]


def test_a_body_in_a_coding_not_read_is_kept_raw_and_said():
    said: list = []
    (run,) = convert(cassette(b"\x28\xb5\x2f\xfd\x00\x01", {"Content-Encoding": ["zstd"]}),
                     warnings=said)
    kept = run["metadata"]["calls"][0]["response"]["undecoded_body"]
    assert kept == {"content_encoding": ["zstd"], "base64": "KLUv/QAB",
                    "reason": "content coding 'zstd' is not one this reader decodes "
                              "(accepted: gzip, x-gzip, deflate, br, identity)"}
    assert "response_unread" in run["outcome"]
    assert said[0] == common.Warning(
        "c.yaml", "interactions[0] response body: kept undecoded under metadata (content "
        "coding 'zstd' is not one this reader decodes (accepted: gzip, x-gzip, deflate, br, "
        "identity))")


def chunk(delta=None, message=None, finish=None, **top):
    choice = {"index": 0, "finish_reason": finish}
    if delta is not None:
        choice["delta"] = delta
    if message is not None:
        choice["message"] = message
    return {"id": "chatcmpl-w", "object": "chat.completion.chunk", "created": 1700000001,
            "model": "palmyra", "choices": [choice], **top}


def sse(chunks) -> str:
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def test_a_stream_whose_chunks_carry_a_message_beside_the_delta():
    """Writer-style chunks: `message` beside `delta` (no real recording was found: built
    from the shape the servers document). The deltas spell the answer; the messages stay."""
    chunks = [chunk({"role": "assistant", "content": "Hel"}, {"role": "assistant",
                                                             "content": "Hel"}),
              chunk({"content": "lo"}, {"role": "assistant", "content": "lo"}),
              chunk({}, None, "stop")]
    (run,) = convert(cassette(sse(chunks), {"Content-Type": ["text/event-stream"]}))
    assert run["output"] == "Hello" and run["outcome"] == {"finish_reason": "stop"}
    assert run["metadata"]["choice"]["stream_messages"] == [
        {"role": "assistant", "content": "Hel"}, {"role": "assistant", "content": "lo"}]
    # a stream of messages without deltas is read as the deltas would be
    (run,) = convert(cassette(sse([chunk(None, {"role": "assistant", "content": "Hel"}),
                                   chunk(None, {"content": "lo"}, "stop")])))
    assert run["output"] == "Hello"


def test_sse_comments_multi_line_data_and_no_blank_lines():
    text = (": OPENROUTER PROCESSING\n\nevent: message\nid: 1\ndata: {\"a\":\ndata: 1}\n\n"
            ": keep-alive\ndata: {\"b\": 2}\ndata: {\"c\": 3}\ndata: [DONE]\n")
    assert vcr.sse_payloads(text) == [{"a": 1}, {"b": 2}, {"c": 3}]


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    head = b"".join(bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v))
                    + v.encode() for k, v in headers.items())
    prelude = struct.pack(">II", 16 + len(head) + len(payload), len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack(">I", zlib.crc32(body))


def bedrock_chunk(event: dict) -> bytes:
    inner = base64.b64encode(json.dumps(event).encode()).decode()
    return frame({":event-type": "chunk", ":content-type": "application/json",
                  ":message-type": "event"}, json.dumps({"bytes": inner}).encode())


def test_bedrock_invoke_with_response_stream_and_its_exceptions():
    uri = ("https://bedrock-runtime.us-east-1.amazonaws.com/model/"
           "anthropic.claude-3-haiku-20240307-v1:0/invoke-with-response-stream")
    request = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 50,
               "messages": [{"role": "user", "content": "hi"}]}
    events = [{"type": "message_start", "message": {
                  "id": "msg_bdrk_1", "type": "message", "role": "assistant", "content": [],
                  "model": "claude-3-haiku", "stop_reason": None, "usage": {"input_tokens": 3}}},
              {"type": "content_block_start", "index": 0,
               "content_block": {"type": "tool_use", "id": "toolu_1", "name": "look",
                                 "input": {}}},
              {"type": "content_block_delta", "index": 0,
               "delta": {"type": "input_json_delta", "partial_json": '{"q": '}},
              {"type": "content_block_delta", "index": 0,
               "delta": {"type": "input_json_delta", "partial_json": '"x"}'}},
              {"type": "content_block_stop", "index": 0},
              {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
               "usage": {"output_tokens": 9}}]
    body = b"".join(map(bedrock_chunk, events))
    headers = {"Content-Type": ["application/vnd.amazon.eventstream"]}
    (run,) = convert(cassette(body, headers, uri=uri, request=request))
    (call,) = [s for s in run["steps"] if s["type"] == "tool_call"]
    assert (run["run_id"], call["arguments"]) == ("anthropic:msg_bdrk_1", {"q": "x"})
    assert run["outcome"] == {"stop_reason": "tool_use"}
    throttled = frame({":exception-type": "throttlingException", ":message-type": "exception",
                       ":content-type": "application/json"},
                      b'{"message": "Too many requests"}')
    exchanges = vcr.read_cassette(cassette(bedrock_chunk(events[0]) + throttled, headers,
                                           uri=uri, request=request), "c.yaml")
    assert exchanges[0].response[-1] == {"type": "error", "error": {
        "type": "throttlingException", "message": "Too many requests"}}


def test_converse_stream_events_are_read_as_the_sdks_give_them():
    events = [frame({":event-type": "messageStart", ":message-type": "event"},
                    b'{"role": "assistant"}'),
              frame({":event-type": "contentBlockDelta", ":message-type": "event"},
                    b'{"contentBlockIndex": 0, "delta": {"text": "Hi"}}')]
    (exchange,) = vcr.read_cassette(cassette(b"".join(events)), "c.yaml")  # no content type
    assert exchange.streamed and exchange.response == [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Hi"}}}]


def test_python_tags_on_header_names_are_read_as_the_names():
    data = cassette(json.dumps(RESPONSE)).replace(
        b"headers: {}", b"headers:\n      ? !!python/object/apply:multidict._multidict.istr\n"
                        b"      - Content-Type\n      : - application/json")
    (exchange,) = vcr.read_cassette(data, "c.yaml")
    assert exchange.headers == {"content-type": "application/json"}


# -- hostile files -----------------------------------------------------------------------------
def alias_bomb(levels: int = 9) -> bytes:
    """Each level an anchored list naming the level below ten times: ~1 KB, 10**9 leaves."""
    lines = ['a0: &a0 ["lol"]']
    for n in range(1, levels):
        lines.append(f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 10) + "]")
    lines.append(f"interactions: [{{request: {{uri: x, body: *a{levels - 1}}}}}]")
    return "\n".join(lines).encode()


def refusal(data: bytes, source: str = "c.yaml") -> cas.InvalidArgument:
    with pytest.raises(cas.InvalidArgument) as info:
        convert(data, source)
    return info.value


def test_a_yaml_alias_bomb_is_refused_at_once():
    data = alias_bomb()
    assert len(data) < 1100
    exc = refusal(data)  # (expanded, it would be 10**9 nodes: minutes and gigabytes)
    assert exc.reason == "YAML_ALIAS_REFUSED"
    assert exc.message.startswith("c.yaml: YAML aliases expand the cassette past 4 times its "
                                  f"size ({len(data)} bytes)")
    # an alias to a node that contains it
    assert refusal(b"interactions: &a [*a]\n").reason == "YAML_ALIAS_REFUSED"


def test_a_few_aliases_as_writers_use_them_are_read():
    yaml = pytest.importorskip("yaml")
    headers = {"Content-Type": ["application/json"]}
    doc = {"interactions": [{"request": {"uri": CHAT_URI, "body": json.dumps(REQUEST),
                                         "headers": headers},
                             "response": {"status": {"code": 200}, "headers": headers,
                                          "body": {"string": json.dumps(RESPONSE)}}}]}
    data = yaml.dump(doc).encode()
    assert b"&id001" in data  # PyYAML anchors the shared header map
    (run,) = convert(data)
    assert run["run_id"] == "openai-chat:chatcmpl-9"


@pytest.mark.parametrize("data", [
    b"interactions: " + b"[" * 50_000 + b"]" * 50_000,                      # YAML
    b"interactions:\n" + b"".join(b" " * n + b"- \n" for n in range(0, 400, 2)),
    b'{"interactions": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",            # JSON
], ids=["yaml-flow", "yaml-block", "json"])
def test_a_cassette_nested_tens_of_thousands_deep_is_refused(data):
    exc = refusal(data)
    assert exc.reason == "JSON_TOO_DEEP"
    assert exc.message.startswith("c.yaml: ") and "nested more than 100 levels" in exc.message


def test_deep_tool_arguments_and_partial_json_are_kept_raw_not_a_crash():
    deep = "[" * 50_000 + "]" * 50_000
    response = json.loads(json.dumps(RESPONSE))
    response["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = deep
    (run,) = stored(convert(cassette(json.dumps(response))))
    (call,) = [s for s in run["steps"] if s["type"] == "tool_call"]
    assert call["arguments_raw"] == deep
    assert "nested more than 100 levels" in call["arguments_error"]
    uri = "https://api.anthropic.com/v1/messages"
    request = {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    events = [{"type": "message_start", "message": {"id": "msg_1", "type": "message",
                                                     "role": "assistant", "content": []}},
              {"type": "content_block_start", "index": 0,
               "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}}},
              {"type": "content_block_delta", "index": 0,
               "delta": {"type": "input_json_delta", "partial_json": deep}},
              {"type": "content_block_stop", "index": 0},
              {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}]
    (run,) = stored(convert(cassette(sse(events), uri=uri, request=request)))
    (call,) = [s for s in run["steps"] if s["type"] == "tool_call"]
    assert call["arguments_raw"] == deep and "nested more than" in call["arguments_error"]


def big_message() -> bytes:
    return json.dumps({"messages": [{"role": "user", "content": "x" * (MAX_LINE + 1)}]}).encode()


def test_a_converted_run_has_the_native_size_cap():
    with pytest.raises(cas.InvalidArgument) as info:
        cas.interop.importers.convert(big_message(), "openai-chat", source="big.json",
                                      tenant="t")
    assert info.value.reason == "RUN_TOO_LARGE"
    assert info.value.message.startswith("big.json: run 'openai-chat:")
    assert f"a run is at most {MAX_LINE} bytes" in info.value.message


def test_the_cli_refuses_hostile_files_with_a_json_error_and_stores_nothing(run, tmp_path):
    assert run("init").exit_code == 0
    (tmp_path / "bomb.yaml").write_bytes(alias_bomb())
    size = len(alias_bomb())
    refused(run, tmp_path, ("runs", "import", "--format", "auto", "--container", "vcr",
                            "--tenant", "t", "bomb.yaml"), 2, "INVALID_ARGUMENT",
            "YAML_ALIAS_REFUSED",
            f"bomb.yaml: YAML aliases expand the cassette past 4 times its size ({size} "
            "bytes); an alias bomb is refused, not expanded", limit=1 << 20, source="bomb.yaml")
    (tmp_path / "deep.json").write_bytes(b'{"interactions": ' + b"[" * 50_000
                                         + b"]" * 50_000 + b"}")
    r = run("--json", "runs", "import", "--format", "auto", "--container", "vcr", "--tenant",
            "t", "deep.json")
    assert (r.exit_code, r.stdout) == (2, "")
    assert json.loads(r.stderr)["error"]["reason"] == "JSON_TOO_DEEP"
    (tmp_path / "big.json").write_bytes(big_message())
    r = run("--json", "runs", "import", "--format", "openai-chat", "--tenant", "t", "big.json")
    assert (r.exit_code, r.stdout) == (2, "")
    error = json.loads(r.stderr)["error"]
    assert (error["reason"], error["source"], error["limit"]) == ("RUN_TOO_LARGE", "big.json",
                                                                  MAX_LINE)
    assert json.loads(run("--json", "runs", "list").stdout)["runs"] == []


def test_a_body_stored_parsed_beside_or_instead_of_body():
    """pydantic-ai's cassettes keep a JSON body as `parsed_body` (no real one under an allowed
    licence: built from the shape its serializer writes)."""
    yaml = pytest.importorskip("yaml")
    doc = {"interactions": [{
        "request": {"uri": CHAT_URI, "method": "POST", "parsed_body": REQUEST,
                    "headers": {"content-type": ["application/json"]}},
        "response": {"status": {"code": 200}, "parsed_body": RESPONSE,
                     "headers": {"content-encoding": ["gzip"]}}}]}
    (run,) = convert(yaml.safe_dump(doc).encode())
    (expected,) = convert(cassette(json.dumps(RESPONSE)))
    assert {k: v for k, v in run.items() if k != "metadata"} == \
        {k: v for k, v in expected.items() if k != "metadata"}
    doc["interactions"][0]["response"]["body"] = {"string": ""}
    assert convert(yaml.safe_dump(doc).encode())[0]["run_id"] == "openai-chat:chatcmpl-9"


def test_an_anthropic_stream_recorded_alone():
    events = [{"type": "message_start", "message": {
                  "id": "msg_alone", "type": "message", "role": "assistant", "content": [],
                  "model": "claude", "stop_reason": None, "usage": {"input_tokens": 4}}},
              {"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "Hi"}},
              {"type": "content_block_stop", "index": 0},
              {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
               "usage": {"output_tokens": 2}},
              {"type": "message_stop"}]
    as_sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    as_lines = "\n".join(json.dumps(e) for e in events)
    for data in (as_sse, as_lines):
        (run,) = convert(data.encode(), "fixture.sse")
        assert (run["run_id"], run["input"], run["output"], run["outcome"]) == (
            "anthropic:msg_alone", None, "Hi", {"stop_reason": "end_turn"})


def test_a_binary_body_is_kept_and_said():
    said: list = []
    (run,) = convert(cassette(b"\xff\xfe\x00binary"), warnings=said)
    assert run["metadata"]["calls"][0]["response"] == {"binary_body": "//4AYmluYXJ5"}
    assert common.Warning("c.yaml", "interactions[0] response body: 9 bytes that are not "
                          "UTF-8 text: kept as base64 under metadata (binary_body)") in said


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["gzip", "deflate", "br"]), max_size=2),
       st.sampled_from(STORED), st.text(max_size=30), st.booleans())
def test_an_import_is_deterministic(chain, form, content, streamed):
    response = json.loads(json.dumps(RESPONSE))
    response["choices"][0]["message"]["content"] = content
    body = (sse([chunk({"role": "assistant", "content": content}, finish="stop")])
            if streamed else json.dumps(response)).encode()
    data = recorded_as(pack(body, chain), chain, form)
    assert convert(data) == convert(data)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(REAL)), st.randoms(use_true_random=False))
def test_a_damaged_real_cassette_is_read_or_refused_never_a_crash(traces, name, rnd):
    data = bytearray((traces / name).read_bytes())
    for _ in range(rnd.randint(1, 8)):
        at = rnd.randrange(len(data))
        data[at:at + rnd.randint(1, 3)] = bytes(rnd.randrange(256)
                                                for _ in range(rnd.randint(0, 3)))
    try:
        convert(bytes(data), name)
    except cas.InvalidArgument:
        pass


@given(st.binary(max_size=200))
def test_any_bytes_are_read_or_refused(data):
    try:
        vcr.read_cassette(data, "c")
    except cas.InvalidArgument:
        pass
