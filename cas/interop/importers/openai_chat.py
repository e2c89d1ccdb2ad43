"""The openai-chat importer: OpenAI Chat Completions conversations as runs (docs/importers.md).

A document is a message array, a request body (`messages`, `tools`) with or without its
response, a tau-bench trajectory (`task_id`, `traj`), or a tau2-bench results file
(`simulations`, whose messages use tau2's own tool-call shape); the vcr container gives the
recorded /v1/chat/completions traffic, streamed responses reassembled from their chunks.
"""

from __future__ import annotations

import datetime
from typing import Any
from urllib.parse import urlparse

from blake3 import blake3

from cas.format import encoding
from cas.interop.importers import vcr
from cas.interop.importers.common import (CallJoiner, Options, conversations, derived_run_id,
                                          each_document, finish_run, kept, listed, lookup, refuse,
                                          resends, tool_arguments, unread, warn)

NAME = "openai-chat"

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
TAU2_ROLES = frozenset({"system", "user", "assistant", "tool"})
# Content part types of Chat Completions; any other (Anthropic's tool_use, Responses'
# input_text ...) means the array is another format's.
PARTS = frozenset({"text", "image_url", "input_audio", "file", "refusal"})
# Top-level keys that mark another format's document (Anthropic `system`, Responses `input`,
# Inspect `epoch`/`samples`, spans, LangSmith runs): a Chat Completions body never has them.
FOREIGN = frozenset({"system", "anthropic_version", "input", "output", "instructions",
                     "previous_response_id", "samples", "eval", "epoch", "target", "scores",
                     "events", "spans", "resourceSpans", "run_type", "inputs", "outputs",
                     "post", "patch"})
RESPONSE_KEYS = frozenset({"id", "object", "created", "choices", "usage", "system_fingerprint",
                           "service_tier"})
EXPECTED = ("expected an OpenAI Chat Completions document: a message array [{role, content, "
            "tool_calls?}], a request body {messages, tools?, response?} (or with the response's "
            "`choices` beside `messages`), {request: {messages ...}, response}, a tau-bench "
            "trajectory {task_id, traj}, or a tau2-bench results file {simulations: [{messages}]}")


# -- shapes ------------------------------------------------------------------------------------
def _named(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _is_call(call: Any, tau2: bool) -> bool:
    if not isinstance(call, dict):
        return False
    if tau2:  # tau2: {id, name, arguments (an object), requestor}
        return _named(call.get("name")) and "function" not in call
    if call.get("type") == "custom":
        return isinstance(call.get("custom"), dict) and _named(call["custom"].get("name"))
    fn = call.get("function")
    return call.get("type", "function") in ("function", None) and isinstance(fn, dict) \
        and _named(fn.get("name"))


def _is_message(message: Any, tau2: bool = False) -> bool:
    if not isinstance(message, dict) or "type" in message or "source" in message:
        return False  # `type`: a Responses item; `source`: an Inspect message
    if message.get("role") not in (TAU2_ROLES if tau2 else ROLES):
        return False
    content = message.get("content")
    if not (content is None or isinstance(content, str) or (isinstance(content, list) and all(
            isinstance(p, dict) and p.get("type") in PARTS for p in content))):
        return False
    calls = message.get("tool_calls")
    if calls is not None and not (isinstance(calls, list) and
                                  all(_is_call(c, tau2) for c in calls)):
        return False
    legacy = message.get("function_call")
    return legacy is None or (not tau2 and isinstance(legacy, dict) and
                              _named(legacy.get("name")))


def _is_messages(value: Any, tau2: bool = False) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_message(m, tau2) for m in value)


def _is_request(value: Any) -> bool:
    return isinstance(value, dict) and not FOREIGN & value.keys() and \
        _is_messages(value.get("messages")) and isinstance(listed(value.get("tools")), list)


def _is_response(value: Any) -> bool:
    if value is None:
        return True
    if not isinstance(value, dict):
        return False
    choices = value.get("choices", [])
    return isinstance(choices, list) and all(
        isinstance(c, dict) and (c.get("message") is None or _is_message(c["message"]))
        for c in choices)


