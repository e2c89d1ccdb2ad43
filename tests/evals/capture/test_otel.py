"""The OpenTelemetry span processor (cas/evals/capture/otel.py, extra `otel`): GenAI agent spans
and the spans under them become one capture event, read as the otel-genai importer reads spans,
in both conventions (span attributes, and the older span events); what it submits names no
session or user."""

from __future__ import annotations

import json

from cas.evals.capture import pipeline as capture
from support.evals import ListStore


def test_the_span_processor_turns_genai_agent_spans_into_events():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Status, StatusCode

    store = ListStore()
    capture.register_store("mem", store)
    capture.rule(lambda e: e.failed or e.tool_error, store="mem")
    capture.redactor(lambda r: r)
    provider = TracerProvider()
    from cas.evals.capture.otel import CaptureSpanProcessor
    provider.add_span_processor(CaptureSpanProcessor())
    tracer = provider.get_tracer("test")
    msgs_in = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "refund 7"}]}])
    msgs_out = json.dumps([{"role": "assistant", "parts": [{"type": "text",
                                                            "content": "cannot"}]}])
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
            "gen_ai.conversation.id": "SESSION-X", "user.id": "USER-X"}) as agent:
        with tracer.start_as_current_span("chat", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.input.messages": msgs_in,
                "gen_ai.output.messages": msgs_out}):
            pass
        with tracer.start_as_current_span("execute_tool refund", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund",
                "gen_ai.tool.call.arguments": '{"order": 7}'}) as tool:
            tool.set_status(Status(StatusCode.ERROR, "order closed"))
        agent.set_attribute("error.type", "RefundError")
        agent.set_status(Status(StatusCode.ERROR))
    with tracer.start_as_current_span("invoke_agent ok", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        pass
    provider.force_flush()
    assert capture.flush(5)
    [r] = store.records
    assert (r.agent_name, r.status, r.error_type) == ("support", "failed", "RefundError")
    assert (r.input_text, r.output_text) == ("refund 7", "cannot")
    assert [(t.name, t.failed, t.arguments, t.error) for t in r.tool_calls] == \
        [("refund", True, {"order": 7}, {"status": "error", "message": "order closed"})]
    assert capture.stats()["rejected"] == 1
    from cas.evals.capture.records import format_record
    assert b"SESSION-X" not in format_record(r) and b"USER-X" not in format_record(r)

def test_the_span_processor_reads_the_older_conventions_span_events_too():
    """A model-call span at the root of its trace (as OpenAI's instrumentation emits it), its
    messages as `gen_ai.*.message` span events: read as the otel-genai importer reads them."""
    from opentelemetry.sdk.trace import TracerProvider

    from cas.evals.capture.otel import CaptureSpanProcessor
    store = ListStore()
    capture.register_store("mem", store)
    capture.rule(lambda e: True, store="mem")
    capture.redactor(lambda r: r)
    provider = TracerProvider()
    provider.add_span_processor(CaptureSpanProcessor(agent="chatbot"))
    with provider.get_tracer("t").start_as_current_span("chat gpt-4o", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.system": "openai"}) as span:
        span.add_event("gen_ai.system.message", {"content": "be brief"})
        span.add_event("gen_ai.user.message", {"content": "where is order 7?"})
        span.add_event("gen_ai.assistant.message", {"content": "it shipped"})
    assert capture.flush(5)
    [r] = store.records
    assert (r.agent_name, r.status, r.input_text) == ("chatbot", "completed",
                                                      "where is order 7?")
    assert r.output_text == "it shipped"
