"""Comparing two experiments of a dataset by their scores: per-metric aggregates of each, and
the cases the two scored differently."""

from __future__ import annotations

import math
from typing import Any, Union

import msgspec

from cas.errors import InvalidArgument, NotFound
from cas.format.records import Experiment
from cas.repo import checks
from cas.repo.experiments import experiments
from cas.repo.scores import RecordedScore, scores, value_text


class MetricAggregate(msgspec.Struct, frozen=True, kw_only=True):
    """The scores of one experiment on one metric: `count` of them, `numbers` of those that
    are numbers and their `mean` (None without any), and `values`: the count of each boolean
    and label, keyed by its text (`true`, `false`, the label; a label never spells a boolean)."""

    count: int = 0
    numbers: int = 0
    mean: Union[float, None] = None
    values: dict[str, int] = {}


class MetricComparison(msgspec.Struct, frozen=True, kw_only=True):
    metric: str
    a: MetricAggregate
    b: MetricAggregate


class ItemDifference(msgspec.Struct, frozen=True, kw_only=True):
    """A case scored differently on a metric: each side's value, None where that experiment
    has no score of the case on the metric."""

    metric: str
    item: str
    a: Union[bool, int, float, str, None]
    b: Union[bool, int, float, str, None]


class ExperimentComparison(msgspec.Struct, frozen=True, kw_only=True):
    dataset: str
    a: Experiment
    b: Experiment
    metrics: list[MetricComparison]
    differences: list[ItemDifference]


def _aggregate(found: list[RecordedScore]) -> MetricAggregate:
    nums = [s.value for s in found if not isinstance(s.value, (bool, str))]
    values: dict[str, int] = {}
    for s in found:
        if isinstance(s.value, (bool, str)):
            values[value_text(s.value)] = values.get(value_text(s.value), 0) + 1
    try:
        mean = math.fsum(nums) / len(nums) if nums else None
    except OverflowError:  # integers beyond any float: no mean to give
        mean = None
    return MetricAggregate(count=len(found), numbers=len(nums), mean=mean,
                           values=dict(sorted(values.items())))


def _same(x: Any, y: Any) -> bool:
    """Equal values of the same kind: True is not 1, 1 is 1.0, a label is only itself."""
    def kind(v: Any) -> int:
        return 0 if isinstance(v, bool) else 1 if isinstance(v, str) else 2
    return x is not None and y is not None and kind(x) == kind(y) and x == y


def compare_experiments(ctx, name: str, a: str, b: str) -> ExperimentComparison:
    """Per-metric aggregates of two experiments of a dataset, and the (metric, case) pairs
    scored differently: by each side's last score of that case on that metric, a case only one
    side scored counting as different. Withdrawn scores are left out."""
    a, b = checks.label(a, "experiment name"), checks.label(b, "experiment name")
    if a == b:
        raise InvalidArgument(f"compare two different experiments, not {a!r} with itself",
                              reason="SAME_EXPERIMENT", experiment=a)
    known = {e.name: e for e in experiments(ctx, name)}
    for wanted in (a, b):
        if wanted not in known:
            raise NotFound(f"dataset {name!r} has no experiment {wanted!r}",
                           reason="EXPERIMENT_NOT_FOUND", dataset=name, experiment=wanted)
    by: dict[str, list[RecordedScore]] = {a: [], b: []}
    for s in scores(ctx, name):
        if s.experiment in by and not s.withdrawn:
            by[s.experiment].append(s)
    metrics = sorted({s.metric for s in by[a] + by[b]})
    compared = [MetricComparison(metric=m, a=_aggregate([s for s in by[a] if s.metric == m]),
                                 b=_aggregate([s for s in by[b] if s.metric == m]))
                for m in metrics]
    last = {side: {(s.metric, s.item): s.value for s in by[side] if s.item is not None}
            for side in (a, b)}
    differences = [ItemDifference(metric=m, item=i, a=last[a].get((m, i)), b=last[b].get((m, i)))
                   for m, i in sorted(set(last[a]) | set(last[b]))
                   if not _same(last[a].get((m, i)), last[b].get((m, i)))]
    return ExperimentComparison(dataset=name, a=known[a], b=known[b], metrics=compared,
                                differences=differences)
