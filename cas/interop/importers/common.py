"""What every importer shares: its options, reading documents, joining tool replies to their
calls, tool arguments that are not JSON, run ids, tenant and person, and refusals.

An importer is a pure function from a format's documents to runs in cas's own schema
(docs/runs.md); it knows nothing of storage. What a format carries that the run schema has no
field for goes to the run's `metadata` (or `extra`), never dropped silently.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
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


def lines_or_whole(stream: Any, source: str) -> tuple[bytes | None, Iterator[tuple[int, Any]]]:
    """A binary file read as `parse_documents` would, without reading it whole when it is
    JSON Lines: `(None, values)` when its first non-blank line is a JSON value on its own and
    another non-blank line follows (then the whole text cannot be one document), `values`
    yielding `(line number, parsed value)` as the lines are read (a line that is not JSON is
    refused when it is reached, named by its number); else `(data, empty)`: the file's bytes,
    to read whole (one document, or not JSON)."""
    head: list[bytes] = []
    lines = iter(stream)
    first = None
    for lineno, line in enumerate(lines, 1):
        head.append(line)
        if line.strip():
            first = lineno
            break
    if first is None:
        return b"".join(head), iter(())
    try:
        value = encoding.parse_json(head[-1])
    except InvalidArgument:
        return b"".join(head) + stream.read(), iter(())
    for line in lines:
        head.append(line)
        if line.strip():
            break
    else:
        return b"".join(head), iter(())

    def values() -> Iterator[tuple[int, Any]]:
        yield first, value
        rest = head[first:]
        head.clear()  # (nothing of the file is kept as it is read)
        for lineno, line in enumerate(itertools.chain(rest, lines), first + 1):
            if not line.strip():
                continue
            try:
                yield lineno, encoding.parse_json(line)
            except InvalidArgument as exc:
                raise encoding.in_context(exc, f"{source} line {lineno}", line=lineno) from None

    return None, values()


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
        try:  # the native reader's depth limit: never the recursive stdlib reader
            value = encoding.parse_json(raw)
        except InvalidArgument as exc:
            why = exc.message if exc.reason == "JSON_TOO_DEEP" else f"not JSON: {exc.message}"
            return {"arguments_raw": raw, "arguments_error": why}
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
    check_run(run, source)
    return run


# Set while `convert_stream` hands runs straight to an import, whose `parse_run` makes the
# same `check_json` of every run: a run is then walked once, not twice (the refusal then names
# the run by its place among the import's runs, `$[N]`).
_CHECKED_ON_IMPORT: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "cas_import_checks_json", default=False)


@contextlib.contextmanager
def checked_on_import() -> Iterator[None]:
    """Inside the block, `check_run` leaves `check_json` to the import that stores the runs
    (`convert_stream`: never around a `convert` whose runs a caller may keep)."""
    token = _CHECKED_ON_IMPORT.set(True)
    try:
        yield
    finally:
        _CHECKED_ON_IMPORT.reset(token)


def check_run(run: dict, source: str) -> None:
    """Refuse a converted run a native runs file could not hold: a value JSON cannot carry or
    nested deeper than MAX_DEPTH (`encoding.check_json`), or more than MAX_LINE bytes of JSON
    (the native reader's line cap: a 100 MB message is refused here as it is there)."""
    from cas.repo.runs import MAX_LINE  # the one cap, where the native reader keeps it

    where = f"{source}: run {encoding.describe(run.get('run_id'))}"
    if not _CHECKED_ON_IMPORT.get():
        try:
            encoding.check_json(run)
        except InvalidArgument as exc:
            raise encoding.in_context(exc, where, run_id=run.get("run_id")) from None
    size = len(encoding.encode(run))
    if size > MAX_LINE:
        raise InvalidArgument(f"{where} is {size} bytes of JSON; a run is at most {MAX_LINE} "
                              "bytes, as a line of a native runs file is", reason="RUN_TOO_LARGE",
                              run_id=run.get("run_id"), limit=MAX_LINE, size=size)


def kept(value: dict, known: Iterable[str]) -> dict:
    """The members of `value` an importer did not map: kept in the run's metadata."""
    known = set(known)
    return {k: v for k, v in value.items() if k not in known}


def unread(exchange: Any, body: Any) -> str | None:
    """Why the response of a recorded call (a vcr exchange) could not be read (None: it
    was): its body is not there, or is not JSON; said in the run's outcome and a warning."""
    if isinstance(body, dict) and isinstance(body.get("undecoded_body"), dict):
        return f"its body could not be decoded ({body['undecoded_body'].get('reason')})"
    if isinstance(body, (dict, list)):
        return None
    coding = exchange.headers.get("content-encoding")
    if body is None:
        if exchange.status is None:
            return None  # a request recorded without its response: nothing to read
        return "its body could not be read" + (f" (Content-Encoding: {coding})" if coding
                                               else " (empty, or bytes that are not text)")
    return "its body is not JSON"


# -- re-sent history ---------------------------------------------------------------------------
# Agents re-send earlier turns in another form than the model produced them: a text block
# dropped, `content: ""` for null, `refusal`/`annotations` left out, keys reordered, arguments
# re-serialised. What identifies a turn is what it did, not its bytes: its calls by call id
# (a call without one by name and PARSED arguments), its replies by the id they answer, and
# else its text with runs of white space as one space.
_CALL_BLOCKS = ("tool_use", "server_tool_use", "mcp_tool_use", "function_call",
                "custom_tool_call", "tool_call")
_REPLY_BLOCKS = ("tool_result", "function_call_output", "custom_tool_call_output",
                 "tool_call_response")


def parsed_arguments(raw: Any) -> Any:
    """Arguments as the value they mean: a JSON text parsed (spacing and key order then do
    not matter), anything else as it is."""
    if isinstance(raw, str):
        try:
            return encoding.parse_json(raw.encode("utf-8", "surrogatepass"))
        except InvalidArgument:
            return raw.strip()
    return raw


def call_identity(call_id: Any, name: Any, arguments: Any) -> tuple:
    """One tool call, however it is re-sent: its id, or (no id) its name and parsed
    arguments, compared by canonical JSON."""
    if isinstance(call_id, str) and call_id:
        return ("id", call_id)
    try:
        args = encoding.encode(parsed_arguments(arguments)).decode()
    except Exception:  # noqa: BLE001 - a value JSON cannot hold: compared by its text
        args = repr(arguments)
    return ("call", name, args)


def _words(text: str) -> str:
    return " ".join(text.split())


class Turn(NamedTuple):
    """What identifies a message when it is re-sent (`turn_of`)."""

    role: Any
    calls: tuple          # call identities, in order
    replies: tuple        # the call ids (or names) the message answers
    texts: tuple          # its text blocks, white space collapsed, empty ones left out


def turn_of(message: Any) -> Turn:
    """A Chat Completions message, an Anthropic message or a Responses item as a `Turn`."""
    if not isinstance(message, dict):
        return Turn("value", (), (), (_words(str(message)),))
    role = message.get("role") or message.get("type")
    calls, replies, texts = [], [], []

    def block(b: Any) -> None:
        if isinstance(b, str):
            texts.append(b)
            return
        if not isinstance(b, dict):
            return
        kind = b.get("type")
        if kind in _CALL_BLOCKS:
            calls.append(call_identity(b.get("call_id") or b.get("id"), b.get("name"),
                                       b.get("input", b.get("arguments"))))
        elif kind in _REPLY_BLOCKS:
            replies.append(b.get("tool_use_id") or b.get("call_id") or b.get("id"))
        elif isinstance(b.get("text"), str):
            texts.append(b["text"])
        elif isinstance(b.get("refusal"), str):
            texts.append(b["refusal"])

    if message.get("type") in _CALL_BLOCKS or message.get("type") in _REPLY_BLOCKS:
        block(message)
    else:
        content = message.get("content")
        for b in content if isinstance(content, list) else [content]:
            block(b)
    for c in listed(message.get("tool_calls")):
        if isinstance(c, dict):
            fn = c.get("function") if isinstance(c.get("function"), dict) else c
            calls.append(call_identity(c.get("id"), fn.get("name"), fn.get("arguments")))
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        calls.append(call_identity(None, legacy.get("name"), legacy.get("arguments")))
    if message.get("role") in ("tool", "function"):
        replies.append(message.get("tool_call_id") or message.get("name"))
    return Turn(role, tuple(calls), tuple(replies),
                tuple(w for w in map(_words, texts) if w))


def same_turn(a: Any, b: Any) -> bool:
    """`b` is `a` re-sent (or `a` is `b`): the same role, calls and replies, and the text of
    one is the other's with text blocks dropped or text appended (a turn that makes calls or
    answers them is identified by those alone)."""
    ta, tb = turn_of(a), turn_of(b)
    if (ta.role, ta.calls, ta.replies) != (tb.role, tb.calls, tb.replies):
        return False
    if ta.calls or ta.replies or ta.texts == tb.texts:
        return True
    short, long_ = sorted((ta.texts, tb.texts), key=len)
    joined_s, joined_l = " ".join(short), " ".join(long_)
    return _subsequence(short, long_) or joined_l.startswith(joined_s)


def _subsequence(short: tuple, long_: tuple) -> bool:
    it = iter(long_)
    return all(any(x == y for y in it) for x in short)


def resends(history: list, earlier: list) -> bool:
    """`history` begins with the turns of `earlier`, each re-sent in any form `same_turn`
    accepts."""
    return len(history) >= len(earlier) and all(map(same_turn, earlier, history))


def conversations(calls: list, history: Callable[[Any], list | None],
                  produced: Callable[[Any], list] = lambda call: []) -> list[list]:
    """Model calls grouped into conversations, each in recorded order. A call continues the
    most recent conversation whose last call's history, with or without its reply
    (`produced(call)`: the messages its response added), its own history re-sends (`resends`:
    a turn re-sent in another form is the same turn), or whose tool calls
    (by id) it answers, even when other turns differ (an agent that swaps its system prompt
    on a handoff); conversations may interleave (an agent whose tool runs another agent).
    `history(call)` is None for a call that is not a model call of the format (skipped)."""
    groups: list[list] = []
    ends: list[tuple[list, list, set]] = []  # per group: its last history, reply, call ids
    for call in calls:
        sent = history(call)
        if sent is None:
            continue
        sent = list(sent)
        answered = {r for m in sent for r in turn_of(m).replies if isinstance(r, str)}
        found = None
        for i in range(len(groups) - 1, -1, -1):
            before, reply, ids = ends[i]
            # (the history alone, without the reply: a client that compacts its context
            # drops the reply and goes on)
            if resends(sent, before + reply) or resends(sent, before) or \
                    (ids and ids <= answered):
                found = i
                break
        if found is None:
            groups.append([call])
            ends.append(([], [], set()))
            found = len(groups) - 1
        else:
            groups[found].append(call)
        reply = list(produced(call))
        ids = {c[1] for m in reply for c in turn_of(m).calls if c[0] == "id"}
        ends[found] = (sent, reply, ids)
    return groups
