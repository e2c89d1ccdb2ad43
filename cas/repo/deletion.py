"""Deletion of a version or a dataset that nothing cites.

A version (or a dataset) that any score or experiment cites can never be deleted. A deletion
writes its tombstone first, then claims the next number of each citation log with a `fence`;
a citation is claimed as the next number of its log only after checking that no tombstone
exists (cas/repo/citations.py). So every citation either took a number below the fence (and
the deletion reads it and withdraws) or above it (and saw the tombstone and was refused): a
cited version is never deleted, even by concurrent writers. The version file is deleted last;
its number stays used forever (the tombstone), so a later seal never reuses it. A withdrawn
score batch cites nothing (cas/repo/scores.py).
"""

from __future__ import annotations

from typing import Any, Callable

from cas.errors import Aborted, FailedPrecondition, NotFound
from cas.format.keys import (CITATION_LOGS, DATASETS, citation_key_of, deleted_key, meta_key,
                             tombstone_key, version_key)
from cas.format.records import (DatasetTombstone, Fence, VersionTombstone, format_record_file,
                                parse_record_file_of)
from cas.format.version_names import check_dataset_name, check_version_number
from cas.repo import checks, datasets
from cas.repo.citations import entry_type, read_log, score_id
from cas.repo.scores import is_withdrawn
from cas.storage import claims


def _citation(ctx, name: str, log: str, number: int, key: str, entry: Any,
              version: int | None) -> tuple[str, str] | None:
    """(description, id) of the first citation of `version` (any version if None) in entry
    `number` of a log, or None. A withdrawn batch cites nothing (read only when the batch
    would cite: most batches of a log are about other versions)."""
    if isinstance(entry, Fence):
        return None
    if log == "scores":
        for i, s in enumerate(entry.scores):
            if version is None or s.version == version:
                if is_withdrawn(ctx, name, number):
                    return None
                return (f"score {score_id(key, i)} ({s.metric}={s.value!r} on "
                        f"{name}@{s.version}, recorded {s.recorded_at} by {s.author})",
                        score_id(key, i))
        return None
    if version is None or entry.version == version:
        return f"experiment {entry.name!r} ({key}, over {name}@{entry.version})", key
    return None


def _cited(name: str, what: str, citation: str, key: str, **fields: Any) -> FailedPrecondition:
    return FailedPrecondition(f"{what} is cited by {citation}; a cited {what.split()[0]} "
                              "cannot be deleted", reason="VERSION_CITED", cited_by=key,
                              dataset=name, **fields)


def _scan(ctx, name: str, target: int | None, what: str,
          rollback: Callable[[], None] | None = None, **fields: Any) -> dict[str, int]:
    """Refuse if any entry of either citation log cites `version` (any version if None);
    returns each log's head."""
    heads = {}
    for log in CITATION_LOGS:
        heads[log] = 0
        for n, key, entry in read_log(ctx, name, log):
            heads[log] = n
            found = _citation(ctx, name, log, n, key, entry, target)
            if found:
                if rollback is not None:
                    rollback()
                raise _cited(name, what, *found, **fields)
    return heads


def _fence(ctx, name: str, target: int | None, heads: dict[str, int], reason: str,
           author: str, now: str, rollback: Callable[[], None], what: str,
           **fields: Any) -> None:
    """Claim the next number of each citation log. A citation that took a number first is
    read here: the deletion is withdrawn (`rollback`) and refused, naming it."""
    for log in CITATION_LOGS:
        n = heads[log]
        key_of = citation_key_of(name, log)
        try:
            for _ in claims.attempts(f"a fence in {DATASETS}{name}/{log}/", dataset=name):
                fence = Fence(dataset=name, log=log, number=n + 1, reason=reason,
                              author=author, written_at=now)
                key = key_of(n + 1)
                if ctx.backend.put_if_absent(key, format_record_file(fence)):
                    break
                try:
                    data = ctx.backend.get(key)
                except NotFound:
                    continue  # the claim that won was withdrawn meanwhile: this number again
                entry = parse_record_file_of(data, (entry_type(log), Fence), key)
                found = _citation(ctx, name, log, n + 1, key, entry, target)
                if found:
                    rollback()
                    raise _cited(name, what, *found, **fields)
                n += 1
        except Aborted:
            rollback()  # contended beyond the bound: withdraw the deletion, then refuse
            raise


