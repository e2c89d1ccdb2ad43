"""Who was erased: the keyed digests of the persons an erasure deleted (completed, or still
in progress), which an import or a direct commit must not bring back unasked."""

from __future__ import annotations

from typing import NamedTuple

from cas.digest import person_digest
from cas.errors import FailedPrecondition, InvalidArgument, NotFound
from cas.format.keys import LOG, PENDING
from cas.format.records import Erasure, ErasurePlan, parse_record_file
from cas.repo import checks

MAX_PERSON = 512


def keyed_person(ctx, person: str) -> str:
    if not isinstance(person, str) or not person or len(person) > MAX_PERSON:
        raise InvalidArgument(f"a person id is 1-{MAX_PERSON} characters, not {person!r}")
    return person_digest(person, ctx.store.person_key)


class Erased(NamedTuple):
    """Which erasure deleted a person (a plan still in progress counts: its erasure will)."""

    erasure: str    # the erasure's id
    erased_at: str  # its `erased_at`, or a pending plan's `started_at`


def erased_persons(ctx) -> dict[str, Erased]:
    """Keyed person digest -> the erasure of that person, of every completed erasure and every
    pending plan: what an import or a direct commit must not bring back unasked. The log is
    small (one record per erasure): callers read it once per operation."""
    out: dict[str, Erased] = {}
    for record in erasures(ctx):  # oldest first: a person erased twice is named by the last
        out[record.person] = Erased(record.id, record.erased_at)
    for key in ctx.backend.list(PENDING):
        try:
            plan = parse_record_file(ctx.backend.get(key), ErasurePlan, key)
        except NotFound:
            continue  # completed meanwhile: its log record was written first
        out.setdefault(plan.person, Erased(plan.id, plan.started_at))
    return out


def admitted_persons(ctx, persons) -> set[str]:
    """The keyed digests of `persons` (plaintext ids an import admits again, deliberately)."""
    if isinstance(persons, str):
        raise InvalidArgument("allow_erased_persons must be a list of person ids, not one string")
    given = checks.strings(persons, "allow_erased_persons", "person ids")
    return {keyed_person(ctx, p) for p in given}


def refuse_erased(erased: dict[str, Erased], keyed: str, person: str, what: str,
                  **fields) -> None:
    """FAILED_PRECONDITION `PERSON_ERASED_BEFORE` if the person (keyed digest `keyed`, given
    as `person` by the caller, so naming it tells them nothing new) was erased."""
    found = erased.get(keyed)
    if found is None:
        return
    raise FailedPrecondition(
        f"{what} names person {person!r}, erased at {found.erased_at} (erasure {found.erasure}); "
        "nothing was stored. Bringing their data back needs their new consent: admit them "
        f"deliberately with --allow-erased-person {person} (allow_erased_persons)",
        reason="PERSON_ERASED_BEFORE", erased_at=found.erased_at, erasure=found.erasure,
        **fields)


def erasures(ctx) -> list[Erasure]:
    """Every completed erasure, oldest first."""
    out = [parse_record_file(ctx.backend.get(k), Erasure, k) for k in ctx.backend.list(LOG)]
    return sorted(out, key=lambda e: (e.erased_at, e.id))
