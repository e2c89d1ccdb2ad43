"""The lock file: `cas.lock`, the exact dataset versions a project uses, kept in its git repository.

A TOML file in the user's project (found as `pyproject.toml` is: the directory given or its
nearest parent holding one), one table per dataset:

    [datasets.support-evals]
    pin = "support-evals@3#b3:..."
    repository = "s3://team-bucket/cas"    # optional; else the repository the command opens

It is read with the standard library's TOML reader and written with `tomli_w`, tables sorted by
name, so that a change to it is a small diff a pull request reviews and `git revert` undoes.
Nothing here resolves "the newest" version: a pin moves only to a version named (`--to`) or to
the renewal an erasure's retirement calls for (cas/repo/renewal.py). This module reads and
writes a project's file, not the repository, so it lives above the repository layer; nothing
below imports it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, NamedTuple

from cas.errors import CasError, FailedPrecondition, InvalidArgument, Unavailable
from cas.format.version_names import (Pin, VersionName, check_dataset_name, format_version_name,
                                      parse_version_name)

try:  # Python 3.11+; tomli is the same reader for 3.10
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]

LOCK_FILE = "cas.lock"
HEADER = ("# The exact dataset versions this project uses, written by `cas lock`; commit it.\n"
          "# See docs/lock.md. One table per dataset, sorted by name.\n")
_ENTRY_KEYS = ("pin", "repository")


class LockEntry(NamedTuple):
    """One dataset of a lock file: its pin, and the repository it lives in (None: the one the
    command opens)."""

    pin: Pin
    repository: str | None = None


Entries = dict[str, LockEntry]


class Move(NamedTuple):
    """A pin that moved (or was added: `old` None). `erasures` says, for a move along
    renewals, what each erasure removed: (erasure id, erased_at, cases removed)."""

    dataset: str
    old: Pin | None
    new: Pin
    erasures: tuple[tuple[str, str, int], ...] = ()


class EntryCheck(NamedTuple):
    """What `check` found for one entry: `ok`, else the refusal as an error object (code,
    reason, message and fields) and, for a retired pin, the successor a renewal sealed."""

    dataset: str
    pin: Pin
    ok: bool
    state: str | None            # ACTIVE, RETIRED, or None when the version is not there
    error: dict[str, Any] | None = None
    successor: str | None = None  # the pin `cas lock update` would move to


class Resolved(NamedTuple):
    """A dataset name resolved through the lock: the entry, and the file it came from."""

    dataset: str
    pin: Pin
    repository: str | None
    path: Path

    @property
    def version(self) -> int:
        return self.pin.version

    def line(self) -> str:
        """The line a command prints on stderr: `NAME -> NAME@N (cas.lock)`."""
        return f"{self.dataset} -> {self.dataset}@{self.pin.version} ({self.path.name})"

    def to_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "version": self.pin.version, "pin": str(self.pin),
                "lock": str(self.path), "repository": self.repository}


# -- finding, reading and writing the file -----------------------------------------------------
def find(start: str | os.PathLike | None = None) -> Path | None:
    """The nearest `cas.lock` in `start` (default: the current directory) or its parents."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / LOCK_FILE
        if candidate.is_file():
            return candidate
    return None


def locate(path: str | os.PathLike | None = None, start: str | os.PathLike | None = None,
           create: bool = False) -> Path:
    """The lock file to use: `path` when given, else the nearest one from `start`; with
    `create`, a new `cas.lock` in `start` when there is none. Refused (NOT_LOCKED) otherwise."""
    if path is not None:
        return Path(path)
    found = find(start)
    if found is not None:
        return found
    if create:
        return Path(start if start is not None else os.getcwd()) / LOCK_FILE
    raise InvalidArgument(f"no {LOCK_FILE} in {Path(start or os.getcwd()).resolve()} or its "
                          f"parents: lock a version first (`cas lock add NAME@N`), or name a "
                          "file with --lock PATH", reason="NOT_LOCKED")


def _invalid(where: str, problem: str) -> InvalidArgument:
    return InvalidArgument(f"{where} is not a valid lock file: {problem} (expected tables "
                           '[datasets.NAME] holding pin = "NAME@N#b3:<64 hex>" and optionally '
                           'repository = "LOCATION"; docs/lock.md)', reason="INVALID_LOCK_FILE",
                           path=where, problem=problem)


