"""Sealing and reading exact versions: commit, show, items, case, diff, prove, verify-proof."""

from __future__ import annotations

import json

import click

from .main import Context, cli, json_option, parse_ref, to_json

pass_ctx = click.make_pass_decorator(Context)


def _version_line(v) -> str:
    return (f"{v.dataset}@{v.number}: {v.item_count} cases (+{v.added} -{v.removed}) "
            f"{v.content_digest}")


@cli.command()
@click.argument("dataset_name", metavar="DATASET")
@click.option("--base", type=int, default=None,
              help="The version this one is built on (required once the dataset has versions).")
@click.option("--add", "add_file", type=click.File("rb"), default=None,
              help="JSON Lines file of cases to add ('-' for stdin).")
@click.option("--remove", "removes", multiple=True, metavar="CASE_ID",
              help="A case id to remove (repeatable).")
@click.option("-m", "--message", default="", help="Why this version exists.")
@click.option("--retry", is_flag=True, help="If another writer sealed first, re-apply on the new head.")
@json_option
@pass_ctx
def commit(ctx: Context, dataset_name: str, base: int | None, add_file, removes, message: str,
           retry: bool) -> None:
    """Seal a new version of DATASET: BASE minus --remove, plus the cases in --add."""
    import cas
    repo = ctx.repo()
    if base is None:
        head = repo.head(dataset_name)
        if head:
            raise cas.InvalidArgument(
                f"dataset {dataset_name!r} has versions; name the one to build on with "
                f"--base (its newest is {head})", head=head)
    source = getattr(add_file, "name", "stdin")
    cases = cas.read_cases_jsonl(add_file, source) if add_file is not None else ()
    record = repo.commit(dataset_name, base=base, add=cases, remove=removes, message=message,
                         retry=retry)
    ctx.emit(to_json(record), "sealed " + _version_line(record))


@cli.command()
@click.argument("ref", metavar="DATASET@VERSION")
@json_option
@pass_ctx
def show(ctx: Context, ref: str) -> None:
    """Show one version record."""
    name, number = parse_ref(ref)
    v = ctx.repo().version(name, number)

    def human() -> str:
        return "\n".join([
            _version_line(v),
            f"parent:    {v.parent if v.parent is not None else '-'}",
            f"operation: {v.operation}",
            f"author:    {v.author}",
            f"sealed at: {v.sealed_at}",
        ] + ([f"message:   {v.message}"] if v.message else []))

    ctx.emit(to_json(v), human)


@cli.command()
@click.argument("ref", metavar="DATASET@VERSION")
@click.option("--after", default=None, metavar="CASE_ID", help="Cursor: start after this id.")
@click.option("--limit", default=100, show_default=True, help="Ids per page.")
@json_option
@pass_ctx
def items(ctx: Context, ref: str, after: str | None, limit: int) -> None:
    """List one page of the case ids of an exact version, in id order."""
    name, number = parse_ref(ref)
    page = ctx.repo().items(name, number, after=after, limit=limit)

    def human() -> str:
        lines = list(page.items)
        if page.next_cursor:
            lines.append(f"# more: --after {page.next_cursor}")
        return "\n".join(lines)

    ctx.emit({"dataset": name, "version": number, "items": page.items,
              "next_cursor": page.next_cursor}, human)


@cli.command()
@click.argument("ref", metavar="DATASET@VERSION")
@click.argument("case_id")
@json_option
@pass_ctx
def case(ctx: Context, ref: str, case_id: str) -> None:
    """Print one case of an exact version."""
    name, number = parse_ref(ref)
    value = to_json(ctx.repo().case(name, number, case_id))
    ctx.emit({"case_id": case_id, "case": value},
             lambda: json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


@cli.command()
@click.argument("old", metavar="DATASET@A")
@click.argument("new", metavar="[DATASET@]B")
@json_option
@pass_ctx
def diff(ctx: Context, old: str, new: str) -> None:
    """Cases added and removed between two versions."""
    name, a = parse_ref(old)
    other, b = parse_ref(new if "@" in new else f"{name}@{new}")
    d = ctx.repo().diff(name, a, b, new_dataset=other)
    ctx.emit({"added": d.added, "removed": d.removed},
             lambda: "\n".join([f"+ {i}" for i in d.added] + [f"- {i}" for i in d.removed]))


@cli.command()
@click.argument("ref", metavar="DATASET@VERSION")
@click.argument("case_id")
@json_option
@pass_ctx
def prove(ctx: Context, ref: str, case_id: str) -> None:
    """Print a membership proof of CASE_ID in a version (checkable with verify-proof)."""
    name, number = parse_ref(ref)
    proof = to_json(ctx.repo().prove(name, number, case_id))
    ctx.emit(proof, lambda: json.dumps(proof, sort_keys=True))


@cli.command("verify-proof")
@click.argument("proof_file", type=click.File("rb"))
@click.option("--root", default=None, help="The content_digest the proof must lead to.")
@click.option("--case", "case_id", default=None, help="The case id the proof must show.")
@json_option
@pass_ctx
def verify_proof(ctx: Context, proof_file, root: str | None, case_id: str | None) -> None:
    """Check a membership proof without any repository."""
    import msgspec

    import cas
    from cas.digest import parse_digest
    try:
        proof = msgspec.json.decode(proof_file.read(), type=cas.Proof)
    except msgspec.DecodeError as exc:
        raise cas.InvalidArgument(f"{proof_file.name} is not a proof: {exc}") from None
    root = parse_digest(root, "root") if root else None
    case_id = parse_digest(case_id, "case id") if case_id else None
    valid = cas.verify_proof(proof, root=root, case_id=case_id)
    if not valid:
        raise cas.FailedPrecondition(
            f"proof does not show {case_id or proof.case_id} in {root or proof.root}",
            reason="PROOF_INVALID", root=root or proof.root, case_id=case_id or proof.case_id)
    ctx.emit({"valid": True, "root": proof.root, "case_id": proof.case_id},
             f"valid: {proof.case_id} is in {proof.root}")
