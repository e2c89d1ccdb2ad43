"""`cas lock ...`: cas.lock, the pins of the exact versions a project uses (docs/lock.md)."""

from __future__ import annotations

import click

from .common import INTEGER, Example, Invocation, VersionOption, json_option, lock_option, pass_ctx


@click.group()
def lock() -> None:
    """Pin the exact dataset versions a project uses in cas.lock (found as pyproject.toml is:
    here or in a parent directory; --lock PATH names another), check them in CI, move them
    after an erasure, and show a pull request what a change to the lock means."""


def _repos(ctx: Invocation):
    from cas.interop.lockfile import Repositories
    from cas.repo import opening
    return Repositories(ctx.repo, opening.open)


def _path(ctx: Invocation, create: bool = False):
    from cas.interop import lockfile
    return lockfile.locate(ctx.lock_path, create=create)


def _move_json(move) -> dict:
    return {"dataset": move.dataset, "old": str(move.old) if move.old else None,
            "new": str(move.new),
            "erasures": [{"erasure": e, "erased_at": t, "cases_removed": n}
                         for e, t, n in move.erasures]}


def _move_text(move) -> str:
    old = f"{move.dataset}@{move.old.version}" if move.old else None
    new = f"{move.dataset}@{move.new.version}"
    if old is None:
        return f"locked {new}"
    why = "".join(f"; {n} cases removed by erasure {e} at {t}" for e, t, n in move.erasures)
    return f"{old} -> {new}{why}"


@lock.command("add")
@click.argument("version", metavar="DATASET@N")
@click.option("--repository", default=None, metavar="LOCATION",
              help="The repository the version lives in, recorded in the entry (default: "
                   "none: the repository each command opens).")
@lock_option
@json_option
@pass_ctx
def add(ctx: Invocation, version: str, repository: str | None) -> None:
    """Lock DATASET@N (or a full pin DATASET@N#b3:..., whose digest must match): the version
    must be ACTIVE. A dataset already locked moves, printing old -> new. Creates cas.lock here
    when none is found."""
    from cas.interop import lockfile
    path = _path(ctx, create=True)
    if repository is not None and ctx.repo_location is None:
        ctx.repo_location = repository
    move = lockfile.add(_repos(ctx), path, version, repository)
    ctx.emit({**_move_json(move), "lock": str(path)},
             f"{_move_text(move)} ({path.name}: {move.new})")


@lock.command("remove")
@click.argument("name", metavar="DATASET")
@lock_option
@json_option
@pass_ctx
def remove(ctx: Invocation, name: str) -> None:
    """Take DATASET out of the lock."""
    from cas.interop import lockfile
    path = _path(ctx)
    old = lockfile.remove(path, name)
    ctx.emit({"dataset": name, "old": str(old), "lock": str(path)},
             f"unlocked {name} (was {name}@{old.version})")


@lock.command("list")
@lock_option
@json_option
@pass_ctx
def list_(ctx: Invocation) -> None:
    """The locked pins, by dataset name (reads only the file)."""
    from cas.interop import lockfile
    path = _path(ctx)
    entries = lockfile.read(path)
    rows = [{"dataset": n, "pin": str(e.pin), "version": e.pin.version,
             "repository": e.repository} for n, e in sorted(entries.items())]
    ctx.emit({"lock": str(path), "datasets": rows},
             "\n".join(f"{r['dataset']}@{r['version']}  {r['pin']}"
                       + (f"  ({r['repository']})" if r["repository"] else "") for r in rows))


@lock.command("check")
@lock_option
@json_option
@pass_ctx
def check(ctx: Invocation) -> None:
    """Check every pin: its version exists, is ACTIVE and has the pinned digest. Exit 5
    (FAILED_PRECONDITION, LOCK_CHECK_FAILED) when one does not, naming a retired pin's cause,
    retired_at and successor (move to it with `cas lock update`)."""
    from cas.interop import lockfile
    path = _path(ctx)
    checks = lockfile.check(_repos(ctx), path)
    if not ctx.as_json:  # (a failure is the error line, naming each failed pin)
        for c in checks:
            if c.ok:
                click.echo(f"ok    {c.dataset}@{c.pin.version}")
    lockfile.require(checks)
    ctx.emit({"lock": str(path), "ok": True, "datasets": lockfile.check_json(checks)})


