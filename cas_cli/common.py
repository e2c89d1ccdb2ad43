"""What the command modules share: an invocation's state, options, parsers and renderings."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import click


class Invocation:
    """One `cas` invocation's state, the object click passes to every command: where the
    repository is (--repo), whether to print JSON (--json), and the repository once opened."""

    def __init__(self, repo_location: str | None = None, as_json: bool = False) -> None:
        self.repo_location = repo_location
        self.as_json = as_json
        self._repo = None
        self.lock_path: str | None = None   # --lock PATH (else the nearest cas.lock)
        self.resolved = None                # the cas.lock entry a dataset name resolved to

    def locked(self, name: str):
        """Resolve a dataset name given without a version through the lock file (`--lock`,
        else the nearest cas.lock): say so on stderr (`NAME -> NAME@N (cas.lock)`), open the
        repository its entry names (unless --repo or CAS_REPO names one), and refuse a pin
        whose digest no longer matches. Refused (NOT_LOCKED) when the lock holds no entry."""
        from cas.interop import lockfile
        resolved = lockfile.resolve(name, self.lock_path)
        if resolved.repository is not None and self.repo_location is None \
                and self._repo is None and not os.environ.get("CAS_REPO"):
            self.repo_location = resolved.repository
        self.repo().resolve_pin(resolved.pin)
        click.echo(resolved.line(), err=True)
        self.resolved = resolved
        return resolved

    def locked_args(self, args: tuple[str, ...], command: str, forms: tuple[str, ...],
                    rest: int = 0, problem: str | None = None) -> tuple[str, ...]:
        """`DATASET REST...` with the version left out (exactly `rest` version words after the
        name) -> `DATASET@N REST...`, N from the lock; any other arguments as they are."""
        if len(args) == rest + 1 and args[0] and "@" not in args[0] \
                and not args[0].startswith("-") and all(a.isdigit() for a in args[1:]):
            resolved = self.locked_or_refused(args[0], command, forms, problem)
            return (f"{args[0]}@{resolved.version}", *args[1:])
        return args

    def locked_or_refused(self, name: str, command: str, forms: tuple[str, ...],
                          problem: str | None = None):
        """`locked(name)`; a name the lock does not hold is the usage error of an exact read
        (INVALID_ARGUMENT, reason NOT_LOCKED) naming `cas lock add` and the accepted forms."""
        from cas.errors import InvalidArgument
        try:
            return self.locked(name)
        except InvalidArgument as exc:
            if exc.reason != "NOT_LOCKED":
                raise
            where = exc.fields.get("lock")
            lock = (f"{where} does not lock {name!r}" if where else
                    f"no cas.lock (here or in a parent directory) locks {name!r}")
            problem = problem or f"no version given for dataset {name!r}"
            base = read_usage_error(command, forms,
                                    f"{problem}, and {lock} (`cas lock add {name}@N`)")
            raise InvalidArgument(base.message, reason="NOT_LOCKED", dataset=name,
                                  usage=base.fields["usage"]) from None

    def resolved_json(self) -> dict[str, Any]:
        """`{"resolved": {...}}` when a name resolved through the lock, else nothing."""
        return {"resolved": self.resolved.to_json()} if self.resolved is not None else {}

    def repo(self):
        """Open the repository named by --repo / CAS_REPO, or the nearest `.cas` upwards."""
        if self._repo is None:
            from cas.repo import opening
            location = self.repo_location or os.environ.get("CAS_REPO") or opening.find(".")
            self._repo = opening.open(location)
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

pass_ctx = click.make_pass_decorator(Invocation)


def json_option(f):
    """`--json` on every command, equivalent to the root `cas --json`."""
    def set_json(ctx: click.Context, _param, value: bool) -> None:
        if value:
            ctx.ensure_object(Invocation).as_json = True
    return click.option("--json", "as_json", is_flag=True, expose_value=False, is_eager=True,
                        callback=set_json, help="Print the result as JSON.")(f)


def lock_option(f):
    """`--lock PATH`: the lock file a dataset name without a version resolves through (default:
    the nearest cas.lock in this directory or its parents)."""
    def set_lock(ctx: click.Context, _param, value: str | None) -> None:
        if value is not None:
            ctx.ensure_object(Invocation).lock_path = value
    return click.option("--lock", "lock_path", default=None, metavar="PATH", expose_value=False,
                        is_eager=True, callback=set_lock,
                        help="The lock file (default: the nearest cas.lock).")(f)


def version_number(text: str, minimum: int = 1) -> int | None:
    """The version number a command-line word names, or None: ASCII digits only (`3`, never
    `²`, `١` or `１`, which `str.isdigit` accepts), from `minimum` to the largest a version can
    have (10 digits)."""
    from cas.format.version_names import MAX_VERSION
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
VERSION_FORMS = ("DATASET VERSION", "DATASET@VERSION")  # the two spellings of a version


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


class Seconds(click.ParamType):
    """A number of seconds (`--timeout 30`, `--grace 0.5`), in ASCII digits."""

    name = "seconds"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return value
        text = value.strip()
        if not (text.isascii() and re.fullmatch(r"[0-9]+(\.[0-9]+)?", text)):
            self.fail(f"{value!r} is not a number of seconds (e.g. 30 or 0.5)", param, ctx)
        return float(text)


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


def version_name(command: str, forms: tuple[str, ...], text: str, dataset: str | None = None,
                 problem: str | None = None) -> tuple[str, int, str | None]:
    """`NAME@N` (or, with `dataset`, a bare `N` of that dataset) read by the one parser of
    version names; what it refuses is the usage error of an exact read (saying `problem`, else
    the parser's)."""
    from cas.errors import InvalidArgument
    from cas.format.version_names import parse_version_name
    try:
        return parse_version_name(text, dataset=dataset, pin=False)
    except InvalidArgument as exc:
        if exc.reason != "INVALID_VERSION_NAME":
            raise  # a dataset name the dataset name rule refuses, as any command does
        raise read_usage_error(command, forms, problem or exc.fields["problem"]) from None


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
        name, version, _ = version_name(command, forms, first)
        rest = list(args[1:])
    elif len(args) < 2:
        raise read_usage_error(command, forms, f"no version given for dataset {first!r}")
    else:
        name, number, rest = first, args[1], list(args[2:])
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


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """Columns left-aligned, two spaces apart, trailing spaces trimmed."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in [header, *rows])


SINCE_HELP = ("Only runs started at or after TIME, compared as times: 2025-05-12 (midnight "
              "UTC), 2025-05-12T20:27[:36[.5]] (UTC), or with an offset (Z, +02:00, -0400). "
              "A run whose started_at is not a time never matches (docs/runs.md).")


def next_cursor(cursor: Any) -> str | None:
    """The one paging key of every listing's JSON (docs/cli.md, "Paging"): `next_cursor`, on
    every page, the text to pass back as `--cursor`, null on the last page."""
    return None if cursor is None else str(cursor)


def run_page_options(f):
    """The options of a page of runs (`cas runs list`, `cas review queue`)."""
    f = click.option("--cursor", default=None, metavar="RUN_ID",
                     help="Continue after this run (the previous page's next_cursor).")(f)
    f = click.option("--limit", type=INTEGER, default=100, show_default=True,
                     help="Runs per page, 1 to 500.")(f)
    f = click.option("--since", default=None, metavar="TIME", help=SINCE_HELP)(f)
    return click.option("--tenant", default=None, help="Only runs of this tenant.")(f)


def emit_runs_page(ctx: Invocation, page, empty: str) -> None:
    """A page of run summaries: a table (or `empty`), then the cursor of the next page."""
    rows = [(s["run_id"], s["tenant"], s["started_at"] or "-", str(s["steps"]),
             str(s["tool_calls"]), (s["first_user_message"] or "-").replace("\n", " "))
            for s in page.runs]
    header = ("RUN", "TENANT", "STARTED", "STEPS", "TOOLS", "FIRST USER MESSAGE")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
    # runs `--since` could not place in time are named, never dropped silently (docs/runs.md)
    undated = [("# not placed in time (started_at absent or not a time): "
                f"{', '.join(page.undated)}")] if page.undated else []

    def human() -> str:
        if not rows:
            return "\n".join([empty, *undated])
        lines = ["  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5]
                 for r in [header, *rows]] + undated
        if page.next_cursor:
            lines.append(f"# more: --cursor {page.next_cursor}")
        return "\n".join(lines)
    ctx.emit({"runs": [s["run_id"] for s in page.runs], "summaries": page.runs,
              "undated": list(page.undated), "next_cursor": next_cursor(page.next_cursor)},
             human)


def policy_source(policy) -> str:
    """Where a dataset's content policy comes from, in words."""
    if policy.source is None:
        return "the repository default, never set"
    kind = "its own override" if policy.overridden else "the repository default"
    return f"{kind}, settings revision {policy.source.revision}"


def plural(count: int, noun: str) -> str:
    """`1 case`, `2 cases`, `0 cases`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


SUMMARY_OVER = 50   # items of a preview or confirmation beyond which human output summarises
SUMMARY_SHOWN = 10  # lines a summary shows


def summarised(lines: list[str], counts: str, show_all: bool, command: str,
               json_lists_all: bool = True) -> list[str]:
    """The human lines of a preview or confirmation of many items: more than SUMMARY_OVER of
    them print `counts` and the first SUMMARY_SHOWN lines, then how to see all (the command
    again with --list; --json is complete, unless `json_lists_all` is false: a paged one)."""
    if show_all or len(lines) <= SUMMARY_OVER:
        return lines
    return [counts, *lines[:SUMMARY_SHOWN],
            f"... and {len(lines) - SUMMARY_SHOWN} more: add --list to {command} to see all"
            + (" (--json always lists all)" if json_lists_all else "")]


def list_option(f):
    """`--list`: print every item of a large preview or confirmation (see `summarised`)."""
    return click.option("--list", "show_all", is_flag=True,
                        help=f"List every item even when there are more than {SUMMARY_OVER} "
                             "(by default: counts and the first "
                             f"{SUMMARY_SHOWN}).")(f)


def yes_option(f):
    """`--yes`: preview and confirm in one call, still printing the preview."""
    return click.option("--yes", "-y", "yes", is_flag=True,
                        help="Preview and confirm in one call (the preview is still "
                             "printed).")(f)


def erasure_text(e, verb: str) -> str:
    """One completed erasure in a line (`cas erase`, `cas erasures list`)."""
    retired = ", ".join(f"{r.dataset}@{r.number}" for r in e.retired) or "none"
    return (f"{verb} {e.person} at {e.erased_at}: {plural(len(e.cases), 'case')}, "
            f"{plural(len(e.runs), 'run')}, {plural(len(e.reviews), 'review')}; "
            f"{plural(e.objects_deleted, 'object')} deleted from "
            f"{plural(e.packs_rewritten, 'pack')}; retired: {retired}")


class Example(NamedTuple):
    """One example in a command's --help (each command module's EXAMPLES, by command path)."""

    command: str  # one shell command line (wrapped for display by cas_cli/examples.py)
    why: str      # what it does, one line


TOKEN = "ct-5d41402abc4b2a76b9719d911017c592"  # as a preview prints it: ct- and 32 hex digits
PIN = '"support-evals@2#b3:9c1e..."'           # a pin as `cas pin` prints it (digest shortened)
CASE = "b3:052f26e5..."                        # a full case id as `cas items` prints it (shortened)
