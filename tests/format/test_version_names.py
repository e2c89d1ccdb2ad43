"""Version names (cas/format/version_names.py): dataset names, version numbers, `NAME@N`, the pin
`NAME@N#b3:<hex>` and `[NAME@]B`; parse and format are inverse, and the parser raises only
its documented error on any text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.format.version_names import (MAX_VERSION, Pin, VersionName, as_pin, check_dataset_name,
                                      check_version_number, format_version_name, parse_version_name)

ZERO = "b3:" + "0" * 64
NAMES = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,20}", fullmatch=True)
DIGESTS = st.binary(min_size=32, max_size=32).map(lambda raw: "b3:" + raw.hex())
VERSION_NAMES = st.builds(VersionName, NAMES, st.integers(1, MAX_VERSION),
                          st.none() | DIGESTS)
MODES = st.sampled_from([{}, {"pin": True}, {"pin": False}, {"dataset": "evals"},
                         {"dataset": "evals", "pin": False}])


# -- dataset names and version numbers ------------------------------------------------------
@pytest.mark.parametrize("name", ["ok", "a" * 128, "0x", "a.b_c-d"])
def test_valid_dataset_names(name):
    assert check_dataset_name(name) == name


@pytest.mark.parametrize("name", ["", "A", "a" * 129, "_a", "a/b", "a..b", "a b", "\u00e9"])
def test_invalid_dataset_names(name):
    with pytest.raises(cas.InvalidArgument) as info:
        check_dataset_name(name)
    assert "a-z, 0-9" in info.value.message and info.value.fields["name"] == name


@pytest.mark.parametrize("name", [None, 3, b"evals", ["evals"]])
def test_a_dataset_name_is_a_string(name):
    with pytest.raises(cas.InvalidArgument) as info:
        check_dataset_name(name)
    assert "a dataset name is a string" in info.value.message


@pytest.mark.parametrize("number", [1, 7, MAX_VERSION])
def test_valid_version_numbers(number):
    assert check_version_number(number) == number


@pytest.mark.parametrize("number, says", [
    (0, "must be a positive integer, not 0"), (-1, "positive"), (True, "positive"),
    (1.0, "positive"), ("1", "positive"), (MAX_VERSION + 1, "at most 10 digits")])
def test_invalid_version_numbers(number, says):
    with pytest.raises(cas.InvalidArgument) as info:
        check_version_number(number, "base")
    assert info.value.message.startswith("base must be a") and says in info.value.message


# -- NAME@N, the pin and [NAME@]B -----------------------------------------------------------
@given(VERSION_NAMES)
def test_format_then_parse_is_the_identity(name):
    assert parse_version_name(format_version_name(name)) == name


@given(VERSION_NAMES, st.integers(1, 3))
def test_parse_then_format_gives_the_one_spelling(name, zeros):
    text = format_version_name(name)
    assert format_version_name(parse_version_name(text)) == text
    if name.content_digest is None:  # leading zeros are read, and dropped
        padded = f"{name.dataset}@{'0' * zeros}{name.version}"
        assert format_version_name(parse_version_name(padded)) == text


@given(st.text(max_size=80), MODES)
@settings(max_examples=500)
def test_the_parser_raises_only_invalid_argument(text, mode):
    try:
        name = parse_version_name(text, **mode)
    except cas.InvalidArgument as exc:
        assert exc.reason in ("INVALID_VERSION_NAME", None)
        if exc.reason == "INVALID_VERSION_NAME":
            assert exc.message.startswith(exc.fields["problem"] + "; expected ")
        return
    assert 1 <= name.version <= MAX_VERSION and check_dataset_name(name.dataset)
    assert (name.content_digest is not None) == ("#" in text)


@pytest.mark.parametrize("text, mode, expected", [
    ("evals@3", {}, VersionName("evals", 3)),
    ("evals@003", {}, VersionName("evals", 3)),
    (f"evals@3#{ZERO.upper().replace('B3', 'b3')}", {}, VersionName("evals", 3, ZERO)),
    (f"evals@3#{ZERO}", {"pin": True}, VersionName("evals", 3, ZERO)),
    ("7", {"dataset": "evals"}, VersionName("evals", 7)),
    ("other@7", {"dataset": "evals"}, VersionName("other", 7)),
    ("a@b@7", {}, None),  # NAME is a dataset name: never holds an @
])
def test_accepted_forms(text, mode, expected):
    if expected is None:
        with pytest.raises(cas.InvalidArgument) as info:
            parse_version_name(text, **mode)
        assert info.value.message.startswith("invalid dataset name 'a@b'")
    else:
        assert parse_version_name(text, **mode) == expected


@pytest.mark.parametrize("text, mode, problem, forms", [
    ("evals", {}, "'evals' names no version (NAME@N)",
     "NAME@N or the pin NAME@N#b3:<64 hex digits>"),
    ("@3", {}, "'@3' names no dataset", "NAME@N or the pin NAME@N#b3:<64 hex digits>"),
    ("evals@latest", {"pin": False}, "'latest' is not a version number", "NAME@N"),
    ("evals@", {"pin": False}, "'' is not a version number", "NAME@N"),
    ("evals@0", {}, "'0' is not a version number", "NAME@N or the pin NAME@N#b3:<64 hex digits>"),
    ("evals@\u00b2", {}, "'\u00b2' is not a version number",
     "NAME@N or the pin NAME@N#b3:<64 hex digits>"),
    ("evals@10000000000", {}, "'10000000000' is not a version number",
     "NAME@N or the pin NAME@N#b3:<64 hex digits>"),
    (f"evals@1#{ZERO}", {"pin": False}, f"'1#{ZERO}' is not a version number", "NAME@N"),
    (f"evals@01#{ZERO}", {}, "'01' is not a version number",
     "NAME@N or the pin NAME@N#b3:<64 hex digits>"),
    ("evals@1", {"pin": True}, "'evals@1' names no content digest (#b3:...)",
     "the pin NAME@N#b3:<64 hex digits>"),
    ("latest", {"dataset": "evals", "pin": False}, "'latest' is not a version number",
     "N or NAME@N"),
    (3, {}, "3 is not a version name", "NAME@N or the pin NAME@N#b3:<64 hex digits>"),
])
def test_refusals_name_the_problem_and_the_accepted_forms(text, mode, problem, forms):
    with pytest.raises(cas.InvalidArgument) as info:
        parse_version_name(text, **mode)
    assert info.value.reason == "INVALID_VERSION_NAME"
    assert info.value.fields["problem"] == problem
    assert info.value.message == f"{problem}; expected {forms}"


def test_a_bad_digest_is_refused_by_the_digest_rule():
    with pytest.raises(cas.InvalidArgument) as info:
        parse_version_name("evals@1#b3:00")
    assert info.value.reason is None and "is not a digest" in info.value.message


# -- pins -------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["evals@1", "evals#b3:00", "@1#" + ZERO, "evals@0#" + ZERO,
                                  "evals@01#" + ZERO, "Evals@1#" + ZERO, "evals@x#" + ZERO,
                                  "evals@1#" + ZERO[:-1], "", "../x@1#" + ZERO])
def test_malformed_pins_are_refused_naming_the_form(text):
    with pytest.raises(cas.InvalidArgument) as info:
        cas.Pin.parse(text)
    assert info.value.reason == "INVALID_PIN"
    assert "DATASET@VERSION#b3:<64 hex digits>" in info.value.message


@given(st.text(max_size=120))
@settings(max_examples=300)
def test_pin_parse_raises_only_its_error(text):
    try:
        pin = cas.Pin.parse(text)
    except cas.InvalidArgument as exc:
        assert exc.reason == "INVALID_PIN"
        return
    assert cas.Pin.parse(str(pin)) == pin


@given(NAMES, st.integers(1, MAX_VERSION), DIGESTS)
def test_pin_format_parse_round_trip(name, version, digest):
    pin = cas.Pin(name, version, digest)
    assert cas.Pin.parse(str(pin)) == pin
    assert str(pin) == format_version_name(VersionName(name, version, digest))


def test_a_pin_is_read_with_surrounding_space_and_uppercase_hex():
    assert Pin.parse(f"  evals@3#{ZERO.replace('b3', 'B3')}\n") == Pin("evals", 3, ZERO)


def test_as_pin_takes_a_pin_or_its_string():
    pin = Pin("evals", 3, ZERO)
    assert as_pin(pin) is pin and as_pin(str(pin)) == pin
    for bad in (Pin("evals", "3", ZERO), 3, None, ("evals", 3)):  # type: ignore[arg-type]
        with pytest.raises(cas.InvalidArgument) as info:
            as_pin(bad)
        assert info.value.reason == "INVALID_PIN"
