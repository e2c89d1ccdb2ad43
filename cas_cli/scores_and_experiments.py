"""The plain commands of "Scores and experiments": `cas pin`, `cas pin-verify`."""

from __future__ import annotations

import click

from .common import (PIN, VERSION_ARGS, VERSION_FORMS, Example, Invocation, json_option,
                     lock_option, pass_ctx, split_version_args)


@click.command("pin", context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION")
@lock_option
@json_option
@pass_ctx
def pin(ctx: Invocation, args: tuple[str, ...]) -> None:
    """Print the pin of an exact version: DATASET@VERSION#<content_digest> (DATASET alone:
    the version cas.lock pins)."""
    args = ctx.locked_args(args, "pin", VERSION_FORMS)
    name, number, _ = split_version_args("pin", args, VERSION_FORMS)
    p = ctx.repo().pin(name, number)
    ctx.emit({"pin": str(p), "dataset": p.dataset, "version": p.version,
              "content_digest": p.content_digest, **ctx.resolved_json()}, str(p))


@click.command("pin-verify")
@click.argument("pin_text", metavar="PIN")
@json_option
@pass_ctx
def pin_verify(ctx: Invocation, pin_text: str) -> None:
    """Check a pin against the repository: the version exists, holds the pinned set and is
    not retired (a retired version's pin fails: every read of it is refused)."""
    repo = ctx.repo()
    record = repo.verify_pin(pin_text)  # refuses a RETIRED version: CI fails
    state = repo.version_state(record.dataset, record.number)
    text = f"{record.dataset}@{record.number}#{record.content_digest}"
    ctx.emit({"valid": True, "pin": text, "dataset": record.dataset, "version": record.number,
              "content_digest": record.content_digest, "item_count": record.item_count,
              "state": state},
             f"valid: {text} ({record.item_count} cases, {state})")


EXAMPLES = {
    "pin": (
        Example("cas pin support-evals@2",
                "Print support-evals@2#b3:... to cite the exact set in a report or CI."),
    ),
    "pin-verify": (
        Example(f"cas pin-verify {PIN}",
                "Fails when the version was deleted or retired, or holds another set."),
    ),
}
