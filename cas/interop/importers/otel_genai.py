"""The otel-genai format: runs from spans that follow the OpenTelemetry GenAI semantic
conventions (docs/importers.md)."""

from __future__ import annotations

from typing import Any

from cas.interop.importers import otlp
from cas.interop.importers.common import derived_run_id, finish_run
from cas.interop.importers.otlp import MISSING, Span, json_or_text, message_of, messages_of, nested

NAME = "otel-genai"

AGENT_OPS = {"invoke_agent", "create_agent", "invoke_workflow"}
# Per-message span events of the conventions before 1.37, and the role each one's message has.
EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
               "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
# Tool span attributes, newest name first: semconv >= 1.37, any-agent's own, then the
# openinference-genai fixtures' plain `input`/`output`.
ARGUMENT_KEYS = ("gen_ai.tool.call.arguments", "gen_ai.tool.args", "ai.toolCall.args",
                 "ai.toolCall.input", "input")
RESULT_KEYS = ("gen_ai.tool.call.result", "gen_ai.output", "ai.toolCall.result",
               "ai.toolCall.output", "output")


def detect(value: Any) -> bool:
    """GenAI spans (a `gen_ai.*` attribute or event) of which none is OpenInference's: a
    trace OpenInference instrumented is read by `openinference`, even where it also carries
    `gen_ai.*` attributes, so `auto` never finds both."""
    spans = otlp.spans_of(value)
    return bool(spans) and any(map(otlp.genai_span, spans)) and \
        not any(map(otlp.openinference_span, spans))


def convert(values: list, options, source: str) -> list[dict]:
    """One run per trace that has a GenAI span (a trace without one is not an agent run)."""
    return otlp.runs_of_traces(
        values, source, "OpenTelemetry", otlp.genai_span,
        "no span carries gen_ai.* attributes or events (the OpenTelemetry GenAI conventions); "
        "OpenInference spans are read with --format openinference",
        lambda trace, where: _run(trace, options, where))


def _run(trace: list[Span], options, source: str) -> dict:
    conv = otlp.Conversation()
    # Agent spans may repeat the whole conversation; their messages are steps only when no
    # model-call span recorded any (else they would come at the agent's start, out of order).
    agent_steps = not any(_exchange(s)[:2] != ([], []) for s in trace
                          if _op(s) not in AGENT_OPS and not _is_tool(s))
    read: dict[int, tuple[set, set]] = {}
    agent_io: list[tuple[list, list]] = []
    for i, span in enumerate(trace):
        if _is_tool(span):
            read[i] = (_tool(conv, span), set())
            continue
        inputs, outputs, keys, events = _exchange(span)
        if _op(span) in AGENT_OPS and not agent_steps:
            agent_io.append((inputs, outputs))
        elif inputs or outputs:
            conv.exchange(inputs, outputs)
            read[i] = (keys, events)
    run = {"run_id": derived_run_id(NAME, trace[0].trace_id,
                                    content=None if trace[0].trace_id else list(trace)),
           "started_at": otlp.started_at(trace), "steps": conv.steps,
           "input": _io(conv.steps, agent_io, "user"),
           "output": _io(conv.steps, agent_io, "assistant"),
           "outcome": otlp.outcome(trace), "metadata": _metadata(trace, conv, read)}
    doc = next((s.document for s in trace if s.document), {})
    if "final_output" in doc:  # any-agent's AgentTrace: the agent's own answer
        run["output"] = doc["final_output"]
        rest = {k: v for k, v in doc.items() if k != "final_output"}
        run["metadata"].pop("document", None)
        run["metadata"].update({"document": rest} if rest else {})
    if run["started_at"] is None:
        del run["started_at"]
    where = [s.attributes for s in otlp.root_first(trace)] + [trace[0].resource, doc]
    return finish_run(run, options, *where, source=source)


# The Vercel AI SDK's operations (`ai.operationId`) as the GenAI operation each one is: its
# `generateText`/`streamText` span wraps the whole multi-step call, as an agent span does.
VERCEL_OPS = {"ai.generateText": "invoke_agent", "ai.streamText": "invoke_agent",
              "ai.generateObject": "invoke_agent", "ai.streamObject": "invoke_agent",
              "ai.toolCall": "execute_tool"}


def _op(span: Span) -> str | None:
    op = span.attributes.get("gen_ai.operation.name")
    if isinstance(op, str):
        return op
    vercel = span.attributes.get("ai.operationId")
    if isinstance(vercel, str):
        return "chat" if vercel.endswith((".doGenerate", ".doStream")) else VERCEL_OPS.get(vercel)
    return None


