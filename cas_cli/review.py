"""`cas review ...`: record and read human reviews of runs."""

from __future__ import annotations

import click

from .common import (TOKEN, Example, Invocation, emit_runs_page, json_option, list_option, pass_ctx,
                     plural, run_page_options, summarised, to_json, yes_option)


@click.group()
@json_option
def review() -> None:
    """Record and read human reviews of runs (preview, then confirm)."""


@review.command("queue")
@click.option("--metric", default="dataset_eligibility", show_default=True,
              help="The judgment the runs await.")
@click.option("--mine", is_flag=True,
              help="Only the runs that still need my judgment (the configured user's).")
@run_page_options
@json_option
@pass_ctx
def review_queue(ctx: Invocation, metric, mine, tenant, since, limit, cursor) -> None:
    """The runs still awaiting judgments on METRIC (on the eligibility metric: until K
    reviewers judged them), oldest first, a page at a time."""
    emit_runs_page(ctx, ctx.repo().review_queue(metric, tenant=tenant, since=since, limit=limit,
                                                cursor=cursor, mine=mine),
                   f"no run awaits {'your ' if mine else ''}{metric}")


def read_correction(text: str):
    """--correction: JSON, or @FILE holding JSON (@- : stdin)."""
    from cas.errors import InvalidArgument
    from cas.format import encoding
    source = "--correction"
    if text.startswith("@"):
        path, source = text[1:], f"--correction {text}"
        try:
            if path == "-":
                data = click.get_binary_stream("stdin").read()
            else:
                with open(path, "rb") as f:
                    data = f.read()
        except OSError as exc:
            raise InvalidArgument(f"{source}: cannot read {path!r}: {exc.strerror or exc}",
                                  reason="CORRECTION_UNREADABLE") from None
    else:
        data = text.encode("utf-8", "surrogatepass")
    try:
        value = encoding.parse_json(data)
    except InvalidArgument as exc:
        raise encoding.in_context(exc, f"{source} (JSON, or @FILE)") from None
    if value is None:
        raise InvalidArgument(f"{source}: a correction is a JSON value other than null "
                              "(leave it out for none)", reason="CORRECTION_INVALID")
    return value


def _review_lines(reviews: list[dict]) -> list[str]:
    out = []
    for r in reviews:
        line = f"review of {r['run_id']}: {r['metric']} = {r['label']} by {r['reviewer']}"
        if "comment" in r:
            line += f" - {_short(r['comment'])}"
        if "correction" in r:
            line += " (with a correction)"
        out.append(line)
    return out


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _label_counts(reviews: list[dict]) -> str:
    counts: dict[str, int] = {}
    for r in reviews:
        counts[f"{r['metric']} = {r['label']}"] = counts.get(f"{r['metric']} = {r['label']}",
                                                             0) + 1
    runs = len({r["run_id"] for r in reviews})
    return (f"{plural(len(reviews), 'review')} of {plural(runs, 'run')}: "
            + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))


@review.command("add")
@click.argument("run_id", required=False)
@click.option("--run", "more_runs", multiple=True, metavar="RUN_ID",
              help="Another run judged the same way (repeatable).")
@click.option("--metric", default=None, help="What was judged, e.g. dataset_eligibility.")
@click.option("--label", default=None, help="The judgment, e.g. reviewed.")
@click.option("--comment", default=None, metavar="TEXT",
              help="Your reason (at most 4,096 characters; scrubbed of secrets and personal "
                   "data before it is saved).")
@click.option("--correction", default=None, metavar="JSON|@FILE",
              help="The output that was right: JSON, or @FILE holding it (@- for stdin).")
@click.option("--file", "batch", type=click.File("rb"), default=None,
              help='JSON Lines of {"run_id", "metric", "label"} (optionally "comment", '
                   '"correction"): a batch in one step.')
