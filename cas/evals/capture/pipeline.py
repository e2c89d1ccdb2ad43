"""Production capture: invocations one rule selects (plus a sample of the rest) become records
under a content policy, stored in the background, never delaying or breaking the caller
(docs/capture.md).

One entry point, `submit(event)`: it only puts the event on a bounded queue. A worker thread
runs the rule, the sampling, the redactor and the store, in that order, and logs
`capture.stored` or `capture.failed` (never any content) on the `cas.capture` logger.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import inspect
import logging
import math
import os
import queue
import secrets
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from typing import Any, Callable

import msgspec
from blake3 import blake3

from cas.errors import InvalidArgument
from cas.evals.capture.records import (COMPLETED, FAILED, OMITTED, REDACTED, RULE, SAMPLE, STATUSES,
                                       CaptureEvent, CaptureRecord, RecordedTool, ToolCall)
from cas.format import encoding

PROTOCOL = ("start", "close", "append", "list")  # a store's methods, every one async
SWITCH_ENV = "CAS_CAPTURE"
RATE_ENV = "CAS_CAPTURE_SAMPLE_RATE"
OFF = frozenset(("off", "false", "0", "no", "disabled"))
QUEUE_SIZE = 10_000   # events waiting for the worker; beyond it a capture is dropped (counted)
FLUSH_TIMEOUT = 30.0  # seconds flush() waits at most when given no timeout: never for ever
RESET_TIMEOUT = 5.0   # seconds reset() waits for the queue, then for the worker to end
BATCH = 100           # events the worker takes at once (a store with append_many gets them)
logger = logging.getLogger("cas.capture")
_SAMPLE_KEY = blake3(b"cas:capture-sample\x00")


class _Registry:
    """The one rule, the one redactor, the stores by name, and the worker."""

    def __init__(self) -> None:
        self.rule: Callable | None = None
        self.store_name: str | None = None
        self.sample_rate: float | None = None
        self.redactor: Callable | None = None
        self.stores: dict[str, Any] = {}
        self.started: set[str] = set()
        self.queue: queue.Queue = queue.Queue(QUEUE_SIZE)
        self.counts: Counter = Counter()
        self.worker: threading.Thread | None = None
        self.lock = threading.Lock()
        self.stopping = threading.Event()  # reset(): end once the queue is empty


_R = _Registry()


# -- registration -----------------------------------------------------------------------------
def _one_argument(fn: Any, what: str) -> None:
    if not callable(fn):
        raise InvalidArgument(f"a capture {what} is a function of one argument, not "
                              f"{encoding.describe(fn)}", reason="CAPTURE_ARITY")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return  # a builtin: it says at its first call
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required_more = [p for p in params if p.default is p.empty and p.kind == p.KEYWORD_ONLY]
    if len(positional) != 1 or required_more or any(p.kind == p.VAR_POSITIONAL for p in params):
        name = getattr(fn, "__qualname__", repr(fn))
        raise InvalidArgument(f"a capture {what} takes exactly one argument (the "
                              f"{'event' if what == 'rule' else 'record'}); {name} takes "
                              f"{len(positional)}" + (" and more" if required_more else ""),
                              reason="CAPTURE_ARITY")


def _rate(value: Any, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or not 0 <= value <= 1:
        raise InvalidArgument(f"{source} {encoding.describe(value)} is not a share from 0 to 1",
                              reason="CAPTURE_SAMPLE_RATE")
    return float(value)


def protocol_problem(store: Any) -> str | None:
    """What `store` lacks of the store protocol (async start, close, append, list), or None."""
    for name in PROTOCOL:
        method = getattr(store, name, None)
        if method is None:
            return f"it has no {name}()"
        if not inspect.iscoroutinefunction(method):
            return f"its {name}() is not async (async def {name}(...))"
    return None


def register_store(name: str, store: Any) -> Any:
    """Register `store` under `name` (a rule names the store its captures go to). A store
    implements async start(), close(), append(record) and list(since=None, limit=100); it may
    also offer person_key(user_id) and async append_many(records)."""
    encoding.check_text(name, "store name")
    if not name:
        raise InvalidArgument("a store name is not empty", reason="CAPTURE_STORE_NAME")
    problem = protocol_problem(store)
    if problem is not None:
        raise InvalidArgument(f"store {name!r} ({type(store).__name__}) does not implement the "
                              f"capture store protocol: {problem}; a store has async start(), "
                              "close(), append(record) and list(since=None, limit=100)",
                              reason="CAPTURE_STORE_PROTOCOL")
    with _R.lock:
        if name in _R.stores and _R.stores[name] is not store:
            raise InvalidArgument(f"a store named {name!r} is already registered",
                                  reason="CAPTURE_STORE_EXISTS")
        _R.stores[name] = store
    return store


def rule(fn: Callable | None = None, *, store: str, sample_rate: float | None = None):
    """Register the capture rule: `rule(event) -> bool`, sync or async, one only. Captures go
    to the registered store `store`; `sample_rate` (0 to 1) also captures that share of the
    invocations the rule rejects (else CAS_CAPTURE_SAMPLE_RATE, else 0)."""
    def register(fn: Callable) -> Callable:
        _one_argument(fn, "rule")
        rate = None if sample_rate is None else _rate(sample_rate, "sample_rate")
        with _R.lock:
            if _R.rule is not None:
                raise InvalidArgument(f"a capture rule is already registered "
                                      f"({getattr(_R.rule, '__qualname__', _R.rule)}); there "
                                      "is one rule", reason="CAPTURE_RULE_EXISTS")
            if store not in _R.stores:
                known = ", ".join(sorted(_R.stores)) or "none"
                raise InvalidArgument(f"store {store!r} is not registered (registered: "
                                      f"{known}); register_store(name, store) first",
                                      reason="CAPTURE_STORE_UNKNOWN")
            _R.rule, _R.store_name, _R.sample_rate = fn, store, rate
        return fn
    return register if fn is None else register(fn)


def redactor(fn: Callable) -> Callable:
    """Register the redactor: `redactor(record) -> record`, sync or async, one only. With it
    the records keep content (`content: "redacted"`); without, structure only."""
    _one_argument(fn, "redactor")
    with _R.lock:
        if _R.redactor is not None:
            raise InvalidArgument("a capture redactor is already registered; there is one "
                                  "redactor", reason="CAPTURE_REDACTOR_EXISTS")
        _R.redactor = fn
    return fn


def enabled(environ=os.environ) -> bool:
    """False when CAS_CAPTURE is off (off, false, 0, no, disabled, in any letter case)."""
    return environ.get(SWITCH_ENV, "").strip().lower() not in OFF


def sample_rate(environ=os.environ) -> float:
    """The rate in force: the registered one, else CAS_CAPTURE_SAMPLE_RATE, else 0."""
    if _R.sample_rate is not None:
        return _R.sample_rate
    text = environ.get(RATE_ENV, "").strip()
    if not text:
        return 0.0
    try:
        return _rate(float(text), RATE_ENV)
    except (ValueError, InvalidArgument):
        logger.warning("capture.failed stage=config error=%s is not a share from 0 to 1",
                       RATE_ENV)
        return 0.0


# -- the caller's side --------------------------------------------------------------------------
def submit(event: CaptureEvent) -> bool:
    """Queue `event` (a CaptureEvent, a dict of its fields, or a function of no argument that
    the worker calls to build one) for capture; returns at once. False when capture is off, no
    rule is registered, or the queue is full (the capture is dropped and counted)."""
    if not enabled() or _R.rule is None:
        _R.counts["off"] += 1
        return False
    try:
        _R.queue.put_nowait(event)
    except queue.Full:
        _R.counts["dropped"] += 1
        return False
    if _R.worker is None:
        _start_worker()
    return True


def flush(timeout: float | None = None) -> bool:
    """Wait until every queued event has been handled (stored, rejected or failed); False if
    `timeout` seconds (None: FLUSH_TIMEOUT) passed first. Bounded whatever the rule, the
    redactor or the store do: one that hangs must not hang the caller's shutdown."""
    return _flush(_R, FLUSH_TIMEOUT if timeout is None else timeout)


