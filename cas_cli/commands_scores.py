"""`cas pin`, `cas pin-verify`, `cas score`, `cas experiment`, `cas version delete`: results
that cite exact versions, and deleting versions nothing cites."""

from __future__ import annotations

import click

from .common import (
    VERSION_ARGS,
    Context,
    json_option,
    pass_ctx,
    refuse_unknown_options,
    split_version_args,
    to_json,
)

VERSION_FORMS = ("DATASET VERSION", "DATASET@VERSION")


def score_json(s) -> dict:
    return {**to_json(s), "pin": str(s.pin)}


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """Columns left-aligned, two spaces apart, trailing spaces trimmed."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in [header, *rows])


def _score_row(s) -> tuple[str, ...]:
    from cas.repo.scores import value_text
    state = s.version_state + (" WITHDRAWN" if s.withdrawn else "")
    return (s.batch, f"{s.dataset}@{s.version}", s.metric, value_text(s.value), s.item or "-",
            s.experiment or "-", state)


SCORE_HEADER = ("BATCH", "VERSION", "METRIC", "VALUE", "ITEM", "EXPERIMENT", "STATE")


# -- pins ---------------------------------------------------------------------------------
@click.command("pin", context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION")
@json_option
@pass_ctx
def pin(ctx: Context, args: tuple[str, ...]) -> None:
    """Print the pin of an exact version: DATASET@VERSION#<content_digest>."""
    name, number, _ = split_version_args("pin", args, VERSION_FORMS)
    p = ctx.repo().pin(name, number)
    ctx.emit({"pin": str(p), "dataset": p.dataset, "version": p.version,
              "content_digest": p.content_digest}, str(p))


@click.command("pin-verify")
@click.argument("pin_text", metavar="PIN")
@json_option
@pass_ctx
def pin_verify(ctx: Context, pin_text: str) -> None:
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


# -- scores -------------------------------------------------------------------------------
@click.group()
@json_option
def score() -> None:
    """Record and list scores that cite an exact version."""


@score.command("add", context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION")
@click.option("--metric", default=None, help="What was measured, e.g. task_success.")
@click.option("--value", "value_text", default=None, metavar="VALUE",
              help="true/false (a boolean), a JSON number, or a label of at most 64 "
                   "printable characters.")
@click.option("--item", default=None, metavar="CASE_ID",
              help="The case scored (a case of that version); omit for the whole version.")
@click.option("--file", "batch", type=click.File("rb"), default=None,
              help='JSON Lines of {"metric", "value", "item"?}: one batch of that version.')
@click.option("--experiment", default=None, metavar="NAME",
              help="The experiment (over that version) the scores belong to.")
@json_option
@pass_ctx
def score_add(ctx: Context, args: tuple[str, ...], metric: str | None, value_text: str | None,
              item: str | None, batch, experiment: str | None) -> None:
    """Record a score, or a file of them as one batch, citing DATASET VERSION (pinned with
    its content_digest)."""
    import cas
    from cas.repo.scores import parse_value, read_score_lines
    name, number, _ = split_version_args("score add", args, VERSION_FORMS)
    if batch is not None:
        if metric is not None or value_text is not None or item is not None:
            raise cas.InvalidArgument("give either --metric --value [--item], or --file, "
                                      "not both", reason="USAGE")
        rows = [{**r, "experiment": experiment}
                for r in read_score_lines(batch, getattr(batch, "name", "stdin"))]
    elif metric is None or value_text is None:
        raise cas.InvalidArgument("score add needs --metric and --value (or --file)",
                                  reason="USAGE")
    else:
        rows = [{"metric": metric, "value": parse_value(value_text), "item": item,
                 "experiment": experiment}]
    repo = ctx.repo()
    recorded = repo.record_scores(repo.pin(name, number), rows)
    if batch is None:
        s = recorded[0]
        ctx.emit(score_json(s), f"recorded {s.score_id}: {s.metric}={s.value!r} on {s.pin}")
        return
    first = recorded[0]
    ctx.emit({"batch": first.batch, "pin": str(first.pin),
              "scores": [score_json(s) for s in recorded]},
             f"recorded batch {first.batch}: {len(recorded)} "
             f"score{'s' if len(recorded) != 1 else ''} on {first.pin}")


@score.command("list", context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET [VERSION]")
@json_option
@pass_ctx
def score_list(ctx: Context, args: tuple[str, ...]) -> None:
    """List the scores of a dataset, or of one of its versions, in the order recorded;
    withdrawn ones are marked WITHDRAWN."""
    import cas
    refuse_unknown_options(args)
    if len(args) == 1 and "@" not in args[0]:
        name, number = args[0], None
    elif not args:
        raise cas.InvalidArgument("missing DATASET (use: cas score list DATASET [VERSION])",
                                  reason="USAGE")
    else:
        name, number, _ = split_version_args("score list", args, VERSION_FORMS)
    scores = ctx.repo().scores(name, number)
    ctx.emit({"dataset": name, "version": number, "scores": [score_json(s) for s in scores]},
             lambda: table(SCORE_HEADER, [_score_row(s) for s in scores]) if scores
             else "no scores")


@score.command("withdraw")
@click.argument("batch_id", metavar="BATCH")
@click.option("--reason", required=True, help="Why the batch is withdrawn (1-4096 characters).")
@json_option
@pass_ctx
def score_withdraw(ctx: Context, batch_id: str, reason: str) -> None:
    """Withdraw a score batch (its id as `cas score list` shows it): its scores stay listed,
    marked WITHDRAWN, and no longer cite their version. Once per batch."""
    from cas.repo.scores import parse_batch_id
    name, number = parse_batch_id(batch_id)
    w = ctx.repo().withdraw_batch(name, number, reason)
    ctx.emit({**to_json(w), "batch_id": batch_id},
             f"withdrew {batch_id}: {w.reason}")


# -- experiments --------------------------------------------------------------------------
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
def experiment_create(ctx: Context, args: tuple[str, ...], experiment_name: str) -> None:
    """Record an experiment over an exact version."""
    name, number, _ = split_version_args("experiment create", args, VERSION_FORMS)
    e = ctx.repo().create_experiment(name, number, experiment_name)
    ctx.emit(to_json(e), f"created experiment {e.name} over {e.dataset}@{e.version} "
                         f"({e.content_digest})")


@experiment.command("list")
@click.argument("name", metavar="DATASET")
@json_option
@pass_ctx
def experiment_list(ctx: Context, name: str) -> None:
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
def experiment_compare(ctx: Context, name: str, a: str, b: str) -> None:
    """Compare experiments A and B of DATASET: per-metric aggregates, and the cases scored
    differently (withdrawn scores left out)."""
    c = ctx.repo().compare_experiments(name, a, b)
    ctx.emit(to_json(c), lambda: _compare_text(c))


# -- deletion -----------------------------------------------------------------------------
@click.group("version")
@json_option
def version_group() -> None:
    """Delete versions (reads are `cas show`, `cas items`, `cas case`)."""


@version_group.command("delete", context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET N")
@json_option
@pass_ctx
def version_delete(ctx: Context, args: tuple[str, ...]) -> None:
    """Delete version N of DATASET; refused while a score or an experiment cites it. Its
    number is never used again."""
    name, number, _ = split_version_args("version delete", args, ("DATASET N", "DATASET@N"))
    t = ctx.repo().delete_version(name, number)
    ctx.emit(to_json(t), f"deleted {t.dataset}@{t.number} ({t.item_count} cases, "
                         f"{t.content_digest}); number {t.number} will not be used again")


COMMANDS = (pin, pin_verify, score, experiment, version_group)  # registered on the root group by cli/main.py
