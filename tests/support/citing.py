"""A dataset of two versions to cite (through the library, or through `cas`), and the exact
output of a refused command: what the tests of pins, scores, experiments and deletion share."""

from __future__ import annotations

import json

import cas
from cas_cli.main import EXIT_CODES
from support.sample_cases import plain_cases

ADA = "Ada <ada@example.com>"


def two_versions(location: str, monkeypatch) -> cas.Repository:
    """`evals@1` (4 cases) and `evals@2` (2 more), committed directly by Ada at `location`."""
    monkeypatch.setenv("CAS_USER", ADA)
    r = cas.init(location)
    r.create_dataset("evals", admission="direct")
    r.commit("evals", base=None, add=plain_cases(4))
    r.commit("evals", base=1, add=plain_cases(2, "more"))
    return r


def two_versions_by_cli(run, tmp_path) -> cas.Repository:
    """`evals@1` (3 cases) and `evals@2` (1 more), made with `cas` in tmp_path."""
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(c) + "\n" for c in plain_cases(3)))
    (tmp_path / "b.jsonl").write_text(json.dumps({"input": "extra"}) + "\n")
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    assert run("commit", "evals", "--add", "a.jsonl").exit_code == 0
    assert run("commit", "evals", "--base", "1", "--add", "b.jsonl").exit_code == 0
    return cas.open(str(tmp_path))


def refused(result, code: str, message: str) -> None:
    """The command failed with the exit code of `code`, printing only `message` on stderr."""
    assert (result.exit_code, result.stdout, result.stderr) == \
        (EXIT_CODES[code], "", f"cas: error: {message}\n")


def keys(r, prefix: str) -> list[str]:
    return sorted(r.backend.list(prefix))


def snapshot(r) -> dict[str, bytes]:
    """Every key of the repository and its bytes (to show a refusal stored nothing)."""
    return {k: r.backend.get(k) for k in sorted(r.backend.list(""))}
