"""What the command modules share: the command context, the `--json` option, and the parsers
of version numbers and exact-read arguments."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click


class Context:
    def __init__(self, repo_location: str | None = None, as_json: bool = False) -> None:
        self.repo_location = repo_location
        self.as_json = as_json
        self._repo = None

    def repo(self):
        """Open the repository named by --repo / CAS_REPO, or the nearest `.cas` upwards."""
        if self._repo is None:
            import cas
            location = self.repo_location or os.environ.get("CAS_REPO") or cas.find(".")
            self._repo = cas.open(location)
        return self._repo

    def emit(self, data: Any, human: Callable[[], str] | str | None = None) -> None:
        if self.as_json:
            click.echo(json.dumps(data, ensure_ascii=False, sort_keys=True))
        elif human is not None:
            text = human() if callable(human) else human
            if text:
                click.echo(text)

    def progress(self, stage: str, done: int, total: int) -> None:
        """A progress bar on stderr, only when stderr is a terminal (also with --json: stdout
        stays one JSON document); `progress("", 0, 0)` ends it."""
        if not sys.stderr.isatty():
            return
        if not stage:
            click.echo("\r\x1b[K", nl=False, err=True)  # clear the line the bar used
            return
        if total:
            filled = min(BAR, BAR * done // total)
            bar = f"[{'#' * filled}{'.' * (BAR - filled)}] {done}/{total}"
        else:
            bar = str(done)
        click.echo(f"\r{stage} {bar}\x1b[K", nl=False, err=True)


BAR = 30  # characters of the progress bar

pass_ctx = click.make_pass_decorator(Context)


def json_option(f):
    """`--json` on every command, equivalent to the root `cas --json`."""
    def set_json(ctx: click.Context, _param, value: bool) -> None:
        if value:
            ctx.ensure_object(Context).as_json = True
    return click.option("--json", "as_json", is_flag=True, expose_value=False, is_eager=True,
                        callback=set_json, help="Print the result as JSON.")(f)


def version_number(text: str, minimum: int = 1) -> int | None:
    """The version number a command-line word names, or None: ASCII digits only (`3`, never
    `²`, `١` or `１`, which `str.isdigit` accepts), from `minimum` to the largest a version can
    have (10 digits)."""
    from cas.repo.checks import MAX_VERSION
    if not (text and text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(MAX_VERSION)):
        return None
    number = int(digits)
    return number if minimum <= number <= MAX_VERSION else None


def refuse_unknown_options(args: tuple[str, ...]) -> None:
    """Commands that take a version as an argument let click pass on words it does not know
    as options, so that `-1` reaches them as a (refused) version, not as an unknown option;
    any other such word is refused here as click would (a usage error, exit 2)."""
    ctx = click.get_current_context()
    for word in args:
        if word.startswith("-") and len(word) > 1 and not word[1:].isdigit():
            import difflib
            name = word.split("=", 1)[0]
            known = [o for p in ctx.command.params for o in p.opts if o.startswith("--")]
            if name in known:  # only after `--` can a known option be an argument
                continue
            raise click.NoSuchOption(name, possibilities=difflib.get_close_matches(name, known),
                                     ctx=ctx)


# Passed to every command whose arguments hold a version number (see refuse_unknown_options).
VERSION_ARGS = {"ignore_unknown_options": True}


class VersionOption(click.ParamType):
    """An option whose value is a version number (`--base`, `--before`): ASCII digits only;
    anything else is refused as a version is (INVALID_ARGUMENT, reason VERSION_REQUIRED)."""

    name = "version"

    def __init__(self, minimum: int = 1) -> None:
        self.minimum = minimum

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        number = version_number(value, self.minimum)
        if number is None:
            from cas.errors import InvalidArgument
            option = param.opts[0] if param is not None else "the option"
            raise InvalidArgument(f"{option} {value!r} is not a version number (ASCII digits, "
                                  "e.g. 3)", reason="VERSION_REQUIRED", value=value)
        return number


class Integer(click.ParamType):
    """An integer option (`--limit`) in ASCII digits, with an optional sign: click's INT would
    read `１` (a fullwidth digit) as 1. The range is the library's to check."""

    name = "integer"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = value.strip()
        body = text[1:] if text[:1] in "+-" else text
        if not (body.isascii() and body.isdigit() and len(body) <= 18):
            self.fail(f"{value!r} is not an integer (ASCII digits, e.g. 100)", param, ctx)
        return int(text)


