"""Every command's help ends with its examples (each command module's EXAMPLES, attached by
cas_cli/examples.py), kept in the module that defines the command, and every example is a
command line that the command tree accepts: its command exists and so does every option it
uses."""

from __future__ import annotations

import shlex
import sys

import click
import pytest
from click.core import ParameterSource
from click.testing import CliRunner

from cas_cli.examples import HEADING, WIDTH, lines
from cas_cli.main import cli

SHELL_OPERATORS = {"|", "||", "&&", ";"}
REDIRECTIONS = {">", ">>", "<", "2>"}


def _tree(group: click.Group, prefix: tuple[str, ...] = ()):
    """(path, command) of every command and group under `group`, e.g. ("runs import", cmd)."""
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        yield " ".join(path), command
        if isinstance(command, click.Group):
            yield from _tree(command, path)


cli.load_all()  # (commands are otherwise registered when first asked for)
TREE = dict(_tree(cli))
COMMAND_MODULES = sorted({c.callback.__module__ for c in cli.commands.values()})
TABLES = {name: sys.modules[name].EXAMPLES for name in COMMAND_MODULES}
EXAMPLES = {path: examples for table in TABLES.values() for path, examples in table.items()}
ALL_EXAMPLES = [(path, example) for path, examples in EXAMPLES.items()
                for example in examples]


def _params(command: click.Command) -> dict[str, click.Parameter]:
    """The command's options by every name they answer to (--help too)."""
    params = command.get_params(click.Context(command))
    return {name: p for p in params if isinstance(p, click.Option)
            for name in p.opts + p.secondary_opts}


def _takes_value(param: click.Parameter) -> bool:
    return not (getattr(param, "is_flag", False) or getattr(param, "count", False))


def _segments(command_line: str) -> list[list[str]]:
    """The words of each command of a shell line, without its redirections."""
    segments, words, skip = [], [], False
    for word in shlex.split(command_line):
        if skip:
            skip = False
        elif word in SHELL_OPERATORS:
            segments.append(words)
            words = []
        elif word in REDIRECTIONS:
            skip = True  # the redirection's target
        else:
            words.append(word)
    return [*segments, words]


def _check_options(path: str, command: click.Command, words: list[str]) -> list[str]:
    """The options in `words` that `command` does not have (pending ones excepted); an
    option's value is skipped, and nothing after `--` is an option."""
    params, unknown, i = _params(command), [], 0
    while i < len(words):
        word = words[i]
        if word == "--":
            break
        if word.startswith("-") and len(word) > 1:
            name = word.split("=", 1)[0]
            if name in params:
                i += 1 if "=" in word or not _takes_value(params[name]) else 2
                continue
            unknown.append(name)
        i += 1
    return unknown


def _resolve(words: list[str]) -> tuple[str, click.Command, list[str]]:
    """(path, command, its own words) of `cas ...` words: the groups' options (`--repo`,
    `--json`) are checked on the way down."""
    assert words[:1] == ["cas"], f"{words}: an example is a `cas` command line"
    command, path, i = cli, [], 1
    while isinstance(command, click.Group):
        params = _params(command)
        while i < len(words) and words[i].startswith("-"):
            name = words[i].split("=", 1)[0]
            assert name in params, f"{' '.join(['cas', *path])} has no option {name}"
            i += 2 if "=" not in words[i] and _takes_value(params[name]) else 1
        assert i < len(words), f"{' '.join(words)}: names no command"
        name = words[i]
        assert name in command.commands, f"{' '.join(['cas', *path])} has no command {name!r}"
        command, path, i = command.commands[name], [*path, name], i + 1
    return " ".join(path), command, words[i:]


def _check_command_line(words: list[str]) -> str:
    """Resolve a `cas` command line with click; returns its command path."""
    path, command, rest = _resolve(words)
    unknown = _check_options(path, command, rest)
    assert not unknown, f"cas {path} has no option {', '.join(unknown)}"
    # click's own parse: option values, arity and extra arguments (a file that does not
    # exist here is not an error: resilient parsing ignores a value it cannot convert)
    with command.make_context(path.split()[-1], list(rest), resilient_parsing=True) as ctx:
        if not ctx.allow_extra_args:
            assert not ctx.args, f"cas {path}: unexpected arguments {ctx.args}"
        missing = [p.opts[0] if isinstance(p, click.Option) else p.human_readable_name
                   for p in command.params if p.required
                   and ctx.get_parameter_source(p.name) != ParameterSource.COMMANDLINE]
        assert not missing, f"cas {path}: missing {', '.join(missing)}"
    return path


def test_every_command_and_group_has_examples_and_nothing_else_does():
    assert sorted(EXAMPLES) == sorted(TREE), (
        f"missing from the EXAMPLES of their modules: {sorted(set(TREE) - set(EXAMPLES))}; "
        f"not commands: {sorted(set(EXAMPLES) - set(TREE))}")
    assert all(EXAMPLES.values())


def test_examples_are_kept_in_the_module_that_defines_their_command():
    misplaced = [(path, name, TREE[path].callback.__module__)
                 for name, table in TABLES.items() for path in table
                 if path in TREE and TREE[path].callback.__module__ != name]
    assert misplaced == []
    assert sum(len(table) for table in TABLES.values()) == len(EXAMPLES)  # each path once


@pytest.mark.parametrize("path", sorted(TREE))
def test_help_ends_with_the_examples(path):
    r = CliRunner().invoke(cli, [*path.split(), "--help"], catch_exceptions=False)
    assert r.exit_code == 0
    tail = r.output.split("\nOptions:\n", 1)[1]  # after the options, as click prints an epilog
    shown = [line.strip() for line in tail.splitlines()]
    assert HEADING in shown, f"cas {path} --help shows no examples"
    for example in EXAMPLES.get(path, ()):
        got = shown.index(lines(example)[0])
        assert shown[got:got + len(lines(example))] == [l.strip() for l in lines(example)]


@pytest.mark.parametrize("path,example", ALL_EXAMPLES,
                         ids=[f"{p}:{i}" for i, (p, _) in enumerate(ALL_EXAMPLES)])
def test_example_names_its_command_and_only_existing_options(path, example):
    paths = [_check_command_line(words) for words in _segments(example.command)
             if words[:1] == ["cas"]]
    # an example is one of its own command (a group's: of the group or a command in it)
    assert any(p == path or p.startswith(path + " ") for p in paths), (
        f"{example.command!r} is listed under {path!r}")
    assert example.why and "\n" not in example.why
    assert all(len(line) <= WIDTH for line in lines(example)), lines(example)


def test_a_misspelt_or_removed_option_fails_the_check():
    with pytest.raises(AssertionError, match="no option --tennant"):
        _check_command_line(shlex.split("cas runs list --tennant acme"))
    with pytest.raises(AssertionError, match="no option --bogus"):  # a version-taking command
        _check_command_line(shlex.split("cas show support-evals@2 --bogus"))
    with pytest.raises(AssertionError, match="missing --confirm-token"):
        _check_command_line(shlex.split("cas seal support-evals"))
    with pytest.raises(AssertionError, match="no command 'sael'"):
        _check_command_line(shlex.split("cas sael support-evals"))
