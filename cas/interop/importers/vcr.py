"""The vcr container: recorded API traffic (vcrpy cassettes and the other recorders' files),
read as the exchanges (request body, response body) a format's importer converts
(docs/importers.md).

A vcrpy cassette holds `interactions[i].request.{method, uri, headers, body}` and
`interactions[i].response.{status.code, headers, body.string}`. Also read: Betamax's
`http_interactions`, LangChain's parallel `requests`/`responses` lists (the whole file may be
gzip), dd-apm-test-agent's one exchange per file (`request.url`), nock's list of
`{scope, path, body, status, response, rawHeaders}`, and a recorded response alone (server-sent
events, or JSON Lines of stream chunks). Bodies are decoded by their Content-Encoding
(`bodies`), then read as JSON, server-sent events (the list of their JSON payloads), an AWS
event stream (the list of its JSON events) or text. YAML needs PyYAML: the `vcr` extra.

A cassette is a file someone else sent: YAML aliases may not expand it past a few times its
size, and nothing in it may nest deeper than the native reader accepts (MAX_DEPTH).
"""

from __future__ import annotations

import base64
from typing import Any, NamedTuple

from cas.errors import FailedPrecondition, InvalidArgument
from cas.format import encoding
from cas.interop.importers import bodies
from cas.interop.importers.common import warn

# What a cassette's YAML aliases may expand it to: this many times its own size (plus a
# floor for tiny files). A writer re-uses an anchor for a repeated header list; an alias
# bomb (each level naming the one below ten times) multiplies it a billion times.
ALIAS_GROWTH = 4
ALIAS_FLOOR = 1 << 20


class Exchange(NamedTuple):
    """One recorded model call."""

    uri: str
    request: Any          # the parsed JSON body (a dict), its text if not JSON, or None
    response: Any         # the parsed JSON body, the list of stream events, its text, or None
    status: int | None
    streamed: bool        # the response was server-sent events or an event stream
    # The response's headers, names in lower case (their first value): where recordings keep
    # the organisation or project, for --tenant-from headers.openai-project.
    headers: dict = {}


class _Raw(NamedTuple):
    """One recorded exchange as a recorder stores it, before its bodies are read."""

    uri: str
    request_body: Any
    request_headers: Any
    status: Any
    response_body: Any
    response_headers: Any
    body_parsed: bool = False  # nock: a JSON response body is stored as the value itself
    # pydantic-ai and others: the JSON body stored parsed (`parsed_body`), beside or instead
    # of `body`; used when `body` is absent or empty
    request_parsed: Any = None
    response_parsed: Any = None


