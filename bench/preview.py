"""Preview benchmark: `cas promote --reviewed --json` of many runs, peak memory, time, output.

Run by hand (not a timed test):

    python bench/preview.py                         # 10k and 50k reviewed runs (a few minutes)
    python bench/preview.py --sizes 50000 --tree /tmp/base   # children import cas from a tree
    python bench/preview.py --out DIR               # keep the repositories in DIR
    python bench/preview.py --fresh                 # each child on a copy never promoted
    python bench/preview.py --rounds 3              # least time, most RSS of 3 rounds

For every size a fresh local repository holds N recorded runs (bench/lifecycle.py's generator,
seed 1), each reviewed as accepted in one batch, and an empty dataset. Then, each in a fresh
child process (one cold command, as a user runs it), `cas --json promote bench --reviewed` with
a new idempotency key: the child's peak RSS (VmHWM), its wall time, and the size of what it
printed (the JSON preview). `--tree PATH` makes the children import `cas` and `cas_cli` from
another checkout (for example the tree before a change: `git worktree add /tmp/base HEAD`), so
the same repositories are measured by both in one run: `--tree` may be given twice, the first
is the baseline the ratios are against. `stage` is the library call alone
(`Repository.promote_reviewed`, the preview dict not encoded), to tell staging from printing.
Without `--fresh` the children share the repository, so only the first one stores the cases
(the others find them stored and write only their proposal); with it, each child promotes on
its own copy of the repository as built (copied outside the timing): every child stores them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MIB = 1 << 20
DATASET = "bench"


def _peak_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# -- child ---------------------------------------------------------------------------------------
def child(tree: str, mode: str, location: str, key: str) -> dict[str, Any]:
    sys.path.insert(0, tree)
    out = io.BytesIO()
    t0 = time.perf_counter()
    if mode == "cli":
        from cas_cli.common import Invocation
        from cas_cli.main import cli
        wrapper = io.TextIOWrapper(out, encoding="utf-8")
        with contextlib.redirect_stdout(wrapper):
            try:
                cli.main(["--repo", location, "--json", "promote", DATASET, "--reviewed",
                          "--idempotency-key", key], obj=Invocation(None, False),
                         standalone_mode=False)
            finally:
                wrapper.flush()
    else:
        import cas
        cas.open(location).promote_reviewed(DATASET, key)
    seconds = time.perf_counter() - t0
    data = out.getvalue()
    first = json.loads(data.splitlines()[0]) if data else {}
    return {"seconds": seconds, "maxrss": _peak_rss(), "bytes": len(data),
            "first_line": len(data.splitlines()[0]) if data else 0,
            "lines": len(data.splitlines()),
            "added": (first.get("proposed") or {}).get("added_count",
                                                      len((first.get("proposed") or {})
                                                          .get("added", [])))}


def run_child(tree: str, mode: str, location: str, key: str) -> dict[str, Any]:
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", tree, mode,
                        location, key], capture_output=True, text=True, cwd="/")
    if p.returncode != 0:
        raise RuntimeError(f"child {tree} {mode} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


# -- setup ---------------------------------------------------------------------------------------
def build(work: str, n: int, log) -> str:
    """A repository with n runs, each reviewed as accepted, and the empty dataset `bench`."""
    sys.path[:0] = [ROOT, HERE]
    import lifecycle

    import cas
    location = os.path.join(work, f"repo-{n}")
    if os.path.exists(os.path.join(location, ".cas", "ready")):
        return location
    jsonl = lifecycle.generate(os.path.join(work, f"runs-{n}.jsonl"), n, 1)
    lifecycle.new_repo(location)
    t0 = time.perf_counter()
    with open(jsonl, "rb") as f:
        data = f.read()
    ids = lifecycle.run_ids(data)
    lifecycle.import_and_review(location, io.BytesIO(data), ids)
    open(os.path.join(location, ".cas", "ready"), "w").close()
    log(f"{n} runs imported and reviewed in {time.perf_counter() - t0:.1f} s")
    del cas
    return location


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        print(json.dumps(child(*argv[1:5])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,50000")
    ap.add_argument("--tree", action="append", default=None,
                    help="a checkout the children import cas from (repeatable; default: this)")
    ap.add_argument("--modes", default="cli,stage")
    ap.add_argument("--out", default=None, help="work directory (default: a new /tmp dir)")
    ap.add_argument("--json", default=None, help="also write the raw figures here")
    ap.add_argument("--fresh", action="store_true",
                    help="each child on its own copy of the repository as built")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds of every child, interleaved: the least time, the most RSS")
    args = ap.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    trees = [os.path.abspath(t) for t in (args.tree or [ROOT])]
    work = args.out or tempfile.mkdtemp(prefix="cas-bench-preview-")
    os.makedirs(work, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)
    results: list[dict[str, Any]] = []
    for n in sizes:
        location = build(work, n, log)
        best: dict[tuple[str, str], dict[str, Any]] = {}
        for _ in range(args.rounds):  # (rounds interleave the trees: a busy spell hits both)
            for mode in args.modes.split(","):
                for k, tree in enumerate(trees):
                    key = f"bench-{mode}-{k}-{os.urandom(4).hex()}"
                    if args.fresh:
                        copy = os.path.join(work, f"copy-{n}")
                        shutil.rmtree(copy, ignore_errors=True)
                        shutil.copytree(location, copy)
                        r = run_child(tree, mode, copy, key)
                        shutil.rmtree(copy)
                    else:
                        r = run_child(tree, mode, location, key)
                    log(f"{n} {mode} {tree}: {r['seconds']:.2f} s, {r['maxrss'] / MIB:.0f} MiB")
                    kept = best.setdefault((mode, tree), dict(r, n=n, mode=mode, tree=tree))
                    kept["seconds"] = min(kept["seconds"], r["seconds"])
                    kept["maxrss"] = max(kept["maxrss"], r["maxrss"])
        results.extend(best.values())
    lines = [f"{'N':>6} {'mode':<6} {'tree':<24} {'time':>8} {'peak RSS':>10} {'JSON':>9} "
             f"{'1st line':>9} {'lines':>6} {'x time':>7} {'x RSS':>6}"]
    for r in results:
        base = next(b for b in results if b["n"] == r["n"] and b["mode"] == r["mode"])
        lines.append(f"{r['n']:>6} {r['mode']:<6} {r['tree'][-24:]:<24} {r['seconds']:>7.2f}s "
                     f"{r['maxrss'] / MIB:>7.0f}MiB {r['bytes'] / MIB:>7.2f}MB "
                     f"{r['first_line'] / 1024:>7.0f}KB {r['lines']:>6} "
                     f"{r['seconds'] / base['seconds']:>6.2f}x "
                     f"{r['maxrss'] / base['maxrss']:>5.2f}x")
    if len(sizes) > 1:
        lines.append(f"growth {sizes[-1]}/{sizes[0]} (time; peak RSS), per tree and mode:")
        for tree in trees:
            for mode in args.modes.split(","):
                a, b = (next(r for r in results if r["n"] == n and r["tree"] == tree
                             and r["mode"] == mode) for n in (sizes[0], sizes[-1]))
                lines.append(f"  {tree[-24:]:<24} {mode:<6} {b['seconds'] / a['seconds']:.2f}x;"
                             f" {b['maxrss'] / a['maxrss']:.2f}x")
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
