"""Retirement: a version whose set can no longer be honoured is retired, with a cause and a time.

A retirement is a record written once beside the version (`datasets/<name>/retired/<n>`); the
version record itself never changes, so `item_count` and `content_digest` still describe the
set as sealed. The first retirement of a version stands; the state never goes back to ACTIVE.
"""

from __future__ import annotations

from .encoding import check_json
from .errors import FailedPrecondition, InvalidArgument
from .objects import VersionRetirement, format_record_file
from .refs import retired_key

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


def retire(repo, name: str, number: int, cause: str, note: str, author: str,
           now: str) -> VersionRetirement:
    """An operator retires `name@number` for a documented cause. Deletes nothing."""
    cause = parse_cause(cause)
    note = check_note(note)
    repo.version(name, number)  # exists (NotFound, naming a deletion, otherwise)
    record = VersionRetirement(dataset=name, number=number, cause=cause, retired_at=now,
                               note=note, author=author)
    if not write(repo.backend, record):
        prior = repo.refs.read_retirement(name, number)
        raise FailedPrecondition(
            f"{name}@{number} is already retired ({prior.cause} at {prior.retired_at}); a "
            "retirement is permanent and its first cause stands",
            reason="VERSION_ALREADY_RETIRED", dataset=name, version=number,
            cause=prior.cause, retired_at=prior.retired_at)
    return record


def refuse_retired(name: str, number: int, retirement: VersionRetirement,
                   what: str) -> FailedPrecondition:
    return FailedPrecondition(
        f"{name}@{number} is RETIRED ({retirement.cause} at {retirement.retired_at}): {what} "
        "is refused, permanently; cut a new version to bring the dataset back into use",
        reason="EVALUATION_DATASET_VERSION_RETIRED", dataset=name, version=number,
        state=RETIRED, retirement_cause=retirement.cause, retired_at=retirement.retired_at)