def _is_tool(span: Span) -> bool:
    a = span.attributes
    return _op(span) == "execute_tool" or (_op(span) is None and "gen_ai.tool.name" in a
                                           and _exchange(span)[:2] == ([], []))


def _tool(conv: otlp.Conversation, span: Span) -> set:
    a = span.attributes
    name = a.get("gen_ai.tool.name", a.get("ai.toolCall.name"))
    if not name and span.name:
        name = span.name.removeprefix("execute_tool ")
    args_key = next((k for k in ARGUMENT_KEYS if k in a), None)
    result_key = next((k for k in RESULT_KEYS if k in a), None)
    result = a[result_key] if result_key else MISSING
    if result_key in ("gen_ai.output", "ai.toolCall.result", "ai.toolCall.output") and (
            a.get("gen_ai.output.type") == "json" or result_key.startswith("ai.")):
        result = json_or_text(result)
    call_id = a.get("gen_ai.tool.call.id", a.get("ai.toolCall.id"))
    conv.execute(name, call_id, a[args_key] if args_key else MISSING, result,
                 otlp.error_of(span))
    return {k for k in (args_key, result_key, "gen_ai.tool.name", "ai.toolCall.name",
                        "gen_ai.tool.call.id", "ai.toolCall.id") if k and k in a}


def _exchange(span: Span) -> tuple[list, list, set, set]:
    """A model call's input and output messages, and the attributes and events read."""
    a = span.attributes
    inputs, keys = _attr_messages(a, ("gen_ai.input.messages", "gen_ai.prompt"), "user")
    outputs, out_keys = _attr_messages(a, ("gen_ai.output.messages", "gen_ai.completion"),
                                       "assistant")
    keys |= out_keys
    if not inputs and not outputs:
        inputs, outputs, keys = _vercel(a)
    if not outputs and "gen_ai.output" in a and _op(span) != "execute_tool":
        outputs = _any_agent_output(a["gen_ai.output"])
        keys.add("gen_ai.output")
    events: set = set()
    if not inputs or not outputs:
        ev_in, ev_out, in_read, out_read = _event_messages(span)
        if not inputs:
            inputs, events = ev_in, events | in_read
        if not outputs:
            outputs, events = ev_out, events | out_read
    if "gen_ai.system_instructions" in a:
        value = json_or_text(a["gen_ai.system_instructions"])
        system = message_of({"role": "system", "parts": value} if isinstance(value, list)
                            else value, "system")
        inputs = ([system] if system else []) + inputs
        keys.add("gen_ai.system_instructions")
    return inputs, outputs, keys, events


def _vercel(a: dict) -> tuple[list, list, set]:
    """A model call as the Vercel AI SDK records it: `ai.prompt.messages` (the messages sent)
    or `ai.prompt` (`{"prompt"}` or `{"system", "messages"}`), and `ai.response.text` and
    `ai.response.toolCalls` (`[{toolCallId, toolName, input}]`)."""
    inputs: list = []
    keys: set = set()
    if "ai.prompt.messages" in a:
        inputs, keys = messages_of(a["ai.prompt.messages"], "user"), {"ai.prompt.messages"}
    elif "ai.prompt" in a:
        prompt = json_or_text(a["ai.prompt"])
        keys = {"ai.prompt"}
        if isinstance(prompt, dict) and ("prompt" in prompt or "messages" in prompt
                                         or "system" in prompt):
            system = prompt.get("system")
            inputs = [message_of(system, "system")] if isinstance(system, str) else []
            inputs += messages_of(prompt.get("messages") or [], "user")
            if prompt.get("prompt") is not None:
                inputs += messages_of(prompt["prompt"], "user")
        else:
            inputs = messages_of(prompt, "user")
    parts: list = []
    if isinstance(a.get("ai.response.text"), str):
        parts.append({"type": "text", "content": a["ai.response.text"]})
        keys.add("ai.response.text")
    calls = json_or_text(a.get("ai.response.toolCalls"))
    if isinstance(calls, list):
        keys.add("ai.response.toolCalls")
        parts += [otlp.vercel_part(c) for c in calls]
    outputs = [{"role": "assistant", "parts": parts, "extra": {}}] if parts else []
    return [m for m in inputs if m], outputs, keys


def _attr_messages(a: dict, names: tuple[str, str], role: str) -> tuple[list, set]:
    """Messages from the current attribute (`names[0]`), else the flattened
    `gen_ai.prompt.N.*`/`gen_ai.completion.N.*` of OpenLLMetry, else the JSON of the
    deprecated `gen_ai.prompt`/`gen_ai.completion`."""
    current, old = names
    if current in a:
        return messages_of(a[current], role), {current}
    flat, keys = nested(a, old)
    if isinstance(flat, list) and flat:
        return [m for m in (message_of(x, role) for x in flat) if m], keys
    if old in a:
        return messages_of(a[old], role), {old}
    return [], set()


