"""Tree shapes: a page of 100 ids at a random cursor and a 10-case diff, at 10k and 1M ids,
for the hex trie (shape 1, the baseline, measured in the same run) and the chunked tree
(shape 2, with its cut parameters), each read from a fresh store over a local directory.

    python bench/tree_shapes.py [--sizes 10000,1000000] [--rounds 60] [--configs 5/5,5/4]

Only trees are stored (no cases): what is timed is the tree's own cost, the pages and diffs of
`Trie` through the object store (index lookups, pack reads, verification, decoding). Rounds
are interleaved over every size and shape, so the machine's drift hits all alike; medians.
Also printed: the nodes a page and a diff read, and the bytes a one-id change writes.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from cas.format.records import encode_object  # noqa: E402
from cas.storage import chunk_tree  # noqa: E402
from cas.storage.backends.local import LocalBackend  # noqa: E402
from cas.storage.store import ObjectStore  # noqa: E402
from cas.storage.tree import Trie  # noqa: E402


def ids_of(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return sorted({"b3:%064x" % rng.getrandbits(256) for _ in range(n)})


def configure(config: tuple) -> None:
    if config[0] == 2:
        _, chunk_tree.CHUNK_BITS, chunk_tree.BRANCH_BITS, chunk_tree.MAX_FILL = config


def build(path: str, config, ids: list[str], rng: random.Random) -> dict:
    """Version A over `ids`, version B ten changes away (5 removed, 5 added), and the bytes
    one inserted id writes onto A."""
    configure(config)
    store = ObjectStore(LocalBackend(path))
    with store.writer() as w:
        root_a = Trie(lambda d: store.get(d), w.add, shape=config[0]).build(ids)
    gone = sorted(rng.sample(ids, 5))
    new = sorted("b3:%064x" % rng.getrandbits(256) for _ in range(5))
    with store.writer() as w:
        root_b = Trie(lambda d: store.get(d), w.add).apply(root_a, new, gone)
    written = []
    Trie(lambda d: store.get(d), lambda node: written.append(len(encode_object(node)[1]))).apply(
        root_a, ["b3:%064x" % rng.getrandbits(256)], [])
    return {"path": path, "a": root_a, "b": root_b, "added": new, "removed": gone,
            "one_change_bytes": sum(written), "one_change_nodes": len(written)}


def fresh(path: str) -> tuple[Trie, list[int]]:
    store = ObjectStore(LocalBackend(path))
    loads = [0]

    def load(digest):
        loads[0] += 1
        return store.get(digest)
    return Trie(load, None, store.prefetch), loads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,1000000")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--configs", default="5/5",
                    help="shape-2 parameters CHUNK_BITS/BRANCH_BITS[/MAX_FILL], comma-separated")
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    configs = [(1, 0, 0, 0)] + [(2, *map(int, (c + "/64").split("/")[:3]))
                                for c in args.configs.split(",")]
    work = args.work or tempfile.mkdtemp(prefix="cas-tree-shapes-")
    rng = random.Random(1)
    built = {}
    for n in sizes:
        ids = ids_of(n, n)
        for config in configs:
            path = os.path.join(work, f"{n}-" + "-".join(map(str, config)))
            shutil.rmtree(path, ignore_errors=True)
            t0 = time.perf_counter()
            built[(n, config)] = build(path, config, ids, rng)
            print(f"built {n} {config} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    times = {k: ([], []) for k in built}
    nodes = {k: ([], []) for k in built}
    for _ in range(args.rounds):
        cursor = "b3:%064x" % rng.getrandbits(256)
        for key, b in built.items():
            trie, loads = fresh(b["path"])
            t0 = time.perf_counter()
            page = trie.page(b["a"], cursor, 100)
            times[key][0].append(time.perf_counter() - t0)
            nodes[key][0].append(loads[0])
            assert len(page) == 100 or key[0] < 200, len(page)
            trie, loads = fresh(b["path"])
            t0 = time.perf_counter()
            added, removed = trie.diff(b["a"], b["b"])
            times[key][1].append(time.perf_counter() - t0)
            nodes[key][1].append(loads[0])
            assert (added, removed) == (b["added"], b["removed"])
    print("| shape (chunk/branch bits) | N | page of 100 | nodes | 10-case diff | nodes | "
          "one-id change writes |")
    print("|---|---|---|---|---|---|---|")
    med = {}
    for (n, config), b in built.items():
        page_t, diff_t = (statistics.median(t) for t in times[(n, config)])
        med[(n, config)] = page_t, diff_t
        name = "1 (hex trie)" if config[0] == 1 else f"2 ({config[1]}/{config[2]}/{config[3]})"
        print(f"| {name} | {n:,} | {page_t * 1e6:.0f} us | "
              f"{statistics.median(nodes[(n, config)][0]):.0f} | {diff_t * 1e3:.2f} ms | "
              f"{statistics.median(nodes[(n, config)][1]):.0f} | "
              f"{b['one_change_bytes'] / 1024:.1f} KiB in {b['one_change_nodes']} nodes |")
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        print(f"\ngrowth {hi:,} / {lo:,} (target <= 1.3x):")
        for config in configs:
            (p0, d0), (p1, d1) = med[(lo, config)], med[(hi, config)]
            base = med[(hi, configs[0])]
            print(f"  {config}: page {p1 / p0:.2f}x, diff {d1 / d0:.2f}x; at {hi:,} against the "
                  f"hex trie: page {p1 / base[0]:.2f}x, diff {d1 / base[1]:.2f}x")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
