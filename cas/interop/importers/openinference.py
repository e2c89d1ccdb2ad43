"""The openinference format: runs from Arize OpenInference spans (Phoenix exports, OTLP)
(docs/importers.md)."""

from __future__ import annotations

from typing import Any

from cas.interop.importers import otlp
from cas.interop.importers.common import derived_run_id, finish_run
from cas.interop.importers.otlp import MISSING, Span, json_or_text, message_of, nested

NAME = "openinference"

IO_KINDS = ("AGENT", "CHAIN")
# Call id of a TOOL span: `tool.id` (Phoenix), `tool_call.id` (pydantic-ai's sub-agent spans).
CALL_ID_KEYS = ("tool_call.id", "tool.id", "tool.call_id")
# Identity attributes lifted into the run's metadata (and out of every span summary that holds
# the same value); --person-from / --tenant-from read them by name.
IDENTITY = {"user.id": "user_id", "session.id": "session_id"}


def detect(value: Any) -> bool:
    """OpenInference spans: one with `openinference.span.kind` (Phoenix's `span_kind`) or
    `llm.input_messages.*` / `llm.output_messages.*` attributes. Such a trace is this
    format's even when it also carries `gen_ai.*` attributes (otel-genai then declines it)."""
    spans = otlp.spans_of(value)
    return bool(spans) and any(map(otlp.openinference_span, spans))


def convert(values: list, options, source: str) -> list[dict]:
    """One run per trace that has an OpenInference span."""
    return otlp.runs_of_traces(
        values, source, "OpenInference", otlp.openinference_span,
        "no span carries openinference.span.kind or llm.*_messages attributes (OpenInference); "
        "OpenTelemetry GenAI spans are read with --format otel-genai",
        lambda trace, where: _run(trace, options, where))


def _kind(span: Span) -> str:
    return str(span.attributes.get("openinference.span.kind") or "").upper()


def _run(trace: list[Span], options, source: str) -> dict:
    conv = otlp.Conversation()
    read: dict[int, set] = {}
    for i, span in enumerate(trace):
        if _kind(span) == "TOOL":
            read[i] = _tool(conv, span)
            continue
        inputs, in_keys = _messages(span.attributes, "llm.input_messages", "user")
        outputs, out_keys = _messages(span.attributes, "llm.output_messages", "assistant")
        if inputs or outputs:
            conv.exchange(inputs, outputs)
        read[i] = in_keys | out_keys
    ordered = otlp.root_first(trace)
    io = next((s for s in ordered if _kind(s) in IO_KINDS), None)
    run = {"run_id": derived_run_id(NAME, trace[0].trace_id,
                                    content=None if trace[0].trace_id else list(trace)),
           "started_at": otlp.started_at(trace), "steps": conv.steps,
           "input": _value(io, "input") if io and "input.value" in io.attributes
           else otlp.first_text(conv.steps, "user"),
           "output": _value(io, "output") if io and "output.value" in io.attributes
           else otlp.first_text(conv.steps, "assistant", last=True),
           "outcome": otlp.outcome(trace), "metadata": _metadata(trace, conv, read)}
    if run["started_at"] is None:
        del run["started_at"]
    where = [s.attributes for s in ordered] + [trace[0].resource, trace[0].document]
    return finish_run(run, options, *where, source=source)


def _value(span: Span, which: str) -> Any:
    # `input.value`/`output.value` are text; a declared JSON mime type is parsed.
    value = span.attributes.get(f"{which}.value", MISSING)
    if value is not MISSING and span.attributes.get(f"{which}.mime_type") == "application/json":
        return json_or_text(value)
    return value


def _tool(conv: otlp.Conversation, span: Span) -> set:
    a = span.attributes
    call_id = next((a[k] for k in CALL_ID_KEYS if a.get(k) not in (None, "")), None)
    conv.execute(a.get("tool.name") or span.name, call_id, a.get("input.value", MISSING),
                 _value(span, "output"), otlp.error_of(span))
    return {"input.value", "output.value"}


def _messages(a: dict, prefix: str, role: str) -> tuple[list, set]:
    """`prefix.N.message.{role, content, contents.M.message_content.*, tool_calls.M.tool_call.
    {id, function.name, function.arguments}, tool_call_id, name}` as messages."""
    flat, keys = nested(a, prefix)
    if not isinstance(flat, list):
        return [], set()
    out = []
    for item in flat:
        m = item.get("message", item) if isinstance(item, dict) else item
        if not isinstance(m, dict):
            continue
        obj = {k: v for k, v in m.items() if k not in ("contents", "tool_calls")}
        if "content" not in m and isinstance(m.get("contents"), list):
            obj["content"] = [_content(c) for c in m["contents"]]
        calls = m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else []
        if calls:
            obj["tool_calls"] = [c.get("tool_call", c) if isinstance(c, dict) else c
                                 for c in calls]
        msg = message_of(obj, role)
        if msg is not None:
            out.append(msg)
    return out, keys


def _content(c: Any) -> Any:
    c = c.get("message_content", c) if isinstance(c, dict) else c
    if isinstance(c, dict) and c.get("type") == "text" and "text" in c:
        return {"type": "text", "content": c["text"]}
    return c


def _metadata(trace: list[Span], conv: otlp.Conversation, read: dict) -> dict:
    md = otlp.base_metadata(trace, conv)
    ordered = otlp.root_first(trace)
    lifted = {}
    for attr, key in IDENTITY.items():
        value = next((s.attributes[attr] for s in ordered if s.attributes.get(attr)
                      is not None), None)
        if value is not None:
            lifted[attr] = md[key] = value
    models, usage, tools = [], {}, []
    for i, span in enumerate(trace):
        a = span.attributes
        if isinstance(a.get("llm.model_name"), str) and a["llm.model_name"] not in models:
            models.append(a["llm.model_name"])
        otlp.add_usage(usage, a, "llm.token_count")
        schemas, keys = nested(a, "llm.tools")
        for tool in schemas if isinstance(schemas, list) else ():
            tool = json_or_text(tool.get("tool", {}).get("json_schema")) \
                if isinstance(tool, dict) and isinstance(tool.get("tool"), dict) else tool
            if tool not in tools:
                tools.append(tool)
        read[i] = read.get(i, set()) | keys | {k for k, v in lifted.items() if a.get(k) == v}
    provider = next((s.attributes[k] for s in ordered for k in ("llm.provider", "llm.system")
                     if s.attributes.get(k) is not None), None)
    found = {"model": models[0] if models else None, "models": models if len(models) > 1
             else None, "provider": provider, "usage": usage or None,
             "tool_definitions": tools or None}
    md.update({k: v for k, v in found.items() if v is not None})
    md["spans"] = [otlp.summary(s, read.get(i, set()), md.get("resource", {}))
                   for i, s in enumerate(trace)]
    return md
