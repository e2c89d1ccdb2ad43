"""Root command group, error rendering and the one table of exit codes."""

from __future__ import annotations

import json
from typing import Any

import click

from .common import Context

# Where each top-level command is defined (its module's COMMANDS): a module is imported when
# one of its commands is first asked for, so a command pays for its own module, not for all
# fifteen (about 8 ms of every process). tests/test_cli_help.py checks this table.
MODULES = {
    "commands_repo": ("init", "fsck", "cat", "mirror"),
    "commands_dataset": ("dataset",),
    "commands_version": ("commit", "show", "items", "case", "diff", "prove", "verify-proof"),
    "commands_promote": ("promote", "remove", "seal"),
    "commands_runs": ("runs", "review", "config", "settings"),
    "commands_scores": ("pin", "pin-verify", "score", "experiment", "version"),
    "commands_erasure": ("retire", "erase", "erasures", "gc"),
    "commands_replay": ("replay",),
    "commands_export": ("export",),
    "commands_log": ("log", "status"),
    "commands_serve": ("serve",),
    "commands_suite": ("suite",),
    "commands_cassette": ("cassette",),
    "commands_evalset": ("evalset",),
}
EXTENDS = {"commands_suite": ("commands_suite_run",)}  # modules adding to another's group
MODULE_OF = {name: module for module, names in MODULES.items() for name in names}

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
# listed under "Other", so a new command is never hidden).
WORKFLOWS = (
    ("Runs and reviews", ("runs", "review", "status", "config", "serve")),
    ("Datasets and versions", ("dataset", "promote", "remove", "seal", "commit", "show",
                               "items", "case", "diff", "prove", "verify-proof", "log",
                               "export", "replay", "settings")),
    ("Scores and experiments", ("pin", "pin-verify", "score", "experiment", "suite", "cassette",
                                "evalset")),
    ("Erasure and retirement", ("erase", "erasures", "retire", "version")),
    ("Repository", ("init", "fsck", "gc", "mirror", "cat")),
)


class CasGroup(click.Group):
    """Turns every CasError into one line on stderr (or a JSON error object) and an exit code;
    with --json, click's own usage errors become the same JSON error object (exit 2)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: set[str] = set()  # the command modules imported

    def load(self, module: str) -> None:
        """Register the commands of one command module (and of those extending its groups),
        with their examples."""
        import importlib
        if module in self._loaded:
            return
        self._loaded.add(module)
        mod = importlib.import_module(f"{__package__}.{module}")
        for extra in EXTENDS.get(module, ()):
            importlib.import_module(f"{__package__}.{extra}")
        for command in mod.COMMANDS:
            self.add_command(command)
        from . import examples
        examples.attach(self)  # every command's --help ends with examples (cli/examples.py)

    def load_all(self) -> None:
        for module in MODULES:
            self.load(module)

    def get_command(self, ctx: click.Context, cmd_name: str):
        if cmd_name in MODULE_OF:
            self.load(MODULE_OF[cmd_name])
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
