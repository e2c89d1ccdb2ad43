"""Request matching: the request key of an exchange, the cassette modes, and one case's Cassette
that answers requests from its recordings (strict, ordered) and records the rest. Pure: what
it answers from and what it recorded are handed in and out (docs/suites.md)."""

from __future__ import annotations

import base64
import functools
import inspect
import os
import threading
from collections import deque
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import msgspec

from cas.errors import FailedPrecondition, InvalidArgument
from cas.evals.replay import differences
from cas.format import encoding, redaction
from cas.format.records import CassetteExchange, request_key

REPLAY, RECORD, RECORD_MISSING, LIVE = MODES = ("replay", "record", "record-missing", "live")
MODE_ENV = "CAS_CASSETTE_MODE"
CALL, HTTP = ADAPTERS = ("call", "http")
SHOWN = 3  # unused exchanges named in a message
# A stale request's message shows a window of each side's canonical JSON around the first
# character where they differ: bounded whatever the requests' length, one line.
WINDOW_BEFORE, WINDOW_AFTER = 32, 32
MAX_PATH = 120  # characters of a JSON pointer shown
MAX_NAME = 120  # characters of a call's name shown
RERECORD = " (record it again with --cassette-mode record or record-missing)"
# The errors are public as cas.cassettes.X, and a case's reason names the class of what its
# executor raised (`the executor raised cas.cassettes.StaleCassette: ...`): a reason, which a
# result's digest covers, must not change when a module moves.
PUBLIC_MODULE = "cas.cassettes"

_DECODE = msgspec.json.Decoder().decode


class StaleCassette(FailedPrecondition):
    """A request the cassette has no recording of, in a mode that must not call through."""

    __module__ = PUBLIC_MODULE
    reason = "CASSETTE_STALE"


class UnusedExchanges(FailedPrecondition):
    """A strict cassette whose run left recorded exchanges unrequested."""

    __module__ = PUBLIC_MODULE
    reason = "CASSETTE_UNUSED"


class RecordedError(Exception):
    """A recorded call that raised, raised again on replay: `type` is the recorded exception's
    class name, the message its text."""

    __module__ = PUBLIC_MODULE

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}" if message else type_name)
        self.type = type_name
        self.message = message


# -- modes and request keys ------------------------------------------------------------------
def _ci(environ: Mapping[str, str]) -> bool:
    """The CI variable is set (to anything but an explicit 0, false or no)."""
    return "CI" in environ and environ["CI"].strip().lower() not in ("0", "false", "no")


def resolve_mode(mode: Any = None, environ: Mapping[str, str] | None = None) -> str:
    """The mode given, else CAS_CASSETTE_MODE, else `replay` under CI (the CI variable set)
    and `record-missing` otherwise."""
    environ = os.environ if environ is None else environ
    source = "cassette mode"
    if mode is None and environ.get(MODE_ENV):
        mode, source = environ[MODE_ENV], MODE_ENV
    if mode is None:
        return REPLAY if _ci(environ) else RECORD_MISSING
    if mode not in MODES:
        raise InvalidArgument(f"{source} {encoding.describe(mode)} is not one of "
                              f"{', '.join(MODES)}", reason="INVALID_CASSETTE_MODE")
    return mode


def _json(value: Any, what: str) -> Any:
    """`value` as plain JSON values (a copy sharing nothing with the caller's). What is no
    JSON value (an object, NaN, a lone surrogate) is refused naming its path, never turned
    into something else."""
    encoding.check_json(value, what)
    return _DECODE(encoding.encode(value)) if value is not None else None


def _call_json(value: Any, what: str) -> Any:
    """A call's request or answer as it is matched and kept: JSON, its credentials masked
    (an argument named like `api_key`, a bearer token in a string), as HTTP exchanges are."""
    return redaction.mask_credentials(_json(value, what))


def _is_json(value: Any) -> bool:
    try:
        encoding.check_json(value)
        return True
    except InvalidArgument:
        return False


def _window(text: str, at: int) -> str:
    """`text` around position `at`, on one line: what is cut off shown as `...`, and what is
    no printable character escaped (a canonical text may hold a line separator)."""
    start, end = max(0, at - WINDOW_BEFORE), at + WINDOW_AFTER
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                    for c in text[start:end])
    return ("..." if start else "") + shown + ("..." if end < len(text) else "")


