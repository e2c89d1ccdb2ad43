"""An OpenTelemetry span processor that turns GenAI agent spans into capture events, so a team
that already traces its agent captures without new code (docs/capture.md)."""

from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from typing import Any

try:
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.trace import StatusCode
except ImportError as exc:  # an extra: say which
    from cas.errors import FailedPrecondition
    raise FailedPrecondition("the capture span processor needs the OpenTelemetry SDK, from the "
                             "`otel` extra: pip install '.[otel]' in the cas checkout",
                             reason="EXTRA_REQUIRED",
                             extra="otel") from exc

import msgspec

from cas.evals.capture import pipeline as capture
from cas.evals.capture.records import COMPLETED, FAILED, CaptureEvent, ToolCall
from cas.interop.importers.otel_genai import AGENT_OPS, ARGUMENT_KEYS, RESULT_KEYS

OPERATION = "gen_ai.operation.name"
TOOL_OPS = {"execute_tool"}
SESSION_KEYS = ("gen_ai.conversation.id", "session.id")
USER_KEYS = ("user.id", "enduser.id")
MAX_TRACES = 1000       # traces whose GenAI spans wait for their agent span to end
MAX_SPANS = 512         # spans kept per trace


def _first(attrs: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in attrs and attrs[key] not in (None, ""):
            return attrs[key]
    return None


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, tuple):
        return list(value)
    return value


def _texts(messages: Any, roles: tuple[str, ...]) -> list[str]:
    """The text of the messages of `roles`: GenAI `parts` ({"type": "text", "content"}), or a
    plain `content` string."""
    out = []
    for m in messages if isinstance(messages, list) else []:
        if not isinstance(m, dict) or m.get("role") not in roles:
            continue
        if isinstance(m.get("content"), str):
            out.append(m["content"])
        for part in m.get("parts") or []:
            if isinstance(part, dict) and part.get("type") == "text" and \
                    isinstance(part.get("content"), str):
                out.append(part["content"])
    return out


def _error_type(span) -> str | None:
    attrs = span.attributes or {}
    if attrs.get("error.type"):
        return str(attrs["error.type"])
    for event in span.events or ():
        if event.name == "exception" and (event.attributes or {}).get("exception.type"):
            return str(event.attributes["exception.type"])
    if span.status is not None and span.status.status_code is StatusCode.ERROR:
        return "error"
    return None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_text_of(p.get("text", p.get("content")))
                                     if isinstance(p, dict) else _text_of(p)
                                     for p in content) if t)
    return ""


def _conversation(root, members: list) -> tuple[str, str, tuple[ToolCall, ...]] | None:
    """(input text, output text, tool calls) of the spans as a run the otel-genai importer
    converts them to, or None when it cannot read them."""
    from cas.interop.importers import convert
    try:
        docs = [json.loads(s.to_json()) for s in (*members, root)]
        runs = convert(json.dumps(docs).encode(), "otel-genai", source="capture spans",
                       tenant="capture")
    except Exception:
        return None
    if len(runs) != 1:
        return None
    steps = runs[0].get("steps") or []
    messages = [m for m in steps if m.get("type") == "message"]
    users = [_text_of(m.get("content")) for m in messages if m.get("role") == "user"]
    replies = [_text_of(m.get("content")) for m in messages if m.get("role") == "assistant"]
    tools = tuple(ToolCall(name=str(t.get("tool_name") or "tool"),
                           arguments=t.get("arguments"), result=t.get("result"),
                           error=t.get("error"), status="error" if t.get("error") else None)
                  for t in steps if t.get("type") == "tool_call")
    first = runs[0].get("input")
    last = runs[0].get("output")
    return (first if isinstance(first, str) else next((u for u in users if u), ""),
            last if isinstance(last, str) else next((r for r in reversed(replies) if r), ""),
            tools)