INTEGER = Integer()


def read_usage_error(command: str, forms: tuple[str, ...], problem: str,
                     reason: str = "VERSION_REQUIRED"):
    """The usage error (INVALID_ARGUMENT, exit 2) of an exact read: names the problem, says
    there is no latest, and shows the accepted forms."""
    from cas.errors import InvalidArgument
    usage = [f"cas {command} {form}" for form in forms]
    why = ('; every read names an exact version, there is no "latest"'
           if reason == "VERSION_REQUIRED" else "")
    return InvalidArgument(f"{problem}{why} (use: {' or '.join(usage)})", reason=reason,
                           usage=usage)


def split_version_args(command: str, args: tuple[str, ...], forms: tuple[str, str],
                       rest_are_versions: bool = False) -> tuple[str, int, list[str]]:
    """`DATASET VERSION REST...` or `DATASET@VERSION REST...` -> (dataset, version, rest).

    `forms` are the two spellings, e.g. ("DATASET VERSION CASE_ID", "DATASET@VERSION CASE_ID");
    REST must be exactly the names after the version in the first one."""
    names = forms[0].split()[2:]
    refuse_unknown_options(args)
    if not args:
        raise read_usage_error(command, forms, "missing DATASET and VERSION")
    first = args[0]
    if "@" in first:
        name, _, number = first.rpartition("@")
        rest = list(args[1:])
    elif len(args) < 2:
        raise read_usage_error(command, forms, f"no version given for dataset {first!r}")
    else:
        name, number, rest = first, args[1], list(args[2:])
    if not name:
        raise read_usage_error(command, forms, f"{first!r} names no dataset")
    version = version_number(number)
    if version is None:
        raise read_usage_error(command, forms, f"{number!r} is not a version number")
    if len(rest) < len(names):
        raise read_usage_error(command, forms, "missing " + " ".join(names[len(rest):]),
                               reason="VERSION_REQUIRED" if rest_are_versions else "USAGE")
    if len(rest) > len(names):
        raise read_usage_error(command, forms, f"unexpected extra argument {rest[len(names)]!r}",
                               reason="USAGE")
    return name, version, rest


def version_summary(repo, record, state: str | None = None) -> dict[str, Any]:
    """The `version` object of read replies: which exact set this is, and its state (read
    unless the caller's read already established it)."""
    return {"dataset": record.dataset, "number": record.number, "item_count": record.item_count,
            "content_digest": record.content_digest,
            "state": state or repo.version_state(record.dataset, record.number)}


def to_json(value: Any) -> Any:
    import msgspec
    return msgspec.to_builtins(value)


def cell(value, width: int = 0) -> str:
    """A value as one table cell: `-` for none, a string as it is when printable (else as
    JSON, so a newline cannot break the table), an outcome object by its `status` when it has
    one, anything else as compact JSON; at most 40 characters."""
    if value is None:
        return "-"
    if isinstance(value, dict) and isinstance(value.get("status"), str):
        value = value["status"]
    if isinstance(value, str) and value.isprintable() and value:
        text = value
    else:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= 40 else text[:39] + "\u2026"


def case_table(rows: list[tuple[str, object]], head: str = "") -> list[str]:
    """Aligned lines `[SIGN ]CASE_ID  RUN  TENANT  OUTCOME` under a header, for (sign,
    CaseSummary) rows; nothing for no rows."""
    if not rows:
        return []
    cells = [(sign + c.case_id, cell(c.run_id), cell(c.tenant), cell(c.outcome))
             for sign, c in rows]
    header = (head + "CASE", "RUN", "TENANT", "OUTCOME")
    widths = [max(len(r[k]) for r in cells + [header]) for k in range(3)]
    return ["  ".join(r[k].ljust(widths[k]) if k < 3 else r[k] for k in range(4)).rstrip()
            for r in [header] + cells]


def case_json(c) -> dict:
    return {"id": c.case_id, "run_id": c.run_id, "tenant": c.tenant, "outcome": c.outcome}
