"""`cas experiment ...`: create, list and compare experiments over exact versions."""

from __future__ import annotations

import click

from .common import (VERSION_ARGS, VERSION_FORMS, Example, Invocation, json_option, pass_ctx,
                     split_version_args, table, to_json)


@click.group()
@json_option
def experiment() -> None:
    """Create and list experiments, each over an exact version."""


def _experiment_line(e) -> str:
    return (f"{e.name}  {e.dataset}@{e.version}  {e.content_digest}  {e.created_at}  "
            f"{e.author}")


@experiment.command("create", context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION")
@click.option("--name", "experiment_name", required=True, help="Unique within the dataset.")
@json_option
@pass_ctx
def experiment_create(ctx: Invocation, args: tuple[str, ...], experiment_name: str) -> None:
    """Record an experiment over an exact version."""
    name, number, _ = split_version_args("experiment create", args, VERSION_FORMS)
    e = ctx.repo().create_experiment(name, number, experiment_name)
    ctx.emit(to_json(e), f"created experiment {e.name} over {e.dataset}@{e.version} "
                         f"({e.content_digest})")


@experiment.command("list")
@click.argument("name", metavar="DATASET")
@json_option
@pass_ctx
def experiment_list(ctx: Invocation, name: str) -> None:
    """List a dataset's experiments, oldest first."""
    experiments = ctx.repo().experiments(name)
    ctx.emit({"dataset": name, "experiments": to_json(experiments)},
             lambda: "\n".join(_experiment_line(e) for e in experiments))


def _compare_text(c) -> str:
    from cas.repo.scores import value_text
    a, b = c.a.name, c.b.name
    rows = []
    for m in c.metrics:
        for side, agg in ((a, m.a), (b, m.b)):
            values = " ".join(f"{k}={n}" for k, n in agg.values.items()) or "-"
            mean = value_text(agg.mean) if agg.mean is not None else "-"
            rows.append((m.metric, side, str(agg.count), mean, values))
    lines = [f"{a} ({c.dataset}@{c.a.version}) vs {b} ({c.dataset}@{c.b.version})",
             table(("METRIC", "EXPERIMENT", "COUNT", "MEAN", "VALUES"), rows) if rows
             else "no scores"]
    n = len(c.differences)
    lines.append(f"{n} case{'s' if n != 1 else ''} scored differently"
                 + (":" if n else ""))
    if n:
        def shown(v) -> str:
            return "-" if v is None else value_text(v)
        lines.append(table(("METRIC", "ITEM", a, b),
                           [(d.metric, d.item, shown(d.a), shown(d.b))
                            for d in c.differences]))
    return "\n".join(lines)


@experiment.command("compare")
@click.argument("name", metavar="DATASET")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@json_option
@pass_ctx
def experiment_compare(ctx: Invocation, name: str, a: str, b: str) -> None:
    """Compare experiments A and B of DATASET: per-metric aggregates, and the cases scored
    differently (withdrawn scores left out)."""
    c = ctx.repo().compare_experiments(name, a, b)
    ctx.emit(to_json(c), lambda: _compare_text(c))


EXAMPLES = {
    "experiment": (
        Example("cas experiment create support-evals@2 --name baseline",
                "Record an experiment over version 2."),
        Example("cas experiment compare support-evals baseline candidate",
                "Compare the scores of two experiments."),
    ),
    "experiment create": (
        Example("cas experiment create support-evals@2 --name baseline",
                "Record experiment baseline over version 2 (a name unique per dataset)."),
    ),
    "experiment list": (
        Example("cas experiment list support-evals", "The dataset's experiments, oldest first."),
    ),
    "experiment compare": (
        Example("cas experiment compare support-evals baseline candidate",
                "Per-metric aggregates of both, and the cases they scored differently."),
    ),
}
