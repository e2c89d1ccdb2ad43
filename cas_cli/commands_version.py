"""Sealing and reading exact versions: commit, show, items, case, diff, prove, verify-proof."""

from __future__ import annotations

import json

import click

from .common import (
    INTEGER,
    VERSION_ARGS,
    Context,
    VersionOption,
    case_json,
    case_table,
    json_option,
    pass_ctx,
    read_usage_error,
    split_version_args,
    to_json,
    version_number,
    version_summary,
)


def _version_line(v) -> str:
    return (f"{v.dataset}@{v.number}: {v.item_count} cases (+{v.added} -{v.removed}) "
            f"{v.content_digest}")


@click.command()
@click.argument("dataset_name", metavar="DATASET")
@click.option("--base", type=VersionOption(minimum=0), default=None,
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
    source = getattr(add_file, "name", "stdin")
    cases = cas.read_cases_jsonl(add_file, source) if add_file is not None else ()
    record = ctx.repo().commit(dataset_name, base=base, add=cases, remove=removes,
                               message=message, retry=retry)
    ctx.emit(to_json(record), "sealed " + _version_line(record))


def _limit_option(f):
    return click.option("--limit", type=INTEGER, default=100, show_default=True,
                        help="Entries per page, 1 to 500 (more is refused, not clamped).")(f)


def _cursor_option(f):
    return click.option("--cursor", "--after", "cursor", default=None, metavar="CASE_ID",
                        help="Continue after this id (the previous page's next_cursor).")(f)


def _pagination(page) -> dict:
    return {"next_cursor": page.next_cursor, "has_more": page.has_more}


def _more(page) -> list[str]:
    return [f"# more: --cursor {page.next_cursor}"] if page.has_more else []


@click.command(context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION")
@json_option
@pass_ctx
def show(ctx: Context, args: tuple[str, ...]) -> None:
    """Show one version record and its state (also DATASET@VERSION)."""
    name, number, _ = split_version_args("show", args, ("DATASET VERSION", "DATASET@VERSION"))
    repo = ctx.repo()
    v = repo.version(name, number)
    retired = repo.retirement(name, number)
    state = "ACTIVE" if retired is None else "RETIRED"
    retirement = {"retirement_cause": retired and retired.cause,
                  "retired_at": retired and retired.retired_at,
                  "retirement_note": retired and retired.note,
                  "retired_by": retired and retired.author}

    def human() -> str:
        return "\n".join([
            _version_line(v),
            f"state:     {state}",
        ] + ([f"retired:   {retired.cause} at {retired.retired_at} by {retired.author}"]
             + ([f"note:      {retired.note}"] if retired.note else []) if retired else []) + [
            f"parent:    {v.parent if v.parent is not None else '-'}",
            f"operation: {v.operation}",
            f"author:    {v.author}",
            f"sealed at: {v.sealed_at}",
        ] + ([f"message:   {v.message}"] if v.message else []))

    ctx.emit({**to_json(v), "state": state, **retirement}, human)


@click.command(context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION")
@_cursor_option
@_limit_option
@json_option
@pass_ctx
def items(ctx: Context, args: tuple[str, ...], cursor: str | None, limit: int) -> None:
    """List one page of the cases of an exact version, in id order, with each case's run id,
    tenant and outcome (also DATASET@VERSION)."""
    name, number, _ = split_version_args("items", args, ("DATASET VERSION", "DATASET@VERSION"))
    repo = ctx.repo()
    page = repo.items_detailed(name, number, after=cursor, limit=limit)
    version = version_summary(repo, page.version, "ACTIVE")  # a retired one is refused
    ctx.emit({"version": version, "items": [case_json(c) for c in page.items],
              "pagination": _pagination(page)},
             lambda: "\n".join(case_table([("", c) for c in page.items]) + _more(page)))


CASE_FORMS = ("DATASET VERSION CASE_ID", "DATASET@VERSION CASE_ID")


@click.command(context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION [CASE_ID]")
@click.option("--run", "run_id", default=None, metavar="RUN_ID",
              help="Name the case by the run it was promoted from, instead of CASE_ID.")
@json_option
@pass_ctx
def case(ctx: Context, args: tuple[str, ...], run_id: str | None) -> None:
    """Print one frozen case of an exact version (also DATASET@VERSION CASE_ID). CASE_ID may
    be a unique prefix of at least 8 hex digits (b3:052f26e5); --run RUN_ID names the case by
    its run instead."""
    if run_id is not None:
        # with --run, no CASE_ID follows the version (one given too is an extra argument)
        name, number, _ = split_version_args("case", args, ("DATASET VERSION",
                                                            "DATASET@VERSION"))
        case_id = None
    else:
        name, number, (case_id,) = split_version_args("case", args, CASE_FORMS)
    repo = ctx.repo()
    resolved = repo.resolve_case(name, number, case_id=case_id, run_id=run_id)
    frozen = repo.case(name, number, resolved)
    value = {"id": resolved, **to_json(frozen)}
    ctx.emit(value, lambda: json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


@click.command(context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET A B")
@_cursor_option
@_limit_option
@json_option
@pass_ctx
def diff(ctx: Context, args: tuple[str, ...], cursor: str | None, limit: int) -> None:
    """One page of the cases added and removed from version A to version B, in id order
    (also DATASET@A [DATASET@]B)."""
    forms = ("DATASET A B", "DATASET@A [DATASET@]B")
    name, a, (new,) = split_version_args("diff", args, forms, rest_are_versions=True)
    other, _, b = new.rpartition("@") if "@" in new else (name, "", new)
    b = version_number(b) if other else None
    if b is None:
        raise read_usage_error("diff", forms, f"{new!r} is not a version number")
    repo = ctx.repo()
    page = repo.diff_detailed(name, a, b, cursor=cursor, limit=limit, new_dataset=other)
    # one id-ordered list of the page's changes; `added` and `removed` stay lists of ids
    changes = sorted([("+ ", c) for c in page.added] + [("- ", c) for c in page.removed],
                     key=lambda row: row[1].case_id)
    data = {"from": version_summary(repo, repo.version(name, a)),
            "to": version_summary(repo, repo.version(other, b)),
            "added": [c.case_id for c in page.added],
            "removed": [c.case_id for c in page.removed],
            "changes": [{"change": "added" if sign == "+ " else "removed", **case_json(c)}
                        for sign, c in changes],
            "pagination": _pagination(page)}

    def human() -> str:
        return "\n".join(case_table(changes, head="  ") + _more(page))

    ctx.emit(data, human)


@click.command(context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION CASE_ID")
@json_option
@pass_ctx
def prove(ctx: Context, args: tuple[str, ...]) -> None:
    """Print an inclusion proof of CASE_ID in a version, checkable offline with verify-proof
    (also DATASET@VERSION CASE_ID)."""
    name, number, (case_id,) = split_version_args(
        "prove", args, ("DATASET VERSION CASE_ID", "DATASET@VERSION CASE_ID"))
    proof = to_json(ctx.repo().prove(name, number, case_id))
    ctx.emit(proof, lambda: json.dumps(proof, sort_keys=True))


OWN_ROOT_NOTE = ("checked against the proof's own root only: this proves only that the case "
                 "is in the tree whose root the proof names; give --root or --pin to check it "
                 "against a version")


@click.command("verify-proof")
@click.argument("proof_file", type=click.File("rb"))
@click.option("--root", default=None, help="The content_digest the proof must lead to.")
@click.option("--pin", default=None, metavar="PIN",
              help="Check against the content_digest of the version this pin names "
                   "(DATASET@VERSION#DIGEST; needs the repository).")
@click.option("--case", "case_id", default=None, help="The case id the proof must show.")
@json_option
@pass_ctx
def verify_proof(ctx: Context, proof_file, root: str | None, pin: str | None,
                 case_id: str | None) -> None:
    """Check a membership proof: against --root (no repository needed), against the version
    a --pin names, or, with neither, only against the root the proof itself names."""
    import cas
    from cas.errors import InvalidArgument
    from cas.storage.tree import parse_proof
    if root and pin:
        raise InvalidArgument("give --root or --pin, not both", reason="USAGE")
    proof = parse_proof(proof_file.read(), getattr(proof_file, "name", "stdin"))
    data = {"valid": True}
    if pin:
        repo = ctx.repo()
        record = repo.check_proof_pin(proof, pin, case_id=case_id or None)
        data.update(checked_against="pin", pin=str(cas.Pin.parse(pin)),
                    version=version_summary(repo, record))
        text = (f"valid: {proof.case_id} is in {record.dataset}@{record.number} "
                f"({proof.root}, checked against the pin)")
    else:
        proof = cas.check_proof(proof, root=root or None, case_id=case_id or None)
        data["checked_against"] = "root" if root else "proof"
        text = f"valid: {proof.case_id} is in {proof.root}" + ("" if root else
                                                              "\n" + OWN_ROOT_NOTE)
    data.update(root=proof.root, case_id=proof.case_id)
    ctx.emit(data, text)


COMMANDS = (commit, show, items, case, diff, prove, verify_proof)  # registered on the root group by cli/main.py
