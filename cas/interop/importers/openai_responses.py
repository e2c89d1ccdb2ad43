"""The OpenAI Responses API importer: `input` and `output` items as runs (docs/importers.md)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from cas.interop.importers import vcr
from cas.interop.importers.common import (CallJoiner, Options, derived_run_id, each_document,
                                          finish_run, kept, refuse, tool_arguments, turn_of, unread,
                                          warn)

NAME = "openai-responses"

UNKNOWN = "(unknown)"  # never a real tool name: function names are [A-Za-z0-9_-]{1,64}
TEXT_PARTS = {"input_text", "output_text", "text", "summary_text", "reasoning_text"}
# A call item: its tool name (None: the item's own `name`) and the field of its arguments.
CALLS = {"function_call": (None, "arguments"), "custom_tool_call": (None, "input"),
         "mcp_call": (None, "arguments"), "computer_call": ("computer", "action"),
         "web_search_call": ("web_search", "action"),
         "file_search_call": ("file_search", "queries"),
         "code_interpreter_call": ("code_interpreter", "code"),
         "image_generation_call": ("image_generation", None),
         "local_shell_call": ("local_shell", "action"), "shell_call": ("shell", "action"),
         "apply_patch_call": ("apply_patch", "operation"), "program": ("program", "code")}
# Hosted tools record their result on the call item itself.
INLINE_RESULTS = {"mcp_call": "output", "file_search_call": "results",
                  "code_interpreter_call": "outputs", "image_generation_call": "result"}
# A reply item: the field of its result, and the tool of its call when the type implies one.
OUTPUTS = {"function_call_output": ("output", None), "custom_tool_call_output": ("output", None),
           "computer_call_output": ("output", "computer"),
           "local_shell_call_output": ("output", "local_shell"),
           "shell_call_output": ("output", "shell"),
           "apply_patch_call_output": ("output", "apply_patch"),
           "program_output": ("result", "program")}
ITEM_TYPES = {"message", "reasoning", *CALLS, *OUTPUTS, "item_reference", "mcp_list_tools",
              "mcp_approval_request", "mcp_approval_response", "compaction"}
ROLES = {"user", "assistant", "system", "developer"}
TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
# Fields a response record does not repeat: they are the run's steps, outcome or metadata.
RESPONSE_MAPPED = ("id", "output", "instructions", "tools", "model", "status", "created_at",
                   "usage")
REQUEST_MAPPED = ("input", "instructions", "tools")
# Other markers a document of another format has at its top level.
FOREIGN = ("messages", "resourceSpans", "run_type", "inputs", "eval", "samples", "choices")
EXPECTED = ("expected an OpenAI Responses document: a response (`object: \"response\"` with "
            "`output` items), a request body with `input` items or a string `input` (and no "
            "`messages`), a {request, response} pair of them, or an openai-agents RunState "
            "snapshot (`$schemaVersion`, `original_input`, `generated_items`)")


class _Call(NamedTuple):
    """One model call: its exchange, the whole history it sent, and the response read."""

    exchange: vcr.Exchange
    items: list            # input items, with those a `previous_response_id` stands for
    response: dict | None  # the response object (reassembled from a stream)
    facts: dict            # HTTP status, stream facts, an unreadable body


# -- detection ---------------------------------------------------------------------------------
def detect(value: Any) -> bool:
    """Is `value` a Responses document (or a JSON array of them)?"""
    docs = each_document([value], _is_document)
    return bool(docs) and all(map(_is_document, docs))


def detect_exchange(exchange: vcr.Exchange) -> bool:
    """Is this recorded exchange a call to the Responses API (POST .../responses)?"""
    path = urlsplit(exchange.uri).path.rstrip("/")
    return path.endswith("/responses") and isinstance(exchange.request, dict)


def _is_document(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    if "request" in value and "response" in value:
        return _is_request(value["request"]) or _is_response(value["response"])
    return _is_response(value) or _is_request(value) or _is_run_state(value)


def _is_response(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("output"), list):
        return False
    return value.get("object") == "response" or str(value.get("id", "")).startswith("resp_")


def _is_request(value: Any) -> bool:
    if not isinstance(value, dict) or "input" not in value or any(k in value for k in FOREIGN):
        return False
    given = value["input"]
    if isinstance(given, str):
        return any(k in value for k in ("model", "instructions", "tools"))
    if not isinstance(given, list):
        return False
    if not given:
        return "model" in value or "previous_response_id" in value
    return all(_is_item(item) for item in given)


def _is_item(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    kind = item.get("type")
    if kind is None:
        return item.get("role") in ROLES and "content" in item
    return isinstance(kind, str) and (kind in ITEM_TYPES or kind.endswith(("_call", "_output")))


def _is_run_state(value: Any) -> bool:
    return (isinstance(value, dict) and "$schemaVersion" in value and "original_input" in value
            and isinstance(value.get("generated_items"), list))


# -- documents ---------------------------------------------------------------------------------
def convert(values: list[Any], options: Options, source: str) -> list[dict]:
    """The runs of a file's documents: one run per document."""
    docs = each_document(values, _is_document)
    runs = []
    for i, doc in enumerate(docs):
        where = source if len(docs) == 1 else f"{source} document {i + 1}"
        if not _is_document(doc):
            raise refuse(where, f"{EXPECTED}; got {_shape(doc)}")
        if _is_run_state(doc):
            runs.append(_run_state_run(doc, options, where))
            continue
        exchange = _exchange_of(doc)
        run = _conversation_run(_calls([exchange]))
        runs.append(finish_run(run, options, doc, exchange.response, exchange.request,
                               source=where))
    return runs


