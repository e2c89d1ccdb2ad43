"""What every importer shares (cas/importers/__init__.py, common.py, vcr.py): reading documents,
tool arguments kept when they are not JSON, replies joined to their calls, run ids, tenant and
person, cassettes, and the refusals of the registry."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
import cas.interop.importers
from cas.interop.importers import vcr
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


def test_unknown_formats_and_containers_are_refused_naming_what_is_accepted():
    with pytest.raises(cas.InvalidArgument) as info:
        cas.interop.importers.convert(b"{}", "csv")
    assert info.value.reason == "UNKNOWN_FORMAT"
    assert info.value.fields["accepted"] == ["auto", *cas.interop.importers.FORMATS]
    with pytest.raises(cas.InvalidArgument) as info:
        cas.interop.importers.convert(b"{}", "openai-chat", container="har")
    assert info.value.reason == "UNKNOWN_CONTAINER" and info.value.fields["accepted"] == ["vcr"]


def test_auto_refuses_what_no_format_reads():
    with pytest.raises(cas.InvalidArgument) as info:
        cas.interop.importers.convert(b'{"hello": "world"}', "auto", source="x.json")
    assert info.value.reason == "FORMAT_UNKNOWN"
    assert info.value.message.startswith("x.json: no import format recognises it; accepted: ")


def test_the_cli_imports_another_format_and_refuses_format_flags_for_native(run, tmp_path):
    assert run("init").exit_code == 0
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps({"messages": [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a b"},
        {"role": "assistant", "content": "a and b"}]}))
    r = run("--json", "runs", "import", "--format", "openai-chat", "--tenant", "acme", str(chat))
    assert r.exit_code == 0, r.output
    imported = json.loads(r.stdout)
    assert len(imported["imported"]) == 1 and imported["unchanged"] == 0
    (run_id,) = imported["imported"]
    steps = json.loads(run("--json", "runs", "show", run_id).stdout)["steps"]
    (call,) = [s for s in steps if s["type"] == "tool_call"]
    assert (call["tool_name"], call["arguments"], call["result"]) == ("ls", {}, "a b")
    again = run("runs", "import", "--format", "openai-chat", "--tenant", "acme", str(chat))
    assert again.stdout == "imported 0 runs (1 already present, unchanged)\n"
    r = run("runs", "import", "--tenant", "acme", str(chat))
    assert (r.exit_code, r.stderr) == (2, "cas: error: --tenant applies to another format's "
                                          "documents; cas's own runs name their tenant and "
                                          "person (give --format)\n")


def test_the_cli_warns_of_tool_calls_hidden_in_native_messages(run, tmp_path):
    assert run("init").exit_code == 0
    native = tmp_path / "runs.jsonl"
    native.write_text(json.dumps({"run_id": "r-1", "tenant": "acme", "steps": [
        {"type": "message", "role": "tool", "tool_call_id": "c1", "content": "x"}]}) + "\n")
    r = run("runs", "import", str(native))
    assert r.exit_code == 0
    assert r.stderr == ("cas: warning: run 'r-1': its message steps hold tool calls that are "
                        "not tool_call steps; import the original with --format openai-chat\n")
    assert r.stdout == "imported 1 runs (0 already present, unchanged)\n"


@pytest.mark.parametrize("folder, name, fmt", [
    ("openai-chat", "otel-contrib__test_chat_completion_tool_calls_with_content.yaml",
     "openai-chat"),
    ("openai-responses",
     "otel-contrib__test_responses_create_captures_tool_call_content_content_mode0.yaml",
     "openai-responses"),
])
def test_a_recording_names_its_tenant_in_its_response_headers(traces, folder, name, fmt):
    """Recorded API traffic keeps the organisation in a response header: --tenant-from
    headers.openai-organization reads it; the run says which format and container it came
    from; and a cassette is detected by the format that reads its calls."""
    data = (traces / folder / name).read_bytes()
    runs = cas.interop.importers.convert(data, fmt, source=name, container="vcr",
                                 tenant_from="headers.openai-organization")
    assert runs and all(r["tenant"] == "test_openai_org_id" for r in runs)
    assert runs[0]["metadata"]["import"] == {"format": fmt, "container": "vcr"}
    assert cas.interop.importers.detect(data, name, container="vcr") == fmt


def test_auto_reads_a_cassette_whose_tool_called_another_api(traces):
    """An agent's cassette on the Responses API whose tool itself called Chat Completions is
    the Responses format's: it reads most of the calls."""
    name = "langsmith-sdk__test_openai_agents_test_wrap_openai_nests_under_agent_trace.yaml"
    data = (traces / "openai-responses" / name).read_bytes()
    assert cas.interop.importers.detect(data, name, container="vcr") == "openai-responses"
    runs = cas.interop.importers.convert(data, "auto", source=name, container="vcr", tenant="t")
    assert runs[0]["metadata"]["import"]["format"] == "openai-responses"


