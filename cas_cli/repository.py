"""`cas init`, `cas fsck`, `cas gc`, `cas mirror`, `cas cat`: the repository as a whole."""

from __future__ import annotations

import json

import click

from .common import Example, Invocation, json_option, pass_ctx


@click.command()
@click.argument("path", default=".")
@json_option
@pass_ctx
def init(ctx: Invocation, path: str) -> None:
    """Create a repository in PATH/.cas (default: the current directory) or at s3://BUCKET/PREFIX."""
    from cas.repo import opening
    repo = opening.init(path)
    ctx.emit({"repository": repo.location, "repository_id": repo.config.repository_id},
             f"initialized empty cas repository in {repo.location}")


@click.command()
@json_option
@pass_ctx
def fsck(ctx: Invocation) -> None:
    """Read and verify every object, pack, index, tree and version record."""
    report = ctx.repo().fsck(progress=ctx.progress)
    ctx.progress("", 0, 0)
    problems = [p._asdict() for p in report.problems]

    def human() -> str:
        # errors first: leftovers (one notice per pack, however many objects) come after
        lines = [f"{p['severity']}: {p['where']}: {p['message']}"
                 for p in sorted(problems, key=lambda p: p["severity"] != "error")]
        pending = len(report.pending_erasures)
        lines.append(f"checked {report.objects} objects in {report.packs} packs, "
                     f"{report.versions} versions of {report.datasets} datasets: "
                     + ("ok" if report.ok else "DAMAGED")
                     + (f" ({pending} erasure(s) pending: the next command that writes "
                        "finishes them)" if pending else ""))
        return "\n".join(lines)

    ctx.emit({"ok": report.ok, "objects": report.objects, "packs": report.packs,
              "versions": report.versions, "datasets": report.datasets,
              "unreferenced": {"objects": report.unreferenced,
                               "bytes": report.unreferenced_bytes},
              "pending_erasures": list(report.pending_erasures),
              "problems": problems},
             human)
    if not report.ok:
        raise SystemExit(7)


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
def gc(ctx: Invocation, dry_run: bool, grace: str, wait: str) -> None:
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


@click.command()
@click.argument("src")
@click.argument("dst")
@json_option
@pass_ctx
def mirror(ctx: Invocation, src: str, dst: str) -> None:
    """Copy the repository at SRC to DST (directories or s3:// URLs), verifying every digest
    and copying only what DST lacks. Safe to interrupt and run again."""
    from cas.repo import mirror as mirroring
    report = mirroring.copy(src, dst, progress=ctx.progress)
    ctx.progress("", 0, 0)
    ctx.emit(report._asdict(),
             f"mirrored {src} -> {dst}: {report.packs_copied} packs and "
             f"{report.records_copied} records copied ({report.bytes_copied} bytes), "
             f"{report.packs_present} packs and {report.records_present} records already there")


@click.command()
@click.argument("digest")
@json_option
@pass_ctx
def cat(ctx: Invocation, digest: str) -> None:
    """Print one stored object, verified against its DIGEST (its canonical JSON bytes)."""
    from cas.digest import parse_digest
    kind, data = ctx.repo().object_bytes(digest)  # refuses a bad digest, verifies the bytes
    if ctx.as_json:  # the digest as the library spells it (uppercase hex folded)
        ctx.emit({"digest": parse_digest(digest), "kind": kind, "object": json.loads(data)})
    else:
        click.echo(data.decode("utf-8"))


EXAMPLES = {
    "init": (
        Example("cas init", "Create a repository in ./.cas."),
        Example("cas init s3://acme-evals/cas", "Create one in an S3 bucket (docs/s3.md)."),
    ),
    "fsck": (
        Example("cas fsck", "Verify every object, pack, index, tree and version record."),
        Example("cas --repo s3://acme-evals/cas fsck --json",
                "Verify the repository in S3; the report as JSON (exit 7 on damage)."),
    ),
    "gc": (
        Example("cas gc --dry-run", "Report what a gc would delete; delete nothing."),
        Example("cas gc --grace 7d",
                "Collect only packs and unsealed proposals older than a week."),
        Example("cas gc --wait 5m", "Wait up to 5 minutes for writers that started first."),
    ),
    "mirror": (
        Example("cas mirror ~/evals s3://acme-evals/cas",
                "Copy a local repository to S3; only what is missing there is copied."),
        Example("cas mirror s3://acme-evals/cas backups/evals",
                "Back the S3 repository up to a directory; safe to interrupt and rerun."),
    ),
    "cat": (
        Example("cas cat b3:9c1e...",
                "Print a stored object (e.g. a version's provenance) exactly as stored."),
    ),
}
