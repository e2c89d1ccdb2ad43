"""Repository settings: the content policy (which content classes a promotion withholds, by
default and per dataset), the eligibility rule (the judgments a run needs to be promoted) and
the declared metrics (each metric's labels, and whether an undeclared metric is refused).

Each is a numbered log of immutable revisions (`settings/<n>`, `eligibility/<n>`,
`metrics/<n>`); the newest revision in force answers.
"""

from __future__ import annotations

import difflib
from typing import Any, NamedTuple

import msgspec

from cas.errors import FailedPrecondition, InvalidArgument
from cas.format import encoding, keys
from cas.format.projection import CONTENT_CLASSES
from cas.format.records import (ELIGIBILITY_RULES, Eligibility, Metrics, MetricSpec, Settings,
                                format_record_file)
from cas.format.version_names import check_dataset_name
from cas.repo import checks, datasets
from cas.storage import claims
from cas.storage.refs import read_log_from

DEFAULT_METRIC = "dataset_eligibility"
DEFAULT_ACCEPTED = ("accepted", "reviewed")
# the labels the eligibility metric declares besides its accepted ones
NOT_ACCEPTING = ("rejected", "needs-work")
MAX_REVIEWERS = 100


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


def set_eligibility(ctx, metric: str | None = None, accepted: list[str] | None = None,
                    author: str | None = None, reviewers: int | None = None,
                    rule: str | None = None) -> Eligibility:
    """A new revision of the rule: `reviewers` (K) different reviewers' newest judgments on
    `metric` must accept a run with one of the `accepted` labels, under `rule` ("unanimous":
    and none rejects it; "majority": accepting judgments outnumber the others). What is not
    given is kept from the revision in force. A declared `metric` gains the accepted labels
    it lacks (a new `metrics` revision), so that a judgment with them is never refused."""
    current = eligibility(ctx)
    metric = current.metric if metric is None else metric
    problem = encoding.text_problem(metric, 256) if isinstance(metric, str) and metric else \
        "is not a non-empty string"
    if problem is not None:
        raise InvalidArgument(f"the eligibility metric is 1-256 printable characters; it "
                              f"{problem}")
    labels = checks.strings(current.accepted if accepted is None else accepted, "accepted",
                            "labels")
    if not labels:
        raise InvalidArgument("name at least one accepted label")
    for label in labels:
        _check_label(label, "an accepted label")
    quorum = current.quorum if reviewers is None else reviewers
    if not isinstance(quorum, int) or isinstance(quorum, bool) or \
            not 1 <= quorum <= MAX_REVIEWERS:
        raise InvalidArgument(f"reviewers is a number of reviewers from 1 to {MAX_REVIEWERS}, "
                              f"not {encoding.describe(quorum)}")
    rule = current.agreement_rule if rule is None else rule
    if rule not in ELIGIBILITY_RULES:
        raise InvalidArgument(f"rule {encoding.describe(rule)} is not a rule; accepted: "
                              f"{', '.join(ELIGIBILITY_RULES)}")
    author = checks.author(author)
    declared = _newest(ctx, keys.metrics_key, Metrics)
    spec = None if declared is None else {m.name: m for m in declared.metrics}.get(metric)
    if spec is not None and not set(labels) <= set(spec.labels):
        define_metric(ctx, metric, spec.labels + [x for x in labels if x not in spec.labels],
                      spec.description, author)
    several = quorum != 1 or rule != "unanimous"
    for _ in claims.attempts("an eligibility revision"):
        record = Eligibility(revision=eligibility(ctx).revision + 1, metric=metric,
                             accepted=sorted(set(labels)), author=author,
                             edited_at=ctx.clock(),
                             reviewers=quorum if several else msgspec.UNSET,
                             rule=rule if several else msgspec.UNSET)
        if ctx.backend.put_if_absent(keys.eligibility_key(record.revision),
                                     format_record_file(record)):
            return record


def accept_label(ctx, label: str, author: str | None = None) -> Eligibility:
    """`cas settings eligibility --accept L`: L joins the accepted labels, and the eligibility
    metric's declared labels (set_eligibility)."""
    _check_label(label, "an accepted label")
    current = eligibility(ctx)
    return set_eligibility(ctx, accepted=sorted(set(current.accepted) | {label}), author=author)


def _check_label(label: Any, what: str) -> str:
    problem = encoding.text_problem(label, 256) if isinstance(label, str) and label else \
        "is empty" if label == "" else "is not a string"
    if problem is not None:
        raise InvalidArgument(f"{what} is 1-256 printable characters; "
                              f"{encoding.describe(label)} {problem}")
    return label


# -- declared metrics (label sets) -------------------------------------------------------------
def metrics(ctx) -> Metrics:
    """The declared metrics in force: the newest `metrics` revision, else revision 0 (none
    declared but the eligibility metric, which `declared_metrics` always holds)."""
    return _newest(ctx, keys.metrics_key, Metrics) or Metrics(
        revision=0, metrics=[], author="", edited_at="")