def _flush(reg: _Registry, timeout: float) -> bool:
    """flush() of one registry (reset() flushes the one it has just replaced)."""
    q = reg.queue
    deadline = time.monotonic() + timeout
    with q.all_tasks_done:
        while q.unfinished_tasks:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            q.all_tasks_done.wait(left)
    return True


def stats() -> dict[str, int]:
    """How many events were stored, rejected by the rule, sampled, dropped (queue full),
    refused while off, failed (rule, redactor or store raised), or dropped by the redactor."""
    return dict(_R.counts)


def reset() -> None:
    """Stop the worker (after the queue is handled), close the stores it started, and forget
    every registration and count (for tests, and to reconfigure). Bounded: it waits at most
    RESET_TIMEOUT for the queue and as long again for the worker; a worker still busy then
    (a rule or store that hangs) is left to end on its own, and its registry with it."""
    global _R
    old = _R
    _R = _Registry()  # from here on, submissions go to the new registry
    old.stopping.set()  # a worker that cannot be told through its full queue sees this
    if old.worker is not None and old.worker.is_alive():
        _flush(old, RESET_TIMEOUT)
        try:  # the worker closes its stores and ends; a full queue must not block us
            old.queue.put(None, timeout=RESET_TIMEOUT)
        except queue.Full:
            logger.warning("capture.failed stage=reset error=the worker did not drain its "
                           "queue in %.0f s", RESET_TIMEOUT)
            return
        old.worker.join(RESET_TIMEOUT)


