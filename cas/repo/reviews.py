"""Human reviews of recorded runs: preview with a confirm token, then save (docs/runs.md)."""

from __future__ import annotations

from typing import IO, Any, Iterable

import msgspec

from cas import digest
from cas.errors import FailedPrecondition, InvalidArgument, NotFound
from cas.format import encoding, redaction
from cas.format.keys import review_batch_key
from cas.format.records import COMMENT_LIMIT, Review, ReviewBatch, encode_object, format_record_file
from cas.repo import checks, settings
from cas.repo.checks import Progress
from cas.repo.runs import RunsPage, get_run
from cas.repo.runs import index as run_index
from cas.repo.runs import page_of_runs
from cas.repo.userconfig import require_person
from cas.storage import claims, leases, log_index
from cas.storage.refs import read_log_from


class ReviewRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    run_id: str
    metric: str
    label: str
    comment: str | None = None  # the reviewer's reason (scrubbed when saved)
    correction: Any = None      # the output the reviewer says was right (any JSON but null)


_REQUEST_DECODER = msgspec.json.Decoder(ReviewRequest)


def read_review_requests(stream: IO[bytes] | Iterable[bytes], source: str) -> list[ReviewRequest]:
    out = []
    for lineno, line in enumerate(encoding.lines_of(stream, source), 1):
        if not line.strip():
            continue
        try:
            out.append(encoding.parse_json(line, _REQUEST_DECODER))
        except InvalidArgument as exc:
            if exc.reason is None:  # the decoder's own message: say what a line is
                exc = InvalidArgument(f'{exc.message} (a line is {{"run_id", "metric", '
                                      '"label"}, optionally "comment" and "correction")')
            raise encoding.in_context(exc, f"{source} line {lineno}", line=lineno) from None
    if not out:
        raise InvalidArgument(f"{source} holds no reviews")
    return out


def confirm_token(kind: str, payload) -> str:
    """A token naming exactly what a preview showed: the same request gives the same token."""
    return digest.confirm_token(encoding.encode({"kind": kind, "request": payload}))


def check_token(given: str | None, expected: str) -> bool:
    """False for a preview (no token), True to go ahead; a wrong token is refused."""
    if given is None:
        return False
    if given != expected:
        raise FailedPrecondition(
            "the confirm token does not match this request (it was issued for a different "
            "request, or what it previewed has changed); run the command without "
            "--confirm-token to preview again", reason="CONFIRM_TOKEN_MISMATCH")
    return True


def index(ctx) -> ReviewIndex:
    """The context's review index (read once, then extended as the log grows)."""
    return ctx.derived("reviews", lambda: ReviewIndex(ctx.backend, ctx.store.person_key))


PROGRESS_EVERY = 200  # reviews between two progress reports


def add_reviews(ctx, requests: list, confirm_token: str | None = None,
                reviewer: str | None = None, progress: Progress | None = None) -> dict:
    """Preview (no token) or save (the preview's token) reviews of runs by the configured
    person. Each request is {"run_id", "metric", "label"}, optionally with "comment" (the
    reason, at most 4,096 characters, scrubbed) and "correction" (the right output, any JSON
    but null). A label outside a declared metric's labels is refused; a judgment on an
    undeclared metric is refused under `declared_only`, else named in `warnings` (both
    preview and save answer them). `progress(stage, done, total)` hears how far the checking
    of the runs is."""
    checks.many(requests, "requests", 'reviews ({"run_id", "metric", "label"})',
                (str, bytes, bytearray, dict, ReviewRequest))
    encoding.check_text(confirm_token, "confirm token", optional=True)
    encoding.check_text(reviewer, "reviewer", optional=True)
    reviewer = reviewer or require_person("a review")
    try:
        reqs = [r if isinstance(r, ReviewRequest) else msgspec.convert(r, ReviewRequest)
                for r in requests]
    except msgspec.ValidationError as exc:
        raise InvalidArgument(f"a review is {{run_id, metric, label}}: {exc}") from None
    rows, token = plan_reviews(ctx, reqs, reviewer, progress)
    warnings = judgment_warnings(ctx, rows)
    if not check_token(confirm_token, token):
        return {"confirm_token": token, "reviews": rows, "warnings": warnings}
    saved = save_reviews(ctx, rows, ctx.clock(), token)
    return {"annotation_ids": [r.annotation_id for r in saved],
            "reviews": [msgspec.to_builtins(r) for r in saved], "warnings": warnings}


def judgment_warnings(ctx, rows: list[dict]) -> list[str]:
    """settings.check_judgment of each distinct (metric, label): refusals raised, warnings
    (undeclared metrics) returned once each."""
    out = []
    for metric, label in sorted({(r["metric"], r["label"]) for r in rows}):
        warning = settings.check_judgment(ctx, metric, label)
        if warning is not None and warning not in out:
            out.append(warning)
    return out


