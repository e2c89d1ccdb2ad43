"""`cas replay`: re-execute one frozen case in the sandbox, or diff a run against it."""

from __future__ import annotations

import json

import click

from .common import (
    VERSION_ARGS,
    Context,
    json_option,
    pass_ctx,
    read_usage_error,
    split_version_args,
    to_json,
)

FORMS = ("DATASET VERSION ITEM_ID", "DATASET@VERSION ITEM_ID")


def _record_text(record) -> str:
    lines = [(f"{record.steps} steps, {record.tool_calls} tool calls: {record.replayed} "
              f"replayed, {record.stubbed} stubbed, {record.unrecorded} unrecorded"),
             f"plan: {record.plan_digest}",
             "stubbed tools: " + (", ".join(record.stubbed_tools) or "-")]
    for d in record.steps_detail:
        lines.append(f"{d.index:>4}  {d.disposition:<10}  {d.type or '-':<9}  "
                     f"{d.tool_name or '-'}")
    return "\n".join(lines)


def _diff_text(diff) -> str:
    if diff.identical:
        return "identical: the run has the frozen case's bytes"

    def show(entry: dict, side: str) -> str:
        if side not in entry:
            return "(absent)"
        return json.dumps(entry[side], ensure_ascii=False, sort_keys=True)
    lines = [f"{len(diff.differences)} differences (frozen -> replayed):"]
    lines += [f"{d['path']}: {show(d, 'frozen')} -> {show(d, 'replayed')}"
              for d in diff.differences]
    return "\n".join(lines)


@click.command(context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION ITEM_ID")
@click.option("--plan", "plan_file", type=click.File("rb"), default=None,
              help="Plan JSON: default_effect and tools [{tool_name, effect}] ('-' for "
                   "stdin). Without it every tool call is stubbed.")
@click.option("--diff", "show_diff", is_flag=True,
              help="Print how the replayed run differs from the frozen case instead.")
@click.option("--against", "against_file", type=click.File("rb"), default=None,
              help="Diff the frozen case against the run in this file (a case object, or "
                   "the output of `cas replay --json`) instead of replaying.")
@json_option
@pass_ctx
def replay(ctx: Context, args: tuple[str, ...], plan_file, show_diff: bool,
           against_file) -> None:
    """Replay one case of an exact version in the sandbox (also DATASET@VERSION ITEM_ID).

    Nothing is invoked and nothing is written: read-only calls get their recorded answer, and
    calls with an effect get a marked stub."""
    import cas
    name, number, (item_id,) = split_version_args("replay", args, FORMS)
    if against_file is not None and plan_file is not None:  # before any file is read
        raise read_usage_error("replay", FORMS, "--plan does nothing with --against (the "
                               "file is diffed as it is)", reason="USAGE")
    plan_source = getattr(plan_file, "name", "stdin")
    plan = plan_file.read() if plan_file is not None else None
    if against_file is None and not show_diff:
        result = cas.replay_item(ctx.repo(), name, number, item_id,
                                 cas.parse_plan(plan, plan_source))
        ctx.emit(to_json(result), lambda: f"replayed {name}@{number} {item_id}\n"
                                          + _record_text(result.record))
        return
    diff = cas.evals.replay.diff_item(
        ctx.repo(), name, number, item_id, plan,
        against_file.read() if against_file is not None else None, plan_source=plan_source,
        against_source=getattr(against_file, "name", "stdin"))
    ctx.emit(to_json(diff), lambda: _diff_text(diff))


COMMANDS = (replay,)  # registered on the root group by cli/main.py
