"""Root command group, output rendering and the one table of exit codes."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

import click

# Exit codes by error code (documented in docs/cli.md). Usage errors from click exit 2 too.
EXIT_CODES = {
    "INVALID_ARGUMENT": 2,
    "NOT_FOUND": 3,
    "ALREADY_EXISTS": 4,
    "FAILED_PRECONDITION": 5,
    "ABORTED": 6,
    "DATA_LOSS": 7,
    "UNAVAILABLE": 8,
    "INTERNAL": 1,
}


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
        if not self.as_json and sys.stderr.isatty():
            of = f"/{total}" if total else ""
            click.echo(f"\r{stage}: {done}{of}   ", nl=False, err=True)


def _json_requested(argv: list[str]) -> bool:
    """Whether `--json` is on the command line (before any `--`): known before it is parsed,
    so that a usage error (an unknown command, a bad option value) is JSON too."""
    words = argv[:argv.index("--")] if "--" in argv else argv
    return "--json" in words


def _usage_error_json(exc: click.ClickException) -> dict[str, Any]:
    """The framework's own refusals (unknown command or option, bad option value, missing
    argument, unreadable file) as the documented error object: INVALID_ARGUMENT, USAGE."""
    message = exc.format_message()
    if "\n" in message or message == "Missing command.":  # a group given no command
        # (click shows its whole help for some): one line naming where to look
        where = getattr(exc, "ctx", None)
        message = f"missing command (see: {where.command_path if where else 'cas'} --help)"
    return {"code": "INVALID_ARGUMENT", "reason": "USAGE", "message": message}


def _fail_json(error: dict[str, Any]) -> None:
    click.echo(json.dumps({"error": error}, ensure_ascii=False, sort_keys=True), err=True)
    raise click.exceptions.Exit(EXIT_CODES.get(error["code"], 1))


class CasGroup(click.Group):
    """Turns every CasError into one line on stderr (or a JSON error object) and an exit code;
    with --json, click's own usage errors become the same JSON error object (exit 2)."""

    def make_context(self, info_name, args, parent=None, **extra) -> click.Context:
        argv = list(args)
        try:
            ctx = super().make_context(info_name, args, parent=parent, **extra)
        except click.ClickException as exc:  # e.g. `cas --json --bogus`
            if _json_requested(argv):
                _fail_json(_usage_error_json(exc))
            raise
        ctx.meta.setdefault("cas.argv", argv)
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        from cas.errors import CasError
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit:
            raise
        except click.ClickException as exc:
            if self._as_json(ctx):
                _fail_json(_usage_error_json(exc))
            raise
        except CasError as exc:
            self._fail(ctx, exc.to_json(), exc.message)
        except OSError as exc:  # the storage failed (disk full, read-only, a path too long)
            where = f": {exc.filename}" if exc.filename else ""
            message = f"{exc.strerror or exc}{where}"
            self._fail(ctx, {"code": "UNAVAILABLE", "reason": None, "message": message},
                       message)

    def _as_json(self, ctx: click.Context) -> bool:
        obj = ctx.find_object(Context)
        return bool(obj and obj.as_json) or _json_requested(ctx.meta.get("cas.argv", []))

    def _fail(self, ctx: click.Context, error: dict[str, Any], message: str) -> None:
        if self._as_json(ctx):
            _fail_json(error)
        click.echo(f"cas: error: {message}", err=True)
        ctx.exit(EXIT_CODES.get(error["code"], 1))


def json_option(f):
    """`--json` on every command, equivalent to the root `cas --json`."""
    def set_json(ctx: click.Context, _param, value: bool) -> None:
        if value:
            ctx.ensure_object(Context).as_json = True
    return click.option("--json", "as_json", is_flag=True, expose_value=False, is_eager=True,
                        callback=set_json, help="Print the result as JSON.")(f)


@click.group(cls=CasGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--repo", "repo_location", metavar="LOCATION", default=None,
              help="Repository: a directory holding .cas, or s3://BUCKET/PREFIX (default: "
                   "CAS_REPO, else the nearest .cas in this directory or its parents).")
@click.option("--json", "as_json", is_flag=True, help="Print results (and errors) as JSON.")
@click.version_option(package_name="cas-datasets", prog_name="cas")
@click.pass_context
def cli(ctx: click.Context, repo_location: str | None, as_json: bool) -> None:
    """cas: content-addressed, versioned evaluation datasets."""
    obj = ctx.ensure_object(Context)
    obj.repo_location = repo_location
    obj.as_json = obj.as_json or as_json


def main() -> None:
    cli(obj=Context(None, False), prog_name="cas")


def version_number(text: str, minimum: int = 1) -> int | None:
    """The version number a command-line word names, or None: ASCII digits only (`3`, never
    `²`, `١` or `１`, which `str.isdigit` accepts), from `minimum` to the largest a version can
    have (10 digits)."""
    from cas.repository import MAX_VERSION
    if not (text and text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(MAX_VERSION)):
        return None
    number = int(digits)
    return number if minimum <= number <= MAX_VERSION else None


def parse_ref(text: str) -> tuple[str, int]:
    """`DATASET@VERSION` -> (dataset, version). There is no `latest`: the number is required."""
    from cas.errors import InvalidArgument
    name, at, number = text.rpartition("@")
    version = version_number(number) if at and name else None
    if version is None:
        raise InvalidArgument(f"{text!r} does not name a version; expected DATASET@VERSION with a "
                              "version number, e.g. demo@3", reason="VERSION_REQUIRED",
                              value=text)
    return name, version


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


def version_summary(repo, record) -> dict[str, Any]:
    """The `version` object of read replies: which exact set this is, and its state."""
    return {"dataset": record.dataset, "number": record.number, "item_count": record.item_count,
            "content_digest": record.content_digest,
            "state": repo.version_state(record.dataset, record.number)}


def to_json(value: Any) -> Any:
    import msgspec
    return msgspec.to_builtins(value)


from . import commands_repo, commands_dataset, commands_version  # noqa: E402,F401
from . import commands_promote, commands_runs  # noqa: E402,F401
from . import commands_scores, commands_erasure  # noqa: E402,F401
from . import commands_replay  # noqa: E402,F401
