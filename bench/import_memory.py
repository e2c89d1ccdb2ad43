"""Peak memory and time of `cas runs import` against the size of the file, both formats.

    python bench/import_memory.py [--sizes 50,200,1000] [--formats native,openai-chat]
                                  [--rounds N] [--work DIR] [--tree PATH] [--keep]

Generates JSON Lines files of about the sizes given (MB) from the tau-bench trajectories in
../shared/traces/openai-chat/: for `openai-chat`, one trajectory a line as tau-bench writes them
(each line's `trial` differs, so every line is a run of its own); for `native`, the same runs
converted to cas's own schema (docs/runs.md), one a line. Each import runs in a child process
(`cas_cli.main`, of `--tree`'s cas: default this checkout) into a fresh repository;
its peak RSS is the child's own (`os.wait4`'s ru_maxrss), its time the wall clock inside it
(from before the command to its end). With --rounds N each import runs N times, the formats in
turn; the median time and the highest peak are kept.

Baselines, in the same run: each file's peak RSS against the smallest size's of the same format
(flat memory is 1.0x), and each converted import's time against the native import of the same
size (the issue's target: within 1.5x). Generated files stay in DIR only with --keep.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACES = os.path.join(ROOT, "..", "shared", "traces", "openai-chat",
                      "tau-bench__gpt-4o-airline.first50.json")
TARGET_MIB = 256


def entries() -> list[dict]:
    with open(TRACES, "rb") as f:
        return json.load(f)


def generate(path: str, fmt: str, megabytes: int, tree: str) -> int:
    """Write about `megabytes` MB of `fmt` JSON Lines to `path`; the number of runs."""
    want = megabytes * 1_000_000
    base = entries()
    native = None
    if fmt == "native":
        sys.path.insert(0, tree)
        from cas.interop.importers import convert
        data = "\n".join(json.dumps(e) for e in base).encode()
        native = convert(data, "openai-chat", tenant="bench")
        sys.path.pop(0)
    written = n = 0
    with open(path, "wb") as out:
        while written < want:
            k = n % len(base)
            if native is not None:
                run = copy.copy(native[k])
                run["run_id"] = f"bench-{n}"
                line = json.dumps(run, ensure_ascii=False).encode() + b"\n"
            else:
                entry = dict(base[k])
                entry["trial"] = n  # tau-bench's run id: task, trial, digest of the trajectory
                line = json.dumps(entry).encode() + b"\n"
            out.write(line)
            written += len(line)
            n += 1
    return n


CHILD = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from cas_cli.main import main
sys.argv = ["cas", *sys.argv[2:]]
t = time.perf_counter()
try:
    main()
finally:
    if os.environ.get("CAS_BENCH_TIME"):
        with open(os.environ["CAS_BENCH_TIME"], "w") as f:
            f.write(str(time.perf_counter() - t))
"""


def measure(tree: str, repo: str, path: str, fmt: str) -> tuple[float, float]:
    """(peak RSS in MiB, seconds) of one `cas runs import` in a child process."""
    shutil.rmtree(repo, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": tree}
    subprocess.run([sys.executable, "-c", CHILD, tree, "init", repo], check=True, env=env,
                   cwd=tempfile.gettempdir(), capture_output=True)
    args = ["--repo", repo, "--json", "runs", "import", path]
    if fmt != "native":
        args += ["--format", fmt, "--tenant", "bench"]
    stamp = os.path.join(os.path.dirname(repo), "seconds")
    env["CAS_BENCH_TIME"] = stamp
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, tree, *args], env=env,
                                cwd=tempfile.gettempdir(), stdout=subprocess.PIPE, stderr=err)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"import of {path} failed ({proc.returncode}): "
                             f"{err.read().decode()[-2000:]}")
    imported = len(json.loads(out)["imported"])
    with open(stamp) as f:
        seconds = float(f.read())
    shutil.rmtree(repo, ignore_errors=True)
    print(f"  {fmt:12} {os.path.getsize(path) / 1e6:7.0f} MB  {imported:7} runs  "
          f"peak {usage.ru_maxrss / 1024:6.0f} MiB  {seconds:6.2f} s", flush=True)
    return usage.ru_maxrss / 1024, seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="50,200", help="file sizes in MB, comma separated")
    p.add_argument("--formats", default="native,openai-chat")
    p.add_argument("--work", help="where files and repositories go (default: a new /tmp dir)")
    p.add_argument("--tree", default=ROOT, help="the checkout of cas to run (default: this one)")
    p.add_argument("--keep", action="store_true", help="keep the generated files")
    p.add_argument("--rounds", type=int, default=1)
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    formats = args.formats.split(",")
    tree = os.path.abspath(args.tree)
    work = args.work or tempfile.mkdtemp(prefix="cas-import-memory-")
    os.makedirs(work, exist_ok=True)
    results: dict[tuple[str, int], tuple[float, float]] = {}
    try:
        for size in sizes:
            for fmt in formats:
                path = os.path.join(work, f"{fmt}-{size}MB.jsonl")
                if not os.path.exists(path):
                    t = time.perf_counter()
                    n = generate(path, fmt, size, tree)
                    print(f"generated {path}: {n} runs in {time.perf_counter() - t:.1f} s",
                          flush=True)
            rounds: dict[str, list[tuple[float, float]]] = {fmt: [] for fmt in formats}
            for _ in range(args.rounds):
                for fmt in formats:
                    path = os.path.join(work, f"{fmt}-{size}MB.jsonl")
                    rounds[fmt].append(measure(tree, os.path.join(work, "repo"), path, fmt))
            for fmt in formats:
                results[fmt, size] = (max(r for r, _ in rounds[fmt]),
                                      statistics.median(t for _, t in rounds[fmt]))
    finally:
        if not args.keep:
            for size in sizes:
                for fmt in formats:
                    path = os.path.join(work, f"{fmt}-{size}MB.jsonl")
                    if os.path.exists(path):
                        os.remove(path)
    print(f"\npeak RSS against {sizes[0]} MB of the same format (flat: 1.0x; target: at most "
          f"{TARGET_MIB} MiB at every size):")
    for fmt in formats:
        small = results[fmt, sizes[0]][0]
        for size in sizes:
            rss = results[fmt, size][0]
            verdict = "PASS" if rss <= TARGET_MIB else "MISS"
            print(f"  {fmt:12} {size:5} MB: {rss:6.0f} MiB  {rss / small:5.2f}x  {verdict}")
    if "native" in formats:
        print("\ntime against the native import of the same size (target: within 1.5x):")
        for fmt in formats:
            if fmt == "native":
                continue
            for size in sizes:
                ratio = results[fmt, size][1] / results["native", size][1]
                print(f"  {fmt:12} {size:5} MB: {results[fmt, size][1]:6.2f} s / "
                      f"{results['native', size][1]:6.2f} s = {ratio:4.2f}x  "
                      f"{'PASS' if ratio <= 1.5 else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
