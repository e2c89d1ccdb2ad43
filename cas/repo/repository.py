"""The repository facade: one object naming every operation, each implemented once in its
feature module over the repository's Context (docs/api.md)."""

from __future__ import annotations

import functools
import numbers
import os
import time as _time
from typing import IO, Any, Callable, Iterable, TypeVar

from cas.errors import AlreadyExists
from cas.format.keys import CONFIG
from cas.format.records import (Case, DatasetRecord, DatasetTombstone, Eligibility, Erasure,
                                Experiment, Metrics, MetricSpec, Object, ProvenanceEntry,
                                RepoConfig, Review, RunRecord, ScoreWithdrawal, Settings,
                                SuiteResultRecord, VersionRecord, VersionRetirement,
                                VersionTombstone, format_record_file)
from cas.format.version_names import Pin
from cas.repo import agreement as _agreement
from cas.repo import comparison as _comparison
from cas.repo import datasets as _datasets
from cas.repo import deletion as _deletion
from cas.repo import erased as _erased
from cas.repo import erasure as _erasure
from cas.repo import experiments as _experiments
from cas.repo import fsck as _fsck
from cas.repo import gc as _gc
from cas.repo import pins as _pins
from cas.repo import promotion as _promotion
from cas.repo import reads as _reads
from cas.repo import renewal as _renewal
from cas.repo import retirement as _retirement
from cas.repo import reviews as _reviews
from cas.repo import runs as _runs
from cas.repo import scores as _scores
from cas.repo import sealing as _sealing
from cas.repo import settings as _settings
from cas.repo import timeline as _timeline
from cas.repo.checks import Progress
from cas.repo.comparison import ExperimentComparison
from cas.repo.context import Context, now
from cas.repo.datasets import VersionsPage
from cas.repo.fsck import Report
from cas.repo.gc import GcReport
from cas.repo.promotion import SealResult, Subject
from cas.repo.reads import (DetailedDiffPage, DetailedItemsPage, Diff, DiffPage, ItemsPage,
                            VersionListing)
from cas.repo.runs import RunImportResult, RunsPage
from cas.repo.scores import RecordedScore
from cas.repo.settings import ContentPolicy
from cas.repo.timeline import LogPage
from cas.storage.tree import Proof

Operation = TypeVar("Operation", bound=Callable[..., Any])


def _writes(method: Operation) -> Operation:
    """A method that stores: it first finishes an erasure a crashed (or waiting) process left
    pending, so nothing is written beside a half-done erasure (docs/concepts.md)."""
    @functools.wraps(method)
    def writing(self, *args, **kwargs):
        _erasure.recover(self.context)
        return method(self, *args, **kwargs)
    return writing  # type: ignore[return-value]


