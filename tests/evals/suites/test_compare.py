"""Comparing two suite results: case labels with their numbers, the suite's paired tests
tested as statistics (identical runs, seeded null simulations, planted shifts of the size the
power statement names, planted flaky cases), the gate, the refusals, and the renderers."""

import builtins
import math
import random
from xml.etree import ElementTree

import msgspec
import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from cas.errors import FailedPrecondition, InvalidArgument
from cas.evals.suites import compare as cmp
from cas.evals.suites.results import CaseResult, SuiteRef, SuiteResult, finish, repetition_seed

PIN = "evals@1#b3:" + "ab" * 32
OTHER_PIN = "evals@2#b3:" + "cd" * 32


def case_id(i: int) -> str:
    return f"case-{i:05d}"


def result(cases, version: str = PIN, seed: int = 0, ids=None) -> SuiteResult:
    """A result built directly (fast: no digest), `cases` a list per case of a list per
    repetition of {metric: value} (None: that repetition ERRORED)."""
    entries = []
    for i, reps in enumerate(cases):
        cid = ids[i] if ids else case_id(i)
        for r, scores in enumerate(reps):
            entries.append(CaseResult(
                id=cid, position=i, run_id=f"sr-{seed}-{i}-{r}",
                outcome="COMPLETED" if scores is not None else "ERRORED",
                reason=None if scores is not None else "boom", scores=scores, repetition=r,
                seed=seed + r))
    return SuiteResult(suite=SuiteRef(name="evals", version=version), seed=seed, ok=True,
                       exit_code=0, digest="b3:" + "00" * 32, counts={}, results=tuple(entries),
                       repeat=max((len(c) for c in cases), default=1))


def passes(counts, reps: int):
    """Cases passing `k` of `reps` repetitions, for each k in counts."""
    return [[{"pass": r < k} for r in range(reps)] for k in counts]


def simulate(rng, probabilities, reps: int, seed: int = 0) -> SuiteResult:
    return result([[{"pass": bool(x)} for x in rng.random(reps) < p] for p in probabilities],
                  seed=seed)


def labels(c: cmp.Comparison) -> dict:
    return {(x.id, x.metric): x.label for x in c.cases}


# -- identical runs, case labels and their numbers ------------------------------------------
def test_identical_runs_hold_with_p_one():
    rng = np.random.default_rng(3)
    cases = [[{"pass": bool(rng.random() < 0.6), "score": float(rng.normal())}
              for _ in range(5)] for _ in range(40)]
    c = cmp.compare(result(cases), result(cases, seed=9))
    assert c.verdict == cmp.HELD and c.exit_code == 0
    assert [(m.metric, m.p, m.p_holm, m.effect) for m in c.metrics] == \
        [("pass", 1.0, 1.0, 0.0), ("score", 1.0, 1.0, 0.0)]
    assert c.counts[cmp.REGRESSED] == c.counts[cmp.IMPROVED] == 0
    assert all(v is not None and v > 0 for v in c.power.values())


def test_each_label_with_the_numbers_behind_it():
    base = passes([10, 0, 5, 10, 7], 10) + [[{"pass": True}]]
    cand = passes([2, 10, 5, 10, 6], 10) + [[{"pass": False}]]
    c = cmp.compare(result(base), result(cand))
    got = {x.id: x for x in c.cases}
    assert {k: v.label for k, v in got.items()} == {
        case_id(0): cmp.REGRESSED, case_id(1): cmp.IMPROVED, case_id(2): cmp.FLAKY,
        case_id(4): cmp.FLAKY, case_id(5): cmp.INCONCLUSIVE}  # case 3 held: not listed
    r = got[case_id(0)]
    assert (r.baseline, r.candidate) == (cmp.Side(n=10, passes=10), cmp.Side(n=10, passes=2))
    assert r.p == pytest.approx(scipy.stats.fisher_exact([[10, 0], [2, 8]]).pvalue)
    assert r.run_id == "sr-0-0-0" and got[case_id(5)].p is None
    m = c.metrics[0]
    assert m.counts == {cmp.REGRESSED: 1, cmp.IMPROVED: 1, cmp.FLAKY: 2, cmp.INCONCLUSIVE: 1,
                        cmp.HELD: 1}
    assert m.cases == 6 and m.effect == pytest.approx((-0.8 + 1.0 + 0 + 0 - 0.1 - 1) / 6)


