"""The text form of a run's transcript (`cas runs show --transcript`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when rendering: `cas --help` imports this module, not the format
    from cas.format import transcript as model

# Control characters (C0, DEL, C1), lone surrogates (they cannot be written as UTF-8), the
# line and paragraph separators, and the bidirectional embeddings, overrides and isolates
# (they reorder what a reader sees) are shown escaped, so a recorded value can neither drive
# the terminal nor hide or disguise text. A newline in a value is kept: it breaks the line.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\r": "\\r", "\n": "\\n"}


def _escaped(match: re.Match) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str, keep_newlines: bool = True) -> str:
    """`text` with its unsafe characters escaped (`\\x1b`, `\\t`, `\\u202e`); newlines are
    kept unless `keep_newlines` is false (a name or a header is one line)."""
    if keep_newlines:
        return "\n".join(_UNSAFE.sub(_escaped, line) for line in text.split("\n"))
    return _UNSAFE.sub(_escaped, text)


INDENT = "  "


def render(t: model.Transcript) -> str:
    """The transcript as text: a header line, then one block per entry, separated by blank
    lines. Values are shown whole, indented under their header."""
    details = [f"{label} {escape(value, False)}" for label, value in
               (("tenant", t.tenant), ("person", t.person), ("started", t.started_at))
               if value is not None]
    head = f"run {escape(t.run_id, False) if t.run_id is not None else '(no id)'}"
    if details:
        head += f" ({', '.join(details)})"
    if t.withheld:
        head += f"\nwithheld: {', '.join(escape(c, False) for c in t.withheld)}"
    return "\n\n".join([head, *("\n".join(_entry(e)) for e in t.entries)])


def _entry(entry) -> list[str]:
    from cas.format import transcript as model
    if isinstance(entry, model.Message):
        return _message(entry)
    if isinstance(entry, model.ToolCallEntry):
        return _tool_call(entry)
    if isinstance(entry, model.Input):
        # a text input is the user's first turn; a structured one (a request body) is not
        header = "input" if entry.value is not None and entry.value.is_json \
            else "user (the run's input)"
        return [f"{header}: withheld"] if entry.withheld else _value(header, entry.value, "")
    if isinstance(entry, model.Output):
        return ["output: withheld"] if entry.withheld else _value("output", entry.value, "")
    if isinstance(entry, model.Outcome):
        return _value("outcome", entry.value, "")
    # an OtherStep: a step of a type the schema does not name, shown whole
    return [f"#{entry.index + 1} {escape(entry.type, False)} (a step of unknown type)",
            *_indented(entry.value.text, INDENT)]


def _message(m: model.Message) -> list[str]:
    header = f"#{m.index + 1} {escape(m.role, False)}"
    if m.orphan_reply:
        header += " (a reply to no recorded call)"
    if not m.parts:
        return [header, INDENT + "(no content)"]
    if len(m.parts) == 1 and m.parts[0].text == "":
        return [header, INDENT + "(empty)"]
    lines = [header]
    for part in m.parts:
        if part.text is None:
            lines.append(f"{INDENT}[{escape(part.kind, False)}]")
        else:
            lines.extend(_indented(part.text, INDENT))
    return lines


def _tool_call(c: model.ToolCallEntry) -> list[str]:
    notes = [f"call {escape(c.call_id, False)}"] if c.call_id is not None else []
    if not c.call_recorded:
        notes.append("only its reply was recorded")
    header = f"#{c.index + 1} tool call {escape(c.name, False)}"
    if notes:
        header += f" ({'; '.join(notes)})"
    return [header, *_arguments(c.arguments), *_result(c.result)]


def _arguments(a: model.Arguments) -> list[str]:
    if a.state == "withheld":
        return [f"{INDENT}arguments: withheld"]
    if a.state == "absent":
        return [f"{INDENT}arguments: none recorded"]
    if a.state == "raw":
        why = f"; {escape(a.error, False)}" if a.error else ""
        return _value(f"arguments (kept raw{why})", a.value, INDENT)
    return _value("arguments", a.value, INDENT)


def _result(r: model.Result) -> list[str]:
    if r.state == "withheld":
        return [f"{INDENT}result: withheld"]
    if r.state == "unrecorded":
        return [f"{INDENT}result: not recorded"]
    lines = _value("error", r.error, INDENT) if r.state == "error" else []
    if r.value is not None:
        if r.value.is_json and r.value.text == "null":
            lines.append(f"{INDENT}result: null (recorded)")  # never read as "not recorded"
        else:
            lines.extend(_value("result", r.value, INDENT))
    return lines


def _value(header: str, value: model.Value | None, indent: str) -> list[str]:
    """`header:` and the value indented under it; `none` for no value, `(empty)` for an
    empty string."""
    if value is None:
        return [f"{indent}{header}: none"]
    if value.text == "":
        return [f"{indent}{header}: (empty)"]
    return [f"{indent}{header}:", *_indented(value.text, indent + INDENT)]


def _indented(text: str, indent: str) -> list[str]:
    return [indent + line if line else "" for line in escape(text).split("\n")]
