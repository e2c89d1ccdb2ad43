"""`cas runs`, `cas review`, `cas config`, `cas settings`: recorded runs and their reviews."""

from __future__ import annotations

import click

from .common import INTEGER, Context, json_option, pass_ctx, to_json


@click.group()
@json_option
def runs() -> None:
    """Import, list and show recorded agent runs."""


@runs.command("import")
@click.argument("file", type=click.File("rb"), required=False, metavar="FILE")
@click.option("--from-captures", "captures", default=None, metavar="DIR",
              type=click.Path(file_okay=False),
              help="Import the records of a local capture store (docs/capture.md) instead of "
                   "FILE; needs --tenant.")
@click.option("--format", "fmt", default="native", show_default=True, metavar="FORMAT",
              help="native (cas's JSON Lines), auto, openai-chat, openai-responses, anthropic, "
                   "otel-genai, openinference, inspect or langsmith.")
@click.option("--container", default=None, metavar="vcr",
              help="Read the API traffic out of vcrpy cassettes (YAML or JSON).")
@click.option("--tenant", default=None, help="The tenant of every run imported.")
@click.option("--person", default=None, help="The person every run imported is of.")
@click.option("--tenant-from", default=None, metavar="FIELD",
              help="The field (a dotted path, or a span attribute) that holds the tenant.")
@click.option("--person-from", default=None, metavar="FIELD",
              help="The field (a dotted path, or a span attribute) that holds the person.")
@click.option("--allow-erased-person", "allow_erased", multiple=True, metavar="PERSON",
              help="Admit again the runs of PERSON, whom an erasure deleted (their new consent; "
                   "recorded with you as author). Repeatable; holds for this import only.")
@json_option
@pass_ctx
def runs_import(ctx: Context, file, captures, fmt: str, container, tenant, person, tenant_from,
                person_from, allow_erased: tuple[str, ...]) -> None:
    """Import runs from FILE ('-' for stdin): all or nothing. Another format's documents are
    converted first (docs/importers.md). Runs naming a person an erasure deleted are refused
    unless --allow-erased-person names them. --from-captures DIR imports a local capture
    store's records instead."""
    import cas.interop.importers
    from cas.errors import InvalidArgument
    if (file is None) == (captures is None):
        raise click.UsageError("give FILE or --from-captures DIR (one of them)")
    if captures is not None:
        from cas.evals.capture.stores import import_captures
        others = [f"--{n}" for n, v in (("container", container), ("person", person),
                                         ("tenant-from", tenant_from),
                                         ("person-from", person_from)) if v is not None]
        if others or fmt != "native":
            raise InvalidArgument(f"{(others or ['--format'])[0]} does not apply to "
                                  "--from-captures (capture records have one shape, and name "
                                  "nobody)", reason="USAGE")
        result, torn = import_captures(ctx.repo(), captures, tenant or "",
                                       allow_erased_persons=list(allow_erased))
        for path, line in torn:
            click.echo(f"cas: warning: {path} line {line}: a torn or unreadable capture record "
                       "was skipped", err=True)
        ctx.emit({"imported": result.new, "unchanged": result.unchanged,
                  "warnings": result.warnings, "torn": [{"file": p, "line": n} for p, n in torn]},
                 f"imported {len(result.new)} runs ({result.unchanged} already present, "
                 "unchanged) from captures")
        return
    source = getattr(file, "name", "stdin")
    if fmt == "native":
        given = [f"--{n}" for n, v in (("container", container), ("tenant", tenant),
                                        ("person", person), ("tenant-from", tenant_from),
                                        ("person-from", person_from)) if v is not None]
        if given:
            raise InvalidArgument(f"{given[0]} applies to another format's documents; cas's "
                                  "own runs name their tenant and person (give --format)")
        runs_given = file
    else:
        runs_given = cas.interop.importers.convert(
            file.read(), fmt, source=source, container=container, tenant=tenant,
            person=person, tenant_from=tenant_from, person_from=person_from)
    result = ctx.repo().import_runs(runs_given, allow_erased_persons=list(allow_erased),
                                    progress=ctx.progress)
    ctx.progress("", 0, 0)
    for warning in result.warnings:
        click.echo(f"cas: warning: {warning}", err=True)
    ctx.emit({"imported": result.new, "unchanged": result.unchanged,
              "warnings": result.warnings},
             f"imported {len(result.new)} runs ({result.unchanged} already present, unchanged)")