def _start_worker() -> None:
    with _R.lock:
        if _R.worker is None:
            _R.worker = threading.Thread(target=_work, args=(_R,), name="cas-capture",
                                         daemon=True)
            _R.worker.start()


@atexit.register
def _drain_at_exit() -> None:
    if _R.worker is not None:
        flush(2.0)


# -- the worker ----------------------------------------------------------------------------------
def _work(reg: _Registry) -> None:
    loop = asyncio.new_event_loop()
    try:
        while True:
            first = reg.queue.get()
            batch = [first]
            while len(batch) < BATCH:
                try:
                    batch.append(reg.queue.get_nowait())
                except queue.Empty:
                    break
            stop = None in batch
            events = [e for e in batch if e is not None]
            try:
                loop.run_until_complete(_handle(reg, events))
            except BaseException as exc:  # never: _handle catches; the worker must not die
                logger.warning("capture.failed stage=worker error=%s", type(exc).__name__)
            finally:
                for _ in batch:
                    reg.queue.task_done()
            if stop or (reg.stopping.is_set() and reg.queue.empty()):
                loop.run_until_complete(_close(reg))
                return
    finally:
        loop.close()


async def _close(reg: _Registry) -> None:
    for name in sorted(reg.started):
        try:
            await reg.stores[name].close()
        except BaseException as exc:  # user code: see _record
            logger.warning("capture.failed stage=store store=%s error=%s", name,
                           type(exc).__name__)


def _failed(reg: _Registry, stage: str, event, exc: BaseException | str) -> None:
    reg.counts["failed"] += 1
    why = exc if isinstance(exc, str) else type(exc).__name__
    logger.warning("capture.failed stage=%s agent=%s invocation=%s error=%s", stage,
                   getattr(event, "agent_name", "?"), getattr(event, "invocation_id", "?"), why)


def sampled(invocation_id: str, rate: float) -> bool:
    """Whether an invocation the rule rejected falls in the sample: decided by its id (BLAKE3
    to a number in [0, 1)), so every replica decides alike; a random draw without an id."""
    if rate <= 0:
        return False
    if rate >= 1:
        return True
    if not invocation_id:
        return secrets.randbelow(1 << 53) < rate * (1 << 53)
    h = _SAMPLE_KEY.copy()
    h.update(invocation_id.encode("utf-8", "surrogatepass"))
    return int.from_bytes(h.digest()[:8], "big") / 2 ** 64 < rate


async def _handle(reg: _Registry, events: list) -> None:
    kept: list[CaptureRecord] = []
    store_name = reg.store_name
    store = reg.stores.get(store_name) if store_name else None
    for event in events:
        record = await _record(reg, event, store)
        if record is not None:
            kept.append(record)
    if not kept or store is None:
        return
    try:
        if store_name not in reg.started:
            await store.start()
            reg.started.add(store_name)
        many = getattr(store, "append_many", None)
        if many is not None and inspect.iscoroutinefunction(many):
            await many(kept)
        else:
            for record in kept:
                await store.append(record)
    except BaseException as exc:  # user code: see _record
        for record in kept:
            _failed(reg, "store", record, exc)
        return
    for record in kept:
        reg.counts["stored"] += 1
        logger.info("capture.stored id=%s agent=%s store=%s reasons=%s", record.id,
                    record.agent_name, store_name, ",".join(record.reasons))


async def _called(fn: Callable, arg: Any) -> Any:
    """`fn(arg)`, awaited when it is async (a rule or a redactor may be either)."""
    value = fn(arg)
    return await value if inspect.isawaitable(value) else value


