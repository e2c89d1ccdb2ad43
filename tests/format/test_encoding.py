"""Canonical encoding (docs/format.md section 2): checked against an independent reference
encoder written here from the rules, not from msgspec."""

import math
import random
import struct
from decimal import Decimal

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cas.errors import CasError, CorruptData, InvalidArgument, InvalidJSONValue
from cas.format import encoding
from cas.format.records import Case

SETTINGS = settings(max_examples=150, deadline=None)


# -- the reference encoder ----------------------------------------------------------------
def ref_float(x: float) -> str:
    """Rule 6: the shortest round-trip digits (repr's), fixed notation when the decimal exponent
    e of the first digit satisfies -5 <= e < 16 (always with a fraction), else d.ddde<e>."""
    r = repr(x)
    sign = "-" if r.startswith("-") else ""
    d = Decimal(r.lstrip("-"))
    if d == 0:
        return sign + "0.0"
    t = d.normalize().as_tuple()  # repr's digits without trailing zeros, and their exponent
    digits = "".join(map(str, t.digits))
    e = len(digits) - 1 + t.exponent
    if -5 <= e < 16:
        if e >= 0:
            ip = digits[:e + 1].ljust(e + 1, "0")
            fp = digits[e + 1:] or "0"
        else:
            ip, fp = "0", "0" * (-e - 1) + digits
        return f"{sign}{ip}.{fp}"
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{e}"


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
            "\t": "\\t"}


def ref_str(s: str) -> str:
    """Rule 4: only these escapes; other controls as \\u00xx (lowercase); all else raw."""
    out = []
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def ref_encode(v) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is int:
        return str(v)
    if type(v) is float:
        return ref_float(v)
    if type(v) is str:
        return ref_str(v)
    if type(v) in (list, tuple):
        return "[" + ",".join(ref_encode(x) for x in v) + "]"
    if type(v) is dict:
        # sorted by code point (Python's str order), which equals UTF-8 byte order
        return "{" + ",".join(ref_str(k) + ":" + ref_encode(v[k]) for k in sorted(v)) + "}"
    raise TypeError(type(v))


def test_reference_float_rule_on_the_documented_examples():
    examples = [(1.0, "1.0"), (0.1, "0.1"), (1234.5, "1234.5"), (0.00001, "0.00001"),
                (9007199254740992.0, "9007199254740992.0"), (1e16, "1e16"), (1.5e-7, "1.5e-7"),
                (1e-6, "1e-6"), (1.2345e22, "1.2345e22"), (-0.0, "-0.0"), (0.0, "0.0")]
    for x, text in examples:
        assert ref_float(x) == text, x


# -- values -------------------------------------------------------------------------------
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
json_leaves = (st.none() | st.booleans() | st.integers()
               | st.integers(min_value=-2**200, max_value=2**200) | finite_floats | st.text())
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=6),
    max_leaves=40)


def reorder(v, rnd: random.Random):
    """The same value with every object's members in a random order."""
    if type(v) is dict:
        items = list(v.items())
        rnd.shuffle(items)
        return {k: reorder(x, rnd) for k, x in items}
    if type(v) is list:
        return [reorder(x, rnd) for x in v]
    return v


