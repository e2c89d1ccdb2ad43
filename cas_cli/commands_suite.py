"""`cas suite ...`: suite files (export); the runner's commands are in commands_suite_run."""

from __future__ import annotations

import sys

import click

from .common import VERSION_ARGS, Context, json_option, pass_ctx, split_version_args

FORMS = ("DATASET VERSION", "DATASET@VERSION")


@click.group()
@json_option
def suite() -> None:
    """Suites: a pinned version as a suite file, and the runner that turns it into a verdict."""


@suite.command("export", context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION")
@click.option("-o", "--output", "output", default=None, metavar="FILE",
              help="Write the suite here, atomically (default: stdout, only without --json).")
@json_option
@pass_ctx
def export(ctx: Context, args: tuple[str, ...], output: str | None) -> None:
    """Write an exact version as a redacted suite file (also DATASET@VERSION)."""
    from cas.evals import suites
    from cas.errors import InvalidArgument
    name, number, _ = split_version_args("suite export", args, FORMS)
    if output is None and ctx.as_json:
        raise InvalidArgument("--json reports a suite written with -o FILE; without -o the "
                              "suite itself is the output on stdout", reason="OUTPUT_REQUIRED")
    out = output if output is not None else sys.stdout.buffer
    result = suites.export(ctx.repo(), name, number, out)
    if output is None:  # stdout carried the suite itself: nothing may follow it there
        return
    data = {"suite": {"name": result.name, "version": result.version}, "cases": result.cases,
            "path": result.path}
    ctx.emit(data, f"wrote {result.cases} cases of {name}@{number} ({result.version}) to "
                   f"{result.path}")


COMMANDS = (suite,)  # registered on the root group by cli/main.py
