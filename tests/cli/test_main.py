"""The root command: `cas --help` by workflow, each command found in its own module, the
framework's usage errors as JSON errors, and progress on stderr only on a terminal."""

import importlib
import importlib.util
import json
import os
import pty
import re
import subprocess
import sys

import click
import pytest

import cas as cas_api
from cas_cli import main
from cas_cli.main import WORKFLOWS, cli
from support import ROOT
from support.cli import commit_example
from support.lifecycle import jsonl, run_obj

TERMINAL = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


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


@pytest.mark.parametrize("name", [n for _, names in WORKFLOWS for n in names])
def test_each_command_is_in_its_group_module_or_its_section_module(name):
    """A group `cas NAME` is cas_cli/NAME.py, any other command the module of its section
    in WORKFLOWS: the module the rule names defines the command, and no other module does."""
    module = importlib.import_module(f"cas_cli.{main.SECTION_MODULE[name]}")
    if importlib.util.find_spec(f"cas_cli.{name.replace('-', '_')}") is not None:
        module = importlib.import_module(f"cas_cli.{name.replace('-', '_')}")
    assert name in [c.name for c in main.defined_commands(module)]
    cli.load_all()
    defined_in = [m for m in sorted(sys.modules) if m.startswith("cas_cli.")
                  and name in [c.name for c in main.defined_commands(sys.modules[m])
                               if not isinstance(c, main.CasGroup)]]
    assert defined_in == [module.__name__]


def command_modules_loaded(*args: str) -> list[str]:
    """The command modules a `cas ARGS` process imported."""
    code = ("import sys\nfrom cas_cli.main import main\n"
            f"sys.argv = ['cas', *{list(args)!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('cas_cli.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return [m for m in eval(out.stdout.splitlines()[-1])
            if m not in ("cas_cli.main", "cas_cli.common", "cas_cli.examples")]


def test_a_command_imports_only_its_own_module():
    assert command_modules_loaded("init", "--help") == ["cas_cli.repository"]
    assert command_modules_loaded("suite", "run", "--help") == ["cas_cli.suite"]
    assert command_modules_loaded("pin-verify", "--help") == ["cas_cli.scores_and_experiments"]


def test_a_command_no_workflow_names_is_found_and_listed_under_other(monkeypatch):
    """A new command missing from WORKFLOWS is still found (every module is looked in) and
    still listed, under "Other"."""
    monkeypatch.setattr(main, "WORKFLOWS", tuple(
        (title, tuple(n for n in names if n != "pin")) for title, names in WORKFLOWS))
    monkeypatch.setattr(main, "SECTION_MODULE", {
        n: m for n, m in main.SECTION_MODULE.items() if n != "pin"})
    group = main.CasGroup(name="cas")
    ctx = click.Context(group, info_name="cas")
    assert group.get_command(ctx, "pin").name == "pin"
    text = group.get_help(ctx)
    assert re.search(r"^Other:\n  pin  ", text, re.M)
    assert group.get_command(ctx, "bogus") is None


def test_console_script_help_is_fast_and_does_not_import_the_library():
    code = ("import sys; sys.argv=['cas','--help']\n"
            "from cas_cli.main import main\n"
            "try:\n    main()\nexcept SystemExit: pass\n"
            "print('LOADED', 'cas.repo.repository' in sys.modules, 'msgspec' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Usage: cas" in out.stdout
    assert out.stdout.strip().endswith("LOADED False False")


USAGE_ERRORS = [
    (("bogus",), "No such command 'bogus'."),
    (("items", "evals", "1", "--limit", "x"),
     "Invalid value for '--limit': 'x' is not an integer (ASCII digits, e.g. 100)"),
    (("items", "evals", "1", "--limit", "\uff11"),
     "Invalid value for '--limit': '\uff11' is not an integer (ASCII digits, e.g. 100)"),
    (("items", "evals", "1", "--bogus"), "No such option '--bogus'."),
    (("items", "evals", "1", "--limt", "3"), "No such option '--limt'. Did you mean '--limit'?"),
    (("runs", "import"), "give FILE... or --from-captures DIR (one of them)"),
    (("runs", "import", "no-such-file"),
     "Invalid value for 'FILE...': 'no-such-file': No such file or directory"),
    (("runs",), "missing command (see: cli runs --help)"),
    (("--bogus",), "No such option '--bogus'."),
]


@pytest.mark.parametrize("args,message", USAGE_ERRORS)
def test_usage_errors_are_json_errors_under_json(run, repo, args, message):
    for words in (("--json",) + args, args + ("--json",)):  # the root or the command's --json
        r = run(*words)
        assert (r.exit_code, r.stdout) == (2, ""), r.stderr
        assert json.loads(r.stderr) == {"error": {
            "code": "INVALID_ARGUMENT", "reason": "USAGE", "message": message}}
    r = run(*args)  # without --json: click's usage text (or a group's help), as before
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("Usage: ") and ("Error: " in r.stderr or args == ("runs",))


def cas(args, cwd, env, terminal: bool) -> tuple[int, str, str]:
    """Run `cas ARGS` with stderr on a pseudo-terminal (or a pipe): (exit, stdout, stderr)."""
    cmd = [sys.executable, "-c", "from cas_cli.main import main; main()", *args]
    if not terminal:
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
        return done.returncode, done.stdout, done.stderr
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=follower,
                                stdin=subprocess.DEVNULL)
        os.close(follower)
        err = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            err += chunk
        out = proc.stdout.read().decode()
        proc.wait()
    finally:
        os.close(leader)
    return proc.returncode, out, err.decode("utf-8", "replace")


