"""The transcript of a recorded run or a frozen case: its turns and tool calls in reading order.

`transcript(run)` is a pure projection (no I/O, no storage records) shared by the interfaces
that show a run to a person (`cas runs show --transcript`, a review page). It is total: any
step dict the engine accepts, and any other value in a step list, gives entries, never an
exception. Values are given as display text (a string as recorded, anything else as indented
JSON); escaping for a terminal or a page is the renderer's job.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import msgspec

from cas.format.records import Case, RunRecord


class Value(msgspec.Struct, frozen=True):
    """A recorded value as text: a string as given (`is_json` false), else its JSON."""

    text: str
    is_json: bool


class Part(msgspec.Struct, frozen=True):
    """One part of a message's content: text, or a part named by its type (`image_url`)."""

    kind: str           # "text", or the non-text part's type
    text: str | None = None


class Arguments(msgspec.Struct, frozen=True):
    """A tool call's arguments: `recorded` (`arguments`), `raw` (`arguments_raw`: kept
    verbatim because they were not JSON, with the importer's `error`), `absent`, or
    `withheld` (a case frozen without `tool_arguments`)."""

    state: Literal["recorded", "raw", "absent", "withheld"]
    value: Value | None = None
    error: str | None = None


class Result(msgspec.Struct, frozen=True):
    """A tool call's answer: `recorded` (a `result` key, also a recorded null), `unrecorded`
    (no `result` key), `error` (a non-null `error`, and `value` when a result was recorded
    beside it), or `withheld` (a case frozen without `tool_results`)."""

    state: Literal["recorded", "unrecorded", "error", "withheld"]
    value: Value | None = None
    error: Value | None = None


class _Entry(msgspec.Struct, frozen=True, tag_field="kind"):
    """An entry of a transcript; as JSON it is tagged by `kind` (its class's tag)."""


class Input(_Entry, tag="input"):
    """The run's input, first, when no user message step holds it (or when it is withheld)."""

    value: Value | None = None
    withheld: bool = False


class Message(_Entry, tag="message"):
    index: int          # the step's position in `steps`
    role: str
    parts: tuple[Part, ...] = ()
    orphan_reply: bool = False  # a tool reply an importer kept that answers no call


class ToolCallEntry(_Entry, tag="tool_call"):
    index: int
    name: str
    arguments: Arguments
    result: Result
    call_id: str | None = None
    call_recorded: bool = True  # false: only the reply was recorded (importers mark it)


class OtherStep(_Entry, tag="other"):
    """A step of a type the schema does not name (a case may hold any): shown whole."""

    index: int
    type: str
    value: Value


class Output(_Entry, tag="output"):
    value: Value | None = None  # None: the output is null
    withheld: bool = False


class Outcome(_Entry, tag="outcome"):
    value: Value | None = None  # None: no outcome was recorded


Entry = Input | Message | ToolCallEntry | OtherStep | Output | Outcome


class Transcript(msgspec.Struct, frozen=True):
    run_id: str | None
    tenant: str | None
    person: str | None
    started_at: str | None
    withheld: tuple[str, ...]   # the content classes a case was frozen without
    entries: tuple[Entry, ...]


def transcript(run: RunRecord | Case) -> Transcript:
    """The transcript of a `RunRecord` or `Case`: the input when the steps do not hold it, each
    step in order, then the output and the outcome."""
    withheld = tuple(_label(c) for c in _listed(getattr(run, "withheld", ())))
    steps = _listed(getattr(run, "steps", ()))
    entries: list[Any] = []
    given = getattr(run, "input", None)
    if "input" in withheld:
        entries.append(Input(withheld=True))  # withheld: nothing to compare with the steps
    elif given is not None and not _held_in_steps(given, steps):
        entries.append(Input(value=as_value(given)))
    entries.extend(_step(i, step, withheld) for i, step in enumerate(steps))
    output = getattr(run, "output", None)
    entries.append(Output(withheld=True) if "output" in withheld else
                   Output(value=None if output is None else as_value(output)))
    outcome = getattr(run, "outcome", None)
    entries.append(Outcome(value=None if outcome is None else as_value(outcome)))
    return Transcript(run_id=_text_or_none(getattr(run, "run_id", None)),
                      tenant=_text_or_none(getattr(run, "tenant", None)),
                      person=_text_or_none(getattr(run, "person", None)),
                      started_at=_text_or_none(getattr(run, "started_at", None)),
                      withheld=withheld, entries=tuple(entries))


