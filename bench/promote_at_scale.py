"""Cold promotions in a large repository of reviewed runs against a small one, in one run.

    python bench/promote_at_scale.py REPO [--baseline 10000] [--promotions 20]

REPO is a repository holding many imported and reviewed runs (for 1M: the one that
`python bench/erasure.py --million --with-runs --keep` builds). It is copied with hard links
(cas never changes a file in place), so the copy can be written to. The baseline is a fresh
repository of `--baseline` runs, imported and reviewed at once. In each, `--promotions` times:
10 reviewed runs picked at random are promoted into a new dataset, the preview from one fresh
`cas.open` and the seal from another (timed together); then a fresh process resolves 10 run ids
and their reviews through the log indexes, beside reading both logs whole. Prints medians and
the ratio large / baseline (issue 16, target 1: a cold promotion onto 1M within 2x).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "bench")]

from lifecycle import cold_index_loads  # noqa: E402

import cas  # noqa: E402
from cas.repo import reviews  # noqa: E402
from cas.repo import runs as run_log  # noqa: E402
from support.lifecycle import run_obj  # noqa: E402

AUTHOR = "Bench <bench@example.com>"


def baseline(path: str, n: int) -> None:
    repo = cas.init(path)
    repo.import_runs([run_obj(f"r-{i}", i, person=f"p-{i}") for i in range(n)], author=AUTHOR)
    req = [{"run_id": f"r-{i}", "metric": "dataset_eligibility", "label": "reviewed"}
           for i in range(n)]
    token = repo.add_reviews(req, reviewer=AUTHOR)["confirm_token"]
    repo.add_reviews(req, confirm_token=token, reviewer=AUTHOR)


def promotions(path: str, count: int, seed: int = 3) -> float:
    repo = cas.open(path)
    repo.create_dataset("promoted", author=AUTHOR)
    ids = sorted(run_log.index(repo.context).all())
    picked = random.Random(seed).sample(ids, 10 * count)
    times = []
    for k in range(count):
        chunk = picked[10 * k:10 * (k + 1)]
        index = reviews.index(cas.open(path).context)
        subjects = [{"subject_kind": "agent_run", "subject_ref": r,
                     "review_annotation_id": index.of_run(r)[-1].annotation_id} for r in chunk]
        t0 = time.perf_counter()
        preview = cas.open(path).promote("promoted", subjects, f"bench-{k}", author=AUTHOR)
        cas.open(path).seal("promoted", preview["confirm_token"], author=AUTHOR)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo")
    p.add_argument("--baseline", type=int, default=10_000)
    p.add_argument("--promotions", type=int, default=20)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="cas-promote-at-scale-")
    try:
        large = os.path.join(work, "large")
        subprocess.run(["cp", "-al", os.path.abspath(args.repo), large], check=True)
        small = os.path.join(work, "small")
        baseline(small, args.baseline)
        n_large = len(run_log.index(cas.open(large).context).all())
        rows = []
        for label, path in ((f"{args.baseline} runs (baseline)", small),
                            (f"{n_large} runs", large)):
            t = promotions(path, args.promotions)
            loads = cold_index_loads(path)
            rows.append((label, t, loads))
            print(f"{label}: cold promote 10 (preview + seal) {t * 1e3:.1f} ms; resolve 10 ids "
                  f"{loads['keyed'] * 1e3:.1f} ms (reading both logs whole "
                  f"{loads['whole'] * 1e3:.1f} ms)")
        ratio = rows[1][1] / rows[0][1]
        print(f"cold promotion growth: {ratio:.2f}x (target <= 2x: "
              f"{'PASS' if ratio <= 2 else 'MISS'})")
        print(f"resolve 10 ids growth: {rows[1][2]['keyed'] / rows[0][2]['keyed']:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