async def _record(reg: _Registry, event: Any, store: Any) -> CaptureRecord | None:
    """The record of one event, or None (rejected, or failed: logged and counted).

    Every call of user code (the event builder, the rule, person_key, the redactor; the store
    in _handle) catches BaseException, not Exception: SystemExit, KeyboardInterrupt or
    asyncio.CancelledError raised by that code would otherwise end the worker for good, and
    nothing would be captured or counted again. None of them can stop the process from this
    thread anyway (SystemExit ends only the thread it is raised in, and a real Ctrl-C is
    delivered to the main thread, never here), so each is counted as a failure and logged."""
    try:
        event = _event(event)
    except BaseException as exc:  # a dict that is no event, or a span processor's failed
        _failed(reg, "event", event, exc)
        return None
    try:
        accepted = await _called(reg.rule, event)
    except BaseException as exc:
        _failed(reg, "rule", event, exc)
        return None
    if type(accepted) is not bool:
        # A rule that forgot its return (None) or returns a list or a match object would
        # otherwise capture by its truthiness: refused, so the mistake shows in the counts.
        _failed(reg, "rule", event, f"the rule returned {type(accepted).__name__}, not a bool")
        return None
    if accepted:
        reasons = (RULE,)
    elif sampled(event.invocation_id, sample_rate()):
        reasons = (SAMPLE,)
        reg.counts["sampled"] += 1
    else:
        reg.counts["rejected"] += 1
        return None
    try:
        keyed = store.person_key if store is not None and hasattr(store, "person_key") else None
        person = keyed(event.user_id) if keyed is not None and event.user_id else None
    except BaseException as exc:
        _failed(reg, "store", event, exc)
        return None
    try:
        record = _build(event, reasons, person, content=reg.redactor is not None)
    except BaseException as exc:  # a tool call of the wrong shape; a repr() that raised
        _failed(reg, "event", event, exc)
        return None
    if reg.redactor is None:
        return record
    try:
        redacted = await _called(reg.redactor, record)
    except BaseException as exc:
        _failed(reg, "redactor", event, exc)
        return None
    try:
        if not isinstance(redacted, CaptureRecord):
            raise TypeError(f"it returned a {type(redacted).__name__}, not a CaptureRecord")
        # Its fields checked as a stored record's are (a str input, JSON tool payloads...).
        redacted = msgspec.convert(msgspec.to_builtins(redacted), CaptureRecord)
    except (TypeError, msgspec.ValidationError) as exc:
        reg.counts["redactor_dropped"] += 1
        _failed(reg, "redactor", event, f"{type(exc).__name__}: the capture is dropped")
        return None
    # The redactor decides the content, never the identity or what policy ran.
    return redacted.replace(schema_version=record.schema_version, id=record.id,
                            captured_at=record.captured_at, person=record.person,
                            content=REDACTED, reasons=record.reasons)


_EVENT = msgspec.convert


def _event(event: Any) -> CaptureEvent:
    if isinstance(event, CaptureEvent):
        return event
    if callable(event):  # built in the worker (the span processor's: never on the caller's path)
        return _event(event())
    return _EVENT(event, CaptureEvent)  # a dict, for callers without the Struct


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _tool(call: Any) -> ToolCall:
    return call if isinstance(call, ToolCall) else msgspec.convert(call, ToolCall)


def _build(event: CaptureEvent, reasons: tuple, person: str | None,
           content: bool) -> CaptureRecord:
    """The record of an event: content only when a redactor will see it (it decides what is
    kept); never the session id, the user id or the metadata."""
    status = event.status if event.status in STATUSES else FAILED
    tools = []
    for call in map(_tool, event.tool_calls):
        failed = call.failed
        tools.append(RecordedTool(name=str(call.name), failed=failed,
                                  arguments=_plain(call.arguments) if content else None,
                                  result=_plain(call.result) if content else None,
                                  error=_plain(call.error) if content else None))
    return CaptureRecord(
        id="cr-" + secrets.token_hex(16), captured_at=_now(), agent_name=str(event.agent_name),
        invocation_id=str(event.invocation_id), reasons=reasons, status=status,
        error_type=None if event.error_type is None else str(event.error_type),
        input_text=str(event.input_text) if content else "",
        output_text=str(event.output_text) if content else "",
        tool_calls=tuple(tools), content=OMITTED, person=person)


