"""`cas dataset ...`: create, list, show, edit, delete and import datasets."""

from __future__ import annotations

import json

import click

from .common import (INTEGER, Example, Invocation, VersionOption, json_option, next_cursor,
                     pass_ctx, policy_source, to_json)


@click.group()
@json_option
def dataset() -> None:
    """Create, list, show and edit datasets."""


def _meta_line(d) -> str:
    tags = f" [{', '.join(d.tags)}]" if d.tags else ""
    desc = f" - {d.description}" if d.description else ""
    retired = f" (retired by an operator: {', '.join(f'@{n}' for n in d.retired)})" \
        if d.retired else ""
    return f"{d.name} (revision {d.revision}){tags}{desc}{retired}"


ADMISSION_SAYS = {"reviewed": "only promotion of reviewed runs adds cases",
                  "direct": "commits may add cases, as promotion does"}


def _dataset_json(record) -> dict:
    """A dataset record as JSON, with the admission rule in force (a dataset created before
    the rule existed reads as direct)."""
    return {**to_json(record), "admission": record.admits, "retired": list(record.retired or [])}


@dataset.command("create")
@click.argument("name")
@click.option("--description", default="", help="What the dataset is for.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--admission", type=click.Choice(["reviewed", "direct"]), default="reviewed",
              show_default=True,
              help="How cases enter, fixed for ever: reviewed (only `cas promote` adds "
                   "them) or direct (`cas commit --add` too: hand-authored golden sets).")
@json_option
@pass_ctx
def create(ctx: Invocation, name: str, description: str, tags: tuple[str, ...],
           admission: str) -> None:
    """Create an empty dataset NAME."""
    record = ctx.repo().create_dataset(name, description=description, tags=tags,
                                       admission=admission)
    ctx.emit(_dataset_json(record),
             f"created dataset {name} (admission {admission}: {ADMISSION_SAYS[admission]})")


@dataset.command("list")
@json_option
@pass_ctx
def list_(ctx: Invocation) -> None:
    """List the datasets."""
    names = ctx.repo().datasets()
    ctx.emit({"datasets": names}, "\n".join(names))


@dataset.command("show")
@click.argument("name")
@click.option("--limit", type=INTEGER, default=20, show_default=True, help="Versions per page.")
@click.option("--before", type=VersionOption(), default=None,
              help="Continue below this version number.")
@click.option("--cursor", type=VersionOption(), default=None, metavar="N",
              help="The previous page's next_cursor: the same as --before N.")
@json_option
@pass_ctx
def show(ctx: Invocation, name: str, limit: int, before: int | None,
         cursor: int | None) -> None:
    """Show a dataset's metadata and a page of its versions, newest first."""
    # `--cursor` because every paged listing takes it (docs/cli.md, "Paging"); its own option,
    # not a second name of --before, so that a refusal names the option that was typed
    if before is not None and cursor is not None:
        from cas.errors import InvalidArgument
        raise InvalidArgument("--before and --cursor both say where the page starts; give one",
                              reason="USAGE")
    before = cursor if before is None else before
    repo = ctx.repo()
    meta = repo.dataset(name)
    policy = repo.content_policy(name)
    page = repo.version_listing(name, before=before, limit=limit)

    def human() -> str:
        lines = [_meta_line(meta),
                 f"  admission: {meta.admits} ({ADMISSION_SAYS[meta.admits]})",
                 (f"  content policy: withholds {', '.join(policy.withheld) or 'nothing'} "
                  f"({policy_source(policy)})")]
        lines += _version_table(page.versions)
        if page.next_before:
            lines.append(f"  ... more: --before {page.next_before}")
        return "\n".join(lines)

    ctx.emit({"dataset": _dataset_json(meta),
              "content_policy": {"withheld": policy.withheld, "overridden": policy.overridden,
                                 "revision": policy.source.revision if policy.source else 0},
              "versions": [_version_json(e) for e in page.versions],
              # `next_before` (a number) is the old key, an alias kept for one release (removed
              # in 0.3.0); `next_cursor` is every listing's (docs/cli.md, "Paging")
              "next_cursor": next_cursor(page.next_before), "next_before": page.next_before},
             human)


