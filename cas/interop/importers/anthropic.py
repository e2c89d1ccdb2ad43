"""The anthropic importer: Anthropic Messages API requests and responses (docs/importers.md)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from cas.errors import InvalidArgument
from cas.format import encoding
from cas.interop.importers import vcr
from cas.interop.importers.common import (CallJoiner, Options, conversations, derived_run_id,
                                          each_document, finish_run, listed, refuse, same_turn,
                                          tool_arguments, unread, warn)
from cas.interop.importers.vcr import Exchange

NAME = "anthropic"

# The API accepts only these two roles in `messages` (the system prompt is top-level) and no
# other member in a message: a message with anything else was not sent to this API.
_ROLES = ("user", "assistant")
# Content part types of the OpenAI APIs: a document holding one is theirs, not ours.
_FOREIGN_BLOCKS = {"image_url", "input_audio", "refusal", "input_text", "output_text",
                   "input_image", "input_file", "file", "function_call", "function_call_output",
                   "reasoning"}
_SHAPE = ("expected an Anthropic Messages document: a request body {\"messages\": [{\"role\": "
          "\"user\"|\"assistant\", \"content\": ...}], \"system\"?, \"tools\"?}, a response "
          "{\"type\": \"message\", \"role\": \"assistant\", \"content\": [...], \"stop_reason\"}, "
          "an exchange {\"request\", \"response\"} or a list of them, or a messages array")


# -- detection ---------------------------------------------------------------------------------
def detect(value: Any) -> bool:
    """Does one parsed JSON value look like Messages documents (or an array of them)?"""
    if _exchanges_of(value) is not None:
        return True
    return isinstance(value, list) and bool(value) and \
        all(_exchanges_of(v) is not None for v in value)


def detect_exchange(exchange: Exchange) -> bool:
    """Is one recorded HTTP exchange a call to the Messages API (or Bedrock carrying one)? A
    recorded response alone (no request: an `.sse` or `.chunks.txt` fixture) is one when it
    is a Messages stream or response."""
    if exchange.request is None and not exchange.uri:
        return _is_stream(exchange.response) or _is_response(exchange.response)
    return _endpoint(exchange.uri, exchange.request) and _is_request(exchange.request)


def _endpoint(uri: str, request: Any) -> bool:
    path = unquote(urlsplit(uri).path)
    if path.rstrip("/").endswith("/v1/messages"):  # not .../messages/count_tokens or batches
        return True
    parts = path.strip("/").split("/")
    # Bedrock InvokeModel: /model/{model id}/invoke; the body is a Messages request when the
    # model is Anthropic's (its id names it, or the body carries `anthropic_version`).
    if len(parts) == 3 and parts[0] == "model" and \
            parts[2] in ("invoke", "invoke-with-response-stream"):
        return "anthropic" in parts[1] or (isinstance(request, dict)
                                           and "anthropic_version" in request)
    return False


def _is_block(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("type"), str) and \
        block["type"] not in _FOREIGN_BLOCKS


def _is_message(message: Any) -> bool:
    if not isinstance(message, dict) or message.get("role") not in _ROLES or \
            "content" not in message or not set(message) <= {"role", "content"}:
        return False
    content = message["content"]
    return isinstance(content, str) or (isinstance(content, list) and all(map(_is_block,
                                                                            content)))


def _is_request(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    messages, system, tools = body.get("messages"), body.get("system"), body.get("tools")
    return isinstance(messages, list) and bool(messages) and all(map(_is_message, messages)) \
        and (system is None or isinstance(system, str)
             or (isinstance(system, list) and all(map(_is_block, system)))) \
        and (tools is None or (isinstance(tools, list) and
                               all(isinstance(t, dict) and "function" not in t for t in tools)))


def _is_response(body: Any) -> bool:
    return isinstance(body, dict) and body.get("type") == "message" and \
        body.get("role") == "assistant" and "stop_reason" in body and \
        isinstance(body.get("content"), list) and all(map(_is_block, body["content"]))


def _is_error(body: Any) -> bool:
    return isinstance(body, dict) and body.get("type") == "error" and \
        isinstance(body.get("error"), dict)


def _is_stream(body: Any) -> bool:
    # server-sent event payloads: a message_start, or an error before the message started
    return isinstance(body, list) and any(isinstance(e, dict) and e.get("type") in
                                          ("message_start", "error") for e in body)


# -- documents ---------------------------------------------------------------------------------
def _exchanges_of(value: Any) -> list[Exchange] | None:
    """The recorded calls one document holds, or None when it is not a Messages document."""
    if isinstance(value, list):
        if value and all(map(_is_message, value)):
            return [Exchange("", {"messages": value}, None, None, False)]
        if value and all(isinstance(x, dict) and ("request" in x or "response" in x)
                         for x in value):
            found = [_exchange_of(x) for x in value]
            return found if all(x is not None for x in found) else None
        return None
    if not isinstance(value, dict):
        return None
    if "messages" in value:
        return [Exchange("", value, None, None, False)] if _is_request(value) else None
    if _is_response(value):
        return [Exchange("", None, value, None, False)]
    if "request" in value or "response" in value:
        found = _exchange_of(value)
    elif "body" in value:  # an HTTP response recorded alone: {status, headers, body}
        found = _exchange_of({"response": value})
    else:
        return None
    return [found] if found is not None else None


def _exchange_of(item: dict) -> Exchange | None:
    """One recorded call: `{request, response}`, each an HTTP record (`{url, body}`,
    `{status_code | status, body}`) or the body itself."""
    request, response = item.get("request"), item.get("response")
    uri, status, body = "", None, None
    if isinstance(request, dict):
        uri = str(request.get("url") or request.get("uri") or "")
        request = vcr.parse_body(request["body"]) if "body" in request else request
        if not _is_request(request):
            return None
    elif request is not None:
        return None
    if isinstance(response, dict):
        status = response.get("status_code", response.get("status"))
        if isinstance(status, dict):  # vcr's {code, message}
            status = status.get("code")
        body = vcr.parse_body(response["body"]) if "body" in response else response
    elif response is not None:
        return None
    readable = _is_response(body) or _is_stream(body) or _is_error(body)
    if (request is None and not readable) or (body is not None and not readable
                                               and not isinstance(body, str)):
        return None
    return Exchange(uri, request, body, status if isinstance(status, int) else None,
                    _is_stream(body))


def _groups(exchanges: list[Exchange]) -> list[list[Exchange]]:
    """Conversations: calls re-sending a growing history are one; a recorded response
    without its request is one of its own."""
    asked = [e for e in exchanges if e.request is not None]
    groups = conversations(asked, lambda e: e.request.get("messages"), _produced) \
        if asked else []
    return groups + [[e] for e in exchanges if e.request is None]


def _produced(exchange: Exchange) -> list:
    message = _answer(exchange)[0]
    return [{"role": "assistant", "content": message.get("content")}] if message else []


# -- responses ---------------------------------------------------------------------------------
def _answer(exchange: Exchange) -> tuple[dict | None, dict | None]:
    """The response message of one call, and its API error (HTTP 4xx/5xx or an `error`)."""
    body = exchange.response
    message, error = None, None
    if _is_stream(body):
        message, error = _reassemble(body)
    elif _is_response(body):
        message = body
    elif _is_error(body):
        error = body
    failed = exchange.status is not None and exchange.status >= 400
    if error is None and not failed:
        return message, None
    out: dict[str, Any] = {} if exchange.status is None else {"status": exchange.status}
    if error is not None:
        out.update((k, v) for k, v in error.items() if k != "type")
    else:
        out["body"] = body  # a failure whose body is not the API's error object: kept
    return message, out


def _reassemble(events: list) -> tuple[dict | None, dict | None]:
    """A streamed response as the message it spells: its blocks from content_block_start,
    the deltas and content_block_stop, its stop reason and usage from message_delta. What
    else an event carries (Bedrock's `amazon-bedrock-invocationMetrics` on message_stop) and
    events of a type not read here are kept on the message (`stream_events`)."""
    message, blocks, partial, error, other = None, {}, {}, None, []
    for event in events:
        if not isinstance(event, dict):
            continue
        kind, index = event.get("type"), event.get("index")
        index = index if isinstance(index, (int, str)) else None
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = dict(event["message"])
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[index] = dict(event["content_block"])
        elif kind == "content_block_delta" and index in blocks:
            _apply_delta(blocks[index], partial, index, event)
        elif kind == "content_block_stop":
            _close(blocks, partial, index)
        elif kind == "message_delta" and message is not None:
            if isinstance(event.get("delta"), dict):
                message.update(event["delta"])
            if isinstance(event.get("usage"), dict):
                before = message.get("usage")
                message["usage"] = {**(before if isinstance(before, dict) else {}),
                                    **event["usage"]}
        elif kind == "error":
            error = event
        elif kind == "message_stop" and set(event) <= {"type"} or kind == "ping":
            pass  # carries nothing
        else:
            other.append(event)
    for index in list(partial):  # a stream cut off before its content_block_stop
        _close(blocks, partial, index)
    if message is not None and other:
        message["stream_events"] = other
    if message is not None:
        order = sorted(blocks, key=lambda i: (0, i, "") if isinstance(i, int) else (1, 0, str(i)))
        message["content"] = [blocks[i] for i in order]
    return message, error


def _apply_delta(block: dict, partial: dict, index: Any, event: dict) -> None:
    delta = event.get("delta") if isinstance(event.get("delta"), dict) else {}
    kind = delta.get("type")
    if kind == "text_delta":
        block["text"] = str(block.get("text") or "") + str(delta.get("text", ""))
    elif kind == "input_json_delta":
        partial[index] = partial.get(index, "") + str(delta.get("partial_json", ""))
    elif kind == "thinking_delta":
        block["thinking"] = str(block.get("thinking") or "") + str(delta.get("thinking", ""))
    elif kind == "signature_delta":
        block["signature"] = delta.get("signature")
    elif kind == "citations_delta":
        block["citations"] = [*(listed(block.get("citations"))), delta.get("citation")]
    else:  # a delta this importer does not know: kept on its block, not dropped
        block.setdefault("unread_deltas", []).append(delta)


def _close(blocks: dict, partial: dict, index: Any) -> None:
    text = partial.pop(index, None)
    if index in blocks and text is not None and text.strip():
        try:  # the native reader's depth limit: never the recursive stdlib reader
            blocks[index]["input"] = encoding.parse_json(text)
        except InvalidArgument:
            blocks[index]["input"] = text  # kept verbatim; tool_arguments flags it


# -- runs --------------------------------------------------------------------------------------
def convert(values: list[Any], options: Options, source: str) -> list[dict]:
    """The runs of a file's parsed JSON values: one per conversation."""
    documents = each_document(values, lambda v: _exchanges_of(v) is not None)
    runs = []
    for i, document in enumerate(documents):
        where = source if len(documents) == 1 else f"{source} document {i + 1}"
        exchanges = _exchanges_of(document)
        if exchanges is None:
            raise refuse(where, _why_not(document))
        runs.extend(_run(group, options, where) for group in _groups(exchanges))
    return runs


def convert_exchanges(exchanges: list[Exchange], options: Options, source: str) -> list[dict]:
    """The runs of a cassette's calls to the Messages API: one per conversation."""
    ours = []
    for i, exchange in enumerate(exchanges):
        if detect_exchange(exchange):
            ours.append(exchange)
        elif _endpoint(exchange.uri, exchange.request):
            raise refuse(source, f"interactions[{i}] calls {exchange.uri} but its request body "
                         "is not a Messages request (" + _why_not(exchange.request) + ")")
    if not ours:
        raise refuse(source, "no recorded call to the Anthropic Messages API (POST "
                     ".../v1/messages, or Bedrock .../model/MODEL/invoke with an Anthropic "
                     "body) in the cassette")
    return [_run(group, options, source) for group in _groups(ours)]


def _run(group: list[Exchange], options: Options, source: str) -> dict:
    answers = [_answer(e) for e in group]
    turns = _transcript(group, answers)
    requests = [e.request for e in group if isinstance(e.request, dict)]
    system = next((r["system"] for r in requests if r.get("system") not in (None, "", [])),
                  None)
    tools = next((r["tools"] for r in requests if r.get("tools")), None)
    steps, joiner = [], CallJoiner()
    if system is not None:
        steps.extend(_steps_of({"role": "system", "content": system}, joiner))
    for message in turns:
        steps.extend(_steps_of(message, joiner))
    last_message, last_error = answers[-1]
    why = unread(group[-1], group[-1].response) if last_message is None and \
        last_error is None else None
    users = [m for m in turns if m["role"] == "user"]
    assistants = [m for m in turns if m["role"] == "assistant"]
    run = {"run_id": _run_id(group, last_message, last_error),
           "input": _text(users[0]) if users else None,
           "output": _text(assistants[-1]) if assistants else None,
           "steps": steps, "outcome": {"response_unread": why} if why is not None
           else _outcome(last_message, last_error),
           "metadata": _metadata(group, answers, system, tools)}
    if why is not None:  # said in the outcome and a warning, never an empty answer
        warn(source, f"the final response ({group[-1].uri}) could not be read: {why}; the run "
             "ends at its last request", run["run_id"])
    for i, (exchange, (message, error)) in enumerate(zip(group[:-1], answers)):
        earlier = unread(exchange, exchange.response) if message is None and error is None \
            else None
        if earlier is not None:
            warn(source, f"the response to call {i + 1} of {len(group)} ({exchange.uri}) could "
                 f"not be read: {earlier}; its turn is as the next request re-sent it",
                 run["run_id"])
    where = [*reversed(requests), *(m for m, _ in answers if m is not None),
             *({"headers": e.headers} for e in reversed(group))]
    return finish_run(run, options, *where, source=source)


def _run_id(group: list[Exchange], message: dict | None, error: dict | None) -> str:
    # The API's own id of the last call names the conversation (a re-import gives the same
    # id); a failed call has no message id, but its error names the request (`req_...`).
    named = (message or {}).get("id") or (error or {}).get("request_id")
    if isinstance(named, str) and named:
        return derived_run_id(NAME, named)
    return derived_run_id(NAME, content=[[e.uri, e.request, e.response, e.status]
                                         for e in group])


def _outcome(message: dict | None, error: dict | None) -> dict | None:
    if error is not None:
        return error
    if message is None:
        return None  # a request recorded without its response: nothing is known
    out = {"stop_reason": message.get("stop_reason")}
    for key in ("stop_sequence", "stop_details"):
        if message.get(key) is not None:
            out[key] = message[key]
    return out


def _transcript(group: list[Exchange], answers: list) -> list[dict]:
    """Every message of a conversation once: each call's new messages, then its response.
    A call that drops an earlier response (context compaction) keeps that response."""
    turns: list[dict] = []
    expected: list[dict] = []
    for exchange, (message, _) in zip(group, answers):
        sent = exchange.request.get("messages") if isinstance(exchange.request, dict) else []
        same = 0
        while same < min(len(sent), len(expected)) and \
                _same(sent[same], expected[same]):
            same += 1
        turns.extend(sent[same:])
        expected = list(sent)
        if message is not None:
            reply = {"role": "assistant", "content": message.get("content")}
            turns.append(reply)
            expected.append(reply)
    return turns


def _same(sent: dict, recorded: dict) -> bool:
    # A client re-sends a response's blocks with fields added or dropped (`citations: null`,
    # `caller`), a text block dropped, or a tool_use's input re-serialised: the same turn when
    # its identity (role, tool_use ids, else its text: common.same_turn) is.
    return same_turn(sent, recorded)


# -- steps -------------------------------------------------------------------------------------
def _steps_of(message: dict, joiner: CallJoiner) -> list[dict]:
    """A message's steps: the message (its text, and the blocks that are not text), then a
    tool_call step per tool_use block; tool_result blocks join the calls they answer."""
    role, content = message["role"], message.get("content")
    if not isinstance(content, list):
        return [{"type": "message", "role": role, "content": content}]
    texts, kept, calls = [], [], []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if _is_call(block):
            calls.append(joiner.call(block.get("id"), _call_step(block)))
        elif isinstance(kind, str) and kind.endswith("tool_result") and _join(joiner, block):
            continue
        elif kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
            if any(v is not None for k, v in block.items() if k not in ("type", "text")):
                kept.append(block)  # citations, cache_control: kept with the block
        else:
            kept.append(block)  # images, documents, thinking, orphan replies ...
    if role == "user" and content and not texts and not kept:
        return calls  # only replies, each now in the tool_call step it answers
    step = {"type": "message", "role": role, "content": "".join(texts) if texts else None}
    if kept:
        step["blocks"] = kept
    return [step, *calls]


def _is_call(block: Any) -> bool:
    # tool_use, server_tool_use (web search, code execution), mcp_tool_use
    return isinstance(block, dict) and str(block.get("type", "")).endswith("tool_use") and \
        isinstance(block.get("name"), str) and bool(block["name"])


def _call_step(block: dict) -> dict:
    step = {"type": "tool_call", "tool_name": block["name"]}
    if block.get("id") is not None:
        step["call_id"] = block["id"]
    if "input" in block:  # absent: no arguments recorded
        raw = block["input"]
        if isinstance(raw, dict):
            step["arguments"] = raw
        elif raw is None:  # tool_arguments reads None as absent; here it was recorded
            step.update(arguments_raw=None, arguments_error="null, not a JSON object")
        else:
            step.update(tool_arguments(raw))
    other = {k: v for k, v in block.items() if k not in ("id", "name", "input")}
    if other != {"type": "tool_use"}:
        step["block"] = other  # server_tool_use, caller, server_name ...
    return step


def _join(joiner: CallJoiner, block: dict) -> bool:
    """Put a reply on the call it answers; False for an orphan (kept in its message)."""
    call = joiner.reply(block.get("tool_use_id"))
    if call is None:
        return False
    content = block.get("content")
    # is_error marks a failed client tool; a server tool reports failure as a content block
    # of type `*_error` (web_search_tool_result_error ...).
    failed = block.get("is_error") is True or (
        isinstance(content, dict) and str(content.get("type", "")).endswith("_error"))
    call["error" if failed else "result"] = content
    other = {k: v for k, v in block.items() if k not in ("tool_use_id", "content", "is_error")}
    if other != {"type": "tool_result"}:
        call["reply"] = other  # withheld with tool_results (cas/format/projection.py)
    return True


def _text(message: dict) -> str | None:
    content = message.get("content")
    if isinstance(content, str):
        return content
    texts = [b["text"] for b in content or () if isinstance(b, dict) and b.get("type") == "text"
             and isinstance(b.get("text"), str)]
    return "".join(texts) if texts else None


# -- metadata ----------------------------------------------------------------------------------
def _metadata(group: list[Exchange], answers: list, system: Any, tools: Any) -> dict:
    meta: dict[str, Any] = {}
    messages = [m for m, _ in answers if m is not None]
    requests = [e.request for e in group if isinstance(e.request, dict)]
    model = next((m.get("model") for m in reversed(messages) if m.get("model")), None) or \
        next((r.get("model") for r in reversed(requests) if r.get("model")), None) or \
        next((_bedrock_model(e.uri) for e in group if _bedrock_model(e.uri)), None)
    if model is not None:
        meta["model"] = model
    if tools is not None:
        meta["tools"] = tools
    usage: dict[str, int] = {}
    for message in messages:
        counts = message.get("usage")
        for key, value in (counts.items() if isinstance(counts, dict) else ()):
            if isinstance(value, int) and not isinstance(value, bool):
                usage[key] = usage.get(key, 0) + value
    if usage:
        meta["usage"] = usage
    meta["exchanges"] = [_exchange_meta(e, answer, system, tools)
                         for e, answer in zip(group, answers)]
    return meta


def _exchange_meta(exchange: Exchange, answer: tuple, system: Any, tools: Any) -> dict:
    """What one call recorded besides its messages: request parameters, response fields."""
    message, error = answer
    out: dict[str, Any] = {}
    if exchange.uri:
        out["uri"] = exchange.uri
    if exchange.status is not None:
        out["status"] = exchange.status
    if exchange.streamed:
        out["streamed"] = True
    if isinstance(exchange.request, dict):
        params = {k: v for k, v in exchange.request.items() if k != "messages" and
                  not (k == "system" and v == system) and not (k == "tools" and v == tools)}
        if params:
            out["request"] = params
    if message is not None:
        out["response"] = {k: v for k, v in message.items() if k != "content"}
    if error is not None:
        out["error"] = {k: v for k, v in error.items() if k != "status"}  # status is above
    if message is None and error is None and exchange.response is not None:
        out["response_body"] = exchange.response  # a body this importer cannot read: kept
    return out


def _bedrock_model(uri: str) -> str | None:
    parts = unquote(urlsplit(uri).path).strip("/").split("/")
    return parts[1] if len(parts) == 3 and parts[0] == "model" else None


def _why_not(document: Any) -> str:
    """Why a document is not one this importer reads, naming the first field that is not."""
    if isinstance(document, dict) and isinstance(document.get("messages"), list):
        for i, message in enumerate(document["messages"]):
            if not _is_message(message):
                role = message.get("role") if isinstance(message, dict) else None
                hint = " (OpenAI Chat? use --format openai-chat)" if role in (
                    "system", "tool") or (isinstance(message, dict) and
                                          "tool_calls" in message) else ""
                return (f"messages[{i}] is not an Anthropic message: expected {{role: "
                        f"user|assistant, content: a string or content blocks}} and no other "
                        f"member{hint}")
        if not document["messages"]:
            return "its `messages` is empty"
    return _SHAPE