FOLDERS = {"openai-chat": "openai-chat", "tau2": "openai-chat",
           "anthropic-messages": "anthropic", "openai-responses": "openai-responses",
           "otel-genai": "otel-genai", "openinference": "openinference",
           "inspect-ai": "inspect", "langsmith": "langsmith"}


def test_auto_names_the_format_of_every_real_sample(traces):
    """Every trace file in ../shared/traces/ is detected as its folder's format (cassettes as
    the format of the API they recorded), and converts through `auto` to the same runs."""
    seen = 0
    for folder, fmt in FOLDERS.items():
        for path in sorted((traces / folder).iterdir()):
            container = "vcr" if path.suffix == ".yaml" else None
            data = path.read_bytes()
            assert cas.interop.importers.detect(data, path.name, container) == fmt, path.name
            named = cas.interop.importers.convert(data, fmt, source=path.name, container=container,
                                          tenant="t")
            assert cas.interop.importers.convert(data, "auto", source=path.name, container=container,
                                         tenant="t") == named
            seen += 1
    assert seen == 55  # every file SOURCES.md lists


def test_auto_refuses_a_bare_conversation_two_formats_read():
    data = json.dumps([{"role": "user", "content": "hi"},
                       {"role": "assistant", "content": "hello"}]).encode()
    with pytest.raises(cas.InvalidArgument) as info:
        cas.interop.importers.convert(data, "auto", source="chat.json", tenant="t")
    assert info.value.reason == "FORMAT_AMBIGUOUS"
    assert info.value.fields["candidates"] == ["openai-chat", "anthropic"]
    assert info.value.message == ("chat.json: it could be any of openai-chat, anthropic; name "
                                  "one with --format")


_JUNK = [None, 0, -1, 1.5, "", "x", [], {}, [1], {"a": 1}, True, "null", "{", "[]"]


def _mutated(value, rnd):
    """`value` with one member deleted, replaced by junk of another type, or mutated deeper."""
    if isinstance(value, (dict, list)) and value:
        value = dict(value) if isinstance(value, dict) else list(value)
        key = rnd.choice(list(value)) if isinstance(value, dict) else rnd.randrange(len(value))
        roll = rnd.random()
        if roll < 0.3:
            del value[key]
        elif roll < 0.55:
            value[key] = rnd.choice(_JUNK)
        else:
            value[key] = _mutated(value[key], rnd)
        return value
    return rnd.choice(_JUNK)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(FOLDERS)), st.randoms(use_true_random=False),
       st.integers(1, 4))
def test_a_damaged_real_document_converts_or_is_refused_never_crashes(traces, folder, rnd,
                                                                      damage):
    """Real samples with members deleted or of the wrong type (what a truncated export or a
    format's other version gives): every importer converts them to valid runs or refuses them
    with a CasError, never with a Python exception."""
    from cas.repo.runs import parse_run
    files = sorted(p for p in (traces / folder).iterdir() if p.suffix == ".json")
    if not files:
        return
    document = json.loads(rnd.choice(files).read_bytes())
    for _ in range(damage):
        document = _mutated(document, rnd)
    try:
        runs = cas.interop.importers.convert(json.dumps(document).encode(), FOLDERS[folder],
                                     source="damaged.json", tenant="t")
    except cas.CasError:
        return
    for run in runs:
        parse_run(run, "$")
