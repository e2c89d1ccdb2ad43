"""The openinference importer: the real sample traces, the attributes it reads, and properties."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas.errors import InvalidArgument
from cas.interop import importers
from cas.storage.backends.memory import MemoryBackend

NAME = "openinference"

# file -> (runs, tool calls, tool calls with a recorded result, tool calls with an error)
SAMPLES = {
    "openinference-js__openinference_client_span_tool_calls.json": (1, 1, 1, 0),
    "phoenix__pxi_suggestion_traces.json": (3, 12, 12, 0),
    "phoenix__pxi_turn_subagent_trace.json": (1, 19, 19, 0),
    "phoenix__pxi_turn_trace.json": (1, 11, 11, 1),
}


def convert(data: bytes, **kw):
    return importers.convert(data, NAME, source="input", **{"tenant": "t", **kw})


def tools(run):
    return [s for s in run["steps"] if s["type"] == "tool_call"]


def sample(traces, name):
    return (traces / "openinference" / name).read_bytes()


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_sample_imports(traces, name):
    data = sample(traces, name)
    runs = importers.convert(data, NAME, source=name, tenant="t")
    n_runs, n_calls, n_results, n_errors = SAMPLES[name]
    calls = [c for r in runs for c in tools(r)]
    assert (len(runs), len(calls)) == (n_runs, n_calls)
    assert sum("result" in c for c in calls) == n_results
    assert sum("error" in c for c in calls) == n_errors
    repo = cas.Repository.create(MemoryBackend())
    assert repo.import_runs(runs).new == [r["run_id"] for r in runs]
    assert repo.import_runs(convert(data)).unchanged == n_runs
    assert importers.detect(data, name) == NAME  # auto finds this format, and only it


def test_turn_trace(traces):
    [run] = convert(sample(traces, "phoenix__pxi_turn_trace.json"))
    assert run["run_id"] == f"{NAME}:fixture-trace-1"
    assert run["started_at"] == "2026-07-09T00:00:00Z"
    assert run["input"] == "can you save this trace to a dataset?"
    assert run["output"].startswith("Done! I created the dataset")
    calls = tools(run)
    # The earlier turn's calls come from the history the first model call repeats.
    assert [c["call_id"] for c in calls[:3]] == ["call-01", "call-02", "call-03"]
    by_id = {c["call_id"]: c for c in calls}
    assert by_id["call-04"]["tool_name"] == "list_datasets"
    assert by_id["call-04"]["arguments"] == {} and by_id["call-04"]["result"]["hasNextPage"]
    failed = by_id["call-08"]
    assert failed["tool_name"] == "add_spans_to_dataset"
    assert failed["error"]["status"] == "error"
    assert failed["error"]["message"].startswith("Error fetching GraphQL query")
    assert failed["error"]["exception_message"] == "[sanitized exception message]"
    assert run["outcome"]["status"] == "ok"  # the agent recovered; the failed tool is listed
    assert [e["span_id"] for e in run["outcome"]["errors"]] == ["s11"]
    md = run["metadata"]
    assert md["user_id"] == "user@example.com" and md["session_id"] == "fixture-session"
    assert "person" not in run  # a person only from the options
    assert len(md["spans"]) == 18 and "session.id" not in md["spans"][0].get("attributes", {})
    assert md["usage"]["total"] > 0 and md["model"]


def test_person_and_tenant_from_span_attributes(traces):
    data = sample(traces, "phoenix__pxi_turn_trace.json")
    [run] = importers.convert(data, NAME, tenant_from="session.id", person_from="user.id")
    assert run["tenant"] == "fixture-session" and run["person"] == "user@example.com"
    with pytest.raises(InvalidArgument, match="no tenant"):
        importers.convert(data, NAME, tenant_from="org.id")


def test_suggestion_traces_and_subagent(traces):
    runs = convert(sample(traces, "phoenix__pxi_suggestion_traces.json"))
    names = {r["metadata"]["document"]["trace_name"]: r for r in runs}
    assert set(names) == {"accepted_prompt_edit", "rejected_prompt_edit",
                          "mixed_annotation_config"}
    assert names["rejected_prompt_edit"]["outcome"]["status"] == "error"
    assert names["accepted_prompt_edit"]["outcome"] == {"status": "ok"}
    [run] = convert(sample(traces, "phoenix__pxi_turn_subagent_trace.json"))
    by_id = {c["call_id"]: c for c in tools(run)}
    assert by_id["call-02"]["tool_name"] == "call_subagent"  # joined on `tool_call.id`
    assert run["metadata"]["tool_definitions"]


def test_flat_llm_span(traces):
    [run] = convert(sample(traces, "openinference-js__openinference_client_span_tool_calls.json"))
    assert [(s["type"], s.get("role")) for s in run["steps"]] == [
        ("message", "user"), ("message", "assistant"), ("tool_call", None),
        ("message", "assistant")]
    assert tools(run)[0] == {"type": "tool_call", "tool_name": "get_weather",
                             "call_id": "1234", "arguments": {"location": "Paris"},
                             "result": "rainy, 57°F"}


def test_refusals():
    with pytest.raises(InvalidArgument, match="not OpenInference spans"):
        convert(b"[1, 2]")
    with pytest.raises(InvalidArgument, match="no span carries openinference"):
        convert(json.dumps([{"name": "chat", "attributes": {"gen_ai.system": "x"}}]).encode())


# -- properties --------------------------------------------------------------------------------
texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=8)


def llm(i, trace, history, out_call):
    a = {"openinference.span.kind": "LLM", "llm.model_name": "m", "session.id": "s"}
    for n, (role, content, call) in enumerate(history + [out_call]):
        prefix = "llm.output_messages.0" if n == len(history) else f"llm.input_messages.{n}"
        a[f"{prefix}.message.role"] = role
        if content is not None:
            a[f"{prefix}.message.content"] = content
        if call:
            a[f"{prefix}.message.tool_calls.0.tool_call.id"] = call[0]
            a[f"{prefix}.message.tool_calls.0.tool_call.function.name"] = "t"
            a[f"{prefix}.message.tool_calls.0.tool_call.function.arguments"] = call[1]
    return span(i, trace, "llm", "OK", a)


def span(i, trace, name, status, attrs, events=()):
    return {"name": name, "context": {"trace_id": trace, "span_id": f"s{i}"},
            "span_kind": attrs.pop("openinference.span.kind"), "parent_id": None,
            "start_time": f"2026-01-01T00:00:{i:02d}+00:00", "status_code": status,
            "attributes": attrs, "events": list(events)}


@st.composite
def span_sets(draw):
    spans, n = [], 0
    for t in range(draw(st.integers(1, 2))):
        history = [("user", draw(texts), None)]
        for _ in range(draw(st.integers(1, 3))):
            n += 1
            cid = draw(st.sampled_from(["c1", "c2"]))
            args = draw(st.sampled_from(['{"a": 1}', "oops", ""]))
            out = ("assistant", None, (cid, args))
            spans.append(llm(n, f"tr-{t}", history, out))
            history = history + [out]
            if draw(st.booleans()):
                n += 1
                ok = draw(st.booleans())
                spans.append(span(n, f"tr-{t}", "t", "OK" if ok else "ERROR", {
                    "openinference.span.kind": "TOOL", "tool.name": "t", "tool.id": cid,
                    "input.value": args, "output.value": draw(texts)},
                    [] if ok else [{"name": "exception", "attributes": {
                        "exception.message": "boom"}}]))
    return spans


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(span_sets(), st.randoms(use_true_random=False))
def test_generated_spans_convert_deterministically_and_reimport(spans, rnd):
    runs = convert(json.dumps(spans).encode())
    assert len(runs) == len({s["context"]["trace_id"] for s in spans})
    shuffled = list(spans)
    rnd.shuffle(shuffled)
    assert convert(json.dumps(shuffled).encode()) == runs
    for run in runs:
        for call in tools(run):
            assert "arguments" in call or "arguments_raw" in call
    repo = cas.Repository.create(MemoryBackend())
    assert len(repo.import_runs(runs).new) == len(runs)
    assert repo.import_runs(convert(json.dumps(spans).encode())).unchanged == len(runs)
