"""Cassette reading benchmark: the bounded YAML reader of `cas.interop.importers.vcr` against
`yaml.safe_load`, and a YAML alias bomb.

Run by hand (not a timed test):

    python bench/cassettes.py                  # every YAML cassette under ../shared/traces
    python bench/cassettes.py --traces DIR --runs 7

For each real cassette (the real files of ../shared/traces, or --traces), measured in this run
(median of --runs): `safe_load` is `yaml.safe_load(data)`, what vcr.py read with before;
`bounded` is `vcr.load(data)`, which first walks the YAML events (depth and alias-expansion
bound) and then builds the value with the C loader when PyYAML has one. The ratio printed is
bounded / safe_load (below 1: faster). Then an alias bomb of 6, 7, 8, 9 levels (each level
names the one below ten times: 10**levels leaves in a few hundred bytes) is refused: its
refusal time is printed beside the expanded size it would have had; safe_load is not run on it
beyond 6 levels (its expansion is what the bound exists to avoid).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [p for p in (ROOT,) if p not in sys.path]

import yaml  # noqa: E402

from cas.errors import InvalidArgument  # noqa: E402
from cas.interop.importers import vcr  # noqa: E402


def median_time(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def bomb(levels: int) -> bytes:
    lines = ['a0: &a0 ["lol"]']
    for n in range(1, levels):
        lines.append(f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 10) + "]")
    lines.append(f"interactions: [{{request: {{uri: x, body: *a{levels - 1}}}}}]")
    return "\n".join(lines).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=os.path.join(ROOT, "..", "shared", "traces"))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    files = sorted(os.path.join(d, f) for d, _, names in os.walk(args.traces) for f in names
                   if f.endswith((".yaml", ".yml")))
    print(f"{'cassette':60} {'bytes':>8} {'safe_load':>10} {'bounded':>10} {'ratio':>6}")
    ratios = []
    for path in files:
        data = open(path, "rb").read()
        try:
            vcr.load(data, path)
        except InvalidArgument:
            continue  # (a Python-tagged file safe_load refuses is not compared)
        try:
            base = median_time(lambda: yaml.safe_load(data), args.runs)
        except yaml.YAMLError:
            continue
        ours = median_time(lambda: vcr.load(data, path), args.runs)
        ratios.append(ours / base)
        print(f"{os.path.basename(path)[:60]:60} {len(data):>8} {base * 1000:>8.1f}ms "
              f"{ours * 1000:>8.1f}ms {ours / base:>6.2f}")
    if ratios:
        print(f"median ratio bounded / safe_load over {len(ratios)} cassettes: "
              f"{statistics.median(ratios):.2f}")
    for levels in (6, 7, 8, 9):
        data = bomb(levels)
        started = time.perf_counter()
        try:
            vcr.load(data, "bomb.yaml")
            outcome = "read (not refused!)"
        except InvalidArgument as exc:
            outcome = f"refused ({exc.reason})"
        took = time.perf_counter() - started
        line = (f"alias bomb, {levels} levels, {len(data)} bytes, {10 ** (levels - 1)} leaves "
                f"expanded: {outcome} in {took * 1000:.1f} ms")
        if levels == 6:
            base = median_time(lambda: len(str(yaml.safe_load(data))), 1)
            line += f"; safe_load + str: {base * 1000:.1f} ms"
        print(line)


if __name__ == "__main__":
    main()