def test_errored_repetitions_are_neither_passes_nor_failures():
    base = [[{"pass": True}, None, None, {"pass": True}]]
    cand = [[{"pass": True}, {"pass": True}, None, None]]
    c = cmp.compare(result(base), result(cand))
    assert c.verdict == cmp.HELD and c.cases == ()
    one = cmp.compare(result([[{"pass": True}, None, None]]), result(cand))
    assert [x.label for x in one.cases] == [cmp.INCONCLUSIVE]
    assert one.cases[0].baseline == cmp.Side(n=1, passes=1)


def test_without_scores_the_metric_is_the_case_outcome():
    scored = result([[{}] * 3] * 4)
    bare = msgspec.structs.replace(scored, results=tuple(
        msgspec.structs.replace(r, scores=None) for r in scored.results))
    c = cmp.compare(bare, bare)
    assert [m.metric for m in c.metrics] == ["completed"] and c.verdict == cmp.HELD
    assert c.metrics[0].cases == 4 and c.metrics[0].baseline == 1.0


def test_with_one_repetition_the_suite_test_is_mcnemars_exact_test():
    rng = np.random.default_rng(5)
    for _ in range(20):
        a = rng.random(30) < 0.5
        b = rng.random(30) < 0.5
        c = cmp.compare(result([[{"pass": bool(x)}] for x in a]),
                        result([[{"pass": bool(x)}] for x in b]))
        up, down = int((~a & b).sum()), int((a & ~b).sum())
        expected = 1.0 if up == down else scipy.stats.binomtest(up, up + down).pvalue
        assert c.metrics[0].p == pytest.approx(expected, rel=1e-9, abs=1e-12)
        assert {x.label for x in c.cases} <= {cmp.INCONCLUSIVE}  # one repetition a side


@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 6), st.integers(1, 6),
                          st.integers(0, 6)), min_size=1, max_size=12))
@settings(max_examples=60, deadline=None)
def test_the_exact_paired_test_is_a_probability_and_symmetric(rows):
    rows = [(min(a, n), n, min(b, m), m) for n, a, m, b in rows]
    pa, na, pb, nb = (np.array(x) for x in zip(*rows))
    p = cmp.exact_paired_p(pa, na, pb, nb)
    assert 0 <= p <= 1
    assert cmp.exact_paired_p(pb, nb, pa, na) == pytest.approx(p, abs=1e-9)
    assert cmp.exact_paired_p(na - pa, na, nb - pb, nb) == pytest.approx(p, abs=1e-9)


def direct_paired_p(pa, na, pb, nb) -> float:
    """The exact paired test by direct convolution of scipy's hypergeometric pmfs, one case at
    a time (slow, obvious): what the transform-based one must agree with."""
    dist, offset, observed = np.array([1.0]), 0, 0
    for a, n, b, m in zip(pa, na, pb, nb):
        t, total = a + b, n + m
        if 0 < t < total and n and m:
            lo, hi = max(0, m - (total - t)), min(t, m)
            dist = np.convolve(dist, scipy.stats.hypergeom.pmf(np.arange(lo, hi + 1), total, t, m))
            offset, observed = offset + lo, observed + b
    if dist.size == 1:
        return 1.0
    return min(1.0, float(dist[dist <= dist[observed - offset] * (1 + 1e-7)].sum()))


@given(st.lists(st.tuples(st.integers(1, 8), st.integers(0, 8), st.integers(1, 8),
                          st.integers(0, 8)), min_size=1, max_size=40))
