"""Repository settings: the content policy (which content classes a promotion withholds, by
default and per dataset) and the eligibility rule (the judgment a run needs to be promoted).

Each is a numbered log of immutable revisions (`settings/<n>`, `eligibility/<n>`); the newest
revision in force answers.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from cas.errors import InvalidArgument
from cas.format import encoding, keys
from cas.format.projection import CONTENT_CLASSES
from cas.format.records import Eligibility, Settings, format_record_file
from cas.format.version_names import check_dataset_name
from cas.repo import checks, datasets
from cas.storage import claims
from cas.storage.refs import read_log_from

DEFAULT_METRIC = "dataset_eligibility"
DEFAULT_ACCEPTED = ("accepted", "reviewed")


class _SettingsLog:
    """The revisions of one numbered settings log (numbered from 1, no gaps), read once per
    context and then extended: a revision is immutable, so a call costs one read (of the
    number after the newest known) however many revisions the log holds."""

    def __init__(self, backend, key_of, type_) -> None:
        self.backend, self.key_of, self.type_ = backend, key_of, type_
        self.by_number: dict[int, Any] = {}
        self.loaded = 0

    def refresh(self) -> list:
        # by number, so that two threads refreshing one context at once agree
        for n, record in read_log_from(self.backend, self.key_of, self.type_, self.loaded):
            self.by_number[n] = record
            self.loaded = max(self.loaded, n)
        return [self.by_number[n] for n in range(1, self.loaded + 1)]


def _revisions(ctx, key_of, type_) -> list:
    """Every revision of a settings log, oldest first (see _SettingsLog)."""
    return ctx.derived(f"settings-log:{type_.__name__}",
                       lambda: _SettingsLog(ctx.backend, key_of, type_)).refresh()


def _newest(ctx, key_of, type_):
    """The newest revision of a numbered settings log, or None."""
    revisions = _revisions(ctx, key_of, type_)
    return revisions[-1] if revisions else None


class ContentPolicy(NamedTuple):
    """The content classes a promotion into a dataset withholds, and where that comes from:
    `source` is the settings revision in force (a dataset's override, or the repository
    default), None when no revision applies (nothing is withheld)."""

    withheld: list[str]
    source: Settings | None

    @property
    def overridden(self) -> bool:
        return self.source is not None and self.source.dataset is not msgspec.UNSET


def settings(ctx) -> Settings | None:
    """The repository's default content policy: its newest revision (None: every content
    class is copied)."""
    return content_policy(ctx).source


def content_policy(ctx, dataset: str | None = None) -> ContentPolicy:
    """The policy in force for `dataset`: its newest override (unless that one follows the
    default again), else the repository default's newest revision. An override outlives
    newer defaults, so the revisions are read newest first until both answers are known
    (every revision, for a dataset with no override: settings change rarely)."""
    if dataset is not None:
        check_dataset_name(dataset)
    default: Settings | None = None
    for record in reversed(_revisions(ctx, keys.settings_key, Settings)):
        if record.dataset is msgspec.UNSET:
            default = default or record
            if dataset is None:
                break
        elif dataset is not None and record.dataset == dataset:
            if record.withheld is not None:
                return ContentPolicy(list(record.withheld), record)
            dataset = None  # it follows the default: its older overrides are void
            if default is not None:
                break
    return ContentPolicy(list(default.withheld or []) if default else [], default)


def set_content_policy(ctx, withheld: list[str] | None, author: str | None = None,
                       dataset: str | None = None) -> Settings:
    """A new settings revision: the content classes a promotion withholds from cases, as the
    repository default or (`dataset`) as that dataset's override. For a dataset, `withheld`
    None drops its override: it follows the default again."""
    author = checks.author(author)
    if dataset is not None:
        datasets.dataset(ctx, dataset)
    if withheld is None and dataset is None:
        raise InvalidArgument("the repository default names the classes it withholds (an "
                              "empty list: none); only a dataset's override can follow it")
    classes = None
    if withheld is not None:
        classes = sorted(set(checks.strings(withheld, "withheld", "content classes")))
        for c in classes:
            if c not in CONTENT_CLASSES:
                raise InvalidArgument(f"unknown content class {c!r}; accepted: "
                                      f"{', '.join(CONTENT_CLASSES)}")
    for _ in claims.attempts("a settings revision"):
        record = Settings(revision=len(_revisions(ctx, keys.settings_key, Settings)) + 1,
                          withheld=classes,
                          author=author, edited_at=ctx.clock(),
                          dataset=msgspec.UNSET if dataset is None else dataset)
        if ctx.backend.put_if_absent(keys.settings_key(record.revision),
                                     format_record_file(record)):
            return record


def eligibility(ctx) -> Eligibility:
    """The judgment promotion needs: the newest revision, else the defaults (revision 0)."""
    return _newest(ctx, keys.eligibility_key, Eligibility) or Eligibility(
        revision=0, metric=DEFAULT_METRIC, accepted=list(DEFAULT_ACCEPTED), author="",
        edited_at="")


def set_eligibility(ctx, metric: str, accepted: list[str],
                    author: str | None = None) -> Eligibility:
    """A new revision of the rule: judgments on `metric` with one of the `accepted` labels
    admit a run to promotion."""
    problem = encoding.text_problem(metric, 256) if isinstance(metric, str) and metric else \
        "is not a non-empty string"
    if problem is not None:
        raise InvalidArgument(f"the eligibility metric is 1-256 printable characters; it "
                              f"{problem}")
    labels = checks.strings(accepted, "accepted", "labels")
    if not labels:
        raise InvalidArgument("name at least one accepted label")
    for label in labels:
        problem = encoding.text_problem(label, 256) if label else "is empty"
        if problem is not None:
            raise InvalidArgument(f"an accepted label is 1-256 printable characters; "
                                  f"{encoding.describe(label)} {problem}")
    author = checks.author(author)
    for _ in claims.attempts("an eligibility revision"):
        record = Eligibility(revision=eligibility(ctx).revision + 1, metric=metric,
                             accepted=sorted(set(labels)), author=author,
                             edited_at=ctx.clock())
        if ctx.backend.put_if_absent(keys.eligibility_key(record.revision),
                                     format_record_file(record)):
            return record
