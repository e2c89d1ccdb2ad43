"""Item diffs for review: the cases two versions differ by, as markdown for a pull request comment.

`version_diff` reads what changed from one exact version to another: the counts, and the first
`limit` added and removed cases, each with its run id, tenant, the start of its first user
message (or `(withheld)`) and where it came from (who reviewed it and when, or who committed
it). `markdown` renders it; `lock_markdown` renders a lock file's change (cas/interop/
lockfile.py), dataset by dataset. Every value from a case is escaped, so a case's text cannot
break the table, mention anyone or inject markup, and with the default limit a comment stays
under `MAX_CHARS` (a GitHub comment holds 65,536).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from cas.errors import CasError
from cas.format.transcript import Input, Message, transcript
from cas.format.version_names import Pin

DEFAULT_LIMIT = 100
MAX_CHARS = 60_000
PAGE = 500          # changes read per page of the diff
TEXT_WIDTH = 60     # characters of a first user message shown
CELL_WIDTH = 32     # characters of a run id, tenant or reviewer shown
WITHHELD = "(withheld)"


class CaseRow(NamedTuple):
    case_id: str
    run_id: str | None
    tenant: str | None
    first_message: str | None   # None: no user message; WITHHELD when the policy left it out
    origin: str | None  # "reviewed by R at T", "committed by A", "run reviewed by R at T"
    #                     (the provenance is gone: the run's newest review), or None


class VersionDiff(NamedTuple):
    dataset: str
    old: int
    new: int
    old_count: int
    new_count: int
    added: int              # how many cases were added in all
    removed: int
    added_rows: list[CaseRow]     # the first `limit`, in id order
    removed_rows: list[CaseRow]
    new_dataset: str | None = None


def version_diff(repo: Any, name: str, old: int, new: int, limit: int = DEFAULT_LIMIT,
                 new_dataset: str | None = None) -> VersionDiff:
    """What changed from `name@old` to `(new_dataset or name)@new`: the counts, and the first
    `limit` (at least 0) cases of each side described. Both versions must be ACTIVE (a read of
    a retired one is refused as any read is)."""
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        from cas.errors import InvalidArgument
        raise InvalidArgument(f"limit must be an integer of at least 0, not {limit!r}",
                              reason="INVALID_LIMIT")
    other = new_dataset or name
    added_ids: list[str] = []
    removed_ids: list[str] = []
    added = removed = 0
    cursor = None
    while True:
        page = repo.diff_page(name, old, new, cursor=cursor, limit=PAGE, new_dataset=new_dataset)
        added += len(page.added)
        removed += len(page.removed)
        added_ids.extend(page.added[:max(0, limit - len(added_ids))])
        removed_ids.extend(page.removed[:max(0, limit - len(removed_ids))])
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    a, b = repo.version(name, old), repo.version(other, new)
    return VersionDiff(name, old, new, a.item_count, b.item_count, added, removed,
                       rows(repo, other, new, added_ids), rows(repo, name, old, removed_ids),
                       new_dataset)


def rows(repo: Any, name: str, number: int, ids: list[str]) -> list[CaseRow]:
    """The rows of cases `ids` of `name@number`."""
    if not ids:
        return []
    origins = repo.case_origins(name, number, ids)
    out = []
    for case_id in ids:
        case = repo.case(name, number, case_id)
        run_id = case.run_id or _origin_run(origins.get(case_id))
        origin = origin_text(origins.get(case_id))
        if origin is None and run_id is not None:
            origin = _run_review(repo, run_id)
        out.append(CaseRow(case_id, run_id, case.tenant, first_user_message(case), origin))
    return out


def _run_review(repo: Any, run_id: str) -> str | None:
    """When the provenance that named a case's review is gone (an erasure deletes the
    provenance of every version it retires, and a renewal carries the cases on), the newest
    review of its run, said as such."""
    try:
        reviews = repo.reviews(run_id)
    except CasError:
        return None
    if not reviews:
        return None
    newest = reviews[-1]
    return f"run reviewed by {newest.reviewer} at {newest.reviewed_at}"


def _origin_run(entry: Any) -> str | None:
    run = getattr(entry, "run_id", None)
    return run if isinstance(run, str) else None


def origin_text(entry: Any) -> str | None:
    """`reviewed by R at T` for a promoted case, `committed by A` for a committed one."""
    if entry is None:
        return None
    reviewer, when = getattr(entry, "reviewer", None), getattr(entry, "reviewed_at", None)
    if isinstance(reviewer, str):
        return f"reviewed by {reviewer}" + (f" at {when}" if isinstance(when, str) else "")
    author = getattr(entry, "committed_by", None)
    return f"committed by {author}" if isinstance(author, str) else None


def first_user_message(case: Any) -> str | None:
    """The text of the case's first user message (or its input when no step holds it);
    WITHHELD when the content policy left it out; None when there is none."""
    for entry in transcript(case).entries:
        if isinstance(entry, Input):
            return WITHHELD if entry.withheld else (entry.value.text if entry.value else None)
        if isinstance(entry, Message) and entry.role == "user":
            texts = [p.text for p in entry.parts if p.text]
            if texts:
                return " ".join(texts)
    if "input" in (getattr(case, "withheld", None) or ()):
        return WITHHELD
    return None


# -- markdown --------------------------------------------------------------------------------
_ESCAPED = {c: "\\" + c for c in "\\`*_[]<>|#~!"}
_ESCAPED["@"] = "&#64;"  # a mention would notify someone of every case that names them


def cell(value: str | None, width: int = CELL_WIDTH) -> str:
    """A value as one table cell: on one line, markdown escaped, `@` written as an entity so
    that no one is mentioned, and at most `width` characters as written (escapes count, so a
    row's size is bounded whatever the case holds); `-` for none."""
    if value is None or value == "":
        return "-"
    pieces = [_ESCAPED.get(char, char) for char in " ".join(str(value).split())]
    if sum(map(len, pieces)) <= width:
        return "".join(pieces)
    out, size = [], 0
    for piece in pieces:  # cut between escapes, never inside one
        if size + len(piece) > width - 1:
            break
        out.append(piece)
        size += len(piece)
    return "".join(out) + "\u2026"


def _short(case_id: str) -> str:
    return f"`{case_id[:15]}`"  # b3: and 12 hex digits: unique enough to read, full in --json


def _table(sign: str, rows: list[CaseRow]) -> list[str]:
    lines = ["| | case | run | tenant | first user message | reviewed |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        message = r.first_message if r.first_message == WITHHELD else cell(r.first_message,
                                                                             TEXT_WIDTH)
        lines.append(f"| {sign} | {_short(r.case_id)} | {cell(r.run_id)} | {cell(r.tenant)} | "
                     f"{message} | {cell(r.origin, 96)} |")
    return lines


def _side(word: str, sign: str, total: int, rows: list[CaseRow], more: str) -> list[str]:
    if not total:
        return []
    lines = ["", f"**{total} {word}**", ""] + _table(sign, rows)
    if total > len(rows):
        lines += ["", f"_showing the first {len(rows)} of {total} {word} (in case id order); "
                      f"{more}_"]
    return lines


def markdown(diff: VersionDiff, heading: str = "###") -> str:
    """The diff as a markdown section: a heading, the counts, a table per side."""
    new_name = diff.new_dataset or diff.dataset
    lines = [f"{heading} `{diff.dataset}@{diff.old}` \u2192 `{new_name}@{diff.new}`", "",
             f"{diff.old_count} \u2192 {diff.new_count} cases: **+{diff.added}** added, "
             f"**\u2212{diff.removed}** removed"]
    more = f"`cas diff {diff.dataset} {diff.old} {diff.new} --format markdown --limit N` for more"
    lines += _side("added", "+", diff.added, diff.added_rows, more)
    lines += _side("removed", "\u2212", diff.removed, diff.removed_rows, more)
    return "\n".join(lines) + "\n"


def lock_markdown(repo: Any, old: dict, new: dict, limit: int | None = None,
                  title: str = "cas.lock") -> str:
    """What a lock file's change means, dataset by dataset (`old`, `new`: name -> LockEntry,
    cas/interop/lockfile.py). `repo` is a lockfile.Repositories or a repository. Datasets
    added to or removed from the lock are listed; a move from a retired version to its
    renewal says what the erasure removed (those cases are gone, so none is listed). Without
    `limit`, the rows are shared between the moved datasets so that the comment stays under
    MAX_CHARS."""
    from cas.interop.lockfile import Repositories
    repos = repo if isinstance(repo, Repositories) else Repositories(repo)
    names = sorted(set(old) | set(new))
    changed = [n for n in names if old.get(n) != new.get(n)]
    lines = [f"## Dataset changes in `{title}`", ""]
    if not changed:
        return "\n".join(lines + ["No dataset pin changed."]) + "\n"
    moved = [n for n in changed if n in old and n in new]
    if limit is None:
        limit = max(5, DEFAULT_LIMIT // max(1, len(moved)))
    for name in changed:
        was, now = old.get(name), new.get(name)
        if was is None:
            lines += [f"### `{name}`: added to the lock at `{_label(now.pin)}`", "",
                      _about(repos, now) + "", ""]
            continue
        if now is None:
            lines += [f"### `{name}`: removed from the lock (was `{_label(was.pin)}`)", ""]
            continue
        lines += _moved(repos, name, was, now, limit) + [""]
    text = "\n".join(lines)
    if len(text) > MAX_CHARS:  # many datasets moved at once: cut, and say where it was cut
        text = text[:MAX_CHARS - 200].rsplit("\n", 1)[0] + \
            "\n\n_(cut to stay under the size of a comment: run `cas lock diff` locally)_"
    return text.rstrip("\n") + "\n"


def _label(pin: Pin) -> str:
    return f"{pin.dataset}@{pin.version}"


def _about(repos: Any, entry: Any) -> str:
    try:
        record = repos.of(entry).version(entry.pin.dataset, entry.pin.version)
    except CasError as exc:
        return f"({cell(exc.message, 200)})"
    return f"{record.item_count} cases."


def _moved(repos: Any, name: str, was: Any, now: Any, limit: int) -> list[str]:
    from cas.interop.lockfile import erasure_steps
    head = f"### `{name}`: `{_label(was.pin)}` \u2192 `{_label(now.pin)}`"
    if was.repository != now.repository:
        return [head, "", f"The repository changed ({cell(was.repository, 80)} \u2192 "
                          f"{cell(now.repository, 80)}): the versions are not compared."]
    try:
        target = repos.of(now)
        steps = _renewals(target, was.pin, now.pin)
        if steps is not None:
            out = [head, ""]
            for erasure, when, count in erasure_steps(target, was.pin):
                out.append(f"- {count} cases removed by erasure `{erasure}` at {when}.")
            out += ["", "The erased cases are gone from the repository and are not listed: "
                        "the move only follows the erasure, no case was added."]
            return out
        retired = target.retirement(name, was.pin.version)
        if retired is not None:
            return [head, "", f"`{_label(was.pin)}` is RETIRED ({retired.cause} at "
                              f"{retired.retired_at}) and its cases cannot be listed; "
                              f"`{_label(now.pin)}` holds "
                              f"{target.version(name, now.pin.version).item_count} cases."]
        diff = version_diff(target, name, was.pin.version, now.pin.version, limit)
    except CasError as exc:
        return [head, "", f"Not compared: {cell(exc.message, 300)}"]
    return [head] + markdown(diff).rstrip("\n").split("\n")[1:]


def _renewals(target: Any, old: Pin, new: Pin) -> list | None:
    """The renewals from `old` to `new` when `new` is where they lead, else None."""
    if target.retirement(old.dataset, old.version) is None:
        return None
    path = target.renewal_path(old.dataset, old.version)
    return path if path and path[-1].number == new.version else None
