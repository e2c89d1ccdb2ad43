"""`cas version delete`: delete a version nothing cites."""

from __future__ import annotations

import click

from .common import (VERSION_ARGS, Example, Invocation, json_option, pass_ctx, split_version_args,
                     to_json)


@click.group("version")
@json_option
def version_group() -> None:
    """Delete versions (reads are `cas show`, `cas items`, `cas case`)."""


@version_group.command("delete", context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET N")
@json_option
@pass_ctx
def version_delete(ctx: Invocation, args: tuple[str, ...]) -> None:
    """Delete version N of DATASET; refused while a score or an experiment cites it. Its
    number is never used again."""
    name, number, _ = split_version_args("version delete", args, ("DATASET N", "DATASET@N"))
    t = ctx.repo().delete_version(name, number)
    ctx.emit(to_json(t), f"deleted {t.dataset}@{t.number} ({t.item_count} cases, "
                         f"{t.content_digest}); number {t.number} will not be used again")


EXAMPLES = {
    "version": (
        Example("cas version delete support-evals 4",
                "Delete version 4 (refused while a score or experiment cites it)."),
    ),
    "version delete": (
        Example("cas version delete support-evals 4",
                "Delete version 4; the number 4 is never used again."),
        Example("cas version delete support-evals@4", "The same, as DATASET@N."),
    ),
}