def read_cassette(data: bytes, source: str) -> list[Exchange]:
    """The exchanges of one cassette, in recorded order."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgument(f"{source}: a cassette is read from bytes, not "
                              f"{encoding.describe(data)}")
    data = bytes(data)
    if data[:2] == b"\x1f\x8b":  # a whole cassette gzip-compressed (LangChain's .yaml.gz)
        data = _gunzip(data, source)
    only = _response_only(data, source)
    if only is not None:
        return [only]
    raws = _interactions(load(data, source), source)
    return [_exchange(raw, source, i) for i, raw in enumerate(raws)]


def _gunzip(data: bytes, source: str) -> bytes:
    try:
        return bodies.decode(data, ["gzip"])
    except bodies.Undecodable as exc:
        raise InvalidArgument(f"{source}: not a vcr cassette: a gzip file, but {exc.reason}",
                              reason="NOT_THIS_FORMAT") from None
    except bodies.TooLarge:
        raise bodies.too_large(source, "the gzip-compressed cassette") from None


# -- loading -----------------------------------------------------------------------------------
def load(data: bytes, source: str) -> Any:
    """A cassette file's document: JSON, else YAML through the bounded safe loader (refused:
    deeper than MAX_DEPTH, or aliases past ALIAS_GROWTH times its size)."""
    try:
        return encoding.parse_json(data)
    except InvalidArgument as exc:
        if exc.reason == "JSON_TOO_DEEP":
            raise encoding.in_context(exc, source) from None
    try:
        import yaml
    except ImportError:
        raise FailedPrecondition("reading a YAML cassette needs PyYAML, from the `vcr` extra: "
                                 "pip install '.[vcr]' in the cas checkout",
                                 reason="EXTRA_REQUIRED",
                                 extra="vcr") from None
    loader = _loader_class(yaml)
    try:
        _bound_yaml(yaml, loader, data, source)
        return yaml.load(data, Loader=loader)  # noqa: S506 - a safe loader (below)
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"{source}: not a vcr cassette: {exc}".splitlines()[0],
                              reason="NOT_THIS_FORMAT") from None
    except RecursionError:  # (bounded above; a second guard costs nothing)
        raise encoding.in_context(encoding.too_deep("$"), source) from None


_LOADER = None


def _loader_class(yaml):
    """The safe loader (plain data only: vcrpy writes undecodable bodies as `!!binary`, read
    as bytes) that also reads the Python tags aiohttp recordings put on header names
    (`!!python/object/apply:multidict._multidict.istr [Accept]`) as the plain value they
    wrap. No Python object is ever built."""
    global _LOADER
    if _LOADER is None:
        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

        class Loader(base):  # type: ignore[valid-type, misc]
            pass

        def python_tag(loader, suffix, node):
            if isinstance(node, yaml.ScalarNode):
                return loader.construct_scalar(node)
            if isinstance(node, yaml.SequenceNode):
                args = loader.construct_sequence(node, deep=True)
                # apply:str-like(value): the value (istr, a str subclass, is a header name)
                return args[0] if len(args) == 1 and isinstance(args[0], str) else args
            return loader.construct_mapping(node, deep=True)

        Loader.add_multi_constructor("tag:yaml.org,2002:python/", python_tag)
        _LOADER = Loader
    return _LOADER


def _bound_yaml(yaml, loader, data: bytes, source: str) -> None:
    """Refuse, from the event stream alone (no value is built), a YAML document nested deeper
    than MAX_DEPTH or whose aliases would expand it past ALIAS_GROWTH times its size, and an
    alias to a node still open (a value that contains itself). Time and memory are linear in
    the file's size."""
    limit = max(ALIAS_GROWTH * len(data), ALIAS_FLOOR)
    sizes: dict[str, int] = {}
    stack: list[list] = []  # [anchor, expanded size so far] of each open collection
    expanded = 0
    for event in yaml.parse(data, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= encoding.MAX_DEPTH:
                raise encoding.in_context(encoding.too_deep("$"), source)
            stack.append([event.anchor, 1])
            expanded += 1
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, size = stack.pop()
            if anchor is not None:
                sizes[anchor] = size
        elif isinstance(event, yaml.ScalarEvent):
            size = 1 + len(event.value)
            expanded += size
            if event.anchor is not None:
                sizes[event.anchor] = size
        elif isinstance(event, yaml.AliasEvent):
            size = sizes.get(event.anchor)
            if size is None:
                raise InvalidArgument(f"{source}: not a vcr cassette: the alias *{event.anchor} "
                                      "names a node that contains it (or no node)",
                                      reason="YAML_ALIAS_REFUSED")
            expanded += size
        else:
            continue
        if stack:
            stack[-1][1] += size
        if expanded > limit:
            raise InvalidArgument(
                f"{source}: YAML aliases expand the cassette past {ALIAS_GROWTH} times its "
                f"size ({len(data)} bytes); an alias bomb is refused, not expanded",
                reason="YAML_ALIAS_REFUSED", limit=limit)


# -- recorders ---------------------------------------------------------------------------------
_SHAPES = ("expected a vcrpy cassette {interactions: [{request, response}]}, Betamax "
           "{http_interactions}, LangChain {requests, responses}, a dd-apm-test-agent exchange "
           "{request: {url}, response}, a nock recording [{scope, path, response}], or a "
           "recorded response alone (server-sent events or JSON Lines of stream chunks)")


def _interactions(document: Any, source: str) -> list[_Raw]:
    """The exchanges of a loaded cassette, whichever recorder wrote it."""
    if isinstance(document, dict):
        items = document.get("interactions", document.get("http_interactions"))
        if isinstance(items, list):
            return [_vcr_item(item, source, i) for i, item in enumerate(items)]
        requests, responses = document.get("requests"), document.get("responses")
        if isinstance(requests, list) and isinstance(responses, list):
            if len(requests) != len(responses):
                raise InvalidArgument(f"{source}: {len(requests)} requests but "
                                      f"{len(responses)} responses: a LangChain cassette "
                                      "pairs them by position", reason="NOT_THIS_FORMAT")
            return [_vcr_item({"request": q, "response": r}, source, i)
                    for i, (q, r) in enumerate(zip(requests, responses))]
        if isinstance(document.get("request"), dict) and "url" in document["request"]:
            return [_vcr_item(document, source, 0)]  # dd-apm-test-agent: one per file
    if isinstance(document, list) and document and all(
            isinstance(x, dict) and "scope" in x and "path" in x for x in document):
        return [_nock_item(x) for x in document]
    raise InvalidArgument(f"{source}: not a vcr cassette: {_SHAPES}", reason="NOT_THIS_FORMAT")


def _vcr_item(item: Any, source: str, i: int) -> _Raw:
    if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
        raise InvalidArgument(f"{source}: interactions[{i}] has no request",
                              reason="NOT_THIS_FORMAT")
    request = item["request"]
    response = item.get("response") if isinstance(item.get("response"), dict) else {}
    status = response.get("status")
    status = status.get("code") if isinstance(status, dict) else status
    return _Raw(str(request.get("uri", request.get("url", ""))), request.get("body"),
                request.get("headers"), status, response.get("body"), response.get("headers"),
                request_parsed=request.get("parsed_body"),
                response_parsed=response.get("parsed_body"))


def _nock_item(item: dict) -> _Raw:
    """nock: the request body and a JSON response are stored parsed; a binary or compressed
    response as a list of hex strings (or one)."""
    response = item.get("response")
    binary = item.get("responseIsBinary") is True
    if binary and isinstance(response, str):
        response = [response]
    parsed = not isinstance(response, (str, list)) or (
        isinstance(response, list) and not all(isinstance(p, str) for p in response))
    body = item.get("body")
    if isinstance(body, (dict, list)):
        body = encoding.encode(body).decode("utf-8")
    return _Raw(str(item.get("scope", "")) + str(item.get("path", "")), body, None,
                item.get("status"), response, item.get("rawHeaders"), parsed)


# -- bodies ------------------------------------------------------------------------------------
def _exchange(raw: _Raw, source: str, i: int) -> Exchange:
    where = f"interactions[{i}]"
    if raw.request_parsed is not None and _unread_body(raw.request_body):
        request = raw.request_parsed
    else:
        request = _read(raw.request_body, raw.request_headers, source, f"{where} request body")
    if raw.body_parsed:
        response, streamed = raw.response_body, False
    elif raw.response_parsed is not None and _unread_body(raw.response_body):
        response, streamed = raw.response_parsed, False
    else:
        response, streamed = _response(raw.response_body, raw.response_headers, source,
                                       f"{where} response body")
    status = raw.status
    if isinstance(status, str) and status.isdigit():
        status = int(status)
    return Exchange(uri=raw.uri, request=request, response=response,
                    status=status if isinstance(status, int) and
                    not isinstance(status, bool) else None,
                    streamed=streamed, headers=_headers(raw.response_headers))


def _unread_body(body: Any) -> bool:
    """Whether a recorder left `body` out (or empty): its `parsed_body` is then the body."""
    text = body.get("string") if isinstance(body, dict) else body
    return text is None or text in ("", b"")


def _read(body: Any, headers: Any, source: str, what: str) -> Any:
    """A request body: its JSON, its text, or (undecodable) its bytes kept and said."""
    read = bodies.read(body, headers, source, what)
    if read.kept is not None:
        return _undecoded(read.kept, source, what)
    if read.text is None:
        return None if read.data is None else _binary(read.data, source, what)
    return _json_or_text(read.text)


def _response(body: Any, headers: Any, source: str, what: str) -> tuple[Any, bool]:
    read = bodies.read(body, headers, source, what)
    if read.kept is not None:
        return _undecoded(read.kept, source, what), False
    if read.data is None:
        return None, False
    kind = (bodies.header(headers, "content-type") or "").lower()
    if kind.startswith(bodies.EVENT_STREAM) or read.text is None:
        frames = bodies.event_stream(read.data)
        if frames is not None:
            return _events(frames, source, what), True
    if read.text is None:
        return _binary(read.data, source, what), False
    return _response_body(read.text)


def _undecoded(kept: dict, source: str, what: str) -> dict:
    """A body that could not be decoded: kept raw (base64 of its stored bytes) with what it
    was and why, and said in a warning."""
    warn(source, f"{what}: kept undecoded under metadata ({kept['reason']})")
    return {"undecoded_body": kept}


def _binary(data: bytes, source: str, what: str) -> dict:
    """A body that is bytes, not text (and no event stream): kept as base64, and said."""
    warn(source, f"{what}: {len(data)} bytes that are not UTF-8 text: kept as base64 under "
         "metadata (binary_body)")
    return {"binary_body": base64.b64encode(data).decode("ascii")}


def _events(frames: list, source: str, what: str) -> list[Any]:
    """An AWS event stream's events: InvokeModelWithResponseStream's `chunk` events carry the
    model's own stream event as base64 in `bytes` (read as that event); other events (the
    Converse API's) are `{event type: payload}`, as the AWS SDKs give them; an exception is
    an error event."""
    out: list[Any] = []
    for frame in frames:
        payload = _json_or_text(frame.payload.decode("utf-8", "replace")) \
            if frame.payload else {}
        kind = frame.headers.get(":message-type")
        name = frame.headers.get(":event-type") or frame.headers.get(":exception-type") \
            or frame.headers.get(":error-code")
        if kind in ("exception", "error"):
            message = payload.get("message") if isinstance(payload, dict) else payload
            out.append({"type": "error", "error": {"type": name, "message": message}})
        elif name == "chunk" and isinstance(payload, dict) and isinstance(
                payload.get("bytes"), str):
            try:
                inner = base64.b64decode(payload["bytes"], validate=True)
            except ValueError:
                warn(source, f"{what}: an event-stream chunk whose bytes are not base64: kept")
                out.append(payload)
                continue
            out.append(_json_or_text(inner.decode("utf-8", "replace")))
        else:
            out.append({name: payload} if isinstance(name, str) else payload)
    return out


def _headers(headers: Any) -> dict[str, str]:
    out = {}
    pairs = zip(headers[0::2], headers[1::2]) if isinstance(headers, list) else \
        headers.items() if isinstance(headers, dict) else ()
    for name, value in pairs:
        value = (value[0] if value else None) if isinstance(value, list) else value
        if isinstance(name, str) and isinstance(value, str):
            out.setdefault(name.lower(), value)
    return out


def _body_text(body: Any) -> str | None:
    if isinstance(body, dict):
        body = body.get("string")
    if isinstance(body, bytes):
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            return None  # binary: not a body an importer can read as text
    return body if isinstance(body, str) else None


def _json_or_text(text: str | None) -> Any:
    if text is None or not text.strip():
        return None
    try:  # (a lone surrogate a YAML string may hold is not UTF-8: the text is kept)
        return encoding.parse_json(text.encode("utf-8", "surrogatepass"))
    except InvalidArgument:
        return text


def parse_body(body: Any) -> Any:
    """A recorded body (text, or vcrpy's `{"string": text}`) as its JSON, the list of its
    server-sent events' payloads, or its text; any other value as it is."""
    text = _body_text(body)
    return _response_body(text)[0] if text is not None else body


def _response_body(text: str | None) -> tuple[Any, bool]:
    """The parsed body, or for server-sent events the list of their JSON payloads."""
    if text is None:
        return None, False
    stripped = text.lstrip()
    if not stripped.startswith(("data:", "event:", ":", "id:", "retry:")):
        return _json_or_text(text), False
    return sse_payloads(text), True


def sse_payloads(text: str) -> list[Any]:
    """The payloads of server-sent events: each event's `data:` lines (joined by newlines, as
    the format says), read as JSON where they are; comment lines (`: ...`), `event:` and
    `id:` lines and the closing `[DONE]` carry no payload."""
    events: list[Any] = []
    data: list[str] = []

    def close() -> None:
        if not data:
            return
        joined = "\n".join(data)
        value = _json_or_text(joined)
        if isinstance(value, str) and len(data) > 1:
            # A recorder that dropped the blank lines between events: each line is one.
            events.extend(_json_or_text(d) for d in data if d and d != "[DONE]")
        elif joined.strip() and joined.strip() != "[DONE]":
            events.append(value)
        data.clear()

    for line in text.splitlines():
        if not line.strip():
            close()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
    close()
    return events


def _response_only(data: bytes, source: str) -> Exchange | None:
    """A recorded response alone (no request): a server-sent events file, or JSON Lines of
    chat-completion stream chunks. None when `data` is neither."""
    head = data[:4096].lstrip()
    if head.startswith((b"data:", b"event:", b": ")):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return Exchange("", None, sse_payloads(text), None, True)
    if not head.startswith(b"{"):
        return None
    lines = [line for line in data.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    chunks = []
    for line in lines:
        try:
            chunk = encoding.parse_json(line)
        except InvalidArgument as exc:
            if exc.reason == "JSON_TOO_DEEP":
                raise encoding.in_context(exc, source) from None
            return None
        if not isinstance(chunk, dict) or "choices" not in chunk and "type" not in chunk:
            return None
        chunks.append(chunk)
    return Exchange("", None, chunks, None, True)


def conversations(exchanges: list[Exchange], history) -> list[list[Exchange]]:
    """The exchanges grouped into conversations: one continues the previous conversation when
    its history (`history(request)`: the messages or input items it sends) starts with the
    previous one's, as an agent re-sends the growing history on every call."""
    groups: list[list[Exchange]] = []
    last: list | None = None
    for exchange in exchanges:
        sent = history(exchange.request)
        if sent is None:
            continue  # not a model call this format reads (another API in the same cassette)
        if groups and last is not None and sent[:len(last)] == last:
            groups[-1].append(exchange)
        else:
            groups.append([exchange])
        last = sent
    return groups
