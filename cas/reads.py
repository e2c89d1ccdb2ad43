"""Reads of an exact version: pages of case ids, cases, diffs, proofs, provenance, objects."""

from __future__ import annotations

from typing import NamedTuple

from . import checks
from .digest import parse_digest
from .errors import DataLoss, NotFound
from .objects import Case, Object, Provenance
from .retirement import active
from .tree import Proof


class ItemsPage(NamedTuple):
    items: list[str]
    next_cursor: str | None  # pass as `after` for the next page; None at the end

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None


class Diff(NamedTuple):
    added: list[str]
    removed: list[str]


class DiffPage(NamedTuple):
    """Up to `limit` changes in id order, split by kind; pass `next_cursor` as `cursor`."""

    added: list[str]
    removed: list[str]
    next_cursor: str | None  # None at the end

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None


def items(ctx, name: str, number: int, after: str | None = None,
          limit: int = 100) -> ItemsPage:
    """One page of case ids of `name@number` in id order, strictly after `after`.

    `limit` is 1..MAX_PAGE (500); anything else is refused, never clamped. `after` need not
    be a member: the page starts strictly after it in id order."""
    checks.page_limit(limit)
    checks.digest_text(after, "cursor", optional=True)
    record = active(ctx, name, number, "listing its cases")
    after = parse_digest(after, "cursor") if after is not None else None
    ids = ctx.trie().page(record.content_digest, after, limit + 1)
    more = len(ids) > limit
    ids = ids[:limit]
    return ItemsPage(ids, ids[-1] if more else None)


def _member(ctx, name: str, number: int, case_id: str, what: str):
    """The record of an ACTIVE `name@number` and the parsed `case_id` it holds."""
    checks.digest_text(case_id, "case id")
    record = active(ctx, name, number, what)
    case_id = parse_digest(case_id, "case id")
    trie = ctx.trie()
    if not trie.contains(record.content_digest, case_id):
        raise NotFound(f"case {case_id} is not in {name}@{number}", case_id=case_id,
                       dataset=name, version=number)
    return record, case_id, trie


def case(ctx, name: str, number: int, case_id: str) -> Case:
    """A case of `name@number`; refused if the version does not hold it."""
    _, case_id, _ = _member(ctx, name, number, case_id, "reading its cases")
    ctx.refuse_erasing(case_id, f"case {case_id}")
    try:
        return ctx.store.get(case_id, Case)
    except NotFound:  # the version holds it: its absence is damage, not an answer
        raise DataLoss(f"case {case_id} of {name}@{number} is missing from the repository "
                       "(run `cas fsck`)", reason="OBJECT_MISSING", case_id=case_id,
                       dataset=name, version=number) from None


def prove(ctx, name: str, number: int, case_id: str) -> Proof:
    """An inclusion proof of `case_id` in `name@number`; refused if the version does not
    hold it (there is nothing to prove)."""
    record, case_id, trie = _member(ctx, name, number, case_id, "proving its cases")
    return trie.prove(record.content_digest, case_id)


def object(ctx, digest: str) -> Object:  # noqa: A001 - the API name is repo.object
    """Any stored object by digest, verified."""
    checks.digest_text(digest, "digest")
    digest = parse_digest(digest)
    ctx.refuse_erasing(digest, f"object {digest}")
    return ctx.store.get(digest)


def object_bytes(ctx, digest: str) -> tuple[str, bytes]:
    """The kind and the canonical bytes of any stored object, verified against `digest`."""
    checks.digest_text(digest, "digest")
    digest = parse_digest(digest)
    ctx.refuse_erasing(digest, f"object {digest}")
    return ctx.store.get_bytes(digest)


def objects_bytes(ctx, digests: list[str]) -> list[tuple[str, bytes]]:
    """The kind and canonical bytes of each stored object of `digests`, verified, in their
    order: read together (a page of a version's cases costs a few requests, not several per
    case)."""
    checks.strings(digests, "digests", "digests")
    digests = [parse_digest(d) for d in digests]
    for digest in digests:
        ctx.refuse_erasing(digest, f"object {digest}")
    return ctx.store.get_many_bytes(digests)


def diff(ctx, name: str, old: int, new: int, new_dataset: str | None = None) -> Diff:
    """Every case id added and removed from `name@old` to `new_dataset or name`@`new`."""
    a, b = _pair(ctx, name, old, new, new_dataset)
    return Diff(*ctx.trie().diff(a.content_digest, b.content_digest))


def _pair(ctx, name, old, new, new_dataset):
    if new_dataset is not None:
        checks.dataset_name(new_dataset)
    return (active(ctx, name, old, "listing its cases"),
            active(ctx, new_dataset or name, new, "listing its cases"))


def diff_page(ctx, name: str, old: int, new: int, cursor: str | None = None,
              limit: int = 100, new_dataset: str | None = None) -> DiffPage:
    """One page of the changes from `name@old` to `new_dataset or name`@`new`: the
    id-ordered list of added and removed ids, strictly after `cursor`, up to `limit`
    (1..500) changes. Costs O(page x depth), not O(diff)."""
    checks.page_limit(limit)
    checks.digest_text(cursor, "cursor", optional=True)
    a, b = _pair(ctx, name, old, new, new_dataset)
    cursor = parse_digest(cursor, "cursor") if cursor is not None else None
    added: list[str] = []
    removed: list[str] = []
    last = None
    changes = ctx.trie().iter_diff(a.content_digest, b.content_digest, cursor)
    for n, (case_id, is_added) in enumerate(changes):
        if n == limit:  # one change beyond the page: there is more
            return DiffPage(added, removed, last)
        (added if is_added else removed).append(case_id)
        last = case_id
    return DiffPage(added, removed, None)


def provenance(ctx, name: str, number: int) -> list:
    """Per case a version promoted: the run, the review annotation, the reviewer and the
    review time (empty for versions not sealed by a promotion)."""
    record = active(ctx, name, number, "reading its provenance")
    if record.provenance is None:
        return []
    return ctx.store.get(record.provenance, Provenance).entries
