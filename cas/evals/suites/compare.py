"""Comparing two suite results: each case's label, the suite's paired tests with their power,
and the gate's verdict (docs/suites.md "Reading a comparison")."""

from __future__ import annotations

import functools
import html
import math
import os
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Union
from xml.etree import ElementTree

import msgspec

from cas.errors import FailedPrecondition, InvalidArgument
from cas.evals.suites.repetitions import case_values
from cas.evals.suites.results import SuiteResult, as_result
from cas.format.version_names import as_pin

REGRESSED, IMPROVED, FLAKY, INCONCLUSIVE, HELD = LABELS = (
    "regressed", "improved", "flaky", "inconclusive", "held")
VERDICTS = (HELD, IMPROVED, REGRESSED, INCONCLUSIVE)
# A comparison's exit codes sit beside a run's (10, 11: cas/evals/suites/results.py): 0 when
# the candidate held or improved, 14 when it regressed, 15 when the suites cannot tell.
EXIT_REGRESSED, EXIT_INCONCLUSIVE = 14, 15
EXIT_CODES = {HELD: 0, IMPROVED: 0, REGRESSED: EXIT_REGRESSED, INCONCLUSIVE: EXIT_INCONCLUSIVE}
PASS, NUMBER = "pass", "number"  # a metric's kind: booleans (pass/fail), or numbers
DEFAULT_ALPHA = 0.05
POWER = 0.80  # the power the power statement is at
# Wilcoxon's signed-rank test against the paired t-test it stands for, with normal errors
# (its asymptotic relative efficiency, 3/pi): the power statement allows for it.
SIGNED_RANK_EFFICIENCY = 3 / math.pi
BOOTSTRAPS = 2000  # resamples of the effect's confidence interval
SHOWN = 100  # cases of each kind a markdown comment shows
MARKDOWN_LIMIT = 60_000  # characters of a markdown comment (GitHub allows 65,536)
INPUT_CHARS = 60  # characters of a case's input a markdown comment shows


def stats():
    """scipy.stats and numpy, from the `stats` extra; refused naming the install line."""
    try:
        import numpy
        import scipy.stats
    except ImportError:
        raise FailedPrecondition("comparing results needs scipy, from the `stats` extra: "
                                 "pip install '.[stats]' in the cas checkout",
                                 reason="EXTRA_REQUIRED", extra="stats") from None
    return scipy.stats, numpy


class Gate(msgspec.Struct, frozen=True, kw_only=True):
    """What decides the verdict: `alpha` (of the suite-level tests after Holm, and of each
    case's test), `min_effect` {metric: the smallest change that counts}, the metrics where
    lower is better, and at most how many cases may regress (None: not part of the gate).
    `seed` seeds the resampling (permutations, bootstrap)."""

    alpha: float = DEFAULT_ALPHA
    min_effect: dict[str, float] = {}
    lower_is_better: tuple[str, ...] = ()
    max_regressed_cases: Union[int, None] = None
    seed: int = 0

    def __post_init__(self) -> None:
        a = self.alpha
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 < a < 1:
            raise InvalidArgument(f"alpha {a!r} is not a probability strictly between 0 and 1 "
                                  "(e.g. 0.05)", reason="INVALID_ALPHA")
        for metric, delta in self.min_effect.items():
            if isinstance(delta, bool) or not isinstance(delta, (int, float)) or \
                    not math.isfinite(delta) or delta < 0:
                raise InvalidArgument(f"--min-effect {metric}={delta!r}: the delta is a finite "
                                      "number >= 0 (e.g. accuracy=0.02)",
                                      reason="INVALID_MIN_EFFECT", metric=metric)
        k = self.max_regressed_cases
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
            raise InvalidArgument(f"max regressed cases {k!r} is not an integer >= 0",
                                  reason="INVALID_MAX_REGRESSED")


def parse_min_effect(texts: Iterable[str]) -> dict[str, float]:
    """`METRIC=DELTA` texts (as `--min-effect` takes them) as {metric: delta}."""
    out: dict[str, float] = {}
    for text in texts:
        metric, sep, value = str(text).partition("=")
        try:
            delta = float(value) if sep and metric else None
        except ValueError:
            delta = None
        if delta is None or not math.isfinite(delta) or delta < 0:
            raise InvalidArgument(f"--min-effect {text!r} is not METRIC=DELTA with DELTA a "
                                  "number >= 0 (e.g. accuracy=0.02)",
                                  reason="INVALID_MIN_EFFECT")
        if metric in out:
            raise InvalidArgument(f"--min-effect names {metric} twice",
                                  reason="INVALID_MIN_EFFECT", metric=metric)
        out[metric] = delta
    return out