def _exchange_of(doc: dict) -> vcr.Exchange:
    """A document as the one exchange it records (a pair; or a request or a response alone)."""
    if "request" in doc and "response" in doc:
        request, response = doc["request"], doc["response"]
    else:
        request = doc if _is_request(doc) else None
        response = doc if _is_response(doc) else None
    return vcr.Exchange(uri="", request=request if isinstance(request, dict) else None,
                        response=response, status=None, streamed=isinstance(response, list))


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        return "an object with " + (", ".join(f"`{k}`" for k in list(value)[:8]) or "no members")
    return {list: "a JSON array", str: "a string"}.get(type(value), type(value).__name__)


# -- recorded traffic --------------------------------------------------------------------------
def convert_exchanges(exchanges: list[vcr.Exchange], options: Options, source: str) -> list[dict]:
    """The runs of a cassette's Responses calls: one per conversation. Calls to other APIs
    in it are not read here; each run lists those recorded during it (`other_api_calls`)."""
    mine = [detect_exchange(e) for e in exchanges]
    if not any(mine):
        raise refuse(source, "no OpenAI Responses API call (POST .../responses with a JSON "
                     "body) in the cassette")
    calls = _calls([e for e, m in zip(exchanges, mine) if m])
    by_request = {id(c.exchange.request): c for c in calls}
    grouped = vcr.conversations(exchanges, lambda r: _keys(by_request[id(r)].items)
                                if id(r) in by_request else None)
    groups = _resumed([[by_request[id(e.request)] for e in g] for g in grouped])
    runs = [_conversation_run(g) for g in groups]
    _note_other_calls(exchanges, mine, groups, runs)
    for run, group in zip(runs, groups):
        last = group[-1]
        why = unread(last.exchange, last.exchange.response) if last.response is None else None
        if why is not None:  # said in the outcome and a warning, never an empty answer
            run["outcome"] = {**(run.get("outcome") or {}), "response_unread": why}
            warn(source, f"the final response ({last.exchange.uri}) could not be read: {why}; "
                 "the run ends at its last request", run["run_id"])
    return [finish_run(run, options, *_where(group), source=source)
            for run, group in zip(runs, groups)]


def _calls(exchanges: list[vcr.Exchange]) -> list[_Call]:
    """Each call with its whole history: a `previous_response_id` that names a response
    recorded earlier, or a `conversation` used earlier, stands for the items sent and
    received before (the API keeps them; the request sends only the new ones)."""
    out, known = [], {}
    for exchange in exchanges:
        response, facts = _response_of(exchange)
        request = exchange.request if isinstance(exchange.request, dict) else {}
        before, conversation = request.get("previous_response_id"), _conversation_id(request)
        if isinstance(before, str):
            base = known.get(before, [])
        else:
            base = known.get(("conversation", conversation), []) if conversation else []
        items = list(base) + _inputs(request)
        done = items + _outputs(response)
        if response is not None and isinstance(response.get("id"), str):
            known[response["id"]] = done
        if conversation:
            known[("conversation", conversation)] = done
        out.append(_Call(exchange, items, response, facts))
    return out


