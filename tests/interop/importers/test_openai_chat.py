"""The openai-chat importer: Chat Completions conversations, tau-bench and tau2-bench results,
and recorded /v1/chat/completions traffic, as runs."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
import cas.interop.importers
from cas.errors import InvalidArgument
from cas.interop.importers import openai_chat as oc
from cas.interop.importers import vcr
from cas.interop.importers.common import Options
from cas.repo.runs import parse_run
from cas.storage.backends.memory import MemoryBackend


def convert(value, **flags):
    data = value if isinstance(value, bytes) else json.dumps(value).encode()
    flags.setdefault("tenant", "t")
    return cas.interop.importers.convert(data, "openai-chat", source="doc.json", **flags)


def imported(runs):
    """Each run passes the run schema, and the runs import into a fresh repository."""
    for run in runs:
        parse_run(run, "$")
    repo = cas.Repository.create(MemoryBackend())
    result = repo.import_runs(runs)
    assert sorted(result.new) == sorted({r["run_id"] for r in runs})
    assert result.warnings == []
    return repo, result


def calls(run):
    return [s for s in run["steps"] if s["type"] == "tool_call"]


def call(name, call_id, arguments):
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


# -- the real samples --------------------------------------------------------------------------
# file: (runs, tool calls, tool calls with a recorded result)
SAMPLES = {
    "openinference__autogen-agentchat__TestAssistantAgent.test_agent_run.yaml": (1, 1, 1),
    "openinference__crewai__test_crewai_instrumentation.yaml": (2, 1, 1),
    "openinference__haystack__test_agent_run_component_spans_True.yaml": (1, 1, 1),
    "openinference__langchain__test_agent_with_raw_dict_messages.yaml": (1, 1, 1),
    "openinference__openai__test_tool_calls.yaml": (1, 4, 2),
    "openinference__pydantic-ai__test_openai_tool_span_instrumentation_v5.yaml": (1, 1, 1),
    "otel-contrib__test_chat_completion_multiple_tools_streaming_with_content.yaml": (1, 2, 0),
    "otel-contrib__test_chat_completion_tool_calls_with_content.yaml": (1, 2, 2),
    "tau-bench__gpt-4o-airline.first50.json": (50, 282, 282),
}


def sample(traces, name, **flags):
    folder = "tau2" if name.startswith("tau2") else "openai-chat"
    flags.setdefault("container", "vcr" if name.endswith(".yaml") else None)
    flags.setdefault("tenant", "t")
    return cas.interop.importers.convert((traces / folder / name).read_bytes(), "openai-chat",
                                 source=name, **flags)


def test_every_sample_file_is_covered(traces):
    names = {p.name for p in (traces / "openai-chat").iterdir()}
    assert names == set(SAMPLES)
    assert [p.name for p in (traces / "tau2").iterdir()] == \
        ["tau2-bench__gpt-4.1_airline_default_gpt-4.1_1trials.json"]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_sample_imports(traces, name):
    runs = sample(traces, name)
    n_runs, n_calls, n_results = SAMPLES[name]
    assert len(runs) == n_runs
    assert sum(len(calls(r)) for r in runs) == n_calls
    assert sum("result" in s for r in runs for s in calls(r)) == n_results
    assert all("arguments" in s for r in runs for s in calls(r))  # every argument string parsed
    repo, _ = imported(runs)
    assert repo.import_runs(sample(traces, name)).unchanged == n_runs  # a re-import: a no-op
    if name.endswith(".yaml"):
        assert all(r["run_id"].startswith("openai-chat:chatcmpl-") for r in runs)
        assert all(r["started_at"].endswith("Z") for r in runs)
        assert all(r["outcome"]["finish_reason"] in ("stop", "tool_calls") for r in runs)


def test_tau_bench_sample(traces):
    runs = sample(traces, "tau-bench__gpt-4o-airline.first50.json",
                  person_from="info.task.user_id")
    first = runs[0]
    assert first["run_id"].startswith("openai-chat:tau-bench:0:0:")
    assert first["person"] == "mia_li_3668"
    assert first["input"] == "Hi! I'm looking to book a flight from New York to Seattle on May 20th."
    assert [s["role"] for s in first["steps"][:3]] == ["system", "user", "assistant"]
    assert first["outcome"]["reward"] == 0.0 and "r_actions" in first["outcome"]["reward_info"]["info"]
    assert first["metadata"]["task"]["user_id"] == "mia_li_3668"
    assert first["metadata"]["info"] == {"source": "user", "user_cost": 0.0035475000000000003}
    steps = calls(first)
    # call_oIHazX6y... is used twice: each reply joins the nearest unanswered call.
    assert [s["tool_name"] for s in steps[:4]] == ["get_user_details", "search_direct_flight",
                                                   "search_onestop_flight", "calculate"]
    assert steps[0]["call_id"] == steps[3]["call_id"]
    assert steps[0]["result"].startswith('{"name": {"first_name": "Mia"')
    assert steps[3]["result"] == "255.0"
    assert steps[3]["arguments"] == {"expression": "152 + 103"}
    # tau-bench's error strings stay the result; no error is guessed from them.
    failed = steps[4]
    assert failed["result"].startswith("Error: payment amount does not add up")
    assert "error" not in failed
    errors = [s for r in runs for s in calls(r) if str(s["result"]).startswith("Error")]
    assert len(errors) == 17 and not any("error" in s for s in errors)
    assert sum(r["outcome"]["reward"] for r in runs) == 21.0
    assert len({r["run_id"] for r in runs}) == 50


def test_tau2_sample(traces):
    name = "tau2-bench__gpt-4.1_airline_default_gpt-4.1_1trials.json"
    runs = sample(traces, name)
    assert len(runs) == 20
    assert sum(len(calls(r)) for r in runs) == 148
    assert all(("result" in s) != ("error" in s) and isinstance(s["arguments"], dict)
               for r in runs for s in calls(r))
    failed = [s for r in runs for s in calls(r) if "error" in s]
    # One rule across importers (docs/runs.md): a failed call's reply is its error, only.
    assert len(failed) == 1 and failed[0]["error"].startswith("Error: Payment amount")
    assert "result" not in failed[0]
    first = runs[0]
    assert first["run_id"] == "openai-chat:tau2:b762699f-cf72-4a2f-b500-5bbe1258209c"
    assert first["started_at"] == "2025-08-01T16:20:44.321269"
    assert first["outcome"]["reward"] == 1.0
    assert first["outcome"]["termination_reason"] == "user_stop"
    assert first["metadata"]["model"] == "gpt-4.1"
    assert first["metadata"]["task"]["id"] == "13"
    step = calls(first)[0]
    assert step["tool_name"] == "get_user_details" and step["call"] == {"requestor": "assistant"}
    assert step["reply"]["requestor"] == "assistant" and "turn_idx" in step["reply"]
    assert not any("tool_calls" in s for s in first["steps"])
    assert sum(r["outcome"]["reward"] for r in runs) == 10.0
    repo, _ = imported(runs)
    assert repo.import_runs(sample(traces, name)).unchanged == 20


def test_streamed_tool_calls_are_reassembled_and_unrecorded(traces):
    run, = sample(traces, "otel-contrib__test_chat_completion_multiple_tools_streaming_with_"
                          "content.yaml")
    steps = calls(run)
    assert [s["arguments"] for s in steps] == [{"location": "Seattle, WA"},
                                               {"location": "San Francisco, CA"}]
    assert [s["call_id"] for s in steps] == ["call_fHCjJqt9Pysde6vcJcvbXGBx",
                                             "call_3J9foSw3CUb48lrqIXoTky6U"]
    assert not any("result" in s for s in steps)  # never answered: unrecorded, not null
    assert run["output"] is None and run["outcome"] == {"finish_reason": "tool_calls"}
    assert run["metadata"]["usage"]["total_tokens"] == 126
    assert run["metadata"]["calls"][0]["chunks"] == 18
    assert run["started_at"] == "2024-11-11T23:44:01Z"


def test_cassette_history_and_conversations(traces):
    run, = sample(traces, "openinference__openai__test_tool_calls.yaml")
    assert run["input"] == "What's the weather and population in San Francisco?"
    steps = calls(run)
    assert [("result" in s) for s in steps] == [True, True, False, False]
    assert steps[0]["result"] == '{"city": "New York", "weather": "fine"}'
    crew = sample(traces, "openinference__crewai__test_crewai_instrumentation.yaml")
    assert [len(r["metadata"]["calls"]) for r in crew] == [2, 1]
    assert crew[0]["steps"][-1]["content"].startswith("The world as we have created it")
    assert [s["role"] for s in crew[0]["steps"] if s["type"] == "message"] == \
        ["system", "user", "assistant", "user", "assistant"]
    streamed, = sample(traces, "openinference__langchain__test_agent_with_raw_dict_messages.yaml")
    assert streamed["output"] == "The weather in London is sunny."
    assert calls(streamed)[0]["result"] == "The weather in London is sunny."


# -- documents ---------------------------------------------------------------------------------
CONVERSATION = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "weather in Paris?"},
    {"role": "assistant", "content": None,
     "tool_calls": [call("weather", "c1", '{"city": "Paris"}'), call("clock", "c2", "{oops")]},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    {"role": "assistant", "content": "It is sunny."},
]


def test_message_array():
    run, = convert(CONVERSATION)
    assert run["run_id"].startswith("openai-chat:") and len(run["run_id"]) == 12 + 32
    assert run["input"] == "weather in Paris?" and run["output"] == "It is sunny."
    assert [s["type"] for s in run["steps"]] == ["message", "message", "message", "tool_call",
                                                 "tool_call", "message"]
    weather, clock = calls(run)
    assert weather == {"type": "tool_call", "tool_name": "weather", "arguments": {"city": "Paris"},
                       "call_id": "c1", "result": "sunny"}
    # arguments that are not JSON are kept verbatim, flagged; the call got no reply
    assert clock["arguments_raw"] == "{oops" and clock["arguments_error"].startswith("not JSON")
    assert "arguments" not in clock and "result" not in clock
    assert "tool_calls" not in run["steps"][2]
    assert "outcome" not in run and "started_at" not in run
    imported([run])


def test_json_lines_and_arrays_of_documents():
    lines = b"\n".join(json.dumps(d).encode() for d in (CONVERSATION, CONVERSATION[:2]))
    assert len(convert(lines)) == 2
    assert len(convert([CONVERSATION, CONVERSATION[:2]])) == 2
    assert convert([CONVERSATION])[0] == convert(CONVERSATION)[0]


RESPONSE = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000,
            "model": "gpt-4o-2024", "system_fingerprint": "fp",
            "choices": [{"index": 0, "logprobs": None, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "hi!", "refusal": None}}],
            "usage": {"total_tokens": 3}}
REQUEST = {"model": "gpt-4o", "temperature": 0, "user": "acme",
           "messages": [{"role": "user", "content": "hello"}],
           "tools": [{"type": "function", "function": {"name": "f"}}]}


@pytest.mark.parametrize("document", [
    {"request": REQUEST, "response": RESPONSE},
    {**REQUEST, "response": RESPONSE},
    {**REQUEST, **{k: v for k, v in RESPONSE.items() if k != "model"}},
], ids=["request-response", "body-response", "body-choices"])
def test_request_with_response(document):
    run, = convert(document, tenant=None, tenant_from="user")
    run.pop("metadata")
    assert run == {"run_id": "openai-chat:chatcmpl-1", "tenant": "acme",
                   "input": "hello", "output": "hi!", "started_at": "2023-11-14T22:13:20Z",
                   "outcome": {"finish_reason": "stop"},
                   "steps": [{"type": "message", "role": "user", "content": "hello"},
                             {"type": "message", "role": "assistant", "content": "hi!",
                              "refusal": None}]}
    meta = convert(document)[0]["metadata"]
    assert meta["model"] == "gpt-4o" and meta["tools"] == REQUEST["tools"]
    assert meta["usage"] == {"total_tokens": 3}
    assert meta["request"] == {"temperature": 0, "user": "acme"}
    assert meta["response"]["system_fingerprint"] == "fp"
    assert meta["choice"] == {"index": 0, "logprobs": None}


def test_tenant_from_request_field():
    run, = convert({"request": REQUEST, "response": RESPONSE}, tenant=None,
                   tenant_from="request.user")
    assert run["tenant"] == "acme"
    with pytest.raises(InvalidArgument, match="no tenant") as exc:
        convert(CONVERSATION, tenant=None)
    assert exc.value.reason == "TENANT_REQUIRED"


def test_custom_legacy_and_orphan_calls():
    run, = convert([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "x1", "type": "custom", "custom": {"name": "shell", "input": "ls -l"}}]},
        {"role": "tool", "tool_call_id": "x1", "content": "a.txt"},
        {"role": "assistant", "content": None,
         "function_call": {"name": "lookup", "arguments": '{"q": 1}'}},
        {"role": "function", "name": "lookup", "content": "42"},
        {"role": "tool", "tool_call_id": "nobody", "content": "stray"},
        {"role": "assistant", "content": "done"},
    ])
    shell, lookup = calls(run)
    assert shell == {"type": "tool_call", "tool_name": "shell", "call_type": "custom",
                     "arguments": {"input": "ls -l"}, "call_id": "x1", "result": "a.txt"}
    assert lookup == {"type": "tool_call", "tool_name": "lookup", "call_type": "function_call",
                      "arguments": {"q": 1}, "result": "42"}
    orphan = run["steps"][-2]
    assert orphan == {"type": "message", "role": "tool", "tool_call_id": "nobody",
                      "content": "stray", "orphan_reply": True}
    parse_run(run, "$")


@pytest.mark.parametrize("document, hint", [
    ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}],
     "anthropic"),
    ({"model": "claude", "system": "s", "messages": [{"role": "user", "content": "hi"}]},
     "anthropic"),
    ([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}],
     "openai-responses"),
    ({"input": [{"role": "user", "content": "hi"}], "model": "gpt-4.1"}, "openai-responses"),
    ({"resourceSpans": []}, "otel-genai"),
    ({"eval": {}, "samples": []}, "inspect"),
    ({"post": [], "patch": []}, "langsmith"),
    ({"messages": [{"role": "user", "content": "hi"}], "input": "x", "epoch": 1}, ""),
    ([], ""), ({"role": "user"}, ""), (3, ""),
])
def test_other_documents_are_refused(document, hint):
    assert not oc.detect(document)
    with pytest.raises(InvalidArgument, match="not an openai-chat document") as exc:
        convert(document)
    assert exc.value.reason == "NOT_THIS_FORMAT"
    assert f"--format {hint}" in str(exc.value) if hint else "expected" in str(exc.value)


def test_bare_text_conversation_is_claimed():
    assert oc.detect([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])


# -- recorded traffic --------------------------------------------------------------------------
def chunk(choices, **more):
    return {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1,
            "model": "m", "choices": choices, "obfuscation": "pad", **more}


def test_stream_reassembly_interleaved():
    chunks = [
        chunk([{"index": 0, "delta": {"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": ""}},
            {"index": 1, "id": "b", "type": "function", "function": {"name": "g", "arguments": ""}}
        ]}}]),
        chunk([{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": '{"y"'}},
                                                     {"index": 0, "function": {"arguments": '{"x"'}}]}}]),
        chunk([{"index": 0, "delta": {"content": "ok", "tool_calls": [
            {"index": 0, "function": {"arguments": ": 1}"}},
            {"index": 1, "function": {"arguments": ": 2"}}]}}]),
        chunk([{"index": 0, "delta": {"content": "!"}, "finish_reason": "tool_calls"}]),
        chunk([], usage={"total_tokens": 9}),
    ]
    response = oc.reassemble(chunks)
    message = response["choices"][0]["message"]
    assert message["content"] == "ok!" and response["usage"] == {"total_tokens": 9}
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == ['{"x": 1}', '{"y": 2']
    assert response["choices"][0]["finish_reason"] == "tool_calls"
    assert "obfuscation" not in response
    exchange = vcr.Exchange("https://api.openai.com/v1/chat/completions",
                            {"model": "m", "messages": [{"role": "user", "content": "q"}]},
                            chunks, 200, True)
    run, = oc.convert_exchanges([exchange], Options(tenant="t"), "c.yaml")
    f, g = calls(run)
    assert f["arguments"] == {"x": 1} and "result" not in f
    assert g["arguments_raw"] == '{"y": 2' and "arguments_error" in g
    assert run["output"] == "ok!" and run["run_id"] == "openai-chat:chatcmpl-s"
    imported([run])


def test_cassette_without_chat_calls_is_refused(traces):
    data = (traces / "openai-responses" /
            "openinference__agent-framework__test_multiple_tools.yaml").read_bytes()
    with pytest.raises(InvalidArgument, match="no Chat Completions call") as exc:
        cas.interop.importers.convert(data, "openai-chat", source="r.yaml", container="vcr", tenant="t")
    assert exc.value.reason == "NOT_THIS_FORMAT"


# -- properties --------------------------------------------------------------------------------
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
names = st.text("abcdefgh_", min_size=1, max_size=8)
ids = st.sampled_from(["c1", "c2", "c3"])
arguments = st.one_of(st.just(""), st.just("{oops"), st.just("[1]"), st.just("7"),
                      st.dictionaries(names, st.integers() | text, max_size=2).map(json.dumps))


@st.composite
def conversations(draw):
    messages = [{"role": "system", "content": draw(text)}] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(1, 4))):
        messages.append({"role": "user", "content": draw(text)})
        tool_calls = draw(st.lists(st.builds(call, names, ids, arguments), max_size=3))
        assistant = {"role": "assistant", "content": draw(st.none() | text)}
        if tool_calls:
            assistant["tool_calls"] = tool_calls
        messages.append(assistant)
        for c in tool_calls:
            if draw(st.booleans()):
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": draw(text)})
    if draw(st.booleans()):
        return {"model": draw(names), "messages": messages,
                "response": {"id": "chatcmpl-" + draw(names), "created": draw(st.integers(0, 2**31)),
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": draw(text)}}]}}
    return messages


@settings(max_examples=25, deadline=None)
@given(conversations())
def test_generated_documents_convert_and_import(document):
    assert oc.detect(document)
    runs = convert(document)
    assert runs == convert(document)  # deterministic
    messages = document["messages"] if isinstance(document, dict) else document
    made = sum(len(m.get("tool_calls", [])) for m in messages)
    assert len(calls(runs[0])) == made
    assert sum("result" in s for s in calls(runs[0])) == sum(m["role"] == "tool" for m in messages)
    repo, _ = imported(runs)
    again = repo.import_runs(convert(document))
    assert again.new == [] and again.unchanged == 1


# -- re-sent history in real cassettes (resent-history/, SOURCES.md section 11) ----------------
RESENT = "resent-history"


def _requested_call_ids(path) -> list:
    """The tool call ids a cassette's requests re-send, read straight from its YAML (the
    requests are plain JSON text): every call the agent made before its last model call."""
    import yaml
    ids = []
    for item in yaml.safe_load(path.read_bytes())["interactions"]:
        body = item["request"]["body"]
        body = json.loads(body if isinstance(body, str) else body["string"]) if body else {}
        for m in body.get("messages", []):
            for c in m.get("tool_calls") or []:
                if c["id"] not in ids:
                    ids.append(c["id"])
    return ids


def _resent(traces, name, **flags):
    path = traces / RESENT / name
    warnings = []
    runs = cas.interop.importers.convert(path.read_bytes(), "auto", source=name,
                                         container="vcr", tenant="t", warnings=warnings,
                                         **flags)
    assert cas.interop.importers.convert(path.read_bytes(), "auto", source=name,
                                         container="vcr", tenant="t") == runs  # deterministic
    imported(runs)
    return path, runs, warnings


def _tool_steps(run):
    return [s for s in run["steps"] if s["type"] == "tool_call"]


def test_handoff_with_a_swapped_system_prompt_is_one_run_each_call_once(traces):
    # openai-agents over Chat Completions: re-sent turns drop `content: null`, `refusal` and
    # `annotations`; after the handoff the system message is another (gzip bodies).
    path, runs, warnings = _resent(
        traces, "dd-trace-py__test_multiple_agent_handoffs_with_chat_completions.yaml")
    assert warnings == []
    [run] = runs
    calls = _tool_steps(run)
    assert [s["call_id"] for s in calls] == _requested_call_ids(path) == [
        "call_k6xSe8DDrNWlYd3qXE33Wpne", "call_DWMUN54cICFrLaJPfjs6e3fv"]
    assert [(s["tool_name"], s["arguments"]) for s in calls] == [
        ("research", {"query": "soccer news October 16 2023"}), ("transfer_to_summarizer", {})]
    assert calls[0]["result"].startswith("united beat liverpool 2-1 yesterday.")
    assert calls[1]["result"] == "{'assistant': 'Summarizer'}"
    assert run["output"].startswith("Based on yesterday's soccer events as of October 16")
    assert run["run_id"] == "openai-chat:chatcmpl-BIRrcmEy8SRot3jos1w6JGitFyZpW"
    assert run["started_at"] == "2025-04-04T03:18:30Z"
    # the first agent's system prompt, which the last request no longer sends, is kept
    first = run["metadata"]["calls"][0]["messages"]
    assert first[0]["role"] == "system" and first[0]["content"] != run["steps"][0]["content"]


def test_interleaved_team_conversations_are_three_runs_each_call_once(traces):
    # agno: the leader's two calls (interactions 0 and 7) around two member conversations;
    # re-sent turns have `content: ""` for null, keys reordered; 3 telemetry POSTs.
    path, runs, warnings = _resent(traces, "openinference__agno__team_coordinate_run.yaml")
    lead, income, outlook = runs
    assert [[s["tool_name"] for s in _tool_steps(r)] for r in runs] == [
        ["delegate_task_to_member"] * 2, ["get_income_statements", "get_key_financial_ratios"],
        ["get_analyst_recommendations", "get_company_news"]]
    all_ids = [s["call_id"] for r in runs for s in _tool_steps(r)]
    assert sorted(all_ids) == sorted(_requested_call_ids(path))  # each once, none lost
    assert all("result" in s for r in runs for s in _tool_steps(r))
    # the leader's tool results are the members' final answers
    assert [s["result"] for s in _tool_steps(lead)] == [income["output"], outlook["output"]]
    assert lead["output"].startswith("Here is the financial performance data and market "
                                     "outlook for NVIDIA")
    assert lead["input"] == "What's the market outlook and financial performance of NVIDIA?"
    assert [w.message for w in warnings] == [
        f"interactions[{i}] (https://os-api.agno.com/telemetry/runs) is not read by "
        "openai-chat (not a call of its API): not imported" for i in (3, 6, 8)]
    assert {(w.source, w.run_id) for w in warnings} == {
        ("openinference__agno__team_coordinate_run.yaml", None)}


def test_react_text_agents_re_sending_an_observation_in_the_turn(traces):
    # CrewAI: the re-sent assistant text has `Observation: 14.0` appended (gzip responses);
    # call 3 is another agent's own conversation. Its tools are ReAct text, not API calls.
    path, runs, warnings = _resent(traces, "dd-trace-py__crewai__test_crew_with_async_tasks.yaml")
    assert warnings == [] and _requested_call_ids(path) == []
    analyst, guide = runs
    assert [s["role"] for s in analyst["steps"]] == ["system", "user", "assistant", "assistant"]
    assert "Action: Average Calculator" in analyst["steps"][2]["content"]
    assert "Observation: 14.0" in analyst["steps"][2]["content"]  # as the client re-sent it
    assert analyst["output"].endswith("Final Answer: The average age of the participants is "
                                      "14.0 years.")
    assert guide["output"].startswith("I now can give a great answer.")
    assert all(_tool_steps(r) == [] for r in runs)


def test_dspy_react_calls_that_re_send_no_assistant_turn(traces):
    # DSPy folds earlier outputs into the next user prompt: nothing is re-sent as a turn, so
    # each model call is a run of its own (three, none with an API tool call).
    _, runs, warnings = _resent(traces, "openinference__dspy__test_react_True.yaml")
    assert warnings == [] and len(runs) == 3
    assert [r["output"].split("\n")[0] for r in runs] == [
        "[[ ## next_thought ## ]]", "[[ ## next_thought ## ]]", "[[ ## reasoning ## ]]"]


@pytest.mark.parametrize("name", [
    "openinference__google-adk__test_google_adk_instrumentor_multi_agent.yaml",
    "openinference__google-adk__test_google_adk_instrumentor_multi_tool_call.yaml"])
def test_gemini_traffic_is_refused_saying_what_it_is(traces, name):
    with pytest.raises(InvalidArgument) as info:
        _resent(traces, name)
    assert info.value.reason == "FORMAT_UNKNOWN"
    assert info.value.fields["looks_like"] == ("it records Google Gemini (generateContent) "
                                               "traffic, which no importer reads")


def test_a_refusal_is_the_runs_output_and_stays_on_its_step():
    doc = {"messages": [{"role": "user", "content": "how do I pick a lock?"}],
           "response": {"id": "chatcmpl-r", "choices": [{"index": 0, "finish_reason": "stop",
                                                         "message": {"role": "assistant",
                                                                     "content": None,
                                                                     "refusal": "I can't."}}]}}
    [run] = convert(doc, tenant="t")
    assert run["output"] == "I can't."
    assert run["steps"][-1] == {"type": "message", "role": "assistant", "content": None,
                                "refusal": "I can't."}


def test_a_final_response_that_could_not_be_read_is_said_in_outcome_and_warning():
    uri = "https://api.openai.com/v1/chat/completions"
    cassette = {"interactions": [{
        "request": {"method": "POST", "uri": uri, "body": json.dumps(
            {"model": "m", "messages": [{"role": "user", "content": "hi"}]})},
        "response": {"status": {"code": 200}, "headers": {}, "body": {"string": "<html>"}}}]}
    warnings = []
    [run] = cas.interop.importers.convert(json.dumps(cassette).encode(), "openai-chat",
                                          container="vcr", source="c.json", tenant="t",
                                          warnings=warnings)
    assert run["outcome"] == {"response_unread": "its body is not JSON"}
    assert run["output"] is None
    assert [(w.source, w.run_id, w.message) for w in warnings] == [
        ("c.json", run["run_id"], f"the final response ({uri}) could not be read: its body is "
         "not JSON; the run ends at its last request")]


def test_an_earlier_response_that_could_not_be_read_is_named_in_a_warning():
    uri = "https://api.openai.com/v1/chat/completions"
    ask = [{"role": "user", "content": "hi"}]
    turn = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}
    second = ask + [turn, {"role": "tool", "tool_call_id": "c1", "content": "a b"}]
    answer = {"id": "chatcmpl-2", "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant",
                                                           "content": "a and b"}}]}
    cassette = {"interactions": [
        {"request": {"method": "POST", "uri": uri, "body": json.dumps({"messages": ask})},
         "response": {"status": {"code": 200}, "headers": {}, "body": {"string": "oops"}}},
        {"request": {"method": "POST", "uri": uri, "body": json.dumps({"messages": second})},
         "response": {"status": {"code": 200}, "headers": {},
                      "body": {"string": json.dumps(answer)}}}]}
    warnings = []
    [run] = cas.interop.importers.convert(json.dumps(cassette).encode(), "openai-chat",
                                          container="vcr", source="c.json", tenant="t",
                                          warnings=warnings)
    assert [(s.get("call_id"), s.get("result")) for s in run["steps"]
            if s["type"] == "tool_call"] == [("c1", "a b")]
    assert run["output"] == "a and b" and run["outcome"] == {"finish_reason": "stop"}
    assert [(w.run_id, w.message) for w in warnings] == [
        (run["run_id"], f"the response to call 1 of 2 ({uri}) could not be read: its body is "
         "not JSON; its turn is as the next request re-sent it")]
