"""A model of cold S3 reads at ten million cases, from measurements at smaller sizes.

    python bench/s3.py --n 100000 --small 10000 --json /tmp/s3-100k.json
    python bench/s3.py --n 1000000 --small 1000 --json /tmp/s3-1m.json
    python bench/s3_model.py /tmp/s3-100k.json /tmp/s3-1m.json [--predict 10000000]

Each cold read (`bench/s3.py`: a detailed page of 100 cases, one case, the head, a diff of two
versions 3 seals apart) costs requests in three parts:

- a fixed part A (the config, the version's state, the listings of packs and of pending
  erasures): the same at every size;
- the objects it reads, B per level of the tree on a case's path (the tree nodes, level by
  level, then the cases): B x nodes(N), where nodes(N) is the expected number of nodes from the
  root to a case's leaf in a version of N random ids (16 children per inner node, a leaf of at
  most 64 ids; computed below, not fitted);
- the index: a multi-pack index of at most 8 MiB is fetched whole at first use (1 request); a
  larger one is opened with one range read and costs 2 requests per lookup round (a window of
  digests and its rows, in flight together: one round trip), one round before each round of
  object reads, so B x nodes(N) lookups requests' worth of rounds.

A and B are fitted per command on the two largest sizes whose index is fetched whole (two
sizes, two unknowns); the other sizes are then predicted and printed beside what was measured: the
check. Bytes: the index whole, or per lookup round a window of 8 x sqrt(N/256) digests and rows
(48 bytes an entry); a page's consecutive ids share one window. The index's size is taken as
linear in N from the largest measured size. What the model leaves out is said in
docs/performance.md (the items page's request per case is in B, as it grows with nothing
else).
"""

from __future__ import annotations

import argparse
import json
import math
from math import isqrt

LEAF_MAX, FANOUT = 64, 16          # cas/storage/tree.py
WHOLE_BELOW = 8 << 20              # cas/storage/backends/cache.py
WINDOW_SPREAD, ENTRY = 8, 32 + 16  # cas/storage/pack.py: the window; a digest and its row


def poisson_above(lam: float, k: int) -> float:
    """P(X > k) for X ~ Poisson(lam)."""
    if lam == 0:
        return 0.0
    term = math.exp(-lam)
    below = term
    for i in range(1, k + 1):
        term *= lam / i
        below += term
    return max(0.0, 1.0 - below)


def nodes(n: int) -> float:
    """Expected nodes on the path from the root to a case's leaf, N random ids: the node at
    depth d exists when the one above it holds more than LEAF_MAX ids (the case itself and
    a Poisson share of the others)."""
    total, d = 1.0, 1
    while True:
        p = poisson_above((n - 1) / FANOUT ** (d - 1), LEAF_MAX - 1)
        if p < 1e-9:
            return total
        total += p
        d += 1


def whole(index_bytes: float) -> bool:
    return index_bytes <= WHOLE_BELOW


def rounds(command: str, b: float, n: int) -> float:
    """Lookup rounds: one per level of the tree and one for the page's cases (a page reads
    a level's nodes together), else one per object read."""
    return nodes(n) + 1 if command == "items page" else b * nodes(n)


def predict(command: str, a: float, b: float, n: int, index_bytes: float) -> float:
    objects = b * nodes(n)
    return a + objects + (1 if whole(index_bytes) else 1 + 2 * rounds(command, b, n))


def predicted_bytes(command: str, b: float, n: int, index_bytes: float) -> float:
    if whole(index_bytes):
        return index_bytes
    window = max(128, WINDOW_SPREAD * isqrt(max(1, n // 256))) * ENTRY
    return rounds(command, b, n) * window


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("measured", nargs="+", help="JSON files written by bench/s3.py --json")
    ap.add_argument("--predict", type=int, action="append", default=None)
    args = ap.parse_args()
    sizes: dict[int, dict] = {}
    for path in args.measured:
        with open(path) as f:
            sizes.update({int(n): v for n, v in json.load(f)["sizes"].items()})
    fit = sorted(n for n, v in sizes.items() if whole(v["index_bytes"]))
    if len(fit) < 2:
        raise SystemExit("need two sizes whose index is fetched whole (<= 8 MiB) to fit")
    lo, hi = fit[-2], fit[-1]  # the two largest: the smallest ones hold the fewest levels
    largest = max(sizes)
    per_case = sizes[largest]["index_bytes"] / largest
    targets = sorted(set(args.predict or [10_000_000]))
    commands = list(sizes[lo]["reads"])
    print("nodes on a case's path: " + ", ".join(f"{n:,}: {nodes(n):.2f}"
                                                  for n in sorted({*sizes, *targets})))
    print(f"multi-pack index: {per_case:.0f} bytes a case (at {largest:,}); fitted on "
          f"{lo:,} and {hi:,} cases (fetched whole)")
    print(f"{'command':<12}{'size':>12}{'measured':>10}{'model':>8}{'KiB meas.':>11}"
          f"{'KiB model':>11}")
    for command in commands:
        r_lo, r_hi = (sizes[n]["reads"][command]["requests"] for n in (lo, hi))
        if command == "items page":
            # A page's reads: a level of nodes at a time, then its 100 cases, read in runs of
            # nearby objects, which its cases' spread over the packs (not the tree) sets: A
            # holds them, as measured at the largest size fetched whole.
            b = 1.0
            a = r_hi - nodes(hi) - 1
        else:
            b = (r_hi - r_lo) / (nodes(hi) - nodes(lo)) if nodes(hi) != nodes(lo) else 0.0
            a = r_lo - b * nodes(lo) - 1
        for n in sorted({*sizes, *targets}):
            index = sizes[n]["index_bytes"] if n in sizes else per_case * n
            measured = sizes[n]["reads"][command] if n in sizes else None
            reads_index = any(sizes[m]["reads"][command]["bytes"] for m in fit)
            model = predict(command, a, b, n, index) if reads_index else r_lo
            kib = predicted_bytes(command, b, n, index) / 1024 if reads_index else 0
            meas_requests = str(measured["requests"]) if measured else "-"
            meas_kib = f"{measured['bytes'] / 1024:.0f}" if measured else "-"
            print(f"{command:<12}{n:>12,}{meas_requests:>10}{model:>8.0f}{meas_kib:>11}"
                  f"{kib:>11.0f}")
    for n in targets:
        print(f"at {n:,}: the multi-pack index is about {per_case * n / 2**20:,.0f} MiB; a "
              "command that makes 64 range reads of it fetches it whole to the local cache")


if __name__ == "__main__":
    main()
