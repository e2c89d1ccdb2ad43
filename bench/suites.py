"""Suite runner overhead: what cas.evals.suites.runner adds per case over a bare asyncio loop.

Run by hand (not a timed test):

    python bench/suites.py                 # 10k cases, concurrency 4 and 64, 5 rounds each
    python bench/suites.py --n 20000 --rounds 7 --concurrency 4,16
    python bench/suites.py --dir /dev/shm  # artefacts in memory: the runner, not the disk

The executor is trivial and async (it yields once with `asyncio.sleep(0)` and answers with the
case's input), so what is measured is the runner itself: run ids, the checks of what came
back, results in suite order, the digest, and with `--artefacts` the four files per case.
Baseline, measured in the same run and interleaved with it: a bare asyncio loop with a
semaphore of the same bound making the same calls (one task per case, `asyncio.gather`), the
least any runner must do. It prints the median seconds of each, and the overhead per case
(runner - baseline) / N; the target (issue 13) is at most 50 us per case without artefacts.
With artefacts the figure is mostly the file system: 4 atomic writes (temporary file + rename)
and one directory per case, plus the INCOMPLETE result.json written for every case first.

Repetitions (`--repeat 1,10`, without artefacts): the same N (case, repetition) pairs as N/R
cases run R times each (`SuiteRunner(repeat=R)`: a run id and a seed per repetition, the
executor given `repetition` and `seed` when it declares them), against the same baseline making
N calls. Printed: the overhead per repetition, (runner - baseline) / N; the target (issue 34) is
that it stays within 50 us of the bare asyncio loop, as without repetitions.

Cassette lookup cost per exchange (`--cassettes`, on by default; `--exchanges 10000`): a
cassette of 10k recorded exchanges (distinct requests to one wrapped tool) answers each of
them once, in a shuffled order. Printed: the median microseconds per exchange, the ratio
against a cassette of 10 exchanges answering the same kind of call (does the lookup stay
flat as the cassette grows?) and against the bare call of the same function (what replay
adds: canonical JSON of the arguments, a BLAKE3 key, a dict lookup, a copy of the answer).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import random  # noqa: E402

from cas.evals.cassettes import RECORD, REPLAY, Cassette  # noqa: E402
from cas.evals.suites import Run, Suite, SuiteCase, SuiteRunner  # noqa: E402


async def trivial(case, *, run_id):
    await asyncio.sleep(0)
    return Run(case.input, case.tenant)


async def trivial_repeated(case, *, run_id, repetition, seed):
    """The trivial executor that declares `repetition` and `seed` (so the runner passes them)."""
    await asyncio.sleep(0)
    return Run(case.input, case.tenant)


async def baseline(cases, concurrency: int) -> list:
    sem = asyncio.Semaphore(concurrency)

    async def one(case):
        async with sem:
            return await trivial(case, run_id=case.id)
    return await asyncio.gather(*(one(c) for c in cases))


async def workers(cases, concurrency: int) -> list:
    """The tightest loop of the same bound: `concurrency` coroutines taking the next case (the
    shape cas.evals.suites.runner uses), so runner - workers is the runner's own work per case."""
    out = [None] * len(cases)
    it = iter(enumerate(cases))

    async def work():
        for i, case in it:
            out[i] = await trivial(case, run_id=case.id)
    await asyncio.gather(*(work() for _ in range(concurrency)))
    return out


def suite_of(n: int) -> Suite:
    cases = tuple(SuiteCase(id=f"case-{i:06d}", input={"question": f"q{i}", "n": i},
                            tenant="acme") for i in range(n))
    return Suite("bench", "bench@1", cases)


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def tool(query: str, n: int) -> dict:
    return {"hits": [query], "n": n}


def recorded(n: int) -> list:
    c = Cassette(mode=RECORD)
    wrapped = c.wrap(tool, "search")
    for i in range(n):
        wrapped(f"question {i}", n=i)
    return c.exchanges


def per_exchange(exchanges: list, rounds: int) -> float:
    """Median seconds per exchange of replaying every exchange once, shuffled."""
    order = list(range(len(exchanges)))
    times = []
    for r in range(rounds):
        random.Random(r).shuffle(order)
        c = Cassette(exchanges, REPLAY)
        wrapped = c.wrap(tool, "search")
        t = time.perf_counter()
        for i in order:
            wrapped(f"question {i}", n=i)
        times.append((time.perf_counter() - t) / len(order))
        c.check()
    return statistics.median(times)