def _conversation_id(request: dict) -> str | None:
    conversation = request.get("conversation")
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    return conversation if isinstance(conversation, str) and conversation else None


def _resumed(groups: list[list[_Call]]) -> list[list[_Call]]:
    """Conversations joined again where a call continues an earlier conversation rather than
    the one just before it (an agent whose tool ran another agent in between): its history
    starts with everything that earlier conversation's last call sent and received."""
    out: list[list[_Call]] = []
    for group in groups:
        first = _keys(group[0].items)
        for earlier in reversed(out):
            done = _keys(earlier[-1].items + _outputs(earlier[-1].response))
            if done and first[:len(done)] == done:
                earlier.extend(group)
                break
        else:
            out.append(list(group))
    return out


def _note_other_calls(exchanges, mine, groups, runs) -> None:
    """Record in each run the calls to other APIs made while it ran (after its calls), so a
    cassette that mixes APIs says what this format did not read."""
    group_of = {id(c.exchange.request): i for i, g in enumerate(groups) for c in g}
    current = 0
    for exchange, ours in zip(exchanges, mine):
        if ours:
            current = group_of.get(id(exchange.request), current)
            continue
        note = {"uri": exchange.uri, "http_status": exchange.status,
                "note": "not a Responses API call: not read by openai-responses"}
        if urlsplit(exchange.uri).path.rstrip("/").endswith("/chat/completions"):
            note["format"] = "openai-chat"
        runs[current]["metadata"].setdefault("other_api_calls", []).append(note)


def _where(group: list[_Call]) -> list[dict]:
    """Where --tenant-from/--person-from look: the responses, then the requests."""
    found = [c.response for c in group] + [c.exchange.request for c in group] + \
        [{"headers": c.exchange.headers} for c in group]
    return [w for w in found if isinstance(w, dict)]


def _response_of(exchange: vcr.Exchange) -> tuple[dict | None, dict]:
    facts: dict[str, Any] = {}
    if exchange.status is not None:
        facts["http_status"] = exchange.status
    body = exchange.response
    if exchange.streamed and isinstance(body, list):
        response, stream = _assemble(body)
        return response, {**facts, **stream}
    if isinstance(body, dict) and ("output" in body or body.get("object") == "response"):
        return body, facts
    if body is not None:
        facts["body"] = body  # an error reply, or a body that is not a response object
    return None, facts


# -- streams -----------------------------------------------------------------------------------
def _assemble(events: list) -> tuple[dict | None, dict]:
    """The response a stream of events describes: the `response` of its terminal event, else
    the last one seen with the output items the stream sent (text and arguments from deltas
    for an item that never finished)."""
    response, terminal, items, errors = None, False, {}, []
    texts: dict[int, list[str]] = {}
    arguments: dict[int, list[str]] = {}
    for event in events:
        if not isinstance(event, dict):
            continue
        kind, index = event.get("type"), event.get("output_index")
        index = index if type(index) is int else len(items)
        if isinstance(event.get("response"), dict):
            response, terminal = event["response"], kind in TERMINAL
        elif kind in ("response.output_item.added", "response.output_item.done") \
                and isinstance(event.get("item"), dict):
            items[index] = (event["item"], kind.endswith(".done"))
        elif kind == "response.output_text.delta" and isinstance(event.get("delta"), str):
            texts.setdefault(index, []).append(event["delta"])
        elif kind == "response.function_call_arguments.delta" \
                and isinstance(event.get("delta"), str):
            arguments.setdefault(index, []).append(event["delta"])
        elif kind == "error":
            errors.append(kept(event, ("type",)))
    facts: dict[str, Any] = {"streamed": True, "stream_complete": terminal}
    if errors:
        facts["stream_errors"] = errors
    if response is None and not items:
        return None, facts
    response = dict(response or {})
    if items and not (terminal and response.get("output")):
        response["output"] = [_finished(item, done, texts.get(i), arguments.get(i))
                              for i, (item, done) in sorted(items.items())]
    return response, facts


def _finished(item: dict, done: bool, texts, arguments) -> dict:
    if done:
        return item
    item = dict(item)
    if texts and item.get("type") == "message":
        item["content"] = [{"type": "output_text", "text": "".join(texts)}]
    if arguments and item.get("type") == "function_call":
        item["arguments"] = "".join(arguments)
    return item


