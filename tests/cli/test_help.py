"""`cas --help` lists every command once, grouped by workflow (cli/main.py WORKFLOWS)."""

from __future__ import annotations

import re

import importlib

from cas_cli.main import MODULES, WORKFLOWS, cli


def test_help_groups_every_command_once_by_workflow(run):
    r = run("--help")
    assert r.exit_code == 0
    sections = re.findall(r"^([A-Z][A-Za-z ]+):\n((?:  \S.*\n?)+)", r.stdout, re.M)
    titles = [t for t, _ in sections if t not in ("Usage", "Options")]
    assert titles == [t for t, _ in WORKFLOWS]  # no "Other": every command has a workflow
    listed = [line.split()[0] for t, body in sections if t in titles
              for line in body.splitlines() if line.startswith("  ") and
              not line.startswith("   ")]
    cli.load_all()
    assert sorted(listed) == sorted(cli.commands)
    assert len(listed) == len(set(listed))


def test_the_table_of_command_modules_names_what_each_module_defines():
    """cli/main.py imports a command's module when the command is asked for: its table must
    name exactly the commands each module lists (a new command missing from it would not be
    found; one named in the wrong module would load the wrong one)."""
    for module, names in MODULES.items():
        defined = importlib.import_module(f"cas_cli.{module}").COMMANDS
        assert tuple(c.name for c in defined) == names, module
