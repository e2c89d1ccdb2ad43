"""Datasets and their version records: metadata (itself versioned), heads, exact versions."""

from __future__ import annotations

from typing import Iterable, Iterator, NamedTuple

import msgspec

from cas.errors import AlreadyExists, InvalidArgument, NotFound, VersionConflict
from cas.format import encoding
from cas.format.keys import meta_key
from cas.format.records import ADMISSION_RULES, DatasetRecord, VersionRecord
from cas.format.version_names import check_dataset_name, check_version_number
from cas.repo import checks


class VersionsPage(NamedTuple):
    versions: list[VersionRecord]
    next_before: int | None


def create_dataset(ctx, name: str, description: str = "", tags: Iterable[str] = (),
                   author: str | None = None, admission: str = "reviewed") -> DatasetRecord:
    """A new dataset. Its admission rule, fixed for ever: "reviewed" (the default: only
    promotion of reviewed runs adds cases) or "direct" (commits may add cases too)."""
    check_dataset_name(name)
    encoding.check_text(description, "description")
    if admission not in ADMISSION_RULES:
        raise InvalidArgument(f"admission {encoding.describe(admission)} is not a rule; "
                              f"accepted: {', '.join(ADMISSION_RULES)}",
                              reason="ADMISSION_INVALID")
    record = DatasetRecord(name=name, revision=1, description=description,
                           tags=checks.tags(tags), author=checks.author(author),
                           edited_at=ctx.clock(), admission=admission)
    if ctx.refs.read_dataset_tombstone(name) is not None:
        raise _name_deleted(ctx, name)
    if not ctx.refs.append_meta(record):
        raise AlreadyExists(f"dataset {name!r} already exists", dataset=name)
    if ctx.refs.read_dataset_tombstone(name) is not None:  # deleted as we created it
        ctx.backend.delete(meta_key(name, 1))
        raise _name_deleted(ctx, name)
    return record


def _name_deleted(ctx, name: str) -> AlreadyExists:
    gone = ctx.refs.read_dataset_tombstone(name)
    when = f" ({gone.deleted_at} by {gone.author})" if gone is not None else ""
    return AlreadyExists(f"dataset {name!r} was deleted{when}; the name of a deleted "
                         "dataset cannot be used again", reason="DATASET_DELETED",
                         dataset=name)


def no_dataset(ctx, name: str) -> NotFound:
    """NotFound for a dataset that does not exist, saying so if it was deleted."""
    gone = ctx.refs.read_dataset_tombstone(name)
    if gone is not None:
        return NotFound(f"dataset {name!r} was deleted ({gone.deleted_at} by "
                        f"{gone.author})", reason="DATASET_DELETED", dataset=name)
    return NotFound(f"no dataset named {name!r}", dataset=name)


def edit_dataset(ctx, name: str, description: str | None = None,
                 tags: Iterable[str] | None = None, author: str | None = None) -> DatasetRecord:
    encoding.check_text(description, "description", optional=True)
    author = checks.author(author)
    current = dataset(ctx, name)
    record = DatasetRecord(
        name=name, revision=current.revision + 1,
        description=current.description if description is None else description,
        tags=current.tags if tags is None else checks.tags(tags),
        author=author, edited_at=ctx.clock(), admission=current.admission,
        retired=current.retired)
    if not ctx.refs.append_meta(record):
        raise VersionConflict(name, current.revision, ctx.refs.meta_head(name))
    return record


def witness_retirement(ctx, name: str, number: int, author: str, when: str) -> DatasetRecord:
    """A revision of the dataset's metadata naming `number` among its operator-retired
    versions (docs/format.md 4.8.1), so losing the retirement record alone is detectable.
    Retried past concurrent edits; a revision already naming it is returned as is."""
    while True:
        current = dataset(ctx, name)
        named = [] if current.retired is msgspec.UNSET else current.retired
        if number in named:
            return current
        record = msgspec.structs.replace(current, revision=current.revision + 1,
                                         retired=sorted({*named, number}), author=author,
                                         edited_at=when)
        if ctx.refs.append_meta(record):
            return record


def dataset(ctx, name: str) -> DatasetRecord:
    """The dataset's current metadata (its latest revision)."""
    check_dataset_name(name)
    head_ = ctx.refs.meta_head(name)
    if head_ == 0:
        raise no_dataset(ctx, name)
    return ctx.refs.read_meta(name, head_)


def admission(ctx, name: str) -> str:
    """The dataset's admission rule: fixed when it was created, so its first metadata
    revision says it (one read, where `dataset` lists the revisions to find the latest)."""
    check_dataset_name(name)
    try:
        return ctx.refs.read_meta(name, 1).admits
    except NotFound:
        raise no_dataset(ctx, name) from None


def dataset_history(ctx, name: str) -> list[DatasetRecord]:
    """Every revision of the dataset's metadata, oldest first."""
    top = dataset(ctx, name).revision
    return [ctx.refs.read_meta(name, r) for r in range(1, top + 1)]


def datasets(ctx) -> list[str]:
    return ctx.refs.dataset_names()


def head(ctx, name: str) -> int:
    """The newest version number that is not deleted (0 if none). For writers choosing a
    base, not for reads."""
    check_dataset_name(name)
    # Its first metadata revision, not its latest: a deletion removes that one first (and
    # the versions last), so a dataset half deleted has no head.
    if not ctx.refs.dataset_exists(name):
        raise no_dataset(ctx, name)
    return ctx.refs.head(name)


def version(ctx, name: str, number: int) -> VersionRecord:
    """The record of `name@number` (whatever its state)."""
    check_dataset_name(name)
    check_version_number(number)
    if not ctx.refs.dataset_exists(name):
        raise no_dataset(ctx, name)
    return ctx.refs.read_version(name, number)


def versions(ctx, name: str, before: int | None = None, limit: int = 20) -> VersionsPage:
    """Version records newest first, starting below `before` (a version number)."""
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise InvalidArgument(f"limit must be a positive integer, not "
                              f"{encoding.describe(limit)}")
    if before is not None and (not isinstance(before, int) or isinstance(before, bool)
                               or before < 1):
        raise InvalidArgument(f"before must be a positive integer (a version number), "
                              f"not {encoding.describe(before)}")
    top = head(ctx, name) if before is None else min(before - 1, head(ctx, name))
    deleted = set(ctx.refs.deleted_numbers(name)) if top else set()  # skipped
    records: list[VersionRecord] = []
    n = top
    while n >= 1 and len(records) < limit:
        if n not in deleted:
            try:
                records.append(ctx.refs.read_version(name, n))
            except NotFound as exc:
                if exc.reason != "VERSION_DELETED":  # deleted since the listing: skip
                    raise
        n -= 1
    more = any(k not in deleted for k in range(n, 0, -1))
    nxt = records[-1].number if records and more else None
    return VersionsPage(records, nxt)


def live_versions(ctx) -> Iterator[VersionRecord]:
    """Every version record of every live dataset that is not deleted (retired ones too)."""
    for name in ctx.refs.dataset_names():
        deleted = set(ctx.refs.deleted_numbers(name))
        for number in ctx.refs.version_numbers(name):
            if number not in deleted:
                try:
                    yield ctx.refs.read_listed_version(name, number)
                except NotFound:
                    continue  # deleted since the listing