@click.option("--confirm-token", default=None, help="The token the preview printed.")
@yes_option
@list_option
@json_option
@pass_ctx
def review_add(ctx: Invocation, run_id, more_runs, metric, label, comment, correction, batch,
               confirm_token, yes, show_all) -> None:
    """Preview a review (prints a confirm token); repeat with --confirm-token to save it, or
    give --yes to preview and save in one call."""
    from cas.errors import InvalidArgument
    from cas.repo.reviews import read_review_requests
    run_ids = ([run_id] if run_id else []) + list(more_runs)
    if yes and confirm_token:
        raise InvalidArgument("give --yes or --confirm-token, not both")
    if batch is not None:
        if run_ids or metric or label or comment is not None or correction is not None:
            raise InvalidArgument("give either RUN_ID --metric --label, or --file, not both")
        requests = read_review_requests(batch, getattr(batch, "name", "stdin"))
    else:
        if not (run_ids and metric and label):
            raise InvalidArgument("review add needs RUN_ID (or --run RUN_ID ...), --metric and "
                                  "--label (or --file)")
        fixed = read_correction(correction) if correction is not None else None
        requests = [{"run_id": r, "metric": metric, "label": label, "comment": comment,
                     "correction": fixed} for r in run_ids]
    repo = ctx.repo()
    result = repo.add_reviews(requests, confirm_token=confirm_token, progress=ctx.progress)
    ctx.progress("", 0, 0)
    if not ctx.as_json:
        for warning in result.get("warnings", ()):
            click.echo(f"cas: warning: {warning}", err=True)
    preview = None
    if "confirm_token" in result:
        preview = result
        lines = _review_lines(result["reviews"])
        if not yes:
            lines = summarised(lines, _label_counts(result["reviews"]), show_all,
                               "review add")
            lines.append(f"nothing saved yet; to save, repeat with --confirm-token "
                         f"{result['confirm_token']}")
            shown = {"confirm_token": result["confirm_token"], "reviews": result["reviews"]}
            if result["warnings"]:
                shown["warnings"] = result["warnings"]
            ctx.emit(shown, "\n".join(lines))
            return
        if not ctx.as_json:
            click.echo("\n".join(summarised(lines, _label_counts(result["reviews"]),
                                            show_all, "review add")))
        result = repo.add_reviews(requests, confirm_token=result["confirm_token"])
    ids = result["annotation_ids"]
    out = {"annotation_ids": ids,
           "saved": [{"run_id": r["run_id"], "annotation_id": r["annotation_id"]}
                     for r in result["reviews"]]}
    if result["warnings"]:
        out["warnings"] = result["warnings"]
    if batch is None:
        out["annotation_id"] = ids[0]
    if preview is not None:
        out["preview"] = {"confirm_token": preview["confirm_token"],
                          "reviews": preview["reviews"]}
    saved = [f"saved review {r['annotation_id']} of {r['run_id']}" for r in result["reviews"]]
    ctx.emit(out, "\n".join(summarised(saved, f"saved {plural(len(saved), 'review')}",
                                       show_all, "review add")))


@review.command("list")
@click.argument("run_id")
@json_option
@pass_ctx
def review_list(ctx: Invocation, run_id: str) -> None:
    """List the reviews of a run, with their annotation ids, comments and corrections."""
    import json

    import msgspec
    items = ctx.repo().reviews(run_id)

    def human() -> str:
        lines = []
        for r in items:
            lines.append(f"{r.annotation_id}  {r.metric} = {r.label}  {r.reviewer}  "
                         f"{r.reviewed_at}")
            if isinstance(r.comment, str):
                lines += [f"    comment: {line}" for line in r.comment.splitlines()]
            if r.correction is not msgspec.UNSET:
                lines.append("    correction: " + _short(json.dumps(
                    r.correction, ensure_ascii=False, sort_keys=True), 200))
        return "\n".join(lines)
    ctx.emit({"run_id": run_id, "reviews": to_json(items)}, human)


@review.group("metric")
@json_option
def review_metric() -> None:
    """Declared metrics: each metric's labels, in the order a reviewer picks them."""


@review_metric.command("define")
@click.argument("name")
@click.option("--labels", required=True, metavar="A,B,C",
              help="The labels, comma-separated, in the order a reviewer picks them.")
@click.option("--description", default="", metavar="TEXT", help="What the metric judges.")
@json_option
@pass_ctx
def review_metric_define(ctx: Invocation, name: str, labels: str, description: str) -> None:
    """Declare metric NAME and its labels (a new revision of the declared metrics): a
    judgment on it with another label is then refused."""
    record = ctx.repo().define_metric(name, [x.strip() for x in labels.split(",")],
                                      description)
    spec = next(m for m in record.metrics if m.name == name)
    ctx.emit({"revision": record.revision, "metric": to_json(spec)},
             f"metrics revision {record.revision}: {name} = {', '.join(spec.labels)}")


