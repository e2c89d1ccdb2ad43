"""The plain commands of "Datasets and versions": stage, seal and read versions; log, export."""

from __future__ import annotations

import json
import sys

import click

from .common import (CASE, INTEGER, PIN, SINCE_HELP, SUMMARY_OVER, TOKEN, VERSION_ARGS,
                     VERSION_FORMS, Example, Invocation, VersionOption, case_json, case_table,
                     json_option, list_option, lock_option, next_cursor, pass_ctx, read_usage_error,
                     refuse_unknown_options, split_version_args, summarised, to_json, version_name,
                     version_summary, yes_option)


def _preview_text(p: dict, show_all: bool = False, yes: bool = False) -> str:
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
    judged = [f"judged: {j['run_id']}: {j['label']} ({j['metric']}) by {j['reviewer']}"
              + "".join(f"; {a['label']} by {a['reviewer']}" for a in j.get("admitted_by", ())
                        if a["annotation_id"] != j["annotation_id"])
              for j in p.get("subjects", [])]
    items = table[1:] + judged
    added = proposed.get("added_count", len(proposed["added_cases"]))
    removed = proposed.get("removed_count", len(proposed["removed_cases"]))
    if not show_all and len(items) > SUMMARY_OVER:  # counts, the first lines, how to see all
        counts = (f"{added} cases added, {removed} removed; "
                  f"{p.get('subjects_count', len(judged))} runs judged")
        shown = summarised(items, counts, False, p["operation"], json_lists_all=False)
        lines += [shown[0], table[0], *shown[1:]]
    else:
        lines += table[:1] + items
    if p.get("next_cursor") is not None:  # a preview is one page of its changes
        shown_changes = len(proposed["added_cases"]) + len(proposed["removed_cases"])
        lines.append(f"this preview shows the first {shown_changes} of {added + removed} "
                     f"changes; the next page: cas preview {p['dataset']} --confirm-token "
                     f"{p['confirm_token']} --cursor {p['next_cursor']}")
    lines.append(f"proposed: {proposed['item_count']} cases ({len(proposed['added'])} new, "
                 f"{proposed['carried_count']} carried) {proposed['content_digest']}")
    if not p["changes"]:
        lines.append("this changes nothing: sealing it seals no version")
    if p["stale"]:
        staged_on = f"{p['dataset']}@{base['number']}" if base else "no version"
        lines.append(f"stale: staged on {staged_on}, and the head has moved since, so sealing "
                     f"it will be refused; {p['restage']}")
    if not p["stale"] and not yes:
        lines.append(f"nothing is sealed yet; to seal: cas seal {p['dataset']} --confirm-token "
                     f"{p['confirm_token']}")
    return "\n".join(lines)


def _preview_and_maybe_seal(ctx: Invocation, repo, p: dict, yes: bool, show_all: bool,
                            message: str) -> None:
    """Print a promotion's or removal's preview; with --yes, seal it too (one JSON document:
    {"preview", "version", "sealed", "already_sealed"})."""
    if not yes:
        ctx.emit(p, lambda: _preview_text(p, show_all))
        return
    if not ctx.as_json:
        click.echo(_preview_text(p, show_all, yes=True))
    data, text = _sealed(repo, p["dataset"], p["confirm_token"], message)
    ctx.emit({"preview": p, **data}, text)


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
              help="With --reviewed: " + SINCE_HELP[0].lower() + SINCE_HELP[1:])
@click.option("--tenant", default=None, metavar="T", help="With --reviewed: only this tenant.")
@click.option("--run", "run_ids", multiple=True, metavar="RUN_ID",
              help="With --reviewed: only these runs (repeatable); each must be accepted.")
@click.option("--idempotency-key", required=True, help="Names this request for ever.")
@yes_option
@click.option("-m", "--message", default="", help="With --yes: why this version exists.")
@list_option
@json_option
@pass_ctx
def promote(ctx: Invocation, dataset_name: str, subjects_file, reviewed: bool, metric, since,
            tenant, run_ids: tuple[str, ...], idempotency_key: str, yes: bool, message: str,
            show_all: bool) -> None:
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
        from cas.repo.promotion import parse_subjects
        subjects = parse_subjects(subjects_file.read(), getattr(subjects_file, "name", "stdin"))
        p = repo.promote(dataset_name, subjects, idempotency_key, progress=ctx.progress)
    ctx.progress("", 0, 0)
    _preview_and_maybe_seal(ctx, repo, p, yes, show_all, message)