# -- one run -----------------------------------------------------------------------------------
def _conversation_run(calls: list[_Call]) -> dict:
    """The run of one conversation's calls, in recorded order."""
    steps, given = _Steps(), None
    for n, call in enumerate(calls):
        request = call.exchange.request if isinstance(call.exchange.request, dict) else {}
        source = request if "instructions" in request else (call.response or {})
        instructions = source.get("instructions")
        if n == 0:
            steps.instructions(instructions)  # the system prompt comes first
        fresh = call.items[_common_prefix(steps.keys, _keys(call.items)):]
        for item in fresh:
            steps.add(item)
        if n > 0 and instructions != given:
            steps.instructions(instructions)  # a handoff: the next model call has new ones
        given = instructions
        for item in _outputs(call.response):
            steps.add(item)
    run = {"run_id": _run_id(calls), "steps": steps.steps, "metadata": _metadata(calls, steps)}
    first = calls[0].response or {}
    started = _iso(first.get("created_at"))
    if started is not None:
        run["started_at"] = started
    run.update(_input_output(steps.steps, calls[-1].response))
    outcome = _outcome(calls[-1])
    if outcome:
        run["outcome"] = outcome
    return run


def _run_id(calls: list[_Call]) -> str:
    for call in calls:
        if call.response is not None and isinstance(call.response.get("id"), str):
            return derived_run_id(NAME, call.response["id"])
    for call in calls:
        request = call.exchange.request if isinstance(call.exchange.request, dict) else {}
        if _conversation_id(request):
            return derived_run_id(NAME, _conversation_id(request))
    return derived_run_id(NAME, content=[[c.exchange.request, c.exchange.response]
                                         for c in calls])


def _metadata(calls: list[_Call], steps: _Steps) -> dict:
    records, tools, usage = [], [], {}
    model = None
    for call in calls:
        request = call.exchange.request if isinstance(call.exchange.request, dict) else None
        response = call.response
        record = {k: response[k] for k in ("id", "model", "status", "created_at", "usage")
                  if response is not None and k in response}
        if request is not None:
            record["request"] = kept(request, REQUEST_MAPPED)
        if response is not None:
            record["response"] = kept(response, RESPONSE_MAPPED)
        record.update(call.facts)
        records.append(record)
        model = model or (response or {}).get("model") or (request or {}).get("model")
        given = (request or {}).get("tools") if "tools" in (request or {}) \
            else (response or {}).get("tools")
        for tool in given if isinstance(given, list) else ():
            if tool not in tools:
                tools.append(tool)
        for key, value in ((response or {}).get("usage") or {}).items():
            if type(value) is int:
                usage[key] = usage.get(key, 0) + value
    meta: dict[str, Any] = {"responses": records}
    if model is not None:
        meta["model"] = model
    if tools:
        meta["tools"] = tools
    if usage:
        meta["usage"] = usage
    if steps.other:
        meta["other_items"] = steps.other
    return meta


def _input_output(steps: list[dict], response: dict | None) -> dict:
    out = {}
    user = next((s for s in steps if s["type"] == "message" and s["role"] == "user"), None)
    if user is not None:
        out["input"] = user["content"] if user["content"] or "parts" not in user \
            else user["parts"]
    text = (response or {}).get("output_text")
    if not isinstance(text, str):
        last = next((s for s in reversed(steps)
                     if s["type"] == "message" and s["role"] == "assistant"), None)
        text = None if last is None else last["content"]
    if text is not None:
        out["output"] = text
    return out


def _outcome(call: _Call) -> dict:
    response, facts = call.response, call.facts
    outcome = {}
    if response is not None:
        outcome = {k: response[k] for k in ("status", "error", "incomplete_details")
                   if response.get(k) is not None}
    body = facts.get("body")
    if isinstance(body, dict) and "error" in body:
        outcome["error"] = body["error"]
    if outcome.get("error") is not None and "http_status" in facts:
        outcome["http_status"] = facts["http_status"]
    if facts.get("stream_complete") is False:
        outcome["stream_complete"] = False  # the stream ended before its terminal event
    if "stream_errors" in facts:
        outcome["stream_errors"] = facts["stream_errors"]
    return outcome


