"""The cassette log: per dataset, the append-only batches that name the cassette in force for each
(case, executor), and the cassette objects they name, stored like cases (docs/suites.md)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from cas.digest import parse_digest
from cas.errors import NotFound
from cas.format import encoding
from cas.format.keys import DATASETS, cassette_log_key, numbers
from cas.format.records import (CassetteEntry, CassetteExchange, CassetteLog, CassetteRecord,
                                format_record_file)
from cas.format.version_names import as_pin
from cas.repo import checks
from cas.repo.datasets import dataset as dataset_record
from cas.repo.pins import verify_pin
from cas.repo.reads import case as read_case
from cas.storage import claims, leases
from cas.storage.refs import read_log_from


def cassette_logs(ctx, dataset: str) -> list[CassetteLog]:
    """Every batch of cassettes recorded for `dataset`, oldest first."""
    dataset_record(ctx, dataset)  # NotFound for a dataset that does not exist (or was deleted)
    return [record for _, record in read_log_from(
        ctx.backend, lambda n: cassette_log_key(dataset, n), CassetteLog, 0)]


def current(ctx, dataset: str) -> dict[tuple[str, str], str]:
    """(case id, executor) -> the digest of the cassette in force: the newest entry."""
    found: dict[tuple[str, str], str] = {}
    for record in cassette_logs(ctx, dataset):
        for e in record.entries:
            found[(e.case_id, e.executor)] = e.cassette
    return found


def read(ctx, dataset: str, case_id: str, executor: str) -> CassetteRecord | None:
    """The cassette in force for a case under an executor, or None if none was recorded (or
    an erasure of the case's person deleted it)."""
    digest = current(ctx, dataset).get((parse_digest(case_id, "case id"), executor))
    return None if digest is None else load(ctx, digest)


def load(ctx, digest: str) -> CassetteRecord | None:
    """The cassette object `digest`, or None when an erasure deleted it with its person (fsck
    tells that from a loss)."""
    try:
        return ctx.store.get(digest, CassetteRecord)
    except NotFound:
        return None


def save(ctx, pin: Any, executor: str, recordings: Mapping[str, Iterable[CassetteExchange]],
         author: str | None = None) -> CassetteLog | None:
    """Store `recordings` (case id -> the exchanges of its run) as the cassettes of those
    cases of the pinned version under `executor`: one object per case (naming the case's
    person), then one cassette log record. Refused, storing nothing, for a version that is
    retired or does not match the pin, or a case it does not hold. None if nothing changed."""
    author = checks.author(author)
    encoding.check_text(executor, "executor name")
    p = as_pin(pin)
    with leases.writing(ctx, "record cassettes") as lease:
        # Checked under the lease: an erasure that started earlier has finished by now (it
        # retired the version, so this refuses), and one that starts later waits for this
        # writer and then finds the cassettes by their person.
        verify_pin(ctx, p)  # refused if it does not match, or is retired
        in_force = current(ctx, p.dataset)
        records = []
        for case_id, exchanges in sorted(recordings.items()):
            case = read_case(ctx, p.dataset, p.version, case_id)  # refused if not held
            records.append(CassetteRecord(dataset=p.dataset, case_id=case_id,
                                          executor=executor, person=case.person,
                                          exchanges=list(exchanges)))
        entries = []
        with ctx.store.writer(lease) as writer:
            for record in records:
                digest = writer.add(record)
                if in_force.get((record.case_id, executor)) != digest:
                    entries.append(CassetteEntry(case_id=record.case_id, executor=executor,
                                                 cassette=digest))
        if not entries:
            return None
        for _ in claims.attempts(f"a cassette log number of dataset {p.dataset!r}"):
            listed = numbers(ctx.backend.list(f"{DATASETS}{p.dataset}/cassettes/"))
            number = (listed[-1] if listed else 0) + 1
            log = CassetteLog(dataset=p.dataset, number=number, entries=entries,
                              author=author, recorded_at=ctx.clock())
            lease.check()
            if ctx.backend.put_if_absent(cassette_log_key(p.dataset, number),
                                         format_record_file(log)):
                return log
    return None  # unreachable: attempts raises when every claim was lost
