"""Calls of user code (executors, scorers, replay functions): sync or async, a plain function in
a daemon thread, under a timeout; what it raised told in one line."""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
from typing import Any, Callable

from cas.errors import CasError

MAX_REASON = 2000  # characters of a reason kept (an exception can carry a whole page)


class TimedOut(Exception):
    """A call did not return within its timeout (ours: never the function's own TimeoutError)."""


def is_async(fn: Callable) -> bool:
    return inspect.iscoroutinefunction(fn) or \
        inspect.iscoroutinefunction(getattr(fn, "__call__", None))


def exception_text(exc: BaseException) -> str:
    """`Type: message` of an exception (`module.Type` outside the builtins), one line, kept
    short and always encodable."""
    cls = type(exc)
    name = cls.__qualname__ if cls.__module__ == "builtins" else \
        f"{cls.__module__}.{cls.__qualname__}"
    try:
        message = exc.message if isinstance(exc, CasError) else str(exc)
    except Exception:
        message = ""
    return clean_reason(f"{name}: {message}" if message else name)


def clean_reason(text: str) -> str:
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # no lone surrogate
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + "..."


# -- plain functions in threads ---------------------------------------------------------------
def _settle(future: asyncio.Future, value: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled: whoever waited has moved on
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def _run(loop: asyncio.AbstractEventLoop, future: asyncio.Future, fn: Callable, args: tuple,
         kwargs: dict) -> None:
    """In a worker thread: `fn`, its value or exception handed to the loop, which decides."""
    try:
        value, error = fn(*args, **kwargs), None
    except BaseException as exc:
        value, error = None, exc
    try:
        loop.call_soon_threadsafe(_settle, future, value, error)
    except RuntimeError:  # the loop is closed: nobody waits for this any more
        pass


class Threads:
    """A fixed pool of daemon threads for plain functions. Daemon, and not
    concurrent.futures: a sync call that timed out or was stopped cannot be killed, and must
    not keep the process from exiting."""

    def __init__(self, size: int, loop: asyncio.AbstractEventLoop) -> None:
        self._size, self._loop = size, loop
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def call(self, fn: Callable, args: tuple, kwargs: dict) -> asyncio.Future:
        future = self._loop.create_future()
        if len(self._threads) < self._size:
            t = threading.Thread(target=self._work, name="cas-call", daemon=True)
            t.start()
            self._threads.append(t)
        self._queue.put((future, fn, args, kwargs))
        return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            _run(self._loop, *item)

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)


def _in_own_thread(fn: Callable, args: tuple, kwargs: dict) -> asyncio.Future:
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    threading.Thread(target=_run, args=(loop, future, fn, args, kwargs), name="cas-call",
                     daemon=True).start()
    return future


# -- one call ---------------------------------------------------------------------------------
async def call(fn: Callable, args: tuple = (), kwargs: dict | None = None, *,
               threads: Threads | None = None, timeout: float | None = None) -> Any:
    """`fn(*args, **kwargs)`: awaited when async; a plain function runs in `threads` (else in a
    daemon thread of its own), and a coroutine it returns is awaited too. What `fn` raises is
    raised. After `timeout` seconds in all, TimedOut: a coroutine is cancelled, a thread only
    abandoned (Python cannot stop one). A call cancelled from outside cancels `fn`'s."""
    kwargs = kwargs or {}
    if is_async(fn):
        work = fn(*args, **kwargs)
    elif threads is not None:
        work = threads.call(fn, args, kwargs)
    else:
        work = _in_own_thread(fn, args, kwargs)
    if timeout is None:  # awaited in the caller's task: its cancellation reaches `fn`'s
        value = await work
        return await value if inspect.isawaitable(value) else value
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    value = await _within(asyncio.ensure_future(work), deadline, loop)
    if inspect.isawaitable(value):  # a plain function that returned a coroutine
        value = await _within(asyncio.ensure_future(value), deadline, loop)
    return value


async def _within(pending: asyncio.Future, deadline: float,
                  loop: asyncio.AbstractEventLoop) -> Any:
    # Retrieved even when nobody waits any more: a call abandoned at its timeout that fails
    # later is not "never retrieved".
    pending.add_done_callback(lambda f: f.cancelled() or f.exception())
    try:
        done, _ = await asyncio.wait({pending}, timeout=max(0.0, deadline - loop.time()))
    except BaseException:  # the caller was cancelled (a stopped run): so is the call
        pending.cancel()
        raise
    if not done:
        pending.cancel()
        raise TimedOut()
    return pending.result()
