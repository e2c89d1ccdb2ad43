"""`cas retire`, `cas erase`, `cas erasures list`, `cas gc`: retirement, erasure and garbage."""

from __future__ import annotations

import shlex

import click

from .common import (
    VERSION_ARGS,
    Context,
    json_option,
    pass_ctx,
    split_version_args,
    to_json,
)


@click.command(context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION")
@click.option("--cause", required=True, metavar="CAUSE",
              help="CONTAMINATED, INVALID_LABELS or OPERATOR_REQUEST (any letter case).")
@click.option("--note", required=True, help="Why, for whoever finds the version retired.")
@json_option
@pass_ctx
def retire(ctx: Context, args: tuple[str, ...], cause: str, note: str) -> None:
    """Retire DATASET VERSION for good: reads, scores and experiments over it are refused from
    now on. Deletes nothing (erasing a person is `cas erase`)."""
    name, number, _ = split_version_args("retire", args, ("DATASET VERSION", "DATASET@VERSION"))
    r = ctx.repo().retire(name, number, cause, note)
    ctx.emit({**to_json(r), "state": "RETIRED"},
             f"retired {r.dataset}@{r.number}: {r.cause} at {r.retired_at}")


@click.command()
@click.option("--person", required=True, metavar="PERSON_ID",
              help="The person whose cases, runs and reviews are deleted.")
@click.option("--confirm-token", default=None, metavar="TOKEN",
              help="The token of the preview: carries out exactly what it showed.")
@json_option
@pass_ctx
def erase(ctx: Context, person: str, confirm_token: str | None) -> None:
    """Erase a person: without --confirm-token, preview what would be deleted and retired;
    with the preview's token, delete it from every version, pack and log."""
    result = ctx.repo().erase(person, confirm_token, progress=ctx.progress)
    if isinstance(result, dict):  # a preview
        for warning in result["warnings"]:
            click.echo(f"cas: warning: {warning}", err=True)
        ctx.emit(result, lambda: _preview_text(result, person))
        return
    ctx.progress("", 0, 0)
    ctx.emit(to_json(result), lambda: _erasure_text(result, "erased"))


def _n(count: int, noun: str) -> str:
    """`1 case`, `2 cases`, `0 cases`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _preview_text(p: dict, person: str) -> str:
    """The preview, in the future tense: nothing is deleted or retired before the confirmation.
    It names the person as typed (the caller gave it); the record keeps only the digest."""
    if not p["matched"]:
        return f"nothing to erase: nothing matched {person}; no record will be written"
    lines = [(f"erasing {person} will delete {_n(len(p['cases']), 'case')}, "
              f"{_n(len(p['runs']), 'run')} and {_n(len(p['reviews']), 'review')}, and will "
              f"retire {_n(len(p['versions_to_retire']), 'version')}:")]
    lines += [f"  will retire {v['dataset']}@{v['number']} ({v['state']}, "
              f"{_n(v['item_count'], 'case')})" for v in p["versions_to_retire"]]
    lines += [f"  will delete run {r}" for r in p["runs"]]
    lines += [f"  will delete case {c}" for c in p["cases"]]
    lines += [f"  will delete review {a}" for a in p["reviews"]]
    lines += [f"  will delete proposal {t}" for t in p["proposals_to_delete"]]
    lines += [f"  cited by score {s['score_id']} ({s['metric']}, {s['dataset']}@{s['version']})"
              for s in p["citing_scores"]]
    lines += [f"  cited by experiment {e['name']} ({e['dataset']}@{e['version']})"
              for e in p["citing_experiments"]]
    lines.append(f"confirm with: cas erase --person {shlex.quote(person)} --confirm-token "
                 f"{p['confirm_token']}")
    return "\n".join(lines)


def _erasure_text(e, verb: str) -> str:
    retired = ", ".join(f"{r.dataset}@{r.number}" for r in e.retired) or "none"
    return (f"{verb} {e.person} at {e.erased_at}: {_n(len(e.cases), 'case')}, "
            f"{_n(len(e.runs), 'run')}, {_n(len(e.reviews), 'review')}; "
            f"{_n(e.objects_deleted, 'object')} deleted from {_n(e.packs_rewritten, 'pack')}; "
            f"retired: {retired}")


@click.group()
@json_option
def erasures() -> None:
    """The record of completed erasures (keyed digests and counts, no identities)."""


@erasures.command("list")
@json_option
@pass_ctx
def erasures_list(ctx: Context) -> None:
    """List every completed erasure, oldest first."""
    records = ctx.repo().erasures()
    ctx.emit({"erasures": to_json(records)},
             lambda: "\n".join(_erasure_text(e, e.id) for e in records))


@click.command()
@click.option("--dry-run", is_flag=True, help="Report what would be deleted; delete nothing.")
@click.option("--grace", default="24h", show_default=True, metavar="DURATION",
              help="Keep packs and staged proposals younger than this (seconds, or e.g. 30m, "
                   "24h, 7d).")
@click.option("--wait", default="60s", show_default=True, metavar="DURATION",
              help="How long to wait for writers that started before this gc; if they are "
                   "still at work, nothing is deleted (run gc again).")
@json_option
@pass_ctx
def gc(ctx: Context, dry_run: bool, grace: str, wait: str) -> None:
    """Delete objects no version, run, review, proposal or score reaches, rewriting packs that
    are mostly garbage, and stale proposals. Safe while others write."""
    report = ctx.repo().gc(dry_run=dry_run, grace=grace, wait=wait, progress=ctx.progress)
    would = "would reclaim" if dry_run else "reclaimed"

    def human() -> str:
        if report.deferred:
            return (f"deleted nothing: {report.deferred} writer(s) that started before this gc "
                    "are still at work; run `cas gc` again")
        return (f"{would} {report.bytes_reclaimed} bytes: {report.objects_deleted} objects; "
                f"{report.packs_rewritten} of {report.packs} packs rewritten into "
                f"{report.packs_written}, {report.packs_deleted} unpublished deleted; "
                f"{report.proposals_deleted} stale proposals and {report.records_deleted} "
                f"person index records deleted; {report.garbage_kept} unreachable objects kept "
                "(young packs or mostly live ones)")
    ctx.emit(report._asdict(), human)


COMMANDS = (retire, erase, erasures, gc)  # registered on the root group by cli/main.py
