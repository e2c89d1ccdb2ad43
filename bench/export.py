"""Export benchmark: a pinned version to JSON Lines and to Parquet, speed and peak memory.

Run by hand (not a timed test):

    python bench/export.py                  # 10k and 100k cases (about 3 minutes on 2 cores)
    python bench/export.py --sizes 10000,50000 --out DIR
    python bench/export.py --sizes 10000,100000,1000000 --runs 1 --modes read,jsonl,parquet
    python bench/export.py --sizes 10000,100000 --runs 1 --modes read,parquet,hf

Cases are `bench/engine.py`'s (seeded, about 1.6 KB each); each size is committed as one
version of its own dataset in a fresh local repository. Every figure is measured in this run,
each in a fresh child process (median of --runs): the exports (`cas.interop.exports.export_jsonl`,
`export_parquet` to a file), against two baselines over the same version — `read`: the same
pages of ids and `repo.object_bytes` per case, one object at a time, nothing written (what an
export did before pages were read together with `repo.objects_bytes`), and
`naive`: `repo.case` per id, `json.dumps` of its builtins to a file (the loop a user would write).
Memory: peak RSS of the child (VmHWM) and the peak of Python allocations (tracemalloc, a second
child, as tracing slows the run); flat memory means the same peak at 10k and at 100k. The last
column splits the RSS at the end into the process's own memory (RssAnon) and mapped files
(RssFile: the shared libraries; before issue 37's second pass also the repository's mapped
indexes, which grew with the repository, not with the export).
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
import time
import tracemalloc
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [p for p in (ROOT, os.path.join(ROOT, "bench")) if p not in sys.path]

import engine  # noqa: E402  (the case generator and peak_rss)

MODES = ("read", "naive", "jsonl", "parquet", "hf")
DEFAULT_MODES = "read,naive,jsonl,parquet"
TARGET_RSS = 128 * (1 << 20)  # issue 37: a parquet export's peak RSS at 100k and at 1M
TARGET_RATE = 30_000  # cases/s
MIB = 1 << 20


# -- child processes ---------------------------------------------------------------------------
def _read(repo, name: str, _out: str) -> int:
    n, cursor = 0, None
    while True:
        page = repo.items(name, 1, after=cursor, limit=500)
        for case_id in page.items:
            repo.object_bytes(case_id)
        n += len(page.items)
        if (cursor := page.next_cursor) is None:
            return n


def _naive(repo, name: str, out: str) -> int:
    import msgspec
    n, cursor = 0, None
    with open(out, "w") as f:
        while True:
            page = repo.items(name, 1, after=cursor, limit=500)
            for case_id in page.items:
                case = msgspec.to_builtins(repo.case(name, 1, case_id))
                f.write(json.dumps({"case_id": case_id, "case": case}) + "\n")
            n += len(page.items)
            if (cursor := page.next_cursor) is None:
                return n


def child(mode: str, location: str, name: str, out: str, trace: bool) -> dict[str, Any]:
    import cas
    from cas.interop import exports
    repo = cas.open(location)
    run = {"read": _read, "naive": _naive,
           "jsonl": lambda r, n, o: exports.export_jsonl(r, (n, 1), o).cases,
           "parquet": lambda r, n, o: exports.export_parquet(r, (n, 1), o).cases,
           "hf": lambda r, n, o: exports.export_hf(r, (n, 1), o).cases}[mode]
    if mode == "parquet":
        import pyarrow.parquet  # noqa: F401  (imported before the clock, as for every mode)
    if mode == "hf":
        import datasets  # noqa: F401
        shutil.rmtree(out, ignore_errors=True)
    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    n = run(repo, name, out)
    seconds = time.perf_counter() - t0
    traced = tracemalloc.get_traced_memory()[1] if trace else None
    status = {}
    with open("/proc/self/status") as f:  # at the end: mapped file pages (libraries; a
        for line in f:                     # base tree's indexes) against the process's own
            if line.startswith(("RssAnon:", "RssFile:")):
                status[line.split(":")[0]] = int(line.split()[1]) * 1024
    return {"cases": n, "seconds": seconds, "maxrss": engine.peak_rss(), "traced": traced,
            "anon": status.get("RssAnon", 0), "file": status.get("RssFile", 0),
            "bytes": engine.dir_bytes(out)[0] if os.path.isdir(out) else
            os.path.getsize(out) if os.path.exists(out) else 0}


def run_child(*args: str) -> dict[str, Any]:
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", *args],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


# -- the run ---------------------------------------------------------------------------------
def build(work: str, sizes: list[int], log) -> str:
    """A local repository with dataset `s<N>` (one version of N cases) for every size; the
    datasets an earlier run left in `work/repo` (`--out` again) are reused."""
    import cas
    location = os.path.join(work, "repo")
    if os.path.isdir(os.path.join(location, ".cas")):
        repo = cas.open(location)
        have = {f"s{n}" for n in sizes if _exists(repo, f"s{n}")}
    else:
        repo, have = cas.init(location), set()
    todo = [n for n in sizes if f"s{n}" not in have]
    paths = engine.generate(todo, work, 1) if todo else {}
    for n in todo:
        t0 = time.perf_counter()
        repo.create_dataset(f"s{n}", admission="direct")
        with open(paths[n], "rb") as f:
            repo.commit(f"s{n}", base=None, add=cas.read_cases_jsonl(f))
        log(f"committed {n} cases in {time.perf_counter() - t0:.1f} s")
    return location


def _exists(repo, name: str) -> bool:
    try:
        return repo.head(name) > 0
    except Exception:  # NotFound: not made yet
        return False


def measure(location: str, work: str, n: int, runs: int, log,
            modes: tuple[str, ...] = MODES) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for mode in modes:
        target = os.path.join(work, f"out-{n}.{mode}")
        timed = [run_child(mode, location, f"s{n}", target, "") for _ in range(runs)]
        traced = run_child(mode, location, f"s{n}", target, "trace")
        seconds = statistics.median(t["seconds"] for t in timed)
        out[mode] = {"cases": timed[0]["cases"], "seconds": seconds,
                     "per_s": timed[0]["cases"] / seconds,
                     "maxrss": max(t["maxrss"] for t in timed), "traced": traced["traced"],
                     "anon": timed[0]["anon"], "file": timed[0]["file"],
                     "bytes": timed[0]["bytes"]}
        log(f"{n} {mode}: {out[mode]['per_s']:,.0f} cases/s")
    return out


def report(results: dict[int, dict[str, dict]]) -> str:
    lines = [f"{'N':>7} {'mode':<8} {'cases/s':>10} {'x read':>7} {'x naive':>8} "
             f"{'peak RSS':>9} {'py peak':>9} {'output':>9} {'anon/file at end':>17}"]
    for n, res in results.items():
        for mode, r in res.items():
            read, naive = (res[m]['per_s'] if m in res else float("nan") for m in ("read", "naive"))
            lines.append(f"{n:>7} {mode:<8} {r['per_s']:>10,.0f} "
                         f"{r['per_s'] / read:>6.2f}x "
                         f"{r['per_s'] / naive:>7.2f}x "
                         f"{r['maxrss'] / MIB:>7.1f}MB {r['traced'] / MIB:>7.1f}MB "
                         f"{r['bytes'] / MIB:>7.1f}MB "
                         f"{r['anon'] / MIB:>7.1f}/{r['file'] / MIB:.1f}MB")
    small, large = min(results), max(results)
    lines.append(f"memory {large}/{small} (peak RSS; Python peak):")
    for mode in results[small]:
        a, b = results[small][mode], results[large][mode]
        lines.append(f"  {mode:<8} {b['maxrss'] / a['maxrss']:.2f}x; "
                     f"{b['traced'] / a['traced']:.2f}x")
    for n, res in results.items():
        if "parquet" in res:
            r = res["parquet"]
            ok = r["maxrss"] <= TARGET_RSS and r["per_s"] >= TARGET_RATE
            lines.append(f"parquet target at {n} (peak RSS <= 128 MiB, >= 30k cases/s): "
                         f"{r['maxrss'] / MIB:.0f} MiB, {r['per_s']:,.0f}/s: "
                         + ("met" if ok else "MISSED"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        print(json.dumps(child(*argv[1:5], trace=argv[5] == "trace")))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default=DEFAULT_MODES,
                    help=f"of {','.join(MODES)} (hf: a Hugging Face dataset directory)")
    ap.add_argument("--out", default=None, help="work directory (default: a new /tmp dir)")
    ap.add_argument("--json", default=None, help="also write the raw figures here")
    args = ap.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    work = args.out or tempfile.mkdtemp(prefix="cas-bench-export-")
    os.makedirs(work, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)
    location = build(work, sizes, log)
    modes = tuple(m for m in args.modes.split(",") if m)
    if not set(modes) <= set(MODES):
        ap.error(f"--modes: of {', '.join(MODES)}")
    results = {n: measure(location, work, n, args.runs, log, modes) for n in sizes}
    print(report(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