def _page_options(f):
    f = click.option("--cursor", default=None, metavar="RUN_ID",
                     help="Continue after this run (the previous page's next_cursor).")(f)
    f = click.option("--limit", type=INTEGER, default=100, show_default=True,
                     help="Runs per page, 1 to 500.")(f)
    f = click.option("--since", default=None, metavar="TIME",
                     help="Only runs started at or after TIME (ISO 8601 UTC, compared as "
                          "text).")(f)
    return click.option("--tenant", default=None, help="Only runs of this tenant.")(f)


def _runs_page(ctx: Context, page, empty: str) -> None:
    rows = [(s["run_id"], s["tenant"], s["started_at"] or "-", str(s["steps"]),
             str(s["tool_calls"]), (s["first_user_message"] or "-").replace("\n", " "))
            for s in page.runs]
    header = ("RUN", "TENANT", "STARTED", "STEPS", "TOOLS", "FIRST USER MESSAGE")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]

    def human() -> str:
        if not rows:
            return empty
        lines = ["  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5]
                 for r in [header, *rows]]
        if page.next_cursor:
            lines.append(f"# more: --cursor {page.next_cursor}")
        return "\n".join(lines)
    ctx.emit({"runs": [s["run_id"] for s in page.runs], "summaries": page.runs,
              "next_cursor": page.next_cursor}, human)


@runs.command("list")
@_page_options
@json_option
@pass_ctx
def runs_list(ctx: Context, tenant, since, limit, cursor) -> None:
    """List recorded runs in import order, a page at a time."""
    _runs_page(ctx, ctx.repo().list_runs(tenant=tenant, since=since, limit=limit,
                                         cursor=cursor), "no runs")


@runs.command("show")
@click.argument("run_id")
@click.option("--transcript", is_flag=True,
              help="Show the run as a readable transcript: turns, tool calls with their "
                   "arguments and results (not with --json).")
@json_option
@pass_ctx
def runs_show(ctx: Context, run_id: str, transcript: bool) -> None:
    """Show one recorded run: as stored, or with --transcript as a readable transcript."""
    import json
    if transcript:
        if ctx.as_json:  # refused, not ignored: a script asking for JSON must not get text
            from cas.errors import InvalidArgument
            raise InvalidArgument("--transcript is text for reading; --json prints the run "
                                  "itself: give one of them", reason="USAGE")
        from cas.format.transcript import transcript as transcript_of

        from .transcript_text import render
        click.echo(render(transcript_of(ctx.repo().run(run_id))))
        return
    run = to_json(ctx.repo().run(run_id))
    ctx.emit(run, lambda: json.dumps(run, indent=2, sort_keys=True, ensure_ascii=False))


@click.group()
@json_option
def review() -> None:
    """Record and read human reviews of runs (preview, then confirm)."""


@review.command("queue")
@click.option("--metric", default="dataset_eligibility", show_default=True,
              help="The judgment the runs await.")
