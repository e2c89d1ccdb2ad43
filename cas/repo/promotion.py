"""Promotion and removal: a staged proposal with a preview and a confirm token, then a seal.

Nothing is sealed by a preview. A proposal names its base version; sealing it creates version
`base + 1` only while `base` is still the head, and sealing the same token again returns the
version it already sealed. An idempotency key names one request for ever.
"""

from __future__ import annotations

import bisect
from typing import Any, Callable, Iterable, Iterator, NamedTuple

import msgspec

from cas import digest
from cas.errors import FailedPrecondition, InvalidArgument, NotFound
from cas.format import encoding, keys, times
from cas.format.projection import freeze
from cas.format.records import (Eligibility, IdempotencyRecord, Proposal, Provenance,
                                ProvenanceEntry, Review, RunRecord, VersionRecord, encode_object,
                                format_record_file, parse_record_file)
from cas.format.version_names import check_dataset_name
from cas.repo import checks, datasets, reads, retirement, sealing
from cas.repo.checks import Progress
from cas.repo.proposals import load_proposal, sealed_by
from cas.repo.reviews import index as review_index
from cas.repo.reviews import require_runs
from cas.repo.runs import get_run
from cas.repo.runs import index as run_index
from cas.repo.settings import content_policy, eligibility
from cas.storage import leases
from cas.storage.tree import EMPTY_ROOT

SUBJECT_KINDS = {"agent_run": "agent_run", "SUBJECT_KIND_AGENT_RUN": "agent_run"}
CARRIED_PAGE = 500
PREVIEW_PAGE = 100  # changes a preview describes at once (its `page`)
PREVIEW_MAX = 10_000  # the largest page a preview gives
PROGRESS_EVERY = 200  # subjects (or runs, reviews) between two progress reports


