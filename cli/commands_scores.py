"""`cas pin`, `cas pin-verify`, `cas score`, `cas experiment`, `cas version delete`: results
that cite exact versions, and deleting versions nothing cites."""

from __future__ import annotations

import re

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
_NUMBER_RE = re.compile(r"-?(0|[1-9][0-9]*)(?P<frac>\.[0-9]+)?(?P<exp>[eE][+-]?[0-9]+)?\Z")


def parse_value(text: str):
    """A score value as written on the command line: a JSON number (`3`, `0.25`, `1e-3`);
    without a fraction or exponent it is an integer."""
    import cas
    from cas.scores import check_value
    m = _NUMBER_RE.match(text.strip())
    if m is None:
        raise cas.InvalidArgument(f"--value {text!r} is not a number (write it as JSON writes "
                                  "numbers, e.g. 3, 0.25 or 1e-3)", reason="INVALID_SCORE_VALUE",
                                  value=text)
    try:
        number = float(m.group(0)) if m["frac"] or m["exp"] else int(m.group(0))
    except ValueError:  # an integer of more digits than Python converts
        raise cas.InvalidArgument(f"--value {text[:40]!r}... is out of range: an integer has at "
                                  "most 4300 digits", reason="INVALID_SCORE_VALUE") from None
    return check_value(number)  # refuses a float that overflows to infinity


def score_json(s) -> dict:
    return {**to_json(s), "pin": str(s.pin)}


def _score_line(s) -> str:
    extra = "".join([f"  item={s.item}" if s.item else "",
                     f"  experiment={s.experiment}" if s.experiment else "",
                     f"  (version {s.version_state})" if s.version_state != "ACTIVE" else ""])
    return (f"{s.score_id}  {s.dataset}@{s.version}  {s.metric}={s.value!r}{extra}  "
            f"{s.recorded_at}  {s.author}")


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
    """Check a pin against the repository: the version exists and holds the pinned set."""
    repo = ctx.repo()
    record = repo.resolve_pin(pin_text)
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
@click.option("--metric", required=True, help="What was measured, e.g. task_success.")
@click.option("--value", "value_text", required=True, metavar="NUMBER",
              help="The result: an integer or a finite decimal number.")
@click.option("--item", default=None, metavar="CASE_ID",
              help="The case scored (a case of that version); omit for the whole version.")
@click.option("--experiment", default=None, metavar="NAME",
              help="The experiment (over that version) the score belongs to.")
@json_option
@pass_ctx
def score_add(ctx: Context, args: tuple[str, ...], metric: str, value_text: str,
              item: str | None, experiment: str | None) -> None:
    """Record a score citing DATASET VERSION (pinned with its content_digest)."""
    name, number, _ = split_version_args("score add", args, VERSION_FORMS)
    value = parse_value(value_text)
    repo = ctx.repo()
    s = repo.record_score(repo.pin(name, number), metric=metric, value=value, item=item,
                          experiment=experiment)
    ctx.emit(score_json(s), f"recorded {s.score_id}: {s.metric}={s.value!r} on {s.pin}")


@score.command("list", context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET [VERSION]")
@json_option
@pass_ctx
def score_list(ctx: Context, args: tuple[str, ...]) -> None:
    """List the scores of a dataset, or of one of its versions, in the order recorded."""
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
             lambda: "\n".join(_score_line(s) for s in scores))


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
