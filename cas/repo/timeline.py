"""The timeline and the state of work: what happened to a repository (seals, retirements,
erasures, deletions, experiments, score batches, cassette recordings), newest first, and what
is waiting."""

from __future__ import annotations

from typing import Any, NamedTuple

from cas.errors import CasError, InvalidArgument, NotFound
from cas.format import encoding, keys
from cas.format.records import (CassetteLog, DatasetTombstone, Experiment, Proposal, ScoreBatch,
                                parse_record_file)
from cas.format.version_names import check_dataset_name
from cas.repo import reviews, runs
from cas.repo.citations import read_log
from cas.repo.erased import erasures
from cas.repo.proposals import sealed_by
from cas.storage.refs import read_log_from

MAX_LOG_PAGE = 500


class LogPage(NamedTuple):
    entries: list[dict]
    next_cursor: str | None  # pass as `cursor` for the next (older) page; None at the end


def log(ctx, dataset: str | None = None, limit: int = 50, cursor: str | None = None) -> LogPage:
    """The repository's timeline (or one dataset's), newest first, `limit` entries strictly
    older than `cursor`. An erasure entry gives its id, counts and the versions it retired,
    never the person."""
    if dataset is not None:
        check_dataset_name(dataset)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LOG_PAGE:
        raise InvalidArgument(f"limit must be a positive integer from 1 to {MAX_LOG_PAGE}, not "
                              f"{encoding.describe(limit)}", minimum=1, maximum=MAX_LOG_PAGE)
    encoding.check_text(cursor, "cursor", optional=True)
    entries = sorted(_entries(ctx, dataset), key=_order, reverse=True)
    if cursor is not None:
        entries = [e for e in entries if _cursor(e) < cursor]
    page = entries[:limit]
    more = len(entries) > limit
    return LogPage(page, _cursor(page[-1]) if more and page else None)


def _order(entry: dict) -> tuple:
    return (entry["at"] or "", entry["kind"], entry.get("dataset") or "",
            str(entry.get("version") or entry.get("number") or entry.get("id") or ""))


def _cursor(entry: dict) -> str:
    """An entry's place in the order, as text that sorts as the entries do."""
    return "\x1f".join(map(str, _order(entry)))


def _entries(ctx, dataset: str | None) -> list[dict]:
    names = [dataset] if dataset is not None else sorted(_dataset_names(ctx))
    out: list[dict] = []
    for name in names:
        out.extend(_dataset_entries(ctx, name))
    for record in erasures(ctx):
        retired = [{"dataset": v.dataset, "version": v.number} for v in record.retired]
        if dataset is not None and not any(v["dataset"] == dataset for v in retired):
            continue
        out.append({"kind": "erasure", "dataset": None, "version": None,
                    "at": record.erased_at, "author": record.author, "id": record.id,
                    "cases": len(record.cases), "runs": len(record.runs),
                    "reviews": len(record.reviews), "retired": retired})
    return out


def _dataset_names(ctx) -> set[str]:
    """Live datasets and deleted ones (their tombstone stays)."""
    names = set(ctx.refs.dataset_names())
    for key in ctx.backend.list(keys.DATASETS):
        found = keys.parse_tombstone_key(key)
        if found is not None:
            names.add(found[0])
    return names


def _dataset_entries(ctx, name: str) -> list[dict]:
    out: list[dict] = []
    gone = ctx.refs.read_dataset_tombstone(name)
    if gone is not None:
        out.append(_deleted_dataset(gone))
    elif not ctx.refs.dataset_exists(name):
        raise NotFound(f"no dataset named {name!r}", dataset=name)
    deleted = set(ctx.refs.deleted_numbers(name))
    for number in ctx.refs.version_numbers(name):
        if number in deleted:
            continue
        try:
            v = ctx.refs.read_version(name, number)
        except NotFound:
            continue  # deleted since the listing
        out.append({"kind": "seal", "dataset": name, "version": number, "at": v.sealed_at,
                    "author": v.author, "operation": v.operation, "item_count": v.item_count,
                    "added": v.added, "removed": v.removed, "message": v.message})
        retired = ctx.refs.read_retirement(name, number)
        if retired is not None:
            out.append({"kind": "retirement", "dataset": name, "version": number,
                        "at": retired.retired_at, "author": retired.author,
                        "cause": retired.cause, "erasure": retired.erasure})
    for number in sorted(deleted):
        tomb = ctx.refs.read_version_tombstone(name, number)
        if tomb is not None:
            out.append({"kind": "deletion", "dataset": name, "version": number,
                        "at": tomb.deleted_at, "author": tomb.author,
                        "item_count": tomb.item_count})
    out.extend(_citation_entries(ctx, name))
    for number, batch in read_log_from(ctx.backend, lambda n: keys.cassette_log_key(name, n),
                                       CassetteLog, 0):
        out.append({"kind": "cassettes", "dataset": name, "version": None,
                    "at": batch.recorded_at, "author": batch.author, "number": number,
                    "cassettes": len(batch.entries),
                    "executors": sorted({e.executor for e in batch.entries})})
    return out


def _deleted_dataset(tomb: DatasetTombstone) -> dict:
    return {"kind": "deletion", "dataset": tomb.dataset, "version": None, "at": tomb.deleted_at,
            "author": tomb.author}


def _citation_entries(ctx, name: str) -> list[dict]:
    out = []
    for log_name in keys.CITATION_LOGS:
        for number, _, entry in read_log(ctx, name, log_name):
            if isinstance(entry, Experiment):
                out.append({"kind": "experiment", "dataset": name, "version": entry.version,
                            "at": entry.created_at, "author": entry.author,
                            "name": entry.name, "number": number})
            elif isinstance(entry, ScoreBatch) and entry.scores:
                first = entry.scores[0]
                out.append({"kind": "scores", "dataset": name, "version": first.version,
                            "at": first.recorded_at, "author": first.author,
                            "number": number, "scores": len(entry.scores)})
    return out


def status(ctx, metric: str = "dataset_eligibility") -> dict[str, Any]:
    """What is waiting: staged proposals nobody sealed, runs still awaiting judgments on
    `metric` (as `cas review queue` keeps them), and erasures recorded but not finished."""
    encoding.check_text(metric, "metric")
    staged = []
    for name in ctx.refs.dataset_names():
        for key in ctx.backend.list(f"{keys.DATASETS}{name}/proposals/"):
            parsed = keys.parse_proposal_key(key)
            try:
                p = parse_record_file(ctx.backend.get(key), Proposal, key)
            except CasError:
                continue  # collected meanwhile, or damaged (fsck reports it)
            if parsed is None or sealed_by(ctx, name, p.base, parsed[1]) is not None:
                continue
            staged.append({"dataset": name, "confirm_token": parsed[1],
                           "operation": p.operation, "base": p.base, "author": p.author,
                           "created_at": p.created_at, "changes": len(p.add) + len(p.remove)})
    waiting = sorted(filter(reviews.awaiting(ctx, metric), runs.runs(ctx)))
    pending = sorted(found[0] for found in map(keys.parse_pending_key,
                                               ctx.backend.list(keys.PENDING)) if found)
    return {"staged_proposals": staged, "metric": metric, "runs_awaiting_review": len(waiting),
            "first_runs_awaiting_review": waiting[:10], "pending_erasures": pending}
