"""The text form of a run's transcript (cas_cli/transcript_text.py), as `cas runs show
--transcript` prints it: exact output, withheld content, odd content, and real imported runs."""

import json

from hypothesis import given, settings

from cas.format.projection import withhold
from cas.format.records import Case, RunRecord
from cas.format.transcript import transcript
from cas_cli.transcript_text import escape, render
from support.transcripts import RUN, as_run, imported, subjects, texts_of

EXPECTED = """\
run r-1 (tenant acme, person user-42, started 2026-05-01T10:00:00Z)

#1 system
  You are terse.

#2 user
  Tidy the notes folder

#3 assistant
  Looking at the folder.
  One moment.
  [image_url]

#4 tool call ls (call c1)
  arguments:
    {
      "path": "notes"
    }
  result:
    a.txt
    b.txt

#5 tool call touch
  arguments:
    {
      "path": "notes/c.txt"
    }
  result: null (recorded)

#6 tool call mv
  arguments:
    {
      "dst": "old/a.txt",
      "src": "a.txt"
    }
  result: not recorded

#7 tool call rm
  arguments:
    [
      "b.txt"
    ]
  error:
    {
      "message": "denied",
      "type": "permission"
    }

#8 tool call sh
  arguments (kept raw; not JSON: Expecting value: line 1 column 1 (char 0)):
    ls -la
  result:
    {
      "exit": 0
    }

#9 assistant
  Done: notes tidied.

output:
  Done: notes tidied.

outcome:
  {
    "status": "pass"
  }
"""


def text_of(obj) -> str:
    return render(transcript(obj)) + "\n"


def test_a_run_reads_as_its_transcript():
    assert text_of(as_run(RUN)) == EXPECTED


def test_the_cli_shows_the_stored_run_as_a_transcript(run, tmp_path):
    assert run("init").exit_code == 0
    (tmp_path / "runs.jsonl").write_text(json.dumps(RUN) + "\n")
    assert run("runs", "import", "runs.jsonl").exit_code == 0
    r = run("runs", "show", "r-1", "--transcript")
    assert (r.exit_code, r.stdout, r.stderr) == (0, EXPECTED, "")
    # the default output and --json are as they were: the run itself
    shown = json.loads(run("--json", "runs", "show", "r-1").stdout)
    assert shown["steps"] == RUN["steps"] and shown["kind"] == "run"
    assert run("runs", "show", "r-1").stdout == \
        json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_the_input_comes_first_only_when_no_user_message_holds_it():
    # a later user turn holds it (tau2 starts with the agent's greeting): not repeated
    held = as_run(RUN | {"input": "Tidy the notes folder", "steps": [
        {"type": "message", "role": "assistant", "content": "Hi!"},
        {"type": "message", "role": "user", "content": [{"type": "text",
                                                         "text": "Tidy the notes folder"}]}]})
    assert "the run's input" not in text_of(held) and "\ninput:" not in text_of(held)
    # nothing holds it: shown first, as the user's turn
    alone = as_run(RUN | {"input": "Tidy up\nplease", "steps": [], "output": None,
                          "outcome": None})
    assert text_of(alone) == ("run r-1 (tenant acme, person user-42, started "
                              "2026-05-01T10:00:00Z)\n\n"
                              "user (the run's input):\n  Tidy up\n  please\n\n"
                              "output: none\n\noutcome: none\n")
    # a structured input (a request body) is shown as its JSON; a null one not at all
    body = text_of(as_run(RUN | {"input": {"model": "m"}, "steps": []}))
    assert 'input:\n  {\n    "model": "m"\n  }\n\n' in body
    assert "input" not in text_of(as_run(RUN | {"input": None, "steps": []}))
    # an input that is a list of messages, each held by a step
    listed = as_run(RUN | {"input": [{"role": "user", "content": "Tidy the notes folder"}]})
    assert "the run's input" not in text_of(listed) and "\ninput:" not in text_of(listed)


def test_withheld_content_is_shown_as_withheld_never_as_unrecorded():
    run = as_run(RUN)
    case = Case(**{f: getattr(run, f) for f in ("run_id", "started_at", "input", "output",
                                                 "steps", "outcome", "tenant", "person")})
    text = text_of(withhold(case, ["input", "output", "tool_arguments", "tool_results"]))
    assert text.startswith("run r-1 (tenant acme, person user-42, started "
                           "2026-05-01T10:00:00Z)\nwithheld: input, output, tool_arguments, "
                           "tool_results\n\nuser (the run's input): withheld\n\n#1 system\n")
    assert text.count("  arguments: withheld\n  result: withheld\n") == 5
    assert "not recorded" not in text and "none recorded" not in text
    assert "\n\noutput: withheld\n\n" in text
    assert "  Looking at the folder.\n  One moment.\n  [image_url]\n" in text  # always copied
    # without a policy the case reads as the run does
    assert text_of(case) == EXPECTED