@click.command()
@click.argument("dataset_name", metavar="DATASET")
@click.argument("item_ids", nargs=-1, metavar="[ITEM_ID]...")
@click.option("--idempotency-key", required=True, help="Names this request for ever.")
@yes_option
@click.option("-m", "--message", default="", help="With --yes: why this version exists.")
@list_option
@json_option
@pass_ctx
def remove(ctx: Invocation, dataset_name: str, item_ids: tuple[str, ...],
           idempotency_key: str, yes: bool, message: str, show_all: bool) -> None:
    """Stage the removal of cases from the next version of DATASET and preview it (with
    --yes, seal it too)."""
    repo = ctx.repo()
    p = repo.remove(dataset_name, list(item_ids), idempotency_key)
    _preview_and_maybe_seal(ctx, repo, p, yes, show_all, message)


@click.command()
@click.argument("dataset_name", metavar="DATASET")
@click.option("--confirm-token", required=True, help="The token a preview printed.")
@click.option("-m", "--message", default="", help="Why this version exists.")
@json_option
@pass_ctx
def seal(ctx: Invocation, dataset_name: str, confirm_token: str, message: str) -> None:
    """Seal a previewed proposal as the next version of DATASET."""
    ctx.emit(*_sealed(ctx.repo(), dataset_name, confirm_token, message))


def _sealed(repo, dataset_name: str, confirm_token: str, message: str) -> tuple[dict, str]:
    """Seal a proposal: (JSON, human line)."""
    result = repo.seal(dataset_name, confirm_token, message=message)
    v = result.version
    if v is None:
        return ({"version": None, "sealed": False, "reason": "NO_CHANGES"},
                "the proposal changes nothing: no version sealed")
    summary = dict(version_summary(repo, v), parent=v.parent, added=v.added, removed=v.removed,
                   operation=v.operation, sealed_at=v.sealed_at, author=v.author)
    return ({"version": summary, "sealed": True, "already_sealed": result.already_sealed},
            ("already sealed as " if result.already_sealed else "sealed ")
            + f"{v.dataset}@{v.number}: {v.item_count} cases (+{v.added} -{v.removed}) "
            f"{v.content_digest}")


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
@click.option("--retry", is_flag=True,
              help="If another writer sealed first, re-apply on the new head.")
@json_option
@pass_ctx
def commit(ctx: Invocation, dataset_name: str, base: int | None, add_file, removes, message: str,
           retry: bool) -> None:
    """Seal a new version of DATASET: BASE minus --remove, plus the cases in --add."""
    from cas.format.cases import read_cases_jsonl
    source = getattr(add_file, "name", "stdin")
    cases = read_cases_jsonl(add_file, source) if add_file is not None else ()
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
    """The page's cursor, in the one shape (docs/cli.md, "Paging"), and the old `pagination`
    object beside it, an alias kept for one release (removed in 0.3.0)."""
    return {"next_cursor": next_cursor(page.next_cursor),
            "pagination": {"next_cursor": page.next_cursor, "has_more": page.has_more}}


def _more(page) -> list[str]:
    return [f"# more: --cursor {page.next_cursor}"] if page.has_more else []


