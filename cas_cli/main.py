"""The root command: where each command is found, error rendering, the one table of exit codes."""

from __future__ import annotations

import importlib
import importlib.util
import json
from types import ModuleType
from typing import Any

import click

from .common import Invocation

# Exit codes by error code (documented in docs/cli.md). Usage errors from click exit 2 too.
EXIT_CODES = {
    "INVALID_ARGUMENT": 2,
    "NOT_FOUND": 3,
    "ALREADY_EXISTS": 4,
    "FAILED_PRECONDITION": 5,
    "ABORTED": 6,
    "DATA_LOSS": 7,
    "UNAVAILABLE": 8,
    "PERMISSION_DENIED": 9,  # (10 and up: verdicts: suites/results.py, compare.py; evalset)
    "INTERNAL": 1,
}


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


# `cas --help` lists the commands by workflow, in this order (a command not named here is
# listed under "Other", so a new command is never hidden). The table also says where each
# command is defined, so that a process imports only the module of the command it runs: a group
# `cas NAME` is cas_cli/NAME.py (`-` read as `_`), any other command is in the module named
# after its section ("Datasets and versions": cas_cli/datasets_and_versions.py).
WORKFLOWS = (
    ("Runs and reviews", ("runs", "review", "status", "config", "serve")),
    ("Datasets and versions", ("dataset", "promote", "remove", "preview", "seal", "commit",
                               "show", "items", "case", "diff", "prove", "verify-proof", "log",
                               "export", "replay", "settings", "lock")),
    ("Scores and experiments", ("pin", "pin-verify", "score", "experiment", "suite", "cassette",
                                "evalset")),
    ("Erasure and retirement", ("erase", "erasures", "retire", "renew", "version")),
    ("Repository", ("init", "fsck", "gc", "mirror", "cat")),
)


def section_module(title: str) -> str:
    """The module of a section's commands that are not groups: "Runs and reviews" ->
    runs_and_reviews."""
    return title.lower().replace(" ", "_")


SECTION_MODULE = {name: section_module(title) for title, names in WORKFLOWS for name in names}


def defined_commands(module: ModuleType) -> list[click.Command]:
    """The top-level commands a module defines: its click commands that none of its groups
    holds (a command module imports no other module's commands)."""
    commands = [v for v in vars(module).values() if isinstance(v, click.Command)]
    held = {id(sub) for group in commands if isinstance(group, click.Group)
            for sub in group.commands.values()}
    return [c for c in commands if id(c) not in held]


class CasGroup(click.Group):
    """Turns every CasError into one line on stderr (or a JSON error object) and an exit code;
    with --json, click's own usage errors become the same JSON error object (exit 2)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: set[str] = set()  # the command modules imported

    def load(self, module: str) -> None:
        """Register the commands a module of this package defines, with their examples (none
        when there is no such module)."""
        if module in self._loaded or not module.isidentifier():
            return
        self._loaded.add(module)
        if importlib.util.find_spec(f"{__package__}.{module}") is None:
            return
        from . import examples
        mod = importlib.import_module(f"{__package__}.{module}")
        for command in defined_commands(mod):
            if not isinstance(command, CasGroup):  # a root (this module's `cli`) is no subcommand
                self.add_command(command)
                examples.attach(command, getattr(mod, "EXAMPLES", {}), command.name)

    def load_all(self) -> None:
        import pkgutil
        for info in pkgutil.iter_modules(importlib.import_module(__package__).__path__):
            self.load(info.name)

    def get_command(self, ctx: click.Context, cmd_name: str):
        # a group's own module, else its section's; a command in neither is looked for in all
        for module in (cmd_name.replace("-", "_"), SECTION_MODULE.get(cmd_name)):
            if module and cmd_name not in self.commands:
                self.load(module)
        if cmd_name not in self.commands:
            self.load_all()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self.load_all()
        return super().list_commands(ctx)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.load_all()
        listed = set()
        for title, names in WORKFLOWS + (("Other", tuple(sorted(self.commands))),):
            rows = [(n, self.commands[n].get_short_help_str(formatter.width - 20))
                    for n in names if n in self.commands and n not in listed
                    and not self.commands[n].hidden]
            listed.update(n for n, _ in rows)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

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
            # a refusal (EACCES, EPERM) is no outage: retrying will not help, permissions will
            code = "PERMISSION_DENIED" if isinstance(exc, PermissionError) else "UNAVAILABLE"
            self._fail(ctx, {"code": code, "reason": None, "message": message}, message)

    def _as_json(self, ctx: click.Context) -> bool:
        obj = ctx.find_object(Invocation)
        return bool(obj and obj.as_json) or _json_requested(ctx.meta.get("cas.argv", []))

    def _fail(self, ctx: click.Context, error: dict[str, Any], message: str) -> None:
        if self._as_json(ctx):
            _fail_json(error)
        click.echo(f"cas: error: {message}", err=True)
        ctx.exit(EXIT_CODES.get(error["code"], 1))


@click.group(cls=CasGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--repo", "repo_location", metavar="LOCATION", default=None,
              help="Repository: a directory holding .cas, or s3://BUCKET/PREFIX (default: "
                   "CAS_REPO, else the nearest .cas in this directory or its parents).")
@click.option("--json", "as_json", is_flag=True, help="Print results (and errors) as JSON.")
@click.version_option(package_name="cas-datasets", prog_name="cas")
@click.pass_context
def cli(ctx: click.Context, repo_location: str | None, as_json: bool) -> None:
    """cas: content-addressed, versioned evaluation datasets."""
    obj = ctx.ensure_object(Invocation)
    obj.repo_location = repo_location
    obj.as_json = obj.as_json or as_json


def main() -> None:
    cli(obj=Invocation(None, False), prog_name="cas")
