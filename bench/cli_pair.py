"""`cas promote` + `cas seal` as two processes: this tree against another, pair by pair.

    python bench/cli_pair.py REPO BASELINE_TREE [--pairs 7] [--dataset bench] [--reviewed]

REPO is a repository with a dataset to promote into (`bench/lifecycle.py --out DIR` leaves
`DIR/repo-100000`); it is copied with hard links (cas never changes a file in place), so the copy
can be written to. BASELINE_TREE is a checkout of cas to compare with, e.g. the commit before a
change: `git worktree add /tmp/old <commit>`. Each pair, in turn for this tree and the
baseline: 10 new runs are imported and reviewed through the library (not timed), then
`cas promote --json` and `cas seal` run as two processes (timed together) with PYTHONPATH
naming the tree whose `cas` package and command line (`cli`, as `cas_cli`) they import. Both trees are compiled first, as pip would.
With `--reviewed`, the promotion is by selection (`cas promote --reviewed --run ID` x 10: cas
finds each run's newest judgment) instead of a subjects file (`--file`, naming the judgments).
Prints each side's median and the ratio this tree / baseline, pair by pair and its median.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "bench")]

import lifecycle  # noqa: E402


def cli_dir(tree: str) -> str:
    """A tree's command line: `cas_cli/`, or `cli/` in trees from before the layer folders."""
    named = os.path.join(tree, "cas_cli")
    return named if os.path.isdir(named) else os.path.join(tree, "cli")


def promote_and_seal(cas_exe: str, repo: str, dataset: str, pythonpath: str, subjects: str,
                     key: str, run_ids: list[str] | None = None) -> float:
    """Two processes, timed together: the promotion (of the subjects file, or by selection of
    `run_ids`), then its seal."""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    chosen = ["--file", subjects] if run_ids is None else \
        ["--reviewed", *(a for r in run_ids for a in ("--run", r))]
    t0 = time.perf_counter()
    p = subprocess.run([cas_exe, "--repo", repo, "--json", "promote", dataset, *chosen,
                        "--idempotency-key", key], capture_output=True, check=True, env=env)
    token = json.loads(p.stdout)["confirm_token"]
    subprocess.run([cas_exe, "--repo", repo, "seal", dataset, "--confirm-token", token],
                   capture_output=True, check=True, env=env)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo")
    p.add_argument("baseline_tree")
    p.add_argument("--pairs", type=int, default=7)
    p.add_argument("--dataset", default=lifecycle.DATASET)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--reviewed", action="store_true",
                   help="promote by selection (--reviewed --run ID ...), not a subjects file")
    args = p.parse_args(argv)
    cas_exe = os.path.join(os.path.dirname(sys.executable), "cas")
    trees = {"this tree": ROOT, "baseline": os.path.abspath(args.baseline_tree)}
    for tree in trees.values():
        if not os.path.isfile(os.path.join(tree, "cas", "__init__.py")):
            p.error(f"{tree} holds no cas package")
        compileall.compile_dir(os.path.join(tree, "cas"), quiet=1)
        compileall.compile_dir(cli_dir(tree), quiet=1)
    work = tempfile.mkdtemp(prefix="cas-cli-pair-", dir="/tmp")
    repo = os.path.join(work, "repo")
    shutil.copytree(args.repo, repo, copy_function=os.link)
    # Each tree's `cas` and its command line (installed as `cas_cli`: a
    # link of that name in front of the tree, or an editable install's finder would serve
    # this checkout's command line to both sides)
    paths = {}
    for j, (name, tree) in enumerate(trees.items()):
        shim = os.path.join(work, f"shim-{j}")
        os.makedirs(shim)
        os.symlink(cli_dir(tree), os.path.join(shim, "cas_cli"))
        paths[name] = os.pathsep.join([shim, tree])
    times: dict[str, list[float]] = {name: [] for name in trees}
    try:
        for k in range(args.pairs):
            for j, (name, tree) in enumerate(trees.items()):
                runs = lifecycle.extra_runs(args.seed, 900_000 + 2 * k + j, 10)
                ids = [r["run_id"] for r in runs]
                annotations, _ = lifecycle.import_and_review(repo, runs, ids)
                subjects = os.path.join(work, "subjects.json")
                with open(subjects, "w") as f:
                    json.dump([{"subject_kind": "agent_run", "subject_ref": i,
                                "review_annotation_id": a} for i, a in zip(ids, annotations)], f)
                times[name].append(promote_and_seal(cas_exe, repo, args.dataset, paths[name],
                                                    subjects, f"cli-pair-{k}-{j}",
                                                    ids if args.reviewed else None))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ours, theirs = times["this tree"], times["baseline"]
    ratios = [a / b for a, b in zip(ours, theirs)]
    how = "--reviewed --run x10" if args.reviewed else "--file (10 subjects)"
    print(f"cas promote {how} + cas seal, two processes, {args.pairs} pairs on {args.repo}")
    print(f"  this tree: median {statistics.median(ours) * 1000:.0f} ms")
    print(f"  baseline ({trees['baseline']}): median {statistics.median(theirs) * 1000:.0f} ms")
    print(f"  this tree / baseline: median {statistics.median(ratios):.2f}x "
          f"(pairs: {', '.join(f'{r:.2f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
