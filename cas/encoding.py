"""The one canonical codec: every stored byte of cas is produced by `encode` (see docs/format.md)."""

from __future__ import annotations

import math
from typing import Any, TypeVar

import msgspec

from .errors import CorruptData, InvalidJSONValue

T = TypeVar("T")

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


def check_json(value: Any, path: str = "$") -> None:
    """Refuse what canonical JSON cannot carry, naming the path of the first offender."""
    t = type(value)
    if value is None or t is bool or t is int:
        return
    if t is str:
        _check_str(value, path)
    elif t is float:
        if not math.isfinite(value):
            raise InvalidJSONValue(path, f"non-finite number {value!r} cannot be written in JSON")
    elif t is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise InvalidJSONValue(path, f"object key {key!r} is a {type(key).__name__}; "
                                             "keys must be strings")
            _check_str(key, path)
            check_json(item, f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]")
    elif t is list or t is tuple:
        for i, item in enumerate(value):
            check_json(item, f"{path}[{i}]")
    elif isinstance(value, msgspec.Struct):
        for field in value.__struct_fields__:
            check_json(getattr(value, field), f"{path}.{field}")
    else:
        raise InvalidJSONValue(path, f"a {t.__name__} is not a JSON value "
                                     "(accepted: null, bool, int, float, str, list, dict)")


def _check_str(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJSONValue(path, "string holds a lone surrogate, which UTF-8 cannot encode") from None


def decode_json(data: bytes | str) -> Any:
    """Parse untyped strict JSON (no NaN/Infinity literals); errors are `InvalidArgument`."""
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        from .errors import InvalidArgument
        raise InvalidArgument(f"invalid JSON: {exc}") from None


def decode(data: bytes, type_: type[T], what: str = "record") -> T:
    """Decode stored bytes into a record type; any failure is `CorruptData`, never data."""
    try:
        return msgspec.json.decode(data, type=type_)
    except msgspec.DecodeError as exc:
        raise CorruptData(f"{what} does not parse: {exc}") from None


def to_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)
