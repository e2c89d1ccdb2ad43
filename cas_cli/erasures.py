"""`cas erasures list`: the record of completed erasures."""

from __future__ import annotations

import click

from .common import Example, Invocation, erasure_text, json_option, pass_ctx, to_json


@click.group()
@json_option
def erasures() -> None:
    """The record of completed erasures (keyed digests and counts, no identities)."""


@erasures.command("list")
@json_option
@pass_ctx
def erasures_list(ctx: Invocation) -> None:
    """List every completed erasure, oldest first."""
    records = ctx.repo().erasures()
    ctx.emit({"erasures": to_json(records)},
             lambda: "\n".join(erasure_text(e, e.id) for e in records))


EXAMPLES = {
    "erasures": (
        Example("cas erasures list", "Every completed erasure (keyed digests and counts only)."),
    ),
    "erasures list": (
        Example("cas erasures list", "Every completed erasure, oldest first."),
        Example("cas erasures list --json", "The erasure records as JSON."),
    ),
}
