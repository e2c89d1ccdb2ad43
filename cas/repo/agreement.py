"""How much reviewers agree on a metric: per pair of reviewers the runs both judged, observed
agreement and Cohen's kappa; over three or more, Krippendorff's alpha and Fleiss' kappa; and
the runs they disagree on (docs/runs.md "Agreement").

Each reviewer's newest judgment of a run counts, once. The coefficients come from maintained
implementations (statsmodels' `cohens_kappa` and `fleiss_kappa`, the `krippendorff` package),
installed by the `agreement` extra; without it, `agreement` is refused naming the extra.
"""

from __future__ import annotations

import warnings
from itertools import combinations
from typing import Any

from cas.errors import FailedPrecondition
from cas.format import encoding
from cas.repo import settings
from cas.repo.reviews import index as review_index

DISAGREEMENTS_SHOWN = 1000  # disagreeing runs listed at most (the count is always whole)


def libraries():
    """(numpy, statsmodels.stats.inter_rater, krippendorff), from the `agreement` extra;
    refused (EXTRA_REQUIRED) naming the install line."""
    try:
        import krippendorff
        import numpy
        from statsmodels.stats import inter_rater
    except ImportError as exc:
        raise FailedPrecondition(
            f"agreement coefficients need the `agreement` extra ({exc.name} is missing): "
            "pip install '.[agreement]' in the cas checkout", reason="EXTRA_REQUIRED",
            extra="agreement") from None
    return numpy, inter_rater, krippendorff


def judgments(ctx, metric: str) -> dict[str, dict[str, str]]:
    """run id -> {reviewer: label of that reviewer's newest judgment of it on `metric`}."""
    newest: dict[tuple[str, str], Any] = {}
    for r in review_index(ctx).all():
        if r.metric != metric:
            continue
        known = newest.get((r.run_id, r.reviewer))
        if known is None or (r.reviewed_at, r.annotation_id) > (known.reviewed_at,
                                                                 known.annotation_id):
            newest[r.run_id, r.reviewer] = r
    out: dict[str, dict[str, str]] = {}
    for (run_id, reviewer), r in sorted(newest.items()):
        out.setdefault(run_id, {})[reviewer] = r.label
    return out


def agreement(ctx, metric: str | None = None) -> dict[str, Any]:
    """The agreement report on `metric` (default: the eligibility metric):
    {"metric", "labels", "reviewers", "runs_judged", "pairs": [{"reviewers": [a, b], "runs",
    "observed", "cohens_kappa", "disagreements": [{"run_id", "labels": {a: .., b: ..}}]}],
    "overall": {"runs", "krippendorff_alpha", "fleiss_kappa", "fleiss_runs"} (three or more
    reviewers, else None), "disagreements": [{"run_id", "labels": {reviewer: label}}],
    "disagreement_count"}. A coefficient is None where it is undefined (no run in common, or
    a single label used by everyone: chance agreement is then total)."""
    metric = settings.eligibility(ctx).metric if metric is None else metric
    encoding.check_text(metric, "metric")
    numpy, inter_rater, krippendorff = libraries()
    by_run = judgments(ctx, metric)
    reviewers = sorted({who for labels in by_run.values() for who in labels})
    declared = settings.declared_metrics(ctx).get(metric)
    used = sorted({label for labels in by_run.values() for label in labels.values()})
    labels = (list(declared.labels) + [x for x in used if x not in declared.labels]
              if declared else used)
    code = {label: i for i, label in enumerate(labels)}
    pairs = []
    for a, b in combinations(reviewers, 2):
        both = [(run_id, j[a], j[b]) for run_id, j in by_run.items() if a in j and b in j]
        pair: dict[str, Any] = {"reviewers": [a, b], "runs": len(both), "observed": None,
                                "cohens_kappa": None, "disagreements": []}
        if both:
            table = numpy.zeros((len(labels), len(labels)))
            for _, la, lb in both:
                table[code[la], code[lb]] += 1
            pair["observed"] = sum(la == lb for _, la, lb in both) / len(both)
            pair["cohens_kappa"] = _finite(lambda: inter_rater.cohens_kappa(table).kappa)
            pair["disagreements"] = [{"run_id": run_id, "labels": {a: la, b: lb}}
                                     for run_id, la, lb in both if la != lb]
        pairs.append(pair)
    overall = None
    if len(reviewers) >= 3:
        shared = {run_id: j for run_id, j in by_run.items() if len(j) >= 2}
        matrix = numpy.array([[code[j[who]] if who in j else numpy.nan for run_id, j in
                               shared.items()] for who in reviewers], dtype=float)
        alpha = None
        if shared and len({x for j in shared.values() for x in j.values()}) > 1:
            alpha = _finite(lambda: krippendorff.alpha(reliability_data=matrix,
                                                       level_of_measurement="nominal"))
        complete = [j for j in by_run.values() if len(j) == len(reviewers)]
        fleiss = None
        if complete:
            counts = numpy.array([[sum(1 for x in j.values() if x == label) for label in labels]
                                  for j in complete])
            fleiss = _finite(lambda: inter_rater.fleiss_kappa(counts, method="fleiss"))
        overall = {"runs": len(shared), "krippendorff_alpha": alpha, "fleiss_kappa": fleiss,
                   "fleiss_runs": len(complete)}
    disagreeing = [{"run_id": run_id, "labels": dict(j)} for run_id, j in by_run.items()
                   if len(set(j.values())) > 1]
    return {"metric": metric, "labels": labels, "reviewers": reviewers,
            "runs_judged": len(by_run), "pairs": pairs, "overall": overall,
            "disagreement_count": len(disagreeing),
            "disagreements": disagreeing[:DISAGREEMENTS_SHOWN]}


def _finite(compute) -> float | None:
    """A coefficient as a float, None where the implementation finds it undefined (nan)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            value = float(compute())
        except (ValueError, ZeroDivisionError):
            return None
    return value if value == value and abs(value) != float("inf") else None