@_page_options
@json_option
@pass_ctx
def review_queue(ctx: Context, metric, tenant, since, limit, cursor) -> None:
    """The runs with no judgment on METRIC yet, oldest first, a page at a time."""
    _runs_page(ctx, ctx.repo().review_queue(metric, tenant=tenant, since=since, limit=limit,
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
def review_add(ctx: Context, run_id, more_runs, metric, label, batch, confirm_token) -> None:
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
def review_list(ctx: Context, run_id: str) -> None:
    """List the reviews of a run, with their annotation ids."""
    items = ctx.repo().reviews(run_id)
    ctx.emit({"run_id": run_id, "reviews": to_json(items)},
             "\n".join(f"{r.annotation_id}  {r.metric} = {r.label}  {r.reviewer}  "
                       f"{r.reviewed_at}" for r in items))


@click.command("config")
@click.argument("key")
@click.argument("value", required=False)
@json_option
@pass_ctx
def config(ctx: Context, key: str, value: str | None) -> None:
    """Read or set who you are: user.name, user.email (kept outside any repository)."""
    from cas.repo import userconfig
    if value is not None:
        userconfig.set_value(key, value)
    current = userconfig.get(key)
    ctx.emit({"key": key, "value": current}, current or "")
    if current is None and value is None and not ctx.as_json:
        raise SystemExit(1)


@click.group()
@json_option
def settings() -> None:
    """Repository settings: which content classes promotion may copy into cases (a default
    and per-dataset overrides), and which judgment admits a run to promotion."""


@settings.command("show")
@click.option("--dataset", "dataset_name", default=None, metavar="NAME",
              help="The content policy in force for this dataset (its override, else the "
                   "repository default).")
@json_option
@pass_ctx
def settings_show(ctx: Context, dataset_name: str | None) -> None:
    """Show the content policy (every class is copied unless withheld) and which judgment
    admits a run to promotion."""
    from cas.repo.proposals import CONTENT_CLASSES
    repo = ctx.repo()
    policy, rule = repo.content_policy(dataset_name), repo.eligibility()
    withheld = policy.withheld
    ctx.emit({"revision": policy.source.revision if policy.source else 0,
              "dataset": dataset_name, "overridden": policy.overridden, "withheld": withheld,
              "copied": [c for c in CONTENT_CLASSES if c not in withheld],
              "eligibility": {"revision": rule.revision, "metric": rule.metric,
                              "accepted": rule.accepted}},
             (f"content policy of {dataset_name}: {policy_source(policy)}\n"
              if dataset_name else "") +
             f"copied: {', '.join(c for c in CONTENT_CLASSES if c not in withheld) or '-'}\n"
             f"withheld: {', '.join(withheld) or '-'}\n"
             f"promotion needs: {rule.metric} = {' or '.join(rule.accepted)}")


def policy_source(policy) -> str:
    """Where a dataset's content policy comes from, in words."""
    if policy.source is None:
        return "the repository default, never set"
    kind = "its own override" if policy.overridden else "the repository default"
    return f"{kind}, settings revision {policy.source.revision}"


@settings.command("eligibility")
@click.option("--metric", default="dataset_eligibility", show_default=True,
              help="The metric a judgment that admits a run is on.")
@click.option("--accept", "accepted", multiple=True, required=True, metavar="LABEL",
              help="A label that admits a run (repeatable).")
@json_option
@pass_ctx
def settings_eligibility(ctx: Context, metric: str, accepted: tuple[str, ...]) -> None:
    """Set which judgment admits a run to promotion: one on METRIC with an accepted label,
    not superseded by a newer judgment on METRIC that is not accepted."""
    rule = ctx.repo().set_eligibility(metric, list(accepted))
    ctx.emit(to_json(rule), f"eligibility revision {rule.revision}: {rule.metric} = "
                            f"{' or '.join(rule.accepted)}")


@settings.command("content-policy")
@click.option("--dataset", "dataset_name", default=None, metavar="NAME",
              help="Set this dataset's override instead of the repository default.")
@click.option("--withhold", "withheld", multiple=True, metavar="CLASS",
              help="A class not to copy (repeatable): input, output, tool_arguments, "
                   "tool_results, metadata. The set given replaces the current one.")
@click.option("--copy-all", is_flag=True, help="Withhold nothing.")
@click.option("--inherit", is_flag=True,
              help="With --dataset: drop the override; the dataset follows the default.")
@json_option
@pass_ctx
def settings_policy(ctx: Context, dataset_name: str | None, withheld: tuple[str, ...],
                    copy_all: bool, inherit: bool) -> None:
    """Set which content classes are withheld from cases frozen from now on: the repository
    default, or one dataset's override (two datasets promoted at the same time each use
    their own)."""
    from cas.errors import InvalidArgument
    if (bool(withheld), copy_all, inherit).count(True) != 1:
        raise InvalidArgument("give one of --withhold CLASS (repeatable), --copy-all or "
                              "--inherit (with --dataset)")
    if inherit and dataset_name is None:
        raise InvalidArgument("--inherit drops a dataset's override: name it with --dataset")
    record = ctx.repo().set_content_policy(
        None if inherit else ([] if copy_all else list(withheld)), dataset=dataset_name)
    what = "" if dataset_name is None else f" ({dataset_name})"
    says = ("follows the repository default" if record.withheld is None else
            f"withheld {', '.join(record.withheld) or 'nothing'}")
    ctx.emit(to_json(record), f"settings revision {record.revision}{what}: {says}")


COMMANDS = (runs, review, config, settings)  # registered on the root group by cli/main.py