class Subject(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    subject_kind: str
    subject_ref: str
    review_annotation_id: str = ""
    run_id: str | None = None
    # Under an eligibility rule of K reviewers: the other admitting judgments (one per
    # reviewer; `review_annotation_id` is one of the K).
    review_annotation_ids: list[str] = []


def parse_subjects(data: bytes, source: str) -> list[Subject]:
    """A JSON array of subjects, or {"subjects": [...]}."""
    if not isinstance(source, str):
        source = "subjects"
    try:
        value = encoding.parse_json(data)
    except InvalidArgument as exc:
        raise encoding.in_context(exc, source) from None
    if isinstance(value, dict) and set(value) == {"subjects"}:
        value = value["subjects"]
    return convert_subjects(value, source)


def convert_subjects(value: Any, source: str) -> list[Subject]:
    """Subjects given as decoded JSON (or Subject objects): a non-empty list, each checked."""
    if not isinstance(source, str):
        source = "subjects"
    if not isinstance(value, (list, tuple)) or not value:
        raise InvalidArgument(f"{source}: expected a non-empty JSON array of subjects "
                              '(or {"subjects": [...]})')
    out = []
    for i, item in enumerate(value):
        if isinstance(item, Subject):
            # A Subject built by hand is not validated: its fields may have any type.
            if not all(isinstance(getattr(item, f), str) for f in
                       ("subject_kind", "subject_ref", "review_annotation_id")) or \
                    not isinstance(item.run_id, (str, type(None))):
                raise InvalidArgument(f"{source}: subject {i}: its subject_kind, subject_ref "
                                      "and review_annotation_id must be strings, its run_id a "
                                      "string or None")
            _check_subject_json(item, i, source)
            out.append(item)
            continue
        _check_subject_json(item, i, source)
        try:
            out.append(msgspec.convert(item, Subject))
        except msgspec.ValidationError as exc:
            raise InvalidArgument(f"{source}: subject {i}: {exc} (fields: subject_kind, "
                                  "subject_ref, review_annotation_id, run_id)") from None
    return out


def _check_subject_json(item: Any, i: int, source: str) -> None:
    """A subject holds only what canonical JSON can carry, nested at most MAX_DEPTH levels."""
    try:
        encoding.check_json(item, f"$[{i}]")
    except InvalidArgument as exc:
        raise encoding.in_context(exc, source) from None


def _check_key(key: str) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidArgument("an idempotency key is required: 1-256 printable characters")
    problem = encoding.text_problem(key, 256)
    if problem is not None:
        raise InvalidArgument(f"an idempotency key is 1-256 printable characters; it {problem}")
    return key


class SealResult(NamedTuple):
    version: VersionRecord | None   # None: the proposal changes nothing, no version sealed
    already_sealed: bool            # the token was sealed before; this is that version


class _Selection(NamedTuple):
    """What a selection read (`_select`): `promote` checks its subjects against it instead of
    looking each one up again in the logs' keyed indexes (a second copy of every review)."""
    runs: dict[str, str] | None  # run id -> digest, of every run recorded (None: not read)
    judgments: dict[str, list[Review]]  # run id -> its judgments on the eligibility metric


def promote(ctx, name: str, subjects: list[Subject | dict[str, Any]], idempotency_key: str,
            author: str | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """Stage a promotion of reviewed runs and return its preview (with `confirm_token`);
    seals nothing. `progress(stage, done, total)` hears how far the freezing is."""
    return _promote(ctx, name, subjects, None, idempotency_key, author, progress)


def _promote(ctx, name, subjects, known: _Selection | None, idempotency_key, author,
             progress) -> dict[str, Any]:
    author = checks.author(author)
    if known is None:  # (a selection's subjects are its own, built from the logs)
        subjects = convert_subjects(subjects, "subjects")
    datasets.dataset(ctx, name)
    _check_key(idempotency_key)
    withheld = sorted(content_policy(ctx, name).withheld)
    rules = eligibility(ctx)
    refs = [s.subject_ref for s in subjects]
    # (each subject's lookups then find what these read)
    digests = known.runs if known is not None and known.runs is not None else \
        run_index(ctx).get_many(refs)
    if known is None:
        review_index(ctx).prefetch([a for s in subjects for a in [s.review_annotation_id,
                                                                  *s.review_annotation_ids]
                                    if a], refs)
    # Every subject is checked before anything is stored or any run read whole: a refusal
    # stores nothing, and the runs are then frozen one at a time, straight into the pack.
    admitted: list[tuple[str, str, Review, list[Review]]] = []  # run id, digest, judgments
    runs: dict[str, str] = {}  # digest -> run id of every run promoted
    judged: list[dict[str, Any]] = []  # the first page of them, by (run id, annotation id)
    request = []
    for i, s in enumerate(subjects):
        if progress is not None and i % PROGRESS_EVERY == 0:
            progress("checking and freezing runs", i, 2 * len(subjects))
        where = f"subject {i} ({s.subject_ref!r})"
        kind = SUBJECT_KINDS.get(s.subject_kind)
        run_digest, review, admitting = _subject_review(
            ctx, s, where, kind, rules, digests.get(s.subject_ref),
            None if known is None else known.judgments)
        admitted.append((s.subject_ref, run_digest, review, admitting))
        runs[run_digest] = s.subject_ref
        judged.append({"run_id": s.subject_ref, "annotation_id": review.annotation_id,
                       "metric": review.metric, "label": review.label,
                       "reviewer": review.reviewer})
        if len(admitting) > 1:
            judged[-1]["admitted_by"] = [{"annotation_id": r.annotation_id,
                                          "reviewer": r.reviewer, "label": r.label}
                                         for r in admitting]
        if len(judged) >= 2 * PREVIEW_PAGE:  # only the first page is kept (a stable sort:
            judged.sort(key=_judged_order)     # the same page as one sort of them all)
            del judged[PREVIEW_PAGE:]
        request.append([kind, s.subject_ref, s.review_annotation_id]
                       + sorted(set(s.review_annotation_ids) - {s.review_annotation_id}))
    request = encoding.encode(
        {"operation": "promote", "subjects": sorted(request), "withheld": withheld})

    def frozen() -> Iterator[tuple[str, bytes, str | None, ProvenanceEntry]]:
        """Each run frozen into its case, under the staging's lease: (case id, canonical
        bytes, person, provenance entry)."""
        for i, (run_id, run_digest, review, admitting) in enumerate(admitted):
            if progress is not None and i % PROGRESS_EVERY == 0:
                progress("checking and freezing runs", len(admitted) + i, 2 * len(admitted))
            try:  # (the run the review names, read once, now under the lease)
                run = ctx.store.get(run_digest, RunRecord)
            except NotFound:
                require_runs(ctx, {run_digest: run_id})  # an erasure removed it since
                run = ctx.store.get(run_digest, RunRecord)  # (a pack replaced meanwhile)
            _, data, case_id = encode_object(freeze(run, withheld))
            yield case_id, data, run.person, ProvenanceEntry(
                case_id=case_id, run_id=run_id, annotation_id=review.annotation_id,
                reviewer=review.reviewer, reviewed_at=review.reviewed_at, withheld=withheld,
                admitted_by=sorted(r.annotation_id for r in admitting) if several(rules)
                else msgspec.UNSET)
    shown = _stage(ctx, name, "promote", idempotency_key, request, [], author, runs, frozen)
    # (in run order: the same request in another order is the same proposal, and preview)
    # (the first page of them, as of the cases: `subjects_count` counts them all)
    judged.sort(key=_judged_order)
    return {**shown, "subjects": judged[:PREVIEW_PAGE], "subjects_count": len(subjects)}


def _judged_order(j: dict[str, Any]) -> tuple[str, str]:
    return (j["run_id"], j["annotation_id"])


def reviewed_subjects(ctx, metric: str | None = None, tenant: str | None = None,
                      since: str | None = None,
                      run_ids: Iterable[str] | None = None) -> list[Subject]:
    """Promotion by selection: the runs whose newest judgment on the eligibility metric (by
    anyone) accepts them, as subjects naming that judgment, in import order (named runs: by
    import record, then run id; the order changes nothing staged).
    `tenant` and `since` (`started_at` at or after it, compared as times by `cas.format.times`;
    a run whose `started_at` is absent or not a time does not match) narrow the selection;
    `run_ids` restricts it to those runs, each of which must then be selected (else refused,
    naming why). `metric`, if given, must be the rule's."""
    return _select(ctx, metric, tenant, since, run_ids)[0]


def _select(ctx, metric, tenant, since, run_ids) -> tuple[list[Subject], _Selection]:
    """`reviewed_subjects`, and what it read to choose them."""
    rules = eligibility(ctx)
    for value, what in ((tenant, "tenant"), (since, "since")):
        encoding.check_text(value, what, optional=True)
    after = None if since is None else times.parse_time(since, "since")
    if metric is not None:
        encoding.check_text(metric, "metric")
        if metric != rules.metric:
            raise FailedPrecondition(
                f"promotion needs judgments on {rules.metric!r} (`cas settings eligibility`), "
                f"not on {metric!r}", reason="REVIEW_WRONG_METRIC", metric=metric,
                expected=rules.metric)
    named = None if run_ids is None else checks.strings(run_ids, "run_ids", "run ids")
    if named:
        # A few named runs cost a few lookups in the logs' keyed indexes, not a read of
        # every import and review record (issue 37).
        numbers = run_index(ctx).import_numbers(named)
        for run_id in named:
            if run_id not in numbers:
                get_run(ctx, run_id)  # RUN_NOT_FOUND (or a refusal naming a pending erasure)
        candidates = sorted(set(named), key=lambda r: (numbers[r], r))
        judged = review_index(ctx).of_runs(candidates).values()
        recorded = None
    else:
        recorded = candidates = run_index(ctx).all()  # import order
        judged = [review_index(ctx).all()]
    on_metric: dict[str, list] = {}
    for reviews_ in judged:
        for review in reviews_:
            if review.metric == rules.metric:
                on_metric.setdefault(review.run_id, []).append(review)
    out = []
    for run_id in candidates:
        admitting, why = admission(rules, on_metric.get(run_id, ()))
        problem = _not_selected(ctx, run_id, on_metric.get(run_id, ()), why, rules, tenant,
                                after)
        if problem is not None:
            if named:
                raise problem
            continue
        out.append(Subject(subject_kind="agent_run", subject_ref=run_id,
                           review_annotation_id=admitting[-1].annotation_id,
                           review_annotation_ids=[r.annotation_id for r in admitting[:-1]]))
    if not out:
        narrowed = "".join(f" {flag} {value}" for flag, value in (
            ("--tenant", tenant), ("--since", since)) if value is not None)
        raise FailedPrecondition(
            f"no recorded run{' matching' + narrowed if narrowed else ''} has a newest "
            f"judgment on {rules.metric!r} that accepts it ({', '.join(rules.accepted)}); "
            "see `cas review queue`", reason="NO_ACCEPTED_RUNS", metric=rules.metric,
            accepted=list(rules.accepted))
    return out, _Selection(recorded, on_metric)


def several(rules: Eligibility) -> bool:
    """Whether the rule weighs each reviewer's newest judgment (K reviewers, or a majority),
    rather than the newest judgment by anyone (the one-reviewer rule cas always had)."""
    return rules.quorum != 1 or rules.agreement_rule != "unanimous"


def _order(review) -> tuple[str, str]:
    return (review.reviewed_at, review.annotation_id)


def newest_per_reviewer(reviews: Iterable) -> dict[str, Any]:
    """reviewer -> that reviewer's newest of `reviews` (by time, then annotation id)."""
    out: dict[str, Any] = {}
    for r in reviews:
        known = out.get(r.reviewer)
        if known is None or _order(r) > _order(known):
            out[r.reviewer] = r
    return out


def admission(rules: Eligibility, reviews: Iterable) -> tuple[list, str | None]:
    """Whether a run's judgments on the eligibility metric (`reviews`, of that metric) admit
    it: (the admitting judgments, oldest first, None), or ([], why not). With one reviewer
    and the unanimous rule, the newest judgment by anyone decides. Otherwise each reviewer's
    newest judgment counts once: at least K of them must accept (one of the accepted labels;
    any other label rejects), and under "unanimous" none may reject, under "majority" the
    accepting ones must outnumber the rejecting ones."""
    reviews = list(reviews)
    if not reviews:
        return [], "REVIEW_REQUIRED"
    if not several(rules):
        newest = max(reviews, key=_order)
        return ([newest], None) if newest.label in rules.accepted else ([], "REVIEW_NOT_ACCEPTED")
    newest = newest_per_reviewer(reviews).values()
    accepting = sorted((r for r in newest if r.label in rules.accepted), key=_order)
    rejecting = len(newest) - len(accepting)
    if rules.agreement_rule == "unanimous" and rejecting:
        return [], "REVIEW_NOT_ACCEPTED"
    if rules.agreement_rule == "majority" and len(accepting) <= rejecting:
        return [], "REVIEW_NOT_ACCEPTED"
    if len(accepting) < rules.quorum:
        return [], "REVIEWERS_REQUIRED"
    return accepting, None


def rule_text(rules: Eligibility) -> str:
    """The eligibility rule in words, for refusals."""
    if not several(rules):
        return (f"the newest judgment on {rules.metric!r} must accept the run "
                f"({', '.join(rules.accepted)})")
    tail = ("and none rejects it" if rules.agreement_rule == "unanimous" else
            "and they outnumber the rejecting ones")
    return (f"{rules.quorum} different reviewers' newest judgments on {rules.metric!r} must "
            f"accept the run ({', '.join(rules.accepted)}), {tail} (rule "
            f"{rules.agreement_rule}, `cas settings eligibility --reviewers`)")


def _not_selected(ctx, run_id: str, reviews, why: str | None, rules: Eligibility,
                  tenant, since: times.Instant | None):
    """Why a run is not selected for promotion (an error to raise when it was named), or
    None when it is. `reviews`: its judgments on the eligibility metric."""
    if why == "REVIEW_REQUIRED":
        return FailedPrecondition(
            f"run {run_id!r} has no judgment on {rules.metric!r} yet (`cas review add`)",
            reason="REVIEW_REQUIRED", run_id=run_id)
    if why is not None and not several(rules):
        review = max(reviews, key=_order)
        return FailedPrecondition(
            f"run {run_id!r}: its newest judgment on {rules.metric!r}, {review.annotation_id} "
            f"({review.label!r} by {review.reviewer}), does not accept it; accepted: "
            f"{', '.join(rules.accepted)}", reason="REVIEW_NOT_ACCEPTED",
            annotation_id=review.annotation_id, label=review.label,
            accepted=list(rules.accepted), run_id=run_id)
    if why is not None:
        return FailedPrecondition(
            f"run {run_id!r}: its judgments on {rules.metric!r} do not admit it: "
            f"{rule_text(rules)}; see `cas review list {run_id}`", reason=why,
            run_id=run_id, accepted=list(rules.accepted), reviewers=rules.quorum,
            rule=rules.agreement_rule)
    if tenant is None and since is None:
        return None
    run = get_run(ctx, run_id)
    if tenant is not None and run.tenant != tenant:
        return FailedPrecondition(f"run {run_id!r} is of tenant {run.tenant!r}, not {tenant!r}",
                                  reason="RUN_NOT_SELECTED", run_id=run_id)
    if since is None:
        return None
    started = times.time_or_none(run.started_at)
    if started is None:  # a filter that cannot place a run in time does not select it
        return FailedPrecondition(
            f"run {run_id!r} has a started_at of {encoding.describe(run.started_at)}, which is "
            f"not a time, so --since {times.format_time(since)} cannot select it",
            reason="RUN_NOT_SELECTED", run_id=run_id)
    if started < since:
        return FailedPrecondition(f"run {run_id!r} started at {run.started_at!r}, not since "
                                  f"{times.format_time(since)}", reason="RUN_NOT_SELECTED",
                                  run_id=run_id)
    return None


def promote_reviewed(ctx, name: str, idempotency_key: str, metric: str | None = None,
                     tenant: str | None = None, since: str | None = None,
                     run_ids: Iterable[str] | None = None, author: str | None = None,
                     progress: Progress | None = None) -> dict[str, Any]:
    """`promote` of the runs `reviewed_subjects` selects: nobody assembles subjects by hand."""
    datasets.dataset(ctx, name)
    _check_key(idempotency_key)
    return _promote(ctx, name, *_select(ctx, metric, tenant, since, run_ids), idempotency_key,
                    author, progress)


def _subject_review(ctx, s: Subject, where: str, kind: str | None, rules: Eligibility,
                    run_digest: str | None, known: dict[str, list[Review]] | None):
    """The digest of the run a subject names (`run_digest`: as the run index has it) and the
    judgment that admits it: a saved review of that very run, on the eligibility metric, with
    an accepted label, and not superseded by a newer judgment on that metric (by anyone) that
    does not accept it. `known`: see `promote`."""
    if kind is None:
        raise InvalidArgument(f"{where}: subject_kind {s.subject_kind!r} is not a run; "
                              "accepted: agent_run, SUBJECT_KIND_AGENT_RUN",
                              reason="SUBJECT_KIND_INVALID")
    if s.run_id is not None and s.run_id != s.subject_ref:
        raise InvalidArgument(f"{where}: run_id {s.run_id!r} and subject_ref "
                              f"{s.subject_ref!r} name different runs", reason="RUN_MISMATCH")
    if not s.review_annotation_id:
        raise FailedPrecondition(f"{where}: a promotion needs a saved review: give its "
                                 "review_annotation_id (see `cas review add`)",
                                 reason="REVIEW_REQUIRED")
    if run_digest is None:
        get_run(ctx, s.subject_ref)  # RUN_NOT_FOUND (or a run imported since the lookup)
        run_digest = run_index(ctx).get(s.subject_ref)
    ctx.refuse_erasing(run_digest, f"run {s.subject_ref!r}")
    # (the run's own bytes are read once, when it is frozen: its digest is the index's)
    if known is None:
        get, all_reviews = review_index(ctx).get, review_index(ctx).of_run(s.subject_ref)
    else:
        all_reviews = sorted(known.get(s.subject_ref, ()), key=_order)
        mine = {r.annotation_id: r for r in all_reviews}

        def get(annotation_id: str) -> Review | None:
            found = mine.get(annotation_id)
            return found if found is not None else review_index(ctx).get(annotation_id)
    review = get(s.review_annotation_id)
    if review is None:
        raise NotFound(f"{where}: no review {s.review_annotation_id!r}",
                       reason="REVIEW_NOT_FOUND")
    if review.run_id != s.subject_ref or review.run != run_digest:
        raise FailedPrecondition(f"{where}: review {review.annotation_id} is a review of "
                                 f"run {review.run_id!r}, not of this run",
                                 reason="REVIEW_RUN_MISMATCH")
    if not several(rules):
        _check_admits(rules, review, all_reviews, where)
        return run_digest, review, [review]
    named = [review]
    for extra in sorted(set(s.review_annotation_ids) - {review.annotation_id}):
        other = get(extra) if isinstance(extra, str) else None
        if other is None:
            raise NotFound(f"{where}: no review {extra!r}", reason="REVIEW_NOT_FOUND")
        if other.run_id != review.run_id or other.run != review.run:
            raise FailedPrecondition(f"{where}: review {other.annotation_id} is a review of "
                                     f"run {other.run_id!r}, not of this run",
                                     reason="REVIEW_RUN_MISMATCH")
        named.append(other)
    newest = newest_per_reviewer(r for r in all_reviews if r.metric == rules.metric)
    for r in named:
        _check_admits(rules, r, [r], where)
        if newest[r.reviewer].annotation_id != r.annotation_id:
            n = newest[r.reviewer]
            raise FailedPrecondition(
                f"{where}: review {r.annotation_id} was superseded by {r.reviewer}'s newer "
                f"{n.annotation_id} ({n.label!r})", reason="REVIEW_SUPERSEDED",
                annotation_id=r.annotation_id, newer_annotation_id=n.annotation_id,
                label=n.label)
    reviewers = {r.reviewer for r in named}
    if len(reviewers) < rules.quorum or len(reviewers) < len(named):
        raise FailedPrecondition(
            f"{where}: names judgments of {len(reviewers)} reviewer(s) "
            f"({', '.join(sorted(reviewers))}); "
            f"{rule_text(rules)}: name one judgment per reviewer in review_annotation_id and "
            "review_annotation_ids (or promote by selection: `cas promote --reviewed`)",
            reason="REVIEWERS_REQUIRED", reviewers=rules.quorum, rule=rules.agreement_rule,
            named=len(named))
    admitting, why = admission(rules, newest.values())
    if why is not None:
        raise FailedPrecondition(f"{where}: the run's judgments do not admit it: "
                                 f"{rule_text(rules)}", reason=why, reviewers=rules.quorum,
                                 rule=rules.agreement_rule)
    return run_digest, max(named, key=_order), sorted(named, key=_order)


def _check_admits(rules: Eligibility, review, all_reviews: list, where: str) -> None:
    if review.metric != rules.metric:
        raise FailedPrecondition(
            f"{where}: review {review.annotation_id} judges {review.metric!r}; promotion "
            f"needs a judgment on {rules.metric!r}", reason="REVIEW_WRONG_METRIC",
            metric=review.metric, expected=rules.metric)
    if review.label not in rules.accepted:
        raise FailedPrecondition(
            f"{where}: review {review.annotation_id} is labelled {review.label!r}, which does "
            f"not accept the run; accepted: {', '.join(rules.accepted)}",
            reason="REVIEW_NOT_ACCEPTED", annotation_id=review.annotation_id,
            label=review.label, accepted=list(rules.accepted))
    on_metric = [r for r in all_reviews if r.metric == rules.metric]  # oldest first
    newest = on_metric[-1]  # (the review itself is among them)
    if newest.label not in rules.accepted:
        raise FailedPrecondition(
            f"{where}: review {review.annotation_id} was superseded by "
            f"{newest.annotation_id} ({newest.label!r} by {newest.reviewer}), which does not "
            "accept the run", reason="REVIEW_SUPERSEDED", annotation_id=review.annotation_id,
            newer_annotation_id=newest.annotation_id, label=newest.label)



def remove(ctx, name: str, item_ids: list[str], idempotency_key: str,
           author: str | None = None) -> dict[str, Any]:
    """Stage the removal of cases from the head and return its preview; seals nothing."""
    item_ids = checks.strings(item_ids, "item_ids", "case ids")
    author = checks.author(author)
    datasets.dataset(ctx, name)
    _check_key(idempotency_key)
    ids = [digest.parse_digest(i, "case id") for i in item_ids]  # as every read: upper case folded
    head = ctx.refs.head(name)
    if not ids and (head == 0 or retirement.version_state(ctx, name, head) != "RETIRED"):
        raise FailedPrecondition("a removal needs at least one case id; an empty removal is "
                                 "accepted only when the current version is retired",
                                 reason="EMPTY_REMOVAL")
    request = encoding.encode({"operation": "remove", "ids": sorted(set(ids))})
    return _stage(ctx, name, "remove", idempotency_key, request, sorted(set(ids)), author)


def _stage(ctx, name, operation, key, request: bytes, removes, author,
           runs: dict[str, str] | None = None,
           cases: Callable[[], Iterable[tuple]] | None = None) -> dict[str, Any]:
    """Stage a proposal under a writer's lease. `cases`: a promotion's, frozen as they are
    stored (see `promote`'s `frozen`, which reads each run under the lease); `runs`:
    digest -> run id of the runs they are of."""
    with leases.writing(ctx, operation) as lease:
        return _stage_leased(ctx, lease, name, operation, key, request, cases, removes,
                             author, ctx.clock(), runs or {})


def _stage_leased(ctx, lease, name, operation, key, request, cases, removes,
                  author, now, runs) -> dict[str, Any]:
    ikey = keys.idempotency_key(name, key)
    request_digest = digest.request_digest(request)
    # A claim stored before request digests had their own domain names the request in the
    # proposal kind's domain: the same request still finds it.
    same_request = {request_digest, digest.legacy_request_digest(request)}
    try:
        prior = parse_record_file(ctx.backend.get(ikey), IdempotencyRecord, ikey)
    except NotFound:
        prior = None
    if prior is not None:
        require_runs(ctx, runs)  # the runs promoted were not erased since they were read
        _check_same_request(prior, same_request, key)
        return preview(ctx, load_proposal(ctx, name, prior.token), prior.token, replayed=True)
    head = ctx.refs.head(name)
    base = ctx.refs.read_version(name, head) if head else None
    base_root = base.content_digest if base else EMPTY_ROOT
    # A retired base may have lost erased cases: they are not carried, and promoting the same
    # run again adds its case anew (its bytes are stored again).
    lost = retirement.lost_cases(ctx, base) if base and ctx.refs.read_retirement(name, head) \
        else []
    with ctx.store.writer(lease) as writer:
        added, removes, prov_digest, root, count = _stage_tree(
            ctx, writer, name, head, base_root, cases() if cases else (), removes, lost)
    carried = (base.item_count if base else 0) - len(removes) - len(set(added) & set(lost))
    core = dict(dataset=name, operation=operation, base=head, idempotency_key=key,
                request=request_digest, add=added, carried=carried, remove=removes,
                provenance=prov_digest, proposed_root=root, proposed_count=count)
    token = digest.proposal_token(encoding.encode(core))
    record = Proposal(**core, author=author, created_at=now)
    lease.check()
    ctx.backend.put_if_absent(keys.proposal_key(name, token), format_record_file(record))
    claim = IdempotencyRecord(dataset=name, key=key, request=request_digest, token=token)
    if not ctx.backend.put_if_absent(ikey, format_record_file(claim)):
        prior = parse_record_file(ctx.backend.get(ikey), IdempotencyRecord, ikey)
        _check_same_request(prior, same_request, key)
        token = prior.token
        record = load_proposal(ctx, name, token)
    return preview(ctx, record, token)


def _stage_tree(ctx, writer, name, head, base_root, cases, removes, lost):
    """Store the proposed tree: the cases added (new to the base, or lost from it), each as
    it comes from `cases` ((case id, bytes, person, provenance entry)), their provenance,
    the nodes. Returns (added, removed, provenance digest, root, count)."""
    trie = ctx.trie(writer.add)
    missing = [r for r in removes if not trie.contains(base_root, r)]
    if missing:
        raise NotFound(f"{name}@{head} does not hold {missing[0]}"
                       + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
                       reason="ITEM_NOT_IN_VERSION", case_id=missing[0])
    lost = set(lost)
    entries: dict[str, ProvenanceEntry] = {}  # case id -> its entry, of the cases added
    persons: set[str] = set()
    for case_id, data, person, entry in cases:
        seen = entries.get(case_id)
        if seen is None:
            if case_id not in lost and trie.contains(base_root, case_id):
                continue
            writer.add_encoded("case", data, case_id, person)
            if person is not None:
                persons.add(person)
        # Runs that freeze to one case: the first by (run id, annotation id) speaks for it,
        # so the same subjects in another order stage the same proposal, as the request says.
        if seen is None or (entry.run_id, entry.annotation_id) < (seen.run_id,
                                                                  seen.annotation_id):
            entries[case_id] = entry
    added = sorted(entries)
    removes = sorted(set(removes).union(lost).difference(added))
    prov_digest = None
    if added:
        prov_digest = writer.add(Provenance(entries=[entries[c] for c in added]),
                                 persons=persons)
    root = trie.apply(base_root, added, removes)
    writer.add(trie.node(root))
    return added, removes, prov_digest, root, trie.count(root)


def _check_same_request(prior: IdempotencyRecord, same_request: set[str], key: str) -> None:
    if prior.request not in same_request:
        raise FailedPrecondition(f"idempotency key {key!r} was already used for a different "
                                 "request; use a new key", reason="IDEMPOTENCY_KEY_REUSED")



def preview(ctx, p: Proposal, token: str, replayed: bool = False, after: str | None = None,
            limit: int | None = None) -> dict[str, Any]:
    """What a proposal would seal, one page of its changes at a time. `replayed`: the request
    was staged before (its idempotency key names it), so the head may have moved since:
    `stale` then says sealing it will be refused, and `restage` how to stage it anew.

    The counts, digests, token and the complete id lists (`added`, `removed`) are always
    there; the cases described (`added_cases`, `removed_cases`: at most `limit` changes in id
    order after the case id `after`) and their `withheld` classes are a page, and
    `next_cursor` starts the next page (None on the last): `preview_page` reads it from the
    stored proposal. Only the page's cases are read and described (not every case added).
    `limit`: 1 to PREVIEW_MAX (default PREVIEW_PAGE)."""
    limit = PREVIEW_PAGE if limit is None else _check_limit(limit)
    if after is not None:
        after = digest.parse_digest(after, "cursor (a case id)")
    base = ctx.refs.read_version(p.dataset, p.base) if p.base else None
    stale = replayed and bool(p.add or p.remove or _recut(p)) and \
        ctx.refs.head(p.dataset) != p.base and sealed_by(ctx, p.dataset, p.base, token) is None
    changes = _page_of_changes(p, after, limit + 1)
    more = len(changes) > limit
    changes = changes[:limit]
    shown = {c for c, _ in changes}
    withheld, runs = {}, {}
    if p.provenance and shown:
        for e in ctx.store.get(p.provenance, Provenance).entries:
            if e.case_id in shown:
                withheld[e.case_id] = e.withheld
                if e.promoted:
                    runs[e.case_id] = e.run_id
    added = [c for c, sign in changes if sign == "+"]
    removed_ids = [c for c, sign in changes if sign == "-"]
    carried = []
    if base is not None:
        removed = set(p.remove).union(p.add)  # an erased case added again is not carried
        trie = ctx.trie()
        for case_id in trie.iterate(base.content_digest):
            if case_id not in removed:
                carried.append(case_id)
                if len(carried) == CARRIED_PAGE:
                    break
    return {
        "confirm_token": token,
        "dataset": p.dataset,
        "operation": p.operation,
        "base_version": None if base is None else {
            "number": base.number, "item_count": base.item_count,
            "content_digest": base.content_digest},
        "proposed": {"item_count": p.proposed_count, "content_digest": p.proposed_root,
                     "added": p.add, "removed": p.remove,
                     "added_count": len(p.add), "removed_count": len(p.remove),
                     "added_cases": _described(reads.summarize(ctx, added, runs)),
                     "removed_cases": _described(_removed(ctx, base, removed_ids)),
                     "carried": carried,
                     "carried_count": p.carried,
                     "carried_complete": len(carried) == p.carried},
        "withheld": withheld,
        "page": {"after": after, "limit": limit},
        "next_cursor": changes[-1][0] if more else None,
        "changes": bool(p.add or p.remove) or _recut(p),
        "stale": stale,
        "restage": restage(p) if stale else None,
    }


def preview_page(ctx, name: str, confirm_token: str, after: str | None = None,
                 limit: int | None = None) -> dict[str, Any]:
    """The preview of a staged proposal read back by its confirm token: the page of changes
    after the cursor `after` (a preview's `next_cursor`). Stale if the head has moved since."""
    check_dataset_name(name)
    if limit is not None:
        _check_limit(limit)  # (the page asked for is checked before the proposal is read)
    if after is not None:
        digest.parse_digest(after, "cursor (a case id)")
    return preview(ctx, load_proposal(ctx, name, confirm_token), confirm_token, replayed=True,
                   after=after, limit=limit)


def _check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= PREVIEW_MAX:
        raise InvalidArgument(f"a preview's page limit is an integer from 1 to {PREVIEW_MAX}, "
                              f"not {limit!r}", reason="BAD_LIMIT")
    return limit


def _page_of_changes(p: Proposal, after: str | None, limit: int) -> list[tuple[str, str]]:
    """Up to `limit` of the proposal's changes after the case id `after`, in id order:
    `(case id, "+" or "-")` (`add` and `remove` are sorted and disjoint)."""
    a = bisect.bisect_right(p.add, after) if after is not None else 0
    r = bisect.bisect_right(p.remove, after) if after is not None else 0
    out: list[tuple[str, str]] = []
    while len(out) < limit and (a < len(p.add) or r < len(p.remove)):
        if r >= len(p.remove) or (a < len(p.add) and p.add[a] < p.remove[r]):
            out.append((p.add[a], "+"))
            a += 1
        else:
            out.append((p.remove[r], "-"))
            r += 1
    return out


def _described(summaries) -> list[dict[str, Any]]:
    return [{"id": c.case_id, "run_id": c.run_id, "tenant": c.tenant, "outcome": c.outcome}
            for c in summaries]


def _removed(ctx, base, ids: list[str]) -> list:
    """What the base says of the cases a proposal removes; a case an erasure deleted (a
    retired base's) is described by its id alone."""
    if not ids:
        return []
    try:
        return reads.summaries(ctx, base, ids)
    except (NotFound, FailedPrecondition):
        out = []
        for case_id in ids:
            try:
                out.extend(reads.summaries(ctx, base, [case_id]))
            except (NotFound, FailedPrecondition):
                out.append(reads.CaseSummary(case_id, None, None, None))
        return out


def _recut(p: Proposal) -> bool:
    """An empty removal (only ever staged on a retired head) seals the cases that are left,
    even when that is the whole set: a retired version is cut again as a new, active one."""
    return p.operation == "remove" and not p.remove


def seal(ctx, name: str, confirm_token: str, author: str | None = None,
         message: str = "") -> SealResult:
    """Seal the proposal a preview's `confirm_token` names; sealing it again returns the
    version it sealed (`already_sealed`)."""
    check_dataset_name(name)
    encoding.check_text(confirm_token, "confirm token")
    encoding.check_text(message, "message")
    author = checks.author(author)
    load_proposal(ctx, name, confirm_token)  # refuse a bad token before taking a lease
    with leases.writing(ctx, "seal") as lease:
        return SealResult(*_seal_leased(ctx, lease, name, confirm_token, author, message))


def _seal_leased(ctx, lease, name: str, token: str, author: str, message: str):
    if keys.proposal_key(name, token) in lease.doomed_proposals:
        raise FailedPrecondition(
            f"the proposal with confirm token {token} is stale and a gc is collecting it; "
            "preview again to stage it anew", reason="PROPOSAL_STALE")
    p = load_proposal(ctx, name, token)  # again, under the lease: gc may have collected it
    if not (p.add or p.remove or _recut(p)):
        return None, False
    existing = sealed_by(ctx, name, p.base, token)
    if existing is not None:
        return existing, True
    head = ctx.refs.head(name)
    if head != p.base:
        raise FailedPrecondition(
            f"this proposal was made on {name}@{p.base}, but the head is now {name}@{head}; "
            f"{restage(p)}", reason="PROPOSAL_STALE", base=p.base, head=head,
            idempotency_key=p.idempotency_key)
    with ctx.store.writer(lease) as writer:
        record = sealing.seal_tree(ctx, name, p.base, p.add, p.remove, writer, message, author,
                                   p.operation)
    if record.content_digest != p.proposed_root:  # the base lost erased cases since the preview
        raise FailedPrecondition(
            f"{name}@{p.base} was retired since this proposal was previewed and no longer "
            f"holds the set it showed; {restage(p)}", reason="PROPOSAL_STALE", base=p.base,
            head=head, idempotency_key=p.idempotency_key)
    record = msgspec.structs.replace(record, proposal=token, provenance=p.provenance)
    lease.check()
    if ctx.refs.append_version(record):
        sealing.settle(ctx, record)
        return record, False
    existing = sealed_by(ctx, name, p.base, token)
    if existing is not None:
        return existing, True
    raise FailedPrecondition(
        f"another writer sealed {name}@{record.number} first; {restage(p)}",
        reason="PROPOSAL_STALE", base=p.base, head=ctx.refs.head(name),
        idempotency_key=p.idempotency_key)


def restage(p: Proposal) -> str:
    """How to stage a stale proposal anew. Its idempotency key names it for ever (staging
    with that key again returns this very proposal), so the advice names a new key."""
    if p.operation == "promote":
        command = f"cas promote {p.dataset} --reviewed (or --file SUBJECTS.json)"
    else:
        ids = " ".join(p.remove) if len(p.remove) <= 2 else "ITEM_ID..."
        command = f"cas remove {p.dataset} {ids}".rstrip()
    return (f"stage it again on the head with a new idempotency key (key "
            f"{p.idempotency_key!r} names this proposal for ever): {command} "
            "--idempotency-key NEW-KEY")


def corrections(ctx, name: str, number: int, case_ids: Iterable[str]) -> dict[str, Review]:
    """case id -> the Review whose correction is that case's expected answer: of the cases
    `case_ids` of `name@number` that a promotion added, those whose admitting judgment (the
    newest accepting one its provenance names) carries a correction. The case's bytes are
    untouched: a correction lives in the judgment, found through the promotion's provenance
    (docs/runs.md "Corrections")."""
    ids = [digest.parse_digest(i, "case id") for i in checks.strings(case_ids, "case_ids",
                                                                     "case ids")]
    origins = reads.case_origins(ctx, name, number, ids)
    admitting = {c: e.annotation_id for c, e in origins.items() if e.promoted}
    found = review_index(ctx)
    found.prefetch(admitting.values(), ())
    out = {}
    for case_id, annotation_id in admitting.items():
        review = found.get(annotation_id)
        if review is not None and review.correction is not msgspec.UNSET:
            out[case_id] = review
    return out