# -- steps --------------------------------------------------------------------------------------
def _step(index: int, step: Any, withheld: tuple[str, ...]) -> Entry:
    if not isinstance(step, dict):
        return OtherStep(index=index, type="(not an object)", value=as_value(step))
    kind = step.get("type")
    if kind == "message":
        role = step.get("role")
        return Message(index=index, role=_name(role, "(no role)"),
                       parts=parts_of(step.get("content")),
                       orphan_reply=step.get("orphan_reply") is True)
    if kind == "tool_call":
        name = step.get("tool_name")
        call_id = step.get("call_id")
        return ToolCallEntry(index=index, name=_name(name, "(no name)"),
                        arguments=_arguments(step, withheld), result=_result(step, withheld),
                        call_id=None if call_id is None else _label(call_id),
                        call_recorded=not (step.get("call_recorded") is False
                                           or step.get("orphan_output") is True))
    return OtherStep(index=index, type="(no type)" if kind is None else _label(kind),
                     value=as_value(step))


def _arguments(step: dict, withheld: tuple[str, ...]) -> Arguments:
    if "tool_arguments" in withheld:  # the keys were removed: absent would be a lie
        return Arguments(state="withheld")
    if "arguments" in step:
        return Arguments(state="recorded", value=as_value(step["arguments"]))
    if "arguments_raw" in step:
        error = step.get("arguments_error")
        return Arguments(state="raw", value=as_value(step["arguments_raw"]),
                         error=None if error is None else _label(error))
    return Arguments(state="absent")


def _result(step: dict, withheld: tuple[str, ...]) -> Result:
    if "tool_results" in withheld:
        return Result(state="withheld")
    value = as_value(step["result"]) if "result" in step else None
    if step.get("error") is not None:
        return Result(state="error", value=value, error=as_value(step["error"]))
    if "result" in step:  # a recorded null is a recorded answer, never "unrecorded"
        return Result(state="recorded", value=value)
    return Result(state="unrecorded")


def parts_of(content: Any) -> tuple[Part, ...]:
    """A message's content as parts: a string is one text part; a list gives its text parts
    (strings, `{"type": "text"|"input_text"|"output_text", "text": ...}`) and names the
    others by their type; a null is no part; any other value is shown as its JSON."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (Part(kind="text", text=content),)
    if isinstance(content, list):
        return tuple(_part(p) for p in content)
    if isinstance(content, dict):
        return (_part(content),)
    return (Part(kind="text", text=as_value(content).text),)


_TEXT_PARTS = (None, "text", "input_text", "output_text")


def _part(part: Any) -> Part:
    if isinstance(part, str):
        return Part(kind="text", text=part)
    if isinstance(part, dict):
        kind = part.get("type")
        if isinstance(part.get("text"), str) and kind in _TEXT_PARTS:
            return Part(kind="text", text=part["text"])
        return Part(kind="object" if kind is None else _label(kind))
    return Part(kind=_json_kind(part))


def _held_in_steps(given: Any, steps: list) -> bool:
    """Whether a user message step already holds the run's input. Importers set `input` to
    the first user message's content, or to the user turn a later span answered (so it may
    follow an assistant greeting or earlier turns); an input that is a list of messages is
    held when each of them is."""
    messages = [s for s in steps if isinstance(s, dict) and s.get("type") == "message"]
    if isinstance(given, list) and given and all(
            isinstance(m, dict) and "role" in m and "content" in m for m in given):
        return all(any(_holds(s, m.get("content")) and s.get("role") == m.get("role")
                       for s in messages) for m in given)
    return any(s.get("role") == "user" and _holds(s, given) for s in messages)


def _holds(step: dict, given: Any) -> bool:
    content = step.get("content")
    try:
        if content == given:
            return True
    except Exception:  # noqa: BLE001 - a hand-made value may refuse comparison
        return False
    if isinstance(given, str) and isinstance(content, list):
        texts = [p.text for p in parts_of(content) if p.text is not None]
        return bool(texts) and given in ("".join(texts), "\n".join(texts))
    return False


# -- values -------------------------------------------------------------------------------------
def as_value(value: Any) -> Value:
    """A string as it is; anything else as indented JSON (key order as recorded: a stored run
    is canonical, so sorted)."""
    if isinstance(value, str):
        return Value(text=value, is_json=False)
    text = _json(value, indent=2)
    return Value(text=text, is_json=text is not None) if text is not None else \
        Value(text=_repr(value), is_json=False)


def _label(value: Any) -> str:
    """A short name (role, tool name, part type): a string as it is, else its JSON on one
    line."""
    if isinstance(value, str):
        return value
    text = _json(value, indent=None)
    return _repr(value) if text is None else text


def _json(value: Any, indent: int | None) -> str | None:
    try:
        return json.dumps(value, indent=indent, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        return None  # only a hand-made object holds what JSON cannot write


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # noqa: BLE001 - nor may a failing repr stop a transcript
        return f"<{type(value).__name__}>"


def _name(value: Any, missing: str) -> str:
    return missing if value is None or value == "" else _label(value)


def _text_or_none(value: Any) -> str | None:
    return None if value is None else _label(value)


def _listed(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else []


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, list):
        return "array"
    return "null" if value is None else type(value).__name__
