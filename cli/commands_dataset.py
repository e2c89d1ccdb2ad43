"""`cas dataset ...`: create, list, show, edit and delete datasets."""

from __future__ import annotations

import json

import click

from .common import INTEGER, Context, VersionOption, json_option, pass_ctx, to_json


@click.group()
@json_option
def dataset() -> None:
    """Create, list, show and edit datasets."""


def _meta_line(d) -> str:
    tags = f" [{', '.join(d.tags)}]" if d.tags else ""
    desc = f" - {d.description}" if d.description else ""
    return f"{d.name} (revision {d.revision}){tags}{desc}"


@dataset.command("create")
@click.argument("name")
@click.option("--description", default="", help="What the dataset is for.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@json_option
@pass_ctx
def create(ctx: Context, name: str, description: str, tags: tuple[str, ...]) -> None:
    """Create an empty dataset NAME."""
    record = ctx.repo().create_dataset(name, description=description, tags=tags)
    ctx.emit(to_json(record), f"created dataset {name}")


@dataset.command("list")
@json_option
@pass_ctx
def list_(ctx: Context) -> None:
    """List the datasets."""
    names = ctx.repo().datasets()
    ctx.emit({"datasets": names}, "\n".join(names))


@dataset.command("show")
@click.argument("name")
@click.option("--limit", type=INTEGER, default=20, show_default=True, help="Versions per page.")
@click.option("--before", type=VersionOption(), default=None,
              help="Continue below this version number.")
@json_option
@pass_ctx
def show(ctx: Context, name: str, limit: int, before: int | None) -> None:
    """Show a dataset's metadata and a page of its versions, newest first."""
    repo = ctx.repo()
    meta = repo.dataset(name)
    page = repo.version_listing(name, before=before, limit=limit)

    def human() -> str:
        lines = [_meta_line(meta)] + _version_table(page.versions)
        if page.next_before:
            lines.append(f"  ... more: --before {page.next_before}")
        return "\n".join(lines)

    ctx.emit({"dataset": to_json(meta), "versions": [_version_json(e) for e in page.versions],
              "next_before": page.next_before}, human)


def _state(entry) -> str:
    return entry.state if entry.retirement is None else \
        f"{entry.state} ({entry.retirement.cause})"


def _version_table(entries) -> list[str]:
    """One aligned line per version: `DATASET@N  STATE  COUNT cases (+ADDED -REMOVED)
    OPERATION  AUTHOR  TIME  MESSAGE` (a retired version's state names its cause; an empty message is left out)."""
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
def edit(ctx: Context, name: str, description: str | None, tags: tuple[str, ...],
         clear_tags: bool) -> None:
    """Edit a dataset's description or tags; every revision is kept."""
    new_tags = [] if clear_tags else (list(tags) if tags else None)
    record = ctx.repo().edit_dataset(name, description=description, tags=new_tags)
    ctx.emit(to_json(record), f"{name}: metadata revision {record.revision}")


@dataset.command("history")
@click.argument("name")
@json_option
@pass_ctx
def history(ctx: Context, name: str) -> None:
    """Every metadata revision of a dataset, oldest first."""
    records = ctx.repo().dataset_history(name)
    ctx.emit({"revisions": to_json(records)},
             lambda: "\n".join(f"{r.revision}  {r.edited_at}  {r.author}  {_meta_line(r)}"
                               for r in records))


@dataset.command("delete")
@click.argument("name")
@json_option
@pass_ctx
def delete(ctx: Context, name: str) -> None:
    """Delete a dataset; refused while a score or an experiment cites any of its versions.
    Its name can never be used again."""
    t = ctx.repo().delete_dataset(name)
    ctx.emit(to_json(t), f"deleted dataset {t.dataset}; the name {t.dataset!r} cannot be "
                         "used again")


COMMANDS = (dataset,)  # registered on the root group by cli/main.py
