"""The openai-responses importer: Responses API documents, cassettes and RunState snapshots."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.errors import InvalidArgument
from cas.interop.importers import convert, openai_responses
from cas.interop.importers.vcr import Exchange
from cas.repo.runs import parse_run
from cas.storage.backends.memory import MemoryBackend

FOLDER = "openai-responses"


def imported(runs):
    """Every run valid, and stored; the same runs again store nothing."""
    for run in runs:
        parse_run(run, "$")
    repo = cas.Repository.create(MemoryBackend())
    first = repo.import_runs(runs)
    assert sorted(first.new) == sorted(r["run_id"] for r in runs)
    again = repo.import_runs(runs)
    assert again.new == [] and again.unchanged == len(runs)
    return runs


def read(traces, name, **options):
    data = (traces / FOLDER / name).read_bytes()
    container = "vcr" if name.endswith(".yaml") else None
    return convert(data, "openai-responses", source=name, container=container,
                   **({"tenant": "t"} | options))


def calls(run):
    return [s for s in run["steps"] if s["type"] == "tool_call"]


def texts(run, role):
    return [s["content"] for s in run["steps"] if s["type"] == "message" and s["role"] == role]


def cassette(*pairs):
    """A JSON vcr cassette of (uri, request body, response body or SSE text) interactions."""
    interactions = []
    for uri, request, response, *status in pairs:
        body = response if isinstance(response, str) else json.dumps(response)
        interactions.append({"request": {"method": "POST", "uri": uri,
                                         "body": json.dumps(request)},
                             "response": {"status": {"code": status[0] if status else 200},
                                          "body": {"string": body}}})
    return json.dumps({"interactions": interactions}).encode()


RESPONSES = "https://api.openai.com/v1/responses"


def response(rid, *output, **fields):
    return {"id": rid, "object": "response", "created_at": 1775778769, "status": "completed",
            "model": "gpt-4.1", "output": list(output), **fields}


def fcall(call_id, name="lookup", arguments='{"q": 1}', **fields):
    return {"type": "function_call", "id": "fc_" + call_id, "call_id": call_id, "name": name,
            "arguments": arguments, "status": "completed", **fields}


def freply(call_id, output="ok"):
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def said(text, role="assistant"):
    part = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}


def one(doc, **options):
    runs = convert(json.dumps(doc).encode(), "openai-responses", source="doc.json",
                   **({"tenant": "t"} | options))
    assert len(runs) == 1
    return imported(runs)[0]


# -- the real samples --------------------------------------------------------------------------
def test_agent_as_tool_is_two_runs_and_the_outer_one_resumes(traces):
    outer, nested = imported(read(traces, "langsmith-sdk__test_openai_agents_test_ls_agent_type_"
                                          "metadata.yaml"))
    assert outer["run_id"] == ("openai-responses:"
                               "resp_05701bcb26386ffa0069d83bd107cc819d8d7c46cc7623fb9c")
    assert outer["started_at"] == "2026-04-09T23:52:49Z"
    assert outer["input"] == "What is 2 + 2?" and outer["output"] == "2 + 2 equals 4."
    [call] = calls(outer)
    assert (call["tool_name"], call["call_id"]) == ("tool_agent", "call_0txTb47NhHhRw5oKGptF48Wj")
    assert call["arguments"] == {"input": "2 + 2"} and call["result"] == "2 + 2 = 4"
    assert outer["steps"][0] == {"type": "message", "role": "system", "instructions": True,
                                 "content": "You are a helpful assistant. Use the tool_agent "
                                            "tool for math questions."}
    assert [r["id"][:12] for r in outer["metadata"]["responses"]] == ["resp_05701bc"] * 2
    assert outer["metadata"]["usage"] == {"input_tokens": 201, "output_tokens": 28,
                                          "total_tokens": 229}
    assert outer["outcome"] == {"status": "completed"}
    assert nested["input"] == "2 + 2" and nested["output"] == "2 + 2 = 4" and not calls(nested)


def test_handoff_keeps_both_agents_instructions(traces):
    [run] = imported(read(traces, "langsmith-sdk__test_openai_agents_test_ls_agent_type_"
                                  "metadata_for_handoffs.yaml"))
    [call] = calls(run)
    assert call["tool_name"] == "transfer_to_handoff_agent" and call["arguments"] == {}
    assert call["result"] == '{"assistant": "Handoff Agent"}'
    assert [s.get("role", s["type"]) for s in run["steps"]] == [
        "system", "user", "tool_call", "system", "assistant"]
    assert texts(run, "system")[1] == "You are a math expert. Answer math questions concisely."


def test_traceable_decorator_sample(traces):
    [run] = imported(read(traces, "langsmith-sdk__test_openai_agents_test_traceable_decorator_"
                                  "nests_under_agent_trace.yaml"))
    [call] = calls(run)
    assert call["arguments"] == {"a": 5, "b": 3} and call["result"] == "The sum is 8"
    assert call["item"] == {"id": "fc_04e00070cecd19e60069d8380e0f6c81a0a13bbf7d37b46a54",
                            "status": "completed"}
    assert run["output"] == "5 + 3 = 8" and run["metadata"]["model"] == "gpt-4.1-2025-04-14"


def test_a_chat_completions_call_inside_a_tool_is_noted_not_read(traces):
    [run] = imported(read(traces, "langsmith-sdk__test_openai_agents_test_wrap_openai_nests_"
                                  "under_agent_trace.yaml"))
    [call] = calls(run)
    assert call["tool_name"] == "call_openai_helper"
    assert call["result"].startswith("Error: Error code: 401")
    assert run["metadata"]["other_api_calls"] == [
        {"uri": "https://api.openai.com/v1/chat/completions", "http_status": 401,
         "note": "not a Responses API call: not read by openai-responses",
         "format": "openai-chat"}]
    assert len(run["metadata"]["responses"]) == 2


@pytest.mark.parametrize("name, tools, results", [
    ("openinference__agent-framework__test_agent_with_tool_calls.yaml", ["get_weather"],
     ["The weather in San Francisco is sunny and 72°F"]),
    ("openinference__agent-framework__test_multiple_tools.yaml",
     ["get_temperature", "get_humidity"], ["72°F", "65%"]),
])
def test_stateful_calls_join_through_previous_response_id(traces, name, tools, results):
    [run] = imported(read(traces, name))
    assert [c["tool_name"] for c in calls(run)] == tools
    assert [c["result"] for c in calls(run)] == results
    assert [s["role"] for s in run["steps"] if s["type"] == "message"] == [
        "system", "user", "assistant"]
    second = run["metadata"]["responses"][1]["request"]
    assert second["previous_response_id"] == run["metadata"]["responses"][0]["id"]
    assert "other_items" not in run["metadata"]


def test_complex_tool_output_is_kept_as_recorded(traces):
    [run] = imported(read(traces, "openinference__agent-framework__test_tool_with_complex_"
                                  "return_type.yaml", person_from="user"))
    [call] = calls(run)
    assert json.loads(call["result"])["user_id"] == "user123"
    assert "person" not in run  # the recorded `user` is null


def test_a_string_input_and_a_call_never_answered(traces):
    [run] = imported(read(traces, "otel-contrib__test_responses_create_captures_tool_call_"
                                  "content_content_mode0.yaml"))
    assert run["input"] == "What's the weather in Seattle right now?" and "output" not in run
    [call] = calls(run)
    assert call["arguments"] == {"location": "Seattle, WA"}
    assert "result" not in call and "error" not in call  # unrecorded, not a null


def test_run_state_orphan_output_is_kept(traces):
    [run] = imported(read(traces, "openai-agents-python__run_state__v1_11_tool_output_"
                                  "custom_data.json"))
    assert run["input"] == "historical input"
    [orphan] = calls(run)
    assert orphan == {"type": "tool_call", "tool_name": "(unknown)", "orphan_output": True,
                      "call_id": "custom-data-1", "result": "result",
                      "reply": {"run_item": {
                          "agent": {"name": "compat-agent"}, "output": "result",
                          "custom_data": {"ids": ["a", "b"], "ui": {"kind": "chart"}},
                          "type": "tool_call_output_item"}}}
    assert run["metadata"]["agent"] == "compat-agent"
    assert run["metadata"]["run_state"]["$schemaVersion"] == "1.11"


def test_run_state_pending_approval_is_one_call(traces):
    [run] = imported(read(traces, "openai-agents-python__run_state__v1_13_pending_tool_"
                                  "approval.json"))
    [call] = calls(run)
    assert call["tool_name"] == "historical_approval" and call["approval_requested"] is True
    assert call["arguments"] == {"account_id": "account-1"} and "result" not in call
    assert call["approval_item"]["type"] == "tool_approval_item"
    assert run["outcome"] == {"status": "interrupted",
                              "pending_call_ids": ["historical-approval-1"]}


@pytest.mark.parametrize("interruptions", [None, "not a list", {"raw_item": {}}])
def test_run_state_with_damaged_interruptions_is_interrupted_with_none_pending(traces,
                                                                               interruptions):
    """A snapshot whose interruptions are null or not a list (a truncated export) still
    converts: the run is interrupted, and no pending call is named (none can be read)."""
    name = "openai-agents-python__run_state__v1_13_pending_tool_approval.json"
    doc = json.loads((traces / FOLDER / name).read_bytes())
    doc["current_step"]["data"]["interruptions"] = interruptions
    [run] = imported(convert(json.dumps(doc).encode(), "openai-responses", source=name,
                             tenant="t"))
    assert run["outcome"] == {"status": "interrupted", "pending_call_ids": []}


def test_run_state_programmatic_tool_calling(traces):
    [run] = imported(read(traces, "openai-agents-python__run_state__v1_13_programmatic_tool_"
                                  "calling.json"))
    program, lookup = calls(run)
    assert program["tool_name"] == "program" and program["arguments"] == {"code": "lookup()"}
    assert program["result"] == "done"
    assert lookup["tool_name"] == "lookup" and "result" not in lookup
    assert lookup["item"]["caller"] == {"caller_id": "program-call", "type": "program"}


def test_every_sample_imports_or_is_refused(traces):
    files = sorted(p.name for p in (traces / FOLDER).iterdir())
    assert len(files) == 11
    counts = {name: len(imported(read(traces, name))) for name in files}
    assert sum(counts.values()) == 12  # the agent-as-tool cassette holds two runs
    ids = [r["run_id"] for name in files for r in read(traces, name)]
    assert len(set(ids)) == len(ids)
    assert read(traces, files[0]) == read(traces, files[0])  # deterministic


def test_samples_are_detected(traces):
    for path in (traces / FOLDER).glob("*.json"):
        assert openai_responses.detect(json.loads(path.read_bytes()))


# -- detection ---------------------------------------------------------------------------------
@pytest.mark.parametrize("doc", [
    {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
    {"model": "gpt-4o", "input": "hi", "messages": []},
    {"id": "chatcmpl-1", "object": "chat.completion", "choices": []},
    {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude"},
    {"resourceSpans": [{"scopeSpans": []}]},
    {"eval": {"task": "t"}, "samples": []},
    {"id": "r", "run_type": "llm", "inputs": {"input": "hi"}, "outputs": {}},
    {"input": "no model, tools or instructions"},
    {"interactions": []},
    [], "text", 3,
])
def test_other_formats_are_not_claimed(doc):
    assert not openai_responses.detect(doc)


def test_detect_exchange_is_the_responses_endpoint_only():
    assert openai_responses.detect_exchange(Exchange(RESPONSES, {"input": "x"}, None, 200, False))
    assert openai_responses.detect_exchange(
        Exchange("https://x.openai.azure.com/openai/responses?api-version=1", {}, None, 200,
                 False))
    assert not openai_responses.detect_exchange(
        Exchange("https://api.openai.com/v1/chat/completions", {"messages": []}, None, 200,
                 False))
    assert not openai_responses.detect_exchange(Exchange(RESPONSES, None, None, 200, False))


# -- items -------------------------------------------------------------------------------------
def test_unparseable_arguments_are_kept_verbatim():
    run = one(response("resp_1", fcall("c1", arguments="{not json")))
    [call] = calls(run)
    assert call["arguments_raw"] == "{not json" and "not JSON" in call["arguments_error"]
    assert "arguments" not in call


def test_a_reused_call_id_joins_the_nearest_unanswered_call():
    run = one({"model": "m", "input": [said("go", "user"), fcall("c", arguments='{"n":1}'),
                                       fcall("c", arguments='{"n":2}'), freply("c", "second"),
                                       freply("c", "first"), freply("c", "extra")]})
    first, second, orphan = calls(run)
    assert (first["arguments"], first["result"]) == ({"n": 1}, "first")
    assert (second["arguments"], second["result"]) == ({"n": 2}, "second")
    assert orphan["orphan_output"] is True and orphan["result"] == "extra"
    assert orphan["tool_name"] == "(unknown)"


def test_joins_by_call_id_not_item_id():
    run = one({"model": "m", "input": [fcall("c1"), {"type": "function_call_output",
                                                     "call_id": "fc_c1", "output": "x"}]})
    call, orphan = calls(run)
    assert "result" not in call and orphan["call_id"] == "fc_c1"


def test_hosted_and_custom_tools_are_steps():
    run = one(response(
        "resp_2",
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}]},
        {"type": "custom_tool_call", "id": "ctc", "call_id": "k1", "name": "grep", "input": "a|b"},
        {"type": "mcp_call", "id": "mcp_1", "name": "search", "server_label": "docs",
         "arguments": '{"q": "x"}', "output": "found", "error": None},
        {"type": "mcp_call", "id": "mcp_2", "name": "fetch", "server_label": "docs",
         "arguments": "{}", "output": None, "error": "timeout"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed",
         "action": {"type": "search", "query": "cats"}},
        {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["q"],
         "results": None},
        {"type": "computer_call", "id": "cu_1", "call_id": "k2", "status": "completed",
         "action": {"type": "click", "x": 1, "y": 2}, "pending_safety_checks": []},
        {"type": "mcp_list_tools", "id": "ml_1", "server_label": "docs", "tools": []},
        said("done")))
    steps = run["steps"]
    assert steps[0] == {"type": "message", "role": "reasoning", "content": "plan",
                        "item": {"id": "rs_1"}}
    custom, found, failed, web, files, computer = calls(run)
    assert custom["tool_name"] == "grep" and custom["arguments"] == {"input": "a|b"}
    assert (found["tool_name"], found["arguments"], found["result"]) == (
        "search", {"q": "x"}, "found")
    assert failed["error"] == "timeout" and "result" not in failed
    assert failed["item"]["output"] is None  # a null output is kept as recorded, not a result
    assert web["tool_name"] == "web_search" and web["arguments"]["query"] == "cats"
    assert files["arguments"] == {"queries": ["q"]} and "result" not in files
    assert computer["tool_name"] == "computer" and computer["call_id"] == "k2"
    assert run["metadata"]["other_items"] == [
        {"before_step": 7, "item": {"type": "mcp_list_tools", "id": "ml_1",
                                    "server_label": "docs", "tools": []}}]
    assert run["output"] == "done"


def test_custom_and_computer_outputs_join():
    run = one({"model": "m", "input": [
        {"type": "custom_tool_call", "call_id": "k", "name": "grep", "input": "x"},
        {"type": "custom_tool_call_output", "call_id": "k", "output": "hit"},
        {"type": "computer_call", "call_id": "c", "action": {"type": "screenshot"}},
        {"type": "computer_call_output", "call_id": "c", "id": "o1",
         "output": {"type": "computer_screenshot", "image_url": "data:"}},
        {"type": "computer_call_output", "call_id": "zz", "output": {}},
        {"type": "item_reference", "id": "msg_0"}]})
    custom, computer, orphan = calls(run)
    assert custom["result"] == "hit"
    assert computer["result"]["type"] == "computer_screenshot"
    assert computer["reply"] == {"id": "o1"}
    assert orphan["tool_name"] == "computer" and orphan["orphan_output"] is True
    assert run["metadata"]["other_items"][0]["item"]["type"] == "item_reference"


def test_message_parts_that_are_not_text_are_kept():
    image = {"type": "input_image", "image_url": "https://x/y.png"}
    run = one({"model": "m", "instructions": "be brief",
               "input": [{"role": "user", "content": [image, {"type": "input_text",
                                                               "text": "what is it"}]}]})
    system, user = run["steps"]
    assert system == {"type": "message", "role": "system", "content": "be brief",
                      "instructions": True}
    assert user["content"] == "what is it" and user["parts"][0] == image
    assert run["input"] == "what is it" and "output" not in run and "outcome" not in run


def test_response_fields_map():
    run = one(response("resp_3", said("hi"), output_text="hi there", user="u-9",
                       metadata={"user_id": "p-1", "org": "acme"}, status="incomplete",
                       incomplete_details={"reason": "max_output_tokens"}, error=None,
                       usage={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}),
              tenant=None, tenant_from="metadata.org", person_from="metadata.user_id")
    assert (run["tenant"], run["person"]) == ("acme", "p-1")
    assert run["output"] == "hi there" and run["started_at"] == "2026-04-09T23:52:49Z"
    assert run["outcome"] == {"status": "incomplete",
                              "incomplete_details": {"reason": "max_output_tokens"}}
    assert run["metadata"]["usage"] == {"input_tokens": 3, "output_tokens": 4,
                                        "total_tokens": 7}
    assert run["metadata"]["responses"][0]["response"]["user"] == "u-9"


def test_a_pair_document_and_json_lines():
    pair = {"request": {"model": "m", "input": "hi", "user": "u-1"},
            "response": response("resp_4", said("hello"))}
    lines = (json.dumps(pair) + "\n" + json.dumps(response("resp_5", said("x")))).encode()
    first, second = imported(convert(lines, "openai-responses", source="f.jsonl", tenant="t",
                                     person_from="user"))
    assert (first["input"], first["output"], first["person"]) == ("hi", "hello", "u-1")
    assert second["run_id"] == "openai-responses:resp_5"
    array = convert(json.dumps([pair, pair]).encode(), "openai-responses", source="a.json",
                    tenant="t")
    assert len(array) == 2 and array[0] == array[1]


def test_a_request_alone_is_a_run_with_a_content_id():
    run = one({"model": "m", "input": "hello"})
    assert run["run_id"].startswith("openai-responses:") and len(run["run_id"]) == 49
    assert run["steps"] == [{"type": "message", "role": "user", "content": "hello"}]


# -- cassettes ---------------------------------------------------------------------------------
def test_a_streamed_response_is_reassembled_from_response_completed():
    final = response("resp_s", said("streamed answer"))
    sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in [
        {"type": "response.created", "response": {**final, "output": [],
                                                  "status": "in_progress"}},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "streamed"},
        {"type": "response.completed", "response": final}])
    [run] = imported(convert(cassette((RESPONSES, {"model": "m", "input": "q", "stream": True},
                                       sse)), "openai-responses", source="c", container="vcr",
                             tenant="t"))
    assert run["output"] == "streamed answer" and run["outcome"] == {"status": "completed"}
    assert run["metadata"]["responses"][0]["streamed"] is True


def test_a_cut_stream_keeps_what_it_sent():
    events = [
        {"type": "response.created", "response": response("resp_c", status="in_progress")},
        {"type": "response.output_item.done", "output_index": 0, "item": fcall("k")},
        {"type": "response.output_item.added", "output_index": 1,
         "item": {"type": "message", "role": "assistant", "content": []}},
        {"type": "response.output_text.delta", "output_index": 1, "delta": "par"},
        {"type": "response.output_text.delta", "output_index": 1, "delta": "tial"}]
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    [run] = imported(convert(cassette((RESPONSES, {"model": "m", "input": "q"}, sse)),
                             "openai-responses", source="c", container="vcr", tenant="t"))
    assert [c["tool_name"] for c in calls(run)] == ["lookup"] and run["output"] == "partial"
    assert run["outcome"] == {"status": "in_progress", "stream_complete": False}


def test_an_error_reply_is_the_outcome():
    error = {"error": {"message": "bad", "type": "invalid_request_error"}}
    [run] = imported(convert(cassette((RESPONSES, {"model": "m", "input": "q"}, error, 400)),
                             "openai-responses", source="c", container="vcr", tenant="t"))
    assert run["outcome"] == {"error": error["error"], "http_status": 400}
    assert run["metadata"]["responses"][0]["body"] == error


def test_separate_conversations_in_one_cassette():
    data = cassette(
        (RESPONSES, {"model": "m", "input": [said("a", "user")]}, response("resp_a", fcall("x"))),
        (RESPONSES, {"model": "m", "input": [said("b", "user")]}, response("resp_b", said("B"))),
        (RESPONSES, {"model": "m", "input": [said("a", "user"), fcall("x"), freply("x", "X")]},
         response("resp_a2", said("A"))))
    a, b = imported(convert(data, "openai-responses", source="c", container="vcr", tenant="t"))
    assert (a["output"], b["output"]) == ("A", "B") and calls(a)[0]["result"] == "X"


def test_a_server_side_conversation_is_one_run():
    conv = {"id": "conv_1"}
    data = cassette(
        (RESPONSES, {"model": "m", "conversation": conv, "input": "hi"},
         response("resp_x", fcall("k"))),
        (RESPONSES, {"model": "m", "conversation": "conv_1", "input": [freply("k", "42")]},
         response("resp_y", said("it is 42"))))
    [run] = imported(convert(data, "openai-responses", source="c", container="vcr",
                             tenant="t"))
    assert calls(run)[0]["result"] == "42" and run["output"] == "it is 42"
    assert run["run_id"] == "openai-responses:resp_x"


# -- refusals ----------------------------------------------------------------------------------
def test_refusals_name_the_reason():
    with pytest.raises(InvalidArgument, match="expected an OpenAI Responses document") as exc:
        convert(b'{"messages": []}', "openai-responses", source="x.json", tenant="t")
    assert exc.value.reason == "NOT_THIS_FORMAT"
    with pytest.raises(InvalidArgument, match="document 2: expected"):
        convert(b'{"model": "m", "input": "a"}\n{"foo": 1}\n', "openai-responses",
                source="x.jsonl", tenant="t")
    with pytest.raises(InvalidArgument, match="no OpenAI Responses API call"):
        convert(cassette(("https://api.openai.com/v1/chat/completions", {"messages": []}, {})),
                "openai-responses", source="c", container="vcr", tenant="t")
    state = {"$schemaVersion": "2.0", "original_input": "x", "generated_items": []}
    with pytest.raises(InvalidArgument, match="schema version '2.0'"):
        convert(json.dumps(state).encode(), "openai-responses", source="s.json", tenant="t")
    with pytest.raises(InvalidArgument, match="has no tenant") as exc:
        convert(b'{"model": "m", "input": "a"}', "openai-responses", source="x.json")
    assert exc.value.reason == "TENANT_REQUIRED"


# -- properties --------------------------------------------------------------------------------
texts_ = st.text(max_size=12)
ids = st.text("abcdef0123456789", min_size=1, max_size=8)
raw_arguments = st.one_of(st.just("{}"), st.just("{broken"), st.just("[1, 2]"), st.just("7"),
                          st.dictionaries(texts_, st.integers(), max_size=2).map(json.dumps))
items = st.one_of(
    st.builds(said, texts_, st.sampled_from(["user", "assistant", "system", "developer"])),
    st.builds(lambda c, n, a: fcall(c, n, a), ids, st.sampled_from(["f", "g"]), raw_arguments),
    st.builds(freply, ids, st.one_of(texts_, st.just([{"type": "input_text", "text": "t"}]))),
    st.builds(lambda t: {"type": "reasoning", "id": "rs", "summary": [
        {"type": "summary_text", "text": t}]}, texts_),
    st.builds(lambda c, o: {"type": "mcp_call", "id": "m" + c, "name": "s", "arguments": "{}",
                            "server_label": "l", "output": o, "error": None},
              ids, st.one_of(st.none(), texts_)),
    st.builds(lambda i: {"type": "item_reference", "id": i}, ids))
documents = st.one_of(
    st.builds(lambda rid, out, when: response("resp_" + rid, *out, created_at=when),
              ids, st.lists(items, max_size=5), st.integers(0, 2 ** 33)),
    st.builds(lambda inp, instr: {"model": "m", "input": inp, "instructions": instr},
              st.one_of(texts_, st.lists(items, max_size=5)), st.one_of(st.none(), texts_)),
    st.builds(lambda inp, rid, out: {"request": {"model": "m", "input": inp},
                                     "response": response("resp_" + rid, *out)},
              st.lists(items, max_size=4), ids, st.lists(items, max_size=3)))


@settings(max_examples=60, deadline=None)
@given(documents)
def test_every_generated_document_converts_and_imports(doc):
    assert openai_responses.detect(doc)
    data = json.dumps(doc).encode()
    runs = convert(data, "openai-responses", source="g.json", tenant="t")
    assert runs == convert(data, "openai-responses", source="g.json", tenant="t")
    imported(runs)
    for run in runs:
        for step in calls(run):
            assert step.get("orphan_output") or "arguments" in step or "arguments_raw" in step


@settings(max_examples=40, deadline=None)
@given(st.lists(items, min_size=1, max_size=8), st.lists(st.integers(0, 8), max_size=3))
def test_a_recorded_conversation_is_the_run_of_its_items(history, cuts):
    """Calls that re-send the growing history are one run, whose steps are those of the
    items read as one document, whatever the calls' split into input and output."""
    cuts = sorted({min(c, len(history)) for c in cuts} | {len(history)})
    pairs, sent = [], 0
    for n, cut in enumerate(cuts):
        # Each call re-sends all before it and adds items of its own (tool replies, user
        # messages); the model returns the rest up to the cut.
        start = sent + (cut - sent) // 2
        pairs.append((RESPONSES, {"model": "m", "input": history[:start]},
                      response(f"resp_{n}", *history[start:cut])))
        sent = cut
    runs = convert(cassette(*pairs), "openai-responses", source="c", container="vcr",
                   tenant="t")
    whole = one({"model": "m", "input": history})
    assert [r["steps"] for r in imported(runs)] == [whole["steps"]]
