"""Times (cas/format/times.py): offsets normalized to UTC, a date alone its midnight UTC, a time
without an offset UTC, fractional seconds kept; every other text refused with INVALID_TIME and
the accepted forms; parse and format are inverse; any offset form of an instant is that instant."""

from __future__ import annotations

import datetime
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cas
from cas.format.times import FORMS, Instant, format_time, parse_time, time_or_none

UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)


def at(text: str) -> Instant:
    """The instant of an unambiguous UTC text, through datetime (an independent reading)."""
    when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return Instant(int((when - EPOCH).total_seconds()))


@pytest.mark.parametrize("text,utc", [
    ("2025-05-12T20:27:36-04:00", "2025-05-13T00:27:36Z"),
    ("2025-05-12T20:27:36-0400", "2025-05-13T00:27:36Z"),
    ("2025-05-12T20:27:36-04", "2025-05-13T00:27:36Z"),
    ("2025-05-13T02:27:36+02:00", "2025-05-13T00:27:36Z"),
    ("2025-05-13t00:27:36z", "2025-05-13T00:27:36Z"),
    ("2025-05-13 00:27:36", "2025-05-13T00:27:36Z"),
    ("2025-05-12", "2025-05-12T00:00:00Z"),
    ("2025-05-12T23:00", "2025-05-12T23:00:00Z"),
    ("2025-05-12T23:00Z", "2025-05-12T23:00:00Z"),
])
def test_offsets_are_normalized_to_utc(text, utc):
    assert parse_time(text) == at(utc)
    assert format_time(parse_time(text)) == utc


def test_the_issue_case_a_run_late_on_the_12th_in_new_york_is_after_23_utc():
    assert parse_time("2025-05-12T20:27:36-04:00") >= parse_time("2025-05-12T23:00:00Z")
    assert "2025-05-12T20:27:36-04:00" < "2025-05-12T23:00:00Z"  # what text comparison said


def test_fractional_seconds_are_kept_exactly():
    a, b = parse_time("2025-05-12T23:00:00.0000001Z"), parse_time("2025-05-12T23:00:00.0000002Z")
    assert a < b and a > parse_time("2025-05-12T23:00:00Z")
    assert parse_time("2025-05-12T23:00:00.500Z") == parse_time("2025-05-12T23:00:00,5Z")
    assert format_time(a) == "2025-05-12T23:00:00.0000001Z"


@pytest.mark.parametrize("text", [
    "yesterday", "5/1/2025", "", " 2025-05-12", "2025-05-12 ", "2025-05-12\n", "2025-5-12",
    "2025-02-30", "2025-05-12T24:00", "2025-05-12T23:59:60Z", "2025-05-12T23:00+24:00",
    "2025-05-12T23:00+02:60", "2025-05-12Z", "2025-05-12T23", "2025-05-12T23:00:00.Z",
    "20250512", "2025-W20", "２０２５-05-12", "0000-01-01", "0001-01-01T00:00+01:00",
    "9999-12-31T23:00-01:00", "now", "2025-05-12T23:00:00Z[UTC]",
])
def test_anything_else_is_refused_naming_the_accepted_forms(text):
    with pytest.raises(cas.InvalidArgument) as info:
        parse_time(text, "since")
    e = info.value
    assert e.reason == "INVALID_TIME" and e.fields["accepted"] == list(FORMS)
    assert e.message.startswith(f"since: {text!r} is not a time; accepted: 2025-05-12 ")
    assert "\n" not in e.message and time_or_none(text) is None


@pytest.mark.parametrize("value", [None, 20250512, b"2025-05-12", ["2025-05-12"]])
def test_a_time_is_text(value):
    with pytest.raises(cas.InvalidArgument):
        parse_time(value)


@given(st.text())
def test_the_parser_raises_only_invalid_argument_on_any_text(text):
    try:
        parse_time(text)
    except cas.InvalidArgument as exc:
        assert exc.reason == "INVALID_TIME"


INSTANTS = st.datetimes(min_value=datetime.datetime(2, 1, 1),
                        max_value=datetime.datetime(9998, 12, 31))
OFFSETS = st.integers(-(23 * 60 + 59), 23 * 60 + 59)  # minutes east of UTC
DIGITS = st.from_regex(r"[0-9]{0,12}", fullmatch=True)


def written(when: datetime.datetime, minutes: int, digits: str, style: int) -> str:
    """`when` (naive UTC) written at an offset of `minutes`, in one of the offset styles."""
    local = when + datetime.timedelta(minutes=minutes)
    sign = "+" if minutes >= 0 else "-"
    h, m = divmod(abs(minutes), 60)
    offset = [f"{sign}{h:02d}:{m:02d}", f"{sign}{h:02d}{m:02d}",
              "Z" if minutes == 0 else f"{sign}{h:02d}:{m:02d}"][style]
    return local.strftime("%Y-%m-%dT%H:%M:%S").zfill(19) + (f".{digits}" if digits else "") + offset


@given(INSTANTS.map(lambda d: d.replace(microsecond=0)), OFFSETS, OFFSETS, DIGITS,
       st.integers(0, 2), st.integers(0, 2))
def test_any_offset_form_of_the_same_instant_compares_equal(when, m1, m2, digits, s1, s2):
    a = parse_time(written(when, m1, digits, s1))
    b = parse_time(written(when, m2, digits + "000", s2))
    assert a == b and format_time(a) == format_time(b)
    assert parse_time(format_time(a)) == a  # the canonical form reads back


@given(INSTANTS, DIGITS, INSTANTS, DIGITS)
def test_instants_order_as_the_times_they_name(d1, f1, d2, f2):
    t1, t2 = (d.replace(microsecond=0).isoformat() for d in (d1, d2))
    a, b = parse_time(f"{t1}.{f1}Z" if f1 else t1), parse_time(f"{t2}.{f2}Z" if f2 else t2)

    def exact(text_time, digits):
        seconds = (datetime.datetime.fromisoformat(text_time) - datetime.datetime(1970, 1, 1))
        return seconds // datetime.timedelta(seconds=1) + Fraction(f"0.{digits or 0}")
    assert (a < b) == (exact(t1, f1) < exact(t2, f2))
    assert (a == b) == (exact(t1, f1) == exact(t2, f2))
