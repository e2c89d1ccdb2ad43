"""`cas score ...`: record, list and withdraw scores that cite an exact version."""

from __future__ import annotations

import click

from .common import (CASE, VERSION_ARGS, VERSION_FORMS, Example, Invocation, json_option, pass_ctx,
                     refuse_unknown_options, split_version_args, table, to_json)


def score_json(s) -> dict:
    return {**to_json(s), "pin": str(s.pin)}


def _score_row(s) -> tuple[str, ...]:
    from cas.repo.scores import value_text
    state = s.version_state + (" WITHDRAWN" if s.withdrawn else "")
    return (s.batch, f"{s.dataset}@{s.version}", s.metric, value_text(s.value), s.item or "-",
            s.experiment or "-", state)


SCORE_HEADER = ("BATCH", "VERSION", "METRIC", "VALUE", "ITEM", "EXPERIMENT", "STATE")


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
def score_add(ctx: Invocation, args: tuple[str, ...], metric: str | None, value_text: str | None,
              item: str | None, batch, experiment: str | None) -> None:
    """Record a score, or a file of them as one batch, citing DATASET VERSION (pinned with
    its content_digest)."""
    from cas.errors import InvalidArgument
    from cas.repo.scores import parse_value, read_score_lines
    name, number, _ = split_version_args("score add", args, VERSION_FORMS)
    if batch is not None:
        if metric is not None or value_text is not None or item is not None:
            raise InvalidArgument("give either --metric --value [--item], or --file, not both",
                                  reason="USAGE")
        rows = [{**r, "experiment": experiment}
                for r in read_score_lines(batch, getattr(batch, "name", "stdin"))]
    elif metric is None or value_text is None:
        raise InvalidArgument("score add needs --metric and --value (or --file)",
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
def score_list(ctx: Invocation, args: tuple[str, ...]) -> None:
    """List the scores of a dataset, or of one of its versions, in the order recorded;
    withdrawn ones are marked WITHDRAWN."""
    from cas.errors import InvalidArgument
    refuse_unknown_options(args)
    if len(args) == 1 and "@" not in args[0]:
        name, number = args[0], None
    elif not args:
        raise InvalidArgument("missing DATASET (use: cas score list DATASET [VERSION])",
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
def score_withdraw(ctx: Invocation, batch_id: str, reason: str) -> None:
    """Withdraw a score batch (its id as `cas score list` shows it): its scores stay listed,
    marked WITHDRAWN, and no longer cite their version. Once per batch."""
    from cas.repo.scores import parse_batch_id
    name, number = parse_batch_id(batch_id)
    w = ctx.repo().withdraw_batch(name, number, reason)
    ctx.emit({**to_json(w), "batch_id": batch_id},
             f"withdrew {batch_id}: {w.reason}")


EXAMPLES = {
    "score": (
        Example("cas score add support-evals@2 --metric task_success --value 0.82",
                "Record a score of the whole version, citing its pin."),
        Example("cas score list support-evals@2",
                "The scores of version 2, in the order recorded."),
    ),
    "score add": (
        Example("cas score add support-evals@2 --metric task_success --value 0.82",
                "Record a number for the whole version, citing its pin."),
        Example(f"cas score add support-evals@2 --metric tone --value terse --item {CASE}",
                "Record a label for one case of it."),
        Example("cas score add support-evals@2 --file scores.jsonl --experiment baseline",
                'Record a file of {"metric", "value", "item"?} lines as one batch.'),
    ),
    "score list": (
        Example("cas score list support-evals",
                "Every score of the dataset, withdrawn ones marked."),
        Example("cas score list support-evals@2", "Only the scores of version 2."),
    ),
    "score withdraw": (
        Example('cas score withdraw datasets/support-evals/scores/0000000003 '
                '--reason "wrong rubric"',
                "Withdraw a batch: still listed, it no longer cites its version."),
    ),
}