def delete_version(ctx, name: str, number: int, author: str | None = None) -> VersionTombstone:
    """Delete a version nothing cites: tombstone, fences, then the version file. An
    interrupted deletion is completed by running it again."""
    author, now = checks.author(author), ctx.clock()
    datasets.dataset(ctx, name)
    check_version_number(number)
    vkey, dkey = version_key(name, number), deleted_key(name, number)
    tomb = ctx.refs.read_version_tombstone(name, number)
    if tomb is not None and not ctx.backend.exists(vkey):
        raise NotFound(f"version {number} of dataset {name!r} was already deleted "
                       f"({tomb.deleted_at} by {tomb.author})", reason="VERSION_DELETED",
                       dataset=name, version=number)
    what = f"version {name}@{number}"

    def rollback() -> None:
        ctx.backend.delete(dkey)

    if tomb is None:
        record = ctx.refs.read_version(name, number)
        heads = _scan(ctx, name, number, what, version=number)
        tomb = VersionTombstone(dataset=name, number=number,
                                content_digest=record.content_digest,
                                item_count=record.item_count, author=author, deleted_at=now)
        if not ctx.backend.put_if_absent(dkey, format_record_file(tomb)):
            tomb = ctx.refs.read_version_tombstone(name, number) or tomb  # a concurrent delete
    else:  # resuming an interrupted deletion (the version file is still there): check again
        heads = _scan(ctx, name, number, what, rollback, version=number)
    _fence(ctx, name, number, heads, f"delete version {number}", author, now, rollback, what,
           version=number)
    ctx.backend.delete(vkey)
    return tomb


def delete_dataset(ctx, name: str, author: str | None = None) -> DatasetTombstone:
    """Delete a dataset none of whose versions is cited: tombstone, fences, then its records.
    The tombstone and the citation logs (by then only fences) stay, so the name is never
    created again and no late citation can claim a number there."""
    check_dataset_name(name)
    author, now = checks.author(author), ctx.clock()
    tomb = ctx.refs.read_dataset_tombstone(name)
    prefix = f"{DATASETS}{name}/"
    kept = (tombstone_key(name), f"{prefix}scores/", f"{prefix}withdrawn/", f"{prefix}experiments/")
    if tomb is not None:
        leftovers = [k for k in ctx.backend.list(prefix) if not k.startswith(kept)]
        if not leftovers:
            raise NotFound(f"dataset {name!r} was already deleted ({tomb.deleted_at} by "
                           f"{tomb.author})", reason="DATASET_DELETED", dataset=name)
    else:
        datasets.dataset(ctx, name)
    what = f"dataset {name!r}"

    def rollback() -> None:
        # Only while nothing is deleted yet: a half-deleted dataset keeps its tombstone.
        if ctx.backend.exists(meta_key(name, 1)):
            ctx.backend.delete(tombstone_key(name))

    heads = _scan(ctx, name, None, what, rollback if tomb is not None else None)
    if tomb is None:
        tomb = DatasetTombstone(dataset=name, head=ctx.refs.last_number(name), author=author,
                                deleted_at=now)
        if not ctx.backend.put_if_absent(tombstone_key(name), format_record_file(tomb)):
            tomb = ctx.refs.read_dataset_tombstone(name) or tomb
    _fence(ctx, name, None, heads, "delete dataset", author, now, rollback, what)
    # Metadata revision 1 first: from then on the dataset does not exist for any reader.
    doomed = [k for k in ctx.backend.list(prefix) if not k.startswith(kept)]
    first = meta_key(name, 1)
    for key in sorted(doomed, key=lambda k: (k != first, k)):
        ctx.backend.delete(key)
    return tomb
