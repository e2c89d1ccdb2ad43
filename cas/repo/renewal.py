"""Renewal: the successor of a version an erasure retired, sealed with the cases the erasure left.

An erasure retires every version that held one of the erased cases. `renew` seals, on the
dataset's head when an erasure retired it, a version holding exactly the cases that are left
(a commit on a retired base drops the lost cases: cas/repo/sealing.py). Its record says
`operation: "renew"` and names the retired version as its parent, so the successor of a
retired version is read from the repository itself, never guessed: it is that renewal, and,
if a later erasure retired the renewal too, the renewal sealed on it, and so on. A version an
operator retired (contaminated, invalid labels) has no successor: cutting past it is a
deliberate `cas commit` or `cas remove`.
"""

from __future__ import annotations

from cas.errors import FailedPrecondition
from cas.format.records import VersionRecord
from cas.repo import checks, datasets, sealing
from cas.repo.retirement import PERSON_ERASED

RENEW = "renew"  # the `operation` of a version sealed by `renew`


def renew(ctx, name: str, author: str | None = None) -> VersionRecord:
    """Seal the successor of `name`'s head, which an erasure retired: the cases the erasure
    left. Refused (FAILED_PRECONDITION) when the head is ACTIVE (`HEAD_ACTIVE`) or an operator
    retired it (`EVALUATION_DATASET_VERSION_RETIRED`, the refusal of every
    use of a retired version); a writer that sealed on the head meanwhile is a
    VersionConflict (the caller reads the head again)."""
    author = checks.author(author)
    head = datasets.head(ctx, name)
    if not head:
        datasets.dataset(ctx, name)  # NotFound for no such dataset
        raise FailedPrecondition(f"dataset {name!r} has no version to renew",
                                 reason="NO_VERSIONS", dataset=name)
    retired = ctx.refs.read_retirement(name, head)
    if retired is None:
        raise FailedPrecondition(
            f"{name}@{head} (the head) is ACTIVE: there is nothing to renew; `cas renew` seals "
            "a successor only of a head an erasure retired", reason="HEAD_ACTIVE",
            dataset=name, version=head)
    if retired.cause != PERSON_ERASED:
        raise FailedPrecondition(
            f"{name}@{head} was RETIRED by an operator ({retired.cause} at "
            f"{retired.retired_at}): only a version an erasure retired is renewed; cutting past "
            "an operator's retirement is a deliberate change (`cas commit` or `cas remove` of "
            "the cases to keep)", reason="EVALUATION_DATASET_VERSION_RETIRED", dataset=name,
            version=head, state="RETIRED",
            retirement_cause=retired.cause, retired_at=retired.retired_at)
    return sealing.commit(ctx, name, base=head, message=f"renew after the erasure "
                          f"{retired.erasure}", author=author, operation=RENEW)


def successor(ctx, name: str, number: int) -> VersionRecord | None:
    """The renewal sealed directly on `name@number`, or None (there is at most one: a
    renewal is sealed only on the head)."""
    datasets.version(ctx, name, number)
    before = None
    while True:
        page = datasets.versions(ctx, name, before=before, limit=50)
        for record in page.versions:
            if record.number <= number:
                return None
            if record.parent == number and record.operation == RENEW:
                return record
        if page.next_before is None:
            return None
        before = page.next_before


def renewal_path(ctx, name: str, number: int) -> list[VersionRecord]:
    """The versions a pin of the retired `name@number` moves through: each the renewal sealed
    on the one before, while that one is retired too. Empty when `number` is ACTIVE or has no
    successor; its last version is ACTIVE unless a renewal is itself retired with none yet."""
    datasets.version(ctx, name, number)  # the name and number checked, NotFound if none
    path: list[VersionRecord] = []
    current = number
    while ctx.refs.read_retirement(name, current) is not None:
        nxt = successor(ctx, name, current)
        if nxt is None:
            break
        path.append(nxt)
        current = nxt.number
    return path


def renewed_to(ctx, name: str, number: int) -> VersionRecord:
    """The ACTIVE version a pin of the retired `name@number` moves to (itself while ACTIVE);
    refused (FAILED_PRECONDITION, `NO_SUCCESSOR`) when the renewals stop at a retired version,
    saying what to do."""
    path = renewal_path(ctx, name, number)
    last = path[-1].number if path else number
    retired = ctx.refs.read_retirement(name, last)
    if retired is None:
        return path[-1] if path else datasets.version(ctx, name, number)
    head = datasets.head(ctx, name)
    if retired.cause != PERSON_ERASED:
        hint = ("an operator retired it, so it has no successor: move the pin to a version "
                f"you choose (`cas lock update {name} --to N`)")
    elif last == head:
        hint = f"seal one with `cas renew {name}`"
    else:
        hint = (f"it is not the head ({name}@{head} is), and a renewal is sealed only on the "
                f"head: move the pin to a version you choose (`cas lock update {name} --to N`)")
    raise FailedPrecondition(
        f"{name}@{last} is RETIRED ({retired.cause} at {retired.retired_at}) and has no "
        f"successor yet; {hint}", reason="NO_SUCCESSOR", dataset=name, version=last,
        retirement_cause=retired.cause, retired_at=retired.retired_at, head=head)