def _first_difference(recorded: Any, requested: Any) -> str:
    """Where two requests first differ, as a message shows it after "differ(s)": the JSON
    pointer, then the character where their canonical JSON texts part, with a window of each
    around it, so a change at the end of a long value is as visible as one at its start.
    Both sides are scrubbed first (cas.redaction.scrub, as suite files are): a reason is kept
    in results and score batches, and must never carry a secret or a person's data; scrubbing
    whole values before cutting the window keeps a window from showing half a secret that a
    rule would have masked whole."""
    a, b = redaction.scrub(recorded), redaction.scrub(requested)
    left, right = encoding.encode(a).decode("utf-8"), encoding.encode(b).decode("utf-8")
    if left == right:
        return ("only inside values masked as secrets or personal data, which a "
                "message never shows")
    d = next(differences(a, b), {"path": ""})
    path = d["path"] or "/"
    path = path if len(path) <= MAX_PATH else path[:MAX_PATH - 3] + "..."
    at = next((i for i, (x, y) in enumerate(zip(left, right)) if x != y),
              min(len(left), len(right)))
    return (f"at {path}, character {at + 1} of its canonical JSON: recorded "
            f"{_window(left, at)} requested {_window(right, at)}")


def _name(name: str) -> str:
    """A call's name as a message quotes it: bounded (a name is the caller's), one line."""
    return repr(name if len(name) <= MAX_NAME else name[:MAX_NAME - 3] + "...")


def _what(adapter: str, name: str) -> str:
    return f"request {_name(name)[1:-1]}" if adapter == HTTP else f"call {_name(name)}"