@settings(max_examples=60, deadline=None)
def test_the_exact_paired_test_agrees_with_direct_convolution(rows):
    rows = [(min(a, n), n, min(b, m), m) for n, a, m, b in rows]
    pa, na, pb, nb = (np.array(x) for x in zip(*rows))
    expected = direct_paired_p(pa, na, pb, nb)
    got = cmp.exact_paired_p(pa, na, pb, nb)
    if abs(float((pb - (pa + pb) * nb / (na + nb)).sum())) < 1e-9:
        assert got == 1.0  # at the null mean exactly
    else:
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-12)


def test_holm_adjusts_in_step_down_order():
    assert cmp._holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert cmp._holm([0.5]) == [0.5]


# -- honest numbers -------------------------------------------------------------------------
ALPHA = 0.05


def tolerance(rate: float, n: int) -> float:
    """Three standard errors of a proportion estimated from n simulations."""
    return 3 * math.sqrt(rate * (1 - rate) / n)


def test_the_gates_false_positive_rate_under_the_null_is_within_alpha():
    rng = np.random.default_rng(20261205)
    p = rng.uniform(0.1, 0.9, 30)
    sims = 1000
    fired = sum(cmp.compare(simulate(rng, p, 3), simulate(rng, p, 3, seed=1)).verdict
                in (cmp.REGRESSED, cmp.IMPROVED) for _ in range(sims))
    assert fired / sims <= ALPHA + tolerance(ALPHA, sims)


def test_the_numeric_tests_false_positive_rate_under_the_null_is_within_alpha():
    rng = np.random.default_rng(7)
    mu = rng.uniform(0, 1, 30)

    def run(shift=0.0):
        return result([[{"score": float(x)} for x in rng.normal(m + shift, 0.3, 3)]
                       for m in mu])
    sims = 1000
    fired = sum(cmp.compare(run(), run()).verdict != cmp.HELD for _ in range(sims))
    assert fired / sims <= ALPHA + tolerance(ALPHA, sims)


def test_a_shift_of_the_stated_power_is_detected_about_80_percent_of_the_time():
    rng = np.random.default_rng(11)
    p = rng.uniform(0.25, 0.6, 40)
    stated = cmp.compare(simulate(rng, p, 4), simulate(rng, p, 4)).power["pass"]
    assert 0 < stated < 0.3
    sims = 300
    seen = sum(cmp.compare(simulate(rng, p, 4), simulate(rng, p + stated, 4)).verdict
               == cmp.IMPROVED for _ in range(sims))
    rate = seen / sims
    assert abs(rate - cmp.POWER) <= 0.1, rate  # the approximation's error and 3 s.e.


def test_a_numeric_shift_of_the_stated_power_is_detected_about_80_percent_of_the_time():
    rng = np.random.default_rng(12)
    mu = rng.uniform(0, 1, 40)

    def run(shift=0.0):
        return result([[{"score": float(x)} for x in rng.normal(m + shift, 0.3, 4)]
                       for m in mu])
    stated = cmp.compare(run(), run()).power["score"]
    sims = 300
    seen = sum(cmp.compare(run(), run(-stated)).verdict == cmp.REGRESSED for _ in range(sims))
    assert abs(seen / sims - cmp.POWER) <= 0.1, seen / sims


def test_planted_flaky_cases_are_named_flaky():
    rng = np.random.default_rng(4)
    planted = set(rng.choice(200, 20, replace=False).tolist())
    p = [0.5 if i in planted else float(rng.random() < 0.7) for i in range(200)]
    c = cmp.compare(simulate(rng, p, 10), simulate(rng, p, 10))
    flaky = {int(x.id.split("-")[1]) for x in c.cases if x.label == cmp.FLAKY}
    assert flaky <= planted  # a case that never disagrees with itself is never flaky
    assert len(flaky) >= 18  # 10 tries a side: all alike with probability 2^-18
    assert c.verdict == cmp.HELD


