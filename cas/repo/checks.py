"""Argument checks: every public operation refuses a bad argument with a typed CasError."""

from __future__ import annotations

import getpass
import inspect
import os
import re
from typing import Any, Callable, Iterable

from cas.errors import InvalidArgument
from cas.format import encoding
from cas.repo.userconfig import configured_person

# A progress callback: (stage, done, total), told how far long work is.
Progress = Callable[[str, int, int], None]
MAX_PAGE = 500  # the largest page of ids a read returns; a larger limit is refused
_TOKEN_RE = re.compile(r"ct-[0-9a-f]{32}\Z")
_DURATION_RE = re.compile(r"\s*([0-9]{1,12})([smhdSMHD]?)\s*\Z")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def author(given: Any) -> str:
    """Who a record names: `given`, else the configured person (`CAS_USER`, else `cas config
    user.name/user.email`), else the login name."""
    given = encoding.check_text(given, "author", optional=True)
    if given:
        return given
    person = configured_person()
    if person:
        return person
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"


def digest_text(value: Any, what: str, optional: bool = False) -> None:
    """`value` is a string (parse_digest then checks its form), or None when optional."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        shown = encoding.describe(value)
        raise InvalidArgument(f"{what} {shown} is not a digest; expected 'b3:' followed by 64 "
                              "hex digits", value=shown)


def confirm_token(token: Any, optional: bool = True) -> str | None:
    if token is None and optional:
        return None
    if not isinstance(token, str) or not _TOKEN_RE.match(token):
        raise InvalidArgument(f"{encoding.describe(token)} is not a confirm token (ct- and 32 "
                              "hex digits)")
    return token


def path(value: Any, what: str) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a path (a str or os.PathLike), not "
                              f"{encoding.describe(value)}")
    if "\x00" in value:
        raise InvalidArgument(f"{what} {encoding.describe(value)} holds a NUL character")
    return encoding.check_text(value, what)


def page_limit(limit: Any) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE:
        raise InvalidArgument(f"limit must be a positive integer from 1 to {MAX_PAGE}, "
                              f"not {encoding.describe(limit)}", minimum=1, maximum=MAX_PAGE)


def progress(callback: Any) -> None:
    """A progress callback is None or a function of (stage, done, total)."""
    if callback is None:
        return
    try:
        if not callable(callback):
            raise TypeError
        inspect.signature(callback).bind("", 0, 0)
    except TypeError:
        raise InvalidArgument(f"progress must be a function of (stage, done, total), "
                              f"not {encoding.describe(callback)}") from None
    except ValueError:
        pass  # no signature to check (some builtins): trusted


def seconds(value: Any, what: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not 0 <= value <= 10 ** 9:  # NaN and a bigint that overflows a float too
        raise InvalidArgument(f"{what} must be a number of seconds from 0 to 10**9, not "
                              f"{encoding.describe(value)}")


def duration(value: Any, what: str) -> float:
    """Seconds given as a number, or as text: a number with s, m, h or d (`90`, `15m`, `7d`)."""
    if not isinstance(value, str):
        seconds(value, what)
        return float(value)
    found = _DURATION_RE.match(value)
    if found is None:
        raise InvalidArgument(f"invalid {what} {encoding.describe(value)}; use seconds or a "
                              "number with s, m, h or d, e.g. 0, 90, 15m, 24h, 7d")
    return float(int(found[1]) * _UNITS[found[2].lower()])


def many(values: Any, what: str, items: str, single: tuple) -> None:
    """`values` is an iterable of items (not one item, a string or a dict by mistake)."""
    if isinstance(values, single) or not hasattr(values, "__iter__"):
        raise InvalidArgument(f"{what} must be an iterable of {items}, not "
                              f"{encoding.describe(values)}")


def strings(values: Any, what: str, items: str) -> list[str]:
    many(values, what, items, (str, bytes, bytearray, dict))
    out = list(values)
    for v in out:
        if not isinstance(v, str):
            raise InvalidArgument(f"{what} must be an iterable of {items} (strings), but holds "
                                  f"{encoding.describe(v)}")
    return out


def tags(values: Iterable[str]) -> list[str]:
    if isinstance(values, str):
        raise InvalidArgument("tags must be a list of strings, not one string")
    out = strings(values, "tags", "strings")
    for t in out:
        problem = encoding.text_problem(t, 64)
        if problem is not None:
            raise InvalidArgument(f"invalid tag {encoding.describe(t)}: 1-64 printable "
                                  f"characters; it {problem}")
    return sorted(set(out))


def label(text: Any, what: str) -> str:
    """Metric and experiment names: 1-128 printable characters, no surrounding spaces."""
    if not isinstance(text, str) or not text:
        raise InvalidArgument(f"{what} must be a non-empty string, not "
                              f"{encoding.describe(text)}")
    problem = encoding.text_problem(text, 128)
    if problem is not None or text != text.strip():
        raise InvalidArgument(f"invalid {what} {encoding.describe(text)}: use 1-128 printable "
                              "characters without leading or trailing spaces"
                              + (f"; it {problem}" if problem else ""))
    return text
