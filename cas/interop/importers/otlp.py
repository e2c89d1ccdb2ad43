"""Spans as both span importers read them: OTLP JSON or span lists, grouped into traces, and
the conversation their model calls and tool executions make."""

from __future__ import annotations

import base64
import binascii
import calendar
import datetime
import json
import re
from typing import Any, NamedTuple

from blake3 import blake3

from cas.format import encoding
from cas.interop.importers.common import (CallJoiner, call_identity, listed, refuse, same_turn,
                                          tool_arguments, warn)

MISSING: Any = object()  # an attribute that was not recorded (never the same as a null)


class Span(NamedTuple):
    """One span, whatever shape it was exported in."""

    trace_id: str | None
    span_id: str | None
    parent_id: str | None
    name: str | None
    kind: str | None          # the OTel span kind, lower case ("internal", "client", ...)
    start: int | None         # unix nanoseconds
    end: int | None
    status: str               # "ok", "error" or "unset" (another recorded code, lower case)
    status_message: str | None
    attributes: dict
    events: list              # [{"name", "time" (ns or None), "attributes"[, "body"]}]
    resource: dict            # the resource's attributes
    scope: dict               # the instrumentation scope ({"name", "version"}) or {}
    extra: dict               # envelope members not read above (Phoenix `id`, links, ...)
    document: dict            # members of the enclosing document besides its spans


# -- reading spans -----------------------------------------------------------------------------
def spans_of(value: Any) -> list[Span] | None:
    """The spans of one parsed JSON value, or None when it is not a span document: OTLP JSON
    (`resourceSpans`), `{"spans": [...], ...}` (any-agent's AgentTrace), a list of spans, one
    span, an object of named span lists (Phoenix fixtures), or one span's flat attribute map."""
    if isinstance(value, list):
        out: list[Span] = []
        for member in value:
            spans = spans_of(member)
            if spans is None:
                return None
            out.extend(spans)
        return out if value else None
    if not isinstance(value, dict) or not value:
        return None
    if "resourceSpans" in value or "resource_spans" in value:
        return _otlp(value)
    if isinstance(value.get("spans"), list):
        spans = spans_of(value["spans"]) if value["spans"] else []
        doc = {k: v for k, v in value.items() if k != "spans"}
        return None if spans is None else [s._replace(document={**doc, **s.document})
                                           for s in spans]
    if _is_span(value):
        return [_span(value, {}, {}, False)]
    if all(isinstance(v, list) and v for v in value.values()):
        out = []
        for name, member in value.items():
            spans = spans_of(member)
            if spans is None:
                return None
            out.extend(s._replace(document={"trace_name": name, **s.document}) for s in spans)
        return out
    if all(isinstance(k, str) and not isinstance(v, dict) for k, v in value.items()) \
            and any("." in k for k in value):
        # One span's attributes with no envelope (the openinference-js fixtures).
        return [Span(None, None, None, None, None, None, None, "unset", None, dict(value), [],
                     {}, {}, {}, {})]
    return None


def _is_span(value: dict) -> bool:
    return isinstance(value.get("attributes"), (dict, list)) and any(
        k in value for k in ("name", "context", "span_id", "spanId", "trace_id", "traceId"))


def _otlp(value: dict) -> list[Span] | None:
    out = []
    for rs in listed(value.get("resourceSpans", value.get("resource_spans"))):
        if not isinstance(rs, dict):
            return None
        res = rs.get("resource") if isinstance(rs.get("resource"), dict) else {}
        resource = attributes_of(res.get("attributes"))
        for ss in listed(rs.get("scopeSpans", rs.get("scope_spans", rs.get(
                "instrumentationLibrarySpans")))):
            if not isinstance(ss, dict) or not isinstance(ss.get("spans", []), list):
                return None
            scope = ss.get("scope", ss.get("instrumentationLibrary"))
            scope = {k: v for k, v in scope.items() if k in ("name", "version") and v} \
                if isinstance(scope, dict) else {}
            for sp in listed(ss.get("spans")):
                if not isinstance(sp, dict):
                    return None
                out.append(_span(sp, resource, scope, True))
    return out


