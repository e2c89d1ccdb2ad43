"""The one canonical codec: every stored byte of cas is produced by `encode` (docs/format.md)."""

from __future__ import annotations

import json
import math
import re
import reprlib
import unicodedata
from typing import Any, Iterator, TypeVar

import msgspec

from cas.errors import CasError, CorruptData, InvalidArgument, InvalidJSONValue

T = TypeVar("T")

# Incoming JSON nests at most this many levels of arrays and objects (docs/format.md section
# 2): far more than real agent traces use, and far below the interpreter's recursion limit, so
# every reader and writer of cas values (msgspec, diffs, renderers: all recursive) is safe on
# anything accepted.
MAX_DEPTH = 100
# An integer's decimal text has at most this many characters, its `-` included: positive
# integers have at most 4300 digits, negative ones at most 4299 (docs/format.md section 2, rule
# 5). It is what the codec's reader (msgspec) reads back: it refuses `-` and 4300 digits, so a
# writer that accepted them would write bytes cas cannot read.
MAX_INT_DIGITS = 4300
_INT_LIMIT = 10 ** MAX_INT_DIGITS
_INT_FLOOR = -10 ** (MAX_INT_DIGITS - 1)  # exclusive: -(10**4299 - 1) has 4299 digits
INT_RULE = (f"an integer has at most {MAX_INT_DIGITS} digits ({MAX_INT_DIGITS - 1} after a "
            "'-')")


def int_in_range(v: int) -> bool:
    """Whether an integer can be written and read back: at most 4300 characters of decimal
    text, sign included."""
    return v.bit_length() <= 14000 or _INT_FLOOR < v < _INT_LIMIT


# One reused encoder (msgspec's advice): keys and struct fields sorted by code point, no
# whitespace, shortest round-trip floats, non-ASCII written as raw UTF-8.
_ENCODER = msgspec.json.Encoder(order="sorted")
_DECODER = msgspec.json.Decoder()


def encode(value: Any) -> bytes:
    """Canonical bytes of a value already known to be canonical-JSON-safe.

    Values decoded by `decode_json` and records built by cas are safe by construction; values
    from a caller must go through `check_json` first (msgspec would write NaN as null).
    """
    return _ENCODER.encode(value)


def check_json(value: Any, path: str = "$", max_depth: int = MAX_DEPTH) -> None:
    """Refuse what canonical JSON cannot carry, naming the path of the first offender (in
    document order): a non-finite float, a non-string key, a lone surrogate, an integer of more
    than MAX_INT_DIGITS digits, a value of no JSON type, or arrays and objects nested deeper
    than `max_depth` levels (docs/format.md section 2).

    Iterative, so a value nested a million levels deep (or one that contains itself) is
    refused like any other, never a RecursionError. Paths are built only for an offender.
    """
    # (value, levels of arrays and objects around it, where): `where` is the path string of
    # the root, else (parent's where, key or index).
    stack: list[tuple[Any, int, Any]] = [(value, 0, path)]
    pop = stack.pop
    while stack:
        v, depth, where = pop()
        t = type(v)
        if v is None or t is bool:
            continue
        if t is int:
            if v.bit_length() > 14000 and not _INT_FLOOR < v < _INT_LIMIT:
                raise InvalidJSONValue(_path(where), f"{describe(v)} is out of range: {INT_RULE}")
        elif t is str:
            if not v.isascii():
                _check_str(v, where)
        elif t is float:
            if not math.isfinite(v):
                raise InvalidJSONValue(_path(where),
                                       f"non-finite number {v!r} cannot be written in JSON")
        elif t is dict or t is list or t is tuple or isinstance(v, msgspec.Struct):
            if depth >= max_depth:
                raise too_deep(_path(where), max_depth)
            depth += 1
            if t is dict:
                for key in v:  # keys first, in order: a bad key is named at its object
                    if type(key) is not str:
                        raise InvalidJSONValue(_path(where), f"object key {describe(key)} is a "
                                               f"{type(key).__name__}; keys must be strings")
                    if not key.isascii():
                        _check_str(key, where)
                items = [(item, depth, (where, key)) for key, item in v.items()]
            elif t is list or t is tuple:
                items = [(item, depth, (where, i)) for i, item in enumerate(v)]
            else:
                items = [(getattr(v, f), depth, (where, f)) for f in v.__struct_fields__]
            items.reverse()  # popped in document order
            stack.extend(items)
        else:
            raise InvalidJSONValue(_path(where), f"a {t.__name__} is not a JSON value "
                                   "(accepted: null, bool, int, float, str, list, dict)")


