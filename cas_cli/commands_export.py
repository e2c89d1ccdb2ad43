"""Exporting a pinned version: `cas export DATASET VERSION --to FORMAT [-o PATH]`."""

from __future__ import annotations

import sys

import click

from .common import (
    VERSION_ARGS,
    Context,
    json_option,
    pass_ctx,
    read_usage_error,
    refuse_unknown_options,
    split_version_args,
)

FORMS = ("DATASET VERSION", "DATASET@VERSION")


def _source(args: tuple[str, ...]):
    """A pin as written (`DATASET@N#b3:...`, checked by the library) or (dataset, version)."""
    if args and "#" in args[0]:
        refuse_unknown_options(args)
        if len(args) > 1:
            raise read_usage_error("export", FORMS, f"unexpected extra argument {args[1]!r}",
                                   reason="USAGE")
        return args[0]
    name, number, _ = split_version_args("export", args, FORMS)
    return name, number


@click.command("export", context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION")
@click.option("--to", "to", required=True, metavar="FORMAT",
              help="jsonl, parquet, hf or openai-chat (docs/export.md).")
@click.option("-o", "--output", "output", default=None, metavar="PATH",
              help="Write here, atomically (required for parquet and hf; default: stdout).")
@json_option
@pass_ctx
def export(ctx: Context, args: tuple[str, ...], to: str, output: str | None) -> None:
    """Export an exact version (also DATASET@VERSION, or a pin DATASET@VERSION#b3:...)."""
    from cas.interop import exports
    source = _source(args)
    out = output if output is not None else sys.stdout.buffer
    result = exports.export(ctx.repo(), source, to, out)
    if output is None:  # stdout carried the export itself: nothing may follow it there
        return
    data = result._asdict()

    def human() -> str:
        extra = (f" ({result.skipped} skipped, {result.truncated} truncated)"
                 if result.format == "openai-chat" else "")
        return f"exported {result.cases} cases of {result.pin} to {result.path}{extra}"

    ctx.emit(data, human)


COMMANDS = (export,)  # registered on the root group by cli/main.py
