"""Erasure: delete a person's cases, runs and reviews wherever the repository keeps bytes, and
retire every version that held one of their cases (docs/concepts.md, docs/format.md).

Finding the data costs what the person holds, not what the repository holds: every pack that
stores a case or run naming a person is indexed by the keyed digest of that person before the
pack is written (`persons/<shard>/<pack>`). Carrying it out is journalled: a lease first (so
writers that start now wait for it), the plan (`erasures/pending/<id>`), then versions are
retired, the writers that started earlier are waited for and what they stored joins the plan,
packs are rewritten without the objects, staged proposals and log records cleaned, and last the
erasure record written and the plan deleted. Every step is idempotent, and the next command
that writes finishes a plan it finds (reads refuse what a plan names meanwhile), so an
interrupted erasure is either invisible (no plan) or completed.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from cas.digest import from_bytes, to_bytes
from cas.errors import (STORAGE_FAILURES, Aborted, CasError, DataLoss, FailedPrecondition,
                        InvalidArgument, NotFound)
from cas.format import encoding
from cas.format.keys import (DATASETS, LOG, PENDING, PERSONS, STAGING_AGE, index_key, log_key,
                             pack_key, parse_proposal_key, pending_key, person_shard)
from cas.format.records import (KIND_CODES, Erasure, ErasurePlan, PersonIndex, Proposal, Provenance,
                                ReviewBatch, RunRecord, VersionRef, format_record_file,
                                parse_record_file)
from cas.repo import checks, datasets, retirement, reviews
from cas.repo.checks import Progress
from cas.repo.citations import recorded_scores, score_id
from cas.repo.erased import keyed_person
from cas.repo.experiments import experiments
from cas.repo.proposals import delete_proposal
from cas.repo.reviews import check_token, confirm_token
from cas.storage import leases, log_index, maintenance
from cas.storage import pack as packfmt


# -- finding a person's data ------------------------------------------------------------------
def _indexed_objects(ctx, person: str) -> dict[str, set[str]]:
    """Digest -> packs said to hold it, of every indexed object of the person (keyed digest
    `person`)."""
    store = ctx.store
    shard = person_shard(person)
    found: dict[str, set[str]] = {}
    indexed = set()  # packs whose index of this shard was read
    listed = store.persons.files()
    for pid, files in sorted(listed.items()):
        if not files.names(shard, table_only=True):
            continue
        try:
            rows = store.persons.table_shard(files.table, shard)
        except STORAGE_FAILURES:
            raise  # unread is not damaged: a preview or plan must not be built on a guess
        except CasError:
            continue  # gone (its pack was just rewritten), or damaged: the pack is read below
        indexed.add(pid)
        for named, digest in rows:
            if named == person:
                found.setdefault(digest, set()).add(pid)
    # Packs written before person tables have a person index record per shard.
    for key in ctx.backend.list(f"{PERSONS}{shard}/"):
        try:
            record = parse_record_file(ctx.backend.get(key), PersonIndex, key)
        except STORAGE_FAILURES:
            raise
        except CasError:
            continue  # gone (its pack was just rewritten), or damaged: the pack is read below
        indexed.add(record.pack)
        for e in record.entries:
            if e.person == person:
                found.setdefault(e.digest, set()).add(record.pack)
    # A published pack whose person index cannot be trusted for this shard (the file it should
    # have is missing or damaged, or the pack has no person index files at all: written before
    # cas recorded them) is read whole instead: an erasure never skips data it cannot see.
    for pid in store.pack_ids():
        files = listed.get(pid)
        if files is not None and (pid in indexed or not files.names(shard)):
            continue
        try:
            for digest in store.person_objects(pid, person):
                found.setdefault(digest, set()).add(pid)
        except NotFound:
            continue  # rewritten meanwhile: its replacement has a person index of its own
    return found


def _classify(ctx, digests: dict[str, set[str]]) -> tuple[list[str], ...]:
    """(case ids, run digests, provenance digests, cassette digests, suite result digests)
    among `digests` that are still stored.
    An object the person index places in a pack that is still published, but that no lookup
    finds, means a damaged index: refused, never counted as absent (the erasure would leave
    it behind)."""
    cases, runs, provenance, cassettes, results = [], [], [], [], []
    where = ctx.store.locate_many(digests)
    for digest in sorted(digests):
        located = where.get(digest)
        if located is None:
            located = _in_pack_index(ctx, digest, digests[digest])
        if located is None:
            continue
        if located[1].kind == KIND_CODES["case"]:
            cases.append(digest)
        elif located[1].kind == KIND_CODES["run"]:
            runs.append(digest)
        elif located[1].kind == KIND_CODES["provenance"]:
            provenance.append(digest)
        elif located[1].kind == KIND_CODES["cassette"]:
            cassettes.append(digest)
        elif located[1].kind == KIND_CODES["suite.result"]:
            results.append(digest)  # a recorded suite run: answers to the person's cases
    return cases, runs, provenance, cassettes, results


def _in_pack_index(ctx, digest: str, packs: set[str]):
    """Where `digest` is, by the whole index of each pack the person index places it in, when
    a lookup did not find it: a pack published since the lookup listed the indexes (its person
    index was written first), or a pack whose index is damaged (`DATA_LOSS`, never absence)."""
    raw = to_bytes(digest)
    for pid in sorted(packs):
        try:
            data = ctx.backend.get(index_key(pid))
        except NotFound:
            continue  # not published, or replaced since: its objects are elsewhere, or erased
        _, entries = packfmt.parse_index(data, index_key(pid))  # DATA_LOSS if damaged
        for e in entries:
            if e.digest == raw:
                return pack_key(pid), e
        raise DataLoss(f"the person index places {digest} in pack {pid}, whose index does not "
                       "list it: an index is damaged; run `cas fsck`",
                       reason="PERSON_INDEX_DAMAGED", digest=digest, pack=pid)
    return None


def holders(ctx, cases, trie) -> list:
    """Version records of every live version holding any of `cases` (`trie`: the erasure's
    one, which walks again only what it has not seen)."""
    if not cases:
        return []
    versions = list(datasets.live_versions(ctx))
    held = trie.holding([v.content_digest for v in versions], cases)
    return [v for v, holds in zip(versions, held) if holds]


def _holding_proposals(ctx, cases, trie) -> list:
    """(key, proposal) of the staged proposals whose proposed set holds one of `cases`
    (sealing one would bring an erased case back, or build on a set that lost one)."""
    if not cases:
        return []

    def holds(p) -> bool:
        try:
            return trie.holding([p.proposed_root], cases)[0]
        except STORAGE_FAILURES:
            raise  # unread is not damaged: a good proposal would be deleted as one
        except CasError:
            return True  # damaged (a tree node lost): it can never seal; delete it too
    return [(key, p) for key, p in _proposals(ctx) if p is None or holds(p)]


def _reviews_of(ctx, runs: set[str]) -> list[str]:
    return reviews.index(ctx).annotations_of(runs) if runs else []


def _proposals(ctx):
    """(key, proposal) of every staged proposal of every dataset."""
    for name in ctx.refs.dataset_names():
        for key in ctx.backend.list(f"{DATASETS}{name}/proposals/"):
            try:
                yield key, parse_record_file(ctx.backend.get(key), Proposal, key)
            except NotFound:
                continue
            except STORAGE_FAILURES:
                raise  # unread is not damaged: a good proposal would be deleted as one
            except CasError:
                yield key, None  # a damaged record: never an obstacle to an erasure


# -- preview and confirm ----------------------------------------------------------------------
def preview(ctx, person: str, trie=None) -> tuple[dict[str, Any], ErasurePlan]:
    """What erasing `person` deletes and retires, and the plan a confirmation would carry out
    (`trie`: as in `holders`)."""
    trie = trie or ctx.trie()
    keyed = keyed_person(ctx, person)
    cases, runs, _, cassettes, results = _classify(ctx, _indexed_objects(ctx, keyed))
    run_set = set(runs)
    reviews = _reviews_of(ctx, run_set)
    held = holders(ctx, cases, trie)
    # The completed erasures are part of the request: the same data imported again after an
    # erasure is a new erasure, never mistaken for a retry of the old one.
    done = sorted(k[len(LOG):] for k in ctx.backend.list(LOG))
    token = confirm_token("erase", {"person": keyed, "cases": cases, "runs": runs,
                                    "reviews": reviews, "after": done,
                                    "versions": [[v.dataset, v.number] for v in held]})
    proposals = sorted("/".join(parse_proposal_key(key))
                       for key, p in _holding_proposals(ctx, cases, trie))
    run_ids = sorted(ctx.store.get(d, RunRecord).run_id for d in runs)
    versions, citing_scores, citing_experiments = [], [], []
    for v in held:
        state = retirement.state_of(ctx, v.dataset, v.number)  # (v was just listed)
        versions.append({"dataset": v.dataset, "number": v.number, "state": state,
                         "item_count": v.item_count, "content_digest": v.content_digest})
    for name in sorted({v.dataset for v in held}):
        numbers = {v.number for v in held if v.dataset == name}
        citing_scores += [{"dataset": name, "version": s.version, "score_id": score_id(key, i),
                           "metric": s.metric} for _, key, i, s in recorded_scores(ctx, name)
                          if s.version in numbers]
        citing_experiments += [{"dataset": name, "version": e.version, "name": e.name}
                               for e in experiments(ctx, name) if e.version in numbers]
    plan = ErasurePlan(id=token, person=keyed, cases=cases, runs=runs, reviews=reviews,
                       author="", started_at="")
    # Reviews and proposals are found through the cases and runs: with neither, nothing matched.
    matched = bool(cases or runs)
    warnings = [] if matched else [f"nothing matched {person}: no case, run or review names "
                                   "this person id; confirming erases nothing and records nothing"]
    return {"confirm_token": token, "person": keyed, "matched": matched, "warnings": warnings,
            "cases": cases, "runs": run_ids,
            "reviews": reviews, "cassettes": len(cassettes), "suite_results": len(results),
            "versions_to_retire": versions,
            "citing_scores": citing_scores,
            "citing_experiments": citing_experiments, "proposals_to_delete": proposals}, plan


def erase(ctx, person: str, confirm_token: str | None = None, author: str | None = None,
          wait: float | None = None,
          progress: Progress | None = None) -> dict[str, Any] | Erasure:
    """Preview (no token: a dict with `confirm_token`; `matched` is false, with a warning, when
    nothing names the person) or carry out (the preview's token) the erasure of a person's
    cases, runs and reviews; returns the Erasure record. Confirming an erasure that matched
    nothing raises FAILED_PRECONDITION `NOTHING_TO_ERASE` and writes nothing. It first waits
    (up to `wait` seconds, telling `progress(stage, done, total)`) for writers that started
    before it. Confirming a token whose erasure already completed returns that record again
    (a retried command erases nothing twice)."""
    if not isinstance(person, str):
        raise InvalidArgument(f"a person id is a string, not {encoding.describe(person)}")
    encoding.check_text(person, "person id")
    checks.confirm_token(confirm_token)
    checks.seconds(wait, "wait", optional=True)
    checks.progress(progress)
    author, now = checks.author(author), ctx.clock()
    keyed = keyed_person(ctx, person)
    if confirm_token is not None and isinstance(confirm_token, str) and \
            confirm_token.isprintable() and "/" not in confirm_token:
        done = read_log(ctx, confirm_token)
        if done is not None and done.person == keyed:
            return done
        pending = _read_plan(ctx, confirm_token)
        if pending is not None and pending.person == keyed:
            # confirmed before and left waiting for writers: finish that erasure
            with leases.erasing(ctx, pending.id, _waiting(wait)) as barrier:
                return complete(ctx, pending, barrier, wait, progress)
    trie = ctx.trie()  # the preview's walks are the completion's, mostly
    shown, plan = preview(ctx, person, trie)
    if not check_token(confirm_token, plan.id):
        return shown
    if not shown["matched"]:
        # No record: a record of nobody's data would only say that a person id was asked for
        # (and would refuse their future imports, as though data of theirs had been erased).
        raise FailedPrecondition(f"nothing matched {person}: no case, run or review names this "
                                 "person id; nothing was erased and no erasure was recorded",
                                 reason="NOTHING_TO_ERASE")
    plan = msgspec.structs.replace(plan, author=author, started_at=now)
    # The barrier first: writers that start from here on see it and wait for this erasure.
    with leases.erasing(ctx, plan.id, _waiting(wait)) as barrier:
        ctx.backend.put_if_absent(pending_key(plan.id), format_record_file(plan))
        return complete(ctx, plan, barrier, wait, progress, trie)


def _waiting(wait: float | None) -> float:
    """How long an erasure waits for another one at work (as for writers)."""
    return leases.ERASURE_WAIT if wait is None else wait


def _read_plan(ctx, erasure_id: str) -> ErasurePlan | None:
    return _read_record(ctx, pending_key, ErasurePlan, erasure_id)


def read_log(ctx, erasure_id: str) -> Erasure | None:
    return _read_record(ctx, log_key, Erasure, erasure_id)


def read_plan(ctx, erasure_id: str) -> ErasurePlan | None:
    """The plan of a pending erasure, or None (none, or completed since)."""
    return _read_plan(ctx, erasure_id)


def _read_record(ctx, key_of, type_, erasure_id: str):
    try:
        key = key_of(erasure_id)
        return parse_record_file(ctx.backend.get(key), type_, key)
    except (NotFound, InvalidArgument):
        return None


# -- carrying it out ---------------------------------------------------------------------------
def complete(ctx, plan: ErasurePlan, barrier: leases.Held, wait: float | None = None,
             progress: Progress | None = None, trie=None) -> Erasure:
    """Carry out (or finish) a stored plan, under the erasure's lease `barrier`. Each step can
    be repeated after a crash. `progress(stage, done, total)` hears of a wait for writers;
    `trie` is as in `holders`."""
    backend = ctx.backend
    trie = trie or ctx.trie()
    # 1. Retire first: no version is ever active while it lacks a case.
    _retire_holders(ctx, plan, trie)
    # 2. Writers that started before the barrier may be storing the person's data right now
    #    (a promotion of their run, an import): wait until they are done, then find what they
    #    stored. Writers that started after it wait for this erasure instead (leases.py).
    writers = leases.of_role(barrier.others, leases.WRITER)
    busy = leases.wait_for(ctx, writers, leases.ERASURE_WAIT if wait is None else wait,
                           progress)
    if busy:
        raise Aborted(f"erasure {plan.id} is recorded and waits for {len(busy)} writer(s) that "
                      f"started before it ({busy[0]}); it completes once they are done: run the "
                      "same command again (the next command that writes to this repository also "
                      "finishes it)", reason="ERASURE_WAITING", erasure=plan.id, writers=busy)
    # 3. What they stored joins the plan (journalled first), and its versions are retired.
    found_cases, found_runs, found_provenance, found_cassettes, found_results = _classify(
        ctx, _indexed_objects(ctx, plan.person))
    plan = _extend(ctx, plan, found_cases, found_runs)
    cases, runs = set(plan.cases), set(plan.runs)
    retired = _retire_holders(ctx, plan, trie)
    # 4. Everything that holds the bytes: cases, runs, the cassettes of their cases, recorded
    #    suite results answering them, and provenance naming the cases: the provenance (and
    #    cassettes and results) the person index lists under the person (wherever it is, also
    #    that of a deleted version or of a proposal gc collected), of staged proposals and of
    #    the retired versions.
    proposals = _holding_proposals(ctx, plan.cases, trie)
    drop = cases | runs | set(found_provenance) | set(found_cassettes) | set(found_results) \
        | _naming_provenance(ctx, cases, {p.provenance for _, p in proposals if p is not None}
                             | {v.provenance for v in retired})
    # 5. Rewrite every pack holding one of them; delete unpublished packs holding one.
    rewritten, dropped, written = purge(ctx, drop, barrier)
    sweep = getattr(backend, "sweep_staging", None)
    if sweep is not None:  # a write killed before this erasure may have staged their bytes
        sweep(time.time() - STAGING_AGE)
    # 6. Staged proposals that would bring an erased case back (or that hold one through their
    #    base), and their idempotency keys.
    for key, p in proposals:
        delete_proposal(ctx, key, p)
    # 7. Log records naming the runs: replaced by copies without them.
    _redact(ctx, log_index.RUNS, runs)
    _redact(ctx, log_index.REVIEWS, runs)
    ctx.forget()  # the run and review indexes were read from records now redacted
    # 8. Versions sealed on a retired base while we worked, then the record, then the plan.
    retired = _retire_holders(ctx, plan, trie)
    record = Erasure(id=plan.id, person=plan.person, cases=plan.cases, runs=plan.runs,
                     reviews=plan.reviews,
                     retired=[VersionRef(dataset=r.dataset, number=r.number) for r in retired],
                     proposals_deleted=len(proposals), objects_deleted=dropped,
                     packs_rewritten=rewritten, bytes_rewritten=written, author=plan.author,
                     started_at=plan.started_at, erased_at=ctx.clock())
    if not backend.put_if_absent(log_key(plan.id), format_record_file(record)):
        record = read_log(ctx, plan.id) or record
    backend.delete(pending_key(plan.id))
    return record


def copies_in(ctx, record: Erasure | ErasurePlan, packs: set[str]) -> set[str]:
    """What of an erasure (its record, or its plan while it works) a gc may have copied into
    `packs` before the erasure purged them (gc publishes a pack after it copies; an erasure
    leaves a pack gc may be publishing alone): every object the person index lists under the
    erased person there, and the provenance there naming one of its cases."""
    if not packs:
        return set()
    found = {d for d, where in _indexed_objects(ctx, record.person).items() if where & packs}
    provenance = set()
    for pid in sorted(packs):
        try:
            _, entries = packfmt.parse_index(ctx.backend.get(index_key(pid)), index_key(pid))
        except NotFound:
            continue  # rewritten since: its objects are where the index says, and found so
        provenance |= {from_bytes(e.digest) for e in entries
                       if e.kind == KIND_CODES["provenance"]}
    return found | _naming_provenance(ctx, set(record.cases), provenance)


def _naming_provenance(ctx, cases: set[str], candidates: set) -> set[str]:
    """The provenance objects among `candidates` that name an erased case (one is shared by
    content: it is dropped only if it names one)."""
    out = set()
    for prov in candidates - {None}:
        try:
            entries = ctx.store.get(prov, Provenance).entries
        except NotFound:
            continue  # dropped by an earlier attempt
        if any(e.case_id in cases for e in entries):
            out.add(prov)
    return out


def _extend(ctx, plan: ErasurePlan, cases: list[str], runs: list[str]) -> ErasurePlan:
    """The plan with the cases and runs the person index names now (what writers stored while
    the plan was made), journalled before anything of it is deleted, so a crash after the
    purge still records every case it erased."""
    new_cases, new_runs = set(cases) - set(plan.cases), set(runs) - set(plan.runs)
    reviews = set(_reviews_of(ctx, set(runs) | set(plan.runs))) - set(plan.reviews)
    if not (new_cases or new_runs or reviews):
        return plan
    plan = msgspec.structs.replace(plan, cases=sorted(new_cases.union(plan.cases)),
                                   runs=sorted(new_runs.union(plan.runs)),
                                   reviews=sorted(reviews.union(plan.reviews)))
    ctx.backend.replace(pending_key(plan.id), format_record_file(plan))
    return plan


def purge(ctx, drop: set[str], lease: leases.Held | None = None) -> tuple[int, int, int]:
    """Rewrite every pack holding an object of `drop` without it (repeating: another writer
    may store one again meanwhile, or gc may replace a pack), and delete any unpublished pack
    holding one, except, for an erasure (`lease`) while a gc is at work, a pack that gc may be
    publishing. Returns (packs rewritten, objects dropped, bytes written)."""
    rewritten = dropped = written = 0
    raw_drop = {to_bytes(d) for d in drop}
    for _ in range(5):
        packs = {key[len("packs/"):-len(".pack")]
                 for key, _ in ctx.store.locate_many(drop).values()}
        if not packs:
            break
        for pid in sorted(packs):
            if lease is not None:
                lease.renew()  # a long purge must not look dead to the writers waiting on it
            try:
                result = maintenance.rewrite_pack(ctx.store, pid, raw_drop)
            except NotFound:
                continue  # gc replaced it meanwhile: located again in the next round
            rewritten += 1
            dropped += result.dropped
            written += result.bytes_written
    # A rewrite interrupted between unpublishing a pack and deleting it left the pack behind.
    # So does a gc's rewrite in flight, between its new pack and the index publishing it:
    # deleting that pack would leave the index naming no pack, and lose the live objects the
    # gc copied into it. While a gc is at work an erasure leaves such packs to it: the gc
    # purges, once its rewrites are published, every erasure recorded or pending by then.
    if lease is not None and _gc_at_work(ctx):
        unindexed = []
    else:
        unindexed = ctx.store.unindexed_packs()
    for pid in unindexed:
        try:
            held, shards = ctx.store.pack_objects(pid)
        except NotFound:
            continue
        if held & raw_drop:
            maintenance.drop_pack(ctx.store, pid, shards)
    for digest in drop:
        ctx.store.evict(digest)
    return rewritten, dropped, written


def _gc_at_work(ctx) -> bool:
    """Whether a gc holds a live lease (a writer merging small packs holds one too, but an
    erasure waited for the writers that started before it, and later ones wait for it)."""
    return any(lease is None or lease.operation != leases.MERGE
               for lease in leases.live(ctx, (leases.GC,)).values())


def _retire_holders(ctx, plan: ErasurePlan, trie) -> list:
    """Retire every live version holding an erased case; returns all such versions (those
    already retired by then keep their first retirement)."""
    held = holders(ctx, plan.cases, trie)
    for v in held:
        retirement.write_erased(ctx.backend, v, plan.id, plan.author, plan.started_at)
    return held


def _redact(ctx, log: log_index.Log, runs: set[str]) -> None:
    """Replace each record of `log` naming one of `runs` (digests) by a copy without them: the
    records the log's index names for them (it names every record that holds one)."""
    if not runs:
        return
    keyed = log_index.LogIndex(ctx.backend, log, ctx.store.person_key)
    for n in sorted(keyed.records_with("run", runs)):
        key = log.key_of(n)
        try:
            record = parse_record_file(ctx.backend.get(key), log.record_type, key)
        except NotFound:
            continue
        entries = getattr(record, log.field)
        kept = [e for e in entries if e.run not in runs]
        if len(kept) != len(entries):
            ctx.backend.replace(key, format_record_file(redacted(record, kept)))


def redacted(record, kept: list):
    """A run-import or review-batch record holding only the entries `kept`."""
    if isinstance(record, ReviewBatch):
        # Its preview named an erased run: the same request later must save anew, not find
        # this batch by its token.
        return msgspec.structs.replace(record, reviews=kept, confirm_token=None)
    return msgspec.structs.replace(record, runs=kept)


def recover(ctx, wait: float = 0.0) -> list[Erasure]:
    """Finish every erasure a crashed (or waiting) process left half done; one whose own
    process is still at work on it (its lease is live) is left to that process. One that must
    still wait for writers that started before it, or for another erasure at work, is left
    for later (it waits at most `wait`)."""
    checks.seconds(wait, "wait")
    done = []
    ctx.forget("erasing")  # what reads refuse is read again, as it is after this
    pending = list(ctx.backend.list(PENDING))
    if not pending:
        return done
    at_work = {lease.erasure for lease in leases.live(ctx, (leases.ERASURE,)).values()
               if lease is not None}
    for key in pending:
        try:
            plan = parse_record_file(ctx.backend.get(key), ErasurePlan, key)
        except NotFound:
            continue  # finished by another process meanwhile
        if plan.id in at_work:
            continue
        try:
            with leases.erasing(ctx, plan.id, wait) as barrier:
                done.append(complete(ctx, plan, barrier, wait))
        except Aborted as exc:
            if exc.reason not in ("ERASURE_WAITING", "ERASURE_IN_PROGRESS"):
                raise
    return done