# The envelope members a span is read from; the W3C trace flags and state and `is_remote` of a
# span context are not kept (they say how a trace was propagated, not what the agent did).
_READ = {"traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id",
         "parent_id", "parent", "context", "name", "kind", "span_kind", "startTimeUnixNano",
         "start_time_unix_nano", "start_time", "startTime", "endTimeUnixNano",
         "end_time_unix_nano", "end_time", "endTime", "status", "status_code", "status_message",
         "attributes", "events", "resource", "spanContext", "parentSpanContext"}


def _span(d: dict, resource: dict, scope: dict, otlp: bool) -> Span:
    # `context` (Python SDK, Phoenix), or `spanContext` (the JS SDK's ReadableSpan, as the
    # Vercel AI SDK's exporters write it; its parent as `parentSpanContext` or `parentSpanId`).
    ctx = next((d[k] for k in ("context", "spanContext") if isinstance(d.get(k), dict)), {})
    ctx = {**ctx, "trace_id": ctx.get("trace_id", ctx.get("traceId")),
           "span_id": ctx.get("span_id", ctx.get("spanId"))}
    parent = next((d[k] for k in ("parent", "parentSpanContext") if isinstance(d.get(k), dict)),
                  {})
    parent = {"span_id": parent.get("span_id", parent.get("spanId"))}
    attrs = attributes_of(d.get("attributes"))
    if isinstance(d.get("span_kind"), str):
        # Phoenix exports keep the OpenInference kind beside the attributes.
        attrs.setdefault("openinference.span.kind", d["span_kind"])
    status = d.get("status") if isinstance(d.get("status"), dict) else {}
    code = status.get("code", status.get("status_code", d.get("status_code")))
    message = status.get("message", status.get("description", d.get("status_message")))
    res = d.get("resource")
    if isinstance(res, dict):
        resource = {**resource, **attributes_of(res.get("attributes", {}))}
    extra = {k: v for k, v in d.items() if k not in _READ and v not in (None, "", [], {}, 0)}
    return Span(
        trace_id=_id(_first(d, "traceId", "trace_id", default=ctx.get("trace_id")), 32, otlp),
        span_id=_id(_first(d, "spanId", "span_id", default=ctx.get("span_id")), 16, otlp),
        parent_id=_id(_first(d, "parentSpanId", "parent_span_id", "parent_id",
                             default=parent.get("span_id")), 16, otlp),
        name=d.get("name") if isinstance(d.get("name"), str) else None,
        kind=_kind(d.get("kind")),
        start=nanos(_first(d, "startTimeUnixNano", "start_time_unix_nano", "start_time",
                           "startTime")),
        end=nanos(_first(d, "endTimeUnixNano", "end_time_unix_nano", "end_time", "endTime")),
        status=_status(code), status_message=message if isinstance(message, str) and message
        else None, attributes=attrs,
        events=[_event(e) for e in listed(d.get("events")) if isinstance(e, dict)],
        resource=resource, scope=scope, extra=extra, document={})


def runs_of_traces(values: list, source: str, convention: str, ours, refusal: str,
                   run) -> list[dict]:
    """One run (`run(trace, source)`) per trace holding a span `ours(span)` claims; refused
    with `refusal` when no trace does (a trace without one is not an agent run)."""
    spans = read_spans(values, source, convention)
    found = [t for t in traces(spans) if any(map(ours, t))]
    if not found:
        raise refuse(source, refusal)
    for trace in traces(spans):
        if not any(map(ours, trace)):
            warn(source, f"trace {trace[0].trace_id or '(no trace id)'}: {len(trace)} span(s), "
                 "none of them a span this format reads (model or tool calls): not imported")
    return [run(trace, source) for trace in found]


def _first(d: dict, *keys: str, default: Any = None) -> Any:
    return next((d[k] for k in keys if d.get(k) not in (None, "")), default)


def _event(e: dict) -> dict:
    out = {"name": e.get("name"), "time": nanos(_first(e, "timeUnixNano", "time_unix_nano",
                                                        "timestamp", "time")),
           "attributes": attributes_of(e.get("attributes"))}
    if "body" in e:
        out["body"] = any_value(e["body"])
    return out


