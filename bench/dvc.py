"""DVC as a second baseline beside git: a 100k-case ingest and a one-case version, as whole
processes, cas against DVC (issue 16, target 6).

Run by hand (not a timed test):

    python bench/dvc.py                    # 100k cases, 3 rounds
    python bench/dvc.py --n 20000 --rounds 5
    python bench/dvc.py --venv /tmp/dvc-venv   # where DVC is installed (created if missing)

DVC is installed in the benchmark's own virtual environment (`pip install dvc`), never as a
dependency of cas. The cases are bench/engine.py's (seed 1), one JSON Lines file.

- **Ingest:** cas: `cas init`, `cas dataset create --admission direct`, `cas commit --add
  cases.jsonl` (three processes). DVC: `git init`, `dvc init`, then `dvc add cases.jsonl`,
  `git add` of the `.dvc` file and `.gitignore`, `git commit` (the way DVC versions a file).
- **One-case version:** cas: `cas commit --base N --add one.jsonl` (one process). DVC: append
  the case to the file, `dvc add`, `git commit -a`: DVC hashes and stores the whole file again.

Each measure is the median of the rounds, each round on fresh copies; the ratio is DVC's time
over cas's (above 1: cas is faster).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from engine import generate  # noqa: E402

GIT_ENV = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
               GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.com",
               CAS_USER="Bench <bench@example.com>", DVC_NO_ANALYTICS="1")


def dvc_venv(path: str) -> str:
    """The `dvc` executable of a virtual environment of its own, created if missing."""
    exe = os.path.join(path, "bin", "dvc")
    if not os.path.exists(exe):
        subprocess.run([sys.executable, "-m", "venv", path], check=True)
        subprocess.run([os.path.join(path, "bin", "pip"), "install", "-q", "dvc"], check=True)
    return exe


def run(argv: list[str], cwd: str) -> None:
    p = subprocess.run(argv, cwd=cwd, env=GIT_ENV, capture_output=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {p.stderr.decode()[-2000:]}")


def timed(steps: list[list[str]], cwd: str) -> float:
    t0 = time.perf_counter()
    for argv in steps:
        run(argv, cwd)
    return time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--venv", default=os.path.join(tempfile.gettempdir(), "cas-bench-dvc-venv"))
    p.add_argument("--out", default=None, help="work directory (default: a new one in /tmp)")
    args = p.parse_args()
    cas = os.path.join(os.path.dirname(sys.executable), "cas")
    dvc = dvc_venv(args.venv)
    out = args.out or tempfile.mkdtemp(prefix="cas-bench-dvc-")
    os.makedirs(out, exist_ok=True)
    jsonl = generate([args.n], out, 1)[args.n]
    one = os.path.join(out, "one.jsonl")
    with open(one, "w") as f:
        f.write('{"input": "one more case", "output": "x", "tenant": "bench"}\n')
    version = subprocess.run([dvc, "--version"], capture_output=True, text=True).stdout.strip()
    times: dict[str, list[float]] = {k: [] for k in ("cas ingest", "dvc ingest", "cas one",
                                                     "dvc one")}
    for r in range(args.rounds):
        work = os.path.join(out, f"r{r}")
        shutil.rmtree(work, ignore_errors=True)
        c, d = os.path.join(work, "cas"), os.path.join(work, "dvc")
        os.makedirs(c)
        os.makedirs(d)
        shutil.copy(jsonl, os.path.join(d, "cases.jsonl"))
        times["cas ingest"].append(timed([
            [cas, "init"], [cas, "dataset", "create", "bench", "--admission", "direct"],
            [cas, "commit", "bench", "--add", jsonl, "-m", "ingest"]], c))
        times["dvc ingest"].append(timed([
            ["git", "init", "-q"], [dvc, "init", "-q"], [dvc, "add", "-q", "cases.jsonl"],
            ["git", "add", "cases.jsonl.dvc", ".gitignore", ".dvc"],
            ["git", "commit", "-q", "-m", "ingest"]], d))
        times["cas one"].append(timed([
            [cas, "commit", "bench", "--base", "1", "--add", one, "-m", "one more"]], c))
        with open(os.path.join(d, "cases.jsonl"), "ab") as f, open(one, "rb") as src:
            f.write(src.read())
        times["dvc one"].append(timed([
            [dvc, "add", "-q", "cases.jsonl"], ["git", "commit", "-q", "-a", "-m", "one more"]],
            d))
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.n} cases ({os.path.getsize(jsonl) / 2**20:.0f} MiB of JSON Lines), "
          f"{args.rounds} rounds (medians), whole processes; {version and 'DVC ' + version}")
    print("| measure | cas | DVC + git | DVC / cas |")
    print("|---|---|---|---|")
    for what, a, b in (("ingest", "cas ingest", "dvc ingest"), ("one-case version", "cas one",
                                                                  "dvc one")):
        print(f"| {what} | {med[a]:.2f} s | {med[b]:.2f} s | {med[b] / med[a]:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