def _path(where: Any) -> str:
    """The JSONPath of a `where` of check_json: `$.steps[3].arguments`, `$['a b']`."""
    keys = []
    while type(where) is tuple:
        where, key = where
        keys.append(key)
    return join_path(where, reversed(keys))


def join_path(path: str, keys) -> str:
    for key in keys:
        if type(key) is int:
            path = f"{path}[{key}]"
        elif key.isidentifier():
            path = f"{path}.{key}"
        else:
            path = f"{path}[{describe(key)}]"
    return path


def too_deep(path: str, max_depth: int = MAX_DEPTH) -> InvalidArgument:
    """The refusal of a value nested deeper than `max_depth` levels (reason JSON_TOO_DEEP)."""
    shown = path if len(path) <= 80 else path[:60] + "..." + path[-17:]
    return InvalidArgument(f"{shown}: arrays and objects are nested more than {max_depth} "
                           f"levels deep (at most {max_depth} levels are accepted)",
                           reason="JSON_TOO_DEEP", path=path, max_depth=max_depth)


def _check_str(text: str, where: Any) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidJSONValue(_path(where), _surrogate(text, exc.start)) from None


def _surrogate(text: str, index: int) -> str:
    return (f"string holds a lone surrogate (U+{ord(text[index]):04X} at character {index}), "
            "which UTF-8 cannot encode")


def check_text(value: Any, what: str, *, optional: bool = False) -> Any:
    """A caller's free text (a message, a description, an author): a string canonical JSON can
    carry (no lone surrogate); None too when `optional`."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string{' or None' if optional else ''}, not "
                              f"{describe(value)}")
    check_json(value, what)
    return value


def text_problem(text: str, limit: int) -> str | None:
    """Why `text` is not 1 to `limit` printable characters, naming the character that is not
    allowed ("contains the non-printable character U+2028 (LINE SEPARATOR) at character 1"),
    or None if it is."""
    if not text:
        return "is empty"
    if not text.isprintable():
        for i, c in enumerate(text):
            if not c.isprintable():
                if unicodedata.category(c) == "Cc":
                    what = f"the control character U+{ord(c):04X}"
                else:
                    name = unicodedata.name(c, "")
                    what = f"the non-printable character U+{ord(c):04X}" + \
                        (f" ({name})" if name else "")
                return f"contains {what} at character {i}"
    if len(text) > limit:
        return f"is {len(text)} characters long"
    return None


def describe(value: Any, limit: int = 60) -> str:
    """A short repr of any value for an error message. Never raises and never recurses deeply:
    a list nested 100,000 levels deep or an integer of a million digits is described, not
    printed."""
    if type(value) is int and value.bit_length() > 256:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    if type(value) is str and len(value) > limit:
        value = value[:limit]  # repr of the head only: a huge string is never copied whole
        try:
            return repr(value)[:limit - 3] + "..."
        except Exception:
            return "a str"
    try:
        text = _REPR.repr(value)
    except Exception:  # a broken __repr__, or a value Python cannot print (RecursionError too)
        return f"a {type(value).__name__}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 58, 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = _REPR.maxfrozenset = 4


# -- reading JSON from outside ------------------------------------------------------------
# These scan bytes at C speed and in linear time whatever the input: the depth-relevant
# bytes; one token of the locator below (a string literal, of which an unterminated one runs
# to the end, so that no match is ever retried from a later quote).
_TO_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKET_OR_QUOTE = bytes(b for b in range(256) if b not in b'[]{}"')
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{},:]|[^\s\[\]{},:"]+', re.S)


def parse_json(data: Any, decoder: Any = None, max_depth: int = MAX_DEPTH) -> Any:
    """Strict JSON from outside cas (bytes or str), untyped or through a typed msgspec
    `decoder`, nested at most `max_depth` levels of arrays and objects.

    Every refusal is `InvalidArgument` and names what is wrong: `InvalidJSONValue` with the
    path for a lone surrogate or a number out of range, reason JSON_TOO_DEEP (with the path)
    for too deep a document however deep (never a RecursionError), else the decoder's own
    message (malformed JSON, invalid UTF-8, or for a typed decoder a field of the wrong type).
    """
    if isinstance(data, str):
        # A lone surrogate in the text is kept as its (invalid) UTF-8 bytes: the locator
        # below names it and its path.
        data = data.encode("utf-8", "surrogatepass")
    elif isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    elif not isinstance(data, bytes):
        raise InvalidArgument(f"JSON must be given as bytes or str, not {type(data).__name__}")
    # The decoder recurses (in C): a document that may nest deeper than it safely can (more
    # brackets than _DECODE_FIRST) is measured before it is decoded, even with a raised
    # recursion limit; one with fewer is measured after, on the decoded value (faster).
    brackets = data.count(b"[") + data.count(b"{")
    if brackets > _DECODE_FIRST and not depth_at_most(data, max_depth):
        found = _locate(data, max_depth, "depth")  # None: brackets unpaired, i.e. malformed
        if found is not None:
            raise found
    try:
        value = (decoder or _DECODER).decode(data)
    except RecursionError:  # unpaired brackets the check above could not measure
        raise _locate(data, max_depth, "depth") or too_deep("$", max_depth) from None
    except msgspec.DecodeError as exc:  # ValidationError too
        raise _refusal(data, exc, max_depth) from None
    if max_depth < brackets <= _DECODE_FIRST and not value_depth_at_most(value, max_depth):
        raise _locate(data, max_depth, "depth") or too_deep("$", max_depth)
    return value


_DECODE_FIRST = 1000  # brackets: at most this deep, which the decoder handles in any case


def value_depth_at_most(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether a decoded value nests at most `max_depth` levels of arrays and objects (a
    record counts as an object), level by level: never recursively."""
    if isinstance(value, msgspec.Struct):  # a record: one level, like the list of its fields
        value = [getattr(value, f) for f in value.__struct_fields__]
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            return False
        below = []
        for v in level:
            for item in (v.values() if type(v) is dict else v):
                t = type(item)
                if t is dict or t is list:  # what a decoder makes: no tuples, no records
                    below.append(item)
        level = below
    return True