def bare(n: int, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for i in range(n):
            tool(f"question {i}", n=i)
        times.append((time.perf_counter() - t) / n)
    return statistics.median(times)


def cassettes(n: int, rounds: int) -> None:
    big, small = recorded(n), recorded(10)
    t_big = per_exchange(big, rounds)
    t_small = statistics.median(per_exchange(small, 1) for _ in range(max(rounds, 50)))
    t_bare = bare(n, rounds)
    print(f"\ncassette replay, {n} recorded exchanges: {t_big * 1e6:.1f} us per exchange; "
          f"{t_big / t_small:.2f}x a 10-exchange cassette ({t_small * 1e6:.1f} us); "
          f"{t_big / t_bare:.1f}x the bare call ({t_bare * 1e6:.2f} us)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", default="4,64")
    parser.add_argument("--repeat", default="1,10",
                        help="repetitions per case of the repetitions table (N pairs in all)")
    parser.add_argument("--exchanges", type=int, default=10_000,
                        help="recorded exchanges of the cassette lookup benchmark (0: skip it)")
    parser.add_argument("--dir", default=None,
                        help="where the artefacts go (default: a new directory in /tmp); "
                             "e.g. /dev/shm to see the runner without the disk")
    args = parser.parse_args()
    suite = suite_of(args.n)
    n = args.n
    print(f"{n} cases, {args.rounds} rounds (medians), Python {sys.version.split()[0]}")
    print(f"{'concurrency':>11} {'artefacts':>9} {'runner s':>9} {'baseline s':>10} "
          f"{'ratio':>6} {'overhead us/case':>17} {'workers s':>9} {'vs workers us/case':>19}")
    with tempfile.TemporaryDirectory(prefix="cas-bench-suites-", dir=args.dir) as tmp:
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            for with_artefacts in (False, True):
                ours, base, pool = [], [], []
                for r in range(args.rounds):  # interleaved, so drift hits all alike
                    base.append(timed(lambda: asyncio.run(baseline(suite.cases, concurrency))))
                    pool.append(timed(lambda: asyncio.run(workers(suite.cases, concurrency))))
                    where = Path(tmp) / f"a{r}" if with_artefacts else None
                    run = SuiteRunner(trivial, concurrency=concurrency, artefacts=where)
                    result = None

                    def go():
                        nonlocal result
                        result = run.run(suite)
                    ours.append(timed(go))
                    assert result.ok and len(result.results) == n
                    if where is not None:
                        shutil.rmtree(where)
                t_ours, t_base = statistics.median(ours), statistics.median(base)
                t_pool = statistics.median(pool)
                print(f"{concurrency:>11} {'yes' if with_artefacts else 'no':>9} "
                      f"{t_ours:>9.3f} {t_base:>10.3f} {t_ours / t_base:>6.2f} "
                      f"{(t_ours - t_base) / n * 1e6:>17.1f} {t_pool:>9.3f} "
                      f"{(t_ours - t_pool) / n * 1e6:>19.1f}")
    repetitions(n, args.rounds, [int(c) for c in args.concurrency.split(",")],
                [int(r) for r in args.repeat.split(",")])
    if args.exchanges:
        cassettes(args.exchanges, args.rounds)


def repetitions(n: int, rounds: int, concurrencies: list[int], repeats: list[int]) -> None:
    """N (case, repetition) pairs: N/R cases x R repetitions, against N bare calls."""
    print(f"\nrepetitions: {n} (case, repetition) pairs, no artefacts")
    print(f"{'concurrency':>11} {'repeat':>6} {'cases':>6} {'runner s':>9} {'baseline s':>10} "
          f"{'ratio':>6} {'overhead us/repetition':>23}")
    for concurrency in concurrencies:
        for repeat in repeats:
            suite = suite_of(n // repeat)
            calls = list(suite.cases) * repeat  # what the baseline runs: the same N calls
            pairs = len(calls)
            ours, base = [], []
            for _ in range(rounds):
                base.append(timed(lambda: asyncio.run(baseline(calls, concurrency))))
                run = SuiteRunner(trivial_repeated, concurrency=concurrency, repeat=repeat)
                result = None

                def go():
                    nonlocal result
                    result = run.run(suite)
                ours.append(timed(go))
                assert result.ok and len(result.results) == pairs
            t_ours, t_base = statistics.median(ours), statistics.median(base)
            print(f"{concurrency:>11} {repeat:>6} {len(suite.cases):>6} {t_ours:>9.3f} "
                  f"{t_base:>10.3f} {t_ours / t_base:>6.2f} "
                  f"{(t_ours - t_base) / pairs * 1e6:>23.1f}")


if __name__ == "__main__":
    main()