class CaptureSpanProcessor(SpanProcessor):
    """Add to a TracerProvider (`provider.add_span_processor(CaptureSpanProcessor())`). GenAI
    spans (those with `gen_ai.operation.name`) wait, per trace, until the agent span they
    belong to ends (`invoke_agent`, `create_agent`, `invoke_workflow`, or a GenAI span that is
    the root of its trace); that span and the spans under it become one CaptureEvent, built
    in the capture worker (`event_of`), and are submitted with `cas.capture.submit`."""

    def __init__(self, agent: str | None = None) -> None:
        self.agent = agent  # the agent name when the spans do not give one
        self._traces: OrderedDict[int, list] = OrderedDict()
        self._lock = threading.Lock()

    def on_start(self, span, parent_context=None) -> None:
        return None

    def on_end(self, span) -> None:
        try:
            attrs = span.attributes or {}
            op = attrs.get(OPERATION)
            if op is None:
                return
            trace_id = span.context.trace_id
            with self._lock:
                spans = self._traces.setdefault(trace_id, [])
                self._traces.move_to_end(trace_id)
                if len(spans) < MAX_SPANS:
                    spans.append(span)
                while len(self._traces) > MAX_TRACES:
                    self._traces.popitem(last=False)
                if op not in AGENT_OPS and span.parent is not None:
                    return  # a part of an invocation: its agent span ends later
                members = self._take(trace_id, span)
            # built by the capture worker, not here: on_end runs in the traced code's thread
            capture.submit(functools.partial(self.event_of, span, members))
        except Exception:  # tracing must never break the traced code
            return None

    def _take(self, trace_id: int, root) -> list:
        """The buffered spans under `root` (children end first), removed from the buffer."""
        spans = self._traces.get(trace_id, [])
        parent_of = {s.context.span_id: (s.parent.span_id if s.parent else None) for s in spans}
        rid = root.context.span_id

        def under(sid) -> bool:
            seen = set()
            while sid is not None and sid not in seen:
                if sid == rid:
                    return True
                seen.add(sid)
                sid = parent_of.get(sid)
            return False
        members = [s for s in spans if s is not root and under(s.context.span_id)]
        rest = [s for s in spans if s is not root and s not in members]
        if rest:
            self._traces[trace_id] = rest
        else:
            self._traces.pop(trace_id, None)
        return sorted(members, key=lambda s: s.start_time or 0)

    def event_of(self, root, members: list) -> CaptureEvent:
        """The event of an agent span and the GenAI spans under it. The conversation and the
        tool calls are read as the otel-genai importer reads spans (every version of the
        GenAI conventions it knows: attributes, span events); its own reading of
        `gen_ai.*.messages` and `execute_tool` spans is the fallback."""
        read = _conversation(root, members)
        event = self._attribute_event(root, members)
        if read is None:
            return event
        input_text, output_text, tools = read
        return msgspec.structs.replace(event, input_text=input_text or event.input_text,
                                       output_text=output_text or event.output_text,
                                       tool_calls=tools or event.tool_calls)

    def _attribute_event(self, root, members: list) -> CaptureEvent:
        attrs = dict(root.attributes or {})
        tools = []
        inputs: list[str] = []
        outputs: list[str] = []
        for s in members:
            a = s.attributes or {}
            if a.get(OPERATION) in TOOL_OPS:
                failed = _error_type(s)
                tools.append(ToolCall(
                    name=str(a.get("gen_ai.tool.name") or s.name),
                    arguments=_json(_first(a, ARGUMENT_KEYS)),
                    result=_json(_first(a, RESULT_KEYS)),
                    error=(s.status.description or failed) if failed else None,
                    status="error" if failed else None))
            else:
                inputs = inputs or _texts(_json(a.get("gen_ai.input.messages")), ("user",))
                outputs = _texts(_json(a.get("gen_ai.output.messages")), ("assistant",)) \
                    or outputs
        own_in = _texts(_json(attrs.get("gen_ai.input.messages")), ("user",))
        own_out = _texts(_json(attrs.get("gen_ai.output.messages")), ("assistant",))
        error = _error_type(root)
        ctx = root.context
        return CaptureEvent(
            agent_name=str(attrs.get("gen_ai.agent.name") or self.agent or root.name),
            invocation_id=f"{ctx.trace_id:032x}-{ctx.span_id:016x}",
            session_id=_first(attrs, SESSION_KEYS), user_id=_first(attrs, USER_KEYS),
            transport="otel", status=FAILED if error else COMPLETED,
            input_text="\n".join(own_in or inputs), output_text="\n".join(own_out or outputs),
            tool_calls=tuple(tools), error_type=error, metadata=attrs)

    def shutdown(self) -> None:
        with self._lock:
            self._traces.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return capture.flush(timeout_millis / 1000)
