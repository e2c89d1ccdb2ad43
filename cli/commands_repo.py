"""`cas init`, `cas fsck`, `cas cat`: the repository as a whole."""

from __future__ import annotations

import json
import os

import click

from .main import Context, cli, json_option

pass_ctx = click.make_pass_decorator(Context)


@cli.command()
@click.argument("path", default=".")
@json_option
@pass_ctx
def init(ctx: Context, path: str) -> None:
    """Create a repository in PATH/.cas (default: the current directory) or at s3://BUCKET/PREFIX."""
    import cas
    repo = cas.init(path)
    ctx.emit({"repository": repo.location, "repository_id": repo.config.repository_id},
             f"initialized empty cas repository in {repo.location}")


@cli.command()
@json_option
@pass_ctx
def fsck(ctx: Context) -> None:
    """Read and verify every object, pack, index, tree and version record."""
    report = ctx.repo().fsck(progress=ctx.progress)
    if not ctx.as_json:
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


@cli.command()
@click.argument("digest")
@json_option
@pass_ctx
def cat(ctx: Context, digest: str) -> None:
    """Print one stored object, verified against its DIGEST (its canonical JSON bytes)."""
    from cas.digest import parse_digest
    digest = parse_digest(digest)
    kind, data = ctx.repo().store.get_bytes(digest)
    if ctx.as_json:
        ctx.emit({"digest": digest, "kind": kind, "object": json.loads(data)})
    else:
        click.echo(data.decode("utf-8"))


@cli.command()
@click.argument("src")
@click.argument("dst")
@json_option
@pass_ctx
def mirror(ctx: Context, src: str, dst: str) -> None:
    """Copy the repository at SRC to DST (directories or s3:// URLs), verifying every digest
    and copying only what DST lacks. Safe to interrupt and run again."""
    import cas
    from cas.backends import backend_for
    from cas.mirror import mirror as run_mirror
    for what, location in (("SRC", src), ("DST", dst)):
        try:
            os.fsencode(location)  # the bytes of a path (undecodable ones come back as such)
        except UnicodeEncodeError:
            location = "\x00"
        if "\x00" in location:  # no path holds these
            raise cas.InvalidArgument(f"{what} is not a location: it holds a NUL character or "
                                      "a lone surrogate")
    source = cas.open(src).backend  # refuses a location that holds no repository
    report = run_mirror(source, backend_for(dst, create=True), progress=ctx.progress)
    if not ctx.as_json:
        ctx.progress("", 0, 0)
    ctx.emit(report._asdict(),
             f"mirrored {src} -> {dst}: {report.packs_copied} packs and "
             f"{report.records_copied} records copied ({report.bytes_copied} bytes), "
             f"{report.packs_present} packs and {report.records_present} records already there")
