"""The case codec: a case's canonical bytes and id however it is given, forged encodings
refused, and cases read from JSON Lines (strict, lazily, each refusal naming its line)."""

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cas.digest import digest_of
from cas.errors import InvalidArgument, InvalidJSONValue, UnsupportedFormat
from cas.format import encoding
from cas.format.cases import EncodedCase, encode_case, read_cases_jsonl
from cas.format.records import Case

CASE = {"input": {"task": "ls", "n": 2}, "output": "a b", "person": "user-1",
        "steps": [{"type": "tool_call", "tool_name": "ls", "arguments": {}}]}


def test_a_case_is_its_canonical_bytes_and_their_digest_however_given():
    from_dict = encode_case(CASE)
    assert from_dict.data == encoding.encode(Case(**CASE))
    assert from_dict.case_id == digest_of("case", from_dict.data)
    assert from_dict.person == "user-1"
    assert encode_case(Case(**CASE)) == from_dict
    assert encode_case(dict(reversed(list(CASE.items())))) == from_dict  # key order is no matter
    assert encode_case(from_dict) is from_dict  # one this codec made is trusted as it is
    hand_made = EncodedCase(from_dict.case_id, from_dict.data, "user-1")
    assert encode_case(hand_made) == from_dict  # one made by hand is checked, then accepted


@pytest.mark.parametrize("forged", [
    lambda e: EncodedCase(digest_of("case", b"other"), e.data, e.person),   # another id
    lambda e: EncodedCase(e.case_id, e.data + b" ", e.person),               # not canonical
    lambda e: EncodedCase(e.case_id, e.data, "someone else"),                # another person
    lambda e: EncodedCase(e.case_id, b"[1]", e.person),                      # no case at all
    lambda e: EncodedCase(e.case_id, e.data.decode(), e.person),             # not bytes
])
def test_a_forged_encoded_case_is_refused(forged):
    with pytest.raises(InvalidArgument):
        encode_case(forged(encode_case(CASE)))


@pytest.mark.parametrize("item, message", [
    ({"steps": {}}, "not a case"),
    ({"input": 1, "surprise": True}, "not a case"),
    (Case(steps="not a list"), "not a case"),
    (["input"], "a case must be a dict or cas.Case, not list"),
    ('{"input": 1}', "a case must be a dict or cas.Case, not str"),
])
def test_what_is_no_case_is_refused(item, message):
    with pytest.raises(InvalidArgument, match=message):
        encode_case(item)


def test_a_case_of_another_format_or_with_a_value_json_cannot_carry_is_refused():
    with pytest.raises(UnsupportedFormat):
        encode_case({"format": 2, "input": 1})
    with pytest.raises(InvalidJSONValue) as info:
        encode_case({"input": {"x": float("nan")}})
    assert info.value.path == "$.input.x"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["input", "output", "tenant"]),
                                st.text(max_size=10)), max_size=8))
def test_jsonl_gives_what_encode_case_gives_line_by_line(cases):
    import json
    lines = b"".join(json.dumps(c).encode() + b"\n" for c in cases)
    assert list(read_cases_jsonl(io.BytesIO(lines))) == [encode_case(c) for c in cases]


def test_jsonl_skips_blank_lines_and_knows_where_it_is():
    read = read_cases_jsonl([b'{"input": 1}\n', b"\n", b"   \n", b'{"input": 2}\n'], "runs")
    it = iter(read)
    assert next(it) == encode_case({"input": 1}) and (read.line, read.offset) == (1, 0)
    assert next(it) == encode_case({"input": 2}) and (read.line, read.offset) == (4, 18)


@pytest.mark.parametrize("line, where", [
    (b'{"input": NaN}\n', "cases.jsonl line 2: "),
    (b'{"input": 1, "surprise": 2}\n', "cases.jsonl line 2: "),
    (b'{"format": 2}\n', "cases.jsonl line 2: "),
    (b"[" * 200 + b"]" * 200 + b"\n", "cases.jsonl line 2: "),  # too deep: the checked path
])
def test_a_bad_line_is_refused_with_its_number(line, where):
    with pytest.raises(InvalidArgument if b"format" not in line else UnsupportedFormat) as info:
        list(read_cases_jsonl(io.BytesIO(b'{"input": 0}\n' + line), "cases.jsonl"))
    assert info.value.message.startswith(where) and info.value.fields["line"] == 2


def test_what_is_no_stream_of_lines_is_refused_and_the_source_named():
    with pytest.raises(InvalidArgument):
        list(read_cases_jsonl(b'{"input": 1}\n'))
    with pytest.raises(InvalidArgument, match="source names the input"):
        read_cases_jsonl(io.BytesIO(b""), source=7)
