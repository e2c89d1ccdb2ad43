"""The transcript of a run (cas/format/transcript.py): its entries in order, the input only
when no user message holds it, every name and text kept, and plain data for any renderer (the
text form is tested with it in tests/cli/test_transcript_text.py)."""

import msgspec
from hypothesis import given, settings

from cas.format.transcript import Message, ToolCallEntry, transcript
from support.transcripts import RUN, as_run, imported, subjects, texts_of


def test_the_input_is_an_entry_only_when_no_user_message_holds_it():
    held = as_run(RUN | {"input": "Tidy the notes folder", "steps": [
        {"type": "message", "role": "assistant", "content": "Hi!"},
        {"type": "message", "role": "user", "content": [{"type": "text",
                                                         "text": "Tidy the notes folder"}]}]})
    assert [type(e).__name__ for e in transcript(held).entries] == \
        ["Message", "Message", "Output", "Outcome"]
    alone = as_run(RUN | {"input": "Tidy up", "steps": []})
    assert [type(e).__name__ for e in transcript(alone).entries] == \
        ["Input", "Output", "Outcome"]


def test_the_transcript_is_plain_data_for_other_renderers():
    entries = msgspec.to_builtins(transcript(as_run(RUN)))["entries"]
    assert entries[3] == {"kind": "tool_call", "index": 3, "name": "ls", "call_id": "c1",
                          "call_recorded": True,
                          "arguments": {"state": "recorded",
                                        "value": {"text": '{\n  "path": "notes"\n}',
                                                  "is_json": True}, "error": None},
                          "result": {"state": "recorded",
                                     "value": {"text": "a.txt\nb.txt", "is_json": False},
                                     "error": None}}
    assert [e["result"]["state"] for e in entries if e["kind"] == "tool_call"] == \
        ["recorded", "recorded", "unrecorded", "error", "recorded"]


@settings(max_examples=50, deadline=None)
@given(subjects)
def test_any_steps_give_a_transcript_keeping_every_name_and_text(subject):
    t = transcript(subject)
    by_index = {e.index: e for e in t.entries if hasattr(e, "index")}
    assert sorted(by_index) == list(range(len(subject.steps)))
    for i, step in enumerate(subject.steps):
        entry = by_index[i]
        if step["type"] == "tool_call":
            assert isinstance(entry, ToolCallEntry)
            if isinstance(step["tool_name"], str) and step["tool_name"]:
                assert entry.name == step["tool_name"]
        elif step["type"] == "message":
            assert isinstance(entry, Message)
            kept = [p.text for p in entry.parts if p.text is not None]
            for text in texts_of(step.get("content")):
                assert text in kept


def test_a_tau2_run_s_calls_are_recorded_and_its_one_tool_error_kept(traces):
    name = "tau2-bench__gpt-4.1_airline_default_gpt-4.1_1trials.json"
    repo, ids = imported(traces, "tau2", name, "openai-chat")
    run = repo.run("openai-chat:tau2:b762699f-cf72-4a2f-b500-5bbe1258209c")
    calls = [e for e in transcript(run).entries if isinstance(e, ToolCallEntry)]
    assert calls and all(c.result.state == "recorded" for c in calls)
    # tau2's one tool error, in another run
    errors = [e for i in ids for e in transcript(repo.run(i)).entries
              if isinstance(e, ToolCallEntry) and e.result.state == "error"]
    assert len(errors) == 1
    assert errors[0].result.error.text.startswith("Error: Payment amount does not add up")