def _plain(value: Any) -> Any:
    """`value` as JSON values (a record is JSON); what is not JSON becomes its repr."""
    try:
        encoding.check_json(value)
        return msgspec.json.decode(encoding.encode(value))
    except (InvalidArgument, TypeError, msgspec.EncodeError):
        return repr(value)


# -- integrations: a decorator / context manager ----------------------------------------------
def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return encoding.encode(value).decode("utf-8")
    except Exception:
        return repr(value)


class invocation:  # noqa: N801 - used as a decorator: @capture.invocation(agent="support")
    """Capture an agent function's invocations: as a decorator (sync or async), each call is
    one invocation (input: `input(*args, **kwargs)`, else the first argument as text; output:
    `output(result)`, else the result as text; a raised exception makes it `failed` with its
    type, and is raised on); as a context manager, set `input_text`/`output_text` and call
    `tool(...)` inside the block. `session_id`/`user_id` may be functions of the call's
    arguments. The event is submitted when the call or the block ends."""

    def __init__(self, agent: str, *, session_id: Any = None, user_id: Any = None,
                 transport: str = "python", metadata: dict | None = None,
                 input: Callable | None = None, output: Callable | None = None,
                 invocation_id: str | None = None) -> None:
        encoding.check_text(agent, "agent name")
        self.agent, self.transport = agent, transport
        self.session_id, self.user_id = session_id, user_id
        self.metadata = metadata or {}
        self._input, self._output = input, output
        self.invocation_id = invocation_id
        self.input_text = ""
        self.output_text = ""
        self.tool_calls: list[ToolCall] = []

    def tool(self, name: str, arguments: Any = None, result: Any = None, error: Any = None,
             status: str | None = None) -> None:
        """Note one tool call of the invocation in progress."""
        self.tool_calls.append(ToolCall(name=name, arguments=arguments, result=result,
                                        error=error, status=status))

    def _event(self, failed: BaseException | None, args=(), kwargs=None) -> CaptureEvent:
        kwargs = kwargs or {}

        def value(v):
            return v(*args, **kwargs) if callable(v) else v
        return CaptureEvent(
            agent_name=self.agent, invocation_id=self.invocation_id or secrets.token_hex(16),
            session_id=value(self.session_id), user_id=value(self.user_id),
            transport=self.transport, status=FAILED if failed is not None else COMPLETED,
            input_text=self.input_text, output_text=self.output_text,
            tool_calls=tuple(self.tool_calls),
            error_type=type(failed).__name__ if failed is not None else None,
            metadata=self.metadata)

    def _submit(self, failed, args=(), kwargs=None) -> None:
        try:
            submit(self._event(failed, args, kwargs))
        except Exception as exc:  # capture never breaks the caller
            _failed(_R, "submit", self, exc)

    def __enter__(self) -> "invocation":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._submit(exc)
        return False

    async def __aenter__(self) -> "invocation":
        return self

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        self._submit(exc)
        return False

    def _fresh(self, args, kwargs) -> "invocation":
        inv = object.__new__(invocation)  # per call, and cheap: nothing to check again
        inv.__dict__.update(self.__dict__)
        inv.tool_calls, inv.invocation_id = [], None
        try:
            inv.input_text = _text(self._input(*args, **kwargs) if self._input is not None
                                   else (args[0] if args else ""))
        except Exception:
            inv.input_text = ""
        return inv

    def _finish(self, inv: "invocation", result: Any, args, kwargs) -> None:
        try:
            inv.output_text = _text(self._output(result) if self._output is not None
                                    else result)
        except Exception:
            inv.output_text = ""
        inv._submit(None, args, kwargs)

    def __call__(self, fn: Callable) -> Callable:
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def captured_async(*args, **kwargs):
                if _R.rule is None or not enabled():
                    return await fn(*args, **kwargs)  # nothing would be kept: build nothing
                inv = self._fresh(args, kwargs)
                try:
                    result = await fn(*args, **kwargs)
                except BaseException as exc:
                    inv._submit(exc, args, kwargs)
                    raise
                self._finish(inv, result, args, kwargs)
                return result
            return captured_async

        @functools.wraps(fn)
        def captured(*args, **kwargs):
            if _R.rule is None or not enabled():
                return fn(*args, **kwargs)
            inv = self._fresh(args, kwargs)
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                inv._submit(exc, args, kwargs)
                raise
            self._finish(inv, result, args, kwargs)
            return result
        return captured
