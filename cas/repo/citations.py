"""Citation logs: per dataset, the score batches and the experiments that cite its versions,
each an append-only log of numbered entries (`datasets/<name>/scores/<n>`, `.../experiments/<n>`).

A citation is claimed as the next number of its log only after checking that no tombstone of
what it cites exists; a deletion claims the next number of each log with a fence after writing
its tombstone (cas/repo/deletion.py). So a cited version is never deleted, even by concurrent
writers.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from cas.errors import NotFound
from cas.format.keys import DATASETS, citation_key_of, deleted_key, tombstone_key
from cas.format.records import (Experiment, Fence, Score, ScoreBatch, format_record_file,
                                parse_record_file_of)
from cas.repo.datasets import no_dataset
from cas.storage import claims

# What a citation of a retired version is refused as (`retirement.active` says it).
CITING = "pinning, scoring or an experiment over it"


def entry_type(log: str) -> type:
    """The record type of the citations a log holds (beside the fences of deletions)."""
    return ScoreBatch if log == "scores" else Experiment


def read_log(ctx, name: str, log: str, after: int = 0) -> Iterator[tuple[int, str, Any]]:
    """(number, key, entry or Fence) of a citation log from `after + 1` to its end."""
    key_of = citation_key_of(name, log)
    n = after
    while True:
        key = key_of(n + 1)
        try:
            data = ctx.backend.get(key)
        except NotFound:
            return
        n += 1
        yield n, key, parse_record_file_of(data, (entry_type(log), Fence), key)


def score_id(batch_key: str, index: int) -> str:
    """The id of a recorded score: its batch's key and its index in the batch."""
    return f"{batch_key}#{index}"


def recorded_scores(ctx, name: str) -> Iterator[tuple[int, str, int, Score]]:
    """(batch number, batch key, index in the batch, score) of every score of a dataset, in
    the order recorded (the scores of a withdrawn batch too)."""
    for n, key, entry in read_log(ctx, name, "scores"):
        if isinstance(entry, ScoreBatch):
            for i, s in enumerate(entry.scores):
                yield n, key, i, s


def claim(ctx, name: str, log: str, make: Callable[[int], Any],
          check: Callable[[int], None]) -> tuple[int, str]:
    """Claim the next number of a citation log for `make(number)`, after `check(head)`
    (which refuses by raising) has seen everything below it. Returns (number, key)."""
    key_of = citation_key_of(name, log)
    for _ in claims.attempts(f"a number in {DATASETS}{name}/{log}/", dataset=name):
        head = ctx.refs.citation_head(name, log)
        check(head)
        key = key_of(head + 1)
        if ctx.backend.put_if_absent(key, format_record_file(make(head + 1))):
            return head + 1, key


def check_not_deleted(ctx, name: str, number: int) -> None:
    """Refuse a citation of a deleted (or being deleted) version or dataset. Called after the
    citation log's head was read and before its next number is claimed (see the module doc)."""
    if ctx.backend.exists(tombstone_key(name)):
        raise no_dataset(ctx, name)
    if ctx.backend.exists(deleted_key(name, number)):
        ctx.refs.read_version(name, number)  # NotFound, saying it was deleted
        raise NotFound(f"version {number} of dataset {name!r} is being deleted",
                       reason="VERSION_DELETED", dataset=name, version=number)