# -- one case's cassette ----------------------------------------------------------------------
class Cassette:
    """The exchanges of one case's run: those recorded before (`recorded`), answered in
    `mode`, and those this run made (`exchanges`, in order).

    `replay`: every request must have a recording, else StaleCassette (naming the call and the
    first argument path that differs from the nearest recording). `record`: every request is
    made and recorded, the old recording ignored. `record-missing`: replays what is recorded
    and records the rest. `live`: calls through and records nothing. A recording is used
    once: a request made twice needs two. `ordered`: the run's calls must come in the order
    recorded. `strict`: `check()` refuses a run that left recorded exchanges unused.
    """

    def __init__(self, recorded: Iterable[CassetteExchange] = (), mode: str = REPLAY, *,
                 strict: bool = True, ordered: bool = False, label: str = "the cassette") -> None:
        if mode not in MODES:
            raise InvalidArgument(f"cassette mode {encoding.describe(mode)} is not one of "
                                  f"{', '.join(MODES)}", reason="INVALID_CASSETTE_MODE")
        self.mode, self.strict, self.ordered, self.label = mode, strict, ordered, label
        self.recorded: list[CassetteExchange] = list(recorded) if mode != RECORD else []
        self.exchanges: list[CassetteExchange] = []
        self._used = [False] * len(self.recorded)
        self._waiting: dict[str, deque[int]] = {}
        for i, e in enumerate(self.recorded):
            if e.adapter == CALL:
                self._waiting.setdefault(e.key, deque()).append(i)
        self._calls = [i for i, e in enumerate(self.recorded) if e.adapter == CALL]
        self._position = 0  # ordered: the next recorded call the run must make
        self._lock = threading.Lock()  # sync wrappers run in the runner's threads

    # -- adapters -----------------------------------------------------------------------------
    def wrap(self, fn: Callable, name: str | None = None, *, request: Callable | None = None,
             to_json: Callable | None = None, from_json: Callable | None = None) -> Callable:
        """`fn` (sync or async) answered from this cassette. A call's request is its arguments
        by parameter name (or `request(*args, **kwargs)`, a JSON value); its response must be
        a JSON value (or `to_json(result)` is, and replay returns `from_json(response)`). A
        call that raises is recorded as its error and raises RecordedError on replay."""
        if not callable(fn):
            raise InvalidArgument(f"cassette.wrap wraps a function, not {encoding.describe(fn)}")
        name = name if name is not None else getattr(fn, "__qualname__", None) or repr(fn)
        encoding.check_text(name, "a cassette call's name")
        describe = self._describer(fn, name, request)
        load = from_json or (lambda value: value)

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def wrapped_async(*args, **kwargs):
                req = describe(args, kwargs)
                found = self._find(CALL, name, req)
                if found is not None:
                    return load(self._answer(found))
                if self.mode == LIVE:
                    return await fn(*args, **kwargs)
                try:
                    result = await fn(*args, **kwargs)
                except Exception as exc:
                    self._keep(CALL, name, req, error=exc)
                    raise
                self._keep(CALL, name, req, response=to_json(result) if to_json else result)
                return result
            return wrapped_async

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            req = describe(args, kwargs)
            found = self._find(CALL, name, req)
            if found is not None:
                return load(self._answer(found))
            if self.mode == LIVE:
                return fn(*args, **kwargs)
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:
                self._keep(CALL, name, req, error=exc)
                raise
            self._keep(CALL, name, req, response=to_json(result) if to_json else result)
            return result
        return wrapped

    def call(self, name: str, request: Any, fn: Callable[[], Any]) -> Any:
        """The response to `request` of `name`: recorded, or `fn()` called and recorded."""
        return self.wrap(lambda req: fn(), name, request=lambda req: req)(request)

    def lookup(self, name: str, request: Any) -> Any:
        """The recorded response to `request` of `name`; StaleCassette if there is none (in
        any mode: there is nothing to call through to)."""
        req = _call_json(request, f"the request of {name!r}")
        found = self._find(CALL, name, req, must=True)
        return self._answer(found)

    # -- the run's end -------------------------------------------------------------------------
    def unused(self) -> list[CassetteExchange]:
        """The recorded exchanges this run did not request (in replay and record-missing)."""
        with self._lock:
            return [e for e, used in zip(self.recorded, self._used) if not used]

    def check(self) -> None:
        """UnusedExchanges when strict and the run left recorded exchanges unused."""
        left = self.unused()
        if self.strict and left and self.mode in (REPLAY, RECORD_MISSING):
            names = ", ".join(_what(e.adapter, e.name) for e in left[:SHOWN])
            more = f" and {len(left) - SHOWN} more" if len(left) > SHOWN else ""
            raise UnusedExchanges(
                f"{self.label} recorded {len(left)} exchange(s) the run never requested: "
                f"{names}{more} (the agent no longer makes them: re-record with "
                "--cassette-mode record, or run without strict)", unused=len(left))

    @property
    def changed(self) -> bool:
        """Whether this run's exchanges differ from those recorded (what a save would store)."""
        return self.mode in (RECORD, RECORD_MISSING) and self.exchanges != self.recorded

    # -- matching ------------------------------------------------------------------------------
    def _describer(self, fn: Callable, name: str, request: Callable | None):
        what = f"the arguments of {name!r}"
        if request is not None:
            return lambda args, kwargs: _call_json(request(*args, **kwargs), what)
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin without one: positions and names
            return lambda args, kwargs: _call_json({"args": list(args), "kwargs": kwargs}, what)

        def describe(args, kwargs):
            bound = signature.bind(*args, **kwargs)  # a wrong call raises as the function would
            given = dict(bound.arguments)
            bound.apply_defaults()  # f(q) and f(q, limit=2) with limit=2 the default: one call
            for k, v in bound.arguments.items():
                if k not in given and _is_json(v):
                    given[k] = v
            return _call_json({k: given[k] for k in bound.arguments if k in given}, what)
        return describe

    def _find(self, adapter: str, name: str, req: Any, must: bool = False):
        """The recorded exchange answering this request (marked used, and kept as this run's),
        or None when the mode calls through; StaleCassette when it must not."""
        if self.mode == LIVE and not must:
            return None
        key = request_key(adapter, name, req)
        with self._lock:
            if self.ordered:
                found = self._ordered(key, name, req, must)
            else:
                waiting = self._waiting.get(key)
                found = waiting.popleft() if waiting else None
            if found is None:
                if must or self.mode == REPLAY:
                    raise StaleCassette(self._stale(adapter, name, req), call=name)
                return None
            self._used[found] = True
            exchange = self.recorded[found]
            self.exchanges.append(exchange)
            return exchange

    def _ordered(self, key: str, name: str, req: Any, must: bool) -> int | None:
        if self._position < len(self._calls):
            at = self._calls[self._position]
            if self.recorded[at].key == key:
                self._position += 1
                return at
            if must or self.mode == REPLAY:
                expected = self.recorded[at]
                raise StaleCassette(
                    f"stale cassette: call {self._position + 1} of the run is {_name(name)}, "
                    f"and {self.label} recorded {_name(expected.name)} there" +
                    self._first_difference(expected, name, req) + RERECORD, call=name)
            # record-missing: the recordings from here on no longer follow the run
            self._position = len(self._calls)
        return None

    def _first_difference(self, recorded: CassetteExchange, name: str, req: Any) -> str:
        if recorded.name != name:
            return ""
        return "; its arguments differ " + _first_difference(recorded.request, req)

    def _stale(self, adapter: str, name: str, req: Any) -> str:
        what = _what(adapter, name)
        same = [e for e in self.recorded if e.adapter == adapter and e.name == name]
        if not self.recorded:
            return (f"stale cassette: {what} has no recording: {self.label} is empty (nothing "
                    f"was recorded for this case and executor){RERECORD}")
        if not same:
            others = sorted({_what(e.adapter, e.name) for e in self.recorded})
            shown = ", ".join(others[:SHOWN]) + (" ..." if len(others) > SHOWN else "")
            return (f"stale cassette: {what} has no recording; {self.label} has only "
                    f"{shown}{RERECORD}")
        key = request_key(adapter, name, req)
        if any(e.key == key for e in same):
            times = sum(e.key == key for e in same)
            return (f"stale cassette: {what} was requested again with the same arguments; "
                    f"{self.label} recorded it {times} time(s){RERECORD}")
        unused = [e for e, used in zip(self.recorded, self._used) if not used and e in same]
        nearest = min(unused or same, key=lambda e: sum(1 for _ in differences(e.request, req)))
        return (f"stale cassette: {what} has no recording with these arguments; the nearest "
                f"differs {_first_difference(nearest.request, req)}{RERECORD}")

    def _answer(self, exchange: CassetteExchange) -> Any:
        if exchange.error is not msgspec.UNSET:
            error = exchange.error if isinstance(exchange.error, dict) else {}
            raise RecordedError(str(error.get("type", "Exception")), str(error.get("message", "")))
        return _DECODE(encoding.encode(exchange.response))  # a copy the caller may change

    def _keep(self, adapter: str, name: str, req: Any, *, response: Any = msgspec.UNSET,
              error: BaseException | None = None) -> None:
        if error is not None:
            kept = CassetteExchange(adapter=adapter, name=name,
                                    key=request_key(adapter, name, req), request=req,
                                    error={"type": type(error).__name__,
                                           "message": redaction.scrub_text(str(error))})
        else:
            kept = CassetteExchange(adapter=adapter, name=name,
                                    key=request_key(adapter, name, req), request=req,
                                    response=_call_json(response, f"the response of {name!r}"))
        with self._lock:
            self.exchanges.append(kept)

    def adopt_http(self, recorded_used: Iterable[int], made: list[CassetteExchange]) -> None:
        """For the HTTP adapter, when its block ends: which recorded HTTP exchanges
        (positions in `recorded`) were played, and the new ones made."""
        with self._lock:
            for i in recorded_used:
                if not self._used[i]:
                    self._used[i] = True
                    self.exchanges.append(self.recorded[i])
            self.exchanges.extend(made)