@review_metric.command("list")
@json_option
@pass_ctx
def review_metric_list(ctx: Invocation) -> None:
    """The declared metrics and their labels (the eligibility metric always among them)."""
    repo = ctx.repo()
    record, declared = repo.metrics(), repo.declared_metrics()
    ctx.emit({"revision": record.revision, "declared_only": record.declared_only,
              "metrics": [to_json(m) for m in declared.values()]},
             "\n".join(f"{m.name}: {', '.join(m.labels)}"
                       + (f"  ({m.description})" if m.description else "")
                       for m in declared.values()))


@review.command("agreement")
@click.option("--metric", default=None,
              help="The metric (default: the eligibility metric).")
@list_option
@json_option
@pass_ctx
def review_agreement(ctx: Invocation, metric: str | None, show_all: bool) -> None:
    """How much reviewers agree: per pair the runs both judged (each one's newest judgment),
    observed agreement and Cohen's kappa; over three or more, Krippendorff's alpha and
    Fleiss' kappa; and the runs they disagree on."""
    report = ctx.repo().agreement(metric)
    ctx.emit(report, lambda: agreement_text(report, show_all))


def _num(value) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def agreement_text(report: dict, show_all: bool = False) -> str:
    lines = [f"agreement on {report['metric']}: {plural(len(report['reviewers']), 'reviewer')}"
             f", {plural(report['runs_judged'], 'run')} judged"]
    for p in report["pairs"]:
        a, b = p["reviewers"]
        lines.append(f"  {a} / {b}: {plural(p['runs'], 'run')} in common, observed "
                     f"{_num(p['observed'])}, Cohen's kappa {_num(p['cohens_kappa'])}")
    o = report["overall"]
    if o is not None:
        lines.append(f"  all reviewers: Krippendorff's alpha {_num(o['krippendorff_alpha'])} "
                     f"over {plural(o['runs'], 'run')}; Fleiss' kappa {_num(o['fleiss_kappa'])} "
                     f"over the {plural(o['fleiss_runs'], 'run')} everyone judged")
    if len(report["reviewers"]) < 2:
        lines.append("  (agreement needs two reviewers of the same runs)")
    rows = [f"  {d['run_id']}: " + ", ".join(f"{who} {label}" for who, label in
                                             sorted(d["labels"].items()))
            for d in report["disagreements"]]
    if report["disagreement_count"]:
        lines.append(f"disagreements: {report['disagreement_count']}")
        lines += summarised(rows, f"  {plural(len(rows), 'run')} listed", show_all,
                            "review agreement")
    else:
        lines.append("disagreements: none")
    return "\n".join(lines)


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
        Example("cas review queue --mine",
                "The runs that still need your judgment (not judged by you yet)."),
    ),
    "review add": (
        Example("cas review add r-0104 --run r-0105 --metric dataset_eligibility --label reviewed",
                "Preview one judgment of two runs; nothing is saved yet."),
        Example("cas review add r-0104 --run r-0105 --metric dataset_eligibility --label reviewed "
                f"--confirm-token {TOKEN}",
                "Save it: the same command with the token the preview printed."),
        Example("cas review add --file reviews-0512.jsonl",
                'Preview a batch: one {"run_id", "metric", "label"} per line.'),
        Example('cas review add r-0104 --metric dataset_eligibility --label needs-work '
                '--comment "cites the wrong policy" --correction @right.json --yes',
                "Judge with a reason and the right answer, saved in one call."),
    ),
    "review metric": (
        Example("cas review metric list", "Every declared metric and its labels."),
    ),
    "review metric define": (
        Example('cas review metric define tone --labels calm,curt,rude --description "How the '
                'agent sounds"', "Declare tone; keys 1-3 pick its labels in this order."),
    ),
    "review metric list": (
        Example("cas review metric list", "Every declared metric and its labels."),
    ),
    "review agreement": (
        Example("cas review agreement",
                "Kappa per pair of reviewers, and the runs they disagree on."),
        Example("cas review agreement --metric tone --json", "The same for tone, as JSON."),
    ),
    "review list": (
        Example("cas review list r-0104",
                "Every review of r-0104, oldest first, with its annotation id."),
    ),
}