@lock.command("update")
@click.argument("name", metavar="[DATASET]", required=False)
@click.option("--to", "to", type=VersionOption(), default=None, metavar="N",
              help="Move DATASET's pin to exactly version N (it must be ACTIVE).")
@click.option("--renew", is_flag=True,
              help="First renew a head an erasure retired (`cas renew`), then move.")
@lock_option
@json_option
@pass_ctx
def update(ctx: Invocation, name: str | None, to: int | None, renew: bool) -> None:
    """Move pins: retired ones (all, or DATASET's) each to the renewal sealed on it, never to
    "the newest"; with --to N, DATASET's pin to version N. A retired pin with no successor
    yet refuses the update (NO_SUCCESSOR, exit 5; run `cas renew DATASET`, or pass --renew)
    and the lock is left as it was."""
    from cas.interop import lockfile
    path = _path(ctx)
    repos = _repos(ctx)
    moves = lockfile.update(repos, path, name, to, renew)
    entries = lockfile.read(path)

    def counts(move) -> str:  # a chosen move (--to): how the set's size changes
        if move.erasures:
            return ""
        target = repos.of(entries[move.dataset])
        old, new = (target.version(move.dataset, p.version).item_count
                    for p in (move.old, move.new))
        return f" ({old} -> {new} cases: `cas diff {move.dataset} {move.old.version} " \
               f"{move.new.version}` lists them)"
    ctx.emit({"lock": str(path), "moved": [_move_json(m) for m in moves]},
             "\n".join(_move_text(m) + counts(m) for m in moves) if moves else
             "nothing to move: no pin is retired")


@lock.command("diff")
@click.argument("ref", metavar="[GIT_REF]", default="HEAD")
@click.option("--limit", type=INTEGER, default=None,
              help="Cases listed per side of each moved dataset (default: 100 shared between "
                   "the moved datasets, so that the comment stays under 60,000 characters).")
@lock_option
@json_option
@pass_ctx
def diff(ctx: Invocation, ref: str, limit: int | None) -> None:
    """What the lock file's change since GIT_REF (default HEAD; CI passes the base branch)
    means, dataset by dataset, as markdown for a pull request comment. Exit 0 whatever
    changed."""
    from cas.interop import lockfile, review_diff
    path = _path(ctx)
    old, new = lockfile.read_at_ref(path, ref), lockfile.read(path)
    text = review_diff.lock_markdown(_repos(ctx), old, new, limit=limit,
                                     title=f"{path.name} since {ref}")
    changed = sorted(n for n in set(old) | set(new) if old.get(n) != new.get(n))
    ctx.emit({"lock": str(path), "ref": ref, "changed": changed, "markdown": text},
             text.rstrip("\n"))


EXAMPLES = {
    "lock": (
        Example("cas lock add support-evals@3", "Pin version 3 in ./cas.lock (commit it)."),
        Example("cas lock check", "In CI: fail (exit 5) when a pin is retired or mismatched."),
    ),
    "lock add": (
        Example("cas lock add support-evals@3", "Lock version 3 (or move the pin to it)."),
        Example("cas lock add support-evals@3 --repository s3://team-evals/cas",
                "Lock a version of another repository."),
    ),
    "lock remove": (
        Example("cas lock remove support-evals", "Take the dataset out of the lock."),
    ),
    "lock list": (
        Example("cas lock list --json", "The locked pins, as JSON."),
    ),
    "lock check": (
        Example("cas lock check", "Every pin ACTIVE and matching, or exit 5 naming why."),
        Example("cas lock check --lock ci/cas.lock --json", "Check another lock file."),
    ),
    "lock update": (
        Example("cas lock update", "Move each retired pin to the renewal sealed on it."),
        Example("cas lock update support-evals --renew",
                "Renew the head an erasure retired, then move the pin to it."),
        Example("cas lock update support-evals --to 5", "Move the pin to exactly version 5."),
    ),
    "lock diff": (
        Example("cas lock diff origin/main > comment.md",
                "What the lock's change in this branch means, as a PR comment."),
    ),
}