# -- HTTP requests, as the HTTP adapter keeps them ----------------------------------------
_CREDENTIAL_NAMES = frozenset((
    "key", "token", "sig", "signature", "code", "x-amz-signature", "x-amz-credential",
    "x-amz-security-token", "x-goog-signature", "x-goog-credential", "authorization",
    "proxy-authorization", "cookie", "set-cookie", "api-key", "x-api-key"))


def credential_name(name: str) -> bool:
    """Whether a header or query parameter of this name carries a credential."""
    lowered = name.strip().lower()
    return lowered in _CREDENTIAL_NAMES or redaction.SENSITIVE_KEY.search(lowered) is not None


def strip_query(uri: str) -> str:
    """`uri` without the query parameters that carry credentials."""
    parts = urlsplit(uri)
    if not parts.query:
        return uri
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if not credential_name(k)]
    return urlunsplit(parts._replace(query=urlencode(kept)))


def body_text(body: Any) -> Any:
    """An HTTP body as JSON: text (credential shapes masked), or {"base64": ...} for bytes
    that are not UTF-8; None stays None."""
    if body is None:
        return None
    if isinstance(body, str):
        return redaction.scrub_credentials(body)
    if isinstance(body, (bytes, bytearray)):
        try:
            return redaction.scrub_credentials(bytes(body).decode("utf-8"))
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(bytes(body)).decode("ascii")}
    return body


def body_bytes(value: Any) -> Any:
    if isinstance(value, dict) and "base64" in value:
        return base64.b64decode(value["base64"])
    if isinstance(value, str):
        return value.encode("utf-8")
    return value
