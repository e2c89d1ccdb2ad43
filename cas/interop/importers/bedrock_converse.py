"""The bedrock-converse importer: Amazon Bedrock Converse API calls (`Converse` and
`ConverseStream`, any model) as runs (docs/importers.md).

A request is `{messages: [{role, content: [blocks]}], system?, toolConfig?, inferenceConfig?}`
(the model is in the URI, `/model/MODEL/converse`), each block an object with one member
(`text`, `toolUse`, `toolResult`, `image`, `reasoningContent` ...); a response is `{output:
{message}, stopReason, usage, metrics}`; a stream is the AWS event stream of `messageStart`,
`contentBlockStart`/`Delta`/`Stop`, `messageStop` and `metadata` events (`vcr` splits it).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from cas.errors import InvalidArgument
from cas.format import encoding
from cas.interop.importers import vcr
from cas.interop.importers.common import (CallJoiner, Options, derived_run_id, each_document,
                                          finish_run, kept, listed, refuse, tool_arguments)
from cas.interop.importers.vcr import Exchange

NAME = "bedrock-converse"

_ROLES = ("user", "assistant")
# The content block members of the Converse API: a block is an object with one of them.
_BLOCKS = frozenset({"text", "image", "document", "video", "audio", "toolUse", "toolResult",
                     "guardrailContent", "reasoningContent", "cachePoint", "citationsContent",
                     "searchResult"})
_SHAPE = ("expected a Bedrock Converse document: a request {\"messages\": [{\"role\": "
          "\"user\"|\"assistant\", \"content\": [{\"text\": ...} | {\"toolUse\": ...} | "
          "{\"toolResult\": ...}]}]}, a response {\"output\": {\"message\"}, \"stopReason\"}, "
          "or an exchange {\"request\", \"response\"} or a list of them")


# -- detection ---------------------------------------------------------------------------------
def _is_block(block: Any) -> bool:
    return isinstance(block, dict) and bool(block) and set(block) <= _BLOCKS


def _is_message(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") in _ROLES and \
        set(message) <= {"role", "content"} and isinstance(message.get("content"), list) and \
        all(map(_is_block, message["content"]))


def _is_request(body: Any) -> bool:
    return isinstance(body, dict) and isinstance(body.get("messages"), list) and \
        bool(body["messages"]) and all(map(_is_message, body["messages"])) and \
        "model" not in body and "max_tokens" not in body  # (those are Messages requests)


def _is_response(body: Any) -> bool:
    return isinstance(body, dict) and "stopReason" in body and \
        isinstance(body.get("output"), dict) and _is_message(body["output"].get("message"))


def _is_stream(body: Any) -> bool:
    return isinstance(body, list) and any(isinstance(e, dict) and "messageStart" in e
                                          for e in body)


def _endpoint(uri: str) -> bool:
    parts = unquote(urlsplit(uri).path).strip("/").split("/")
    return len(parts) == 3 and parts[0] == "model" and parts[2] in ("converse",
                                                                     "converse-stream")


def detect_exchange(exchange: Exchange) -> bool:
    """Is one recorded HTTP exchange a Converse call?"""
    return _endpoint(exchange.uri) and _is_request(exchange.request)


def _document(value: Any) -> list[Exchange] | None:
    """The calls one JSON document holds, or None when it is not a Converse document."""
    if _is_request(value):
        return [Exchange("", value, None, None, False)]
    if _is_response(value):
        return [Exchange("", None, value, None, False)]
    if isinstance(value, dict) and ("request" in value or "response" in value) and \
            set(value) <= {"request", "response"}:
        request, response = value.get("request"), value.get("response")
        if (request is None or _is_request(request)) and \
                (response is None or _is_response(response) or _is_stream(response)):
            return [Exchange("", request, response, None, _is_stream(response))]
    return None


def detect(value: Any) -> bool:
    """Does one parsed JSON value look like Converse documents (or an array of them)?"""
    return _document(value) is not None or (
        isinstance(value, list) and bool(value) and all(_document(v) is not None for v in value))


# -- streams -----------------------------------------------------------------------------------
def reassemble(events: list) -> tuple[dict | None, dict | None]:
    """A ConverseStream's events as the response they add up to (`output.message`,
    `stopReason`, and the `metadata` event's usage and metrics), and its error (an exception
    event). Each event's `p` padding carries nothing; events not read here are kept
    (`stream_events`)."""
    message: dict | None = None
    blocks: dict = {}
    partial: dict = {}
    response: dict = {}
    other: list = []
    error = None
    for event in events:
        if isinstance(event, dict) and event.get("type") == "error":
            error = event.get("error")
            continue
        if not isinstance(event, dict) or len(event) != 1:
            other.append(event)
            continue
        (name, body), = event.items()
        body = {k: v for k, v in body.items() if k != "p"} if isinstance(body, dict) else body
        index = body.get("contentBlockIndex") if isinstance(body, dict) else None
        if name == "messageStart" and isinstance(body, dict):
            message = {"role": body.get("role", "assistant"), "content": []}
        elif name == "contentBlockStart" and isinstance(body, dict):
            blocks[index] = dict(body.get("start") or {})
        elif name == "contentBlockDelta" and isinstance(body, dict) and \
                isinstance(body.get("delta"), dict):
            _delta(blocks.setdefault(index, {}), partial, index, body["delta"])
        elif name == "contentBlockStop":
            _close(blocks, partial, index)
        elif name == "messageStop" and isinstance(body, dict):
            response["stopReason"] = body.get("stopReason")
            response.update(kept(body, ("stopReason",)))
        elif name == "metadata" and isinstance(body, dict):
            response.update(body)
        else:
            other.append(event)
    for index in list(partial):
        _close(blocks, partial, index)
    if message is None:
        return None, error
    order = sorted(blocks, key=lambda i: (0, i) if isinstance(i, int) else (1, 0))
    message["content"] = [blocks[i] for i in order]
    out = {"output": {"message": message}, **response}
    out.setdefault("stopReason", None)
    if other:
        out["stream_events"] = other
    return out, error


def _delta(block: dict, partial: dict, index: Any, delta: dict) -> None:
    for key, value in delta.items():
        if key == "text" and isinstance(value, str):
            block["text"] = block.get("text", "") + value
        elif key == "toolUse" and isinstance(value, dict) and isinstance(value.get("input"), str):
            partial[index] = partial.get(index, "") + value["input"]
        elif key == "reasoningContent" and isinstance(value, dict):
            into = block.setdefault("reasoningContent", {})
            text = into.setdefault("reasoningText", {})
            for k, v in value.items():
                if k == "text" and isinstance(v, str):
                    text["text"] = text.get("text", "") + v
                elif k == "signature":
                    text["signature"] = v
                else:
                    into[k] = v
        else:  # a delta this importer does not know: kept on its block, not dropped
            block.setdefault("unread_deltas", []).append({key: value})


def _close(blocks: dict, partial: dict, index: Any) -> None:
    text = partial.pop(index, None)
    if text is None:
        return
    use = blocks.setdefault(index, {}).setdefault("toolUse", {})
    try:  # the native reader's depth limit: never the recursive stdlib reader
        use["input"] = encoding.parse_json(text) if text.strip() else {}
    except InvalidArgument:
        use["input"] = text  # kept verbatim; tool_arguments flags it


# -- runs --------------------------------------------------------------------------------------
def _answer(exchange: Exchange) -> tuple[dict | None, dict | None]:
    body = exchange.response
    response, error = None, None
    if _is_stream(body):
        response, error = reassemble(body)
    elif _is_response(body):
        response = body
    failed = exchange.status is not None and exchange.status >= 400
    if error is None and not failed:
        return response, None
    out: dict[str, Any] = {} if exchange.status is None else {"status": exchange.status}
    if error is not None:
        out.update(error)
    elif isinstance(body, dict):
        out.update(body)  # Bedrock's error body: {"message": ...}
    elif body is not None:
        out["body"] = body
    return response, out


def _steps(message: dict, joiner: CallJoiner) -> list[dict]:
    """A message's steps: the message (its text, and the blocks that are not text), then a
    tool_call step per toolUse block; toolResult blocks join the calls they answer."""
    texts, other, calls = [], [], []
    for block in message["content"]:
        if isinstance(block.get("toolUse"), dict) and isinstance(block["toolUse"].get("name"),
                                                                 str):
            use = block["toolUse"]
            step = {"type": "tool_call", "tool_name": use["name"]}
            if use.get("toolUseId") is not None:
                step["call_id"] = use["toolUseId"]
            raw = use.get("input")
            step.update({"arguments": raw} if isinstance(raw, dict) else tool_arguments(raw))
            rest = kept(use, ("toolUseId", "name", "input"))
            if rest:
                step["call"] = rest
            calls.append(joiner.call(use.get("toolUseId"), step))
        elif isinstance(block.get("toolResult"), dict) and _join(joiner, block["toolResult"]):
            continue
        elif set(block) == {"text"} and isinstance(block["text"], str):
            texts.append(block["text"])
        else:
            other.append(block)
    if message["role"] == "user" and not texts and not other:
        return calls
    step = {"type": "message", "role": message["role"],
            "content": "".join(texts) if texts else None}
    if other:
        step["blocks"] = other  # images, documents, reasoning, orphan results ...
    return [step, *calls]


def _join(joiner: CallJoiner, result: dict) -> bool:
    call = joiner.reply(result.get("toolUseId"))
    if call is None:
        return False
    call["error" if result.get("status") == "error" else "result"] = result.get("content")
    rest = kept(result, ("toolUseId", "content", "status"))
    if result.get("status") not in (None, "success", "error"):
        rest["status"] = result["status"]
    if rest:
        call["reply"] = rest
    return True


def _text(message: dict) -> str | None:
    texts = [b["text"] for b in message["content"] if set(b) == {"text"}
             and isinstance(b["text"], str)]
    return "".join(texts) if texts else None


def _model(uri: str) -> str | None:
    parts = unquote(urlsplit(uri).path).strip("/").split("/")
    return parts[1] if len(parts) == 3 and parts[0] == "model" else None


def _run(group: list[Exchange], options: Options, source: str) -> dict:
    answers = [_answer(e) for e in group]
    last = group[-1]
    request = last.request if isinstance(last.request, dict) else {"messages": []}
    turns = list(request["messages"])
    response, error = answers[-1]
    if response is not None:
        turns.append(response["output"]["message"])
    joiner = CallJoiner()
    steps: list[dict] = []
    system = request.get("system")
    texts = [b.get("text") for b in listed(system) if isinstance(b, dict)]
    if texts and all(isinstance(t, str) for t in texts):
        steps.append({"type": "message", "role": "system", "content": "".join(texts)})
    elif system:
        steps.append({"type": "message", "role": "system", "content": None, "blocks": system})
    for message in turns:
        steps.extend(_steps(message, joiner))
    users = [m for m in turns if m["role"] == "user"]
    assistants = [m for m in turns if m["role"] == "assistant"]
    usage: dict[str, int] = {}
    for answer, _ in answers:
        for key, value in (answer or {}).get("usage", {}).items():
            if isinstance(value, int) and not isinstance(value, bool):
                usage[key] = usage.get(key, 0) + value
    calls = []
    for exchange, (answer, failure) in zip(group, answers):
        call = {"uri": exchange.uri or None, "status": exchange.status,
                "streamed": exchange.streamed or None,
                "request": kept(exchange.request, ("messages", "system", "toolConfig"))
                if isinstance(exchange.request, dict) else None,
                "response": kept(answer, ("output",)) if answer is not None else None,
                "error": failure,
                "response_body": exchange.response if answer is None and failure is None
                else None}
        calls.append({k: v for k, v in call.items() if v not in (None, {})})
    meta = {"model": next((_model(e.uri) for e in group if _model(e.uri)), None),
            "tools": (request.get("toolConfig") or {}).get("tools"),
            "usage": usage or None, "calls": calls}
    run = {"run_id": derived_run_id(NAME, content=[[e.uri, e.request, e.response, e.status]
                                                   for e in group]),
           "input": _text(users[0]) if users else None,
           "output": _text(assistants[-1]) if assistants else None,
           "steps": steps,
           "outcome": error if error is not None else
           ({"stop_reason": response["stopReason"]} if response is not None else None),
           "metadata": {k: v for k, v in meta.items() if v is not None}}
    return finish_run(run, options, request, *(e.request for e in group),
                      *({"headers": e.headers} for e in reversed(group)), source=source)


def _groups(exchanges: list[Exchange]) -> list[list[Exchange]]:
    asked = [e for e in exchanges if e.request is not None]
    groups = vcr.conversations(asked, lambda r: r.get("messages")) if asked else []
    return groups + [[e] for e in exchanges if e.request is None]


def convert_exchanges(exchanges: list[Exchange], options: Options, source: str) -> list[dict]:
    """The runs of a cassette's Converse calls: one per conversation."""
    ours = [e for e in exchanges if detect_exchange(e)]
    if not ours:
        raise refuse(source, "no recorded Bedrock Converse call (POST .../model/MODEL/converse "
                     "or converse-stream with a Converse request body) in the cassette")
    return [_run(g, options, source) for g in _groups(ours)]


def convert(values: list[Any], options: Options, source: str) -> list[dict]:
    """The runs of a file's parsed JSON values: one per conversation."""
    documents = each_document(values, lambda v: _document(v) is not None)
    runs = []
    for i, document in enumerate(documents):
        where = source if len(documents) == 1 else f"{source} document {i + 1}"
        exchanges = _document(document)
        if exchanges is None:
            raise refuse(where, f"not a bedrock-converse document: {_SHAPE}")
        runs.extend(_run(g, options, where) for g in _groups(exchanges))
    return runs