def review_with(ctx, run_id: str, metric: str, label: str, comment: str | None = None,
                correction: Any = None, reviewer: str | None = None) -> dict:
    """One judgment previewed and confirmed in one call (what a page or `--yes` does: the
    preview's token is computed and used at once). Returns add_reviews' answer."""
    request = ReviewRequest(run_id=run_id, metric=metric, label=label, comment=comment,
                            correction=correction)
    preview = add_reviews(ctx, [request], reviewer=reviewer)
    return add_reviews(ctx, [request], preview["confirm_token"], reviewer)


def reviews(ctx, run_id: str) -> list[Review]:
    """The reviews of a recorded run, oldest first."""
    get_run(ctx, run_id)
    return index(ctx).of_run(run_id)


def queue(ctx, metric: str = "dataset_eligibility", tenant: str | None = None,
          since: str | None = None, limit: int = 100, cursor: str | None = None,
          mine: bool = False, reviewer: str | None = None) -> RunsPage:
    """The runs that still await judgments on `metric`, oldest first (import order), paged
    and summarised as `runs.list_runs` gives them: on the eligibility metric, those judged by
    fewer different reviewers than the rule's K; on another, those nobody judged. `mine`:
    only those the configured person (or `reviewer`) has not judged on `metric` yet."""
    encoding.check_text(metric, "metric")
    encoding.check_text(reviewer, "reviewer", optional=True)
    if mine:
        reviewer = reviewer or require_person("a queue of your own")
    return page_of_runs(ctx, tenant, since, limit, cursor,
                        keep=awaiting(ctx, metric, reviewer if mine else None))


def awaiting(ctx, metric: str, reviewer: str | None = None):
    """A predicate on run ids: the run still awaits judgments on `metric` (fewer different
    reviewers than the eligibility rule's K on its metric, else than 1), and, with
    `reviewer`, not from that reviewer (`queue`, `cas status`)."""
    rules = settings.eligibility(ctx)
    need = rules.quorum if metric == rules.metric else 1
    judges: dict[str, set[str]] = {}
    for r in index(ctx).all():
        if r.metric == metric:
            judges.setdefault(r.run_id, set()).add(r.reviewer)

    def keep(run_id: str) -> bool:
        who = judges.get(run_id, ())
        return len(who) < need and reviewer not in who
    return keep


def plan_reviews(ctx, requests: list[ReviewRequest], reviewer: str,
                 progress: Progress | None = None) -> tuple[list[dict], str]:
    """Validate a batch and return its preview rows and confirm token (nothing is stored)."""
    if not requests:
        raise InvalidArgument("no reviews given: a review is {run_id, metric, label}")
    rows = []
    run_index(ctx).get_many(r.run_id for r in requests if isinstance(r.run_id, str))
    for i, r in enumerate(requests):
        if progress is not None and i % PROGRESS_EVERY == 0:
            progress("checking reviewed runs", i, len(requests))
        for field in ("run_id", "metric", "label"):
            value = getattr(r, field)
            if not isinstance(value, str) or not value:
                raise InvalidArgument(f"review {field} must be 1-256 printable characters")
            problem = encoding.text_problem(value, 256)
            if problem is not None:
                raise InvalidArgument(f"review {field} must be 1-256 printable characters; "
                                      f"it {problem}")
        run = get_run(ctx, r.run_id)
        row = {"run_id": r.run_id, "run": encode_run_digest(run), "metric": r.metric,
               "label": r.label, "reviewer": reviewer}
        # (present only when given, so that a plain judgment's token is what it always was)
        if r.comment is not None:
            row["comment"] = check_comment(r.comment)
        if r.correction is not None:
            row["correction"] = check_correction(r.correction)
        rows.append(row)
    return rows, confirm_token("review", rows)


MAX_CORRECTION = 1 << 20  # bytes of a correction's canonical JSON


def check_comment(comment: Any) -> str:
    """A judgment's comment as saved: text of 1 to COMMENT_LIMIT characters (line breaks and
    tabs allowed, no other control character), scrubbed by cas.format.redaction."""
    encoding.check_text(comment, "comment")
    if not comment.strip() or len(comment) > COMMENT_LIMIT:
        raise InvalidArgument(f"a comment is 1 to {COMMENT_LIMIT} characters, not "
                              f"{len(comment)}" if comment.strip() else
                              "a comment is not empty or blank (leave it out instead)",
                              reason="COMMENT_INVALID")
    bad = next((c for c in comment if not (c.isprintable() or c in "\n\t")), None)
    if bad is not None:
        raise InvalidArgument(f"a comment holds the control character U+{ord(bad):04X}; "
                              "only line breaks and tabs are allowed", reason="COMMENT_INVALID")
    return redaction.scrub_text(comment)


def check_correction(correction: Any) -> Any:
    """A judgment's correction as saved: any JSON value but null (canonical JSON can carry
    it), at most MAX_CORRECTION bytes, scrubbed by cas.format.redaction."""
    scrubbed = redaction.scrub(correction, "$.correction")
    if len(encoding.encode(scrubbed)) > MAX_CORRECTION:
        raise InvalidArgument(f"a correction is at most {MAX_CORRECTION} bytes of JSON",
                              reason="CORRECTION_TOO_LARGE")
    return scrubbed


