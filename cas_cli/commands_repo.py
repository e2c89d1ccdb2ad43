"""`cas init`, `cas fsck`, `cas cat`: the repository as a whole."""

from __future__ import annotations

import json

import click

from .common import Context, json_option, pass_ctx


@click.command()
@click.argument("path", default=".")
@json_option
@pass_ctx
def init(ctx: Context, path: str) -> None:
    """Create a repository in PATH/.cas (default: the current directory) or at s3://BUCKET/PREFIX."""
    import cas
    repo = cas.init(path)
    ctx.emit({"repository": repo.location, "repository_id": repo.config.repository_id},
             f"initialized empty cas repository in {repo.location}")


@click.command()
@json_option
@pass_ctx
def fsck(ctx: Context) -> None:
    """Read and verify every object, pack, index, tree and version record."""
    report = ctx.repo().fsck(progress=ctx.progress)
    ctx.progress("", 0, 0)
    problems = [p._asdict() for p in report.problems]

    def human() -> str:
        # errors first: leftovers (one notice per pack, however many objects) come after
        lines = [f"{p['severity']}: {p['where']}: {p['message']}"
                 for p in sorted(problems, key=lambda p: p["severity"] != "error")]
        lines.append(f"checked {report.objects} objects in {report.packs} packs, "
                     f"{report.versions} versions of {report.datasets} datasets: "
                     + ("ok" if report.ok else "DAMAGED"))
        return "\n".join(lines)

    ctx.emit({"ok": report.ok, "objects": report.objects, "packs": report.packs,
              "versions": report.versions, "datasets": report.datasets,
              "unreferenced": {"objects": report.unreferenced,
                               "bytes": report.unreferenced_bytes},
              "problems": problems},
             human)
    if not report.ok:
        raise SystemExit(7)


@click.command()
@click.argument("digest")
@json_option
@pass_ctx
def cat(ctx: Context, digest: str) -> None:
    """Print one stored object, verified against its DIGEST (its canonical JSON bytes)."""
    from cas.digest import parse_digest
    kind, data = ctx.repo().object_bytes(digest)  # refuses a bad digest, verifies the bytes
    if ctx.as_json:  # the digest as the library spells it (uppercase hex folded)
        ctx.emit({"digest": parse_digest(digest), "kind": kind, "object": json.loads(data)})
    else:
        click.echo(data.decode("utf-8"))


@click.command()
@click.argument("src")
@click.argument("dst")
@json_option
@pass_ctx
def mirror(ctx: Context, src: str, dst: str) -> None:
    """Copy the repository at SRC to DST (directories or s3:// URLs), verifying every digest
    and copying only what DST lacks. Safe to interrupt and run again."""
    from cas.repo import mirror as mirroring
    report = mirroring.copy(src, dst, progress=ctx.progress)
    ctx.progress("", 0, 0)
    ctx.emit(report._asdict(),
             f"mirrored {src} -> {dst}: {report.packs_copied} packs and "
             f"{report.records_copied} records copied ({report.bytes_copied} bytes), "
             f"{report.packs_present} packs and {report.records_present} records already there")


COMMANDS = (init, fsck, cat, mirror)  # registered on the root group by cli/main.py
