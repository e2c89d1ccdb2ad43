"""Examples in every command's help: a command module's EXAMPLES, by command path, appended to
each command's epilog (click prints it after the options)."""

from __future__ import annotations

import inspect

import click

WIDTH = 74  # a command line's width in the help: click indents it by 4 within 78 columns
HEADING = "Examples:"


def _words(command: str) -> list[str]:
    """The command split at the spaces outside quotes, each word as written."""
    words, word, quote = [], "", None
    for ch in command:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == " ":
            if word:
                words.append(word)
            word = ""
            continue
        word += ch
    return words + ([word] if word else [])


def lines(example, width: int = WIDTH) -> list[str]:
    """An example (an Example of cas_cli/common.py) as the help shows it: `# why`, then the
    command, broken before an option (with a shell continuation) when it is longer than
    `width`."""
    groups: list[str] = []  # an option with its value (and any argument after it)
    for word in _words(example.command):
        starts = not groups or (word.startswith("-") and len(word) > 1) or word in ("|", ">")
        if starts:
            groups.append(word)
        else:
            groups[-1] += " " + word
    out = [groups[0]]
    for group in groups[1:]:
        if len(out[-1]) + 1 + len(group) + 2 <= width:  # room left for " \"
            out[-1] += " " + group
        else:
            out[-1] += " \\"
            out.append("    " + group)
    return [f"# {example.why}", *out]


def epilog(examples: tuple) -> str:
    """The `Examples:` section: one `\\b` paragraph per example, so that click keeps its
    line breaks (and the first also holds the heading)."""
    blocks = ["\n".join(["\b"] + ([HEADING] if i == 0 else []) + [f"  {line}" for line in
                                                                   lines(example)])
              for i, example in enumerate(examples)]
    return "\n\n".join(blocks)


def attach(command: click.Command, examples: dict[str, tuple], path: str) -> None:
    """Append the Examples section to the epilog of `command` (at `path`, as typed after
    `cas`) and of every command under it, from the table of the module that defines them."""
    if examples.get(path):  # tests/cli/test_examples.py fails for a command with none
        section = epilog(examples[path])
        current = inspect.cleandoc(command.epilog) if command.epilog else ""
        command.epilog = f"{current}\n\n{section}" if current else section
    for name, sub in getattr(command, "commands", {}).items():
        attach(sub, examples, f"{path} {name}")