def attributes_of(raw: Any) -> dict:
    """Attributes as a flat dict: OTLP's typed `[{"key", "value": {...Value}}]` decoded, and
    nested objects flattened into dotted names (`{"llm": {"model_name": m}}` is
    `llm.model_name`)."""
    out: dict = {}
    if isinstance(raw, list):
        for kv in raw:
            if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                out[kv["key"]] = any_value(kv.get("value"))
    elif isinstance(raw, dict):
        stack = [("", raw)]
        while stack:
            prefix, d = stack.pop()
            for k, v in d.items():
                if isinstance(v, dict) and v:
                    stack.append((f"{prefix}{k}.", v))
                else:
                    out[f"{prefix}{k}"] = v
    return out


_TYPED = ("stringValue", "boolValue", "intValue", "doubleValue", "arrayValue", "kvlistValue",
          "bytesValue")


def any_value(v: Any) -> Any:
    """An OTLP AnyValue as plain JSON (a value that is not one is returned as given)."""
    if not isinstance(v, dict) or len(v) > 1 or (v and next(iter(v)) not in _TYPED):
        return v
    if not v:
        return None
    key, inner = next(iter(v.items()))
    if key == "intValue" and isinstance(inner, str):
        try:
            return int(inner)
        except ValueError:
            return inner
    if key == "arrayValue":
        return [any_value(x) for x in (inner or {}).get("values", [])]
    if key == "kvlistValue":
        return attributes_of((inner or {}).get("values", []))
    return inner


def _id(v: Any, width: int, otlp: bool) -> str | None:
    if v is None or v == "" or isinstance(v, bool):
        return None
    if isinstance(v, int):
        return format(v, f"0{width}x") if v >= 0 else str(v)
    if not isinstance(v, str):
        return encoding.encode(v).decode() if encoding.value_depth_at_most(v) else str(v)
    s = v.strip()
    s = s[2:] if s[:2].lower() == "0x" else s
    if re.fullmatch(r"[0-9a-fA-F]+", s):
        return s.lower()
    if otlp:  # protobuf's own JSON mapping writes ids as base64
        try:
            raw = base64.b64decode(s, validate=True)
        except (binascii.Error, ValueError):
            return v
        if len(raw) == width // 2:
            return raw.hex()
    return v


def _kind(v: Any) -> str | None:
    if isinstance(v, int) and not isinstance(v, bool):
        names = ("unspecified", "internal", "server", "client", "producer", "consumer")
        return names[v] if 0 <= v < len(names) else str(v)
    if isinstance(v, str) and v:
        s = v.lower()
        for prefix in ("spankind.", "span_kind_"):
            s = s[len(prefix):] if s.startswith(prefix) else s
        return s
    return None


def _status(code: Any) -> str:
    if isinstance(code, int) and not isinstance(code, bool):
        return {0: "unset", 1: "ok", 2: "error"}.get(code, str(code))
    if isinstance(code, str) and code:
        s = code.lower()
        for prefix in ("status_code_", "statuscode."):
            s = s[len(prefix):] if s.startswith(prefix) else s
        return s
    return "unset"


# -- times -------------------------------------------------------------------------------------
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?"
                  r"(Z|z|[+-]\d\d:?\d\d)?")


def nanos(v: Any) -> int | None:
    """Unix nanoseconds of a recorded time: an integer (or digit string) in seconds,
    milliseconds, microseconds or nanoseconds by its size, a float in seconds, the JS SDK's
    `[seconds, nanoseconds]` (HrTime), or ISO 8601 (no zone: UTC). Anything else is None."""
    if isinstance(v, list) and len(v) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v) \
            and v[1] < 10 ** 9 and v[0] < 10 ** 11:
        return v[0] * 10 ** 9 + v[1]
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v.strip())
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return None
    if isinstance(v, float):
        return int(round(v * 1e9)) if abs(v) < 1e11 else None
    if isinstance(v, int):
        for limit, scale in ((10 ** 11, 10 ** 9), (10 ** 14, 10 ** 6), (10 ** 17, 10 ** 3)):
            if abs(v) < limit:
                return v * scale
        return v if abs(v) < 10 ** 20 else None
    m = _ISO.fullmatch(v.strip())
    if not m:
        return None
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    try:
        datetime.datetime(y, mo, d, h, mi, s)
    except ValueError:
        return None
    zone, offset = m.group(8), 0
    if zone and zone not in "Zz":
        sign = 1 if zone[0] == "+" else -1
        offset = sign * (int(zone[1:3]) * 3600 + int(zone[-2:]) * 60)
    frac = int((m.group(7) or "0")[:9].ljust(9, "0"))
    return (calendar.timegm((y, mo, d, h, mi, s)) - offset) * 10 ** 9 + frac


