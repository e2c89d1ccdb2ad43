"""Repetitions: the per-case summary of a result run more than once (passes out of completed
repetitions, pass@k and pass^k, mean, spread and interval) and its flaky cases
(docs/suites.md "Repetitions")."""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Union

import msgspec

from cas.errors import InvalidArgument
from cas.evals.suites.results import COMPLETED, ERRORED, INCOMPLETE, SuiteResult, as_result
from cas.format import encoding

# The pass/fail metric of a result with no scores: a repetition that COMPLETED passes.
OUTCOME_METRIC = "completed"
PASS, NUMBER = "pass", "number"
Z95 = 1.959963984540054  # the 0.975 quantile of the standard normal distribution
_PASS_K_RE = re.compile(r"[0-9]{1,6}(?:,[0-9]{1,6})*\Z", re.ASCII)


class MetricSummary(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One metric of one case over its completed repetitions. `kind` "pass" (boolean values):
    `passes` of `completed`, pass@k and pass^k for each asked k up to `completed` (keys are k
    as text), `flaky` when the repetitions disagree. `kind` "number": `n` values, their
    `mean`, `stdev` (sample, None below 2) and a 95% interval of the mean `low`..`high`
    (normal approximation, mean +- 1.96 stdev / sqrt(n); None below 2)."""

    kind: str
    passes: Union[int, None] = None
    completed: Union[int, None] = None
    pass_at_k: Union[dict[str, float], None] = None
    pass_hat_k: Union[dict[str, float], None] = None
    flaky: bool = False
    n: Union[int, None] = None
    mean: Union[float, None] = None
    stdev: Union[float, None] = None
    low: Union[float, None] = None
    high: Union[float, None] = None


class CaseSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One case over its repetitions: how many there were and how each ended, each metric,
    and whether the case is flaky (any pass/fail metric flaky)."""

    id: str
    position: int
    repetitions: int
    completed: int
    errored: int
    incomplete: int
    metrics: dict[str, MetricSummary]
    flaky: bool


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    """Every case of a result, in suite order, and the ids of its flaky cases."""

    repeat: int
    pass_k: tuple[int, ...]
    cases: tuple[CaseSummary, ...]
    flaky: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


# -- the estimators ---------------------------------------------------------------------------
def _check_counts(n: int, c: int, k: int) -> None:
    if not (type(n) is int and type(c) is int and type(k) is int and 0 <= c <= n and k >= 1):
        raise InvalidArgument(f"pass@k needs whole numbers 0 <= c <= n and k >= 1, not n={n!r} "
                              f"c={c!r} k={k!r}")


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """The unbiased estimate, from `n` completed repetitions of which `c` passed, of the
    chance that at least one of `k` repetitions passes: 1 - C(n-c, k) / C(n, k). None when
    k > n (n repetitions cannot say)."""
    _check_counts(n, c, k)
    if k > n:
        return None
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """pass^k: the unbiased estimate that all of `k` repetitions pass, C(c, k) / C(n, k);
    None when k > n."""
    _check_counts(n, c, k)
    if k > n:
        return None
    return math.comb(c, k) / math.comb(n, k)


def parse_pass_k(text: Any) -> tuple[int, ...]:
    """`--pass-k`: `1,3,10` (or an iterable of whole numbers), each at least 1; sorted, once
    each."""
    if isinstance(text, str):
        if not _PASS_K_RE.match(text):
            raise InvalidArgument(f"pass-k {text!r} is not a comma-separated list of whole "
                                  "numbers (e.g. 1,3,10)", reason="INVALID_PASS_K")
        ks = [int(t) for t in text.split(",")]
    elif isinstance(text, Iterable) and not isinstance(text, (bytes, dict)):
        ks = list(text)
    else:
        raise InvalidArgument(f"pass-k {encoding.describe(text)} is not a list of whole "
                              "numbers", reason="INVALID_PASS_K")
    if not ks or any(type(k) is not int or k < 1 for k in ks):
        raise InvalidArgument(f"pass-k {encoding.describe(text)}: each k is a whole number "
                              "from 1", reason="INVALID_PASS_K")
    return tuple(sorted(set(ks)))


# -- the summary ------------------------------------------------------------------------------
def case_values(result: Any) -> dict[str, dict[str, list]]:
    """case id -> metric -> the values of its COMPLETED repetitions, in repetition order.
    A result with no scores at all has the one metric `completed` (True per completed
    repetition). ERRORED and INCOMPLETE repetitions give no value."""
    result = as_result(result)
    scored = any(r.scores is not None for r in result.results)
    out: dict[str, dict[str, list]] = {}
    for r in result.results:
        metrics = out.setdefault(r.id, {})
        if r.outcome != COMPLETED:
            continue
        if not scored:
            metrics.setdefault(OUTCOME_METRIC, []).append(True)
            continue
        for metric, value in (r.scores or {}).items():
            metrics.setdefault(metric, []).append(value)
    return out


def metric_summary(values: list, pass_k: Iterable[int]) -> MetricSummary | None:
    """The summary of one metric's values over a case's completed repetitions: pass/fail when
    every value is a boolean, numbers when every value is a number, else None (labels)."""
    if values and all(type(v) is bool for v in values):
        n, c = len(values), sum(values)
        ks = [k for k in pass_k if k <= n]
        return MetricSummary(kind=PASS, passes=c, completed=n,
                             pass_at_k={str(k): pass_at_k(n, c, k) for k in ks},
                             pass_hat_k={str(k): pass_hat_k(n, c, k) for k in ks},
                             flaky=0 < c < n)
    if values and all(type(v) in (int, float) for v in values):
        n = len(values)
        # fsum is exactly rounded: the same values in any order give the same figures
        mean = math.fsum(values) / n
        if n < 2:
            return MetricSummary(kind=NUMBER, n=n, mean=mean)
        stdev = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
        half = Z95 * stdev / math.sqrt(n)
        return MetricSummary(kind=NUMBER, n=n, mean=mean, stdev=stdev, low=mean - half,
                             high=mean + half)
    return None


def summarize(result: Any, pass_k: Any = None) -> Summary:
    """The per-case summary of `result` (as `as_result` reads it) for each k of `pass_k`
    (default: 1 and the result's repetitions). A case whose completed repetitions disagree
    on a pass/fail metric is flaky. Repetition order never changes the summary."""
    result = as_result(result)
    ks = parse_pass_k(pass_k) if pass_k is not None else tuple(sorted({1, result.repeat}))
    values = case_values(result)
    tally: dict[str, list] = {}  # id -> [position, repetitions, completed, errored, incomplete]
    for r in result.results:
        t = tally.get(r.id)
        if t is None:
            t = tally[r.id] = [r.position, 0, 0, 0, 0]
        t[1] += 1
        t[2 + (COMPLETED, ERRORED, INCOMPLETE).index(r.outcome)] += 1
    cases = []
    for case_id, (position, reps, done, errored, incomplete) in tally.items():
        metrics = {}
        for metric in sorted(values[case_id]):
            s = metric_summary(values[case_id][metric], ks)
            if s is not None:
                metrics[metric] = s
        cases.append(CaseSummary(id=case_id, position=position, repetitions=reps,
                                 completed=done, errored=errored, incomplete=incomplete,
                                 metrics=metrics, flaky=any(m.flaky for m in metrics.values())))
    return Summary(repeat=result.repeat, pass_k=ks, cases=tuple(cases),
                   flaky=tuple(c.id for c in cases if c.flaky))


def flaky_cases(result: Any) -> tuple[str, ...]:
    """The ids of the flaky cases of `result`, in suite order."""
    return summarize(result).flaky


def not_completed(result: SuiteResult) -> list[tuple[str, int, str]]:
    """(case id, repetition, outcome) of every repetition that did not complete."""
    return [(r.id, r.repetition, r.outcome) for r in result.results if r.outcome != COMPLETED]