def _is_simulation(value: Any) -> bool:
    return isinstance(value, dict) and "task_id" in value and \
        ("reward_info" in value or "termination_reason" in value) and \
        _is_messages(value.get("messages"), tau2=True)


def _kind(value: Any) -> str | None:
    """Which of this format's documents `value` is, or None."""
    if isinstance(value, list):
        return "messages" if _is_messages(value) else None
    if not isinstance(value, dict) or FOREIGN & value.keys():
        return None
    if "simulations" in value:
        sims = value["simulations"]
        ok = isinstance(sims, list) and bool(sims) and all(map(_is_simulation, sims))
        return "tau2" if ok else None
    if _is_simulation(value):
        return "tau2-simulation"
    if "traj" in value:
        ok = _is_messages(value["traj"]) and "task_id" in value and \
            isinstance(value.get("info") or {}, dict)
        return "tau-bench" if ok else None
    if "request" in value and "messages" not in value:
        ok = _is_request(value["request"]) and _is_response(value.get("response"))
        return "exchange" if ok else None
    if _is_request(value) and _is_response(value.get("response")) and _is_response(
            {"choices": value["choices"]} if "choices" in value else None):
        return "request"
    return None


def _is_one(value: Any) -> bool:
    return _kind(value) is not None


def detect(value: Any) -> bool:
    """Is `value` a Chat Completions document (or a JSON array of them)?"""
    return _is_one(value) or (isinstance(value, list) and bool(value) and
                              all(map(_is_one, value)))


def _hint(value: Any) -> str:
    """Which other format a refused document looks like, to name in the refusal."""
    keys = value.keys() if isinstance(value, dict) else set()
    items = value if isinstance(value, list) else (value.get("messages") or value.get("input")
                                                   if isinstance(value, dict) else None)
    parts = {p.get("type") for m in listed(items) if isinstance(m, dict)
             for p in (m.get("content") if isinstance(m.get("content"), list) else [])
             if isinstance(p, dict)}
    typed = any(isinstance(m, dict) and "type" in m for m in listed(items))
    if keys & {"system", "anthropic_version"} or parts & {"tool_use", "tool_result", "thinking",
                                                          "image", "document"}:
        return " (it looks like Anthropic Messages: --format anthropic)"
    if keys & {"input", "output", "instructions", "previous_response_id"} or typed or \
            parts & {"input_text", "output_text"}:
        return " (it looks like OpenAI Responses items: --format openai-responses)"
    if keys & {"resourceSpans", "spans"}:
        return " (it looks like spans: --format otel-genai or openinference)"
    if keys & {"eval", "samples", "epoch"}:
        return " (it looks like an Inspect log: --format inspect)"
    if keys & {"run_type", "post", "patch"}:
        return " (it looks like LangSmith runs: --format langsmith)"
    return ""


# -- steps -------------------------------------------------------------------------------------
def _compact(value: dict) -> dict:
    """`value` without members that carry nothing (None, {}, [])."""
    return {k: v for k, v in value.items() if v is not None and v != {} and v != []}


def _call_step(call: dict, tau2: bool) -> tuple[str | None, dict]:
    """A tool_call step (and its id) for one `tool_calls[]` member."""
    if tau2:
        name, raw, rest = call["name"], call.get("arguments"), kept(call, ("id", "name",
                                                                            "arguments"))
        step = {"type": "tool_call", "tool_name": name, **tool_arguments(raw)}
    elif call.get("type") == "custom":
        custom = call["custom"]
        # Free-form input is not JSON by design; wrapped as an object so the content policy's
        # `tool_arguments` class withholds it like any other arguments.
        step = {"type": "tool_call", "tool_name": custom["name"], "call_type": "custom",
                "arguments": {"input": custom.get("input")}}
        rest = {**kept(call, ("id", "type", "custom")),
                **_compact({"custom": kept(custom, ("name", "input"))})}
    else:
        fn = call["function"]
        step = {"type": "tool_call", "tool_name": fn["name"], **tool_arguments(fn.get("arguments"))}
        rest = {**kept(call, ("id", "type", "function")),
                **_compact({"function": kept(fn, ("name", "arguments"))})}
    call_id = call.get("id")
    if call_id is not None:
        step["call_id"] = call_id
    if rest:
        step["call"] = rest  # the call's other members (tau2's `requestor` ...)
    return call_id if isinstance(call_id, str) else None, step