def iso(ns: int | None) -> str | None:
    """ISO 8601 in UTC (`2025-09-16T12:43:13.209236Z`) of unix nanoseconds."""
    if ns is None:
        return None
    secs, frac = divmod(ns, 10 ** 9)
    try:
        t = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=secs)
    except OverflowError:
        return None
    text = f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    return text + (f".{frac:09d}".rstrip("0") if frac else "") + "Z"


# -- traces ------------------------------------------------------------------------------------
def traces(spans: list[Span]) -> list[list[Span]]:
    """Spans grouped by trace id (spans without one are one trace), each in time order, the
    traces by their first start. Orders depend only on content, never on the input's order;
    an identical span exported twice counts once."""
    unique = {encoding.encode(s): s for s in spans}
    groups: dict[str, list[tuple[bytes, Span]]] = {}
    for data, span in unique.items():
        groups.setdefault(span.trace_id or "", []).append((data, span))
    ordered = []
    for members in groups.values():
        members.sort(key=lambda m: (m[1].start is None, m[1].start or 0, m[1].end or 0,
                                    m[1].span_id or "", m[0]))
        ordered.append([s for _, s in members])
    ordered.sort(key=lambda t: (min((s.start for s in t if s.start is not None),
                                    default=1 << 80), t[0].trace_id or ""))
    return ordered


def root_first(trace: list[Span]) -> list[Span]:
    """The trace's spans with those whose parent is not in it (its roots) first."""
    ids = {s.span_id for s in trace if s.span_id}
    return sorted(trace, key=lambda s: s.parent_id in ids and s.parent_id is not None)


def started_at(trace: list[Span]) -> str | None:
    """The earliest start of the trace's spans, ISO 8601 UTC."""
    return iso(min((s.start for s in trace if s.start is not None), default=None))


def json_or_text(value: Any) -> Any:
    """A JSON text's value (an attribute whose declared type is JSON), else it as recorded."""
    if isinstance(value, str):
        try:
            return encoding.parse_json(value.encode("utf-8"))
        except Exception:  # noqa: BLE001 - any refusal means it stays text
            return value
    return value


# -- messages ----------------------------------------------------------------------------------
def message_of(obj: Any, role: str = "user") -> dict | None:
    """A message as `{"role", "parts", "extra"}`: GenAI semconv (`parts` of `text`,
    `tool_call`, `tool_call_response`) or OpenAI-style (`content`, `tool_calls`,
    `tool_call_id`). `role` is the default when the message names none."""
    if isinstance(obj, str):
        return {"role": role, "parts": [{"type": "text", "content": obj}], "extra": {}}
    if not isinstance(obj, dict):
        return None
    role = obj["role"] if isinstance(obj.get("role"), str) and obj["role"] else role
    parts = [_part(p) for p in obj["parts"]] if isinstance(obj.get("parts"), list) else []
    content = obj.get("content", obj.get("text") if "parts" not in obj else None)
    if isinstance(content, str):
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        parts.extend(_part(p) for p in content)
    elif content is not None:
        parts.append(content)
    calls = json_or_text(obj.get("tool_calls"))
    for call in calls if isinstance(calls, list) else ():
        parts.append(_call_part(call))
    reply_id = obj.get("tool_call_id", obj.get("id") if role == "tool" else None)
    if role == "tool" and reply_id is not None and not any(
            p.get("type") == "tool_call_response" for p in parts if isinstance(p, dict)):
        text = [p for p in parts if isinstance(p, dict) and p.get("type") == "text"]
        response = text[0]["content"] if len(text) == 1 else [p for p in parts]
        parts = [{"type": "tool_call_response", "id": reply_id, "response": response}]
    extra = {k: v for k, v in obj.items() if k not in (
        "role", "parts", "content", "text", "tool_calls", "tool_call_id", "id")}
    return {"role": role, "parts": parts, "extra": extra}


