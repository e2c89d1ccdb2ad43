"""The plain commands of "Erasure and retirement": `cas erase`, `cas retire`, `cas renew`."""

from __future__ import annotations

import shlex

import click

from .common import (TOKEN, VERSION_ARGS, VERSION_FORMS, Example, Invocation, erasure_text,
                     json_option, list_option, pass_ctx, plural, split_version_args, summarised,
                     to_json, yes_option)


@click.command()
@click.option("--person", required=True, metavar="PERSON_ID",
              help="The person whose cases, runs and reviews are deleted.")
@click.option("--confirm-token", default=None, metavar="TOKEN",
              help="The token of the preview: carries out exactly what it showed.")
@yes_option
@list_option
@json_option
@pass_ctx
def erase(ctx: Invocation, person: str, confirm_token: str | None, yes: bool,
          show_all: bool) -> None:
    """Erase a person: without --confirm-token, preview what would be deleted and retired;
    with the preview's token, delete it from every version, pack and log (--yes: preview and
    erase in one call, still printing the preview)."""
    from cas.errors import InvalidArgument
    if yes and confirm_token:
        raise InvalidArgument("give --yes or --confirm-token, not both")
    repo = ctx.repo()
    result = repo.erase(person, confirm_token, progress=ctx.progress)
    preview = None
    if isinstance(result, dict):  # a preview
        for warning in result["warnings"]:
            click.echo(f"cas: warning: {warning}", err=True)
        if not yes or not result["matched"]:
            ctx.emit(result, lambda: _preview_text(result, person, show_all))
            return
        preview = result
        if not ctx.as_json:
            click.echo(_preview_text(result, person, show_all, yes=True))
        result = repo.erase(person, result["confirm_token"], progress=ctx.progress)
    ctx.progress("", 0, 0)
    out = to_json(result)
    if preview is not None:
        out = {"preview": preview, **out}
    ctx.emit(out, lambda: erasure_text(result, "erased"))


def _preview_text(p: dict, person: str, show_all: bool = False, yes: bool = False) -> str:
    """The preview, in the future tense: nothing is deleted or retired before the confirmation.
    It names the person as typed (the caller gave it); the record keeps only the digest."""
    if not p["matched"]:
        return f"nothing to erase: nothing matched {person}; no record will be written"
    lines = [(f"erasing {person} will delete {plural(len(p['cases']), 'case')}, "
              f"{plural(len(p['runs']), 'run')} and {plural(len(p['reviews']), 'review')}, "
              f"and will retire {plural(len(p['versions_to_retire']), 'version')}:")]
    items = [f"  will retire {v['dataset']}@{v['number']} ({v['state']}, "
             f"{plural(v['item_count'], 'case')})" for v in p["versions_to_retire"]]
    items += [f"  will delete run {r}" for r in p["runs"]]
    items += [f"  will delete case {c}" for c in p["cases"]]
    items += [f"  will delete review {a}" for a in p["reviews"]]
    items += [f"  will delete proposal {t}" for t in p["proposals_to_delete"]]
    items += [f"  cited by score {s['score_id']} ({s['metric']}, {s['dataset']}@{s['version']})"
              for s in p["citing_scores"]]
    items += [f"  cited by experiment {e['name']} ({e['dataset']}@{e['version']})"
              for e in p["citing_experiments"]]
    counts = (f"  {len(items)} lines: {plural(len(p['citing_scores']), 'citing score')}, "
              f"{plural(len(p['citing_experiments']), 'citing experiment')}, "
              f"{plural(len(p['proposals_to_delete']), 'proposal')} to delete")
    lines += summarised(items, counts, show_all, "erase")
    if not yes:
        lines.append(f"confirm with: cas erase --person {shlex.quote(person)} --confirm-token "
                     f"{p['confirm_token']}")
    return "\n".join(lines)


@click.command(context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION")
@click.option("--cause", required=True, metavar="CAUSE",
              help="CONTAMINATED, INVALID_LABELS or OPERATOR_REQUEST (any letter case).")
@click.option("--note", required=True, help="Why, for whoever finds the version retired.")
@json_option
@pass_ctx
def retire(ctx: Invocation, args: tuple[str, ...], cause: str, note: str) -> None:
    """Retire DATASET VERSION for good: reads, scores and experiments over it are refused from
    now on. Deletes nothing (erasing a person is `cas erase`)."""
    name, number, _ = split_version_args("retire", args, VERSION_FORMS)
    r = ctx.repo().retire(name, number, cause, note)
    ctx.emit({**to_json(r), "state": "RETIRED"},
             f"retired {r.dataset}@{r.number}: {r.cause} at {r.retired_at}")


@click.command()
@click.argument("name", metavar="DATASET")
@json_option
@pass_ctx
def renew(ctx: Invocation, name: str) -> None:
    """Seal the successor of DATASET's head after an erasure retired it: the cases the
    erasure left. A head an operator retired is refused (cut past it with `cas commit` or
    `cas remove`), and so is an ACTIVE head. Locked pins follow with `cas lock update`."""
    record = ctx.repo().renew(name)
    ctx.emit({**to_json(record), "renewed_from": record.parent},
             f"sealed {record.dataset}@{record.number}: {record.item_count} cases (+"
             f"{record.added} -{record.removed}) {record.content_digest}\n"
             f"renews {name}@{record.parent} ({record.message}); move locked pins to it with "
             "`cas lock update`")


EXAMPLES = {
    "renew": (
        Example("cas renew support-evals",
                "After an erasure retired the head: seal the cases it left."),
    ),
    "erase": (
        Example("cas erase --person p-2231",
                "Preview what erasing the person deletes and retires; nothing changes."),
        Example(f"cas erase --person p-2231 --confirm-token {TOKEN}",
                "Carry out exactly what the preview showed."),
    ),
    "retire": (
        Example('cas retire support-evals@2 --cause CONTAMINATED '
                '--note "found in a training crawl"',
                "Retire version 2 for good: every read, score and experiment is refused."),
        Example('cas retire support-evals 1 --cause INVALID_LABELS --note "rubric v1 was wrong"',
                "Retire version 1 because its labels were wrong."),
    ),
}