class Repository:
    """An open repository. Opening reads its config and writes nothing."""

    def __init__(self, backend, clock: Callable[[], str] = now,
                 time: Callable[[], float] = _time.time) -> None:
        self.context = Context(backend, clock, time)

    @classmethod
    def create(cls, backend, clock: Callable[[], str] = now) -> "Repository":
        """A new repository in an empty location (its config, with a random id)."""
        config = RepoConfig(repository_id=os.urandom(16).hex(), created_at=clock())
        if not backend.put_if_absent(CONFIG, format_record_file(config)):
            raise AlreadyExists(f"a repository already exists at {backend.url}")
        return cls(backend, clock)

    backend = property(lambda self: self.context.backend)
    store = property(lambda self: self.context.store)
    refs = property(lambda self: self.context.refs)
    config = property(lambda self: self.context.config)
    clock = property(lambda self: self.context.clock)
    time = property(lambda self: self.context.time)
    location = property(lambda self: self.context.backend.url)

    # -- datasets and their versions (datasets.py, sealing.py, retirement.py) ---------------------
    @_writes
    def create_dataset(self, name: str, description: str = "", tags: Iterable[str] = (),
                       author: str | None = None, admission: str = "reviewed") -> DatasetRecord:
        """A new dataset, admitting cases by review (the default) or by direct commit."""
        return _datasets.create_dataset(self.context, name, description, tags, author, admission)

    @_writes
    def edit_dataset(self, name: str, description: str | None = None,
                     tags: Iterable[str] | None = None, author: str | None = None) -> DatasetRecord:
        """A new revision of the dataset's description and tags."""
        return _datasets.edit_dataset(self.context, name, description, tags, author)

    def dataset(self, name: str) -> DatasetRecord:
        """The dataset's current metadata (its latest revision)."""
        return _datasets.dataset(self.context, name)

    def dataset_history(self, name: str) -> list[DatasetRecord]:
        """Every revision of the dataset's metadata, oldest first."""
        return _datasets.dataset_history(self.context, name)

    def datasets(self) -> list[str]:
        """The names of the datasets."""
        return _datasets.datasets(self.context)

    def head(self, name: str) -> int:
        """The newest version number not deleted (0 if none): for writers, not for reads."""
        return _datasets.head(self.context, name)

    def version(self, name: str, number: int) -> VersionRecord:
        """The record of `name@number` (whatever its state)."""
        return _datasets.version(self.context, name, number)

    def versions(self, name: str, before: int | None = None, limit: int = 20) -> VersionsPage:
        """Version records newest first, starting below `before` (a version number)."""
        return _datasets.versions(self.context, name, before, limit)

    @_writes
    def commit(self, name: str, *, base: int | None, add: Iterable[Any] = (),
               remove: Iterable[str] = (), message: str = "", author: str | None = None,
               operation: str = "commit", retry: bool = False) -> VersionRecord:
        """Seal version base+1 = (version `base` - remove) | add."""
        return _sealing.commit(self.context, name, base=base, add=add, remove=remove,
                               message=message, author=author, operation=operation, retry=retry)

    def retirement(self, name: str, number: int) -> VersionRetirement | None:
        """The VersionRetirement of `name@number`, or None while it is ACTIVE."""
        return _retirement.retirement(self.context, name, number)

    def version_state(self, name: str, number: int) -> str:
        """`ACTIVE`, or `RETIRED` once the version can no longer be honoured."""
        return _retirement.version_state(self.context, name, number)

    @_writes
    def retire(self, name: str, number: int, cause: str, note: str,
               author: str | None = None) -> VersionRetirement:
        """Retire `name@number` for an operator's cause, with a note; permanent."""
        return _retirement.retire(self.context, name, number, cause, note, author)

    @_writes
    def renew(self, name: str, author: str | None = None) -> VersionRecord:
        """Seal the successor of `name`'s head, which an erasure retired: the cases it left."""
        return _renewal.renew(self.context, name, author)

    def successor(self, name: str, number: int) -> VersionRecord | None:
        """The renewal sealed directly on the retired `name@number`, or None."""
        return _renewal.successor(self.context, name, number)

    def renewal_path(self, name: str, number: int) -> list[VersionRecord]:
        """The renewals a pin of the retired `name@number` moves through, in order."""
        return _renewal.renewal_path(self.context, name, number)

    def renewed_to(self, name: str, number: int) -> VersionRecord:
        """The ACTIVE version a pin of `name@number` moves to (NO_SUCCESSOR when none)."""
        return _renewal.renewed_to(self.context, name, number)

    # -- reads of an exact version (reads.py) -----------------------------------------------------
    def items(self, name: str, number: int, after: str | None = None,
              limit: int = 100) -> ItemsPage:
        """One page of case ids of `name@number` in id order, strictly after `after`."""
        return _reads.items(self.context, name, number, after, limit)

    def case(self, name: str, number: int, case_id: str) -> Case:
        """A case of `name@number`; refused if the version does not hold it."""
        return _reads.case(self.context, name, number, case_id)

    def cases(self, name: str, number: int, case_ids: Iterable[str]) -> list[Case]:
        """The cases `case_ids` of `name@number`, in that order, read together (one batch of
        reads, not one per case); refused if the version does not hold one of them."""
        return _reads.cases(self.context, name, number, case_ids)

    def object(self, digest: str) -> Object:
        """Any stored object by digest, verified."""
        return _reads.object(self.context, digest)

    def object_bytes(self, digest: str) -> tuple[str, bytes]:
        """The kind and the canonical bytes of any stored object, verified."""
        return _reads.object_bytes(self.context, digest)

    def objects_bytes(self, digests: list[str]) -> list[tuple[str, bytes]]:
        """The kind and canonical bytes of each object of `digests`, verified."""
        return _reads.objects_bytes(self.context, digests)

    def diff(self, name: str, old: int, new: int, new_dataset: str | None = None) -> Diff:
        """The ids added and removed from `name@old` to `new_dataset or name`@`new`."""
        return _reads.diff(self.context, name, old, new, new_dataset)

    def diff_page(self, name: str, old: int, new: int, cursor: str | None = None, limit: int = 100,
                  new_dataset: str | None = None) -> DiffPage:
        """One page of the changes from `name@old` to `new_dataset or name`@`new`."""
        return _reads.diff_page(self.context, name, old, new, cursor, limit, new_dataset)

    def prove(self, name: str, number: int, case_id: str) -> Proof:
        """An inclusion proof of `case_id` in `name@number`."""
        return _reads.prove(self.context, name, number, case_id)

    def provenance(self, name: str, number: int) -> list:
        """Per case a version added: the run and review it came from, or its author."""
        return _reads.provenance(self.context, name, number)

    def case_origins(self, name: str, number: int,
                     ids: list[str]) -> dict[str, ProvenanceEntry]:
        """case id -> the provenance entry of the version that added it (run and review, or
        `committed_by`), for `ids` of `name@number`."""
        return _reads.case_origins(self.context, name, number, ids)

    def items_detailed(self, name: str, number: int, after: str | None = None,
                       limit: int = 100) -> DetailedItemsPage:
        """`items`, with each case's run id, tenant and outcome."""
        return _reads.items_detailed(self.context, name, number, after, limit)

    def diff_detailed(self, name: str, old: int, new: int, cursor: str | None = None,
                      limit: int = 100, new_dataset: str | None = None) -> DetailedDiffPage:
        """`diff_page`, with each case's run id, tenant and outcome."""
        return _reads.diff_detailed(self.context, name, old, new, cursor, limit, new_dataset)

    def resolve_case(self, name: str, number: int, case_id: str | None = None,
                     run_id: str | None = None) -> str:
        """The id of the case of `name@number` a case id prefix or a run id names."""
        return _reads.resolve_case(self.context, name, number, case_id, run_id)

    def version_listing(self, name: str, before: int | None = None,
                        limit: int = 20) -> VersionListing:
        """A page of `name`'s versions, newest first, each with its state."""
        return _reads.version_listing(self.context, name, before, limit)

    # -- recorded runs and their reviews (runs.py, reviews.py) ------------------------------------
    @_writes
    def import_runs(self, source: IO[bytes] | Iterable[bytes] | Iterable[dict[str, Any]],
                    author: str | None = None, allow_erased_persons: Iterable[str] = (),
                    progress: Progress | None = None) -> RunImportResult:
        """Import runs from a JSON Lines stream (or any iterable of dicts): all or nothing."""
        return _runs.import_runs(self.context, source, author, allow_erased_persons, progress)

    def runs(self) -> list[str]:
        """Every recorded run id, sorted."""
        return _runs.runs(self.context)

    def run(self, run_id: str) -> RunRecord:
        """A recorded run by its run id."""
        return _runs.get_run(self.context, run_id)

    def list_runs(self, tenant: str | None = None, since: str | None = None, limit: int = 100,
                  cursor: str | None = None) -> RunsPage:
        """A page of recorded runs in import order, each summarised."""
        return _runs.list_runs(self.context, tenant, since, limit, cursor)

    def review_queue(self, metric: str = "dataset_eligibility", tenant: str | None = None,
                     since: str | None = None, limit: int = 100,
                     cursor: str | None = None, mine: bool = False,
                     reviewer: str | None = None) -> RunsPage:
        """The runs still awaiting judgments on `metric` (the rule's K reviewers on the
        eligibility metric), oldest first, paged; `mine`: those `reviewer` (default: the
        configured person) has not judged yet."""
        return _reviews.queue(self.context, metric, tenant, since, limit, cursor, mine,
                              reviewer)

    @_writes
    def review(self, run_id: str, metric: str, label: str, comment: str | None = None,
               correction: Any = None, reviewer: str | None = None) -> dict:
        """One judgment, previewed and confirmed in one call (a page's keyboard judging):
        add_reviews' answer ({"annotation_ids", "reviews", "warnings"})."""
        return _reviews.review_with(self.context, run_id, metric, label, comment, correction,
                                    reviewer)

    @_writes
    def add_reviews(self, requests: list, confirm_token: str | None = None,
                    reviewer: str | None = None, progress: Progress | None = None) -> dict:
        """Preview (no token) or save (the preview's token) reviews of runs."""
        return _reviews.add_reviews(self.context, requests, confirm_token, reviewer, progress)

    def reviews(self, run_id: str) -> list[Review]:
        """The reviews of a run, oldest first."""
        return _reviews.reviews(self.context, run_id)

    # -- settings and promotion (settings.py, promotion.py) ---------------------------------------
    def settings(self) -> Settings | None:
        """The repository's default content policy: its newest revision, or None."""
        return _settings.settings(self.context)

    def content_policy(self, dataset: str | None = None) -> ContentPolicy:
        """The content policy in force for `dataset` (or the repository default)."""
        return _settings.content_policy(self.context, dataset)

    @_writes
    def set_content_policy(self, withheld: list[str] | None, author: str | None = None,
                           dataset: str | None = None) -> Settings:
        """A new revision of the content policy, as the default or for a dataset."""
        return _settings.set_content_policy(self.context, withheld, author, dataset)

    def eligibility(self) -> Eligibility:
        """The judgment promotion needs: the newest revision, else the defaults."""
        return _settings.eligibility(self.context)

    @_writes
    def set_eligibility(self, metric: str | None = None, accepted: list[str] | None = None,
                        author: str | None = None, reviewers: int | None = None,
                        rule: str | None = None) -> Eligibility:
        """A new revision of the eligibility rule (what is not given is kept)."""
        return _settings.set_eligibility(self.context, metric, accepted, author, reviewers,
                                         rule)

    @_writes
    def accept_label(self, label: str, author: str | None = None) -> Eligibility:
        """`label` joins the accepted labels and the eligibility metric's declared labels."""
        return _settings.accept_label(self.context, label, author)

    def metrics(self) -> Metrics:
        """The newest revision of the declared metrics (revision 0: none declared)."""
        return _settings.metrics(self.context)

    def declared_metrics(self) -> dict[str, MetricSpec]:
        """name -> declared metric (labels in declared order), the eligibility metric always
        among them."""
        return _settings.declared_metrics(self.context)

    def check_judgment(self, metric: str, label: str) -> str | None:
        """Refuse a judgment the declared labels do not allow; the warning an undeclared
        metric earns (naming the closest declared one), or None."""
        return _settings.check_judgment(self.context, metric, label)

    @_writes
    def define_metric(self, name: str, labels: list[str], description: str = "",
                      author: str | None = None) -> Metrics:
        """Declare (or redeclare) a metric and its labels, in the order a reviewer picks them."""
        return _settings.define_metric(self.context, name, labels, description, author)

    @_writes
    def set_declared_only(self, declared_only: bool, author: str | None = None) -> Metrics:
        """Whether a judgment on an undeclared metric is refused (else warned about)."""
        return _settings.set_declared_only(self.context, declared_only, author)

    def corrections(self, name: str, number: int, case_ids: Iterable[str]) -> dict[str, Review]:
        """case id -> the admitting judgment whose correction is that case's expected answer
        (for the promoted cases of `case_ids` whose judgment carries one)."""
        return _promotion.corrections(self.context, name, number, case_ids)

    def agreement(self, metric: str | None = None) -> dict[str, Any]:
        """How much reviewers agree on `metric` (default: the eligibility metric)."""
        return _agreement.agreement(self.context, metric)

    @_writes
    def promote(self, name: str, subjects: list[Subject | dict[str, Any]], idempotency_key: str,
                author: str | None = None, progress: Progress | None = None) -> dict[str, Any]:
        """Stage a promotion of reviewed runs and return its preview; seals nothing."""
        return _promotion.promote(self.context, name, subjects, idempotency_key, author, progress)

    @_writes
    def promote_reviewed(self, name: str, idempotency_key: str, metric: str | None = None,
                         tenant: str | None = None, since: str | None = None,
                         run_ids: Iterable[str] | None = None, author: str | None = None,
                         progress: Progress | None = None) -> dict[str, Any]:
        """`promote` of the runs `reviewed_subjects` selects."""
        return _promotion.promote_reviewed(self.context, name, idempotency_key, metric, tenant,
                                           since, run_ids, author, progress)

    def reviewed_subjects(self, metric: str | None = None, tenant: str | None = None,
                          since: str | None = None,
                          run_ids: Iterable[str] | None = None) -> list[Subject]:
        """The runs whose newest judgment accepts them, as promotion subjects."""
        return _promotion.reviewed_subjects(self.context, metric, tenant, since, run_ids)

    @_writes
    def remove(self, name: str, item_ids: list[str], idempotency_key: str,
               author: str | None = None) -> dict[str, Any]:
        """Stage the removal of cases from the head and return its preview."""
        return _promotion.remove(self.context, name, item_ids, idempotency_key, author)

    def preview(self, name: str, confirm_token: str, after: str | None = None,
                limit: int | None = None) -> dict[str, Any]:
        """A staged proposal's preview again, by its confirm token: the page of `limit` changes
        (default 100) after the cursor `after` (a preview's `next_cursor`); stages nothing."""
        return _promotion.preview_page(self.context, name, confirm_token, after, limit)

    @_writes
    def seal(self, name: str, confirm_token: str, author: str | None = None,
             message: str = "") -> SealResult:
        """Seal the proposal a preview's `confirm_token` names (once)."""
        return _promotion.seal(self.context, name, confirm_token, author, message)

    # -- pins, scores, experiments and deletion (pins.py, scores.py, experiments.py, ...) ---------
    def pin(self, name: str, number: int) -> Pin:
        """A `cas.Pin` of an ACTIVE version: dataset, version and its content_digest."""
        return _pins.pin(self.context, name, number)

    def resolve_pin(self, pin: Pin | str) -> VersionRecord:
        """The VersionRecord a pin (or its string) names, checked against it."""
        return _pins.resolve_pin(self.context, pin)

    def verify_pin(self, pin: Pin | str) -> VersionRecord:
        """`resolve_pin`, and refused if the version is RETIRED."""
        return _pins.verify_pin(self.context, pin)

    def check_proof_pin(self, proof: Proof, pin: Pin | str,
                        case_id: str | None = None) -> VersionRecord:
        """Check `proof` against the content_digest of the version `pin` names."""
        return _pins.check_proof_pin(self.context, proof, pin, case_id)

    @_writes
    def record_score(self, pin: Pin | str, *, metric: str, value: numbers.Real | str,
                     item: str | None = None, experiment: str | None = None,
                     author: str | None = None) -> RecordedScore:
        """Store one score citing `pin`."""
        return _scores.record_score(self.context, pin, metric=metric, value=value, item=item,
                                    experiment=experiment, author=author)

    @_writes
    def record_scores(self, pin: Pin | str, scores: Iterable[dict[str, Any]],
                      author: str | None = None,
                      result: SuiteResultRecord | None = None) -> list[RecordedScore]:
        """Store `scores` citing `pin`, as one batch (citing the `suite.result` object
        `result`, stored first, when given)."""
        return _scores.record_scores(self.context, pin, scores, author, result)

    def score_batch_results(self, name: str) -> list[tuple[str, frozenset, str]]:
        """(batch key, its experiments, the suite result digest) of each batch citing one."""
        return _scores.batch_results(self.context, name)

    def suite_result(self, digest: str) -> SuiteResultRecord:
        """The stored `suite.result` object `digest`."""
        return _scores.suite_result(self.context, digest)

    def scores(self, name: str, version: int | None = None) -> list[RecordedScore]:
        """Every score of a dataset (or of one of its versions), in the order recorded."""
        return _scores.scores(self.context, name, version)

    @_writes
    def withdraw_batch(self, name: str, batch: Any, reason: str,
                       author: str | None = None) -> ScoreWithdrawal:
        """Withdraw a score batch of dataset `name`, once, saying why."""
        return _scores.withdraw_batch(self.context, name, batch, reason, author)

    @_writes
    def create_experiment(self, name: str, version: int, experiment_name: str,
                          author: str | None = None) -> Experiment:
        """A named experiment over the ACTIVE version `name@version`."""
        return _experiments.create_experiment(self.context, name, version, experiment_name, author)

    def experiments(self, name: str) -> list[Experiment]:
        """The experiments of a dataset, in the order created."""
        return _experiments.experiments(self.context, name)

    def compare_experiments(self, name: str, a: str, b: str) -> ExperimentComparison:
        """Per-metric aggregates of two experiments, and the cases scored apart."""
        return _comparison.compare_experiments(self.context, name, a, b)

    @_writes
    def delete_version(self, name: str, number: int, author: str | None = None) -> VersionTombstone:
        """Delete a version nothing cites (run again to finish an interrupted one)."""
        return _deletion.delete_version(self.context, name, number, author)

    @_writes
    def delete_dataset(self, name: str, author: str | None = None) -> DatasetTombstone:
        """Delete a dataset none of whose versions is cited."""
        return _deletion.delete_dataset(self.context, name, author)

    # -- erasure, garbage, checking, the timeline (erasure.py, gc.py, fsck.py, timeline.py) -------
    @_writes
    def erase(self, person: str, confirm_token: str | None = None, author: str | None = None,
              wait: float | None = None,
              progress: Progress | None = None) -> dict[str, Any] | Erasure:
        """Preview (no token) or carry out (its token) the erasure of a person's data."""
        return _erasure.erase(self.context, person, confirm_token, author, wait, progress)

    def erasures(self) -> list[Erasure]:
        """Every completed erasure, oldest first."""
        return _erased.erasures(self.context)

    def finish_erasures(self, wait: float = 0.0) -> list[Erasure]:
        """Finish every erasure a crashed (or waiting) process left half done."""
        return _erasure.recover(self.context, wait)

    def gc(self, dry_run: bool = False, grace: float | str = 86400.0,
           wait: float | str | None = None, progress: Progress | None = None) -> GcReport:
        """Collect garbage (a dry run reports what it would delete, writing nothing)."""
        # (not `_writes`: it finishes a pending erasure itself, except in a dry run)
        return _gc.collect(self.context, dry_run, grace, wait, progress)

    def fsck(self, progress: Progress | None = None) -> Report:
        """Read every byte of the repository and report each problem."""
        return _fsck.check(self.context, progress)

    def log(self, dataset: str | None = None, limit: int = 50,
            cursor: str | None = None) -> LogPage:
        """The repository's timeline (or one dataset's), newest first, a page at a time."""
        return _timeline.log(self.context, dataset, limit, cursor)

    def status(self, metric: str = "dataset_eligibility") -> dict[str, Any]:
        """What is waiting: unsealed proposals, runs to review, unfinished erasures."""
        return _timeline.status(self.context, metric)
