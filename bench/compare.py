"""`cas suite compare`: its speed on big results, and its statistics calibrated by simulation.

Run by hand (not a timed test):

    python bench/compare.py                  # speed (10k cases x 10 repetitions) + calibration
    python bench/compare.py --speed          # only the speed
    python bench/compare.py --calibrate --sims 5000

Speed (issue 34: two results of 10,000 cases x 10 repetitions compared within 2 s): two
results are built (a pass/fail metric and a numeric one per repetition) and written as result
files. Measured, median of `--rounds`: `compare` on the two SuiteResults (the per-case tests,
the suite-level tests, intervals, power and labels), and end to end as `cas suite compare`
does it without printing: both files read and checked (`as_result`: decode, digest) and
compared. Baseline, in the same run: `cas suite diff` of the same two files (read and checked,
answers compared case by case), the cheapest command that looks at both results. Printed: the
seconds and the ratios against the baseline.

Calibration: seeded simulations of whole comparisons through `compare`, the gate as
`cas suite compare` applies it (alpha 0.05, no --min-effect):
- false-positive rate: both sides drawn from the same per-case pass probabilities (or means),
  the share of comparisons whose verdict is not `held`; it must stay within alpha (its
  standard error from the number of simulations is printed);
- detection rate at the stated power: the power statement of one null comparison names a
  change; that change is planted in the candidate, and the share of comparisons that detect
  it (in the right direction) should be about 80%;
- for pass/fail with 5 repetitions and with 1 (McNemar's case), and for numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from cas.evals.suites import compare as cmp  # noqa: E402
from cas.evals.suites.results import (CaseResult, SuiteRef, SuiteResult, as_result,  # noqa: E402
                                      diff, finish, repetition_seed, run_id)


def big_result(rng, probabilities, means, reps: int, seed: int) -> SuiteResult:
    suite = SuiteRef("bench", "bench@1#b3:" + "ab" * 32)
    entries = []
    for i, (p, m) in enumerate(zip(probabilities, means)):
        cid = f"b3:{i:064x}"
        ok = rng.random(reps) < p
        score = rng.normal(m, 0.2, reps)
        for r in range(reps):
            entries.append(CaseResult(
                id=cid, position=i, run_id=run_id(suite.name, suite.version, cid, seed, r)
                if r else run_id(suite.name, suite.version, cid, seed), outcome="COMPLETED",
                answer={"ok": bool(ok[r])}, scores={"pass": bool(ok[r]),
                                                    "score": float(score[r])},
                repetition=r, seed=repetition_seed(seed, r)))
    return finish(suite, seed, entries, None, reps)


def median_time(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def speed(n: int, reps: int, rounds: int) -> None:
    rng = np.random.default_rng(34)
    p = rng.uniform(0.2, 0.95, n)
    m = rng.uniform(0, 1, n)
    a = big_result(rng, p, m, reps, 0)
    b = big_result(rng, np.clip(p - 0.02, 0, 1), m - 0.01, reps, 1)
    with tempfile.TemporaryDirectory() as d:
        fa, fb = Path(d, "a.json"), Path(d, "b.json")
        fa.write_text(json.dumps(a.to_json()))
        fb.write_text(json.dumps(b.to_json()))
        cmp.compare(a, b)  # warm: imports, caches of the exact tests
        t_compare = median_time(lambda: cmp.compare(a, b), rounds)
        t_end = median_time(lambda: cmp.compare(cmp.read_side(str(fa))[0],
                                                cmp.read_side(str(fb))[0]), rounds)
        t_diff = median_time(lambda: diff(as_result(fa.read_bytes()),
                                          as_result(fb.read_bytes())), rounds)
        size = fa.stat().st_size + fb.stat().st_size
    c = cmp.compare(a, b)
    print(f"speed: {n} cases x {reps} repetitions a side ({size / 1e6:.0f} MB of JSON), "
          f"median of {rounds}")
    print(f"  compare (results in memory)      {t_compare:7.3f} s   target <= 2 s")
    print(f"  read both files + compare        {t_end:7.3f} s")
    print(f"  baseline: suite diff (read both) {t_diff:7.3f} s")
    print(f"  ratios: compare/diff {t_compare / t_diff:.2f}x, "
          f"read+compare/diff {t_end / t_diff:.2f}x")
    print(f"  verdict {c.verdict}; " + "; ".join(
        f"{x.metric}: effect {x.effect:+.4f}, p_holm {x.p_holm:.3g}, mde {x.mde:.4f}"
        for x in c.metrics))


def fast_result(cases) -> SuiteResult:
    entries = [CaseResult(id=f"c{i}", position=i, run_id=f"sr-{i}-{r}", outcome="COMPLETED",
                          scores=s, repetition=r, seed=r)
               for i, reps in enumerate(cases) for r, s in enumerate(reps)]
    return SuiteResult(suite=SuiteRef("sim", "sim"), seed=0, ok=True, exit_code=0,
                       digest="b3:" + "0" * 64, counts={}, results=tuple(entries),
                       repeat=max(len(c) for c in cases))


def calibrate(sims: int) -> None:
    rng = np.random.default_rng(20261205)
    print(f"calibration: {sims} null comparisons per setting, {sims // 2} with a planted "
          "shift; alpha 0.05")

    def passes(p, reps):
        return fast_result([[{"pass": bool(x)} for x in rng.random(reps) < q] for q in p])

    def numbers(mu, reps, shift=0.0):
        return fast_result([[{"score": float(x)} for x in rng.normal(q + shift, 0.3, reps)]
                            for q in mu])

    settings = [
        ("pass/fail, 50 cases x 5 repetitions", "pass", rng.uniform(0.2, 0.7, 50), 5, passes),
        ("pass/fail, 200 cases x 1 repetition (McNemar)", "pass",
         rng.uniform(0.2, 0.7, 200), 1, passes),
        ("numbers, 50 cases x 5 repetitions", "score", rng.uniform(0, 1, 50), 5, numbers),
    ]
    for title, metric, base, reps, make in settings:
        t = time.perf_counter()
        fired = sum(cmp.compare(make(base, reps), make(base, reps)).verdict != cmp.HELD
                    for _ in range(sims))
        rate = fired / sims
        se = math.sqrt(0.05 * 0.95 / sims)
        stated = [cmp.compare(make(base, reps), make(base, reps)).power[metric]
                  for _ in range(20)]
        mde = statistics.median(stated)
        shifted = base + mde if metric == "pass" else base
        detected = 0
        for _ in range(sims // 2):
            if metric == "pass":
                c = cmp.compare(make(base, reps), make(shifted, reps))
            else:
                c = cmp.compare(make(base, reps), make(base, reps, mde))
            detected += c.verdict == cmp.IMPROVED
        power = detected / (sims // 2)
        print(f"  {title}:")
        print(f"    false-positive rate {rate:.4f} (alpha 0.05, s.e. {se:.4f}: within alpha "
              f"{'yes' if rate <= 0.05 + 2 * se else 'NO'})")
        print(f"    stated power: {mde:.4f} (median of 20 statements); detected "
              f"{power:.3f} of {sims // 2} (target 0.80, s.e. "
              f"{math.sqrt(0.16 / (sims // 2)):.3f})  [{time.perf_counter() - t:.0f} s]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--calibrate", action="store_true")
    args = ap.parse_args()
    both = not (args.speed or args.calibrate)
    if args.speed or both:
        speed(args.n, args.reps, args.rounds)
    if args.calibrate or both:
        calibrate(args.sims)


if __name__ == "__main__":
    main()