def encode_run_digest(run) -> str:
    return encode_object(run)[2]


def save_reviews(ctx, rows: list[dict], now: str, token: str | None = None) -> list[Review]:
    """Save a confirmed batch. Confirming the same token again (a retried command) returns the
    reviews it saved the first time instead of saving them twice."""
    # Under a writer's lease: an erasure of a reviewed run's person waits for this save (and
    # redacts it), or this save waits for the erasure (and then finds the run gone).
    with leases.writing(ctx, "review"):
        return _save_leased(ctx, rows, now, token)


def _save_leased(ctx, rows: list[dict], now: str, token: str | None) -> list[Review]:
    require_runs(ctx, {row["run"]: row["run_id"] for row in rows})
    reviews_index = index(ctx)
    for _ in claims.attempts("a review batch number"):
        number = reviews_index.refresh() + 1
        saved = None if token is None else reviews_index.saved_by(token)
        if saved is not None:
            return saved
        reviews = []
        for position, row in enumerate(rows):
            # The batch number and position make the id unique even for the same judgment
            # given twice at the same instant (in one batch, or with a coarse clock).
            core = dict(row, reviewed_at=now, batch=number, position=position)
            annotation_id = digest.annotation_id(encoding.encode(core))
            reviews.append(Review(annotation_id=annotation_id, run_id=row["run_id"],
                                  run=row["run"], metric=row["metric"], label=row["label"],
                                  reviewer=row["reviewer"], reviewed_at=now,
                                  comment=row.get("comment", msgspec.UNSET),
                                  correction=row.get("correction", msgspec.UNSET)))
        record = ReviewBatch(number=number, reviews=reviews, confirm_token=token)
        data = format_record_file(record)
        if ctx.backend.put_if_absent(review_batch_key(number), data):
            log_index.extend(ctx.backend, log_index.REVIEWS, ctx.store.person_key, number, data)
            reviews_index.refresh()
            return reviews


def require_runs(ctx, runs: dict[str, str]) -> None:
    """Under a writer's lease, before recording anything that names runs (digest -> run id):
    each must still be stored; an erasure that completed since they were read removed it."""
    ctx.store.refresh()
    for run_digest, run_id in runs.items():
        if not ctx.store.contains(run_digest):
            raise NotFound(f"run {run_id!r} is no longer stored (an erasure removed it since "
                           "it was read); nothing was saved", reason="RUN_NOT_FOUND",
                           run_id=run_id)


class ReviewIndex:
    """Saved reviews. Lookups by annotation id, by run and by confirm token go through the
    log's keyed index; `all` reads every review batch (once per process)."""

    def __init__(self, backend, secret: bytes) -> None:
        self.backend = backend
        self.keyed = log_index.LogIndex(backend, log_index.REVIEWS, secret)
        self._by_id: dict[str, Review] = {}
        self._loaded = 0  # batches read so far by `all`

    def refresh(self) -> int:
        """The number of the last review batch (the batches landed since are read)."""
        return self.keyed.refresh()

    def get(self, annotation_id: str) -> Review | None:
        found = self.keyed.find("annotation", annotation_id)
        return found[-1][1] if found else None

    def saved_by(self, token: str) -> list[Review] | None:
        """The reviews the batch confirmed by `token` saved, or None if none was."""
        found = self.keyed.find("token", token)
        return found[0][1].reviews if found else None

    def all(self) -> list[Review]:
        """Every saved review (of runs still recorded), in no particular order."""
        for n, batch in read_log_from(self.backend, review_batch_key, ReviewBatch, self._loaded):
            for review in batch.reviews:
                self._by_id[review.annotation_id] = review
            self._loaded = n
        return list(self._by_id.values())

    def of_run(self, run_id: str) -> list[Review]:
        """The reviews of `run_id`, oldest first."""
        return self.of_runs([run_id])[run_id]

    def of_runs(self, run_ids: Iterable[str]) -> dict[str, list[Review]]:
        """`of_run` of each of `run_ids`, in one pass over the keyed index."""
        found = self.keyed.find_many("run-id", run_ids)
        return {run_id: sorted((r for _, r in entries),
                               key=lambda r: (r.reviewed_at, r.annotation_id))
                for run_id, entries in found.items()}

    def prefetch(self, annotation_ids: Iterable[str], run_ids: Iterable[str]) -> None:
        """Look up many at once, before a bulk caller asks for each (a promotion)."""
        self.keyed.prefetch("annotation", annotation_ids)
        self.keyed.prefetch("run-id", run_ids)

    def annotations_of(self, runs: Iterable[str]) -> list[str]:
        """The annotation ids of the reviews of the runs `runs` (digests), sorted."""
        found = self.keyed.find_many("run", runs)
        return sorted({r.annotation_id for entries in found.values() for _, r in entries})
