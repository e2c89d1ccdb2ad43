"""`cas runs ...`: import, list and show recorded agent runs."""

from __future__ import annotations

import click

from .common import (Example, Invocation, emit_runs_page, json_option, pass_ctx, run_page_options,
                     to_json)


@click.group()
@json_option
def runs() -> None:
    """Import, list and show recorded agent runs."""


@runs.command("import")
@click.argument("files", type=click.File("rb"), nargs=-1, metavar="FILE...")
@click.option("--from-captures", "captures", default=None, metavar="DIR",
              type=click.Path(file_okay=False),
              help="Import the records of a local capture store (docs/capture.md) instead of "
                   "FILE; needs --tenant.")
@click.option("--format", "fmt", default="native", show_default=True, metavar="FORMAT",
              help="native (cas's JSON Lines), auto, openai-chat, openai-responses, anthropic, "
                   "bedrock-converse, otel-genai, openinference, inspect or langsmith.")
@click.option("--container", default=None, metavar="vcr",
              help="Read the API traffic out of recorded HTTP cassettes (vcrpy YAML or "
                   "JSON, and other recorders': docs/importers.md).")
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
def runs_import(ctx: Invocation, files, captures, fmt: str, container, tenant, person,
                tenant_from, person_from, allow_erased: tuple[str, ...]) -> None:
    """Import runs from FILE ('-' for stdin; several files are one import): all or nothing.
    Another format's documents are converted first (docs/importers.md); what a conversion
    could not keep is said in a warning. Runs naming a person an erasure deleted are refused
    unless --allow-erased-person names them. --from-captures DIR imports a local capture
    store's records instead."""
    import cas.interop.importers
    from cas.errors import InvalidArgument
    if (not files) == (captures is None):
        raise click.UsageError("give FILE... or --from-captures DIR (one of them)")
    if captures is not None:
        from cas.evals.capture.stores import import_captures
        others = [f"--{n}" for n, v in (("container", container), ("person", person),
                                         ("tenant-from", tenant_from),
                                         ("person-from", person_from)) if v is not None]
        if others or fmt != "native":
            raise InvalidArgument(f"{(others or ['--format'])[0]} does not apply to "
                                  "--from-captures (capture records have one shape, and name "
                                  "their person by a keyed digest, if at all)",
                                  reason="USAGE")
        result, torn = import_captures(ctx.repo(), captures, tenant or "",
                                       allow_erased_persons=list(allow_erased))
        for path, line in torn:
            click.echo(f"cas: warning: {path} line {line}: a torn or unreadable capture record "
                       "was skipped", err=True)
        for warning in result.warnings:
            click.echo(f"cas: warning: {warning}", err=True)
        ctx.emit({"imported": result.new, "unchanged": result.unchanged,
                  "warnings": result.warnings, "torn": [{"file": p, "line": n} for p, n in torn]},
                 f"imported {len(result.new)} runs ({result.unchanged} already present, "
                 "unchanged) from captures")
        return
    sources = [getattr(f, "name", "stdin") for f in files]
    if fmt == "native":
        given = [f"--{n}" for n, v in (("container", container), ("tenant", tenant),
                                        ("person", person), ("tenant-from", tenant_from),
                                        ("person-from", person_from)) if v is not None]
        if given:
            raise InvalidArgument(f"{given[0]} applies to another format's documents; cas's "
                                  "own runs name their tenant and person (give --format)")
        runs_given, said = (files[0] if len(files) == 1 else _native(files, sources)), []
    else:  # converted as the files are read (a JSON Lines file a line at a time)
        said = []
        runs_given = cas.interop.importers.convert_stream(
            list(zip(sources, files)), fmt, container=container, tenant=tenant, person=person,
            tenant_from=tenant_from, person_from=person_from, warnings=said)
    try:
        result = ctx.repo().import_runs(runs_given, allow_erased_persons=list(allow_erased),
                                        progress=ctx.progress)
    except InvalidArgument as exc:
        if fmt != "native" or len(files) != 1 or "line" not in exc.fields or \
                not files[0].seekable():
            raise
        files[0].seek(0)  # a line that is not a run: is the file another format's?
        hint = cas.interop.importers.looks_like(files[0].read(), sources[0])
        if hint is None:
            raise
        raise cas.interop.importers.hinted(exc, hint) from None
    ctx.progress("", 0, 0)
    warnings = [w.to_json() for w in said] + [_stored_warning(w, sources) for w in
                                              result.warnings]
    for warning in said:
        where = f"run {warning.run_id!r}: " if warning.run_id is not None else ""
        click.echo(f"cas: warning: {warning.source}: {where}{warning.message}", err=True)
    for warning in result.warnings:
        click.echo(f"cas: warning: {warning}", err=True)
    ctx.emit({"imported": result.new, "unchanged": result.unchanged, "warnings": warnings},
             f"imported {len(result.new)} runs ({result.unchanged} already present, unchanged)")


