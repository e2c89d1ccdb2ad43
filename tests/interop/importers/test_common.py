"""What every importer shares (cas/interop/importers/common.py): reading documents, fields by
path, tool arguments kept when they are not JSON, replies joined to their calls, run ids, tenant
and person."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.interop.importers.common import (CallJoiner, Options, derived_run_id, each_document,
                                          finish_run, lines_or_whole, lookup, parse_documents,
                                          tool_arguments)

FAST = settings(max_examples=60, deadline=None)
json_values = st.recursive(st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                           max_leaves=8)


@FAST
@given(st.lists(json_values, min_size=1, max_size=6), st.lists(st.sampled_from(
    [b"", b"\n", b"  \n", b"\t\n"]), min_size=7, max_size=7), st.booleans(), st.booleans())
def test_lines_read_one_at_a_time_give_what_the_whole_file_gives(values, blanks, indent, end):
    """`lines_or_whole` streams exactly the files `parse_documents` reads as JSON Lines, with
    the same values; every other file comes back whole, byte for byte."""
    dump = (lambda v: json.dumps(v, indent=1)) if indent else json.dumps
    data = b"".join(blanks[i] + dump(v).encode() + b"\n" for i, v in enumerate(values))
    data = data + blanks[-1] if end else data.rstrip(b"\n")
    whole, lines = lines_or_whole(io.BytesIO(data), "f")

    def outcome(read):
        try:
            return read()
        except cas.InvalidArgument as exc:
            return ("refused", exc.fields.get("line"))

    if whole is not None:  # (read whole, as before)
        assert whole == data and list(lines) == []
    else:  # the same values, or the same line refused
        assert len(values) > 1
        assert outcome(lambda: [v for _, v in lines]) == outcome(lambda: parse_documents(data,
                                                                                          "f"))
    if not indent:
        assert (whole is None) == (len(values) > 1)


def test_lines_are_refused_when_reached_naming_their_number():
    whole, lines = lines_or_whole(io.BytesIO(b'{"a": 1}\n\n{"b": 2}\n{"c": \n'), "f.jsonl")
    assert whole is None
    assert next(lines) == (1, {"a": 1}) and next(lines) == (3, {"b": 2})
    with pytest.raises(cas.InvalidArgument) as info:
        next(lines)
    assert info.value.message.startswith("f.jsonl line 4: ") and info.value.fields["line"] == 4
    # one document over several lines, one line, or no JSON: the bytes, to read whole
    for data in (b'{\n "a": 1\n}\n', b'{"a": 1}\n\n', b"PK\x03\x04zip\n{}\n", b""):
        assert lines_or_whole(io.BytesIO(data), "f")[0] == data


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
        "arguments_error": "not JSON: Input data was truncated"}
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


# -- re-sent history (issue 33): a call is one call however its history is re-sent ------------
from cas.interop.importers import convert  # noqa: E402
from cas.interop.importers.common import conversations, same_turn, turn_of  # noqa: E402


def _cassette(interactions: list) -> bytes:
    return json.dumps({"interactions": [
        {"request": {"method": "POST", "uri": uri, "body": json.dumps(body)},
         "response": {"status": {"code": 200}, "headers": {}, "body": {"string": json.dumps(out)}}}
        for uri, body, out in interactions]}).encode()


def _resend_chat(message: dict, how: dict) -> dict:
    """An assistant turn as a client re-sends it: text dropped or emptied, refusal and
    annotations left out, arguments re-serialised, keys in another order."""
    out = {k: v for k, v in message.items() if k not in ("refusal", "annotations")}
    if how["text"] == "drop":
        out.pop("content", None)
    elif how["text"] == "empty" and out.get("content") is None:
        out["content"] = ""
    calls = []
    for call in out.get("tool_calls", []):
        args = json.loads(call["function"]["arguments"])
        text = json.dumps(dict(reversed(list(args.items()))) if how["reorder"] else args,
                          separators=(", ", ": ") if how["spacing"] else (",", ":"))
        fn = {"arguments": text, "name": call["function"]["name"]}
        calls.append({"type": "function", "function": fn, "id": call["id"]} if how["reorder"]
                     else {**call, "function": fn})
    if calls:
        out["tool_calls"] = calls
    return dict(reversed(list(out.items()))) if how["reorder"] else out


def chat_agent(n_calls: int, texts: list, hows: list) -> tuple[bytes, list]:
    """A Chat Completions agent's cassette: `n_calls` tool calls, one per model call, each
    answered, then a final answer; every later request re-sends the history as `hows` say."""
    uri = "https://api.openai.com/v1/chat/completions"
    history = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"}]
    sent = list(history)
    interactions, expected = [], []
    for k in range(n_calls + 1):
        if k < n_calls:
            args = {"path": f"/f{k}", "n": k, "deep": {"b": 1, "a": [k, "x"]}}
            message = {"role": "assistant", "content": texts[k], "refusal": None,
                       "annotations": [],
                       "tool_calls": [{"id": f"call_{k}", "type": "function",
                                       "function": {"name": f"tool{k % 2}",
                                                    "arguments": json.dumps(args)}}]}
            expected.append((f"call_{k}", f"tool{k % 2}", args, f"result {k}"))
        else:
            message = {"role": "assistant", "content": "done.", "refusal": None}
        response = {"id": f"chatcmpl-{k}", "object": "chat.completion", "created": 1700000000 + k,
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        interactions.append((uri, {"model": "m", "messages": list(sent)}, response))
        if k < n_calls:
            sent = sent + [_resend_chat(message, hows[k % len(hows)]),
                           {"role": "tool", "tool_call_id": f"call_{k}",
                            "content": f"result {k}"}]
    return _cassette(interactions), expected


hows = st.fixed_dictionaries({"text": st.sampled_from(["keep", "drop", "empty"]),
                              "reorder": st.booleans(), "spacing": st.booleans()})


def _calls_of(run: dict) -> list:
    return [(s.get("call_id"), s["tool_name"], s.get("arguments"), s.get("result"))
            for s in run["steps"] if s["type"] == "tool_call"]


@FAST
@given(st.integers(1, 4), st.lists(st.none() | st.text(min_size=1, max_size=8), min_size=4,
                                   max_size=4), st.lists(hows, min_size=1, max_size=4))
def test_re_sent_chat_history_never_duplicates_a_call(n, texts, how):
    data, expected = chat_agent(n, texts, how)
    runs = convert(data, container="vcr", tenant="t")
    assert len(runs) == 1
    assert _calls_of(runs[0]) == expected  # each call once, with its result
    assert runs[0]["output"] == "done."
    assert convert(data, container="vcr", tenant="t") == runs  # deterministic


def _resend_anthropic(content: list, how: dict) -> list:
    out = []
    for block in content:
        if block["type"] == "text" and how["text"] != "keep":
            continue  # a text block dropped
        out.append(dict(reversed(list(block.items()))) if how["reorder"] else block)
    return out


def anthropic_agent(n_calls: int, texts: list, hows: list) -> tuple[bytes, list]:
    uri = "https://api.anthropic.com/v1/messages"
    sent = [{"role": "user", "content": "go"}]
    interactions, expected = [], []
    for k in range(n_calls + 1):
        if k < n_calls:
            args = {"path": f"/f{k}", "deep": {"b": 1, "a": [k]}}
            content = ([{"type": "text", "text": texts[k]}] if texts[k] else []) + \
                [{"type": "tool_use", "id": f"toolu_{k}", "name": "read", "input": args}]
            expected.append((f"toolu_{k}", "read", args, f"result {k}"))
        else:
            content = [{"type": "text", "text": "done."}]
        response = {"id": f"msg_{k}", "type": "message", "role": "assistant", "model": "c",
                    "content": content, "stop_reason": "tool_use" if k < n_calls else "end_turn"}
        interactions.append((uri, {"model": "c", "max_tokens": 9, "messages": list(sent)},
                             response))
        if k < n_calls:
            sent = sent + [
                {"role": "assistant", "content": _resend_anthropic(content, hows[k % len(hows)])},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{k}",
                                              "content": f"result {k}"}]}]
    return _cassette(interactions), expected


@FAST
@given(st.integers(1, 4), st.lists(st.text(max_size=8), min_size=4, max_size=4),
       st.lists(hows, min_size=1, max_size=4))
def test_re_sent_anthropic_history_never_duplicates_a_call(n, texts, how):
    data, expected = anthropic_agent(n, texts, how)
    runs = convert(data, container="vcr", tenant="t")
    assert len(runs) == 1
    assert _calls_of(runs[0]) == expected
    assert runs[0]["output"] == "done."
    assert convert(data, container="vcr", tenant="t") == runs


def test_a_turn_is_known_by_its_calls_and_text_not_its_bytes():
    made = {"role": "assistant", "content": None, "refusal": None,
            "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "f", "arguments": '{"a": 1, "b": [2]}'}}]}
    resent = {"tool_calls": [{"function": {"arguments": '{"b":[2],"a":1}', "name": "f"},
                              "id": "c1", "type": "function"}], "role": "assistant",
              "content": ""}
    assert same_turn(made, resent)
    other = {**resent, "tool_calls": [{**resent["tool_calls"][0], "id": "c2"}]}
    assert not same_turn(made, other)
    # a text block dropped, or text appended (an observation added to a ReAct turn)
    assert same_turn({"role": "assistant", "content": [{"type": "text", "text": "a"},
                                                       {"type": "text", "text": "b  c"}]},
                     {"role": "assistant", "content": [{"type": "text", "text": "b c"}]})
    assert same_turn({"role": "assistant", "content": "Action: x"},
                     {"role": "assistant", "content": "Action: x\nObservation: 14"})
    assert not same_turn({"role": "user", "content": "yes"}, {"role": "user", "content": "no"})
    # without an id, a call is its name and PARSED arguments
    assert turn_of({"type": "function_call", "name": "f", "arguments": '{"a":1}'}) == \
        turn_of({"type": "function_call", "name": "f", "arguments": '{ "a" : 1 }'})


def test_conversations_interleave_and_follow_call_ids_across_a_changed_prompt():
    def call(messages, reply):
        return {"messages": messages, "reply": reply}
    ask = {"role": "user", "content": "go"}
    lead_call = {"role": "assistant", "tool_calls": [
        {"id": "d1", "type": "function", "function": {"name": "delegate", "arguments": "{}"}}]}
    member = [{"role": "system", "content": "member"}, {"role": "user", "content": "sub"}]
    calls = [call([{"role": "system", "content": "lead"}, ask], lead_call),
             call(member, {"role": "assistant", "content": "sub done"}),
             # the leader again, its system prompt swapped (a handoff), the delegate answered
             call([{"role": "system", "content": "summariser"}, ask, lead_call,
                   {"role": "tool", "tool_call_id": "d1", "content": "sub done"}],
                  {"role": "assistant", "content": "all done"})]
    groups = conversations(calls, lambda c: c["messages"], lambda c: [c["reply"]])
    assert groups == [[calls[0], calls[2]], [calls[1]]]


def responses_agent(n_calls: int, hows: list) -> tuple[bytes, list]:
    """A Responses API agent that re-sends its items itself (no previous_response_id): the
    function_call items with their arguments re-serialised, keys reordered, `status` and `id`
    dropped, as `hows` say."""
    uri = "https://api.openai.com/v1/responses"
    sent = [{"role": "user", "content": "go"}]
    interactions, expected = [], []
    for k in range(n_calls + 1):
        if k < n_calls:
            args = {"path": f"/f{k}", "deep": {"b": 1, "a": [k]}}
            output = [{"type": "function_call", "id": f"fc_{k}", "call_id": f"call_{k}",
                       "name": "read", "arguments": json.dumps(args), "status": "completed"}]
            expected.append((f"call_{k}", "read", args, f"result {k}"))
        else:
            output = [{"type": "message", "id": "msg_f", "role": "assistant", "status":
                       "completed", "content": [{"type": "output_text", "text": "done.",
                                                 "annotations": []}]}]
        response = {"id": f"resp_{k}", "object": "response", "created_at": 1700000000 + k,
                    "status": "completed", "model": "m", "output": output}
        interactions.append((uri, {"model": "m", "input": list(sent)}, response))
        if k < n_calls:
            how = hows[k % len(hows)]
            item = output[0]
            args = json.loads(item["arguments"])
            text = json.dumps(dict(reversed(list(args.items()))) if how["reorder"] else args,
                              separators=(", ", ": ") if how["spacing"] else (",", ":"))
            again = {"type": "function_call", "call_id": item["call_id"], "name": "read",
                     "arguments": text}
            if how["text"] == "keep":
                again.update(id=item["id"], status="completed")
            sent = sent + [dict(reversed(list(again.items()))) if how["reorder"] else again,
                           {"type": "function_call_output", "call_id": f"call_{k}",
                            "output": f"result {k}"}]
    return _cassette(interactions), expected


@FAST
@given(st.integers(1, 4), st.lists(hows, min_size=1, max_size=4))
def test_re_sent_responses_items_never_duplicate_a_call(n, how):
    data, expected = responses_agent(n, how)
    runs = convert(data, container="vcr", tenant="t")
    assert len(runs) == 1
    assert _calls_of(runs[0]) == expected
    assert runs[0]["output"] == "done."
    assert convert(data, container="vcr", tenant="t") == runs