def _state(entry) -> str:
    return entry.state if entry.retirement is None else \
        f"{entry.state} ({entry.retirement.cause})"


def _version_table(entries) -> list[str]:
    """One aligned line per version: `DATASET@N  STATE  COUNT cases (+ADDED -REMOVED)
    OPERATION  AUTHOR  TIME  MESSAGE` (a retired version's state names its cause; an empty
    message is left out)."""
    rows = [(f"{e.record.dataset}@{e.record.number}", _state(e),
             f"{e.record.item_count} cases (+{e.record.added} -{e.record.removed})",
             e.record.operation, e.record.author,
             e.record.sealed_at, e.record.message) for e in entries]
    widths = [max(len(r[k]) for r in rows) for k in range(6)] if rows else []
    return ["  " + "  ".join(r[k].ljust(widths[k]) for k in range(6)).rstrip()
            + (f"  {_message(r[6])}" if r[6] else "") for r in rows]


def _message(text: str) -> str:
    """A message on one line: as written when printable, else as JSON (a newline in it
    cannot break the listing)."""
    return text if text.isprintable() else json.dumps(text, ensure_ascii=False)


def _version_json(entry) -> dict:
    retired = entry.retirement
    return {**to_json(entry.record), "state": entry.state,
            "retirement_cause": retired and retired.cause,
            "retired_at": retired and retired.retired_at}


@dataset.command("edit")
@click.argument("name")
@click.option("--description", default=None, help="New description.")
@click.option("--tag", "tags", multiple=True, help="Replace the tags (repeatable).")
@click.option("--clear-tags", is_flag=True, help="Remove every tag.")
@json_option
@pass_ctx
def edit(ctx: Invocation, name: str, description: str | None, tags: tuple[str, ...],
         clear_tags: bool) -> None:
    """Edit a dataset's description or tags; every revision is kept."""
    new_tags = [] if clear_tags else (list(tags) if tags else None)
    record = ctx.repo().edit_dataset(name, description=description, tags=new_tags)
    ctx.emit(_dataset_json(record), f"{name}: metadata revision {record.revision}")


@dataset.command("history")
@click.argument("name")
@json_option
@pass_ctx
def history(ctx: Invocation, name: str) -> None:
    """Every metadata revision of a dataset, oldest first."""
    records = ctx.repo().dataset_history(name)
    ctx.emit({"revisions": [_dataset_json(r) for r in records]},
             lambda: "\n".join(f"{r.revision}  {r.edited_at}  {r.author}  {_meta_line(r)}"
                               for r in records))


@dataset.command("delete")
@click.argument("name")
@json_option
@pass_ctx
def delete(ctx: Invocation, name: str) -> None:
    """Delete a dataset; refused while a score or an experiment cites any of its versions.
    Its name can never be used again."""
    t = ctx.repo().delete_dataset(name)
    ctx.emit(to_json(t), f"deleted dataset {t.dataset}; the name {t.dataset!r} cannot be "
                         "used again")


@dataset.command("import")
@click.option("--from", "source", required=True, metavar="TOOL",
              help="langsmith, langfuse, phoenix, braintrust, hf or jsonl "
                   "(docs/importers.md, \"Datasets from other tools\").")
@click.argument("path", metavar="FILE_OR_DIR")
@click.argument("name", metavar="DATASET")
@click.option("--tenant", default=None, help="The tenant of every case imported.")
@click.option("--map", "mapping", multiple=True, metavar="FIELD=COLUMN[,COLUMN...]",
              help="hf and jsonl: the column of input, output, metadata or id (repeatable).")