@pytest.fixture
def scene(tmp_path):
    env = {**os.environ, "CAS_USER": "Ada <ada@example.com>",
           "CAS_CONFIG": str(tmp_path / "c.json")}
    env.pop("CAS_REPO", None)
    (tmp_path / "runs.jsonl").write_bytes(jsonl(*(run_obj(f"r-{i}", i) for i in range(3))))
    cas_api.init(str(tmp_path))
    return tmp_path, env


@TERMINAL
def test_import_and_review_show_progress_on_a_terminal_and_keep_stdout_json(scene):
    cwd, env = scene
    code, out, err = cas(["--json", "runs", "import", "runs.jsonl"], cwd, env, True)
    assert code == 0
    assert json.loads(out)["imported"] == ["r-0", "r-1", "r-2"]  # one JSON document
    # (a file's runs are read as they are encoded: the bar counts its bytes)
    size = (cwd / "runs.jsonl").stat().st_size
    assert "encoding runs, bytes read [" in err and f"/{size}" in err
    code, out, err = cas(["--json", "review", "add", "r-0", "--run", "r-1", "--metric", "m",
                          "--label", "ok"], cwd, env, True)
    assert "checking reviewed runs [" in err
    repo = cas_api.open(str(cwd))  # the rest of the scene, in this process
    repo.set_eligibility("m", ["ok"], author="a")
    requests = [{"run_id": r, "metric": "m", "label": "ok"} for r in ("r-0", "r-1")]
    token = repo.add_reviews(requests, reviewer="a")["confirm_token"]
    repo.add_reviews(requests, confirm_token=token, reviewer="a")
    repo.create_dataset("evals", author="a")
    code, out, err = cas(["--json", "promote", "evals", "--reviewed", "--idempotency-key", "k"],
                         cwd, env, True)
    assert code == 0 and len(json.loads(out)["proposed"]["added"]) == 2
    assert "checking and freezing runs [" in err


@TERMINAL
def test_no_progress_when_stderr_is_not_a_terminal(scene):
    cwd, env = scene
    code, out, err = cas(["runs", "import", "runs.jsonl"], cwd, env, False)
    assert (code, err) == (0, "")
    assert out.startswith("imported 3 runs")


@pytest.mark.parametrize("error, code, status", [
    (PermissionError(13, "Permission denied", "/srv/evals/.cas/config"), "PERMISSION_DENIED", 9),
    (OSError(28, "No space left on device", "/srv/evals/.cas/~tmp"), "UNAVAILABLE", 8),
])
def test_an_os_error_is_a_documented_code_a_refusal_is_permission_denied(run, monkeypatch,
                                                                         error, code, status):
    """What the operating system refuses (EACCES, EPERM) is PERMISSION_DENIED, exit 9: no
    retry will help, permissions will; any other OSError stays UNAVAILABLE, exit 8."""
    def refused(self):
        raise error
    monkeypatch.setattr("cas_cli.common.Invocation.repo", refused)
    result = run("--json", "dataset", "list")
    assert result.exit_code == status == main.EXIT_CODES[code]
    assert json.loads(result.stderr) == {"error": {
        "code": code, "reason": None, "message": f"{error.strerror}: {error.filename}"}}
    human = run("dataset", "list")
    assert (human.exit_code, human.stderr) == (status, f"cas: error: {error.strerror}: "
                                                       f"{error.filename}\n")


def test_every_exit_code_is_documented_once_and_below_the_suite_runners():
    from cas import errors
    from cas.evals.suites import results
    codes = {cls.code for cls in vars(errors).values()
             if isinstance(cls, type) and issubclass(cls, errors.CasError)}
    assert codes == set(main.EXIT_CODES)  # every error class has its exit code
    assert main.EXIT_CODES["PERMISSION_DENIED"] == 9
    assert len(set(main.EXIT_CODES.values())) == len(main.EXIT_CODES)
    assert max(main.EXIT_CODES.values()) < min(results.EXIT_ERRORED, results.EXIT_INCOMPLETE)
    table = (ROOT / "docs" / "cli.md").read_text().split("## Exit codes", 1)[1]
    for code, status in main.EXIT_CODES.items():
        assert f"| {status} | `{code}` |" in table, code
