"""A large ingest, this tree against another, in turn, with the floor measured between them.

    python bench/ingest_pair.py JSONL BASELINE_TREE [--rounds 3] [--work DIR]

JSONL is a file of cases (`bench/engine.py --out DIR` leaves `DIR/cases-s1-<N>.jsonl`).
BASELINE_TREE is a checkout of cas to compare with, e.g. the commit before a change:
`git worktree add /tmp/old <commit>`. Each round runs, each in a fresh process: the floor
(`engine.py --child floor`: decode, encode and hash every case, no storage), then each tree's
own `engine.py --child ingest` into a fresh local repository (`repo.commit` of
`read_cases_jsonl`, as `engine.py` times it; the tree's own cas, by its own script's path).
Prints each run, each side's median, its ratio to the floor's median, and this tree / baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child(tree: str, what: str, *args: str) -> float:
    """Seconds a child of `tree`'s bench/engine.py reports (run outside any tree, so that its
    script's own tree is the cas it imports)."""
    out = subprocess.run([sys.executable, os.path.join(tree, "bench", "engine.py"), "--child",
                          what, *args], cwd=tempfile.gettempdir(), capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["seconds"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("jsonl")
    p.add_argument("baseline", help="a checkout of cas to compare with")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--work", help="where the repositories go (default: a new /tmp dir)")
    args = p.parse_args(argv)
    jsonl, base = os.path.abspath(args.jsonl), os.path.abspath(args.baseline)
    if not os.path.exists(os.path.join(base, "bench", "engine.py")):
        p.error(f"{base} has no bench/engine.py: give a checkout of cas")
    work = args.work or tempfile.mkdtemp(prefix="cas-ingest-pair-")
    sides = {"floor": [], "baseline": [], "this tree": []}
    for k in range(args.rounds):
        sides["floor"].append(child(ROOT, "floor", jsonl))
        for name, tree in (("baseline", base), ("this tree", ROOT)):
            repo = os.path.join(work, "repo")
            shutil.rmtree(repo, ignore_errors=True)
            subprocess.run(["sync"], check=False)  # the last repository's pages, not ours
            sides[name].append(child(tree, "ingest", jsonl, repo))
        print(f"round {k + 1}: " + ", ".join(f"{n} {v[-1]:.2f} s" for n, v in sides.items()),
              flush=True)
    shutil.rmtree(os.path.join(work, "repo"), ignore_errors=True)
    floor = statistics.median(sides["floor"])
    for name, runs in sides.items():
        med = statistics.median(runs)
        print(f"{name:>9}: median {med:.2f} s, {med / floor:.2f}x the floor "
              f"(runs {', '.join(f'{r:.2f}' for r in runs)})")
    ratio = statistics.median(sides["this tree"]) / statistics.median(sides["baseline"])
    print(f"this tree / baseline: {ratio:.2f}x ({base})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
