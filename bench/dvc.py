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
over cas's (above 1: cas is faster). The cas ingest is also shown process by process.

    python bench/dvc.py --baseline /work/base  # also another checkout's cas, in the same rounds

With `--baseline`, each round also times that checkout's cas (its `cas_cli` and `cas` first on
PYTHONPATH, so its own library, and the process that stores half of a large file, are used)
right after this tree's, and the table gains its column and this tree / baseline.
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


def run(argv: list[str], cwd: str, env: dict[str, str] | None = None) -> None:
    p = subprocess.run(argv, cwd=cwd, env=env or GIT_ENV, capture_output=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {p.stderr.decode()[-2000:]}")


def timed(steps: list[list[str]], cwd: str, env: dict[str, str] | None = None,
          each: list[float] | None = None) -> float:
    t0 = time.perf_counter()
    for argv in steps:
        t = time.perf_counter()
        run(argv, cwd, env)
        if each is not None:
            each.append(time.perf_counter() - t)
    return time.perf_counter() - t0


def cas_of(tree: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a checkout's own `cas` (its library first on the
    path, whatever is installed)."""
    env = dict(GIT_ENV, PYTHONPATH=os.pathsep.join(
        [tree] + [p for p in GIT_ENV.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return [sys.executable, "-c", "import sys; sys.argv[0] = 'cas'\n"
            "from cas_cli.main import main; main()"], env


def cas_ingest(cas: list[str], env: dict[str, str], jsonl: str, cwd: str,
               each: list[float]) -> float:
    return timed([cas + ["init"], cas + ["dataset", "create", "bench", "--admission", "direct"],
                  cas + ["commit", "bench", "--add", jsonl, "-m", "ingest"]], cwd, env, each)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--venv", default=os.path.join(tempfile.gettempdir(), "cas-bench-dvc-venv"))
    p.add_argument("--out", default=None, help="work directory (default: a new one in /tmp)")
    p.add_argument("--baseline", default=None,
                   help="a checkout of cas to time in the same rounds (e.g. the commit before)")
    args = p.parse_args()
    here = os.path.dirname(HERE)
    cas, env = cas_of(here)
    base = cas_of(os.path.abspath(args.baseline)) if args.baseline else None
    if args.baseline and not os.path.exists(os.path.join(args.baseline, "cas_cli", "main.py")):
        p.error(f"{args.baseline} has no cas_cli/main.py: give a checkout of cas")
    # Where PYTHONDONTWRITEBYTECODE is set (this VM sets it), a checkout never gets its
    # bytecode written and each cas process compiles it (about 0.1 s): compile it once, as
    # pip does for an installed package.
    import compileall
    for tree in (here, args.baseline) if args.baseline else (here,):
        for package in ("cas", "cas_cli"):
            compileall.compile_dir(os.path.join(tree, package), quiet=1)
    dvc = dvc_venv(args.venv)
    out = args.out or tempfile.mkdtemp(prefix="cas-bench-dvc-")
    os.makedirs(out, exist_ok=True)
    jsonl = generate([args.n], out, 1)[args.n]
    one = os.path.join(out, "one.jsonl")
    with open(one, "w") as f:
        f.write('{"input": "one more case", "output": "x", "tenant": "bench"}\n')
    version = subprocess.run([dvc, "--version"], capture_output=True, text=True).stdout.strip()
    sides = ("cas", "baseline") if base else ("cas",)
    times: dict[str, list[float]] = {f"{k} {m}": [] for k in sides + ("dvc",)
                                     for m in ("ingest", "one")}
    steps: dict[str, list[list[float]]] = {k: [] for k in sides}  # init, create, commit
    one_step = ["commit", "bench", "--base", "1", "--add", one, "-m", "one more"]
    for r in range(args.rounds):
        work = os.path.join(out, f"r{r}")
        shutil.rmtree(work, ignore_errors=True)
        d = os.path.join(work, "dvc")
        os.makedirs(d)
        shutil.copy(jsonl, os.path.join(d, "cases.jsonl"))
        for side, (argv, side_env) in zip(sides, ((cas, env), base)):
            c = os.path.join(work, side)
            os.makedirs(c)
            subprocess.run(["sync"], check=False)  # the last round's pages, not this one's
            steps[side].append([])
            times[f"{side} ingest"].append(cas_ingest(argv, side_env, jsonl, c, steps[side][-1]))
            times[f"{side} one"].append(timed([argv + one_step], c, side_env))
        subprocess.run(["sync"], check=False)
        times["dvc ingest"].append(timed([
            ["git", "init", "-q"], [dvc, "init", "-q"], [dvc, "add", "-q", "cases.jsonl"],
            ["git", "add", "cases.jsonl.dvc", ".gitignore", ".dvc"],
            ["git", "commit", "-q", "-m", "ingest"]], d))
        with open(os.path.join(d, "cases.jsonl"), "ab") as f, open(one, "rb") as src:
            f.write(src.read())
        times["dvc one"].append(timed([
            [dvc, "add", "-q", "cases.jsonl"], ["git", "commit", "-q", "-a", "-m", "one more"]],
            d))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()),
              flush=True)
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.n} cases ({os.path.getsize(jsonl) / 2**20:.0f} MiB of JSON Lines), "
          f"{args.rounds} rounds (medians), whole processes; {version and 'DVC ' + version}")
    cols = " | ".join(f"{s} ({args.baseline})" if s == "baseline" else s for s in sides)
    print(f"| measure | {cols} | DVC + git | DVC / cas |" + (" cas / baseline |" if base else ""))
    print("|---|" + "---|" * (len(sides) + 2 + bool(base)))
    for what, m in (("ingest", "ingest"), ("one-case version", "one")):
        row = " | ".join(f"{med[f'{s} {m}']:.2f} s" for s in sides)
        ratio = f" {med[f'cas {m}'] / med[f'baseline {m}']:.2f}x |" if base else ""
        print(f"| {what} | {row} | {med[f'dvc {m}']:.2f} s | "
              f"{med[f'dvc {m}'] / med[f'cas {m}']:.1f}x |{ratio}")
    for side in sides:
        init, create, commit = (statistics.median(s[i] for s in steps[side]) for i in range(3))
        print(f"{side} ingest by process (medians): init {init:.2f} s, dataset create "
              f"{create:.2f} s, commit {commit:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