def _answer(step: dict, reply: dict, tau2: bool) -> None:
    """Record `reply` (a tool message) as the result of the call `step` (a failed call's
    reply as its `error`: the rule of docs/runs.md, section 1)."""
    if tau2 and reply.get("error") is True:
        # tau2 flags a failed call with `error: true`; its content is the error message, the
        # failure itself, not a result beside it.
        step["error"] = reply.get("content")
    else:
        step["result"] = reply.get("content")
        if tau2 and reply.get("error"):  # a failure recorded apart from the content
            step["error"] = reply["error"]
    rest = kept(reply, ("role", "content", "id", "error") if tau2 else
                ("role", "content", "tool_call_id"))
    if rest.get("name") == step["tool_name"]:
        del rest["name"]  # the tool's name again, already the step's tool_name
    if rest:
        step["reply"] = rest


def _steps(messages: list[dict], tau2: bool = False) -> list[dict]:
    """The steps of a conversation: every message in order, each tool call right after the
    message that made it, each tool reply joined to its call as the call's result."""
    steps: list[dict] = []
    calls, legacy = CallJoiner(), CallJoiner()
    for message in messages:
        role = message["role"]
        if role in ("tool", "function"):
            if role == "tool":
                call = calls.reply(message.get("id" if tau2 else "tool_call_id"))
            else:  # a legacy `function` reply answers the last call of that name
                call = legacy.reply(message.get("name"))
            if call is not None:
                _answer(call, message, tau2)
                continue
            # A reply that answers no call is kept as the message it is, never dropped.
            steps.append({"type": "message", **message, "orphan_reply": True})
            continue
        steps.append({"type": "message", **kept(message, ("tool_calls", "function_call"))})
        for call in listed(message.get("tool_calls")):
            call_id, step = _call_step(call, tau2)
            steps.append(calls.call(call_id, step))
        fc = message.get("function_call")
        if fc is not None:
            step = {"type": "tool_call", "tool_name": fc["name"], "call_type": "function_call",
                    **tool_arguments(fc.get("arguments"))}
            rest = kept(fc, ("name", "arguments"))
            if rest:
                step["call"] = rest
            steps.append(legacy.call(fc["name"], step))
    return steps


def _ends(messages: list[dict]) -> tuple[Any, Any]:
    """The run's input (the first user message's content) and output (the last assistant
    message's content)."""
    first = next((m for m in messages if m["role"] == "user"), {})
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), {})
    output = last.get("content")
    if output in (None, "") and isinstance(last.get("refusal"), str) and last["refusal"]:
        output = last["refusal"]  # a refusal is the run's answer (it stays on its step too)
    return first.get("content"), output