# -- invariants -----------------------------------------------------------------------------
case_counts = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1,
                       max_size=15)


def _pair(rows, reps=5):
    return (result(passes([a for a, _ in rows], reps)),
            result(passes([b for _, b in rows], reps), seed=1))


@given(case_counts)
@settings(max_examples=40, deadline=None)
def test_swapping_baseline_and_candidate_swaps_regressed_and_improved(rows):
    a, b = _pair(rows)
    forward, backward = cmp.compare(a, b), cmp.compare(b, a)
    swap = {cmp.REGRESSED: cmp.IMPROVED, cmp.IMPROVED: cmp.REGRESSED}
    assert backward.verdict == swap.get(forward.verdict, forward.verdict)
    assert labels(backward) == {k: swap.get(v, v) for k, v in labels(forward).items()}
    assert backward.metrics[0].p == pytest.approx(forward.metrics[0].p, abs=1e-9)


@given(st.lists(st.tuples(st.lists(st.floats(-5, 5), min_size=1, max_size=5),
                          st.lists(st.floats(-5, 5), min_size=1, max_size=5)),
                min_size=1, max_size=12))
@settings(max_examples=40, deadline=None)
def test_swapping_sides_swaps_numbers_too(rows):
    a = result([[{"score": x} for x in xs] for xs, _ in rows])
    b = result([[{"score": y} for y in ys] for _, ys in rows], seed=1)
    forward, backward = cmp.compare(a, b), cmp.compare(b, a)
    swap = {cmp.REGRESSED: cmp.IMPROVED, cmp.IMPROVED: cmp.REGRESSED}
    assert backward.verdict == swap.get(forward.verdict, forward.verdict)
    assert labels(backward) == {k: swap.get(v, v) for k, v in labels(forward).items()}
    assert backward.metrics[0].p == pytest.approx(forward.metrics[0].p)
    assert backward.metrics[0].effect == pytest.approx(-forward.metrics[0].effect, abs=1e-12)


@given(case_counts, st.sampled_from([0, 5]), st.integers(0, 15))
@settings(max_examples=40, deadline=None)
def test_adding_a_held_case_never_turns_the_verdict(rows, constant, where):
    a, b = _pair(rows)
    where = min(where, len(rows))
    grown = rows[:where] + [(constant, constant)] + rows[where:]
    ga, gb = _pair(grown)
    assert cmp.compare(ga, gb).verdict == cmp.compare(a, b).verdict


@given(st.lists(st.tuples(st.lists(st.booleans(), min_size=1, max_size=6),
                          st.lists(st.floats(0, 1), min_size=1, max_size=6)),
                min_size=2, max_size=10), st.randoms(use_true_random=False))
@settings(max_examples=25, deadline=None)
def test_repetition_order_never_matters(cases, rnd):
    base = [[{"pass": x, "score": y} for x, y in zip(bs, fs)] for bs, fs in cases]
    cand = [[{"pass": not x, "score": y / 2} for x, y in zip(bs, fs)] for bs, fs in cases]

    def shuffled(cs):
        out = []
        for reps in cs:
            reps = list(reps)
            rnd.shuffle(reps)
            out.append(reps)
        return out

    def view(c):
        out = c.to_json()
        for x in out["cases"]:
            del x["run_id"]  # the first repetition's: which one that is changed
        return out
    assert view(cmp.compare(result(base), result(cand))) == \
        view(cmp.compare(result(shuffled(base)), result(shuffled(cand))))


# -- the gate -------------------------------------------------------------------------------
def _shifted(n=60, reps=10, drop=6):
    """Every case passes all `reps` on the baseline, `reps - drop` on the candidate."""
    return result(passes([reps] * n, reps)), result(passes([reps - drop] * n, reps), seed=1)


