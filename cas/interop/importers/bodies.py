"""Recorded HTTP bodies as the bytes the client read: the stored form undone (text, base64,
YAML `!!binary`, a list of hex strings), then the `Content-Encoding` undone (gzip, deflate,
br, and chains of them, last applied first), and AWS event-stream framing split into its
messages (docs/importers.md, "Compressed HTTP bodies in cassettes").

Every decoder is bounded: a body may not decode to more than MAX_BODY bytes (a small gzip
or brotli bomb is refused, never expanded), and event-stream frames are checked by their
CRCs before they are believed.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
import zlib
from typing import Any, NamedTuple

from cas.errors import InvalidArgument

# A decoded body holds at most this much (4x the native reader's 16 MiB line: a stream's
# events are larger than the run they add up to, never this much larger).
MAX_BODY = 64 << 20
IDENTITY = frozenset({"identity", ""})
CODINGS = ("gzip", "x-gzip", "deflate", "br", "identity")
EVENT_STREAM = "application/vnd.amazon.eventstream"
_HEX = re.compile(r"\A(?:[0-9a-fA-F]{2})*\Z")


class Undecodable(Exception):
    """A body whose stored form or content coding cannot be undone: `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def too_large(source: str, what: str) -> InvalidArgument:
    return InvalidArgument(f"{source}: {what} decodes to more than {MAX_BODY} bytes; a "
                           "recorded body is read up to that size", reason="BODY_TOO_LARGE",
                           limit=MAX_BODY)


class TooLarge(Exception):
    """A body that decodes to more than the limit (`too_large` is its refusal)."""


# -- headers -----------------------------------------------------------------------------------
def header(headers: Any, name: str) -> str | None:
    """The value of header `name` (any case) in a recorder's headers: a mapping of names to a
    string or a list of strings, or a flat list [name, value, ...]; list values joined by
    `, ` as HTTP joins repeated headers."""
    name = name.lower()
    if isinstance(headers, list):
        pairs = zip(headers[0::2], headers[1::2])
    elif isinstance(headers, dict):
        pairs = headers.items()
    else:
        return None
    values = []
    for key, value in pairs:
        if isinstance(key, str) and key.lower() == name:
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, str):
                    values.append(v)
    return ", ".join(values) if values else None


def codings(headers: Any) -> list[str]:
    """The content codings of a body in the order they were applied (`gzip, br`: gzip
    first), lower case, identity left out."""
    value = header(headers, "content-encoding") or ""
    return [c for c in (part.strip().lower() for part in value.split(",")) if c not in IDENTITY]


# -- stored forms ------------------------------------------------------------------------------
def stored_bytes(body: Any) -> tuple[bytes | None, str | None]:
    """The bytes of a stored body, and its text when it was stored as text: vcrpy's
    `{"string": text or bytes}`, Betamax's `{"base64_string": ...}`, nock's list of hex
    strings, bytes (YAML `!!binary`), or text. (None, None) for no body."""
    if isinstance(body, dict):
        if isinstance(body.get("base64_string"), str):
            try:
                return base64.b64decode(body["base64_string"], validate=False), None
            except (binascii.Error, ValueError):
                raise Undecodable("its base64_string is not base64") from None
        body = body.get("string")
    if isinstance(body, (bytes, bytearray)):
        return bytes(body), None
    if isinstance(body, list) and body and all(isinstance(p, str) and _HEX.match(p)
                                               for p in body):
        return bytes.fromhex("".join(body)), None  # nock: binary bodies as hex chunks
    if isinstance(body, str):
        return body.encode("utf-8", "surrogatepass"), body
    return None, None


def _compressed_texts(text: str, coding: str) -> list[bytes]:
    """The compressed bytes a recorder may have stored as text, most likely first: one
    latin-1 character per byte, or base64. None when the text reads as it is (JSON or
    server-sent events: stored already decoded, the header kept as it was sent)."""
    head = text.lstrip()[:1]
    if head in ("{", "[") or text.lstrip().startswith(("data:", "event:")):
        return []
    out = []
    try:
        out.append(text.encode("latin-1"))
    except UnicodeEncodeError:
        pass
    compact = "".join(text.split())
    if compact and len(compact) % 4 == 0 and re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", compact):
        out.append(base64.b64decode(compact))
    return out


def _looks(raw: bytes, coding: str) -> bool:
    if coding in ("gzip", "x-gzip"):
        return raw[:2] == b"\x1f\x8b"
    if coding == "deflate":
        return len(raw) >= 2 and (raw[0] & 0x0F) == 8 and (raw[0] << 8 | raw[1]) % 31 == 0
    return False


# -- content codings ---------------------------------------------------------------------------
def decode(raw: bytes, applied: list[str], limit: int = MAX_BODY) -> bytes:
    """`raw` with its content codings undone, the last applied first. Raises Undecodable for
    a coding this reader does not know (or lacks the library for) or bytes that are not in
    it, and TooLarge past `limit`."""
    for coding in reversed(applied):
        if coding in ("gzip", "x-gzip"):
            raw = _zlib(raw, 16 + zlib.MAX_WBITS, limit, coding)
        elif coding == "deflate":  # zlib-wrapped as the RFC says; raw deflate as servers send
            try:
                raw = _zlib(raw, zlib.MAX_WBITS, limit, coding)
            except Undecodable:
                raw = _zlib(raw, -zlib.MAX_WBITS, limit, coding)
        elif coding == "br":
            raw = _brotli(raw, limit)
        else:
            raise Undecodable(f"content coding {coding!r} is not one this reader decodes "
                              f"(accepted: {', '.join(CODINGS)})")
    return raw


def _zlib(raw: bytes, wbits: int, limit: int, coding: str) -> bytes:
    # gzip members may follow one another (a body written in pieces): each is read in turn.
    out = bytearray()
    rest = raw
    while rest:
        d = zlib.decompressobj(wbits)
        try:
            out += d.decompress(rest, limit + 1 - len(out))
        except zlib.error as exc:
            raise Undecodable(f"not {coding} data ({exc})") from None
        if len(out) > limit:
            raise TooLarge
        if not d.eof:
            if d.unconsumed_tail:
                raise TooLarge
            raise Undecodable(f"{coding} data cut short")
        rest = d.unused_data if wbits > 16 else b""
    return bytes(out)


def _brotli(raw: bytes, limit: int) -> bytes:
    try:
        import brotli
    except ImportError:
        raise Undecodable("content coding 'br' needs the brotli package, from the `vcr` "
                          "extra: pip install '.[vcr]' in the cas checkout") from None
    d = brotli.Decompressor()
    out = bytearray()
    try:
        out += d.process(raw, output_buffer_limit=limit + 1)
        while len(out) <= limit and not d.is_finished() and not d.can_accept_more_data():
            out += d.process(b"", output_buffer_limit=limit + 1 - len(out))
    except brotli.error as exc:
        raise Undecodable(f"not br data ({exc})") from None
    if len(out) > limit:
        raise TooLarge
    if not d.is_finished():
        raise Undecodable("br data cut short")
    return bytes(out)


# -- a body ------------------------------------------------------------------------------------
class Body(NamedTuple):
    """A recorded body as read: `data` the bytes the client read (None: no body, or one that
    could not be decoded), `text` them as UTF-8 (None if they are not), and for a body that
    could not be decoded, `kept`: its stored bytes and why (to keep under metadata)."""

    data: bytes | None
    text: str | None
    kept: dict | None = None


def read(body: Any, headers: Any, source: str, what: str) -> Body:
    """The body of one recorded request or response, its codings undone."""
    applied = codings(headers)
    raw = None
    try:
        raw, text = stored_bytes(body)
        if raw is None:
            return Body(None, None)
        if applied and text is not None:
            data = None
            for packed in _compressed_texts(text, applied[-1]):
                try:
                    data = decode(packed, applied)
                    break
                except Undecodable:
                    if _looks(packed, applied[-1]):
                        raw = packed
                        raise
            if data is None:
                return Body(raw, text)  # stored already decoded (the header kept as sent)
        else:
            data = decode(raw, applied)
    except TooLarge:
        raise too_large(source, what) from None
    except Undecodable as exc:
        return Body(None, None, {"content_encoding": applied, "reason": exc.reason,
                                 "base64": base64.b64encode(raw or b"").decode("ascii")})
    if len(data) > MAX_BODY:
        raise too_large(source, what)
    try:
        return Body(data, data.decode("utf-8"))
    except UnicodeDecodeError:
        return Body(data, None)


# -- AWS event stream --------------------------------------------------------------------------
class Frame(NamedTuple):
    headers: dict[str, Any]
    payload: bytes


_TYPES = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8}  # fixed-size header value types


def event_stream(data: bytes) -> list[Frame] | None:
    """The messages of an AWS event stream (`application/vnd.amazon.eventstream`): each a
    prelude (total length, headers length, CRC32 of the two), typed headers, a payload and
    the CRC32 of the whole message. None when `data` is not such a stream (a CRC that does
    not match, a length that runs past the end)."""
    frames = []
    at = 0
    while at < len(data):
        if len(data) - at < 16:
            return None
        total, hlen, crc = struct.unpack_from(">III", data, at)
        if zlib.crc32(data[at:at + 8]) != crc or total < 16 + hlen or at + total > len(data):
            return None
        message = data[at:at + total]
        if zlib.crc32(message[:-4]) != struct.unpack_from(">I", message, total - 4)[0]:
            return None
        heads = _frame_headers(message[12:12 + hlen])
        if heads is None:
            return None
        frames.append(Frame(heads, message[12 + hlen:total - 4]))
        at += total
    return frames or None


def _frame_headers(raw: bytes) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    at = 0
    try:
        while at < len(raw):
            n = raw[at]
            name = raw[at + 1:at + 1 + n].decode("utf-8")
            kind = raw[at + 1 + n]
            at += 2 + n
            if kind in (0, 1):
                value: Any = kind == 0
            elif kind in _TYPES:
                size = _TYPES[kind]
                value = int.from_bytes(raw[at:at + size], "big", signed=True)
                at += size
            elif kind in (6, 7):  # bytes, string: 2-byte length
                size = struct.unpack_from(">H", raw, at)[0]
                chunk = raw[at + 2:at + 2 + size]
                value = chunk.decode("utf-8") if kind == 7 else base64.b64encode(chunk).decode()
                at += 2 + size
            elif kind == 9:  # uuid
                value = raw[at:at + 16].hex()
                at += 16
            else:
                return None
            out[name] = value
    except (IndexError, UnicodeDecodeError, struct.error):
        return None
    return out if at == len(raw) else None
