"""Retirement: a version whose set can no longer be honoured is retired, with a cause and a time.

A retirement is a record written once beside the version (`datasets/<name>/retired/<n>`); the
version record itself never changes, so `item_count` and `content_digest` still describe the
set as sealed. The first retirement of a version stands; the state never goes back to ACTIVE.
"""

from __future__ import annotations

from cas.errors import FailedPrecondition, InvalidArgument, NotFound
from cas.format import encoding
from cas.format.encoding import check_json
from cas.format.keys import ERASURES, PENDING, retired_key
from cas.format.records import (Erasure, ErasurePlan, VersionRecord, VersionRetirement,
                                format_record_file, parse_record_file)
from cas.repo import checks, datasets

ACTIVE = "ACTIVE"
RETIRED = "RETIRED"
PERSON_ERASED = "PERSON_ERASED"
# Causes an operator may give; PERSON_ERASED is only ever written by an erasure.
OPERATOR_CAUSES = ("CONTAMINATED", "INVALID_LABELS", "OPERATOR_REQUEST")
CAUSES = (PERSON_ERASED,) + OPERATOR_CAUSES
MAX_NOTE = 4096


def parse_cause(cause: str) -> str:
    """An operator's cause in any letter case -> its canonical spelling; others refused."""
    canonical = cause.strip().upper() if isinstance(cause, str) else None
    if canonical == PERSON_ERASED:
        raise InvalidArgument("the cause PERSON_ERASED cannot be given by hand: it is recorded "
                              "by `cas erase`, which also deletes the person's data; accepted: "
                              + ", ".join(OPERATOR_CAUSES), reason="CAUSE_RESERVED",
                              accepted=list(OPERATOR_CAUSES))
    if canonical not in OPERATOR_CAUSES:
        raise InvalidArgument(f"unknown retirement cause {cause!r}; accepted: "
                              + ", ".join(OPERATOR_CAUSES) + " (any letter case)",
                              reason="CAUSE_INVALID", accepted=list(OPERATOR_CAUSES))
    return canonical


def check_note(note: str) -> str:
    if not isinstance(note, str) or not note.strip():
        raise InvalidArgument(f"a retirement needs a note saying why: 1-{MAX_NOTE} characters",
                              reason="NOTE_REQUIRED")
    if len(note) > MAX_NOTE:
        raise InvalidArgument(f"a retirement note is at most {MAX_NOTE} characters; this one has "
                              f"{len(note)}", reason="NOTE_TOO_LONG", maximum=MAX_NOTE)
    check_json(note, "note")  # e.g. a lone surrogate, which no record can hold
    return note


def write(backend, record: VersionRetirement) -> bool:
    """Retire a version; False if it was already retired (that first retirement stands)."""
    return backend.put_if_absent(retired_key(record.dataset, record.number),
                                 format_record_file(record))


def write_erased(backend, version, erasure: str, author: str, when: str) -> bool:
    """Retire `version` (a VersionRecord) because erasure `erasure` deleted one of its cases."""
    return write(backend, VersionRetirement(
        dataset=version.dataset, number=version.number, cause=PERSON_ERASED, retired_at=when,
        author=author, erasure=erasure))


def retire(ctx, name: str, number: int, cause: str, note: str,
           author: str | None = None) -> VersionRetirement:
    """Retire `name@number` for an operator's cause (CONTAMINATED, INVALID_LABELS,
    OPERATOR_REQUEST; any letter case) with a note. Deletes nothing; permanent."""
    if not isinstance(cause, str):
        raise InvalidArgument(f"unknown retirement cause {encoding.describe(cause)}; "
                              "accepted: " + ", ".join(OPERATOR_CAUSES) + " (any letter "
                              "case)", reason="CAUSE_INVALID", accepted=list(OPERATOR_CAUSES))
    author = checks.author(author)
    cause = parse_cause(cause)
    note = check_note(note)
    datasets.version(ctx, name, number)  # exists (NotFound, naming a deletion, otherwise)
    record = VersionRetirement(dataset=name, number=number, cause=cause,
                               retired_at=ctx.clock(), note=note, author=author)
    if not write(ctx.backend, record):
        prior = ctx.refs.read_retirement(name, number)
        raise FailedPrecondition(
            f"{name}@{number} is already retired ({prior.cause} at {prior.retired_at}); a "
            "retirement is permanent and its first cause stands",
            reason="VERSION_ALREADY_RETIRED", dataset=name, version=number,
            cause=prior.cause, retired_at=prior.retired_at)
    # Then the dataset's own log names it: a retirement is never undone by losing one file.
    # (A kill between the two leaves the retirement standing, merely unwitnessed.)
    datasets.witness_retirement(ctx, name, number, author, record.retired_at)
    return record


def retirement(ctx, name: str, number: int) -> VersionRetirement | None:
    """The VersionRetirement of `name@number`, or None while it is ACTIVE."""
    datasets.version(ctx, name, number)
    return ctx.refs.read_retirement(name, number)


def version_state(ctx, name: str, number: int) -> str:
    """`ACTIVE`, or `RETIRED` once the version can no longer be honoured (for ever)."""
    return RETIRED if retirement(ctx, name, number) is not None else ACTIVE


def state_of(ctx, name: str, number: int) -> str:
    """`version_state` of a version the caller has just read or listed (its existence is not
    looked at again)."""
    return RETIRED if ctx.refs.read_retirement(name, number) is not None else ACTIVE


def active(ctx, name: str, number: int, what: str) -> VersionRecord:
    """The record of a version a read may use; a retired one is refused, saying `what`."""
    record = datasets.version(ctx, name, number)
    retired = ctx.refs.read_retirement(name, number)
    if retired is not None:
        raise refuse_retired(name, number, retired, what)
    return record


def erased_cases(ctx) -> set[str]:
    """Ids of every case an erasure deleted (or is deleting)."""
    out: set[str] = set()
    for key in ctx.backend.list(ERASURES):
        type_ = ErasurePlan if key.startswith(PENDING) else Erasure
        try:
            out.update(parse_record_file(ctx.backend.get(key), type_, key).cases)
        except NotFound:
            continue  # a plan completed meanwhile: its log record is listed too, or soon
    return out


def lost_cases(ctx, record: VersionRecord) -> list[str]:
    """The erased cases a version holds whose bytes are gone: a version cut from it leaves
    them out. (An erased case promoted again has its bytes back, and is not lost.)"""
    trie = ctx.trie()
    return sorted(c for c in erased_cases(ctx) if trie.contains(record.content_digest, c)
                  and not ctx.store.contains(c))


def refuse_retired(name: str, number: int, retirement: VersionRetirement,
                   what: str) -> FailedPrecondition:
    return FailedPrecondition(
        f"{name}@{number} is RETIRED ({retirement.cause} at {retirement.retired_at}): {what} "
        "is refused, permanently; cut a new version to bring the dataset back into use",
        reason="EVALUATION_DATASET_VERSION_RETIRED", dataset=name, version=number,
        state=RETIRED, retirement_cause=retirement.cause, retired_at=retirement.retired_at)