class Side(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One side's counts for a case and metric: passes of `n` completed repetitions (pass),
    or the mean of `n` (number)."""

    n: int
    passes: Union[int, None] = None
    mean: Union[float, None] = None


class CaseLabel(msgspec.Struct, frozen=True, kw_only=True):
    """A case's label for one metric, with the numbers behind it: each side, the p of its
    exact test (None when inconclusive), a run id to look at (the candidate's first)."""

    id: str
    position: int
    metric: str
    label: str
    baseline: Side
    candidate: Side
    p: Union[float, None]
    run_id: Union[str, None]


class MetricTest(msgspec.Struct, frozen=True, kw_only=True):
    """The suite-level paired test of one metric. `effect` is the candidate's mean minus the
    baseline's (pass: in pass rate, each case weighing the same) over the `cases` compared,
    with its `confidence` interval [low, high]; `p` the test's, `p_holm` after Holm over the
    metrics; `mde` the smallest change this suite detects with POWER at alpha (the power
    statement; None when none can be detected); `verdict` this metric's; `counts` the case
    labels."""

    metric: str
    kind: str
    test: str
    higher_is_better: bool
    cases: int
    baseline: Union[float, None]
    candidate: Union[float, None]
    effect: Union[float, None]
    low: Union[float, None]
    high: Union[float, None]
    confidence: float
    p: float
    p_holm: float
    mde: Union[float, None]
    min_effect: Union[float, None]
    verdict: str
    counts: dict[str, int]


class SideInfo(msgspec.Struct, frozen=True, kw_only=True):
    source: str
    suite: dict[str, str]
    digest: str
    seed: int
    repeat: int
    cases: int


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """A comparison of a candidate result with a baseline: the verdict and its exit code,
    each metric's test, the power statement {metric: mde}, every case label that is not
    held (in suite order, per metric), the counts of labels, warnings."""

    verdict: str
    exit_code: int
    alpha: float
    baseline: SideInfo
    candidate: SideInfo
    metrics: tuple[MetricTest, ...]
    power: dict[str, Union[float, None]]
    counts: dict[str, int]
    regressed_cases: int
    cases: tuple[CaseLabel, ...]
    warnings: tuple[str, ...]
    gate: Gate
    ids: tuple[str, ...] = ()  # every case id, in suite order (not in the JSON)

    def to_json(self) -> dict[str, Any]:
        """The object `cas suite compare --json` prints."""
        out = msgspec.to_builtins(self)
        del out["ids"]
        return out


# -- reading the two sides ------------------------------------------------------------------
def read_side(source: Any, open_repo: Callable[[], Any] | None = None,
              name: str | None = None) -> tuple[SuiteResult, str]:
    """(the result, its name) of a side: a SuiteResult or its JSON object, a result file's
    path, or a recorded experiment `DATASET:EXPERIMENT` of the repository `open_repo()`."""
    if isinstance(source, (SuiteResult, dict)):
        return as_result(source, name or "result"), name or "result"
    text = os.fspath(source)
    if os.path.exists(text):
        with open(text, "rb") as f:
            return as_result(f.read(), text), text
    from cas.evals.suites import recording
    if open_repo is not None and recording.is_recorded_source(text):
        return recording.recorded_result(open_repo(), text), text
    raise InvalidArgument(f"{text!r} is neither a result file (cas suite run --json) nor a "
                          "recorded experiment DATASET:EXPERIMENT", reason="USAGE")


def _over(result: SuiteResult) -> tuple[str, Any]:
    """What a result is over: the pinned version's content digest, else its case ids."""
    try:
        return "version", as_pin(result.suite.version).content_digest
    except InvalidArgument:
        seen: dict[str, None] = {}
        for r in result.results:
            seen.setdefault(r.id, None)
        return "cases", tuple(seen)


def check_comparable(baseline: SuiteResult, candidate: SuiteResult,
                     names: tuple[str, str] = ("baseline", "candidate")) -> None:
    """Refused (FAILED_PRECONDITION, naming both) unless both are over the same pinned
    version (its content digest) or the same suite file (the same cases), and whole runs."""
    for r, name in ((baseline, names[0]), (candidate, names[1])):
        if r.shard is not None:
            raise FailedPrecondition(f"{name} is shard {r.shard} of a run: merge the shards "
                                     "first (cas suite merge)", reason="NOT_WHOLE_RUN")
    a, b = _over(baseline), _over(candidate)
    if a != b:
        def what(r: SuiteResult, over: tuple) -> str:
            kind = "pinned version" if over[0] == "version" else "suite file"
            return f"{kind} {r.suite.name} {r.suite.version}"
        raise FailedPrecondition(
            f"{names[0]} is a result of {what(baseline, a)}, {names[1]} of "
            f"{what(candidate, b)}: results compare only over the same pinned version "
            "(content digest) or the same suite file (the same cases)",
            reason="SUITE_VERSION_MISMATCH",
            versions=[baseline.suite.version, candidate.suite.version])


class _Case:
    __slots__ = ("position", "run_id", "first", "values")

    def __init__(self, position: int, run_id: str, repetition: int) -> None:
        self.position, self.run_id, self.first = position, run_id, repetition
        self.values: dict[str, list] = {}


def _cases(result: SuiteResult) -> dict[str, _Case]:
    """Per case id: its position, the run id of its first repetition and {metric: values of
    its COMPLETED repetitions} (repetitions.case_values: without any scores the metric is
    `completed`, the case's outcome)."""
    out: dict[str, _Case] = {}
    for r in result.results:
        c = out.get(r.id)
        if c is None:
            out[r.id] = _Case(r.position, r.run_id, r.repetition)
        elif r.repetition < c.first:
            c.run_id, c.first = r.run_id, r.repetition
    for case_id, values in case_values(result).items():
        out[case_id].values = values
    return out


def _kind(values: Iterable[list]) -> str | None:
    """PASS when every value is a boolean, NUMBER when every one is a finite number."""
    types = {type(v) for vs in values for v in vs}
    if types == {bool}:
        return PASS
    if types and types <= {int, float}:
        finite = all(math.isfinite(v) for vs in values for v in vs) if float in types else True
        return NUMBER if finite else None
    return None


# -- the tests ------------------------------------------------------------------------------
def _holm(ps: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (the order of the input kept)."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out


def exact_paired_p(passes_a, n_a, passes_b, n_b) -> float:
    """Two-sided p of the exact paired test of pass counts: conditional on each case's total
    passes, the candidate's passes are hypergeometric (scipy.stats.hypergeom) under the null,
    and the test is on their sum, the distribution of which is the convolution over cases
    (identical cases share their transform). With one repetition a side this is McNemar's
    exact test: the binomial test on the discordant pairs. Two-sided as binomtest is: the
    outcomes no more likely than the one observed."""
    st, np = stats()
    na, nb = np.asarray(n_a, dtype=np.int64), np.asarray(n_b, dtype=np.int64)
    t = np.asarray(passes_a, dtype=np.int64) + np.asarray(passes_b, dtype=np.int64)
    big = na + nb
    informative = (t > 0) & (t < big) & (na > 0) & (nb > 0)
    if not informative.any():
        return 1.0
    t, big, nb = t[informative], big[informative], nb[informative]
    observed = int(np.asarray(passes_b, dtype=np.int64)[informative].sum())
    mean = float((t * nb / big).sum())
    kinds, counts = np.unique(np.stack([big, t, nb], 1), axis=0, return_counts=True)
    lows = np.maximum(0, kinds[:, 2] - (kinds[:, 0] - kinds[:, 1]))
    highs = np.minimum(kinds[:, 1], kinds[:, 2])
    offset = int((lows * counts).sum())
    width = int(((highs - lows) * counts).sum()) + 1
    if abs(observed - mean) < 1e-9:
        return 1.0  # the statistic is its null mean: no evidence at all
    from scipy import fft
    size = fft.next_fast_len(width, real=True)
    total = None
    for (m, k, draws), lo, hi, count in zip(kinds, lows, highs, counts):
        pmf = np.zeros(size)
        pmf[:hi - lo + 1] = _hypergeom(int(m), int(k), int(draws))
        term = fft.rfft(pmf) ** int(count)
        total = term if total is None else total * term
    dist = np.clip(fft.irfft(total, size)[:width], 0.0, None)
    at = dist[observed - offset]
    return float(min(1.0, dist[dist <= at * (1 + 1e-7)].sum()))


@functools.lru_cache(maxsize=4096)
def _hypergeom(total: int, passes: int, draws: int):
    """The null distribution of a case's candidate passes, from its fewest to its most."""
    st, np = stats()
    lo, hi = max(0, draws - (total - passes)), min(passes, draws)
    pmf = st.hypergeom.pmf(np.arange(lo, hi + 1), total, passes, draws)
    pmf.flags.writeable = False
    return pmf


def _signed_rank_p(d) -> tuple[float, float]:
    """Two-sided p, and the signed rank sum (its direction), of the paired test of the
    differences `d`: Wilcoxon's signed-rank test (scipy.stats.wilcoxon), the permutation test
    of the signed ranks, exact for few cases and its normal approximation (with ties
    corrected) for many; zeros are left out, as concordant pairs are."""
    st, np = stats()
    d = d[d != 0]
    if d.size == 0:
        return 1.0, 0.0
    with np.errstate(all="ignore"):
        p = float(st.wilcoxon(d, zero_method="wilcox").pvalue)
    lean = float((np.sign(d) * st.rankdata(np.abs(d))).sum())  # the direction the test saw
    return 1.0 if not math.isfinite(p) else min(1.0, p), lean


def _mean(x, axis):
    import numpy
    return numpy.mean(x, axis=axis)


def _interval(d, confidence: float, seed: int) -> tuple[float | None, float | None]:
    """The percentile bootstrap interval of the mean of `d` (cases resampled)."""
    st, np = stats()
    if d.size < 2:
        return None, None
    if float(d.min()) == float(d.max()):
        return float(d[0]), float(d[0])
    ci = st.bootstrap((d,), _mean, n_resamples=BOOTSTRAPS, method="percentile",
                      confidence_level=confidence, vectorized=True,
                      batch=max(10, 2_000_000 // d.size),
                      rng=np.random.default_rng(seed)).confidence_interval
    return float(ci.low), float(ci.high)


def _fisher_ps(pa, na, pb, nb) -> Any:
    """Each case's two-sided Fisher exact p (scipy.stats.fisher_exact) on the 2x2 of passes
    and failures per side, computed once per distinct table (many cases share counts)."""
    st, np = stats()
    keys = np.stack([pa, na, pb, nb], 1)
    if keys.shape[0] == 0:
        return np.zeros(0)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    ps = np.array([_fisher(*map(int, row)) for row in uniq])
    return ps[inverse.reshape(-1)]


@functools.lru_cache(maxsize=65536)
def _fisher(a: int, n: int, b: int, m: int) -> float:
    if n < 2 or m < 2:
        return 1.0
    st, _ = stats()
    return float(st.fisher_exact([[a, n - a], [b, m - b]]).pvalue)


def _rank_ps(groups_a: list, groups_b: list) -> list[float]:
    """Each case's two-sided Mann-Whitney U p (scipy.stats.mannwhitneyu) between its
    repetitions' values on each side, computed per shape (cases of equal sizes at once)."""
    st, np = stats()
    out = [1.0] * len(groups_a)
    shapes: dict[tuple[int, int], list[int]] = {}
    for i, (a, b) in enumerate(zip(groups_a, groups_b)):
        if len(a) >= 2 and len(b) >= 2:
            shapes.setdefault((len(a), len(b)), []).append(i)
    for idx in shapes.values():
        x = np.array([groups_a[i] for i in idx], dtype=float)
        y = np.array([groups_b[i] for i in idx], dtype=float)
        with np.errstate(all="ignore"):
            ps = st.mannwhitneyu(x, y, axis=1, method="auto").pvalue
        for i, p in zip(idx, np.atleast_1d(ps)):
            out[i] = 1.0 if not math.isfinite(p) else float(p)
    return out


@functools.lru_cache(maxsize=4096)
def _z(alpha: float, df: int | None = None) -> float:
    """The standardised distance at which a two-sided test at `alpha` has POWER: normal
    quantiles, or Student's t with `df` degrees of freedom (few cases)."""
    st, _ = stats()
    if df is None:
        return float(st.norm.ppf(1 - alpha / 2) + st.norm.ppf(POWER))
    return float(st.t.ppf(1 - alpha / 2, df) + st.t.ppf(POWER, df))


@functools.lru_cache(maxsize=1024)
def _pass_floor(na: int, nb: int, n: int, alpha: float) -> int | None:
    """How many cases must move from failing every repetition to passing every one (with
    `na`, `nb` repetitions) before the exact test sees it at `alpha` (None: more than n)."""
    for k in range(1, n + 1):
        if exact_paired_p([0] * k, [na] * k, [nb] * k, [nb] * k) <= alpha:
            return k
        if k >= 64:
            break
    return None


def _mde_pass(pa, na, pb, nb, alpha: float) -> float | None:
    """The smallest change in pass rate this suite detects with POWER at `alpha`: the normal
    approximation of the exact test with its continuity correction, its null variance
    estimated from the cases' pooled pass rates (the conditional variance of each case's
    difference in pass rate), and never below the few cases a change must move for the exact
    test to see it at all."""
    _, np = stats()
    n = len(pa)
    if n == 0:
        return None
    t, big = pa + pb, na + nb
    with np.errstate(all="ignore"):
        v = np.where(big > 1, t * (big - t) / ((big - 1) * na * nb), 0.0)
    ma, mb = int(np.median(na)), int(np.median(nb))
    floor_k = _pass_floor(ma, mb, n, alpha)
    if floor_k is None:
        return None
    # half a candidate pass: the continuity correction of a discrete test, in pass rate
    half = 0.5 * (ma + mb) / (ma * mb)
    mde = max((_z(alpha) * math.sqrt(float(v.sum())) + half) / n, floor_k / n)
    return mde if mde <= 1 else None


def _moments(groups: list) -> tuple[Any, Any]:
    """Each group's mean (nan when empty) and sum of squared deviations from it."""
    _, np = stats()
    means, ss = np.full(len(groups), np.nan), np.zeros(len(groups))
    for i, v in enumerate(groups):
        if v:
            m = sum(v) / len(v)
            means[i], ss[i] = m, sum((x - m) * (x - m) for x in v)
    return means, ss


def _mde_number(na, nb, ss, d, alpha: float) -> float | None:
    """The smallest change in the mean this suite detects with POWER at `alpha` (normal
    approximation of the paired t-test, each case's within-case variance over its
    repetitions, or its squared difference where a side has one value, allowing for the
    signed-rank test's efficiency); None when the cases are too few for the test to reach
    alpha."""
    _, np = stats()
    n = len(d)
    if n == 0 or (n < 64 and 2.0 / 2 ** n > alpha):
        return None
    big = na + nb
    with np.errstate(all="ignore"):
        v = np.where(big > 2, ss / (big - 2) * (1 / na + 1 / nb), d * d)
    return _z(alpha, n - 1) * math.sqrt(float(v.sum()) / SIGNED_RANK_EFFICIENCY) / n


class _Fit(NamedTuple):
    """One metric's tests: each case's mean per side and p, whether it is flaky; the suite's
    p, the direction its test saw (> 0: the candidate higher), the power statement, the
    test's name, and each case's sides (a function of its index)."""

    ra: Any
    rb: Any
    case_p: Any
    flaky: Any
    p: float
    lean: float
    mde: float | None
    test: str
    sides: Callable[[int], tuple[Side, Side]]


def _pass_metric(av, bv, na, nb, both, alpha_power: float) -> _Fit:
    _, np = stats()
    pa = np.array([sum(v) for v in av], dtype=np.int64)
    pb = np.array([sum(v) for v in bv], dtype=np.int64)
    with np.errstate(all="ignore"):
        ra = np.where(na > 0, pa / np.maximum(na, 1), np.nan)
        rb = np.where(nb > 0, pb / np.maximum(nb, 1), np.nan)
    t = (pa + pb)[both]
    lean = float((pb[both] - t * nb[both] / (na + nb)[both]).sum())  # S - E[S]

    def sides(i: int) -> tuple[Side, Side]:
        return (Side(n=int(na[i]), passes=int(pa[i])), Side(n=int(nb[i]), passes=int(pb[i])))
    return _Fit(ra, rb, _fisher_ps(pa, na, pb, nb),
                ((pa > 0) & (pa < na)) | ((pb > 0) & (pb < nb)),
                exact_paired_p(pa[both], na[both], pb[both], nb[both]), lean,
                _mde_pass(pa[both], na[both], pb[both], nb[both], alpha_power),
                "exact paired (hypergeometric; McNemar with one repetition)", sides)


def _number_metric(av, bv, na, nb, both, alpha_power: float) -> _Fit:
    _, np = stats()
    ma, ssa = _moments(av)
    mb, ssb = _moments(bv)
    d = (mb - ma)[both]
    p, lean = _signed_rank_p(d)

    def sides(i: int) -> tuple[Side, Side]:
        return (Side(n=int(na[i]), mean=float(ma[i]) if na[i] else None),
                Side(n=int(nb[i]), mean=float(mb[i]) if nb[i] else None))
    return _Fit(ma, mb, np.array(_rank_ps(av, bv)), np.zeros(len(av), dtype=bool), p, lean,
                _mde_number(na[both], nb[both], (ssa + ssb)[both], d, alpha_power),
                "Wilcoxon signed-rank (paired)", sides)


# -- the comparison -------------------------------------------------------------------------
def compare(baseline: Any, candidate: Any, gate: Gate | None = None,
            names: tuple[str, str] = ("baseline", "candidate")) -> Comparison:
    """Compare `candidate` with `baseline` (SuiteResults or what `as_result` reads) under
    `gate` (docs/suites.md "Reading a comparison"). Refused unless both are whole runs over
    the same pinned version or suite file, and without the `stats` extra."""
    st, np = stats()
    gate = gate or Gate()
    a, b = as_result(baseline, names[0]), as_result(candidate, names[1])
    check_comparable(a, b, names)
    ca, cb = _cases(a), _cases(b)
    ids = sorted(set(ca) | set(cb), key=lambda i: ((ca.get(i) or cb[i]).position, i))
    metrics = sorted({m for c in (*ca.values(), *cb.values()) for m in c.values})
    known = set(metrics)
    for option, names_given in (("--min-effect", gate.min_effect),
                                ("--lower-is-better", gate.lower_is_better)):
        unknown = sorted(set(names_given) - known)
        if unknown:
            raise InvalidArgument(f"{option} names {', '.join(unknown)}, not a metric of these "
                                  f"results (they have: {', '.join(metrics) or 'none'})",
                                  reason="UNKNOWN_METRIC", metrics=metrics)
    warnings: list[str] = []
    empty: list = []
    prepared = []
    for metric in metrics:
        av = [sorted(ca[i].values.get(metric, empty)) if i in ca else empty for i in ids]
        bv = [sorted(cb[i].values.get(metric, empty)) if i in cb else empty for i in ids]
        kind = _kind(av + bv)
        if kind is None:
            warnings.append(f"metric {metric} is neither all booleans nor all numbers: not "
                            "compared")
            continue
        prepared.append((metric, kind, av, bv))
    tested = max(1, len(prepared))
    tests, labels, raw_ps = [], [], []
    for metric, kind, av, bv in prepared:
        sign = -1.0 if metric in gate.lower_is_better else 1.0
        na = np.array([len(v) for v in av], dtype=np.int64)
        nb = np.array([len(v) for v in bv], dtype=np.int64)
        inconclusive = (na < 2) | (nb < 2)
        both = (na > 0) & (nb > 0)
        fit = (_pass_metric if kind == PASS else _number_metric)(
            av, bv, na, nb, both, gate.alpha / tested)
        ra, rb, case_p, flaky, p, lean, mde, test, sides = fit
        d = (rb - ra)[both]
        sig = ~inconclusive & (case_p <= gate.alpha)
        with np.errstate(invalid="ignore"):
            better = np.nan_to_num((rb - ra) * sign)
        case_label = np.where(inconclusive, 1, np.where(sig & (better < 0), 2, np.where(
            sig & (better > 0), 3, np.where(flaky, 4, 0))))
        names_of = (HELD, INCONCLUSIVE, REGRESSED, IMPROVED, FLAKY)
        counts = {label: 0 for label in LABELS}
        for code, count in zip(*np.unique(case_label, return_counts=True)):
            counts[names_of[code]] = int(count)
        for i in np.flatnonzero(case_label):
            cid, (side_a, side_b) = ids[i], sides(i)
            labels.append(CaseLabel(
                id=cid, position=(ca.get(cid) or cb[cid]).position, metric=metric,
                label=names_of[case_label[i]], baseline=side_a, candidate=side_b,
                p=None if inconclusive[i] else float(case_p[i]),
                run_id=(cb.get(cid) or ca[cid]).run_id))
        effect = float(d.mean()) if d.size else None
        low, high = _interval(d, 1 - gate.alpha, gate.seed)
        tests.append(dict(metric=metric, kind=kind, test=test, higher_is_better=sign > 0,
                          cases=int(both.sum()),
                          baseline=float(np.nanmean(ra[both])) if d.size else None,
                          candidate=float(np.nanmean(rb[both])) if d.size else None,
                          effect=effect, low=low, high=high, confidence=1 - gate.alpha, p=p,
                          mde=mde, min_effect=gate.min_effect.get(metric), counts=counts,
                          lean=lean * sign))
        raw_ps.append(p)
        if not both.any():
            warnings.append(f"no case has {metric} completed on both sides: it cannot be "
                            "compared (inconclusive)")
        elif mde is None:
            warnings.append(f"this suite detects no change in {metric} at alpha "
                            f"{gate.alpha / tested:g} with {POWER:.0%} power: too few cases "
                            "or repetitions")
        elif metric in gate.min_effect and gate.min_effect[metric] < mde:
            warnings.append(f"--min-effect {metric}={gate.min_effect[metric]:g} is below the "
                            f"smallest change this suite detects with {POWER:.0%} power "
                            f"({mde:.4g}): a change of that size would mostly go unseen")
    results = []
    for entry, p_holm in zip(tests, _holm(raw_ps)):
        lean = entry.pop("lean")
        floor = entry["min_effect"] or 0.0
        size = abs(entry["effect"] or 0.0)
        if entry["cases"] == 0:
            verdict = INCONCLUSIVE
        elif p_holm <= gate.alpha and lean != 0 and size >= floor:
            verdict = IMPROVED if lean > 0 else REGRESSED
        else:
            verdict = HELD
        results.append(MetricTest(**entry, p_holm=p_holm, verdict=verdict))
    if not results:
        warnings.append("no metric could be compared")
    regressed_ids = {c.id for c in labels if c.label == REGRESSED}
    verdicts = {m.verdict for m in results}
    too_many = gate.max_regressed_cases is not None and \
        len(regressed_ids) > gate.max_regressed_cases
    if REGRESSED in verdicts or too_many:
        verdict = REGRESSED
    elif INCONCLUSIVE in verdicts or not results:
        verdict = INCONCLUSIVE
    elif IMPROVED in verdicts:
        verdict = IMPROVED
    else:
        verdict = HELD
    total = {label: sum(m.counts[label] for m in results) for label in LABELS}
    labels.sort(key=lambda c: (c.position, c.id, c.metric))
    return Comparison(
        verdict=verdict, exit_code=EXIT_CODES[verdict], alpha=gate.alpha,
        baseline=_info(a, names[0], ca), candidate=_info(b, names[1], cb),
        metrics=tuple(results), power={m.metric: m.mde for m in results}, counts=total,
        regressed_cases=len(regressed_ids), cases=tuple(labels), warnings=tuple(warnings),
        gate=gate, ids=tuple(ids))


def _info(r: SuiteResult, source: str, cases: dict) -> SideInfo:
    return SideInfo(source=source, suite={"name": r.suite.name, "version": r.suite.version},
                    digest=r.digest, seed=r.seed, repeat=getattr(r, "repeat", 1),
                    cases=len(cases))


# -- rendering ------------------------------------------------------------------------------
def _num(x: float | None, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}g}" if abs(x) >= 1e-4 or x == 0 else f"{x:.2e}"


def _pval(p: float | None) -> str:
    return "-" if p is None else "<1e-12" if p < 1e-12 else _num(p, 3)


def _side(s: Side) -> str:
    if s.passes is not None:
        return f"{s.passes}/{s.n}"
    return "-" if s.mean is None else f"{_num(s.mean)} (n={s.n})"


def _metric_line(m: MetricTest) -> str:
    unit = " points" if m.kind == PASS else ""
    scale = 100 if m.kind == PASS else 1

    def v(x):
        return "-" if x is None else f"{x * scale:+.2f}"
    ci = "" if m.low is None else f" ({m.confidence:.0%} CI {v(m.low)} to {v(m.high)})"
    mde = "none" if m.mde is None else f"{m.mde * scale:.2f}{unit}"
    return (f"{m.metric}: {m.verdict}, {v(m.effect)}{unit}{ci}, p = {_pval(m.p_holm)} (Holm), "
            f"{m.cases} cases; detects {mde} at {POWER:.0%} power")


def headline(c: Comparison) -> str:
    n = c.counts
    return (f"{c.verdict.upper()}: {n[REGRESSED]} regressed, {n[FLAKY]} flaky, "
            f"{n[IMPROVED]} improved, {n[INCONCLUSIVE]} inconclusive (case x metric) of "
            f"{c.candidate.cases} cases")


def to_text(c: Comparison, limit: int = SHOWN) -> str:
    """The human table: the verdict, each metric's test, then the labelled cases."""
    suite = c.candidate.suite
    lines = [f"compare {c.baseline.source} -> {c.candidate.source} (suite {suite['name']} "
             f"{suite['version']}): {headline(c)} (exit {c.exit_code})"]
    head = ("METRIC", "KIND", "CASES", "BASELINE", "CANDIDATE", "EFFECT", "CI", "P(HOLM)",
            "MDE(80%)", "VERDICT")
    rows = [head] + [(m.metric, m.kind, str(m.cases), _num(m.baseline), _num(m.candidate),
                      _num(m.effect), "-" if m.low is None else
                      f"[{_num(m.low)}, {_num(m.high)}]", _pval(m.p_holm), _num(m.mde),
                      m.verdict) for m in c.metrics]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines += ["  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip() for r in rows]
    for kind in (REGRESSED, IMPROVED, FLAKY, INCONCLUSIVE):
        chosen = [x for x in c.cases if x.label == kind]
        for x in chosen[:limit]:
            lines.append(f"{kind.upper():<12}  {x.metric}  {x.id}  {_side(x.baseline)} -> "
                         f"{_side(x.candidate)}  p={_pval(x.p)}  {x.run_id}")
        if len(chosen) > limit:
            lines.append(f"... and {len(chosen) - limit} more {kind} (see --json)")
    return "\n".join(lines)


# what would end a table cell, open a code span or emphasis, or make a link in a comment
_MARKDOWN = str.maketrans({"|": "\\|", "`": "'", "*": "\\*", "_": "\\_", "[": "\\[",
                           "]": "\\]"})


def _md_text(text: str, chars: int) -> str:
    text = " ".join(str(text).split())
    if len(text) > chars:
        text = text[:chars - 1] + "\u2026"
    return html.escape(text, quote=False).translate(_MARKDOWN)


def _input_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    import json
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def to_markdown(c: Comparison, inputs: Mapping[str, Any] | None = None,
                marker: str | None = None, shown: int = SHOWN) -> str:
    """A pull request comment: the marker (an HTML comment, so a bot can find and replace
    its comment), the verdict line first, each metric, then the regressed, flaky and improved
    cases (at most `shown` of each, with counts) with a run id and the start of the case's
    input (from `inputs` {case id: input}); always under MARKDOWN_LIMIT characters."""
    if marker is not None and ("--" in marker or ">" in marker or "\n" in marker):
        raise InvalidArgument("a markdown marker goes in an HTML comment: it may hold no "
                              "'--', '>' or line break", reason="INVALID_MARKER")
    out = [] if marker is None else [f"<!-- {marker} -->"]
    out.append(f"**cas suite compare: {headline(c)}**")
    out.append("")
    out += [f"- {_md_text(_metric_line(m), 400)}" for m in c.metrics]
    out += [f"- warning: {_md_text(w, 400)}" for w in c.warnings]
    if inputs is None:
        out.append("")
        out.append("_(case inputs not shown: give the suite with --suite)_")
    budget = MARKDOWN_LIMIT - 2000 - sum(len(x) + 1 for x in out)
    per_row = budget // max(1, 3 * shown)
    for kind in (REGRESSED, FLAKY, IMPROVED):
        chosen = [x for x in c.cases if x.label == kind]
        if not chosen:
            continue
        more = f", the first {shown} shown" if len(chosen) > shown else ""
        out += ["", f"### {kind.capitalize()} ({len(chosen)}{more})", "",
                "| case | metric | baseline | candidate | p | run id | input |",
                "|---|---|---|---|---|---|---|"]
        for x in chosen[:shown]:
            row = (f"| `{x.id[:19]}` | {_md_text(x.metric, 40)} | {_side(x.baseline)} | "
                   f"{_side(x.candidate)} | {_pval(x.p)} | `{x.run_id}` | ")
            chars, text = INPUT_CHARS, ""
            while inputs is not None and x.id in inputs and chars >= 8:
                text = _md_text(_input_text(inputs[x.id]), chars)
                if len(row) + len(text) + 2 <= per_row:
                    break
                chars, text = chars // 2, ""
            out.append(f"{row}{text} |")
    text = "\n".join(out) + "\n"
    return text if len(text) < MARKDOWN_LIMIT else text[:MARKDOWN_LIMIT - 40] + "\n\n(cut)\n"


def to_junit(c: Comparison) -> bytes:
    """JUnit XML: one test case per case and metric (classname the metric, name the case
    id): regressed a failure, flaky a property `flaky` (and a passing test), inconclusive
    skipped; the suite's properties give the verdict and each metric's p and effect."""
    labels = {(x.id, x.metric): x for x in c.cases}
    ids = c.ids or tuple(dict.fromkeys(x.id for x in c.cases))
    root = ElementTree.Element("testsuites", name="cas suite compare")
    failures = sum(m.counts[REGRESSED] for m in c.metrics)
    skipped = sum(m.counts[INCONCLUSIVE] for m in c.metrics)
    total = sum(sum(m.counts.values()) for m in c.metrics)
    suite = ElementTree.SubElement(root, "testsuite", name=c.candidate.suite["name"],
                                   tests=str(total), failures=str(failures), errors="0",
                                   skipped=str(skipped))
    props = ElementTree.SubElement(suite, "properties")
    ElementTree.SubElement(props, "property", name="verdict", value=c.verdict)
    for m in c.metrics:
        ElementTree.SubElement(props, "property", name=f"{m.metric}.p_holm", value=repr(m.p_holm))
        ElementTree.SubElement(props, "property", name=f"{m.metric}.effect",
                               value="" if m.effect is None else repr(m.effect))
    for m in c.metrics:
        for cid in ids:
            x = labels.get((cid, m.metric))
            tc = ElementTree.SubElement(suite, "testcase", classname=m.metric, name=cid)
            if x is None:
                continue
            detail = f"{x.label}: {_side(x.baseline)} -> {_side(x.candidate)}, p = {_pval(x.p)}"
            if x.label == REGRESSED:
                ElementTree.SubElement(tc, "failure", message=detail, type="regressed")
            elif x.label == INCONCLUSIVE:
                ElementTree.SubElement(tc, "skipped", message=detail)
            else:
                tp = ElementTree.SubElement(tc, "properties")
                ElementTree.SubElement(tp, "property", name=x.label, value="true")
            if x.run_id:
                ElementTree.SubElement(tc, "system-out").text = f"run id {x.run_id}; {detail}"
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
