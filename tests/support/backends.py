"""Backends that watch the storage calls a test makes: counting them, or intruding at one."""

import collections

STORAGE_CALLS = ("get", "get_range", "put_if_absent", "replace", "delete", "list", "exists",
                 "modified")


class Counting:
    """A backend that counts the storage calls made through it."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, collections.Counter()

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        def counted(*args, **kwargs):
            self.calls[name] += 1
            return attr(*args, **kwargs)
        return counted


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
