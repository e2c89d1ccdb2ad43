"""What every importer shares: its options, reading documents, joining tool replies to their
calls, tool arguments that are not JSON, run ids, tenant and person, and refusals.

An importer is a pure function from a format's documents to runs in cas's own schema
(docs/runs.md); it knows nothing of storage. What a format carries that the run schema has no
field for goes to the run's `metadata` (or `extra`), never dropped silently.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from blake3 import blake3

from cas.errors import InvalidArgument
from cas.format import encoding


class Options(NamedTuple):
    """How an import names what the format does not: a fixed tenant or person, or the field
    (a dotted path in the document, or an attribute name of a span) that holds it."""

    tenant: str | None = None
    person: str | None = None
    tenant_from: str | None = None
    person_from: str | None = None


def refuse(source: str, message: str, **fields) -> InvalidArgument:
    """The refusal of a document that is not what its format reads."""
    return InvalidArgument(f"{source}: {message}", reason="NOT_THIS_FORMAT", **fields)


# -- warnings --------------------------------------------------------------------------------
class Warning(NamedTuple):  # noqa: A001 - an import's warning, not Python's category
    """Something of a file an importer neither turned into steps nor kept under `metadata`:
    said, never dropped in silence. `run_id` names the run it concerns (None: the file)."""

    source: str
    message: str
    run_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "run_id": self.run_id, "message": self.message}


_WARNINGS: contextvars.ContextVar[list | None] = contextvars.ContextVar("cas_import_warnings",
                                                                       default=None)


def warn(source: str, message: str, run_id: str | None = None) -> None:
    """Say what an import could not keep; collected by the `collecting()` around it (outside
    one, as in a converter called on its own, the warning has nowhere to go and is dropped)."""
    sink = _WARNINGS.get()
    if sink is not None:
        sink.append(Warning(source, message, run_id))


@contextlib.contextmanager
def collecting() -> Iterator[list[Warning]]:
    """The warnings `warn` gives inside the block, in the order given."""
    sink: list[Warning] = []
    token = _WARNINGS.set(sink)
    try:
        yield sink
    finally:
        _WARNINGS.reset(token)


# -- documents ---------------------------------------------------------------------------------
def parse_documents(data: bytes, source: str) -> list[Any]:
    """The JSON values of a file: one JSON document, or JSON Lines of them (a file whose whole
    text is not one document is read line by line; blank lines are skipped)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgument(f"{source}: an import reads bytes, not {encoding.describe(data)}")
    data = bytes(data)
    try:
        return [encoding.parse_json(data)]
    except InvalidArgument as whole:
        lines = [(n, line) for n, line in enumerate(data.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise encoding.in_context(whole, source) from None
    out = []
    for lineno, line in lines:
        try:
            out.append(encoding.parse_json(line))
        except InvalidArgument as exc:
            raise encoding.in_context(exc, f"{source} line {lineno}", line=lineno) from None
    return out


def each_document(values: list[Any], is_one: Callable[[Any], bool]) -> list[Any]:
    """The documents among parsed values: a value is one document when `is_one(value)`, and a
    JSON array of documents is read as its members (one document per file, an array of them,
    or JSON Lines of them)."""
    out = []
    for value in values:
        if isinstance(value, list) and value and not is_one(value) and all(map(is_one, value)):
            out.extend(value)
        else:
            out.append(value)
    return out


def listed(value: Any) -> list:
    """`value` if it is a list, else none: a member a format documents as a list may hold
    anything in a damaged or foreign document, and is then read as empty, never iterated."""
    return value if isinstance(value, list) else []


def lookup(value: Any, path: str) -> Any:
    """The value at a dotted path (`info.task.user_id`, `items.0.id`), or None. A key that
    itself holds dots (a span attribute such as `user.id`) is found whole first."""
    if isinstance(value, dict) and path in value:
        return value[path]
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


# -- tool calls --------------------------------------------------------------------------------
def tool_arguments(raw: Any) -> dict[str, Any]:
    """The step fields for a tool call's arguments as recorded: a JSON object or array as
    `arguments`; a string is parsed as JSON (as the OpenAI APIs send them); anything else is
    kept verbatim as `arguments_raw` with `arguments_error` saying why (never dropped)."""
    if raw is None:
        return {}
    if isinstance(raw, (dict, list)):
        return {"arguments": raw}
    if isinstance(raw, str):
        if not raw.strip():
            return {"arguments": {}}  # the APIs send "" for a call without arguments
        try:
            value = json.loads(raw)
        except ValueError as exc:
            return {"arguments_raw": raw, "arguments_error": f"not JSON: {exc}"}
        if isinstance(value, (dict, list)):
            return {"arguments": value}
        return {"arguments_raw": raw,
                "arguments_error": "JSON, but not an object or an array"}
    return {"arguments_raw": raw, "arguments_error": "not a JSON object or array"}


class CallJoiner:
    """Joins each tool reply to the nearest preceding unanswered call with its id (real logs
    reuse ids within one conversation). Calls are the tool_call steps, in order."""

    def __init__(self) -> None:
        self._open: dict[str, list[dict]] = {}

    def call(self, call_id: str | None, step: dict) -> dict:
        """Record a call step (it is also returned), open until a reply with its id comes."""
        if call_id is not None:
            self._open.setdefault(call_id, []).append(step)
        return step

    def reply(self, call_id: str | None) -> dict | None:
        """The call step a reply with `call_id` answers, or None (an orphan reply)."""
        waiting = self._open.get(call_id) if call_id is not None else None
        if not waiting:
            return None
        return waiting.pop()  # the nearest preceding one


# -- runs --------------------------------------------------------------------------------------
def derived_run_id(fmt: str, *parts: Any, content: Any = None) -> str:
    """A run id from the format's own ids (`parts`: trace id, conversation id, sample id and
    epoch ...), or, when it has none, from the document's content: importing the same export
    twice gives the same ids, so it is a no-op."""
    named = [str(p) for p in parts if p is not None and p != ""]
    if named:
        return f"{fmt}:" + ":".join(named)
    digest = blake3(encoding.encode(content)).hexdigest()[:32]
    return f"{fmt}:{digest}"


def finish_run(run: dict, options: Options, *where: Any, source: str) -> dict:
    """`run` with its tenant and person from the options: a fixed value, or the field
    `tenant_from`/`person_from` names in the first of `where` (documents, attribute maps) that
    holds it. A run without a tenant is refused, saying how to give one."""
    for field, fixed, path in (("tenant", options.tenant, options.tenant_from),
                               ("person", options.person, options.person_from)):
        value = fixed
        if value is None and path is not None:
            value = next((v for v in (lookup(w, path) for w in where) if v is not None), None)
            if value is not None and not isinstance(value, str):
                value = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) \
                    else str(value)
        if value is not None:
            run[field] = value
    if not run.get("tenant"):
        hint = f" (no {options.tenant_from!r} in it)" if options.tenant_from else ""
        raise InvalidArgument(f"{source}: run {run.get('run_id')!r} has no tenant{hint}: give "
                              "--tenant TENANT, or --tenant-from FIELD naming where the format "
                              "keeps it", reason="TENANT_REQUIRED", run_id=run.get("run_id"))
    return run


def kept(value: dict, known: Iterable[str]) -> dict:
    """The members of `value` an importer did not map: kept in the run's metadata."""
    known = set(known)
    return {k: v for k, v in value.items() if k not in known}
