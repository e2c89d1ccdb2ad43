"""Reads of an exact version: pages of case ids, cases, diffs, proofs, provenance, objects."""

from __future__ import annotations

from typing import Iterable, Iterator, NamedTuple

import msgspec

from cas.digest import parse_digest
from cas.errors import CorruptData, DataLoss, InvalidArgument, NotFound
from cas.format import encoding
from cas.format.records import (Case, Object, Provenance, ProvenanceEntry, ProvenanceRuns,
                                VersionRecord, VersionRetirement, check_format, decode_object)
from cas.format.version_names import check_dataset_name
from cas.repo import checks, datasets
from cas.repo.retirement import ACTIVE, RETIRED, active
from cas.storage.tree import Proof


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
    return _page(ctx, name, number, after, limit)[1]


def _page(ctx, name: str, number: int, after: str | None,
          limit: int) -> tuple[VersionRecord, ItemsPage]:
    """`items`, with the record of the version it read."""
    checks.page_limit(limit)
    checks.digest_text(after, "cursor", optional=True)
    record = active(ctx, name, number, "listing its cases")
    after = parse_digest(after, "cursor") if after is not None else None
    ids = ctx.trie().page(record.content_digest, after, limit + 1)
    more = len(ids) > limit
    ids = ids[:limit]
    return record, ItemsPage(ids, ids[-1] if more else None)


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


def cases(ctx, name: str, number: int, case_ids: Iterable[str]) -> list[Case]:
    """The cases `case_ids` of `name@number`, in that order, read together; refused if the
    version does not hold one of them."""
    return cases_of(ctx, name, number, case_ids, "reading its cases")


def cases_of(ctx, name: str, number: int, case_ids: Iterable[str], what: str) -> list[Case]:
    """The cases `case_ids` of an ACTIVE `name@number`, read together; refused (saying
    `what` was refused) if the version is retired or does not hold one of them."""
    record = active(ctx, name, number, what)
    case_ids = checks.strings(case_ids, "case_ids", "case ids")
    for case_id in case_ids:
        checks.digest_text(case_id, "case id")
    ids = [parse_digest(c, "case id") for c in case_ids]
    trie = ctx.trie()
    for case_id in ids:
        if not trie.contains(record.content_digest, case_id):
            raise NotFound(f"case {case_id} is not in {name}@{number}", case_id=case_id,
                           dataset=name, version=number)
    return _cases(ctx, ids)


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
        check_dataset_name(new_dataset)
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
    """Per case a version added: for a promotion the run, the review annotation, the
    reviewer and the review time; for a direct commit its author (empty for versions sealed
    before commits recorded it, and for removals)."""
    record = active(ctx, name, number, "reading its provenance")
    if record.provenance is None:
        return []
    found = ctx.store.get(record.provenance, Provenance)
    if found.committed_by is msgspec.UNSET:
        return found.entries
    if record.parent is not None:  # the compact form holds only for a version with no parent
        raise CorruptData(f"{name}@{number} has a parent ({record.parent}) but its provenance "
                          f"{record.provenance} says it committed every case it holds",
                          dataset=name, version=number)
    return [ProvenanceEntry(case_id=c, committed_by=found.committed_by)
            for c in ctx.trie().iterate(record.content_digest)]


def case_origins(ctx, name: str, number: int, ids: list[str]) -> dict[str, ProvenanceEntry]:
    """case id -> the provenance entry of the version that added it (the run and review of a
    promotion, or `committed_by` of a commit), for the `ids` of the ACTIVE `name@number`
    found along its parent chain. Ancestors are read whatever their state (a renewal's parent
    is retired), and a provenance an erasure deleted is passed over: those ids are missing."""
    record = active(ctx, name, number, "reading its provenance")  # (name and number checked)
    rest: set[str] = set(checks.strings(ids, "ids", "case ids"))
    found: dict[str, ProvenanceEntry] = {}
    for record in _lineage(ctx, record):
        if not rest:
            break
        if record.provenance is None:
            continue
        try:
            prov = ctx.store.get(record.provenance, Provenance)
        except NotFound:
            continue  # deleted with the erased case it named
        if prov.committed_by is not msgspec.UNSET:
            # a first version's compact form: it committed every case it holds
            found.update({c: ProvenanceEntry(case_id=c, committed_by=prov.committed_by)
                          for c in rest})
            break
        for entry in prov.entries:
            if entry.case_id in rest:
                found[entry.case_id] = entry
                rest.discard(entry.case_id)
    return found


