"""Reads of an exact version (cas/reads.py): what a page costs in storage requests."""

from __future__ import annotations

import collections

import cas
from cas.backends.memory import MemoryBackend


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


def test_a_cold_page_loads_the_children_it_needs_together():
    """A page of 100 ids of a 100-case version spans the root and its 16 leaves: the leaves a
    page needs are read in one go (two index reads and one pack read), not one by one."""
    backend = MemoryBackend()
    repo = cas.Repository.create(backend)
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=[{"input": i} for i in range(100)])
    expected = repo.items("evals", 1, limit=100).items
    counting = Counting(backend)
    cold = cas.Repository(counting)
    counting.calls.clear()
    page = cold.items("evals", 1, limit=100)
    assert page.items == expected and len(expected) == 100
    # version and retirement records (3), the pack listing and index header (2), the root
    # (3), then the 16 leaves together (3); one by one they were 48 requests
    assert sum(counting.calls.values()) <= 12, counting.calls
