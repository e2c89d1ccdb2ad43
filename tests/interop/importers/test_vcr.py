"""The vcr container (cas/interop/importers/vcr.py): cassettes read as exchanges, bodies as
JSON, text or a stream of events, exchanges grouped into conversations."""

from __future__ import annotations

import json

import pytest

import cas
from cas.interop.importers import vcr

CASSETTE = {"interactions": [
    {"request": {"uri": "https://api.example/v1/chat/completions", "method": "POST",
                 "body": json.dumps({"messages": [{"role": "user", "content": "hi"}]})},
     "response": {"status": {"code": 200}, "body": {"string": json.dumps({"id": "r1"})}}},
    {"request": {"uri": "https://api.example/v1/chat/completions", "method": "POST",
                 "body": json.dumps({"messages": [{"role": "user", "content": "hi"},
                                                  {"role": "assistant", "content": "yo"},
                                                  {"role": "user", "content": "more"}]})},
     "response": {"status": {"code": 200},
                  "body": {"string": 'data: {"a": 1}\n\ndata: {"a": 2}\n\ndata: [DONE]\n'}}},
    {"request": {"uri": "https://api.example/v1/chat/completions", "method": "POST",
                 "body": json.dumps({"messages": [{"role": "user", "content": "other"}]})},
     "response": {"status": {"code": 400}, "body": {"string": "not json"}}},
]}


def test_a_cassette_is_read_as_exchanges_and_grouped_into_conversations():
    exchanges = vcr.read_cassette(json.dumps(CASSETTE).encode(), "c.json")
    assert [e.status for e in exchanges] == [200, 200, 400]
    assert exchanges[0].response == {"id": "r1"} and not exchanges[0].streamed
    assert exchanges[1].response == [{"a": 1}, {"a": 2}] and exchanges[1].streamed
    assert exchanges[2].response == "not json"
    groups = vcr.conversations(exchanges, lambda request: request["messages"])
    assert [len(g) for g in groups] == [2, 1]  # the third call starts a history of its own


def test_a_yaml_cassette_needs_no_more_than_pyyaml():
    yaml = pytest.importorskip("yaml")  # the vcr extra; the test command installs it
    exchanges = vcr.read_cassette(yaml.safe_dump(CASSETTE).encode(), "c.yaml")
    assert len(exchanges) == 3
    with pytest.raises(cas.InvalidArgument) as info:
        vcr.read_cassette(b"just: text\n", "c.yaml")
    assert info.value.reason == "NOT_THIS_FORMAT"