def _iso(seconds: Any) -> str | None:
    """Unix seconds as ISO 8601 UTC (`...Z`), or None when it is not a time."""
    if type(seconds) not in (int, float):
        return None
    try:
        moment = datetime.fromtimestamp(seconds, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    spec = "seconds" if moment.microsecond == 0 else "microseconds"
    return moment.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


# -- items -------------------------------------------------------------------------------------
def _inputs(request: dict | None) -> list:
    given = (request or {}).get("input")
    if isinstance(given, str):
        return [{"type": "message", "role": "user", "content": given}]
    if isinstance(given, list):
        return list(given)
    return [] if given is None else [given]


def _outputs(response: dict | None) -> list:
    output = (response or {}).get("output")
    return list(output) if isinstance(output, list) else []


def _keys(items: list) -> list:
    """What history comparison sees of each item: a message's role and text (a re-sent
    message loses its annotations and logprobs), anything else without its id and status."""
    out = []
    for item in items:
        if isinstance(item, dict) and item.get("type", "message") == "message":
            out.append(("message", item.get("role"), _text(item.get("content"))[0]))
        elif isinstance(item, dict) and (item.get("call_id") or "arguments" in item):
            # A call (or its output) is identified by its call id, else by its name and
            # PARSED arguments: never by the bytes of its re-sent JSON.
            out.append(("call", item.get("type"), turn_of(item)))
        elif isinstance(item, dict):
            out.append(("item", json.dumps(kept(item, ("id", "status")), sort_keys=True)))
        else:
            out.append(("value", json.dumps(item, sort_keys=True)))
    return out


def _common_prefix(a: list, b: list) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def _text(content: Any) -> tuple[Any, bool]:
    """A message's text, and whether that text is all of it (plain text parts only)."""
    if content is None or isinstance(content, str):
        return content, True
    if not isinstance(content, list):
        return None, False
    texts, plain = [], True
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
            plain = plain and part.get("type") in TEXT_PARTS and not any(
                v for k, v in part.items() if k not in ("type", "text"))
        elif isinstance(part, dict) and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
            plain = False
        else:
            plain = False
    return "\n".join(texts), plain


def _name(value: Any) -> str:
    return value if isinstance(value, str) and value else UNKNOWN


class _Steps:
    """A run's steps built item by item: a reply joins its call, and an item that is no step
    is kept in metadata with its place (`before_step`)."""

    def __init__(self) -> None:
        self.steps: list[dict] = []
        self.other: list[dict] = []
        self.keys: list = []
        self.joiner = CallJoiner()
        self.calls: dict[str, dict] = {}

    def instructions(self, text: Any) -> None:
        if text is not None:
            content, plain = _text(text)
            step = {"type": "message", "role": "system", "content": content,
                    "instructions": True}
            if not plain:
                step["parts"] = text
            self.steps.append(step)

    def add(self, item: Any, wrapper: dict | None = None) -> None:
        self.keys.extend(_keys([item]))
        note = kept(wrapper, ("raw_item",)) if isinstance(wrapper, dict) else None
        kind = item.get("type", "message" if "role" in item else None) \
            if isinstance(item, dict) else None
        if kind in OUTPUTS:
            return self._reply(item, kind, note)
        if kind == "message":
            step = _message(item, "role", "content")
        elif kind == "reasoning":
            step = _message(item, None, "summary")
        elif kind in CALLS:
            step = self._call(item, kind)
        else:
            entry = {"before_step": len(self.steps), "item": item}
            self.other.append({**entry, "run_item": note} if note else entry)
            return None
        if note:
            step["run_item"] = note
        self.steps.append(step)
        return None

    def _call(self, item: dict, kind: str) -> dict:
        tool, field = CALLS[kind]
        mapped = {"type"}
        step = {"type": "tool_call", "tool_name": tool or _name(item.get("name"))}
        if tool is None and step["tool_name"] != UNKNOWN:
            mapped.add("name")  # a missing or empty name stays in `item` as recorded
        if isinstance(item.get("call_id"), str):
            step["call_id"] = item["call_id"]
            mapped.add("call_id")
        if field is not None and item.get(field) is not None:
            value = item[field]
            step.update(tool_arguments(value) if field == "arguments" else
                        {"arguments": value if isinstance(value, dict) else {field: value}})
            mapped.add(field)
        if kind in INLINE_RESULTS:
            # A hosted tool's null output or error means none yet: no `result` key, and the
            # null stays in `item` as recorded.
            for name, key in ((INLINE_RESULTS[kind], "result"), ("error", "error")):
                if item.get(name) is not None:
                    step[key] = item[name]
                    mapped.add(name)
        rest = kept(item, mapped)
        if rest:
            step["item"] = rest
        if "call_id" in step:
            self.calls[step["call_id"]] = step
        return self.joiner.call(step.get("call_id"), step)

    def _reply(self, item: dict, kind: str, note: dict | None) -> None:
        field, tool = OUTPUTS[kind]
        call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        call = self.joiner.reply(call_id)
        rest = kept(item, ("type", "call_id", field) if call_id is not None else ("type", field))
        if note:
            rest["run_item"] = note
        if call is None:
            # An orphan reply (its call was not recorded): a step of its own, so its result
            # is neither lost nor attached to a call it does not answer.
            call = {"type": "tool_call",
                    "tool_name": tool or _name((note or {}).get("tool_name")),
                    "orphan_output": True}
            if call_id is not None:
                call["call_id"] = call_id
            self.steps.append(call)
        if field in item:
            call["result"] = item[field]
        if rest:
            call["reply"] = rest  # withheld with tool_results (cas/format/projection.py)

    def approval(self, call_id: Any, note: dict | None) -> bool:
        """Mark the call an approval request is for; False when no such call is a step."""
        step = self.calls.get(call_id) if isinstance(call_id, str) else None
        if step is None:
            return False
        step["approval_requested"] = True
        if note:
            step["approval_item"] = note
        return True


def _message(item: dict, role: str | None, field: str) -> dict:
    content, plain = _text(item.get(field))
    step = {"type": "message", "role": _name(item.get(role)) if role else "reasoning",
            "content": content}
    if not plain:
        step["parts"] = item.get(field)
    mapped = {"type", field} | ({role} if role and step["role"] != UNKNOWN else set())
    rest = kept(item, mapped)
    if rest:
        step["item"] = rest
    return step


# -- openai-agents RunState snapshots ----------------------------------------------------------
def _run_state_run(doc: dict, options: Options, source: str) -> dict:
    """A RunState snapshot (openai-agents, `RunState.to_json`): its original input and the
    items the run generated, as one run; everything else of the snapshot is metadata."""
    version = doc.get("$schemaVersion")
    if not (isinstance(version, str) and version.split(".")[0] == "1"):
        raise refuse(source, f"an openai-agents RunState of schema version {version!r}: this "
                     "importer reads versions 1.x")
    steps = _Steps()
    for item in _inputs({"input": doc.get("original_input")}):
        steps.add(item)
    for wrapper in doc["generated_items"]:
        raw = wrapper.get("raw_item") if isinstance(wrapper, dict) else None
        if not isinstance(raw, dict):
            steps.other.append({"before_step": len(steps.steps), "item": wrapper})
            continue
        note = kept(wrapper, ("raw_item",))
        if wrapper.get("type") == "tool_approval_item" and steps.approval(raw.get("call_id"),
                                                                          note):
            continue  # the SDK lists the call again as the approval it waits for
        steps.add(raw, wrapper)
        if wrapper.get("type") == "tool_approval_item":
            steps.approval(raw.get("call_id"), None)  # its wrapper is the step's run_item
    run = {"run_id": derived_run_id(NAME, content=doc), "steps": steps.steps,
           "metadata": {"run_state": kept(doc, ("generated_items", "original_input"))}}
    agent = (doc.get("current_agent") or {}).get("name") \
        if isinstance(doc.get("current_agent"), dict) else None
    if agent is not None:
        run["metadata"]["agent"] = agent
    if steps.other:
        run["metadata"]["other_items"] = steps.other
    run.update(_input_output(steps.steps, None))
    outcome = _run_state_outcome(doc.get("current_step"))
    if outcome:
        run["outcome"] = outcome
    return finish_run(run, options, doc, source=source)


def _run_state_outcome(current: Any) -> dict | None:
    if not isinstance(current, dict):
        return None
    if current.get("type") == "next_step_interruption":
        data = current.get("data") if isinstance(current.get("data"), dict) else {}
        interruptions = data.get("interruptions")  # a damaged snapshot may hold null here
        pending = [i["raw_item"].get("call_id")
                   for i in (interruptions if isinstance(interruptions, list) else [])
                   if isinstance(i, dict) and isinstance(i.get("raw_item"), dict)]
        return {"status": "interrupted", "pending_call_ids": pending}
    if current.get("type") == "next_step_final_output":
        return {"status": "completed"}
    return None