def _any_agent_output(raw: Any) -> list[dict]:
    # any-agent writes a model call's tool calls as [{"tool.name", "tool.args"}], else text.
    value = json_or_text(raw)
    if isinstance(value, list) and value and all(
            isinstance(x, dict) and "tool.name" in x for x in value):
        parts = [{"type": "tool_call", "id": x.get("tool.call.id"), "name": x["tool.name"],
                  "arguments": x.get("tool.args")} for x in value]
        return [{"role": "assistant", "parts": parts, "extra": {}}]
    if isinstance(raw, str):
        return [message_of(raw, "assistant")]
    return [{"role": "assistant", "parts": [raw], "extra": {}}]


_EVENT_NOISE = ("gen_ai.system", "gen_ai.provider.name", "event.name")


def _event_messages(span: Span) -> tuple[list, list, set, set]:
    """Messages from span events (conventions 1.28-1.36 per-message events, and the
    `gen_ai.content.prompt`/`gen_ai.content.completion` events of 1.26-1.27)."""
    inputs, outputs, in_read, out_read = [], [], set(), set()
    for i, e in enumerate(span.events):
        name, attrs = e.get("name"), e["attributes"]
        body = e.get("body")
        if not isinstance(body, dict):
            body = json_or_text(attrs.get("body", attrs.get("gen_ai.event.content")))
        if not isinstance(body, dict):
            body = {k: v for k, v in attrs.items() if k not in _EVENT_NOISE}
        if name in EVENT_ROLES:
            m = message_of({"role": EVENT_ROLES[name], **body}, EVENT_ROLES[name])
            inputs += [m] if m else []
            in_read.add(i)
        elif name == "gen_ai.choice":
            msg = body.get("message") if isinstance(body.get("message"), dict) else body
            m = message_of(msg, "assistant")
            if m:
                m["extra"].update({k: v for k, v in body.items()
                                   if k in ("finish_reason", "index")})
                m["extra"].pop("message", None)
                outputs.append(m)
            out_read.add(i)
        elif name == "gen_ai.content.prompt":
            inputs += messages_of(attrs.get("gen_ai.prompt"), "user")
            in_read.add(i)
        elif name == "gen_ai.content.completion":
            outputs += messages_of(attrs.get("gen_ai.completion"), "assistant")
            out_read.add(i)
    return inputs, outputs, in_read, out_read


def _io(steps: list[dict], agent_io: list, role: str) -> Any:
    found = otlp.first_text(steps, role, last=role == "assistant")
    if found is not None:
        return found
    for inputs, outputs in agent_io if role == "user" else reversed(agent_io):
        for m in (inputs if role == "user" else reversed(outputs)):
            if m["role"] == role:
                texts = [p["content"] for p in m["parts"]
                         if isinstance(p, dict) and p.get("type") == "text"]
                return texts[0] if len(texts) == 1 else m["parts"]
    return None


def _metadata(trace: list[Span], conv: otlp.Conversation, read: dict) -> dict:
    md = otlp.base_metadata(trace, conv)
    models, usage, tools = [], {}, []
    for span in trace:
        a = span.attributes
        for key in ("gen_ai.response.model", "gen_ai.request.model"):
            if isinstance(a.get(key), str) and a[key] not in models:
                models.append(a[key])
                break
        otlp.add_usage(usage, a, "gen_ai.usage")
        for tool in _list(a.get("gen_ai.tool.definitions")):
            if tool not in tools:
                tools.append(tool)
    found = {"model": models[0] if models else None, "models": models if len(models) > 1
             else None, "usage": usage or None, "tool_definitions": tools or None,
             "provider": _first(trace, "gen_ai.provider.name", "gen_ai.system"),
             "agent": _first(trace, "gen_ai.agent.name"),
             "conversation_id": _first(trace, "gen_ai.conversation.id")}
    md.update({k: v for k, v in found.items() if v is not None})
    resource = md.get("resource", {})
    md["spans"] = [otlp.summary(s, read.get(i, (set(), set()))[0] | {"gen_ai.tool.definitions"},
                                resource, read.get(i, (set(), set()))[1])
                   for i, s in enumerate(trace)]
    return md


def _list(value: Any) -> list:
    value = json_or_text(value)
    return value if isinstance(value, list) else [] if value is None else [value]


def _first(trace: list[Span], *keys: str) -> Any:
    for span in otlp.root_first(trace):
        for key in keys:
            if span.attributes.get(key) is not None:
                return span.attributes[key]
    return None
