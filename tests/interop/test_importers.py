"""The importers' registry (cas/interop/importers/__init__.py): formats and containers by name,
`auto` detection on every real sample, the refusals naming what is accepted, and damaged real
documents converted or refused, never a crash (`cas runs import --format`:
tests/cli/test_runs.py)."""

from __future__ import annotations

import io
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
import cas.interop.importers


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


# -- warnings, several files, refusals that name what a file is (issue 33) ---------------------
def _chat(tag):
    return {"messages": [{"role": "user", "content": tag}],
            "response": {"id": f"chatcmpl-{tag}", "choices": [{"index": 0, "message": {
                "role": "assistant", "content": "ok"}}]}}


def test_convert_files_is_all_or_nothing_naming_the_refused_file():
    good = json.dumps(_chat("a")).encode()
    both = cas.interop.importers.convert_files([("a.json", good), ("b.json", good)],
                                               "openai-chat", tenant="t")
    assert [r["run_id"] for r in both.runs] == ["openai-chat:chatcmpl-a"] * 2
    assert both.warnings == []
    with pytest.raises(cas.InvalidArgument) as info:
        cas.interop.importers.convert_files([("a.json", good), ("b.json", b'{"spans": 1}')],
                                            "openai-chat", tenant="t")
    assert info.value.fields["source"] == "b.json"
    assert info.value.message.startswith("b.json: ")


def test_warnings_are_collected_and_convert_keeps_its_return_type():
    spans = [{"traceId": "a" * 32, "spanId": "1" * 16, "name": "chat", "attributes": {
        "gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])}},
        {"traceId": "b" * 32, "spanId": "2" * 16, "name": "http", "attributes": {"x": 1}}]
    data = json.dumps(spans).encode()
    warnings = []
    runs = cas.interop.importers.convert(data, "otel-genai", source="s.json", tenant="t",
                                         warnings=warnings)
    assert isinstance(runs, list) and [r["run_id"] for r in runs] == ["otel-genai:" + "a" * 32]
    assert [w.to_json() for w in warnings] == [{
        "source": "s.json", "run_id": None,
        "message": f"trace {'b' * 32}: 1 span(s), none of them a span this format reads (model "
                   "or tool calls): not imported"}]
    assert cas.interop.importers.convert(data, "otel-genai", source="s.json", tenant="t") == runs


def test_a_cassette_without_the_container_is_refused_saying_so():
    cassette = json.dumps({"interactions": [{"request": {
        "method": "POST", "uri": "https://api.openai.com/v1/chat/completions",
        "body": json.dumps(_chat("a"))}, "response": {"status": {"code": 200}}}]}).encode()
    for fmt in ("auto", "openai-chat"):
        with pytest.raises(cas.InvalidArgument) as info:
            cas.interop.importers.convert(cassette, fmt, source="c.json", tenant="t")
        assert info.value.fields["looks_like"] == ("it looks like a vcr cassette: give "
                                                   "--container vcr")
    assert cas.interop.importers.looks_like(cassette) == (
        "it looks like a vcr cassette: give --format auto --container vcr")
    assert cas.interop.importers.looks_like(b'{"hello": 1}') is None


# -- converted as the file is read ----------------------------------------------------------
class _Pipe(io.BytesIO):
    """A stream that cannot seek back (stdin)."""

    def seekable(self) -> bool:
        return False


def _as_json_lines(data: bytes) -> bytes:
    """A JSON sample as JSON Lines: an array's members a line each, else the document twice."""
    value = json.loads(data)
    members = value if isinstance(value, list) and len(value) > 1 else [value, value]
    return b"".join(json.dumps(m).encode() + b"\n" for m in members)


def test_a_stream_converts_to_what_the_whole_file_converts_to(traces):
    """Every real JSON sample, as JSON Lines: `convert_stream` gives the runs and warnings
    `convert_files` gives, named or detected, from a file or a pipe (read whole then)."""
    seen = set()
    for folder, fmt in FOLDERS.items():
        for path in sorted((traces / folder).iterdir()):
            if path.suffix not in (".json", ".jsonl"):
                continue
            data = _as_json_lines(path.read_bytes())
            whole = cas.interop.importers.convert_files([(path.name, data)], fmt, tenant="t")
            for name, stream in ((fmt, io.BytesIO), ("auto", io.BytesIO), ("auto", _Pipe)):
                said = []
                runs = list(cas.interop.importers.convert_stream(
                    [(path.name, stream(data))], name, tenant="t", warnings=said))
                assert (runs, said) == (whole.runs, whole.warnings), (path.name, name)
            seen.add(fmt)
    assert seen >= {"openai-chat", "anthropic", "openai-responses", "otel-genai", "langsmith"}


def test_a_stream_yields_runs_before_a_bad_line_is_read_and_names_the_file(traces):
    entries = json.loads((traces / "openai-chat" / "tau-bench__gpt-4o-airline.first50.json")
                         .read_bytes())
    good = b"".join(json.dumps(e).encode() + b"\n" for e in entries[:5])
    runs = cas.interop.importers.convert_stream(
        [("a.jsonl", io.BytesIO(good)), ("b.jsonl", io.BytesIO(good + b'{"task_id": \n'))],
        "openai-chat", tenant="t")
    first = next(runs)  # converted before the rest of the files is read
    assert first["metadata"]["import"] == {"format": "openai-chat", "container": None}
    assert len([first, *itertools.islice(runs, 9)]) == 10
    with pytest.raises(cas.InvalidArgument) as info:
        next(runs)
    assert info.value.message.startswith("b.jsonl line 6: ")
    assert info.value.fields["source"] == "b.jsonl" and info.value.fields["line"] == 6
    # a line that is JSON but not the format: refused as `convert` refuses its document
    other = good + json.dumps({"hello": "world"}).encode() + b"\n"
    with pytest.raises(cas.InvalidArgument) as info:
        list(cas.interop.importers.convert_stream([("c.jsonl", io.BytesIO(other))],
                                                  "openai-chat", tenant="t"))
    assert info.value.message.startswith("c.jsonl document 6: not an openai-chat document")
    with pytest.raises(cas.InvalidArgument) as whole:
        cas.interop.importers.convert_files([("c.jsonl", other)], "openai-chat", tenant="t")
    assert whole.value.message == info.value.message
