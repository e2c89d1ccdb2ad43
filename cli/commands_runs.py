"""`cas runs`, `cas review`, `cas config`, `cas settings`: recorded runs and their reviews."""

from __future__ import annotations

import click

from .common import Context, json_option, pass_ctx, to_json


@click.group()
@json_option
def runs() -> None:
    """Import, list and show recorded agent runs."""


@runs.command("import")
@click.argument("file", type=click.File("rb"))
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
def runs_import(ctx: Context, file, fmt: str, container, tenant, person, tenant_from,
                person_from, allow_erased: tuple[str, ...]) -> None:
    """Import runs from FILE ('-' for stdin): all or nothing. Another format's documents are
    converted first (docs/importers.md). Runs naming a person an erasure deleted are refused
    unless --allow-erased-person names them.

    Example: cas runs import --format openai-chat --tenant acme conversations.jsonl"""
    import cas.importers
    from cas.errors import InvalidArgument
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
        runs_given = cas.importers.convert(
            file.read(), fmt, source=source, container=container, tenant=tenant,
            person=person, tenant_from=tenant_from, person_from=person_from)
    result = ctx.repo().import_runs(runs_given, allow_erased_persons=list(allow_erased))
    for warning in result.warnings:
        click.echo(f"cas: warning: {warning}", err=True)
    ctx.emit({"imported": result.new, "unchanged": result.unchanged,
              "warnings": result.warnings},
             f"imported {len(result.new)} runs ({result.unchanged} already present, unchanged)")


@runs.command("list")
@json_option
@pass_ctx
def runs_list(ctx: Context) -> None:
    """List the ids of the recorded runs."""
    ids = ctx.repo().runs()
    ctx.emit({"runs": ids}, "\n".join(ids))


@runs.command("show")
@click.argument("run_id")
@json_option
@pass_ctx
def runs_show(ctx: Context, run_id: str) -> None:
    """Show one recorded run."""
    import json
    run = to_json(ctx.repo().run(run_id))
    ctx.emit(run, lambda: json.dumps(run, indent=2, sort_keys=True, ensure_ascii=False))


@click.group()
@json_option
def review() -> None:
    """Record and read human reviews of runs (preview, then confirm)."""


@review.command("add")
@click.argument("run_id", required=False)
@click.option("--metric", default=None, help="What was judged, e.g. dataset_eligibility.")
@click.option("--label", default=None, help="The judgment, e.g. reviewed.")
@click.option("--file", "batch", type=click.File("rb"), default=None,
              help='JSON Lines of {"run_id", "metric", "label"}: a batch in one step.')
@click.option("--confirm-token", default=None, help="The token the preview printed.")
@json_option
@pass_ctx
def review_add(ctx: Context, run_id, metric, label, batch, confirm_token) -> None:
    """Preview a review (prints a confirm token); repeat with --confirm-token to save it."""
    from cas.errors import InvalidArgument
    from cas.reviews import read_review_requests
    if batch is not None:
        if run_id or metric or label:
            raise InvalidArgument("give either RUN_ID --metric --label, or --file, not both")
        requests = read_review_requests(batch, getattr(batch, "name", "stdin"))
    else:
        if not (run_id and metric and label):
            raise InvalidArgument("review add needs RUN_ID, --metric and --label (or --file)")
        requests = [{"run_id": run_id, "metric": metric, "label": label}]
    result = ctx.repo().add_reviews(requests, confirm_token=confirm_token)
    if "confirm_token" in result:
        lines = [f"review of {r['run_id']}: {r['metric']} = {r['label']} by {r['reviewer']}"
                 for r in result["reviews"]]
        lines.append(f"nothing saved yet; to save, repeat with --confirm-token "
                     f"{result['confirm_token']}")
        ctx.emit({"confirm_token": result["confirm_token"], "reviews": result["reviews"]},
                 "\n".join(lines))
        return
    ids = result["annotation_ids"]
    out = {"annotation_ids": ids}
    if batch is None:
        out["annotation_id"] = ids[0]
    ctx.emit(out, "\n".join(f"saved review {i}" for i in ids))


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
    from cas import userconfig
    if value is not None:
        userconfig.set_value(key, value)
    current = userconfig.get(key)
    ctx.emit({"key": key, "value": current}, current or "")
    if current is None and value is None and not ctx.as_json:
        raise SystemExit(1)


@click.group()
@json_option
def settings() -> None:
    """Repository settings: which content classes promotion may copy into cases."""


@settings.command("show")
@json_option
@pass_ctx
def settings_show(ctx: Context) -> None:
    """Show the content policy (every class is copied unless withheld) and which judgment
    admits a run to promotion."""
    from cas.proposals import CONTENT_CLASSES
    repo = ctx.repo()
    record, rule = repo.settings(), repo.eligibility()
    withheld = record.withheld if record else []
    ctx.emit({"revision": record.revision if record else 0, "withheld": withheld,
              "copied": [c for c in CONTENT_CLASSES if c not in withheld],
              "eligibility": {"revision": rule.revision, "metric": rule.metric,
                              "accepted": rule.accepted}},
             f"copied: {', '.join(c for c in CONTENT_CLASSES if c not in withheld) or '-'}\n"
             f"withheld: {', '.join(withheld) or '-'}\n"
             f"promotion needs: {rule.metric} = {' or '.join(rule.accepted)}")


@settings.command("eligibility")
@click.option("--metric", default="dataset_eligibility", show_default=True,
              help="The metric a judgment that admits a run is on.")
@click.option("--accept", "accepted", multiple=True, required=True, metavar="LABEL",
              help="A label that admits a run (repeatable).")
@json_option
@pass_ctx
def settings_eligibility(ctx: Context, metric: str, accepted: tuple[str, ...]) -> None:
    """Set which judgment admits a run to promotion: one on METRIC with an accepted label,
    not superseded by a newer judgment on METRIC that is not accepted.

    Example: cas settings eligibility --metric dataset_eligibility --accept reviewed"""
    rule = ctx.repo().set_eligibility(metric, list(accepted))
    ctx.emit(to_json(rule), f"eligibility revision {rule.revision}: {rule.metric} = "
                            f"{' or '.join(rule.accepted)}")


@settings.command("content-policy")
@click.option("--withhold", "withheld", multiple=True, metavar="CLASS",
              help="A class not to copy (repeatable): input, output, tool_arguments, "
                   "tool_results, metadata. The set given replaces the current one.")
@click.option("--copy-all", is_flag=True, help="Withhold nothing.")
@json_option
@pass_ctx
def settings_policy(ctx: Context, withheld: tuple[str, ...], copy_all: bool) -> None:
    """Set which content classes are withheld from cases frozen from now on."""
    from cas.errors import InvalidArgument
    if bool(withheld) == copy_all:
        raise InvalidArgument("give --withhold CLASS (repeatable) or --copy-all")
    record = ctx.repo().set_content_policy([] if copy_all else list(withheld))
    ctx.emit(to_json(record), f"settings revision {record.revision}: withheld "
                              f"{', '.join(record.withheld) or 'nothing'}")


COMMANDS = (runs, review, config, settings)  # registered on the root group by cli/main.py