def test_a_regression_exits_14_and_min_effect_and_direction_decide_what_counts():
    a, b = _shifted()
    c = cmp.compare(a, b)
    assert (c.verdict, c.exit_code, c.metrics[0].verdict) == (cmp.REGRESSED, 14, cmp.REGRESSED)
    assert c.metrics[0].effect == pytest.approx(-0.6)
    assert c.metrics[0].low <= -0.6 <= c.metrics[0].high
    small = cmp.compare(a, b, cmp.Gate(min_effect={"pass": 0.7}))
    assert small.verdict == cmp.HELD and small.exit_code == 0
    flipped = cmp.compare(a, b, cmp.Gate(lower_is_better=("pass",)))
    assert flipped.verdict == cmp.IMPROVED and flipped.metrics[0].higher_is_better is False
    assert set(labels(c).values()) == {cmp.REGRESSED}
    assert labels(flipped) == {k: cmp.IMPROVED for k in labels(c)}


def test_max_regressed_cases_gates_on_the_count():
    base = passes([10] * 36 + [0, 0, 10, 10], 10)  # two cases regress, two improve:
    cand = passes([10] * 36 + [10, 10, 0, 0], 10)  # the suite-level test sees no change
    a, b = result(base), result(cand, seed=1)
    assert cmp.compare(a, b).verdict == cmp.HELD
    assert cmp.compare(a, b).regressed_cases == 2
    assert cmp.compare(a, b, cmp.Gate(max_regressed_cases=2)).verdict != cmp.REGRESSED
    strict = cmp.compare(a, b, cmp.Gate(max_regressed_cases=1))
    assert (strict.verdict, strict.exit_code) == (cmp.REGRESSED, 14)


def test_a_min_effect_below_the_power_is_warned_about():
    rng = np.random.default_rng(1)
    p = rng.uniform(0.2, 0.8, 30)
    c = cmp.compare(simulate(rng, p, 3), simulate(rng, p, 3), cmp.Gate(min_effect={"pass": 0.01}))
    assert any("--min-effect pass=0.01 is below the smallest change" in w for w in c.warnings)
    assert list(c.to_json()["warnings"]) == list(c.warnings)
    assert c.verdict == cmp.HELD  # warned, not a verdict of its own


def test_a_metric_no_case_completed_on_both_sides_is_inconclusive():
    a = result([[{"pass": True}, {"pass": True}]] * 3)
    b = result([[None, None]] * 3)
    c = cmp.compare(a, b)
    assert (c.verdict, c.exit_code, c.metrics[0].cases) == (cmp.INCONCLUSIVE, 15, 0)
    assert c.warnings == ("no case has pass completed on both sides: it cannot be compared "
                          "(inconclusive)",)


def test_tiny_suites_say_they_detect_nothing():
    c = cmp.compare(result(passes([1, 0], 1)), result(passes([0, 1], 1)))
    assert c.power == {"pass": None}
    assert any("detects no change in pass" in w for w in c.warnings)


@pytest.mark.parametrize("gate, reason", [
    (dict(alpha=0), "INVALID_ALPHA"), (dict(alpha=1.5), "INVALID_ALPHA"),
    (dict(min_effect={"pass": -1}), "INVALID_MIN_EFFECT"),
    (dict(max_regressed_cases=-1), "INVALID_MAX_REGRESSED")])
def test_a_gate_out_of_range_is_refused(gate, reason):
    with pytest.raises(InvalidArgument) as e:
        cmp.Gate(**gate)
    assert e.value.reason == reason


def test_min_effect_texts_are_parsed_or_refused():
    assert cmp.parse_min_effect(["pass=0.02", "score=1"]) == {"pass": 0.02, "score": 1.0}
    for bad in (["pass"], ["=0.1"], ["pass=x"], ["pass=-1"], ["pass=nan"], ["a=1", "a=2"]):
        with pytest.raises(InvalidArgument) as e:
            cmp.parse_min_effect(bad)
        assert e.value.reason == "INVALID_MIN_EFFECT"