def declared_metrics(ctx) -> dict[str, MetricSpec]:
    """name -> declared metric. The eligibility metric is declared from the start: unless a
    revision declares it, its labels are its accepted ones then `rejected` and `needs-work`."""
    out = {m.name: m for m in metrics(ctx).metrics}
    rules = eligibility(ctx)
    if rules.metric not in out:
        out[rules.metric] = MetricSpec(
            name=rules.metric, labels=list(rules.accepted) + [
                x for x in NOT_ACCEPTING if x not in rules.accepted],
            description="whether a run may become a dataset case")
    return dict(sorted(out.items()))


def define_metric(ctx, name: str, labels: list[str], description: str = "",
                  author: str | None = None) -> Metrics:
    """Declare (or redeclare) metric `name` with its `labels` in the order a reviewer picks
    them: a new `metrics` revision. A judgment on it with another label is then refused. The
    eligibility metric keeps its accepted labels (they are added if left out)."""
    _check_label(name, "a metric name")
    labels = checks.strings(labels, "labels", "labels")
    if not labels:
        raise InvalidArgument(f"metric {name!r} needs at least one label")
    seen: set[str] = set()
    for label in labels:
        _check_label(label, "a label")
        if label in seen:
            raise InvalidArgument(f"label {label!r} is named twice; a metric's labels are "
                                  "each named once")
        seen.add(label)
    description = encoding.check_text(description, "description", optional=True) or ""
    if len(description) > 1024:
        raise InvalidArgument("a metric's description is at most 1024 characters")
    rules = eligibility(ctx)
    if name == rules.metric:
        labels = list(labels) + [a for a in rules.accepted if a not in seen]
    author = checks.author(author)
    return _write_metrics(ctx, author, lambda m: (
        sorted([x for x in m.metrics if x.name != name] + [
            MetricSpec(name=name, labels=list(labels), description=description)],
            key=lambda x: x.name), m.declared_only))


def set_declared_only(ctx, declared_only: bool, author: str | None = None) -> Metrics:
    """Whether a judgment on an undeclared metric is refused (True) or saved with a warning
    naming the closest declared metric (False, the default)."""
    if not isinstance(declared_only, bool):
        raise InvalidArgument(f"declared_only is True or False, not "
                              f"{encoding.describe(declared_only)}")
    return _write_metrics(ctx, checks.author(author), lambda m: (m.metrics, declared_only))


def _write_metrics(ctx, author: str, change) -> Metrics:
    for _ in claims.attempts("a metrics revision"):
        current = metrics(ctx)
        specs, declared_only = change(current)
        record = Metrics(revision=current.revision + 1, metrics=list(specs),
                         declared_only=declared_only, author=author, edited_at=ctx.clock())
        if ctx.backend.put_if_absent(keys.metrics_key(record.revision),
                                     format_record_file(record)):
            return record


def closest_metric(name: str, declared) -> str | None:
    """The declared metric whose name is nearest `name` (difflib's ratio), or None."""
    names = sorted(declared)
    found = difflib.get_close_matches(name, names, n=1, cutoff=0.0)
    return found[0] if found else None


def check_judgment(ctx, metric: str, label: str) -> str | None:
    """Whether a judgment (metric, label) may be saved: refused (LABEL_NOT_DECLARED) for a
    declared metric and a label outside its set, naming the accepted labels; for an
    undeclared metric refused (METRIC_NOT_DECLARED) when the repository takes declared
    metrics only, else a warning (returned) naming the closest declared metric."""
    for value, what in ((metric, "metric"), (label, "label")):
        encoding.check_text(value, what)  # (their rules are the review's, checked there)
    declared = declared_metrics(ctx)
    spec = declared.get(metric)
    if spec is not None:
        if label not in spec.labels:
            raise InvalidArgument(
                f"label {label!r} is not one of metric {metric!r}'s labels; accepted: "
                f"{', '.join(spec.labels)} (`cas review metric define` declares others); "
                "nothing was saved", reason="LABEL_NOT_DECLARED", metric=metric, label=label,
                accepted=list(spec.labels))
        return None
    near = closest_metric(metric, declared)
    hint = f"; did you mean {near!r}?" if near else ""
    if metrics(ctx).declared_only:
        raise FailedPrecondition(
            f"metric {metric!r} is not declared and this repository takes declared metrics "
            f"only (`cas settings metrics --declared-only`){hint} Declared: "
            f"{', '.join(declared)}; nothing was saved", reason="METRIC_NOT_DECLARED",
            metric=metric, closest=near, declared=list(declared))
    return f"metric {metric!r} is not declared{hint} (`cas review metric define` declares it)"
