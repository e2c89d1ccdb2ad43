"""`cas promote`, `cas remove`, `cas seal`: stage a change with a preview, then seal it."""

from __future__ import annotations

import click

from .common import Context, json_option, pass_ctx, version_summary


def _preview_text(p: dict) -> str:
    base = p["base_version"]
    lines = [f"{p['operation']} into {p['dataset']}: base "
             + (f"{p['dataset']}@{base['number']} ({base['item_count']} cases, "
                f"{base['content_digest']})" if base else "none (first version)")]
    proposed = p["proposed"]
    lines += [f"+ {i}" + (f"  withheld: {', '.join(p['withheld'][i])}"
                          if p["withheld"].get(i) else "") for i in proposed["added"]]
    lines += [f"- {i}" for i in proposed["removed"]]
    lines += [f"judged: {j['run_id']}: {j['label']} ({j['metric']}) by {j['reviewer']}"
              for j in p.get("subjects", [])]
    lines.append(f"proposed: {proposed['item_count']} cases ({len(proposed['added'])} new, "
                 f"{proposed['carried_count']} carried) {proposed['content_digest']}")
    if not p["changes"]:
        lines.append("this changes nothing: sealing it seals no version")
    lines.append(f"nothing is sealed yet; to seal: cas seal {p['dataset']} --confirm-token "
                 f"{p['confirm_token']}")
    return "\n".join(lines)


@click.command()
@click.argument("dataset_name", metavar="DATASET")
@click.option("--file", "subjects_file", type=click.File("rb"), required=True,
              help="JSON array of subjects: subject_kind, subject_ref, review_annotation_id.")
@click.option("--idempotency-key", required=True, help="Names this request for ever.")
@json_option
@pass_ctx
def promote(ctx: Context, dataset_name: str, subjects_file, idempotency_key: str) -> None:
    """Stage reviewed runs for the next version of DATASET and preview it."""
    from cas.proposals import parse_subjects
    subjects = parse_subjects(subjects_file.read(), getattr(subjects_file, "name", "stdin"))
    p = ctx.repo().promote(dataset_name, subjects, idempotency_key)
    ctx.emit(p, lambda: _preview_text(p))


@click.command()
@click.argument("dataset_name", metavar="DATASET")
@click.argument("item_ids", nargs=-1, metavar="[ITEM_ID]...")
@click.option("--idempotency-key", required=True, help="Names this request for ever.")
@json_option
@pass_ctx
def remove(ctx: Context, dataset_name: str, item_ids: tuple[str, ...],
           idempotency_key: str) -> None:
    """Stage the removal of cases from the next version of DATASET and preview it."""
    p = ctx.repo().remove(dataset_name, list(item_ids), idempotency_key)
    ctx.emit(p, lambda: _preview_text(p))


@click.command()
@click.argument("dataset_name", metavar="DATASET")
@click.option("--confirm-token", required=True, help="The token a preview printed.")
@click.option("-m", "--message", default="", help="Why this version exists.")
@json_option
@pass_ctx
def seal(ctx: Context, dataset_name: str, confirm_token: str, message: str) -> None:
    """Seal a previewed proposal as the next version of DATASET."""
    repo = ctx.repo()
    result = repo.seal(dataset_name, confirm_token, message=message)
    v = result.version
    if v is None:
        ctx.emit({"version": None, "sealed": False, "reason": "NO_CHANGES"},
                 "the proposal changes nothing: no version sealed")
        return
    summary = dict(version_summary(repo, v), parent=v.parent, added=v.added, removed=v.removed,
                   operation=v.operation, sealed_at=v.sealed_at, author=v.author)
    ctx.emit({"version": summary, "sealed": True, "already_sealed": result.already_sealed},
             ("already sealed as " if result.already_sealed else "sealed ")
             + f"{v.dataset}@{v.number}: {v.item_count} cases (+{v.added} -{v.removed}) "
             f"{v.content_digest}")


COMMANDS = (promote, remove, seal)  # registered on the root group by cli/main.py
