"""Runs for the transcript tests: one run of every kind of step, any steps (a hypothesis
strategy), and real traces imported into a repository."""

from hypothesis import strategies as st

import cas
import cas.interop.importers
from cas.format.records import Case, RunRecord
from cas.repo.runs import parse_run
from cas.storage.backends.memory import MemoryBackend

RUN = {"run_id": "r-1", "tenant": "acme", "person": "user-42",
       "started_at": "2026-05-01T10:00:00Z", "input": "Tidy the notes folder",
       "output": "Done: notes tidied.",
       "steps": [
           {"type": "message", "role": "system", "content": "You are terse."},
           {"type": "message", "role": "user", "content": "Tidy the notes folder"},
           {"type": "message", "role": "assistant", "content": [
               {"type": "text", "text": "Looking at the folder.\nOne moment."},
               {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}]},
           {"type": "tool_call", "tool_name": "ls", "call_id": "c1",
            "arguments": {"path": "notes"}, "result": "a.txt\nb.txt"},
           {"type": "tool_call", "tool_name": "touch", "arguments": {"path": "notes/c.txt"},
            "result": None},
           {"type": "tool_call", "tool_name": "mv",
            "arguments": {"dst": "old/a.txt", "src": "a.txt"}},
           {"type": "tool_call", "tool_name": "rm", "arguments": ["b.txt"],
            "error": {"message": "denied", "type": "permission"}},
           {"type": "tool_call", "tool_name": "sh", "arguments_raw": "ls -la",
            "arguments_error": "not JSON: Expecting value: line 1 column 1 (char 0)",
            "result": {"exit": 0}},
           {"type": "message", "role": "assistant", "content": "Done: notes tidied."}],
       "outcome": {"status": "pass"}}


def as_run(obj: dict) -> RunRecord:
    return parse_run(obj, "$")


# -- any step the engine accepts, and any other step dict ---------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=6)
texts = st.text(st.characters(exclude_categories=()), max_size=12)
parts = st.lists(texts | st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url"]),
                                                "text": texts}) | json_values, max_size=3)
optional = {"content": texts | parts | json_values, "result": json_values,
            "error": json_values, "arguments": json_values, "arguments_raw": json_values,
            "arguments_error": json_values, "call_id": json_values, "orphan_reply": json_values,
            "call_recorded": json_values}
steps = st.fixed_dictionaries(
    {"type": st.sampled_from(["message", "tool_call"]) | json_values,
     "role": texts | json_values, "tool_name": texts | json_values},
    optional=optional)
subjects = st.builds(
    lambda cls, steps, given, withheld: (
        RunRecord(run_id="r", tenant="t", input=given, steps=steps) if cls is RunRecord else
        Case(input=given, steps=steps, withheld=withheld)),
    st.sampled_from([RunRecord, Case]), st.lists(steps, max_size=5), json_values | texts,
    st.lists(st.sampled_from(["input", "output", "tool_arguments", "tool_results"]),
             max_size=2))


def texts_of(content) -> list[str]:
    """The message text a transcript must keep: a string content, or the text parts."""
    if isinstance(content, str):
        return [content]
    return [p if isinstance(p, str) else p["text"] for p in
            (content if isinstance(content, list) else [])
            if isinstance(p, str) or (isinstance(p, dict) and p.get("type") == "text"
                                      and isinstance(p.get("text"), str))]


def imported(traces, folder, name, fmt, **flags):
    runs = cas.interop.importers.convert((traces / folder / name).read_bytes(), fmt, source=name,
                                 tenant="t", **flags)
    repo = cas.Repository.create(MemoryBackend())
    repo.import_runs(runs)
    return repo, [r["run_id"] for r in runs]