@click.option("--dry-run", is_flag=True, help="Read and report; write nothing.")
@click.option("-m", "--message", default=None, help="The version's message.")
@json_option
@pass_ctx
def import_(ctx: Invocation, source: str, path: str, name: str, tenant: str | None,
            mapping: tuple[str, ...], dry_run: bool, message: str | None) -> None:
    """Import another tool's dataset export as the cases of DATASET (created `direct` if
    it does not exist), in one sealed version; nothing is sealed when it holds them all."""
    from cas.interop.datasets import import_dataset
    r = import_dataset(ctx.repo(), source, path, name, tenant=tenant,
                       mapping=list(mapping) or None, dry_run=dry_run, message=message)
    data = {**r._asdict(), "version": None if r.version is None else to_json(r.version)}

    def human() -> str:
        skipped = "".join(f", {n} skipped ({why})" for why, n in sorted(r.skipped.items()))
        dup = f", {r.duplicates} duplicates" if r.duplicates else ""
        head = f"{r.items} examples read{skipped}{dup}: {r.cases} cases, {r.new} new"
        if r.status == "sealed":
            v = r.version
            done = (f"sealed {v.dataset}@{v.number} ({v.item_count} cases, +{v.added})"
                    + (f"; created dataset {name} (admission direct)" if r.created else ""))
        elif r.status == "unchanged":
            done = f"unchanged: {name}@{r.base} already holds every case; nothing sealed"
        else:
            done = (f"dry run: would seal {name}@{r.base + 1}" if r.new else
                    f"dry run: unchanged, {name}@{r.base} already holds every case") + (
                f" (would create dataset {name}, admission direct)" if r.created else "")
        lines = [head, done]
        for field, seen in sorted(r.unplaced.items()):
            lines.append(f"  no place for {field!r} ({seen['count']}x, first at "
                         f"{seen['first']}): kept in metadata.from.{source}.extra")
        return "\n".join(lines)

    ctx.emit(data, human)


EXAMPLES = {
    "dataset": (
        Example('cas dataset create support-evals --description "Support agent regressions"',
                "Create an empty dataset; promoting reviewed runs adds its cases."),
        Example("cas dataset show support-evals",
                "Its metadata and its newest versions, with their state."),
        Example("cas dataset list", "The names of every dataset."),
    ),
    "dataset create": (
        Example('cas dataset create support-evals --description "Support agent regressions" '
                "--tag support --tag prod",
                "Create an empty dataset; only promotion of reviewed runs adds cases."),
        Example('cas dataset create support-golden --admission direct --tag golden',
                "Hand-authored cases: a direct dataset takes `cas commit --add` too."),
    ),
    "dataset list": (
        Example("cas dataset list", "The names of every dataset, sorted."),
        Example("cas dataset list --json", 'The same as {"datasets": [...]}, for scripts.'),
    ),
    "dataset show": (
        Example("cas dataset show support-evals",
                "Metadata and the 20 newest versions, each ACTIVE or RETIRED (CAUSE)."),
        Example("cas dataset show support-evals --before 12",
                "The versions below 12 (as `... more: --before 12` said)."),
    ),
    "dataset edit": (
        Example('cas dataset edit support-evals --description "Tier-1 support regressions"',
                "Write a new metadata revision; every revision is kept."),
        Example("cas dataset edit support-evals --tag support --tag tier-1",
                "Replace the tags."),
        Example("cas dataset edit support-evals --clear-tags", "Remove every tag."),
    ),
    "dataset history": (
        Example("cas dataset history support-evals", "Every metadata revision, oldest first."),
    ),
    "dataset import": (
        Example("cas dataset import --from langsmith support-golden.json support-golden "
                "--tenant acme", "Bring a LangSmith dataset export over as one version."),
        Example("cas dataset import --from hf ./squad-dev qa --map input=question,context "
                "--map output=answers --dry-run",
                "Preview a Hugging Face dataset saved with save_to_disk, columns mapped."),
        Example("cas dataset import --from langfuse items.json support-golden --json",
                "Again: `unchanged` when the head already holds every case."),
    ),
    "dataset delete": (
        Example("cas dataset delete support-evals-scratch",
                "Delete a dataset nothing cites; its name can never be used again."),
    ),
}