def parse(text: str, where: str = LOCK_FILE) -> Entries:
    """The entries of a lock file's text; anything else is refused (INVALID_LOCK_FILE), an
    unknown key too: a newer cas's field is never silently dropped by an older one."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _invalid(where, f"not TOML ({exc})") from None
    extra = sorted(set(data) - {"datasets"})
    if extra:
        raise _invalid(where, f"unknown top-level key {extra[0]!r}")
    tables = data.get("datasets", {})
    if not isinstance(tables, dict):
        raise _invalid(where, "`datasets` is not a table")
    entries: Entries = {}
    for name, table in tables.items():
        try:
            check_dataset_name(name)
        except InvalidArgument as exc:
            raise _invalid(where, exc.message) from None
        if not isinstance(table, dict):
            raise _invalid(where, f"datasets.{name} is not a table")
        unknown = sorted(set(table) - set(_ENTRY_KEYS))
        if unknown:
            raise _invalid(where, f"unknown key {unknown[0]!r} in [datasets.{name}]")
        text_pin, repository = table.get("pin"), table.get("repository")
        if not isinstance(text_pin, str):
            raise _invalid(where, f"[datasets.{name}] has no pin string")
        if repository is not None and (not isinstance(repository, str) or not repository):
            raise _invalid(where, f"the repository of [datasets.{name}] is not a location")
        try:
            pin = Pin.parse(text_pin)
        except InvalidArgument as exc:  # (what a pin is, the refusal below says once)
            raise _invalid(where, exc.message.split("; expected")[0]) from None
        if pin.dataset != name:
            raise _invalid(where, f"[datasets.{name}] pins another dataset ({pin})")
        entries[name] = LockEntry(pin, repository)
    return entries


def format_lock(entries: Entries) -> str:
    """The text of a lock file holding `entries`: what `parse` reads back, tables sorted."""
    import tomli_w
    tables = {}
    for name in sorted(entries):
        entry = entries[name]
        table = {"pin": str(entry.pin)}
        if entry.repository is not None:
            table["repository"] = entry.repository
        tables[name] = table
    return HEADER + ("\n" + tomli_w.dumps({"datasets": tables}) if tables else "")


def read(path: str | os.PathLike) -> Entries:
    """The entries of the lock file at `path` (none when it does not exist)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise _invalid(str(path), "not UTF-8 text") from None
    return parse(text, str(path))


def write(path: str | os.PathLike, entries: Entries) -> None:
    """Replace the lock file at `path` atomically (a crash leaves the old file or the new)."""
    path = Path(path)
    text = format_lock(entries)
    fd, tmp = tempfile.mkstemp(prefix=".cas.lock.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_at_ref(path: str | os.PathLike, ref: str = "HEAD") -> Entries:
    """The entries of the lock file at `path` as git commit `ref` has it (`git show
    REF:./NAME`, run in the file's directory); none when the file is not in that commit."""
    path = Path(path).resolve()
    if ref.startswith("-") or not ref.strip():
        raise InvalidArgument(f"{ref!r} is not a git revision", reason="INVALID_GIT_REF")
    run = subprocess.run(["git", "-C", str(path.parent), "rev-parse", "--verify", "--quiet",
                          f"{ref}^{{commit}}"], capture_output=True, text=True)
    if run.returncode != 0:
        inside = subprocess.run(["git", "-C", str(path.parent), "rev-parse", "--git-dir"],
                                capture_output=True, text=True)
        if inside.returncode != 0:
            raise FailedPrecondition(f"{path.parent} is not in a git repository: `cas lock "
                                     "diff` compares the lock file with a git revision",
                                     reason="NOT_A_GIT_REPOSITORY", path=str(path.parent))
        raise InvalidArgument(f"{ref!r} names no commit of the git repository of {path.parent}",
                              reason="INVALID_GIT_REF", ref=ref)
    shown = subprocess.run(["git", "-C", str(path.parent), "show", f"{ref}:./{path.name}"],
                           capture_output=True)
    if shown.returncode != 0:
        return {}  # the file is not in that commit: every dataset of the lock is added
    try:
        text = shown.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid(f"{ref}:{path.name}", "not UTF-8 text") from None
    return parse(text, f"{ref}:{path.name}")


# -- the repositories the entries name ---------------------------------------------------------
class Repositories:
    """The repository of each entry: the one it names, opened once by `opener` (e.g.
    `cas.open`), else `default` (a repository, or a function opening it, called only when an
    entry names none)."""

    def __init__(self, default: Any, opener: Callable[[str], Any] | None = None) -> None:
        self.default, self._opened = default, {}
        self._opener = opener

    def of(self, entry: LockEntry) -> Any:
        if entry.repository is None:
            if callable(self.default):
                self.default = self.default()
            if self.default is None:
                raise Unavailable("no repository to check the lock against: name one with "
                                  "--repo (or CAS_REPO)", reason="NO_REPOSITORY")
            return self.default
        if entry.repository not in self._opened:
            if self._opener is None:
                raise Unavailable(f"the lock names the repository {entry.repository!r}, and "
                                  "nothing here opens one: pass opener (e.g. cas.open)",
                                  reason="NO_REPOSITORY", repository=entry.repository)
            self._opened[entry.repository] = self._opener(entry.repository)
        return self._opened[entry.repository]


def _repos(repo: Any) -> Repositories:
    return repo if isinstance(repo, Repositories) else Repositories(repo)


# -- the operations -----------------------------------------------------------------------------
def resolve(name: str, path: str | os.PathLike | None = None,
            start: str | os.PathLike | None = None) -> Resolved:
    """The locked pin of dataset `name` (a name without a version, as a command gives it).
    Refused (INVALID_ARGUMENT, NOT_LOCKED) when no lock file holds it: there is no latest."""
    check_dataset_name(name)
    try:
        where = locate(path, start)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{name!r} names no version, and {exc.message.split(':')[0]}: "
                              f"lock one (`cas lock add {name}@N`) or name the version "
                              f"({name}@N); there is no \"latest\"", reason="NOT_LOCKED",
                              dataset=name) from None
    entries = read(where)
    if name not in entries:
        raise InvalidArgument(f"{name!r} names no version and {where} does not lock it: lock "
                              f"one (`cas lock add {name}@N`) or name the version ({name}@N); "
                              "there is no \"latest\"", reason="NOT_LOCKED", dataset=name,
                              lock=str(where))
    entry = entries[name]
    return Resolved(name, entry.pin, entry.repository, where)