# -- readable listings and lookups (issue 12) ----------------------------------------------
MIN_PREFIX = 8       # hex digits: fewer would match too many ids to be worth a lookup
MAX_CANDIDATES = 20  # an ambiguous prefix lists at most this many of the ids it matches
_HEX = frozenset("0123456789abcdef")


class CaseSummary(NamedTuple):
    """A case as a listing shows it: its id, the run the version's provenance names for it
    (None for a directly committed case), and its tenant and outcome (from its bytes)."""

    case_id: str
    run_id: str | None
    tenant: str | None
    outcome: object


class DetailedItemsPage(NamedTuple):
    items: list[CaseSummary]
    next_cursor: str | None
    version: VersionRecord  # the version listed, ACTIVE when the page was read

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None


class DetailedDiffPage(NamedTuple):
    """A diff page whose added cases are described as `new` holds them, removed ones as
    `old` does."""

    added: list[CaseSummary]
    removed: list[CaseSummary]
    next_cursor: str | None

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None


def _provenances(ctx, record) -> Iterator[ProvenanceRuns]:
    """The provenance of `record` and of each ancestor along its parent chain that promoted
    runs, newest first. A version's provenance names only the cases it added: a carried case
    is described by the version that added it. (A commit's names no run, only each case's
    author: it is never read for run ids, and a commit of a million cases is not decoded for
    a page of a hundred.)"""
    for record in _lineage(ctx, record):
        if record.provenance is not None and record.operation != "commit":
            try:
                yield _provenance_runs(ctx, record.provenance)
            except NotFound:
                pass  # an erasure deleted it with the erased case it named: those show no run


def _lineage(ctx, record) -> Iterator[VersionRecord]:
    """`record`, then each ancestor along its parent chain, whatever its state. A deleted
    ancestor cuts the chain (what it added shows no origin); a loop is followed once."""
    seen: set[int] = set()
    while True:
        yield record
        if record.parent is None or record.parent in seen:
            return
        seen.add(record.parent)
        try:
            record = ctx.refs.read_version(record.dataset, record.parent)
        except NotFound:
            return


def _provenance_runs(ctx, digest: str) -> ProvenanceRuns:
    kind, data = ctx.store.get_bytes(digest)
    if kind != "provenance":
        raise CorruptData(f"object {digest} is a {kind}, expected a provenance", digest=digest)
    return check_format(encoding.decode(data, ProvenanceRuns, f"provenance {digest}"),
                        f"provenance {digest}")


def _runs_of(ctx, record, wanted: set[str]) -> dict[str, str]:
    """case id -> run id for the ids of `wanted` a provenance of `record`'s chain names."""
    found: dict[str, str] = {}
    rest = set(wanted)
    if not rest:
        return found
    for prov in _provenances(ctx, record):
        for entry in prov.entries:
            run_id = entry.run_id
            if entry.case_id in rest and isinstance(run_id, str):
                found[entry.case_id] = run_id
                rest.discard(entry.case_id)
        if not rest:
            break
    return found