def _part(p: Any) -> Any:
    if isinstance(p, str):
        return {"type": "text", "content": p}
    if not isinstance(p, dict):
        return p
    kind = p.get("type")
    if kind == "text" and ("content" in p or "text" in p):
        return {"type": "text", "content": p.get("content", p.get("text"))}
    if kind in ("tool_call", "function") or "function" in p:
        return _call_part(p)
    if kind in ("tool-call", "tool-result"):
        return vercel_part(p)
    if kind == "tool_call_response":
        out = {"type": "tool_call_response", "id": p.get("id")}
        for key in ("response", "result"):  # semconv says `response`; some write `result`
            if key in p:
                out["response"] = p[key]
                break
        return out
    return p


def vercel_part(p: Any) -> Any:
    """A Vercel AI SDK content part or tool call (`{type: "tool-call", toolCallId, toolName,
    input|args}`, `{type: "tool-result", toolCallId, output|result}`) in GenAI's shape."""
    if not isinstance(p, dict) or "toolCallId" not in p and "toolName" not in p:
        return p
    if p.get("type") == "tool-result":
        value = next((p[k] for k in ("output", "result") if k in p), None)
        if isinstance(value, dict) and set(value) == {"type", "value"}:
            value = value["value"]  # AI SDK 5+: {"type": "json"|"text", "value"}
        return {"type": "tool_call_response", "id": p.get("toolCallId"), "response": value}
    return {"type": "tool_call", "id": p.get("toolCallId"), "name": p.get("toolName"),
            "arguments": p.get("input", p.get("args"))}


def _call_part(c: Any) -> dict:
    if not isinstance(c, dict):
        return {"type": "tool_call", "id": None, "name": None, "arguments": c}
    fn = c.get("function") if isinstance(c.get("function"), dict) else {}
    return {"type": "tool_call", "id": c.get("id"), "name": c.get("name", fn.get("name")),
            "arguments": c.get("arguments", fn.get("arguments"))}


def messages_of(value: Any, role: str) -> list[dict]:
    """The messages of an attribute: a JSON text or a list of messages, an object holding
    `messages`, one message object, or plain text (one message with `role`)."""
    value = json_or_text(value)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if not isinstance(value, list):
        value = [value]
    return [m for m in (message_of(v, role) for v in value if v is not None) if m is not None]


def nested(attrs: dict, prefix: str) -> tuple[Any, set]:
    """The attributes under `prefix.` as nested values (numeric segments are list indices:
    `p.0.message.role` -> `[{"message": {"role": ...}}]`), and the keys read."""
    root: dict = {}
    keys = set()
    for key, value in attrs.items():
        if not key.startswith(prefix + "."):
            continue
        keys.add(key)
        node = root
        segments = key[len(prefix) + 1:].split(".")
        for seg in segments[:-1]:
            child = node.get(seg)
            node = node.setdefault(seg, {}) if not isinstance(child, dict) else child
        node[segments[-1]] = value
    return _lists(root), keys


