"""The repository context: what every operation works over (storage, objects, refs, clocks).

The operation modules (sealing, reads, runs, reviews, promotion, scores, retirement, erasure,
gc, fsck, mirror, ...) take a Context and nothing else of the repository; `Repository` is a
facade over them. Opening reads and never writes (docs/concepts.md, "Opening a repository").
"""

from __future__ import annotations

import datetime as _dt
import time as _time
from typing import Any, Callable

from cas.digest import person_key
from cas.errors import DataLoss, FailedPrecondition, NotFound
from cas.format.keys import CONFIG, PENDING
from cas.format.records import ErasurePlan, RepoConfig, TreeLeaf, TreeNode, parse_record_file
from cas.storage import maintenance
from cas.storage.refs import RefsLog
from cas.storage.store import ObjectStore
from cas.storage.tree import Trie


def now() -> str:
    """The time written into records: UTC with microseconds."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Context:
    """One open repository: its backend, object store, refs log, config and clocks, plus state
    derived from its logs that a process may keep (indexes read once, then extended)."""

    def __init__(self, backend, clock: Callable[[], str] = now,
                 time: Callable[[], float] = _time.time) -> None:
        self.backend = backend
        self.config: RepoConfig = parse_record_file(backend.get(CONFIG), RepoConfig, CONFIG)
        self.refs = RefsLog(backend)
        self.store = ObjectStore(backend, getattr(backend, "cache_dir", None),
                                 person_key(self.config.repository_id), maintenance.maintain)
        self.clock = clock  # the timestamps written into records
        # "Now" in seconds for leases and gc's grace period (a test can run gc in the future).
        self.time = time
        self._derived: dict[str, Any] = {}

    def trie(self, emit=None) -> Trie:
        """The Merkle tree over this store (`emit` receives each node a change creates)."""
        return Trie(self.tree_node, emit, self.store.prefetch)

    def tree_node(self, digest: str):
        """A node of a tree some record names: one that is not stored is data loss."""
        try:
            return self.store.get(digest, (TreeLeaf, TreeNode))
        except NotFound:
            raise DataLoss(f"tree node {digest} is missing from the repository (run `cas "
                           "fsck`)", reason="OBJECT_MISSING", digest=digest) from None

    def derived(self, name: str, build: Callable[[], Any]) -> Any:
        """State derived from the repository's logs, built once per context (run and review
        indexes); `forget` drops it when a log was rewritten."""
        value = self._derived.get(name)
        if value is None:
            value = self._derived[name] = build()
        return value

    def forget(self, name: str | None = None) -> None:
        """Drop derived state (`name`, or all of it): an erasure rewrote log records it was
        built from, or finished."""
        if name is None:
            self._derived.clear()
        else:
            self._derived.pop(name, None)

    def erasing(self) -> dict[str, str]:
        """Digest (case, run) or annotation id -> erasure id, of everything a pending erasure
        names. Read once per context; reads refuse these until the erasure completes."""
        def load() -> dict[str, str]:
            named: dict[str, str] = {}
            for key in self.backend.list(PENDING):
                try:
                    plan = parse_record_file(self.backend.get(key), ErasurePlan, key)
                except NotFound:
                    continue  # completed meanwhile
                for value in (*plan.cases, *plan.runs, *plan.reviews):
                    named[value] = plan.id
            return named
        return self.derived("erasing", load)

    def refuse_erasing(self, value: str, what: str) -> None:
        """Refuse to read `value` while a pending erasure names it."""
        erasure = self.erasing().get(value)
        if erasure is not None:
            raise FailedPrecondition(
                f"{what} is being erased (erasure {erasure} is recorded but not finished); "
                "it is refused from now on, and the next command that writes to this "
                "repository finishes the erasure", reason="ERASURE_PENDING", erasure=erasure)
