"""`cas review ...`: record and read human reviews of runs."""

from __future__ import annotations

import click

from .common import (TOKEN, Example, Invocation, emit_runs_page, json_option, pass_ctx,
                     run_page_options, to_json)


@click.group()
@json_option
def review() -> None:
    """Record and read human reviews of runs (preview, then confirm)."""


@review.command("queue")
@click.option("--metric", default="dataset_eligibility", show_default=True,
              help="The judgment the runs await.")
@run_page_options
@json_option
@pass_ctx
def review_queue(ctx: Invocation, metric, tenant, since, limit, cursor) -> None:
    """The runs with no judgment on METRIC yet, oldest first, a page at a time."""
    emit_runs_page(ctx, ctx.repo().review_queue(metric, tenant=tenant, since=since, limit=limit,
                                            cursor=cursor), f"no run awaits {metric}")


@review.command("add")
@click.argument("run_id", required=False)
@click.option("--run", "more_runs", multiple=True, metavar="RUN_ID",
              help="Another run judged the same way (repeatable).")
@click.option("--metric", default=None, help="What was judged, e.g. dataset_eligibility.")
@click.option("--label", default=None, help="The judgment, e.g. reviewed.")
@click.option("--file", "batch", type=click.File("rb"), default=None,
              help='JSON Lines of {"run_id", "metric", "label"}: a batch in one step.')
@click.option("--confirm-token", default=None, help="The token the preview printed.")
@json_option
@pass_ctx
def review_add(ctx: Invocation, run_id, more_runs, metric, label, batch, confirm_token) -> None:
    """Preview a review (prints a confirm token); repeat with --confirm-token to save it."""
    from cas.errors import InvalidArgument
    from cas.repo.reviews import read_review_requests
    run_ids = ([run_id] if run_id else []) + list(more_runs)
    if batch is not None:
        if run_ids or metric or label:
            raise InvalidArgument("give either RUN_ID --metric --label, or --file, not both")
        requests = read_review_requests(batch, getattr(batch, "name", "stdin"))
    else:
        if not (run_ids and metric and label):
            raise InvalidArgument("review add needs RUN_ID (or --run RUN_ID ...), --metric and "
                                  "--label (or --file)")
        requests = [{"run_id": r, "metric": metric, "label": label} for r in run_ids]
    result = ctx.repo().add_reviews(requests, confirm_token=confirm_token,
                                    progress=ctx.progress)
    ctx.progress("", 0, 0)
    if "confirm_token" in result:
        lines = [f"review of {r['run_id']}: {r['metric']} = {r['label']} by {r['reviewer']}"
                 for r in result["reviews"]]
        lines.append(f"nothing saved yet; to save, repeat with --confirm-token "
                     f"{result['confirm_token']}")
        ctx.emit({"confirm_token": result["confirm_token"], "reviews": result["reviews"]},
                 "\n".join(lines))
        return
    ids = result["annotation_ids"]
    out = {"annotation_ids": ids,
           "saved": [{"run_id": r["run_id"], "annotation_id": r["annotation_id"]}
                     for r in result["reviews"]]}
    if batch is None:
        out["annotation_id"] = ids[0]
    ctx.emit(out, "\n".join(f"saved review {r['annotation_id']} of {r['run_id']}"
                             for r in result["reviews"]))


@review.command("list")
@click.argument("run_id")
@json_option
@pass_ctx
def review_list(ctx: Invocation, run_id: str) -> None:
    """List the reviews of a run, with their annotation ids."""
    items = ctx.repo().reviews(run_id)
    ctx.emit({"run_id": run_id, "reviews": to_json(items)},
             "\n".join(f"{r.annotation_id}  {r.metric} = {r.label}  {r.reviewer}  "
                       f"{r.reviewed_at}" for r in items))


EXAMPLES = {
    "review": (
        Example("cas review queue --tenant acme --limit 20",
                "The 20 oldest acme runs that nobody has judged yet."),
        Example("cas review add r-0104 --metric dataset_eligibility --label reviewed",
                "Preview a review; repeat with the printed --confirm-token to save it."),
        Example("cas review list r-0104", "The reviews of a run, with their annotation ids."),
    ),
    "review queue": (
        Example("cas review queue --tenant acme --limit 20",
                "The 20 oldest acme runs with no judgment on dataset_eligibility."),
        Example("cas review queue --metric tone --since 2026-05-12",
                "The runs since 12 May that nobody has judged on the metric tone."),
    ),
    "review add": (
        Example("cas review add r-0104 --run r-0105 --metric dataset_eligibility --label reviewed",
                "Preview one judgment of two runs; nothing is saved yet."),
        Example("cas review add r-0104 --run r-0105 --metric dataset_eligibility --label reviewed "
                f"--confirm-token {TOKEN}",
                "Save it: the same command with the token the preview printed."),
        Example("cas review add --file reviews-0512.jsonl",
                'Preview a batch: one {"run_id", "metric", "label"} per line.'),
    ),
    "review list": (
        Example("cas review list r-0104",
                "Every review of r-0104, oldest first, with its annotation id."),
    ),
}
