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


class CasGroup(click.Group):
    """Turns every CasError into one line on stderr (or a JSON error object) and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except Exception as exc:
            from cas.errors import CasError
            if not isinstance(exc, CasError):
                raise
            obj = ctx.find_object(Context)
            as_json = bool(obj and obj.as_json) or "--json" in sys.argv[1:]
            if as_json:
                click.echo(json.dumps({"error": exc.to_json()}, ensure_ascii=False, sort_keys=True),
                           err=True)
            else:
                click.echo(f"cas: error: {exc.message}", err=True)
            ctx.exit(EXIT_CODES.get(exc.code, 1))


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


def parse_ref(text: str) -> tuple[str, int]:
    """`DATASET@VERSION` -> (dataset, version). There is no `latest`: the number is required."""
    from cas.errors import InvalidArgument
    name, at, number = text.rpartition("@")
    if not at or not name or not number.isdigit() or int(number) < 1:
        raise InvalidArgument(f"{text!r} does not name a version; expected DATASET@VERSION with a "
                              "version number, e.g. demo@3", value=text)
    return name, int(number)


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
    if not number.isdigit() or int(number) < 1:
        raise read_usage_error(command, forms, f"{number!r} is not a version number")
    if len(rest) < len(names):
        raise read_usage_error(command, forms, "missing " + " ".join(names[len(rest):]),
                               reason="VERSION_REQUIRED" if rest_are_versions else "USAGE")
    if len(rest) > len(names):
        raise read_usage_error(command, forms, f"unexpected extra argument {rest[len(names)]!r}",
                               reason="USAGE")
    return name, int(number), rest


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