def _lists(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node and all(k.isdigit() for k in node):
        return [_lists(node[k]) for k in sorted(node, key=int)]
    return {k: _lists(v) for k, v in node.items()}


# -- the conversation --------------------------------------------------------------------------
class Conversation:
    """The steps of one trace, in time order: each model call's messages (the history every
    call repeats is read once: a call's input continues the longest message sequence seen
    before, and only what follows it is new) and each tool execution joined to its call."""

    def __init__(self) -> None:
        self.steps: list[dict] = []
        self.conflicts: list[dict] = []   # a second recording of a value that differs
        self.orphans: list[dict] = []     # tool replies that answer no call
        self._seen: set[bytes] = set()
        self._index: dict[int, int] = {}  # id(step) -> its position
        self._executed: set[int] = set()
        self._for_spans = CallJoiner()    # calls a tool span may answer
        self._for_replies = CallJoiner()  # calls a tool reply message may answer
        self._calls: dict[tuple, dict] = {}        # call identity -> its step
        self._calls_by_id: dict[str, dict] = {}    # call id -> its latest step
        self._last_call: tuple = ([], [])          # the last model call's turns, in and out

    def exchange(self, inputs: list[dict], outputs: list[dict]) -> None:
        """One model call: its input messages (the new ones become steps) and its output.
        History re-sent in another form (a text block dropped, arguments re-serialised) is
        matched turn by turn, calls by id (else name and parsed arguments), never added
        twice; a call whose input and output repeat the last call's (an outer span listing
        what an inner one did) is that call again."""
        known, digest = 0, b""
        for i, m in enumerate(inputs):
            digest = _chain(digest, m)
            if digest in self._seen:
                known = i + 1
        cursor = 0
        for m in inputs[known:]:
            cursor = self._message(m, cursor)
        turns = ([_turn(m) for m in inputs], [_turn(m) for m in outputs])
        if not (turns[1] and turns == self._last_call):
            for m in outputs:
                self._message(m)
        self._last_call = turns
        digest = b""
        for m in inputs + outputs:
            digest = _chain(digest, m)
            self._seen.add(digest)

    def _message(self, m: dict, cursor: int | None = None) -> int | None:
        """Add message `m`'s steps; with `cursor` (a re-sent input: the first step it may
        be a copy of), the parts already recorded are not added again. Returns the cursor
        after it."""
        tools = [p for p in m["parts"] if isinstance(p, dict)
                 and p.get("type") in ("tool_call", "tool_call_response")]
        rest = [p for p in m["parts"] if not any(p is t for t in tools)]
        if rest or not tools:
            only_text = len(rest) == 1 and isinstance(rest[0], dict) and \
                rest[0].get("type") == "text"
            content = rest[0].get("content") if only_text else rest
            step = {**m["extra"], "type": "message", "role": m["role"], "content": content}
            found = self._copy_of(step, cursor) if cursor is not None else None
            if found is None:
                self._add(step)
            else:
                cursor = found + 1
        for p in tools:
            if p["type"] == "tool_call":
                known = self._calls.get(_call_key(p))
                if known is None or (cursor is None and p.get("id") is None):
                    self._call(p)  # (an output call without an id is always a new call)
            elif "response" in p:
                call = self._calls_by_id.get(None if p.get("id") is None else str(p["id"]))
                if cursor is not None and call is not None and "result" in call and \
                        same(call["result"], p["response"]):
                    continue  # a reply re-sent with the history
                self.reply(p.get("id"), p["response"])
        return cursor

    def _copy_of(self, step: dict, cursor: int) -> int | None:
        """The position of the message step `step` re-sends, at or after `cursor`."""
        for i in range(cursor, len(self.steps)):
            old = self.steps[i]
            if old["type"] != "message" or old["role"] != step["role"]:
                continue
            a, b = old.get("content"), step.get("content")
            if (isinstance(a, str) and isinstance(b, str) and
                    same_turn({"role": "x", "content": a}, {"role": "x", "content": b})) \
                    or same(a, b):
                return i
        return None

    def _add(self, step: dict) -> dict:
        self._index[id(step)] = len(self.steps)
        self.steps.append(step)
        return step

    def _call(self, p: dict) -> dict:
        step = {"type": "tool_call", "tool_name": _name(p.get("name"))}
        if p.get("id") is not None:
            step["call_id"] = str(p["id"])
        step.update(tool_arguments(p.get("arguments")))
        self._add(step)
        self._calls.setdefault(_call_key(p), step)
        if "call_id" in step:
            self._calls_by_id[step["call_id"]] = step
        self._for_spans.call(step.get("call_id"), step)
        self._for_replies.call(step.get("call_id"), step)
        return step

    def reply(self, call_id: Any, response: Any) -> None:
        """A tool reply message: the result of the nearest preceding unanswered call."""
        call_id = None if call_id is None else str(call_id)
        step = self._for_replies.reply(call_id)
        if step is None:
            self.orphans.append({"call_id": call_id, "content": response,
                                 "after_step": len(self.steps)})
        elif "result" not in step:
            step["result"] = response
        elif not same(step["result"], response):
            self.conflicts.append({"step": self._index[id(step)], "field": "result",
                                   "reply": response})

    def execute(self, name: Any, call_id: Any, arguments: Any = MISSING,
                result: Any = MISSING, error: dict | None = None) -> dict:
        """A tool span: joined to its call on the call id (else to the earliest call of that
        tool not yet executed, when one side has no id), or a call step of its own."""
        call_id = None if call_id in (None, "") else str(call_id)
        step = self._join(_name(name), call_id)
        if step is None:
            step = self._call({"name": name, "id": call_id, "arguments": None})
        self._executed.add(id(step))
        if call_id is not None and "call_id" not in step:
            step["call_id"] = call_id
        if arguments is not MISSING:
            fields = tool_arguments(arguments) or {"arguments_raw": arguments,
                                                  "arguments_error": "recorded as null"}
            old = {k: step.pop(k) for k in ("arguments", "arguments_raw", "arguments_error")
                   if k in step}
            if old and old != fields:
                self.conflicts.append({"step": self._index[id(step)], "field": "arguments",
                                       "requested": old})
            step.update(fields)
        if result is not MISSING:
            if "result" in step and not same(step["result"], result):
                self.conflicts.append({"step": self._index[id(step)], "field": "result",
                                       "reply": step["result"]})
            step["result"] = result
        if error:
            step["error"] = error
        return step

    def _join(self, name: str, call_id: str | None) -> dict | None:
        while call_id is not None:
            step = self._for_spans.reply(call_id)
            if step is None:
                break
            if id(step) not in self._executed:
                return step
        for step in self.steps:
            if step["type"] == "tool_call" and step["tool_name"] == name and \
                    id(step) not in self._executed and \
                    (call_id is None or "call_id" not in step):
                return step
        return None


def _name(name: Any) -> str:
    # A call that names no tool still is a call; "unknown" keeps it (tool_name is required).
    return name if isinstance(name, str) and name else "unknown"


def _call_key(p: dict) -> tuple:
    """A call part's identity: its id AND its name and parsed arguments (ids are reused
    within one conversation in real logs; a re-sent copy has all three the same)."""
    call_id = p.get("id")
    return (None if call_id is None else str(call_id),
            call_identity(None, _name(p.get("name")), _arguments(p.get("arguments"))))


def _arguments(raw: Any) -> Any:
    read = tool_arguments(raw)
    return read.get("arguments", read.get("arguments_raw"))


def _turn(m: dict) -> tuple:
    """A message's identity for comparing two recordings of one output."""
    calls = tuple(_call_key(p) for p in m["parts"] if isinstance(p, dict)
                  and p.get("type") == "tool_call")
    texts = tuple(" ".join(str(p.get("content")).split()) for p in m["parts"]
                  if isinstance(p, dict) and p.get("type") == "text")
    return (m["role"], calls, texts)


def _chain(digest: bytes, m: dict) -> bytes:
    # Calls compare by their arguments as read ("" and "{}" are both no arguments: exporters
    # write a streamed call's output one way and the next call's history the other).
    parts = [{**p, "arguments": tool_arguments(p.get("arguments"))}
             if isinstance(p, dict) and p.get("type") == "tool_call" else p
             for p in m["parts"]]
    return blake3(digest + encoding.encode([m["role"], parts])).digest()


def same(a: Any, b: Any) -> bool:
    """Two recordings of one value agree: equal, or one is the other's JSON text."""
    if a == b:
        return True
    return json_or_text(a) == json_or_text(b)


# -- outcome and metadata ----------------------------------------------------------------------
def error_of(span: Span) -> dict | None:
    """A failed span's error (`error.type`, the status message, the exception event), or
    None when the span did not fail."""
    attrs = span.attributes
    if span.status != "error" and attrs.get("error.type") is None:
        return None
    out: dict = {"status": span.status}
    exc = next((e["attributes"] for e in span.events if e.get("name") == "exception"), {})
    for field, value in (("type", attrs.get("error.type", exc.get("exception.type"))),
                         ("message", span.status_message or exc.get("exception.message")),
                         ("exception_message", exc.get("exception.message")),
                         ("stacktrace", exc.get("exception.stacktrace"))):
        if value is not None and value not in out.values():
            out[field] = value
    return out


def outcome(trace: list[Span]) -> dict:
    """`status`: the root span's status when it is set, else `error` if any span failed, `ok`
    if any succeeded, else `unset`; `errors`: every failed span."""
    errors = []
    for span in trace:
        err = error_of(span)
        if err is not None:
            errors.append({"span": span.name, "span_id": span.span_id, **err})
    root = root_first(trace)[0]
    if root.status in ("ok", "error"):
        status = root.status
    elif errors:
        status = "error"
    else:
        status = "ok" if any(s.status == "ok" for s in trace) else "unset"
    out: dict = {"status": status}
    if errors:
        out["errors"] = errors
    return out


def summary(span: Span, read: set, resource: dict, read_events: set = frozenset()) -> dict:
    """What `metadata.spans` keeps of a span: its ids, name, kind, times, status, and every
    attribute and event not made into a step (`read`: the attribute names that were)."""
    out = {"name": span.name, "span_id": span.span_id, "parent_id": span.parent_id,
           "kind": span.kind, "start_time": iso(span.start), "end_time": iso(span.end),
           "status": span.status, "status_message": span.status_message}
    out = {k: v for k, v in out.items() if v is not None}
    attrs = {k: v for k, v in span.attributes.items() if k not in read}
    events = [e for i, e in enumerate(span.events) if i not in read_events]
    for key, value in (("attributes", attrs), ("events", [{**e, "time": iso(e["time"])}
                                                          for e in events]),
                       ("scope", span.scope), ("extra", span.extra)):
        if value:
            out[key] = value
    if span.resource and span.resource != resource:
        out["resource"] = span.resource
    return out


def base_metadata(trace: list[Span], conv: Conversation) -> dict:
    """The metadata every span importer writes: trace id, resource, and the conversation's
    conflicts and orphan replies (the caller adds `spans` and its format's own keys)."""
    resource = next((s.resource for s in trace if s.resource), {})
    doc = next((s.document for s in trace if s.document), {})
    out: dict = {"trace_id": trace[0].trace_id}
    for key, value in (("resource", resource), ("document", doc),
                       ("conflicts", conv.conflicts), ("orphan_tool_replies", conv.orphans)):
        if value:
            out[key] = value
    return {k: v for k, v in out.items() if v is not None}


def add_usage(total: dict, attrs: dict, prefix: str) -> None:
    """Sum the numeric attributes under `prefix.` into `total` (token counts and costs)."""
    for key, value in attrs.items():
        if key.startswith(prefix + ".") and isinstance(value, (int, float)) \
                and not isinstance(value, bool):
            name = key[len(prefix) + 1:]
            total[name] = total.get(name, 0) + value


def first_text(steps: list[dict], role: str, last: bool = False) -> Any:
    """The content of the first (or last) message step with `role`, or None."""
    found = [s["content"] for s in steps if s["type"] == "message" and s["role"] == role]
    return (found[-1] if last else found[0]) if found else None


def dumps(value: Any) -> str:
    """Stable JSON text (for messages in refusals)."""
    return json.dumps(value, sort_keys=True)[:200]


def openinference_span(span: Span) -> bool:
    """The span is OpenInference's: it has `openinference.span.kind` (Phoenix's `span_kind`)
    or flattened `llm.input_messages.*` / `llm.output_messages.*` attributes."""
    return "openinference.span.kind" in span.attributes or any(
        k.startswith(("llm.input_messages.", "llm.output_messages."))
        for k in span.attributes)


# The Vercel AI SDK's own span attributes (`ai.generateText` and its `doGenerate` calls, as its
# OpenTelemetry integration writes them beside, or instead of, the GenAI ones).
VERCEL = ("ai.operationId", "ai.prompt", "ai.response.text", "ai.response.toolCalls",
          "ai.toolCall.name")


def genai_span(span: Span) -> bool:
    """The span follows the OpenTelemetry GenAI conventions: a `gen_ai.*` attribute or event,
    or the Vercel AI SDK's `ai.*` attributes of a model or tool call."""
    return any(k.startswith("gen_ai.") for k in span.attributes) or any(
        isinstance(e.get("name"), str) and e["name"].startswith("gen_ai.")
        for e in span.events) or any(k in span.attributes for k in VERCEL)


def read_spans(values: list, source: str, what: str) -> list[Span]:
    """The spans of a file's parsed values, or the refusal naming the shapes read."""
    out = []
    for i, value in enumerate(values):
        spans = spans_of(value)
        if spans is None:
            where = f"document {i + 1}: " if len(values) > 1 else ""
            raise refuse(source, f"{where}not {what} spans: expected OTLP JSON "
                         '({"resourceSpans": [...]}), a JSON array of spans, '
                         '{"spans": [...]}, an object of named span arrays, or one span\'s '
                         "attribute map", document=i + 1)
        out.extend(spans)
    return out
