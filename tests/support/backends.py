"""Backends that watch the storage calls a test makes: counting them, or intruding at one."""

import collections

from cas.errors import Unavailable

STORAGE_CALLS = ("get", "get_range", "put_if_absent", "replace", "delete", "list", "exists",
                 "modified")


class Counting:
    """A backend that counts the storage calls made through it."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, collections.Counter()
        self.log: list[tuple[str, object]] = []  # (call, its first argument: a key), in order

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        def counted(*args, **kwargs):
            self.calls[name] += 1
            self.log.append((name, args[0] if args else None))
            return attr(*args, **kwargs)
        return counted

    def ranges(self, suffix: str) -> list[str]:
        """The keys of the range reads made of keys ending with `suffix` (`.pack`), in order."""
        return [key for name, key in self.log
                if name == "get_range" and key.endswith(suffix)]


class Interleave:
    """A backend that runs `intrude()` once, just before the `at`-th storage call it serves."""

    def __init__(self, inner, at: int | None = None, intrude=None) -> None:
        self.inner, self.url, self.at, self.intrude = inner, inner.url, at, intrude
        self.calls = 0
        self.outcome = None

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name not in STORAGE_CALLS:
            return attr

        def call(*args, **kwargs):
            self.calls += 1
            if self.calls == self.at:
                self.outcome = self.intrude()
            return attr(*args, **kwargs)
        return call


READS = ("get", "get_range", "list", "exists", "modified")


class Outage:
    """A backend whose storage stops answering at its `at`-th read (get, get_range, list,
    exists, modified; `at` None: never): that read raises UNAVAILABLE, as the S3 backend does
    when the server is gone, and so does every storage call after it (`lasting`) or none (a
    blink). `failed` lists the keys it refused; `reads` counts the reads."""

    def __init__(self, inner, at: int | None = None, lasting: bool = True) -> None:
        self.inner, self.url, self.at, self.lasting = inner, inner.url, at, lasting
        self.reads = 0
        self.failed: list[str] = []

    def arm(self, k: int) -> "Outage":
        """Fail the k-th read from now."""
        self.at = self.reads + k
        return self

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name not in STORAGE_CALLS:
            return attr

        def call(*args, **kwargs):
            if name in READS:
                self.reads += 1
            down = self.at is not None and (self.reads == self.at and name in READS or (
                self.lasting and self.reads >= self.at and self.failed))
            if down:
                key = args[0] if args else next(iter(kwargs.values()), "")
                self.failed.append(key)
                raise Unavailable(f"cannot read {key!r} in {self.url}: connection refused "
                                  "(an outage the test injected)", key=key, location=self.url)
            return attr(*args, **kwargs)
        return call


def every_outage(fresh, command, lasting: bool = True, strict: bool = False, check=None):
    """Run `command(backend)` whole over `fresh()`, then again over a fresh one with an outage
    at each read the whole run made (k = 1 .. n). Each must raise UNAVAILABLE, or return
    exactly what the whole run returned (a read the command made again after it failed, as a
    prefetch's is), never anything else: a damage report, a skipped record, "ok". `strict`:
    it must raise whenever a read failed; `check(inner backend)` runs after each that raised.
    Returns (n, the whole run's result)."""
    whole = Outage(fresh())
    expected = command(whole)
    n = whole.reads
    assert n > 0
    for k in range(1, n + 1):
        outage = Outage(fresh(), at=k, lasting=lasting)
        try:
            got = command(outage)
        except Unavailable:
            assert outage.failed, f"UNAVAILABLE with no read failed (k={k})"
            if check is not None:
                check(outage.inner)
            continue
        assert outage.failed, f"read {k} of {n} was never made: the command is not deterministic"
        assert not strict, (f"read {k} ({outage.failed[0]!r}) failed, yet it returned "
                            f"{repr(got)[:400]}")
        assert got == expected, (f"an outage at read {k} ({outage.failed[0]!r}) changed the "
                                 f"result: {repr(got)[:400]}")
    return n, expected
