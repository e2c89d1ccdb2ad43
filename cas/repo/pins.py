"""Pins: an exact version and the digest of its set, taken from the repository and checked
against it again later.

A **pin** names `dataset@version` and the version's `content_digest`; its string form
(`evals@3#b3:...`, cas/format/version_names.py) can be stored anywhere and is checked against
the repository when resolved.
"""

from __future__ import annotations

from cas.errors import FailedPrecondition, NotFound
from cas.format.keys import tombstone_key
from cas.format.records import VersionRecord
from cas.format.version_names import Pin, as_pin
from cas.repo import datasets
from cas.repo.citations import CITING
from cas.repo.retirement import refuse_retired
from cas.storage.tree import Proof, check_proof


def pin(ctx, name: str, number: int) -> Pin:
    """A `cas.Pin` of an ACTIVE version: dataset, version and its content_digest."""
    record = _live_version(ctx, name, number)
    retired = ctx.refs.read_retirement(name, number)
    if retired is not None:
        raise refuse_retired(name, number, retired, CITING)
    return Pin(record.dataset, record.number, record.content_digest)


def resolve_pin(ctx, pin: Pin | str) -> VersionRecord:
    """The VersionRecord a pin (or its string) names, re-read; refused if its digest no
    longer matches (PIN_MISMATCH) or the version was deleted (NotFound)."""
    p = as_pin(pin)
    record = _live_version(ctx, p.dataset, p.version)
    check_digest(p, record)
    return record


def verify_pin(ctx, pin: Pin | str) -> VersionRecord:
    """`resolve_pin`, and refused if the version is RETIRED (EVALUATION_DATASET_VERSION_RETIRED):
    a check of a pin (e.g. in CI) fails when every read of the version it names is refused.
    `resolve_pin` itself still resolves a retired version: it answers "is this the set that
    was pinned", which an audit of an old result asks of a retired version too."""
    record = resolve_pin(ctx, pin)
    retired = ctx.refs.read_retirement(record.dataset, record.number)
    if retired is not None:
        raise refuse_retired(record.dataset, record.number, retired,
                             "every read of it (listing, replaying, scoring)")
    return record


def check_proof_pin(ctx, proof: Proof, pin: Pin | str,
                    case_id: str | None = None) -> VersionRecord:
    """Check `proof` against the content_digest of the version `pin` names (re-read, so a
    pin whose digest no longer matches is refused, PIN_MISMATCH); returns that version's
    record. Without a pin or a root, a proof is checked only against the root it names
    itself, which says nothing about any version."""
    record = resolve_pin(ctx, pin)
    check_proof(proof, root=record.content_digest, case_id=case_id)
    return record


def check_digest(p: Pin, record: VersionRecord) -> None:
    """Refuse (PIN_MISMATCH) a pin whose digest is not the content_digest of the version."""
    if record.content_digest != p.content_digest:
        raise FailedPrecondition(
            f"pin {p} does not match the repository: {p.dataset}@{p.version} has content_digest "
            f"{record.content_digest}", reason="PIN_MISMATCH", pin=str(p),
            expected=p.content_digest, got=record.content_digest)


def _live_version(ctx, name: str, number: int) -> VersionRecord:
    """The version record, refused (NotFound) if it or its dataset is deleted, even when the
    deletion is still in progress."""
    record = datasets.version(ctx, name, number)
    if ctx.backend.exists(tombstone_key(name)):
        raise datasets.no_dataset(ctx, name)
    gone = ctx.refs.read_version_tombstone(name, number)
    if gone is not None:
        raise NotFound(f"version {number} of dataset {name!r} was deleted ({gone.deleted_at} "
                       f"by {gone.author})", reason="VERSION_DELETED", dataset=name,
                       version=number)
    return record
