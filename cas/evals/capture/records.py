"""What capture sees and keeps: the event of one production invocation, and the record stored of
it under the content policy (docs/capture.md)."""

from __future__ import annotations

from typing import Any

import msgspec

from cas.format import encoding

SCHEMA_VERSION = 1
COMPLETED, FAILED = STATUSES = ("completed", "failed")
OMITTED, REDACTED = "omitted", "redacted"  # a record's content: no redactor ran, or one did
RULE, SAMPLE = "rule", "sample"  # why a record was kept: the rule chose it, or the sample


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call of an invocation, as the agent saw it. `status` is what a tool message
    says of itself (LangGraph's `status="error"`), when there is one."""

    name: str
    arguments: Any = None
    result: Any = None
    error: Any = None
    status: str | None = None

    @property
    def failed(self) -> bool:
        """The guess `tool_error` is made of: an error, a result that is an object with an
        `error` field, or a status `error`."""
        return self.error is not None or self.status == "error" or \
            (isinstance(self.result, dict) and "error" in self.result)


class CaptureEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One invocation, given to the rule. `session_id`, `user_id` and `metadata` are for the
    rule alone: no record ever holds them."""

    agent_name: str
    invocation_id: str
    session_id: str | None = None
    user_id: str | None = None
    transport: str = "python"
    status: str = COMPLETED
    input_text: str = ""
    output_text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    error_type: str | None = None
    metadata: dict[str, Any] = {}

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    @property
    def tool_error(self) -> bool:
        return any(t.failed for t in self.tool_calls)


class RecordedTool(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A tool call as a record keeps it: its name and whether it failed always; its arguments,
    result and error text only under a redactor (they are content)."""

    name: str
    failed: bool
    arguments: Any = None
    result: Any = None
    error: Any = None


class CaptureRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The stored record of one captured invocation (schema_version 1). `content` says which
    policy ran: `omitted` (no redactor: input and output are empty strings, and every tool
    call's arguments, result and error are null) or `redacted` (a redactor ran; it does not
    certify that no personal data is left). `person` is the store's keyed person digest of
    the user (`pk:...`), never the user id, or null."""

    schema_version: int = SCHEMA_VERSION
    id: str
    captured_at: str
    agent_name: str
    invocation_id: str
    reasons: tuple[str, ...]
    status: str
    error_type: str | None = None
    input_text: str = ""
    output_text: str = ""
    tool_calls: tuple[RecordedTool, ...] = ()
    content: str = OMITTED
    person: str | None = None

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    @property
    def tool_error(self) -> bool:
        return any(t.failed for t in self.tool_calls)

    def replace(self, **changes: Any) -> "CaptureRecord":
        """A copy with `changes` (what a redactor returns)."""
        return msgspec.structs.replace(self, **changes)


_RECORD = msgspec.json.Decoder(CaptureRecord)


def format_record(record: CaptureRecord) -> bytes:
    """One record as a line of canonical JSON (without the newline)."""
    return encoding.encode(record)


def parse_record(line: bytes) -> CaptureRecord:
    """A record from one line; msgspec.ValidationError or DecodeError for what is none."""
    record = _RECORD.decode(line)
    if record.schema_version != SCHEMA_VERSION:
        raise msgspec.ValidationError(f"schema_version {record.schema_version} is not "
                                      f"{SCHEMA_VERSION}")
    return record
