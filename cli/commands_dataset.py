"""`cas dataset ...`: create, list, show, edit and delete datasets."""

from __future__ import annotations

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
    page = repo.versions(name, before=before, limit=limit)

    def human() -> str:
        lines = [_meta_line(meta)]
        lines += [f"  {v.dataset}@{v.number}  {v.item_count} cases  +{v.added} -{v.removed}  "
                  f"{v.sealed_at}  {v.author}  {v.content_digest}" for v in page.versions]
        if page.next_before:
            lines.append(f"  ... more: --before {page.next_before}")
        return "\n".join(lines)

    ctx.emit({"dataset": to_json(meta), "versions": to_json(page.versions),
              "next_before": page.next_before}, human)


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