def _iso(created: Any) -> str | None:
    """Unix seconds (`created`) as ISO 8601 UTC, e.g. 2024-11-12T00:24:01Z."""
    if isinstance(created, bool) or not isinstance(created, (int, float)):
        return None
    try:
        moment = datetime.datetime.fromtimestamp(created, datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + \
        (f".{moment.microsecond:06d}".rstrip("0") if moment.microsecond else "") + "Z"


def _run(run_id: str, messages: list[dict], tau2: bool = False, **fields: Any) -> dict:
    inp, out = _ends(messages)
    run = {"run_id": run_id, "input": inp, "output": out, "steps": _steps(messages, tau2)}
    run.update({k: v for k, v in fields.items() if v is not None})
    return run


# -- chat documents ----------------------------------------------------------------------------
def _split(document: dict, kind: str) -> tuple[dict, dict | None, dict]:
    """The request, the response (or None) and the wrapper's other members of a document."""
    if kind == "exchange":
        return document["request"], document.get("response"), \
            kept(document, ("request", "response"))
    if "response" in document:
        return kept(document, ("response",)), document["response"], {}
    if "choices" in document:  # the response's members beside the request's
        response = {k: v for k, v in document.items() if k in RESPONSE_KEYS}
        return kept(document, RESPONSE_KEYS), response, {}
    return document, None, {}


def _answered(request: dict, response: dict | None) -> tuple[list[dict], dict]:
    """The conversation (the request's messages and the response's first choice) and the
    outcome and metadata the response gives."""
    response = response if isinstance(response, dict) else {}
    choices = listed(response.get("choices"))
    choice = choices[0] if choices else {}
    messages = list(request["messages"])
    if choice.get("message") is not None:
        messages.append(choice["message"])
    outcome = _compact({"finish_reason": choice.get("finish_reason"),
                        "error": response.get("error")}) or None
    meta = _compact({"model": request.get("model") or response.get("model"),
                     "tools": request.get("tools"), "usage": response.get("usage"),
                     "request": kept(request, ("messages", "model", "tools")),
                     "response": kept(response, ("choices", "usage", "error")),
                     "choice": kept(choice, ("message", "finish_reason")),
                     "other_choices": choices[1:]})
    return messages, {"outcome": outcome, "metadata": meta}


def _from_chat(document: Any, kind: str, options: Options, where: str) -> list[dict]:
    if kind == "messages":
        run = _run(derived_run_id(NAME, content=document), document, metadata={})
        return [finish_run(run, options, document, source=where)]
    request, response, wrapper = _split(document, kind)
    messages, parts = _answered(request, response)
    response = response or {}
    run_id = derived_run_id(NAME, response.get("id"), content=document)
    run = _run(run_id, messages, started_at=_iso(response.get("created")),
               outcome=parts["outcome"],
               metadata=_compact({**parts["metadata"], "document": wrapper}))
    # A field path may name the document's own member or the request's (`user`, `metadata`).
    return [finish_run(run, options, document, request, response, source=where)]


# -- benchmarks --------------------------------------------------------------------------------
def _short_digest(value: Any) -> str:
    return blake3(encoding.encode(value)).hexdigest()[:16]


def _from_tau_bench(entry: dict, options: Options, where: str) -> list[dict]:
    info = entry.get("info") or {}
    # task_id and trial repeat across tau-bench's files (one per domain and model): a digest of
    # the trajectory keeps two files' runs apart, and stays the same on a re-import.
    run_id = derived_run_id(NAME, "tau-bench", entry["task_id"], entry.get("trial"),
                            _short_digest(entry["traj"]))
    outcome = _compact({"reward": entry.get("reward"), "reward_info": info.get("reward_info")})
    meta = _compact({"benchmark": "tau-bench", "task_id": entry["task_id"],
                     "trial": entry.get("trial"), "task": info.get("task"),
                     "info": kept(info, ("task", "reward_info")),
                     "document": kept(entry, ("task_id", "trial", "reward", "info", "traj"))})
    run = _run(run_id, entry["traj"], outcome=outcome or None, metadata=meta)
    return [finish_run(run, options, entry, source=where)]


def _from_tau2(document: dict, kind: str, options: Options, where: str) -> list[dict]:
    if kind == "tau2-simulation":
        return [_tau2_run(document, None, {}, options, where)]
    tasks = {str(t.get("id")): t for t in listed(document.get("tasks")) if isinstance(t, dict)}
    results = kept(document, ("simulations", "tasks"))
    return [_tau2_run(sim, tasks.get(str(sim.get("task_id"))), results, options,
                      f"{where} simulations[{i}]")
            for i, sim in enumerate(document["simulations"])]


def _tau2_run(sim: dict, task: dict | None, results: dict, options: Options,
              where: str) -> dict:
    reward_info = sim.get("reward_info")
    run_id = derived_run_id(NAME, "tau2", sim["id"]) if sim.get("id") \
        else derived_run_id(NAME, content=sim)
    outcome = _compact({"reward": lookup(reward_info, "reward"), "reward_info": reward_info,
                        "termination_reason": sim.get("termination_reason")})
    meta = _compact({"benchmark": "tau2-bench", "model": lookup(results, "info.agent_info.llm"),
                     "tools": lookup(results, "info.environment_info.tool_defs"), "task": task,
                     "simulation": kept(sim, ("messages", "reward_info", "termination_reason",
                                              "start_time")),
                     "results": results})
    start = sim.get("start_time")
    run = _run(run_id, sim["messages"], tau2=True, outcome=outcome or None, metadata=meta,
               started_at=start if isinstance(start, str) else None)
    return finish_run(run, options, sim, task, results, source=where)


def convert(values: list[Any], options: Options, source: str) -> list[dict]:
    """The runs of a file's parsed JSON values: one run per conversation, trajectory or
    simulation, in file order."""
    documents = each_document(values, _is_one)
    runs: list[dict] = []
    for i, document in enumerate(documents):
        where = source if len(documents) == 1 else f"{source} document {i + 1}"
        kind = _kind(document)
        if kind is None:
            raise refuse(where, f"not an openai-chat document{_hint(document)}: {EXPECTED}")
        if kind in ("tau2", "tau2-simulation"):
            runs.extend(_from_tau2(document, kind, options, where))
        elif kind == "tau-bench":
            runs.extend(_from_tau_bench(document, options, where))
        else:
            runs.extend(_from_chat(document, kind, options, where))
    return runs


# -- recorded traffic --------------------------------------------------------------------------
def detect_exchange(exchange: vcr.Exchange) -> bool:
    """Is `exchange` a Chat Completions call (a request with `messages` to .../chat/completions,
    or answered with `choices`)? A recorded response alone (no request: an `.sse` or
    `.chunks.txt` fixture) is one when it is a chat completion or a stream of its chunks."""
    if exchange.request is None and not exchange.uri:
        return _answers(exchange)
    if not _is_request(exchange.request):
        return False
    if urlparse(exchange.uri).path.endswith("/chat/completions"):
        return True
    return _answers(exchange)


def _answers(exchange: vcr.Exchange) -> bool:
    body = exchange.response
    return isinstance(body, dict) and isinstance(body.get("choices"), list) or \
        (exchange.streamed and isinstance(body, list) and any(
            isinstance(c, dict) and str(c.get("object", "")).startswith("chat.completion")
            for c in body))


def _order(index: Any) -> tuple:
    """Stream indexes in numeric order (any that is not a number after them)."""
    return (0, index, "") if isinstance(index, int) else (1, 0, str(index))


_CONCAT = ("content", "refusal", "reasoning_content", "reasoning")


def _merge_call(calls: dict, delta: dict) -> None:
    """Fold one streamed `tool_calls[]` delta into the call at its index: the id, type and
    name come once; the arguments (or a custom call's input) arrive in pieces."""
    call = calls.setdefault(delta.get("index", len(calls)), {})
    for key, value in delta.items():
        if key == "index" or value is None:
            continue
        if key in ("function", "custom") and isinstance(value, dict):
            inner = call.setdefault(key, {})
            for k, v in value.items():
                piece = k in ("arguments", "input") and isinstance(v, str)
                inner[k] = (inner.get(k) or "") + v if piece else inner.get(k) or v
        else:
            call.setdefault(key, value)


def _merge_delta(message: dict, calls: dict, delta: dict, varying: dict | None = None) -> None:
    """Fold one delta into the message: text pieces concatenated, lists (OpenRouter's
    `reasoning_details`) extended; another member that changes from chunk to chunk
    (Together's `token_id`) keeps its first value, and every value, in order, goes to
    `varying` (kept as the choice's `delta_values`)."""
    for key, value in delta.items():
        if key == "tool_calls":
            for piece in listed(value):
                if isinstance(piece, dict):
                    _merge_call(calls, piece)
        elif key == "function_call" and isinstance(value, dict):
            legacy = message.setdefault("function_call", {})
            for k, v in value.items():
                legacy[k] = (legacy.get(k) or "") + v if isinstance(v, str) else v
        elif key in _CONCAT and isinstance(value, str):
            message[key] = (message.get(key) or "") + value
        elif isinstance(value, list) and isinstance(message.get(key), list):
            message[key] = message[key] + value
        elif message.get(key) is not None and value is not None and value != message[key] \
                and varying is not None:
            varying.setdefault(key, [message[key]]).append(value)
        elif key in varying if varying is not None else False:
            varying[key].append(value)
        elif value is not None or key not in message:
            message[key] = value


def _merge_choice(slots: dict, choice: dict) -> None:
    slot = slots.setdefault(choice.get("index", 0), {"message": {}, "calls": {}, "rest": {}})
    delta = choice.get("delta")
    if isinstance(delta, dict):
        _merge_delta(slot["message"], slot["calls"], delta,
                     slot["rest"].setdefault("delta_values", {}))
    for key, value in choice.items():
        if key in ("index", "delta") or value is None:
            continue
        if key == "logprobs" and isinstance(value, dict):  # token lists, one piece per chunk
            into = slot["rest"].setdefault("logprobs", {})
            for k, v in value.items():
                into[k] = (listed(into.get(k))) + v if isinstance(v, list) else v
        elif key == "message" and isinstance(value, dict) and not isinstance(delta, dict):
            _merge_delta(slot["message"], slot["calls"], value)  # a stream of messages
        elif key == "message" and isinstance(value, dict):
            # A `message` beside `delta` (some OpenAI-compatible servers): the deltas spell
            # the answer; the chunks' messages are kept beside it, in order, not over it.
            slot["rest"].setdefault("stream_messages", []).append(value)
        elif key == "text" and isinstance(value, str):  # Together: the delta's text again
            slot["rest"]["text"] = slot["rest"].get("text", "") + value
        else:
            slot["rest"][key] = value


def reassemble(chunks: list[Any]) -> dict:
    """The response a stream of `chat.completion.chunk` payloads adds up to: content deltas
    concatenated, tool-call deltas merged by index (their arguments concatenated), the usage of
    the chunk that carries it, and each other member as the first chunk that has it gave it.
    Each chunk's random `obfuscation` padding is left out: it carries nothing."""
    out: dict = {}
    slots: dict = {}
    unparsed = []
    for chunk in chunks:
        if not isinstance(chunk, dict):
            unparsed.append(chunk)
            continue
        for key, value in chunk.items():
            if key in ("choices", "obfuscation") or value is None:
                continue
            # (Azure's first chunk, of prompt filter results, has `id: ""`, `created: 0`:
            # the first chunk that names them gives them.)
            if key == "usage" or key not in out or out[key] in ("", 0):
                out[key] = value
            elif isinstance(value, dict) and isinstance(out[key], dict):
                # a vendor member in several chunks (Groq's x_groq: its id first, its usage
                # last): what a later chunk adds is kept beside what the first gave
                out[key] = {**value, **out[key]}
        for choice in listed(chunk.get("choices")):
            if isinstance(choice, dict):
                _merge_choice(slots, choice)
    choices = []
    for index in sorted(slots, key=_order):
        slot = slots[index]
        message = slot["message"]
        if slot["calls"]:
            message["tool_calls"] = [slot["calls"][i] for i in sorted(slot["calls"], key=_order)]
        rest = {k: v for k, v in slot["rest"].items() if k != "delta_values" or v}
        choices.append({"index": index, "message": message, **rest})
    out["choices"] = choices
    if unparsed:
        out["unparsed_events"] = unparsed
    return out


def _call_meta(exchange: vcr.Exchange, response: Any, last: bool, final: list) -> dict:
    """What one recorded call leaves in `metadata.calls[]`: everything but the history its
    request re-sends and, for the last call, the choice that became the final message. An
    earlier call whose history the final one does not re-send (a system prompt swapped on a
    handoff, a turn rewritten) keeps its messages as sent."""
    if last and isinstance(response, dict):
        response = kept(response, ("choices",))
    sent = listed((exchange.request or {}).get("messages"))
    return _compact({"uri": exchange.uri, "status": exchange.status,
                     "streamed": exchange.streamed or None,
                     "chunks": len(exchange.response) if exchange.streamed else None,
                     "request": kept(exchange.request or {}, ("messages",)),
                     "response": response,
                     "messages": None if last or resends(final, sent) else sent})


def _body(exchange: vcr.Exchange) -> Any:
    return reassemble(exchange.response) \
        if exchange.streamed and isinstance(exchange.response, list) else exchange.response


def _produced(exchange: vcr.Exchange) -> list:
    """The message a call's response added to its conversation (none if unread)."""
    body = _body(exchange)
    choices = listed(body.get("choices")) if isinstance(body, dict) else []
    message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
    return [message] if isinstance(message, dict) else []


def _unread_before(group: list, bodies: list, source: str, run_id: str) -> None:
    """Warn of each earlier call of a conversation whose response could not be read (its turn
    is known only as the next request re-sent it)."""
    for i, (exchange, body) in enumerate(zip(group[:-1], bodies)):
        why = unread(exchange, body)
        if why is not None:
            warn(source, f"the response to call {i + 1} of {len(group)} ({exchange.uri}) could "
                 f"not be read: {why}; its turn is as the next request re-sent it", run_id)


def _from_conversation(group: list[vcr.Exchange], options: Options, source: str) -> dict:
    bodies = [_body(e) for e in group]
    last, response = group[-1], bodies[-1]
    if not _is_response(response if isinstance(response, dict) else None):
        raise refuse(source, f"the response to {last.uri} is not a Chat Completions response "
                     "(`choices[].message` must be a chat message)")
    answer = response if isinstance(response, dict) else None
    messages, parts = _answered(last.request or {"messages": []}, answer)
    answer = answer or {}
    first = bodies[0] if isinstance(bodies[0], dict) else {}
    run_id = derived_run_id(NAME, answer.get("id"),
                            content=[e.request for e in group] + [response])
    meta = _compact({**kept(parts["metadata"], ("request", "response")),
                     "calls": [_call_meta(e, b, i == len(group) - 1, messages)
                               for i, (e, b) in enumerate(zip(group, bodies))]})
    outcome = parts["outcome"]
    _unread_before(group, bodies, source, run_id)
    why = unread(last, response)
    if why is not None:  # said in the outcome, never an answer that looks empty
        outcome = {**(outcome or {}), "response_unread": why}
        warn(source, f"the final response ({last.uri}) could not be read: {why}; the run "
             "ends at its last request", run_id)
    run = _run(run_id, messages, started_at=_iso(first.get("created")),
               outcome=outcome, metadata=meta)
    return finish_run(run, options, last.request, answer, {"headers": last.headers},
                      source=source)


def convert_exchanges(exchanges: list[vcr.Exchange], options: Options,
                      source: str) -> list[dict]:
    """The runs of a cassette's Chat Completions calls: one per conversation (its last
    request's messages and that call's response). Calls to other APIs are left to their
    formats."""
    chat = [e for e in exchanges if detect_exchange(e)]
    if not chat:
        raise refuse(source, "no Chat Completions call in the cassette: expected a request "
                     "with `messages` to .../chat/completions")
    groups = conversations([e for e in chat if e.request is not None],
                           lambda e: e.request["messages"], _produced)
    groups += [[e] for e in chat if e.request is None]  # responses recorded alone
    return [_from_conversation(g, options, source if len(groups) == 1 else
                               f"{source} conversation {i + 1}")
            for i, g in enumerate(groups)]