def depth_at_most(data: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether JSON `data` (bytes or str) nests at most `max_depth` levels, at C speed: with
    strings removed and only brackets kept (all made square), each pass deletes the innermost
    `[]` pairs, so the document is gone after exactly depth passes. (Malformed JSON whose
    brackets do not pair is never gone: False.)"""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    elif isinstance(data, memoryview):
        data = bytes(data)
    elif not isinstance(data, (bytes, bytearray)):
        return True  # not JSON text at all: the decoder refuses it
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return True  # too few brackets to be too deep: the common case, one pass
    # Strings out: escapes first (pairs of backslashes, then escaped quotes, as a JSON reader
    # pairs them), then every other byte but brackets and quotes, then what lies between
    # quotes (all at C speed; on malformed JSON the answer may be wrong, never slow).
    s = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    s = b"".join(s.translate(_TO_SQUARE, _NOT_BRACKET_OR_QUOTE).split(b'"')[::2])
    for _ in range(max_depth):
        if not s:
            return True
        s = s.replace(b"[]", b"")
    return not s


def _refusal(data: bytes, exc: Exception, max_depth: int) -> InvalidArgument:
    """The refusal of JSON the decoder refused: located when it is a string or a number cas
    can name the path of (msgspec says "Input data was truncated" for a lone surrogate, and
    gives `$[...]` for the key of a number out of range)."""
    message = str(exc)
    kind = ("number" if "out of range" in message else
            "string" if "truncated" in message or "surrogate" in message or "UTF-8" in message
            else None)
    found = _locate(data, max_depth, kind) if kind else None
    return found if found is not None else InvalidArgument(message)


def _locate(data: bytes, max_depth: int, want: str) -> InvalidArgument | None:
    """Walk the tokens of `data` keeping the path, and return the refusal of the first
    problem of kind `want` ("depth", "string" or "number"), or None if there is none. Only
    for a document refused (too deep, or by the decoder): linear, but in Python."""
    frames: list[list] = []  # per open container: [is_object, key or index, expecting a key]
    for m in _TOKEN.finditer(data):
        token = m.group()
        first = token[0]
        if first == 0x7B or first == 0x5B:  # { [
            if want == "depth" and len(frames) >= max_depth:
                return too_deep(_frames_path(frames), max_depth)
            frames.append([first == 0x7B, None if first == 0x7B else 0, True])
        elif first == 0x7D or first == 0x5D:  # } ]
            if frames:
                frames.pop()
        elif first == 0x2C:  # ,
            if frames:
                frame = frames[-1]
                if frame[0]:
                    frame[2] = True
                else:
                    frame[1] += 1
        elif first == 0x3A:  # :
            if frames:
                frames[-1][2] = False
        elif first == 0x22:  # a string
            is_key = bool(frames) and frames[-1][0] and frames[-1][2]
            problem = _string_problem(token) if want == "string" else None
            if problem is not None:
                # a bad key is named at the object holding it, as check_json does
                return InvalidJSONValue(_frames_path(frames[:-1] if is_key else frames), problem)
            if is_key:
                try:
                    frames[-1][1] = _DECODER.decode(token)
                except msgspec.DecodeError:
                    frames[-1][1] = "?"
        elif want == "number" and first in b"-0123456789":
            try:
                _DECODER.decode(token)
            except msgspec.DecodeError:
                text = token[:40].decode("ascii", "replace") + ("..." if len(token) > 40 else "")
                if any(c in token for c in b".eE"):
                    rule = "a number with a fraction or exponent must be a finite binary64 float"
                else:
                    rule = INT_RULE
                return InvalidJSONValue(_frames_path(frames), f"number {text} is out of range: "
                                                              f"{rule}")
    return None


def _frames_path(frames: list[list]) -> str:
    return join_path("$", (f[1] for f in frames if f[1] is not None))


def _string_problem(token: bytes) -> str | None:
    """What makes a string literal unreadable, if it is a lone surrogate."""
    try:
        raw = token.decode("utf-8")
    except UnicodeDecodeError:
        try:
            raw = token.decode("utf-8", "surrogatepass")  # a surrogate written as raw bytes
        except UnicodeDecodeError:
            return None  # other invalid UTF-8: the decoder's own message says so
    try:
        text = json.loads(raw)  # the one JSON reader that keeps a lone surrogate escape
    except ValueError:
        return None
    for i, c in enumerate(text):
        if "\ud800" <= c <= "\udfff":
            return _surrogate(text, i)
    return None


def decode_json(data: bytes | str) -> Any:
    """Parse untyped strict JSON (no NaN/Infinity literals) nested at most MAX_DEPTH levels;
    errors are `InvalidArgument` (see `parse_json`)."""
    try:
        return parse_json(data)
    except InvalidArgument as exc:
        if exc.reason is None:  # the decoder's own message: say what it is about
            raise InvalidArgument(f"invalid JSON: {exc.message}") from None
        raise


def lines_of(stream: Any, source: str) -> Iterator[Any]:
    """The lines of a JSON Lines input (a binary or text stream, or an iterable of lines),
    each checked to be bytes or str. What is no such input is refused at once."""
    if isinstance(stream, (str, bytes, bytearray, memoryview, dict)) or \
            not hasattr(stream, "__iter__"):
        raise InvalidArgument(f"{source}: JSON Lines are read from a stream (e.g. a file opened "
                              "'rb', or io.BytesIO) or an iterable of lines, not "
                              f"{describe(stream)}")
    return _lines(stream, source)


def _lines(stream: Any, source: str) -> Iterator[Any]:
    for line in stream:
        if not isinstance(line, (bytes, bytearray, str)):
            raise InvalidArgument(f"{source}: a line must be bytes or str, not "
                                  f"{describe(line)}")
        yield line


def in_context(exc: CasError, prefix: str, **fields: Any) -> CasError:
    """The same refusal (class, code, reason, fields) with where it was found in front of its
    message (`runs.jsonl line 3: $.input: ...`) and `fields` added."""
    new = type(exc).__new__(type(exc))
    new.__dict__.update(exc.__dict__)
    new.message = f"{prefix}: {exc.message}"
    new.args = (new.message,)
    new.fields = {**exc.fields, **fields}
    return new


def decode(data: bytes, type_: type[T], what: str = "record") -> T:
    """Decode stored bytes into a record type; any failure is `CorruptData`, never data."""
    try:
        return msgspec.json.decode(data, type=type_)
    except msgspec.DecodeError as exc:
        raise CorruptData(f"{what} does not parse: {exc}") from None
    except RecursionError:  # cas never writes such a record: corrupt, not a crash
        raise CorruptData(f"{what} does not parse: nested too deeply") from None


def to_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)