def add(repo: Any, path: str | os.PathLike, text: str,
        repository: str | None = None) -> Move:
    """Lock `NAME@N` (or the pin `NAME@N#b3:...`, whose digest must match): the version must
    be ACTIVE. A dataset already locked is moved (in the repository its entry names, unless
    `repository` names another); the Move says from what."""
    name = parse_version_name(text.strip() if isinstance(text, str) else text)
    entries = read(path)
    if repository is None and name.dataset in entries:  # a move stays in its repository
        repository = entries[name.dataset].repository
    entry = LockEntry(Pin(name.dataset, name.version, name.content_digest or ""), repository)
    target = _repos(repo).of(entry)
    if name.content_digest is not None:
        record = target.verify_pin(format_version_name(name))
        pin = Pin(record.dataset, record.number, record.content_digest)
    else:
        pin = target.pin(name.dataset, name.version)  # refused when RETIRED
    old = entries.get(name.dataset)
    entries[name.dataset] = LockEntry(pin, repository)
    write(path, entries)
    return Move(name.dataset, old.pin if old else None, pin)


def remove(path: str | os.PathLike, name: str) -> Pin:
    """Take dataset `name` out of the lock; its pin. Refused (NOT_LOCKED) when it is not in."""
    entries = read(path)
    if name not in entries:
        raise InvalidArgument(f"{path} does not lock {name!r}", reason="NOT_LOCKED",
                              dataset=name)
    old = entries.pop(name)
    write(path, entries)
    return old.pin


def check(repo: Any, path: str | os.PathLike) -> list[EntryCheck]:
    """Each entry checked: its version is ACTIVE and has the pinned digest (in the repository
    the entry names, else `repo`). A retired one says its cause, retired_at and successor."""
    repos = _repos(repo)
    out: list[EntryCheck] = []
    for name, entry in sorted(read(path).items()):
        try:
            target = repos.of(entry)
            target.verify_pin(entry.pin)
        except CasError as exc:
            error = exc.to_json()
            successor = None
            state = None
            if exc.reason == "EVALUATION_DATASET_VERSION_RETIRED":
                state = "RETIRED"
                successor, why = _successor_pin(target, entry.pin)
                error["message"] = error["message"].split("; cut a new version")[0] + (
                    f"; its successor is {successor} (move to it: `cas lock update`)"
                    if successor is not None else f"; {why}")
            error["successor"] = successor
            out.append(EntryCheck(name, entry.pin, False, state, error, successor))
        else:
            out.append(EntryCheck(name, entry.pin, True, "ACTIVE"))
    return out


