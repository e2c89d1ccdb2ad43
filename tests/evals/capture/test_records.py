"""What capture sees and keeps (cas/evals/capture/records.py): when a tool call or an invocation
failed, a record's canonical line and its reading back, and a line that is none refused."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cas.evals.capture.records import (SCHEMA_VERSION, CaptureEvent, CaptureRecord, RecordedTool,
                                       ToolCall, format_record, parse_record)

text = st.text(max_size=12)
records = st.builds(
    CaptureRecord, id=text, captured_at=text, agent_name=text, invocation_id=text,
    reasons=st.tuples(st.sampled_from(["rule", "sample"])), status=st.sampled_from(
        ["completed", "failed"]), error_type=st.none() | text, input_text=text,
    output_text=text, content=st.sampled_from(["omitted", "redacted"]),
    person=st.none() | text,
    tool_calls=st.lists(st.builds(RecordedTool, name=text, failed=st.booleans(),
                                  arguments=st.none() | st.integers()), max_size=2).map(tuple))


def test_a_tool_call_failed_when_it_says_so_in_any_of_three_ways():
    assert not ToolCall(name="t", result={"ok": True}).failed
    assert ToolCall(name="t", error="boom").failed
    assert ToolCall(name="t", status="error").failed
    assert ToolCall(name="t", result={"error": "not found"}).failed
    event = CaptureEvent(agent_name="a", invocation_id="i", tool_calls=(
        ToolCall(name="ok"), ToolCall(name="bad", status="error")))
    assert event.tool_error and not event.failed
    assert CaptureEvent(agent_name="a", invocation_id="i", status="failed").failed


@settings(max_examples=60, deadline=None)
@given(records)
def test_a_record_reads_back_from_its_line(record):
    line = format_record(record)
    assert b"\n" not in line and parse_record(line) == record
    assert record.failed == (record.status == "failed")
    assert record.tool_error == any(t.failed for t in record.tool_calls)


def test_a_line_that_is_no_record_of_this_schema_is_refused():
    record = CaptureRecord(id="r", captured_at="t", agent_name="a", invocation_id="i",
                           reasons=("rule",), status="failed")
    assert record.schema_version == SCHEMA_VERSION
    assert record.replace(input_text="x").input_text == "x" and record.input_text == ""
    newer = format_record(record).replace(b'"schema_version":1', b'"schema_version":2')
    with pytest.raises(msgspec.ValidationError, match="schema_version 2"):
        parse_record(newer)
    with pytest.raises(msgspec.ValidationError):
        parse_record(format_record(record)[:-1] + b',"session_id":"s"}')  # never kept
    with pytest.raises(msgspec.DecodeError):
        parse_record(b'{"id": "torn')
