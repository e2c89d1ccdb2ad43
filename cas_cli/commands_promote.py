"""`cas promote`, `cas remove`, `cas seal`: stage a change with a preview, then seal it."""

from __future__ import annotations

import click

from .common import Context, case_table, json_option, pass_ctx, version_summary


def _preview_text(p: dict) -> str:
    base = p["base_version"]
    lines = [f"{p['operation']} into {p['dataset']}: base "
             + (f"{p['dataset']}@{base['number']} ({base['item_count']} cases, "
                f"{base['content_digest']})" if base else "none (first version)")]
    proposed = p["proposed"]
    rows = [("+ ", _summary(c)) for c in proposed["added_cases"]]
    rows += [("- ", _summary(c)) for c in proposed["removed_cases"]]
    table = case_table(rows, head="  ")
    withheld = [", ".join(p["withheld"].get(c["id"], [])) for c in proposed["added_cases"]]
    if any(withheld):  # a last column, on the added cases' lines
        table = [table[0] + "  WITHHELD"] + [
            line + (f"  {w or '-'}" if k < len(withheld) else "")
            for k, (line, w) in enumerate(zip(table[1:], withheld + [""] * len(table)))]
    lines += table
    lines += [f"judged: {j['run_id']}: {j['label']} ({j['metric']}) by {j['reviewer']}"
              for j in p.get("subjects", [])]
    lines.append(f"proposed: {proposed['item_count']} cases ({len(proposed['added'])} new, "
                 f"{proposed['carried_count']} carried) {proposed['content_digest']}")
    if not p["changes"]:
        lines.append("this changes nothing: sealing it seals no version")
    if p["stale"]:
        staged_on = f"{p['dataset']}@{base['number']}" if base else "no version"
        lines.append(f"stale: staged on {staged_on}, and the head has moved since, so sealing "
                     f"it will be refused; {p['restage']}")
    if not p["stale"]:
        lines.append(f"nothing is sealed yet; to seal: cas seal {p['dataset']} --confirm-token "
                     f"{p['confirm_token']}")
    return "\n".join(lines)


def _summary(c: dict):
    from cas.repo.reads import CaseSummary  # (not at import: `cas --help` loads no library)
    return CaseSummary(c["id"], c["run_id"], c["tenant"], c["outcome"])


@click.command()
@click.argument("dataset_name", metavar="DATASET")
@click.option("--file", "subjects_file", type=click.File("rb"), default=None,
              help="JSON array of subjects: subject_kind, subject_ref, review_annotation_id.")
@click.option("--reviewed", is_flag=True,
              help="Promote the runs whose newest judgment accepts them (instead of --file).")
@click.option("--metric", default=None, metavar="M",
              help="With --reviewed: the eligibility metric (must be the rule's; see "
                   "`cas settings show`).")
@click.option("--since", default=None, metavar="TIME",
              help="With --reviewed: only runs started at or after TIME (ISO 8601 UTC).")
@click.option("--tenant", default=None, metavar="T", help="With --reviewed: only this tenant.")
@click.option("--run", "run_ids", multiple=True, metavar="RUN_ID",
              help="With --reviewed: only these runs (repeatable); each must be accepted.")
@click.option("--idempotency-key", required=True, help="Names this request for ever.")
@json_option
@pass_ctx
def promote(ctx: Context, dataset_name: str, subjects_file, reviewed: bool, metric, since,
            tenant, run_ids: tuple[str, ...], idempotency_key: str) -> None:
    """Stage reviewed runs for the next version of DATASET and preview it: the runs a
    subjects file names (--file), or those whose newest judgment accepts them (--reviewed)."""
    from cas.errors import InvalidArgument
    if (subjects_file is None) == (not reviewed):
        raise InvalidArgument("give one of --reviewed (the runs whose newest judgment accepts "
                              "them) and --file SUBJECTS.json")
    if not reviewed and (metric or since or tenant or run_ids):
        raise InvalidArgument("--metric, --since, --tenant and --run select runs for "
                              "--reviewed; a subjects file names its runs itself")
    repo = ctx.repo()
    if reviewed:
        p = repo.promote_reviewed(dataset_name, idempotency_key, metric=metric, tenant=tenant,
                                  since=since, run_ids=list(run_ids) or None,
                                  progress=ctx.progress)
    else:
        from cas.repo.proposals import parse_subjects
        subjects = parse_subjects(subjects_file.read(), getattr(subjects_file, "name", "stdin"))
        p = repo.promote(dataset_name, subjects, idempotency_key, progress=ctx.progress)
    ctx.progress("", 0, 0)
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