def summaries(ctx, record, ids: list[str]) -> list[CaseSummary]:
    """The summaries of `ids` (cases `record` holds): their bytes read together, in one call,
    and, in a `direct` dataset, the provenance chain walked only for cases whose bytes name a
    run (a promoted case always does; a case whose bytes name none was committed directly;
    one committed with a run id in its bytes shows none)."""
    cases = _cases(ctx, ids)
    named = {i: c.run_id for i, c in zip(ids, cases) if getattr(c, "run_id", None) is not None}
    if named and datasets.admission(ctx, record.dataset) == "reviewed":
        # Only promotions add cases to such a dataset, and a promotion freezes its run's id
        # into the case: the bytes say what the provenance chain would, without decoding it
        # (a 10k-case promotion's provenance is 2 MB; a page could need ten of them).
        return _summarized(ids, cases, named)
    return _summarized(ids, cases, _runs_of(ctx, record, set(named)))


def summarize(ctx, ids: list[str], runs: dict[str, str]) -> list[CaseSummary]:
    """The summaries of stored cases `ids` whose run ids are known (`runs`: case id -> run
    id, from a provenance): their bytes read together, in one call."""
    return _summarized(ids, _cases(ctx, ids), runs)


def _cases(ctx, ids: list[str]) -> list:
    for case_id in ids:
        ctx.refuse_erasing(case_id, f"case {case_id}")
    return [decode_object(kind, data, f"case {case_id}") for case_id, (kind, data)
            in zip(ids, ctx.store.get_many_bytes(ids) if ids else [])]


def _summarized(ids: list[str], cases: list, runs: dict[str, str]) -> list[CaseSummary]:
    return [CaseSummary(i, runs.get(i), getattr(c, "tenant", None), getattr(c, "outcome", None))
            for i, c in zip(ids, cases)]


def items_detailed(ctx, name: str, number: int, after: str | None = None,
                   limit: int = 100) -> DetailedItemsPage:
    """`items`, with each case's run id, tenant and outcome: the page's cases are read in one
    batch, and the provenance once per page. The page carries the version's record (ACTIVE
    when read: a retired version is refused)."""
    record, page = _page(ctx, name, number, after, limit)
    return DetailedItemsPage(summaries(ctx, record, page.items), page.next_cursor, record)


def diff_detailed(ctx, name: str, old: int, new: int, cursor: str | None = None,
                  limit: int = 100, new_dataset: str | None = None) -> DetailedDiffPage:
    """`diff_page`, with each changed case's run id, tenant and outcome."""
    page = diff_page(ctx, name, old, new, cursor=cursor, limit=limit, new_dataset=new_dataset)
    a, b = _pair(ctx, name, old, new, new_dataset)
    return DetailedDiffPage(summaries(ctx, b, page.added), summaries(ctx, a, page.removed),
                            page.next_cursor)


def _prefix(text: str) -> str | None:
    """The lower-case hex digits of a digest prefix `b3:<hex>` (any letter case), or None
    when `text` is not one."""
    candidate = text.strip()
    if candidate[:3].lower() != "b3:":
        return None
    digits = candidate[3:].lower()
    return digits if digits and len(digits) <= 64 and _HEX.issuperset(digits) else None


def resolve_case(ctx, name: str, number: int, case_id: str | None = None,
                 run_id: str | None = None) -> str:
    """The id of the case of `name@number` named by `case_id` (a full id, or a unique prefix
    `b3:` + at least 8 hex digits) or by `run_id` (the run its provenance names); exactly one
    of the two. Refused: no such case (NotFound), an ambiguous prefix (AMBIGUOUS_PREFIX) or run
    (AMBIGUOUS_RUN), with the candidate ids."""
    if (case_id is None) == (run_id is None):
        raise InvalidArgument("name a case by its id (or an id prefix) or by its run id, "
                              "exactly one of the two", reason="USAGE")
    if run_id is not None:
        return _case_of_run(ctx, name, number, run_id)
    checks.digest_text(case_id, "case id")
    digits = _prefix(case_id)
    if digits is None or len(digits) == 64:
        return _member(ctx, name, number, case_id, "reading its cases")[1]
    if len(digits) < MIN_PREFIX:
        raise InvalidArgument(
            f"case id prefix {case_id!r} is too short: give 'b3:' and at least {MIN_PREFIX} "
            "hex digits", reason="PREFIX_TOO_SHORT", value=case_id, minimum=MIN_PREFIX)
    record = active(ctx, name, number, "reading its cases")
    prefix = "b3:" + digits
    matches = _with_prefix(ctx.trie(), record.content_digest, prefix)
    if not matches:
        raise NotFound(f"no case of {name}@{number} has an id starting {prefix}",
                       reason="NO_CASE_WITH_PREFIX", prefix=prefix, dataset=name,
                       version=number)
    if len(matches) > 1:
        shown = ", ".join(matches[:3]) + (", ..." if len(matches) > 3 else "")
        raise InvalidArgument(
            f"case id prefix {prefix} is ambiguous in {name}@{number}: it matches "
            f"{_count(matches)} ({shown}); give more digits", reason="AMBIGUOUS_PREFIX",
            prefix=prefix, candidates=matches[:MAX_CANDIDATES], dataset=name, version=number)
    return matches[0]


