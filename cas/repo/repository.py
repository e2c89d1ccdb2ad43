"""The repository facade: one object naming every operation, each implemented once in its
feature module over the repository's Context (docs/api.md)."""

from __future__ import annotations

import functools
import os
import time as _time
from typing import Callable

from cas.repo import datasets as _datasets
from cas.repo import erasure as _erasure
from cas.repo import fsck as _fsck
from cas.repo import gc as _gc
from cas.repo import proposals as _proposals
from cas.repo import reads as _reads
from cas.repo import retirement as _retirement
from cas.repo import reviews as _reviews
from cas.repo import runs as _runs
from cas.repo import scores as _scores
from cas.repo import sealing as _sealing
from cas.repo import timeline as _timeline
from cas.repo.context import Context, now
from cas.errors import AlreadyExists
from cas.format.keys import CONFIG
from cas.format.records import RepoConfig, format_record_file


def _op(operation: Callable) -> Callable:
    """A method that calls `operation` on the repository's context."""
    @functools.wraps(operation)
    def method(self, *args, **kwargs):
        return operation(self.context, *args, **kwargs)
    return method


def _writes(operation: Callable) -> Callable:
    """A method that stores: it first finishes an erasure a crashed (or waiting) process left
    pending, so nothing is written beside a half-done erasure (docs/concepts.md)."""
    @functools.wraps(operation)
    def method(self, *args, **kwargs):
        _erasure.recover(self.context)
        return operation(self.context, *args, **kwargs)
    return method


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

    # -- datasets and their versions (cas/datasets.py, sealing.py, retirement.py) ----------
    create_dataset = _writes(_datasets.create_dataset)
    edit_dataset = _writes(_datasets.edit_dataset)
    dataset = _op(_datasets.dataset)
    dataset_history = _op(_datasets.dataset_history)
    datasets = _op(_datasets.datasets)
    head = _op(_datasets.head)
    version = _op(_datasets.version)
    versions = _op(_datasets.versions)
    commit = _writes(_sealing.commit)
    retirement = _op(_retirement.retirement)
    version_state = _op(_retirement.version_state)
    retire = _writes(_retirement.retire)

    # -- reads of an exact version (cas/reads.py) ------------------------------------------
    items = _op(_reads.items)
    case = _op(_reads.case)
    object = _op(_reads.object)
    object_bytes = _op(_reads.object_bytes)
    objects_bytes = _op(_reads.objects_bytes)
    diff = _op(_reads.diff)
    diff_page = _op(_reads.diff_page)
    prove = _op(_reads.prove)
    provenance = _op(_reads.provenance)
    items_detailed = _op(_reads.items_detailed)
    diff_detailed = _op(_reads.diff_detailed)
    resolve_case = _op(_reads.resolve_case)
    version_listing = _op(_reads.version_listing)
    check_proof_pin = _op(_reads.check_proof_pin)

    # -- recorded runs, reviews, promotion (cas/runs.py, reviews.py, proposals.py) ---------
    import_runs = _writes(_runs.import_runs)
    runs = _op(_runs.runs)
    run = _op(_runs.get_run)
    list_runs = _op(_runs.list_runs)
    review_queue = _op(_reviews.queue)
    add_reviews = _writes(_reviews.add_reviews)
    reviews = _op(_reviews.reviews)
    settings = _op(_proposals.settings)
    content_policy = _op(_proposals.content_policy)
    set_content_policy = _writes(_proposals.set_content_policy)
    eligibility = _op(_proposals.eligibility)
    set_eligibility = _writes(_proposals.set_eligibility)
    promote = _writes(_proposals.promote)
    promote_reviewed = _writes(_proposals.promote_reviewed)
    reviewed_subjects = _op(_proposals.reviewed_subjects)
    remove = _writes(_proposals.remove)
    seal = _writes(_proposals.seal)

    # -- pins, scores, experiments and deletion (cas/scores.py) ----------------------------
    pin = _op(_scores.pin)
    resolve_pin = _op(_scores.resolve_pin)
    record_score = _writes(_scores.record_score)
    record_scores = _writes(_scores.record_scores)
    scores = _op(_scores.scores)
    create_experiment = _writes(_scores.create_experiment)
    experiments = _op(_scores.experiments)
    delete_version = _writes(_scores.delete_version)
    delete_dataset = _writes(_scores.delete_dataset)
    withdraw_batch = _writes(_scores.withdraw_batch)
    compare_experiments = _op(_scores.compare_experiments)
    verify_pin = _op(_scores.verify_pin)

    # -- erasure, garbage, checking (cas/erasure.py, gc.py, fsck.py) -----------------------
    erase = _writes(_erasure.erase)
    erasures = _op(_erasure.erasures)
    finish_erasures = _op(_erasure.recover)
    gc = _op(_gc.collect)  # it finishes a pending erasure itself, except in a dry run
    fsck = _op(_fsck.check)
    log = _op(_timeline.log)
    status = _op(_timeline.status)
