"""Spans as both span importers read them (cas/interop/importers/otlp.py): every export shape
read into one Span, OTLP's typed values, ids and times decoded, traces grouped by content only,
and a failed span's error."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from cas.interop.importers.otlp import (any_value, attributes_of, error_of, iso, nanos, root_first,
                                        same, spans_of, traces)

TRACE = "5b8efff798038103d269b633813fc60c"
OTLP = {"resourceSpans": [{
    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
    "scopeSpans": [{"scope": {"name": "genai", "version": "1.0", "other": "x"}, "spans": [
        {"traceId": "W47/95gDgQPSabYzgT/GDA==", "spanId": "6a3f0c0e1b2d4c5e",
         "name": "chat m-1", "kind": 3, "startTimeUnixNano": "1726490593209236000",
         "endTimeUnixNano": "1726490594000000000", "status": {"code": 2, "message": "boom"},
         "attributes": [{"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
                        {"key": "tags", "value": {"arrayValue": {"values": [
                            {"stringValue": "a"}, {"boolValue": True}]}}}],
         "events": [{"name": "exception", "timeUnixNano": "1726490593500000000",
                     "attributes": [{"key": "exception.type",
                                     "value": {"stringValue": "ValueError"}}]}]}]}]}]}


def test_an_otlp_document_is_read_with_its_resource_scope_ids_times_and_typed_values():
    [span] = spans_of(OTLP)
    assert span.trace_id == TRACE  # protobuf's JSON mapping writes ids as base64
    assert span.span_id == "6a3f0c0e1b2d4c5e" and span.parent_id is None
    assert (span.name, span.kind, span.status, span.status_message) == (
        "chat m-1", "client", "error", "boom")
    assert span.start == 1726490593209236000 and iso(span.start) == "2024-09-16T12:43:13.209236Z"
    assert span.attributes == {"gen_ai.usage.input_tokens": 12, "tags": ["a", True]}
    assert span.resource == {"service.name": "agent"}
    assert span.scope == {"name": "genai", "version": "1.0"}  # other scope members are not kept
    assert span.events == [{"name": "exception", "time": 1726490593500000000,
                            "attributes": {"exception.type": "ValueError"}}]
    assert error_of(span) == {"status": "error", "type": "ValueError", "message": "boom"}


def test_every_export_shape_is_spans_and_anything_else_is_none():
    span = {"name": "tool", "context": {"trace_id": "0xAB", "span_id": "0x01"},
            "parent": {"span_id": "0x02"}, "attributes": {"llm": {"model_name": "m"}},
            "start_time": "2025-01-02T03:04:05.5+01:00", "status_code": "OK"}
    [one] = spans_of(span)
    assert (one.trace_id, one.span_id, one.parent_id) == ("ab", "01", "02")
    assert one.attributes == {"llm.model_name": "m"}  # nested objects flattened into names
    assert iso(one.start) == "2025-01-02T02:04:05.5Z" and one.status == "ok"
    assert spans_of([span, span]) == [one, one]
    [listed] = spans_of({"spans": [span], "run": "r-1"})
    assert listed.document == {"run": "r-1"}  # the envelope's other members are kept
    [named] = spans_of({"refund flow": [span]})
    assert named.document == {"trace_name": "refund flow"}
    [flat] = spans_of({"llm.model_name": "m", "input.value": "hi"})
    assert flat.attributes == {"llm.model_name": "m", "input.value": "hi"}
    for value in ({}, [], "text", 3, {"messages": [{"role": "user"}]}, [span, "x"]):
        assert spans_of(value) is None


def test_any_value_decodes_otlp_values_and_leaves_other_values_as_given():
    assert any_value({"intValue": "-7"}) == -7 and any_value({"intValue": "x"}) == "x"
    assert any_value({"kvlistValue": {"values": [{"key": "k", "value": {"doubleValue": 1.5}}]}}) \
        == {"k": 1.5}
    assert any_value({}) is None
    assert any_value({"a": 1}) == {"a": 1} and any_value([1]) == [1]
    assert attributes_of("not attributes") == {}


def test_times_are_read_by_their_size_or_as_iso_and_nonsense_is_none():
    second = 1_700_000_000
    for recorded in (second, second * 1000, second * 10 ** 6, second * 10 ** 9, str(second),
                     float(second), "2023-11-14T22:13:20Z", "2023-11-14 22:13:20"):
        assert nanos(recorded) == second * 10 ** 9, recorded
    for nonsense in (None, True, "yesterday", "2023-02-30T00:00:00Z", 1e300, [1]):
        assert nanos(nonsense) is None
    assert iso(None) is None and iso(0) == "1970-01-01T00:00:00Z"


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 4_000_000_000 * 10 ** 9))
def test_iso_and_nanos_are_inverse(ns):
    assert nanos(iso(ns)) == ns


def test_traces_depend_only_on_content_and_count_a_span_exported_twice_once():
    def span(trace, sid, parent, start):
        return {"traceId": trace, "spanId": sid, "parentSpanId": parent, "name": sid,
                "startTimeUnixNano": start, "attributes": []}
    raw = [span("aa", "01", None, 10), span("aa", "02", "01", 20), span("bb", "03", None, 5),
           span("aa", "02", "01", 20)]
    spans = spans_of(raw)
    grouped = traces(spans)
    assert [[s.span_id for s in t] for t in grouped] == [["03"], ["01", "02"]]
    shuffled = list(spans)
    random.Random(7).shuffle(shuffled)
    assert traces(shuffled) == grouped
    child_first = list(reversed(grouped[1]))
    assert [s.span_id for s in root_first(child_first)] == ["01", "02"]


def test_two_recordings_of_one_value_agree_when_one_is_the_others_json_text():
    assert same({"a": 1}, '{"a": 1}') and same('[1, 2]', [1, 2]) and same("x", "x")
    assert not same({"a": 1}, '{"a": 2}') and not same("x", "y")


# -- the JS SDK's span JSON and re-sent history (issue 33) -------------------------------------
def test_hrtime_and_span_context_are_read_as_otlp_fields():
    from cas.interop.importers.otlp import spans_of
    assert nanos([1770131992, 242000000]) == 1770131992242000000
    assert nanos([1, 10 ** 9]) is None and nanos([True, 0]) is None and nanos([1, 2, 3]) is None
    [span] = spans_of({"name": "ai.generateText", "attributes": {},
                       "spanContext": {"traceId": "AB" * 16, "spanId": "cd" * 8},
                       "parentSpanContext": {"spanId": "ef" * 8},
                       "startTime": [1, 5], "endTime": [2, 0],
                       "events": [{"name": "e", "time": [1, 7], "attributes": {}}]})
    assert (span.trace_id, span.span_id, span.parent_id) == ("ab" * 16, "cd" * 8, "ef" * 8)
    assert (span.start, span.end, span.events[0]["time"]) == (10 ** 9 + 5, 2 * 10 ** 9,
                                                             10 ** 9 + 7)
    assert span.extra == {}


def test_a_conversation_keeps_one_step_per_call_however_it_is_re_sent():
    from cas.interop.importers.otlp import Conversation, message_of
    ask = message_of("look it up")
    made = message_of({"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "c1", "function": {"name": "find", "arguments": '{"q": "x", "n": 2}'}}]})
    # re-sent: the text block dropped, the arguments re-serialised
    resent = message_of({"role": "assistant", "tool_calls": [
        {"id": "c1", "function": {"name": "find", "arguments": '{"n":2,"q":"x"}'}}]})
    answer = message_of({"role": "tool", "tool_call_id": "c1", "content": "found"})
    final = message_of({"role": "assistant", "content": "It is x."})
    conv = Conversation()
    conv.exchange([ask], [made])
    conv.exchange([ask], [made])          # an outer span over the inner one
    conv.exchange([ask, resent, answer], [final])
    conv.exchange([ask, resent, answer], [final])
    assert [(s["type"], s.get("content"), s.get("call_id"), s.get("result"))
            for s in conv.steps] == [
        ("message", "look it up", None, None), ("message", "Let me look.", None, None),
        ("tool_call", None, "c1", "found"), ("message", "It is x.", None, None)]
    assert conv.orphans == [] and conv.conflicts == []