def test_a_gate_on_a_metric_the_results_lack_is_refused():
    a, b = _shifted()
    with pytest.raises(InvalidArgument) as e:
        cmp.compare(a, b, cmp.Gate(min_effect={"acuracy": 0.1}))
    assert e.value.reason == "UNKNOWN_METRIC" and "they have: pass" in e.value.message


# -- refusals -------------------------------------------------------------------------------
def test_results_of_two_versions_are_refused_naming_both():
    a = result(passes([1], 2))
    b = result(passes([1], 2), version=OTHER_PIN)
    with pytest.raises(FailedPrecondition) as e:
        cmp.compare(a, b, names=("base.json", "evals:prompt-v2"))
    assert e.value.reason == "SUITE_VERSION_MISMATCH"
    assert "base.json" in e.value.message and "evals:prompt-v2" in e.value.message
    assert PIN in e.value.message and OTHER_PIN in e.value.message


def test_suite_files_compare_by_their_cases():
    a = result(passes([1, 2], 2), version="draft")
    same = result(passes([2, 2], 2), version="draft, renamed")
    assert cmp.compare(a, same).verdict in cmp.VERDICTS
    other = result(passes([1, 2], 2), version="draft", ids=["x", "y"])
    with pytest.raises(FailedPrecondition) as e:
        cmp.compare(a, other)
    assert "suite file" in e.value.message


def test_a_shard_is_refused():
    from cas.evals.suites.results import Shard
    a = result(passes([1], 2))
    shard = msgspec.structs.replace(a, shard=Shard(1, 2, 2))
    with pytest.raises(FailedPrecondition) as e:
        cmp.compare(a, shard)
    assert e.value.reason == "NOT_WHOLE_RUN" and "cas suite merge" in e.value.message


def test_without_scipy_comparing_is_refused_naming_the_extra(monkeypatch):
    real = builtins.__import__

    def no_scipy(name, *args, **kwargs):
        if name.startswith("scipy"):
            raise ImportError(name)
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_scipy)
    with pytest.raises(FailedPrecondition) as e:
        cmp.compare(*_shifted())
    assert e.value.reason == "EXTRA_REQUIRED" and "pip install '.[stats]'" in e.value.message


def test_a_real_result_file_is_read_and_compared(tmp_path):
    suite = SuiteRef(name="evals", version=PIN)

    def run(seed, outcomes):
        entries = [CaseResult(id=case_id(i), position=i, run_id=f"sr-{seed}-{i}-{r}",
                              outcome="COMPLETED", scores={"pass": ok}, repetition=r,
                              seed=repetition_seed(seed, r))
                   for i, reps in enumerate(outcomes) for r, ok in enumerate(reps)]
        return finish(suite, seed, entries, None, len(outcomes[0]))
    path = tmp_path / "base.json"
    import json
    path.write_text(json.dumps(run(0, [[True, True, True]] * 8).to_json()))
    got, name = cmp.read_side(str(path))
    assert name == str(path) and len(got.results) == 24
    c = cmp.compare(got, run(1, [[False, False, False]] * 8), names=(name, "candidate"))
    assert c.verdict == cmp.REGRESSED and c.baseline.source == str(path)
    with pytest.raises(InvalidArgument) as e:
        cmp.read_side(str(tmp_path / "missing.json"))
    assert "neither a result file" in e.value.message