def _native(files, sources):
    """cas's own JSON Lines of several files, each checked first (a refused file is named,
    with what it looks like instead when it is another format's), as one stream."""
    import io

    import cas.interop.importers
    from cas.errors import InvalidArgument
    from cas.repo.runs import read_runs_jsonl
    data = []
    for name, f in zip(sources, files):
        raw = f.read()
        try:
            read_runs_jsonl(io.BytesIO(raw), name)
        except InvalidArgument as exc:
            hint = cas.interop.importers.looks_like(raw, name)
            if hint is None:
                raise
            raise cas.interop.importers.hinted(exc, hint) from None
        data.append(raw if raw.endswith(b"\n") or not raw else raw + b"\n")
    joined = io.BytesIO(b"".join(data))
    joined.name = "input"
    return joined


def _stored_warning(text: str, sources: list[str]) -> dict:
    """A warning of the repository's import (a string naming its run as `run 'ID': ...`) in
    the JSON shape of a conversion's."""
    import re
    found = re.match(r"run '([^'\\]*)': ", text)
    return {"source": sources[0] if len(sources) == 1 else "input",
            "run_id": found.group(1) if found else None, "message": text}


@runs.command("list")
@run_page_options
@json_option
@pass_ctx
def runs_list(ctx: Invocation, tenant, since, limit, cursor) -> None:
    """List recorded runs in import order, a page at a time."""
    emit_runs_page(ctx, ctx.repo().list_runs(tenant=tenant, since=since, limit=limit,
                                         cursor=cursor), "no runs")


@runs.command("show")
@click.argument("run_id")
@click.option("--transcript", is_flag=True,
              help="Show the run as a readable transcript: turns, tool calls with their "
                   "arguments and results (not with --json).")
@json_option
@pass_ctx
def runs_show(ctx: Invocation, run_id: str, transcript: bool) -> None:
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


EXAMPLES = {
    "runs": (
        Example("cas runs import --format openai-chat --tenant acme chats-0512.jsonl",
                "Import a day of OpenAI chat logs, all recorded for tenant acme."),
        Example("cas runs list --tenant acme --since 2026-05-12",
                "List acme's runs started on or after 12 May, in import order."),
        Example("cas runs show r-0104", "Print one recorded run."),
    ),
    "runs import": (
        Example("cas runs import runs-0512.jsonl",
                "Import cas's own JSON Lines, all or nothing (stored runs stay as is)."),
        Example("cas runs import --format openai-chat --tenant acme chats-0512.jsonl",
                "Convert OpenAI chat logs first; every run is of tenant acme."),
        Example("cas runs import --format otel-genai --tenant-from service.name "
                "--person-from user.id traces.json",
                "OpenTelemetry GenAI spans, tenant and person read from span attributes."),
        Example("cas runs import --format auto --container vcr --tenant acme support.yaml",
                "Detect the format of the API traffic recorded in a vcrpy cassette."),
        Example("cas runs import --format openai-chat --tenant acme day1.jsonl day2.jsonl",
                "Several files, one import: a refused file imports none and is named."),
        Example("cas runs import --allow-erased-person p-2231 runs-0601.jsonl",
                "Admit again an erased person who gave new consent (this import only)."),
        Example("cas runs import --from-captures data/eval-captures --tenant acme",
                "The records of a local capture store, as runs ready for review."),
    ),
    "runs list": (
        Example("cas runs list --tenant acme --since 2026-05-12 --limit 20",
                "The first 20 acme runs started on or after 12 May."),
        Example("cas runs list --cursor r-0120",
                "The next page: the runs after r-0120 (as `# more: --cursor` said)."),
    ),
    "runs show": (
        Example("cas runs show r-0104", "Print run r-0104: input, steps, tool calls and outcome."),
        Example("cas runs show r-0104 --transcript",
                "Read it as a transcript: turns, tool calls, their arguments and results."),
    ),
}
