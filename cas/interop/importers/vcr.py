"""The vcr container: recorded API traffic in vcrpy cassettes (YAML or JSON), read as the
exchanges (request body, response body) a format's importer converts (docs/importers.md).

A cassette holds `interactions[i].request.{method, uri, headers, body}` and
`interactions[i].response.{status.code, headers, body.string}`; the bodies are JSON text (parsed
here), or for a streamed response server-sent events (`data: {...}` lines, read as the list of
their JSON payloads). YAML needs PyYAML: the `vcr` extra.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from cas.errors import FailedPrecondition, InvalidArgument
from cas.format import encoding


class Exchange(NamedTuple):
    """One recorded model call."""

    uri: str
    request: Any          # the parsed JSON body (a dict), its text if not JSON, or None
    response: Any         # the parsed JSON body, the list of SSE payloads, its text, or None
    status: int | None
    streamed: bool        # the response was server-sent events
    # The response's headers, names in lower case (their first value): where recordings keep
    # the organisation or project, for --tenant-from headers.openai-project.
    headers: dict = {}


def read_cassette(data: bytes, source: str) -> list[Exchange]:
    """The exchanges of one cassette, in recorded order."""
    document = _load(data, source)
    interactions = document.get("interactions") if isinstance(document, dict) else None
    if not isinstance(interactions, list):
        raise InvalidArgument(f"{source}: not a vcr cassette: expected an object with "
                              "`interactions` (a list of {request, response})",
                              reason="NOT_THIS_FORMAT")
    out = []
    for i, item in enumerate(interactions):
        if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
            raise InvalidArgument(f"{source}: interactions[{i}] has no request",
                                  reason="NOT_THIS_FORMAT")
        request = item["request"]
        response = item.get("response") if isinstance(item.get("response"), dict) else {}
        status = response.get("status")
        status = status.get("code") if isinstance(status, dict) else None
        body, streamed = _response_body(_body_text(response.get("body")))
        out.append(Exchange(uri=str(request.get("uri", "")),
                            request=_json_or_text(_body_text(request.get("body"))),
                            response=body, status=status if isinstance(status, int) else None,
                            streamed=streamed, headers=_headers(response.get("headers"))))
    return out


def _load(data: bytes, source: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        pass
    try:
        import yaml
    except ImportError:
        raise FailedPrecondition("reading a YAML cassette needs PyYAML, from the `vcr` extra: "
                                 "pip install '.[vcr]' in the cas checkout",
                                 reason="EXTRA_REQUIRED",
                                 extra="vcr") from None
    try:
        # The safe loader builds only plain data; vcrpy writes bodies it could not decode as
        # text with the `!!binary` tag, which it reads as bytes.
        return yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"{source}: not a vcr cassette: {exc}".splitlines()[0],
                              reason="NOT_THIS_FORMAT") from None


def _headers(headers: Any) -> dict[str, str]:
    out = {}
    for name, value in headers.items() if isinstance(headers, dict) else ():
        value = (value[0] if value else None) if isinstance(value, list) else value
        if isinstance(name, str) and isinstance(value, str):
            out[name.lower()] = value
    return out


def _body_text(body: Any) -> str | None:
    if isinstance(body, dict):
        body = body.get("string")
    if isinstance(body, bytes):
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            return None  # compressed or binary: not a body an importer can read
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
    if not (stripped.startswith("data:") or stripped.startswith("event:")):
        return _json_or_text(text), False
    events = []
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[len("data:"):].strip()
        if payload and payload != "[DONE]":
            events.append(_json_or_text(payload))
    return events, True


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
