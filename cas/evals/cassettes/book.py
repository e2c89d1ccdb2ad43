"""The cassettes of a repository's versions: the book of one pinned version's cases under one
executor (each case's cassette opened, what a run records kept and saved in one batch), and the
cassette log read and written for a repository (docs/suites.md)."""

from __future__ import annotations

import threading
from typing import Any, Iterable, Mapping

from cas.evals.cassettes.matching import LIVE, RECORD_MISSING, REPLAY, Cassette, resolve_mode
from cas.evals.suites.files import version_pin
from cas.format import encoding
from cas.format.records import CassetteExchange, CassetteLog, CassetteRecord
from cas.repo import cassettes as log


# -- the cassette log of a repository (cas.repo.cassettes, for a repository) ------------------
def cassette_logs(repo, dataset: str) -> list[CassetteLog]:
    """Every batch of cassettes recorded for `dataset`, oldest first."""
    return log.cassette_logs(repo.context, dataset)


def current(repo, dataset: str) -> dict[tuple[str, str], str]:
    """(case id, executor) -> the digest of the cassette in force: the newest entry."""
    return log.current(repo.context, dataset)


def read(repo, dataset: str, case_id: str, executor: str) -> CassetteRecord | None:
    """The cassette in force for a case under an executor, or None if none was recorded (or
    an erasure of the case's person deleted it)."""
    return log.read(repo.context, dataset, case_id, executor)


def save(repo, pin: Any, executor: str, recordings: Mapping[str, Iterable[CassetteExchange]],
         author: str | None = None) -> CassetteLog | None:
    """Store `recordings` (case id -> the exchanges of its run) as the cassettes of those
    cases of the pinned version under `executor` (cas.repo.cassettes.save); None if nothing
    changed."""
    return log.save(repo.context, pin, executor, recordings, author)


# -- the book of a pinned version -------------------------------------------------------------
def suite_pin(version: Any):
    """The pin a suite's version is, for its cassettes; FAILED_PRECONDITION `SUITE_NOT_PINNED`
    for a version that is none (a suite file written by hand)."""
    return version_pin(version, "cassettes belong to the cases of a version (run DATASET@N, or "
                                "a suite exported from it), or use --cassette-mode live")


class CassetteBook:
    """The cassettes of the cases of one pinned version under one executor: each case's
    opened in `mode` (`cassette(case_id)`), and what a run records kept (`keep`) until
    `save()` stores it all in one batch."""

    def __init__(self, repo, pin: Any, executor: str, mode: Any = None, *, strict: bool = True,
                 ordered: bool = False) -> None:
        self.mode = resolve_mode(mode)
        encoding.check_text(executor, "executor name")
        self.repo, self.executor, self.strict, self.ordered = repo, executor, strict, ordered
        self.pin = None
        self._in_force: dict[tuple[str, str], str] = {}
        self._kept: dict[str, list[CassetteExchange]] = {}
        self._lock = threading.Lock()
        if self.mode == LIVE:
            return  # nothing is read or stored: any suite will do
        self.pin = suite_pin(pin)
        repo.verify_pin(self.pin)  # refused if it does not match, or is retired
        self._in_force = current(repo, self.pin.dataset)

    def cassette(self, case_id: str) -> Cassette:
        """The cassette of case `case_id`, in this book's mode."""
        label = f"the cassette of case {case_id} under {self.executor!r}"
        recorded: list[CassetteExchange] = []
        digest = self._in_force.get((case_id, self.executor))
        if digest is not None and self.mode in (REPLAY, RECORD_MISSING):
            record = log.load(self.repo.context, digest)
            recorded = record.exchanges if record is not None else []
        return Cassette(recorded, self.mode, strict=self.strict, ordered=self.ordered,
                        label=label)

    def keep(self, case_id: str, cassette: Cassette) -> None:
        """Keep what the run of `case_id` recorded, if it changed, for `save()`."""
        if cassette.changed:
            with self._lock:
                self._kept[case_id] = list(cassette.exchanges)

    @property
    def pending(self) -> int:
        return len(self._kept)

    def save(self, author: str | None = None) -> CassetteLog | None:
        """Store the cassettes kept (one object each, one log record); None if there were none."""
        with self._lock:
            kept, self._kept = self._kept, {}
        if not kept or self.pin is None:
            return None
        return save(self.repo, self.pin, self.executor, kept, author)
