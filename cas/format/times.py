"""Points in time as written in runs and filters (`--since`): parsed as times, never as text.

Text comparison of ISO 8601 strings is wrong as soon as two offsets meet
(`2025-05-12T20:27:36-04:00` is 00:27 UTC on the 13th) and silently matches nothing for a form
it does not know (`yesterday`, `5/1/2025`). So every comparison of times goes through `parse_time`:
offsets are normalized to UTC, a date alone is its midnight UTC, a time without an offset is UTC,
fractional seconds are kept exactly (every digit, not rounded to microseconds), and anything else
is refused with `InvalidArgument` (reason `INVALID_TIME`) naming the accepted forms.
"""

from __future__ import annotations

import datetime
import re
from typing import Any, NamedTuple

from cas.errors import InvalidArgument
from cas.format.encoding import describe

# the forms accepted, as the error message and the docs (docs/runs.md) name them
FORMS = ("2025-05-12 (a date: its midnight UTC)",
         "2025-05-12T20:27, 2025-05-12T20:27:36 or 2025-05-12T20:27:36.123 (UTC)",
         "any of those times followed by Z, +02:00, -0400 or +02 (an offset)")

# ASCII digits only ([0-9], never \d, which also matches '١' and '１'); `T`, `t` or one space
# between date and time (RFC 3339 allows all three); an offset only after a time
_TIME = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})"
    r"(?:[Tt ](?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})"
    r"(?::(?P<second>[0-9]{2})(?:[.,](?P<fraction>[0-9]+))?)?"
    r"(?P<offset>[Zz]|[+-][0-9]{2}(?::?[0-9]{2})?)?)?")
_EPOCH = datetime.datetime(1970, 1, 1)
_FIRST = (datetime.datetime(1, 1, 1) - _EPOCH) // datetime.timedelta(seconds=1)
_LAST = (datetime.datetime(9999, 12, 31, 23, 59, 59) - _EPOCH) // datetime.timedelta(seconds=1)


class Instant(NamedTuple):
    """A point in time in UTC. Ordered and compared as times: `seconds` since 1970-01-01Z, then
    `fraction`, the digits after the decimal point with trailing zeros removed ('' for none),
    which compare as text exactly as the fractions they write do ('05' < '1' < '5')."""
    seconds: int
    fraction: str = ""


def parse_time(text: Any, what: str = "time") -> Instant:
    """The instant `text` names (one of FORMS), or InvalidArgument (INVALID_TIME) naming
    `what`, the text and the accepted forms. Raises nothing else, whatever it is given."""
    instant = time_or_none(text)
    if instant is None:
        raise InvalidArgument(f"{what}: {describe(text)} is not a time; accepted: "
                              + "; ".join(FORMS), reason="INVALID_TIME", what=what,
                              accepted=list(FORMS))
    return instant


def time_or_none(text: Any) -> Instant | None:
    """The instant `text` names, or None when it is not a time in one of FORMS (a stored
    `started_at` may be anything an import accepted: docs/runs.md)."""
    if not isinstance(text, str):
        return None
    m = _TIME.fullmatch(text)
    if m is None:
        return None
    g = m.groupdict()
    try:
        local = datetime.datetime(int(g["year"]), int(g["month"]), int(g["day"]),
                                  int(g["hour"] or 0), int(g["minute"] or 0),
                                  int(g["second"] or 0))
    except ValueError:  # 2025-02-30, 24:00, a leap second (:60): not a time we can place
        return None
    offset = _offset_seconds(g["offset"])
    if offset is None:
        return None
    seconds = (local - _EPOCH) // datetime.timedelta(seconds=1) - offset
    if not _FIRST <= seconds <= _LAST:  # outside the years 1 to 9999 once in UTC
        return None
    return Instant(seconds, (g["fraction"] or "").rstrip("0"))


def _offset_seconds(offset: str | None) -> int | None:
    """Seconds east of UTC of `Z`, `+HH:MM`, `+HHMM` or `+HH` (none: UTC); None if out of
    range (hours to 23, minutes to 59)."""
    if offset is None or offset in "Zz":
        return 0
    digits = offset[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
    if hours > 23 or minutes > 59:
        return None
    return (1 if offset[0] == "+" else -1) * (hours * 3600 + minutes * 60)


def format_time(instant: Instant) -> str:
    """The canonical text of an instant: `2025-05-13T00:27:36Z`, with `.` and the fraction's
    digits when it has any; `parse_time` reads it back to the same instant."""
    when = _EPOCH + datetime.timedelta(seconds=instant.seconds)
    fraction = f".{instant.fraction}" if instant.fraction else ""
    return when.isoformat() + fraction + "Z"  # isoformat: a 4-digit year, no fraction
