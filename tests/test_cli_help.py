"""`cas --help` lists every command once, grouped by workflow (cli/main.py WORKFLOWS)."""

from __future__ import annotations

import re

from cas_cli.main import WORKFLOWS, cli


def test_help_groups_every_command_once_by_workflow(run):
    r = run("--help")
    assert r.exit_code == 0
    sections = re.findall(r"^([A-Z][A-Za-z ]+):\n((?:  \S.*\n?)+)", r.stdout, re.M)
    titles = [t for t, _ in sections if t not in ("Usage", "Options")]
    assert titles == [t for t, _ in WORKFLOWS]  # no "Other": every command has a workflow
    listed = [line.split()[0] for t, body in sections if t in titles
              for line in body.splitlines() if line.startswith("  ") and
              not line.startswith("   ")]
    assert sorted(listed) == sorted(cli.commands)
    assert len(listed) == len(set(listed))