def test_odd_content_is_shown_escaped_never_raised():
    run = RunRecord(run_id="r-\x1b", tenant="t", steps=[
        {"type": "message", "role": "a\x1b[2Jb",
         "content": "red \x1b[31mtext\r\nline\t2\u202e\ud800"},
        {"type": "message", "role": 7, "content": [1, None, {"type": "text", "text": "t"}, [2]]},
        {"type": "message", "content": {"text": "a dict"}},
        {"type": "tool_call", "tool_name": {"x": [1]}, "call_id": 3, "arguments_raw": None},
        {"type": "tool_call", "tool_name": "t", "result": "", "error": None},
        {"type": "tool_call", "tool_name": "t", "error": "boom", "call_recorded": False},
        {"type": "message", "role": "tool", "content": None, "orphan_reply": True},
        {"type": "checkpoint", "n": 1}, {"role": "user"}])
    text = render(transcript(run))
    assert text == """\
run r-\\x1b (tenant t)

#1 a\\x1b[2Jb
  red \\x1b[31mtext\\r
  line\\t2\\u202e\\ud800

#2 7
  [number]
  [null]
  t
  [array]

#3 (no role)
  a dict

#4 tool call {"x": [1]} (call 3)
  arguments (kept raw):
    null
  result: not recorded

#5 tool call t
  arguments: none recorded
  result: (empty)

#6 tool call t (only its reply was recorded)
  arguments: none recorded
  error:
    boom

#7 tool (a reply to no recorded call)
  (no content)

#8 checkpoint (a step of unknown type)
  {
    "type": "checkpoint",
    "n": 1
  }

#9 (no type) (a step of unknown type)
  {
    "role": "user"
  }

output: none

outcome: none"""
    assert not any(ord(c) < 32 and c != "\n" for c in text)


@settings(max_examples=50, deadline=None)
@given(subjects)
def test_any_transcript_is_writable_text_showing_every_name_and_text(subject):
    rendered = render(transcript(subject))
    assert rendered.encode("utf-8")  # writable: no lone surrogate is left unescaped
    for step in subject.steps:
        if step["type"] == "tool_call" and isinstance(step["tool_name"], str) \
                and step["tool_name"]:
            assert escape(step["tool_name"], False) in rendered
        elif step["type"] == "message":
            for text in texts_of(step.get("content")):
                assert all(line in rendered for line in escape(text).split("\n"))


def test_a_tau2_run_reads_in_order_without_repeating_its_input(traces):
    name = "tau2-bench__gpt-4.1_airline_default_gpt-4.1_1trials.json"
    repo, ids = imported(traces, "tau2", name, "openai-chat")
    run = repo.run("openai-chat:tau2:b762699f-cf72-4a2f-b500-5bbe1258209c")
    text = render(transcript(run))
    assert text.startswith("run openai-chat:tau2:b762699f-cf72-4a2f-b500-5bbe1258209c (tenant "
                           "t, started 2025-08-01T16:20:44.321269)\n\n#1 assistant\n"
                           "  Hi! How can I help you today?\n\n#2 user\n  Hi, I’d like to "
                           "change my upcoming return flight.")
    assert "the run's input" not in text  # the input is the user's first message, #2
    assert ("#6 tool call get_user_details (call call_fLxcMYQFvKcOdQNYvY2sKVRr)\n"
            "  arguments:\n    {\n      \"user_id\": \"james_lee_6136\"\n    }\n"
            "  result:\n    {\"user_id\": \"james_lee_6136\", ") in text


def test_an_inspect_run_of_tool_errors_with_no_recorded_calls(traces):
    repo, (run_id,) = imported(traces, "inspect-ai", "inspect_ai__log_tool_call_error.json",
                               "inspect")
    text = render(transcript(repo.run(run_id)))
    assert text.startswith(f"run {run_id} (tenant t, started 2025-02-07T00:00:00+00:00)\n\n"
                           "user (the run's input):\n  ...\n\n"
                           "#1 tool call bash (call bash_1; only its reply was recorded)\n"
                           "  arguments: none recorded\n  error:\n    {\n")
    assert text.count("only its reply was recorded") == 11


def test_the_cli_shows_a_recorded_cassette_as_a_transcript(run, traces):
    assert run("init").exit_code == 0
    name = "otel-contrib__test_chat_completion_tool_calls_with_content.yaml"
    r = run("--json", "runs", "import", "--format", "openai-chat", "--container", "vcr",
            "--tenant", "t", str(traces / "openai-chat" / name))
    (run_id,) = json.loads(r.stdout)["imported"]
    r = run("runs", "show", run_id, "--transcript")
    assert r.exit_code == 0
    assert r.stdout.startswith(f"run {run_id} (tenant t, started 2024-11-11T23:43:54Z)\n\n"
                               "#1 system\n  You're a helpful assistant.\n\n#2 user\n"
                               "  What's the weather in Seattle and San Francisco today?\n\n"
                               "#3 assistant\n  (no content)\n\n"
                               "#4 tool call get_current_weather (call ")
    assert ('  arguments:\n    {\n      "location": "San Francisco, CA"\n    }\n'
            "  result:\n    70 degrees and sunny\n") in r.stdout
    assert r.stdout.endswith('\n\noutcome:\n  {\n    "finish_reason": "stop"\n  }\n')
