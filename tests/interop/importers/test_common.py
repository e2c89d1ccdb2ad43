"""What every importer shares (cas/interop/importers/common.py): reading documents, fields by
path, tool arguments kept when they are not JSON, replies joined to their calls, run ids, tenant
and person."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.interop.importers.common import (CallJoiner, Options, derived_run_id, each_document,
                                          finish_run, lookup, parse_documents, tool_arguments)

FAST = settings(max_examples=60, deadline=None)
json_values = st.recursive(st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                           max_leaves=8)


def test_a_file_is_one_document_or_json_lines_of_them():
    assert parse_documents(b'{"a": [1, 2]}', "f") == [{"a": [1, 2]}]
    assert parse_documents(b'{"a": 1}\n\n{"b": 2}\n', "f") == [{"a": 1}, {"b": 2}]
    with pytest.raises(cas.InvalidArgument) as info:
        parse_documents(b'{"a": 1}\n{"b": \n', "f.jsonl")
    assert info.value.message.startswith("f.jsonl line 2: ")
    with pytest.raises(cas.InvalidArgument) as info:
        parse_documents(b'{"a": ', "one.json")
    assert info.value.message.startswith("one.json: ")


def test_an_array_of_documents_is_read_as_its_members():
    is_doc = lambda v: isinstance(v, dict) and "messages" in v  # noqa: E731
    docs = [{"messages": []}, {"messages": [1]}]
    assert each_document([docs], is_doc) == docs
    assert each_document([docs[0], docs[1]], is_doc) == docs
    messages = [{"role": "user"}]  # an array that is itself one document stays whole
    assert each_document([messages], lambda v: isinstance(v, list)) == [messages]


def test_a_field_is_found_by_its_path_or_whole_name():
    doc = {"info": {"task": {"user_id": "mia"}}, "items": [{"id": 7}], "user.id": "u-1"}
    assert lookup(doc, "info.task.user_id") == "mia"
    assert lookup(doc, "items.0.id") == 7
    assert lookup(doc, "user.id") == "u-1"  # a span attribute's name holds dots
    assert lookup(doc, "info.missing.x") is None and lookup(doc, "items.5") is None


@FAST
@given(st.text(max_size=30))
def test_arguments_that_are_not_json_are_kept_verbatim_never_dropped(raw):
    fields = tool_arguments(raw)
    if "arguments" in fields:
        assert raw.strip() == "" or json.loads(raw) == fields["arguments"]
        assert isinstance(fields["arguments"], (dict, list))
    else:
        assert fields["arguments_raw"] == raw and fields["arguments_error"]


def test_arguments_as_the_apis_send_them():
    assert tool_arguments('{"city": "Paris"}') == {"arguments": {"city": "Paris"}}
    assert tool_arguments({"city": "Paris"}) == {"arguments": {"city": "Paris"}}
    assert tool_arguments("") == {"arguments": {}}
    assert tool_arguments(None) == {}
    assert tool_arguments('{"city": "Par') == {
        "arguments_raw": '{"city": "Par',
        "arguments_error": "not JSON: Unterminated string starting at: line 1 column 10 "
                           "(char 9)"}
    assert tool_arguments("5")["arguments_error"] == "JSON, but not an object or an array"


def test_a_reply_joins_the_nearest_preceding_unanswered_call_with_its_id():
    joiner = CallJoiner()
    first, second = {"n": 1}, {"n": 2}
    joiner.call("c", first)
    joiner.call("c", second)  # real logs reuse ids within one conversation
    assert joiner.reply("c") is second
    assert joiner.reply("c") is first
    assert joiner.reply("c") is None  # every call answered: an orphan reply
    assert joiner.reply(None) is None


@FAST
@given(json_values)
def test_run_ids_derive_from_the_formats_ids_or_else_the_content(doc):
    assert derived_run_id("x", "trace-1", None, 2) == "x:trace-1:2"
    assert derived_run_id("x", content=doc) == derived_run_id("x", content=doc)
    assert derived_run_id("x", content=doc).startswith("x:")


def test_tenant_and_person_come_from_flags_or_a_named_field():
    doc = {"org": "acme", "user": {"id": "u-7"}}
    run = finish_run({"run_id": "r"}, Options(tenant_from="org", person_from="user.id"), doc,
                     source="f")
    assert (run["tenant"], run["person"]) == ("acme", "u-7")
    run = finish_run({"run_id": "r"}, Options(tenant="fixed"), doc, source="f")
    assert run["tenant"] == "fixed" and "person" not in run
    with pytest.raises(cas.InvalidArgument) as info:
        finish_run({"run_id": "r"}, Options(tenant_from="nowhere"), doc, source="f.json")
    assert info.value.reason == "TENANT_REQUIRED"
    assert info.value.message == ("f.json: run 'r' has no tenant (no 'nowhere' in it): give "
                                  "--tenant TENANT, or --tenant-from FIELD naming where the "
                                  "format keeps it")