def same(a, b) -> bool:
    """Equality that tells 1 from 1.0 and 0.0 from -0.0."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if type(a) is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@SETTINGS
@given(json_values, st.randoms(use_true_random=False))
def test_key_order_does_not_change_the_bytes(value, rnd):
    encoding.check_json(value)
    assert encoding.encode(reorder(value, rnd)) == encoding.encode(value)


@SETTINGS
@given(json_values)
def test_encode_matches_the_reference_encoder(value):
    assert encoding.encode(value) == ref_encode(value).encode("utf-8")


@SETTINGS
@given(json_values)
def test_canonical_bytes_decode_to_the_same_value_and_reencode_identically(value):
    data = encoding.encode(value)
    back = encoding.decode_json(data)
    assert same(back, value)
    assert encoding.encode(back) == data


@SETTINGS
@given(json_values)
def test_check_json_accepts_every_json_value(value):
    encoding.check_json(value)


def test_members_sorted_by_code_point_not_utf16():
    # U+FFFF sorts before U+10000 by code point (and UTF-8), but after it in UTF-16 order.
    value = {"\U00010000": 2, "\uffff": 1, "b": 3, "B": 4, "é": 5, "": 0, "a": {"z": 1, "y": 2}}
    assert encoding.encode(value) == \
        '{"":0,"B":4,"a":{"y":2,"z":1},"b":3,"é":5,"\uffff":1,"\U00010000":2}'.encode()


def test_no_whitespace_and_arrays_keep_order():
    assert encoding.encode({"b": [3, 1, 2], "a": {"c": None}}) == b'{"a":{"c":null},"b":[3,1,2]}'
    assert encoding.encode([True, False, None]) == b"[true,false,null]"
    assert encoding.encode((1, "x")) == b'[1,"x"]'


# -- strings ------------------------------------------------------------------------------
@pytest.mark.parametrize("code", range(0x20))
def test_control_characters(code):
    named = {0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}
    expected = named.get(code, f"\\u{code:04x}")
    assert encoding.encode(chr(code)) == ('"' + expected + '"').encode()


def test_string_escapes():
    cases = {'"': '"\\""', "\\": '"\\\\"', "/": '"/"', "\x7f": '"\x7f"', "\x1f": '"\\u001f"',
             "\x1b": '"\\u001b"', "\x80": '"\x80"', "é": '"é"', "\u2028\u2029": '"\u2028\u2029"',
             "😀": '"😀"', "\ufeff": '"\ufeff"', "a\x00b": '"a\\u0000b"', "": '""'}
    for s, expected in cases.items():
        assert encoding.encode(s) == expected.encode("utf-8"), repr(s)
    assert encoding.encode("😀") == b'"\xf0\x9f\x98\x80"'  # raw UTF-8, never \ud83d\ude00


@SETTINGS
@given(st.text())
@example("\x00\x1f\x7f\"\\/\b\f\n\r\t\u2028é😀")
def test_strings_match_the_reference(s):
    assert encoding.encode(s) == ref_str(s).encode("utf-8")
    assert encoding.encode({s: s}) == ("{" + ref_str(s) + ":" + ref_str(s) + "}").encode("utf-8")


# -- numbers ------------------------------------------------------------------------------
BOUNDARY_FLOATS = [
    0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 100.0, 1e15, 1e16, 9999999999999998.0, 9007199254740992.0,
    1e-5, 1e-6, 0.00001, 0.000012345, 9.999999999999999e-6, 1.5e-7, 1e21, 1e22, 1e23, 1.2345e22,
    123456789012345680.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e308,
    -1e-300, 0.3, 2.0 / 3.0, 1e100, 12345678.9, 1e-4, 1e-7,
]


@pytest.mark.parametrize("x", BOUNDARY_FLOATS, ids=repr)
def test_float_boundaries(x):
    text = encoding.encode(x).decode()
    assert text == ref_float(x)
    assert float(text) == x and math.copysign(1, float(text)) == math.copysign(1, x)


def test_float_examples_exactly():
    assert encoding.encode([1e16, 1e15, 1.5e-7, 1e-6, 1e-5, 2.5e-5, 1e22, 5e-324, -0.0]) == \
        b"[1e16,1000000000000000.0,1.5e-7,1e-6,0.00001,0.000025,1e22,5e-324,-0.0]"


@settings(max_examples=2000, deadline=None)
@given(finite_floats)
def test_floats_follow_the_rule(x):
    text = encoding.encode(x).decode()
    assert text == ref_float(x)
    assert float(text) == x


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 2**64 - 1))
def test_floats_from_random_bit_patterns_follow_the_rule(bits):
    x = struct.unpack(">d", bits.to_bytes(8, "big"))[0]
    if math.isfinite(x):
        assert encoding.encode(x).decode() == ref_float(x)


def test_float_rule_on_a_sweep_of_random_doubles():
    rnd = random.Random(20261130)
    for _ in range(100_000):
        x = struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(x):
            assert encoding.encode(x).decode() == ref_float(x), repr(x)
    for k in range(-325, 309):
        for m in ("1", "9.999999999999999", "1.5", "5"):
            x = float(f"{m}e{k}")
            if math.isfinite(x) and x:
                for y in (x, math.nextafter(x, 0.0), math.nextafter(x, math.inf), -x):
                    assert encoding.encode(y).decode() == ref_float(y), repr(y)


@SETTINGS
@given(st.integers(min_value=-2**300, max_value=2**300))
def test_integers_any_size(n):
    assert encoding.encode(n) == str(n).encode()
    assert encoding.decode_json(str(n).encode()) == n


@pytest.mark.parametrize("text, accepted", [
    ("9" * 4300, True),             # 4300 digits: the limit
    ("-" + "9" * 4299, True),       # a negative integer: 4300 characters, sign included
    ("-" + "9" * 4300, False),      # the sign counts (section 2, rule 5): cas's reader refuses
    ("9" * 4301, False),
])
def test_integer_digit_limit_counts_the_sign(text, accepted):
    """Section 2 rule 5: an integer's text has at most 4300 characters, its `-` included.
    Reader and writer agree at the boundary: what one accepts the other does."""
    value = -int(text[1:]) if text[0] == "-" else int(text[:-1]) * 10 + int(text[-1])
    if accepted:
        assert encoding.decode_json(text.encode()) == value
        encoding.check_json({"n": value})
        assert encoding.encode(value) == text.encode()
    else:
        with pytest.raises(InvalidJSONValue) as info:
            encoding.decode_json(b'{"n": ' + text.encode() + b"}")
        assert info.value.path == "$.n" and "4299 after a '-'" in info.value.message
        with pytest.raises(InvalidJSONValue) as info:
            encoding.check_json({"n": value})
        assert info.value.path == "$.n"


def test_ints_and_floats_stay_distinct():
    assert encoding.encode(1) == b"1"
    assert encoding.encode(1.0) == b"1.0"
    assert encoding.encode(True) == b"true"
    for text, canonical in [(b"1", b"1"), (b"1.0", b"1.0"), (b"1e2", b"100.0"),
                            (b"1E2", b"100.0"), (b"-0", b"0"), (b"-0.0", b"-0.0"),
                            (b"0.10", b"0.1"), (b"1.5E-7", b"1.5e-7"),
                            (b"100000000000000000000", b"100000000000000000000"),
                            (b"1e+16", b"1e16"), (b"0.000001", b"1e-6")]:
        assert encoding.encode(encoding.decode_json(text)) == canonical, text


# -- check_json: what JSON cannot carry -----------------------------------------------------
def refused(value) -> InvalidJSONValue:
    with pytest.raises(InvalidJSONValue) as info:
        encoding.check_json(value)
    err = info.value
    assert isinstance(err, InvalidArgument) and err.code == "INVALID_ARGUMENT"
    assert err.reason == "INVALID_JSON_VALUE"
    assert err.fields["path"] == err.path and str(err).startswith(err.path + ": ")
    return err


def steps_with(bad):
    return {"input": "x",
            "steps": [{}, {"a": 1}, {"b": [1, 2]}, {"tool_name": "t", "arguments": bad}]}


@pytest.mark.parametrize("bad", [
    float("nan"), float("inf"), float("-inf"), {1, 2}, frozenset(), b"bytes", bytearray(b"x"),
    object(), Decimal("1.5"), 1j, range(3), type, print,
], ids=lambda v: repr(v).split(" at 0x")[0])  # no address: every xdist worker collects one id
def test_non_json_values_are_refused_with_their_path(bad):
    assert refused(steps_with(bad)).path == "$.steps[3].arguments"
    assert refused(bad).path == "$"
    assert refused([0, [1, bad]]).path == "$[1][1]"
    assert refused({"outer": {"inner": [bad]}}).path == "$.outer.inner[0]"


@pytest.mark.parametrize("key", [1, 1.5, None, True, (1, 2), b"k", frozenset()], ids=repr)
def test_non_string_keys_are_refused(key):
    err = refused(steps_with({key: 1}))
    assert err.path == "$.steps[3].arguments"  # the object holding the key
    assert refused({"ok": 1, key: 2}).path == "$"


@pytest.mark.parametrize("text", [chr(0xD800), "a" + chr(0xDFFF) + "b", chr(0xD83D),
                                  "x" + chr(0xDC00) + chr(0xD800)], ids=ascii)
def test_lone_surrogates_are_refused(text):
    assert refused(steps_with(text)).path == "$.steps[3].arguments"
    assert refused(steps_with({"k": [text]})).path == "$.steps[3].arguments.k[0]"
    assert refused(steps_with({text: 1})).path == "$.steps[3].arguments"


def test_paths_name_keys_that_are_not_identifiers():
    assert refused({"a b": {"c": float("nan")}}).path == "$['a b'].c"
    assert refused({"tool-name": [float("inf")]}).path == "$['tool-name'][0]"


def test_the_first_offender_is_named():
    assert refused({"a": [1, float("nan")], "b": {1: 2}}).path == "$.a[1]"


def test_records_are_checked_field_by_field():
    err = refused(Case(input={"q": "x"},
                       steps=[{"type": "tool_call", "arguments": {"x": float("nan")}}]))
    assert err.path == "$.steps[0].arguments.x"
    assert refused(Case(metadata={"s": {1}})).path == "$.metadata.s"
    encoding.check_json(Case(input={"q": "x"}, outcome={"score": 0.5}))


def test_encode_writes_nan_as_null_so_callers_must_check_first():
    # The reason check_json exists: the encoder alone would store NaN as null silently.
    assert encoding.encode(float("nan")) == b"null"


# -- decoding -----------------------------------------------------------------------------
@pytest.mark.parametrize("text", [b"NaN", b"Infinity", b"-Infinity", b"[1,]", b'{"a":1,}',
                                  b"[1] // c", b"/* c */ 1", b"01", b"+1", b".5", b"1.", b"'a'",
                                  b'"\\ud800"', b'"a\tb"', b"", b"[", b"\xff", b"1e400", b"tru"])
def test_decode_json_is_strict(text):
    with pytest.raises(InvalidArgument):
        encoding.decode_json(text)


def test_decode_json_last_duplicate_key_wins():
    assert encoding.decode_json(b'{"a": 1, "a": 2}') == {"a": 2}
    assert encoding.encode(encoding.decode_json(b'{"b":0,"a":1,"a":[2]}')) == b'{"a":[2],"b":0}'


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=60))
def test_decoders_raise_only_cas_errors(data):
    try:
        encoding.decode_json(data)
    except CasError:
        pass
    try:
        encoding.decode(data, Case)
    except CorruptData:
        pass


def test_decode_refuses_unknown_fields_and_wrong_types():
    with pytest.raises(CorruptData):
        encoding.decode(b'{"kind":"case","format":1,"surprise":1}', Case)
    with pytest.raises(CorruptData):
        encoding.decode(b'{"kind":"case","format":1,"steps":{}}', Case)
    assert encoding.decode(b'{"kind":"case","format":1,"input":1}', Case) == Case(input=1)


def test_records_encode_with_every_field_sorted():
    assert encoding.encode(Case(input="hello")) == (
        b'{"format":1,"input":"hello","kind":"case","metadata":{},"outcome":null,"output":null,'
        b'"person":null,"run_id":null,"started_at":null,"steps":[],"tenant":null,"withheld":[]}')
    assert encoding.to_builtins(Case(input=1))["kind"] == "case"
    assert msgspec.json.decode(encoding.encode(Case(input=1)), type=Case) == Case(input=1)