@click.command(context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION")
@json_option
@pass_ctx
def show(ctx: Invocation, args: tuple[str, ...]) -> None:
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
@lock_option
@json_option
@pass_ctx
def items(ctx: Invocation, args: tuple[str, ...], cursor: str | None, limit: int) -> None:
    """List one page of the cases of an exact version, in id order, with each case's run id,
    tenant and outcome (also DATASET@VERSION, or DATASET alone: the version cas.lock pins)."""
    args = ctx.locked_args(args, "items", ("DATASET VERSION", "DATASET@VERSION"))
    name, number, _ = split_version_args("items", args, ("DATASET VERSION", "DATASET@VERSION"))
    repo = ctx.repo()
    page = repo.items_detailed(name, number, after=cursor, limit=limit)
    version = version_summary(repo, page.version, "ACTIVE")  # a retired one is refused
    ctx.emit({"version": version, "items": [case_json(c) for c in page.items],
              **_pagination(page), **ctx.resolved_json()},
             lambda: "\n".join(case_table([("", c) for c in page.items]) + _more(page)))


CASE_FORMS = ("DATASET VERSION CASE_ID", "DATASET@VERSION CASE_ID")


@click.command(context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION [CASE_ID]")
@click.option("--run", "run_id", default=None, metavar="RUN_ID",
              help="Name the case by the run it was promoted from, instead of CASE_ID.")
@json_option
@pass_ctx
def case(ctx: Invocation, args: tuple[str, ...], run_id: str | None) -> None:
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
@click.option("--format", "output_format", type=click.Choice(["table", "markdown"]),
              default="table", show_default=True,
              help="markdown: counts and the first --limit added and removed cases with run, "
                   "tenant, first user message and reviewer, for a pull request comment.")
@lock_option
@json_option
@pass_ctx
def diff(ctx: Invocation, args: tuple[str, ...], cursor: str | None, limit: int,
         output_format: str) -> None:
    """One page of the cases added and removed from version A to version B, in id order
    (also DATASET@A [DATASET@]B; DATASET B diffs the version cas.lock pins with B)."""
    forms = ("DATASET A B", "DATASET@A [DATASET@]B")
    args = ctx.locked_args(args, "diff", forms, rest=1, problem="missing B")
    name, a, (new,) = split_version_args("diff", args, forms, rest_are_versions=True)
    other, b, _ = version_name("diff", forms, new, name, f"{new!r} is not a version number")
    repo = ctx.repo()
    if output_format == "markdown":
        from cas.interop import review_diff
        found = review_diff.version_diff(repo, name, a, b, limit=limit,
                                         new_dataset=None if other == name else other)
        text = review_diff.markdown(found)
        ctx.emit({"markdown": text, "added": found.added, "removed": found.removed,
                  **ctx.resolved_json()}, text.rstrip("\n"))
        return
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
            **_pagination(page), **ctx.resolved_json()}

    def human() -> str:
        return "\n".join(case_table(changes, head="  ") + _more(page))

    ctx.emit(data, human)


@click.command(context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION CASE_ID")
@json_option
@pass_ctx
def prove(ctx: Invocation, args: tuple[str, ...]) -> None:
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
def verify_proof(ctx: Invocation, proof_file, root: str | None, pin: str | None,
                 case_id: str | None) -> None:
    """Check a membership proof: against --root (no repository needed), against the version
    a --pin names, or, with neither, only against the root the proof itself names."""
    from cas.errors import InvalidArgument
    from cas.format.version_names import Pin
    from cas.storage.tree import check_proof, parse_proof
    if root and pin:
        raise InvalidArgument("give --root or --pin, not both", reason="USAGE")
    proof = parse_proof(proof_file.read(), getattr(proof_file, "name", "stdin"))
    data = {"valid": True}
    if pin:
        repo = ctx.repo()
        record = repo.check_proof_pin(proof, pin, case_id=case_id or None)
        data.update(checked_against="pin", pin=str(Pin.parse(pin)),
                    version=version_summary(repo, record))
        text = (f"valid: {proof.case_id} is in {record.dataset}@{record.number} "
                f"({proof.root}, checked against the pin)")
    else:
        proof = check_proof(proof, root=root or None, case_id=case_id or None)
        data["checked_against"] = "root" if root else "proof"
        text = f"valid: {proof.case_id} is in {proof.root}" + ("" if root else
                                                              "\n" + OWN_ROOT_NOTE)
    data.update(root=proof.root, case_id=proof.case_id)
    ctx.emit(data, text)


def _line(e: dict) -> str:
    where = f"{e['dataset']}@{e['version']}" if e.get("version") else (e.get("dataset") or "")
    kind = e["kind"]
    if kind == "seal":
        what = (f"sealed {where} ({e['operation']}: {e['item_count']} cases, +{e['added']} "
                f"-{e['removed']})" + (f" {e['message']}" if e["message"] else ""))
    elif kind == "retirement":
        what = f"retired {where} ({e['cause']})"
    elif kind == "erasure":
        retired = ", ".join(f"{v['dataset']}@{v['version']}" for v in e["retired"]) or "none"
        what = (f"erasure {e['id']}: {e['cases']} cases, {e['runs']} runs, {e['reviews']} "
                f"reviews deleted; retired {retired}")
    elif kind == "deletion":
        what = f"deleted {where}" if e.get("version") else f"deleted dataset {e['dataset']}"
    elif kind == "experiment":
        what = f"experiment {e['name']!r} over {where}"
    elif kind == "cassettes":
        what = (f"recorded {e['cassettes']} cassettes of {where} under "
                f"{', '.join(e['executors'])} (batch {e['number']})")
    else:
        what = f"{e['scores']} scores on {where} (batch {e['number']})"
    return f"{e['at']}  {what}  by {e['author']}"


@click.command()
@click.argument("dataset", required=False)
@click.option("--limit", type=INTEGER, default=50, show_default=True,
              help="Entries per page, 1 to 500.")
@click.option("--cursor", default=None, help="Continue after this entry (next_cursor).")
@json_option
@pass_ctx
def log(ctx: Invocation, dataset: str | None, limit: int, cursor: str | None) -> None:
    """The timeline of seals, retirements, erasures, deletions, experiments, score batches
    and cassette recordings, newest first (of DATASET, or of the whole repository)."""
    page = ctx.repo().log(dataset, limit=limit, cursor=cursor)
    ctx.emit({"entries": page.entries, "next_cursor": next_cursor(page.next_cursor)},
             lambda: "\n".join([*map(_line, page.entries)] + (
                 [f"(more: --cursor '{page.next_cursor}')"] if page.next_cursor else [])))


def _source(ctx: Invocation, args: tuple[str, ...]):
    """A pin as written (`DATASET@N#b3:...`, checked by the library), the pin cas.lock holds
    for a DATASET given alone, or (dataset, version)."""
    if len(args) == 1 and "@" not in args[0] and not args[0].startswith("-"):
        return str(ctx.locked_or_refused(args[0], "export", VERSION_FORMS).pin)
    if args and "#" in args[0]:
        refuse_unknown_options(args)
        if len(args) > 1:
            raise read_usage_error("export", VERSION_FORMS,
                                   f"unexpected extra argument {args[1]!r}", reason="USAGE")
        return args[0]
    name, number, _ = split_version_args("export", args, VERSION_FORMS)
    return name, number


@click.command("export", context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION")
@click.option("--to", "to", required=True, metavar="FORMAT",
              help="jsonl, parquet, hf or openai-chat (docs/export.md).")
@click.option("-o", "--output", "output", default=None, metavar="PATH",
              help="Write here, atomically (required for parquet and hf; default: stdout).")
@lock_option
@json_option
@pass_ctx
def export(ctx: Invocation, args: tuple[str, ...], to: str, output: str | None) -> None:
    """Export an exact version (also DATASET@VERSION, a pin DATASET@VERSION#b3:..., or DATASET
    alone: the version cas.lock pins)."""
    from cas.interop import exports
    source = _source(ctx, args)
    out = output if output is not None else sys.stdout.buffer
    result = exports.export(ctx.repo(), source, to, out)
    if output is None:  # stdout carried the export itself: nothing may follow it there
        return
    data = {**result._asdict(), **ctx.resolved_json()}

    def human() -> str:
        extra = (f" ({result.skipped} skipped, {result.truncated} truncated)"
                 if result.format == "openai-chat" else "")
        return f"exported {result.cases} cases of {result.pin} to {result.path}{extra}"

    ctx.emit(data, human)


REPLAY_FORMS = ("DATASET VERSION ITEM_ID", "DATASET@VERSION ITEM_ID")


def _record_text(record) -> str:
    lines = [(f"{record.steps} steps, {record.tool_calls} tool calls: {record.replayed} "
              f"replayed, {record.stubbed} stubbed, {record.unrecorded} unrecorded"),
             f"plan: {record.plan_digest}",
             "stubbed tools: " + (", ".join(record.stubbed_tools) or "-")]
    for d in record.steps_detail:
        lines.append(f"{d.index:>4}  {d.disposition:<10}  {d.type or '-':<9}  "
                     f"{d.tool_name or '-'}")
    return "\n".join(lines)


def _diff_text(diff) -> str:
    if diff.identical:
        return "identical: the run has the frozen case's bytes"

    def show(entry: dict, side: str) -> str:
        if side not in entry:
            return "(absent)"
        return json.dumps(entry[side], ensure_ascii=False, sort_keys=True)
    lines = [f"{len(diff.differences)} differences (frozen -> replayed):"]
    lines += [f"{d['path']}: {show(d, 'frozen')} -> {show(d, 'replayed')}"
              for d in diff.differences]
    return "\n".join(lines)


@click.command(context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION ITEM_ID")
@click.option("--plan", "plan_file", type=click.File("rb"), default=None,
              help="Plan JSON: default_effect and tools [{tool_name, effect}] ('-' for "
                   "stdin). Without it every tool call is stubbed.")
@click.option("--diff", "show_diff", is_flag=True,
              help="Print how the replayed run differs from the frozen case instead.")
@click.option("--against", "against_file", type=click.File("rb"), default=None,
              help="Diff the frozen case against the run in this file (a case object, or "
                   "the output of `cas replay --json`) instead of replaying.")
@json_option
@pass_ctx
def replay(ctx: Invocation, args: tuple[str, ...], plan_file, show_diff: bool,
           against_file) -> None:
    """Replay one case of an exact version in the sandbox (also DATASET@VERSION ITEM_ID).

    Nothing is invoked and nothing is written: read-only calls get their recorded answer, and
    calls with an effect get a marked stub."""
    from cas.evals import replay as replaying
    name, number, (item_id,) = split_version_args("replay", args, REPLAY_FORMS)
    if against_file is not None and plan_file is not None:  # before any file is read
        raise read_usage_error("replay", REPLAY_FORMS, "--plan does nothing with --against (the "
                               "file is diffed as it is)", reason="USAGE")
    plan_source = getattr(plan_file, "name", "stdin")
    plan = plan_file.read() if plan_file is not None else None
    if against_file is None and not show_diff:
        result = replaying.replay_item(ctx.repo(), name, number, item_id,
                                       replaying.parse_plan(plan, plan_source))
        ctx.emit(to_json(result), lambda: f"replayed {name}@{number} {item_id}\n"
                                          + _record_text(result.record))
        return
    diff = replaying.diff_item(
        ctx.repo(), name, number, item_id, plan,
        against_file.read() if against_file is not None else None, plan_source=plan_source,
        against_source=getattr(against_file, "name", "stdin"))
    ctx.emit(to_json(diff), lambda: _diff_text(diff))


@click.command()
@click.argument("dataset_name", metavar="DATASET")
@click.option("--confirm-token", required=True, help="The token a preview printed.")
@_cursor_option
@click.option("--limit", type=INTEGER, default=100, show_default=True,
              help="Changes (cases added or removed) per page, 1 to 10000.")
@json_option
@pass_ctx
def preview(ctx: Invocation, dataset_name: str, confirm_token: str, cursor, limit: int) -> None:
    """Show a staged proposal's preview again, a page of its changes at a time: the cases
    added and removed after --cursor (the previous page's next_cursor). Stages nothing."""
    p = ctx.repo().preview(dataset_name, confirm_token, after=cursor, limit=limit)
    more = [f"# more: --cursor {p['next_cursor']}"] if p["next_cursor"] else []
    ctx.emit(p, lambda: "\n".join([_preview_text(p, True), *more]))


EXAMPLES = {
    "promote": (
        Example("cas promote support-evals --file subjects-0512.json "
                "--idempotency-key promote-2026-05-12",
                "Stage the reviewed runs the file lists and preview the next version."),
        Example("cas promote support-evals --reviewed --tenant acme --since 2026-05-12 "
                "--idempotency-key promote-acme-0512",
                "Stage every acme run since 12 May that has an accepting review."),
        Example("cas promote support-evals --reviewed --metric dataset_eligibility "
                "--run r-0104 --run r-0105 --idempotency-key promote-r-0104",
                "Stage exactly these two runs (each must have an accepting judgment)."),
    ),
    "remove": (
        Example(f"cas remove support-evals {CASE} --idempotency-key remove-dup-0512",
                "Stage the removal of a case (its full id) and preview the next version."),
    ),
    "preview": (
        Example(f"cas preview support-evals --confirm-token {TOKEN} --cursor {CASE}",
                "A staged proposal's next page of changes (the cursor: next_cursor)."),
        Example(f"cas preview support-evals --confirm-token {TOKEN} --limit 1000 --json",
                "Its counts, digests and first 1000 changes, as JSON."),
    ),
    "seal": (
        Example(f'cas seal support-evals --confirm-token {TOKEN} -m "reviewed runs of 12 May"',
                "Seal the previewed proposal as version N+1; repeating it is a no-op."),
    ),
    "commit": (
        Example('cas commit support-golden --add golden.jsonl -m "first cut"',
                "Seal the first version of a direct dataset from a file of cases."),
        Example('cas commit support-golden --base 2 --add refusals.jsonl -m "refusal cases"',
                "Seal version 3: version 2 plus the cases in the file."),
        Example(f'cas commit support-evals --base 3 --remove {CASE} -m "duplicate"',
                "Seal version 4: version 3 without one case."),
        Example("cas commit support-golden --base 3 --add more.jsonl --retry",
                "If another writer sealed first, apply the change to the new head."),
    ),
    "show": (
        Example("cas show support-evals@2", "The record of version 2 and its state."),
        Example("cas show support-evals 2 --json", "The same as JSON (DATASET VERSION works too)."),
    ),
    "items": (
        Example("cas items support-evals@2 --limit 50",
                "The first 50 cases in id order, with their run, tenant and outcome."),
        Example(f"cas items support-evals@2 --cursor {CASE}",
                "The next page: the cases after that id (as `# more: --cursor` said)."),
    ),
    "case": (
        Example("cas case support-evals@2 b3:052f26e5",
                "Print a frozen case, named by a unique prefix of at least 8 hex digits."),
        Example("cas case support-evals@2 --run r-0104",
                "Print the case promoted from run r-0104."),
    ),
    "diff": (
        Example("cas diff support-evals 1 2", "The cases added and removed from version 1 to 2."),
        Example("cas diff support-evals@2 billing-evals@1 --limit 20",
                "Compare versions of two datasets, 20 changes a page."),
    ),
    "prove": (
        Example(f"cas prove support-evals@2 {CASE} > proof.json",
                "Save a proof that the case is in support-evals@2, checkable offline."),
    ),
    "verify-proof": (
        Example("cas verify-proof proof.json --root b3:9c1e...",
                "Check the proof against a content_digest; no repository needed."),
        Example(f"cas verify-proof proof.json --pin {PIN}",
                "Check it against the version a pin names (reads the repository)."),
    ),
    "log": (
        Example("cas log", "The whole repository's timeline, newest first."),
        Example("cas log support-evals --limit 20",
                "The 20 newest seals, retirements, scores ... of one dataset."),
    ),
    "export": (
        Example("cas export support-evals@2 --to jsonl > support-evals-2.jsonl",
                "Write an exact version as JSON Lines on stdout."),
        Example("cas export support-evals@2 --to parquet -o support-evals-2.parquet",
                "Write a Parquet file, atomically."),
        Example(f"cas export {PIN} --to hf -o hf/support-evals-2",
                "Check the pin first, then write a Hugging Face dataset directory."),
    ),
    "replay": (
        Example(f"cas replay support-evals@2 {CASE}",
                "Replay a case, every tool call stubbed; nothing is invoked or written."),
        Example(f"cas replay support-evals@2 {CASE} --plan plan.json --diff",
                "Replay it under a plan of tool effects; show what differs from the case."),
        Example(f"cas replay support-evals@2 {CASE} --against new-run.json",
                "Diff the frozen case against a run recorded since (no replay)."),
    ),
}
