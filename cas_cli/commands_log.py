"""`cas log`, `cas status`: what happened to the repository, and what is waiting."""

from __future__ import annotations

import click

from .common import INTEGER, Context, json_option, pass_ctx


def _line(e: dict) -> str:
    where = f"{e['dataset']}@{e['version']}" if e.get("version") else (e.get("dataset") or "")
    kind = e["kind"]
    if kind == "seal":
        what = (f"sealed {where} ({e['operation']}: {e['item_count']} cases, +{e['added']} "
                f"-{e['removed']})" + (f" {e['message']}" if e["message"] else ""))
    elif kind == "retirement":
        what = f"retired {where} ({e['cause']})"
    elif kind == "erasure":
        retired = ", ".join(f"{v['dataset']}@{v['version']}" for v in e["retired"]) or "none"
        what = (f"erasure {e['id']}: {e['cases']} cases, {e['runs']} runs, {e['reviews']} "
                f"reviews deleted; retired {retired}")
    elif kind == "deletion":
        what = f"deleted {where}" if e.get("version") else f"deleted dataset {e['dataset']}"
    elif kind == "experiment":
        what = f"experiment {e['name']!r} over {where}"
    elif kind == "cassettes":
        what = (f"recorded {e['cassettes']} cassettes of {where} under "
                f"{', '.join(e['executors'])} (batch {e['number']})")
    else:
        what = f"{e['scores']} scores on {where} (batch {e['number']})"
    return f"{e['at']}  {what}  by {e['author']}"


@click.command()
@click.argument("dataset", required=False)
@click.option("--limit", type=INTEGER, default=50, show_default=True,
              help="Entries per page, 1 to 500.")
@click.option("--cursor", default=None, help="Continue after this entry (next_cursor).")
@json_option
@pass_ctx
def log(ctx: Context, dataset: str | None, limit: int, cursor: str | None) -> None:
    """The timeline of seals, retirements, erasures, deletions, experiments, score batches
    and cassette recordings, newest first (of DATASET, or of the whole repository)."""
    page = ctx.repo().log(dataset, limit=limit, cursor=cursor)
    ctx.emit({"entries": page.entries, "next_cursor": page.next_cursor},
             lambda: "\n".join([*map(_line, page.entries)] + (
                 [f"(more: --cursor '{page.next_cursor}')"] if page.next_cursor else [])))


@click.command()
@click.option("--metric", default="dataset_eligibility", show_default=True,
              help="The judgment a run awaits.")
@json_option
@pass_ctx
def status(ctx: Context, metric: str) -> None:
    """Staged proposals nobody sealed, runs awaiting review, erasures not finished."""
    s = ctx.repo().status(metric)

    def human() -> str:
        lines = [f"staged proposals not sealed: {len(s['staged_proposals'])}"]
        lines += [f"  {p['dataset']}: {p['operation']} on v{p['base']} by {p['author']} "
                  f"({p['confirm_token']})" for p in s["staged_proposals"]]
        lines.append(f"runs awaiting review ({metric}): {s['runs_awaiting_review']}")
        lines += [f"  {r}" for r in s["first_runs_awaiting_review"]]
        lines.append(f"erasures not finished: {len(s['pending_erasures'])}")
        lines += [f"  {e}" for e in s["pending_erasures"]]
        return "\n".join(lines)
    ctx.emit(s, human)


COMMANDS = (log, status)  # registered on the root group by cli/main.py