def _count(matches: list[str]) -> str:
    more = "or more " if len(matches) > MAX_CANDIDATES else ""
    return f"{min(len(matches), MAX_CANDIDATES)} {more}cases"


def _with_prefix(trie, root: str, prefix: str) -> list[str]:
    """Up to MAX_CANDIDATES + 1 ids under `root` that start with `prefix`: an ordered walk
    from the smallest id with that prefix, stopped at the first id past it (a page walk, not
    a scan). The walk starts strictly after the prefix padded with zeros, an id that may
    itself be a member, so that one is looked up first."""
    low = prefix + "0" * (67 - len(prefix))
    out = [low] if trie.contains(root, low) else []
    for case_id in trie.iterate(root, after=low):
        if not case_id.startswith(prefix) or len(out) > MAX_CANDIDATES:
            break
        out.append(case_id)
    return out


def _case_of_run(ctx, name: str, number: int, run_id: str) -> str:
    """The one case of `name@number` whose provenance names `run_id`. Every provenance of the
    version's chain is read (two cases of one run, frozen under two policies, may have been
    added by different versions); each id found is then looked up in the version."""
    encoding.check_text(run_id, "run id")
    record = active(ctx, name, number, "reading its cases")
    named = sorted({e.case_id for prov in _provenances(ctx, record) for e in prov.entries
                    if e.run_id == run_id})
    trie = ctx.trie()
    held = [c for c in named if trie.contains(record.content_digest, c)]
    if not held:
        raise NotFound(f"no case of {name}@{number} was promoted from run {run_id!r}",
                       reason="RUN_NOT_IN_VERSION", run_id=run_id, dataset=name,
                       version=number)
    if len(held) > 1:
        raise InvalidArgument(
            f"{name}@{number} holds {len(held)} cases of run {run_id!r} (frozen under "
            f"different content policies): {', '.join(held)}; name one by its id",
            reason="AMBIGUOUS_RUN", run_id=run_id, case_ids=held, dataset=name,
            version=number)
    return held[0]


class VersionEntry(NamedTuple):
    """A version as `cas dataset show` lists it: its record, ACTIVE or RETIRED, and the
    retirement (its cause and time) when retired."""

    record: VersionRecord
    state: str
    retirement: VersionRetirement | None


class VersionListing(NamedTuple):
    versions: list[VersionEntry]
    next_before: int | None  # pass as `before` for the next page; None at the end


def version_listing(ctx, name: str, before: int | None = None,
                    limit: int = 20) -> VersionListing:
    """A page of `name`'s versions, newest first (as `versions`), each with its state. Never
    refused for a retired version: saying that it is retired is the point."""
    page = datasets.versions(ctx, name, before=before, limit=limit)
    out = []
    for record in page.versions:
        retired = ctx.refs.read_retirement(name, record.number)
        out.append(VersionEntry(record, ACTIVE if retired is None else RETIRED, retired))
    return VersionListing(out, page.next_before)