# -- renderers ------------------------------------------------------------------------------
def test_markdown_is_a_bounded_pull_request_comment():
    n = 3000
    a = result(passes([10] * n, 10))
    b = result(passes([0] * (n - 200) + [9] * 100 + [10] * 100, 10), seed=1)
    inputs = {case_id(i): f"what | is <b>{i}</b>\n`x` " + "&" * 200 for i in range(n)}
    c = cmp.compare(a, b)
    md = cmp.to_markdown(c, inputs, marker="cas-compare")
    lines = md.splitlines()
    assert lines[0] == "<!-- cas-compare -->"
    assert lines[1].startswith("**cas suite compare: REGRESSED: 2800 regressed, 100 flaky")
    assert len(md) < cmp.MARKDOWN_LIMIT
    assert "### Regressed (2800, the first 100 shown)" in md
    assert "### Flaky (100)" in md and "Improved" not in md
    rows = [x for x in lines if x.startswith("| `case-")]
    assert len(rows) == 200 and all(x.endswith(" |") and x.count(" | ") == 6 for x in rows)
    assert all("what \\| is &lt;b&gt;" in x for x in rows)  # each row shows its input
    assert "&lt;b&gt;" in md and "<b>" not in md and "what \\| is" in md
    assert "sr-1-0-0" in md  # the candidate's first repetition's run id
    with pytest.raises(InvalidArgument):
        cmp.to_markdown(c, marker="a --> b")


def test_markdown_without_inputs_says_how_to_get_them():
    c = cmp.compare(*_shifted())
    md = cmp.to_markdown(c)
    assert md.startswith("**cas suite compare: REGRESSED")
    assert "give the suite with --suite" in md


def test_junit_has_one_test_per_case_and_metric():
    base = [[{"pass": True, "score": 1.0}] * 4] * 3 + [[{"pass": r % 2 == 0, "score": 1.0}
                                                       for r in range(4)]]
    cand = [[{"pass": False, "score": 1.0}] * 4] + [[{"pass": True, "score": 1.0}] * 4] * 2 + \
        [[{"pass": r % 2 == 1, "score": 1.0} for r in range(4)]]
    c = cmp.compare(result(base), result(cand))
    root = ElementTree.fromstring(cmp.to_junit(c))
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == 8 and int(suite.get("tests")) == 8
    assert {(t.get("classname"), t.get("name")) for t in cases} == \
        {(m, case_id(i)) for m in ("pass", "score") for i in range(4)}
    failed = [t for t in cases if t.find("failure") is not None]
    assert [(t.get("classname"), t.get("name")) for t in failed] == [("pass", case_id(0))]
    assert int(suite.get("failures")) == 1
    flaky = [t for t in cases if t.find("properties/property[@name='flaky']") is not None]
    assert [(t.get("classname"), t.get("name")) for t in flaky] == [("pass", case_id(3))]
    verdict = suite.find("properties/property[@name='verdict']").get("value")
    assert verdict == c.verdict


def test_the_text_table_names_the_verdict_and_each_metric():
    c = cmp.compare(*_shifted())
    text = cmp.to_text(c)
    first, header, row = text.splitlines()[:3]
    assert "REGRESSED" in first and "(exit 14)" in first
    assert header.split()[:3] == ["METRIC", "KIND", "CASES"]
    assert row.split()[:3] == ["pass", "pass", "60"] and row.split()[-1] == "regressed"
    assert sum(line.startswith("REGRESSED") for line in text.splitlines()) == 60
    assert "... and" not in text
    assert "... and 20 more regressed" in cmp.to_text(c, limit=40)


def test_json_is_plain_data():
    import json
    c = cmp.compare(*_shifted())
    out = json.loads(json.dumps(c.to_json()))
    assert set(out) == {"verdict", "exit_code", "alpha", "baseline", "candidate", "metrics",
                        "power", "counts", "regressed_cases", "cases", "warnings", "gate"}
    assert out["power"] == {"pass": c.metrics[0].mde}
    assert out["metrics"][0]["p"] == c.metrics[0].p


def test_order_of_simulations_is_seeded():
    random.seed(0)  # nothing here reads the global generators: same numbers twice
    rng1, rng2 = np.random.default_rng(8), np.random.default_rng(8)
    p = [0.5] * 20
    one = cmp.compare(simulate(rng1, p, 3), simulate(rng1, p, 3)).to_json()
    two = cmp.compare(simulate(rng2, p, 3), simulate(rng2, p, 3)).to_json()
    assert one == two