def _successor_pin(target: Any, pin: Pin) -> tuple[str | None, str]:
    """The pin a retired `pin` moves to, or None and why there is none."""
    try:
        record = target.renewed_to(pin.dataset, pin.version)
    except CasError as exc:
        return None, "it " + exc.message.split(") and ", 1)[-1]
    return str(Pin(record.dataset, record.number, record.content_digest)), ""


def require(checks: list[EntryCheck]) -> None:
    """Refuse (FAILED_PRECONDITION, LOCK_CHECK_FAILED) unless every entry passed, naming each
    failure (a retired pin's cause, retired_at and successor)."""
    failed = [c for c in checks if not c.ok]
    if not failed:
        return
    first = failed[0].error or {}
    raise FailedPrecondition(
        f"{len(failed)} of {len(checks)} locked pins fail: "
        + "; ".join(c.error["message"] for c in failed if c.error),
        reason="LOCK_CHECK_FAILED", failed=[_check_json(c) for c in failed],
        retirement_cause=first.get("retirement_cause"), retired_at=first.get("retired_at"),
        successor=failed[0].successor)


def _check_json(c: EntryCheck) -> dict[str, Any]:
    return {"dataset": c.dataset, "pin": str(c.pin), "ok": c.ok, "state": c.state,
            "error": c.error, "successor": c.successor}


def check_json(checks: list[EntryCheck]) -> list[dict[str, Any]]:
    return [_check_json(c) for c in checks]


def update(repo: Any, path: str | os.PathLike, name: str | None = None, to: int | None = None,
           renew: bool = False, author: str | None = None) -> list[Move]:
    """Move pins. With `to`, the pin of `name` moves to that exact (ACTIVE) version. Without
    it, only retired pins move (all, or `name`'s), each to the renewal sealed on it (and on,
    while that one is retired too): never to "the newest". With `renew`, a head an erasure
    retired is renewed first. One pin without a successor refuses the whole update
    (NO_SUCCESSOR, naming `cas renew`), and the lock is left as it was."""
    entries = read(path)
    if to is not None and name is None:
        raise InvalidArgument("--to moves one dataset's pin: name the dataset",
                              reason="USAGE")
    if name is not None and name not in entries:
        raise InvalidArgument(f"{path} does not lock {name!r}: add it with `cas lock add "
                              f"{name}@N`", reason="NOT_LOCKED", dataset=name)
    repos = _repos(repo)
    moves: list[Move] = []
    for dataset in sorted(entries) if name is None else [name]:
        entry = entries[dataset]
        target = repos.of(entry)
        if to is not None:
            new = target.pin(dataset, to)
            if new != entry.pin:
                moves.append(Move(dataset, entry.pin, new))
            continue
        if target.version_state(dataset, entry.pin.version) == "ACTIVE":
            target.resolve_pin(entry.pin)  # a mismatched pin is refused, never moved past
            continue
        if renew:
            _renew_head(target, dataset, entry.pin.version, author)
        record = target.renewed_to(dataset, entry.pin.version)
        new = Pin(record.dataset, record.number, record.content_digest)
        moves.append(Move(dataset, entry.pin, new, erasure_steps(target, entry.pin)))
    for move in moves:
        entries[move.dataset] = LockEntry(move.new, entries[move.dataset].repository)
    if moves:
        write(path, entries)
    return moves


def _renew_head(target: Any, dataset: str, number: int, author: str | None) -> None:
    """Renew the head when the pin's renewals stop at it, retired by an erasure."""
    path = target.renewal_path(dataset, number)
    last = path[-1].number if path else number
    retired = target.retirement(dataset, last)
    if retired is not None and retired.erasure is not None and target.head(dataset) == last:
        from cas.errors import VersionConflict
        try:
            target.renew(dataset, author=author)
        except VersionConflict:
            pass  # another writer renewed it meanwhile: its renewal is the successor


def erasure_steps(target: Any, pin: Pin) -> tuple[tuple[str, str, int], ...]:
    """For the renewals from the retired `pin`: (erasure id, erased_at, cases it removed)."""
    steps = []
    current = target.version(pin.dataset, pin.version)
    erased_at = {e.id: e.erased_at for e in target.erasures()}
    for record in target.renewal_path(pin.dataset, pin.version):
        retired = target.retirement(pin.dataset, current.number)
        erasure = retired.erasure or "-"
        steps.append((erasure, erased_at.get(erasure, retired.retired_at),
                      current.item_count - record.item_count))
        current = record
    return tuple(steps)


def version_label(pin: Pin) -> str:
    return format_version_name(VersionName(pin.dataset, pin.version))
