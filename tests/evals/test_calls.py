"""Calls of user code (cas/evals/calls.py): sync or async, in a pool of daemon threads or a
thread of its own, a coroutine a plain function returns awaited; what it raises raised; our
timeout told apart from the function's own; a cancelled caller cancels the call; and what was
raised told in one short line."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import cas
from cas.evals.calls import (MAX_REASON, Threads, TimedOut, call, clean_reason, exception_text,
                             is_async)


def double(x, *, by=2):
    return x * by


async def double_async(x, *, by=2):
    await asyncio.sleep(0)
    return x * by


class Callable:
    async def __call__(self, x):
        return -x


def test_a_sync_or_async_function_is_called_and_its_value_returned():
    assert is_async(double_async) and is_async(Callable()) and not is_async(double)

    async def main():
        loop = asyncio.get_running_loop()
        pool = Threads(2, loop)
        try:
            return [await call(double, (3,), {"by": 3}), await call(double_async, (3,)),
                    await call(Callable(), (4,)), await call(double, (5,), threads=pool),
                    await call(lambda: double_async(6), timeout=1)]
        finally:
            pool.close()
    assert asyncio.run(main()) == [9, 6, -4, 10, 12]


def test_a_plain_function_runs_off_the_loop_in_a_daemon_thread():
    seen = []

    def where():
        seen.append(threading.current_thread())
    asyncio.run(call(where))
    assert seen[0] is not threading.main_thread() and seen[0].daemon


def test_what_the_function_raises_is_raised_and_its_own_timeout_is_not_ours():
    def boom():
        raise KeyError("k")

    async def its_own_deadline():
        raise TimeoutError("the model's")
    with pytest.raises(KeyError):
        asyncio.run(call(boom))
    with pytest.raises(TimeoutError, match="the model's"):
        asyncio.run(call(its_own_deadline, timeout=5))


@pytest.mark.parametrize("slow", ["async", "sync", "returns a coroutine"])
def test_after_the_timeout_the_call_is_given_up(slow):
    cancelled = []

    async def sleeps():
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
    fn = {"async": sleeps, "sync": lambda: time.sleep(1),
          "returns a coroutine": lambda: sleeps()}[slow]

    async def main():
        with pytest.raises(TimedOut):
            await call(fn, timeout=0.05)
        await asyncio.sleep(0.01)  # a cancelled coroutine runs its cleanup
    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 0.9  # a thread is abandoned, never waited for
    assert cancelled == ([] if slow == "sync" else [True])


def test_a_cancelled_caller_cancels_the_call():
    cancelled = []

    async def sleeps():
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(call(sleeps), 0.05)
        await asyncio.sleep(0.01)
    asyncio.run(main())
    assert cancelled == [True]


def test_what_was_raised_is_told_in_one_short_encodable_line():
    assert exception_text(ValueError("no luck")) == "ValueError: no luck"
    assert exception_text(KeyError()) == "KeyError"
    refused = cas.InvalidArgument("bad thing", reason="X")
    assert exception_text(refused) == "cas.errors.InvalidArgument: bad thing"

    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no")
    assert exception_text(Unprintable()).endswith("Unprintable")
    long = exception_text(RuntimeError("x" * 5000))
    assert len(long) == MAX_REASON and long.endswith("...")
    assert clean_reason("lone \udc80 surrogate") == "lone \\udc80 surrogate"
