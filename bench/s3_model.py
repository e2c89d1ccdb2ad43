"""A model of cold S3 reads at ten million cases, from measurements at smaller sizes.

    python bench/s3.py --n 100000 --seals 3 --small 1000 --json /tmp/s3-100k.json
    python bench/s3.py --n 1000000 --seals 3 --small 1000 --json /tmp/s3-1m.json
    python bench/s3_model.py /tmp/s3-100k.json /tmp/s3-1m.json [--predict 10000000]

Each cold read of `bench/s3.py` (a detailed page of the first 100 cases, one case, the head, a
diff of two versions 3 one-case seals apart, a diff of a K-case seal) costs requests in four
parts:

- a fixed part: the version's state, the listing of packs, the small indexes of the seals
  (one 32 KiB read each holds one whole), the pack reads of a seal's own small pack, the
  cases' bytes of a page: the same at every size. Fitted: measured minus the three parts
  below, at the largest size whose multi-pack index is fetched whole (100k);
- the lookup rounds down the tree, from the tree's rule and the read-ahead rule of
  cas/storage/store.py, not fitted: the root is read alone (no parent gives its count), then
  every level whose nodes hold more than READ_AHEAD / AHEAD_PER_ID ids (64k) alone, then the
  first node that holds fewer, with its subtree's inner nodes (one read); then the leaves (a
  page's in one read) and the cases (a page's: one read in the packs of each of the WRITERS
  processes of the ingest, whose packs each hold one range of digests);
- a diff reads, level by level, the old version's nodes on the K changed paths at each level
  read alone or with read-ahead, and their leaves: 16^d (1 - (1 - 16^-d)^K) distinct nodes at
  depth d, a lookup each (scattered digests), a pack read per run of them within READ_GAP of
  each other (siblings lie their subtree's inner nodes apart), plus the node below one that
  one of `--seals` earlier seals rewrote (read from the seal's small pack, it brings no
  subtree); the new version's nodes are in the seal's small pack (the fixed part);
- the index: a multi-pack index up to WHOLE_BELOW (8 MiB) is opened with a 32 KiB read and
  fetched whole (2 requests); a larger one is opened (1) and costs 2 requests a lookup (its
  window of digests and their rows), the window WINDOW_SPREAD x sqrt(entries / 256) entries.
  Its size is taken as linear in N from the largest measured size.

Bytes the same way: the fixed bytes fitted at 100k; the index whole, or its opening read and
windows; a node read with read-ahead asks min(READ_AHEAD, 4 x ids x AHEAD_PER_ID) bytes (a
diff's receive them), but the bench's page and case are of the first ids, whose subtree ends
the tree's pack: they receive the subtree only (SUBTREE_PER_ID bytes an id).
Sizes below the fitted one are not modelled (the tree's lowest levels mix leaves and nodes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from math import isqrt

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cas.storage import pack as _pack
from cas.storage import store as _store
from cas.storage import tree as _tree
from cas.storage.backends import cache as _cache

FANOUT, LEAF_MAX = 16, _tree.LEAF_MAX  # a nibble a level
READ_AHEAD, AHEAD_PER_ID = _store.READ_AHEAD, _store.AHEAD_PER_ID
LEAF_PER_ID, LEAF_HEAD, READ_GAP = _store.LEAF_PER_ID, _store.LEAF_HEAD, _store.READ_GAP
WHOLE_BELOW, FETCH_FRACTION = _cache.WHOLE_BELOW, _cache.FETCH_FRACTION
OPEN, WINDOW_SPREAD, SCAN_BELOW = _pack.OPEN_REMOTE, _pack.WINDOW_SPREAD, _pack.SCAN_BELOW
ENTRY = _pack.DIGEST_LEN + _pack.MULTI_ROW.size  # a digest and its row
INNER_NODE = 1713      # bytes of an inner node of 16 children (a root, traced)
SUBTREE_PER_ID = 7.4   # bytes of inner nodes below a node, per id (store.py: measured at 1M)
WRITERS = 2            # processes of one large ingest (cas/repo/ingest.py)
TARGETS = {"items page": 10, "diff 10 cases": 15}  # issue 37, requests at 1M
MIB = 1 << 20


def ids_at(n: int, d: int) -> float:
    return n / FANOUT ** d


def leaf_depth(n: int) -> int:
    d = 0
    while ids_at(n, d) > LEAF_MAX:
        d += 1
    return d


def fit_depth(n: int) -> int:
    """The first depth below the root whose nodes' subtrees are read with them."""
    d = 1
    while ids_at(n, d) * AHEAD_PER_ID > READ_AHEAD:
        d += 1
    return d


def ahead(n: int, d: int) -> float:
    """Bytes read after a node at depth d (its subtree's inner nodes), else 0."""
    if d != fit_depth(n) or d >= leaf_depth(n):
        return 0.0
    return min(READ_AHEAD, 4 * ids_at(n, d) * AHEAD_PER_ID)


def path_levels(n: int) -> list[int]:
    """The depths of the inner nodes a walk to a leaf reads one at a time."""
    return list(range(min(fit_depth(n) + 1, leaf_depth(n))))


def touched(d: int, k: int) -> float:
    """Distinct nodes at depth d on k random paths."""
    return FANOUT ** d * (1 - (1 - FANOUT ** -d) ** k)


def runs(d: int, k: int, spacing: float, reach: float) -> float:
    """Pack reads for the touched nodes of a level: a touched node starts a new read unless
    one of the `reach / spacing` siblings before it was touched too (within READ_GAP)."""
    t = touched(d, k)
    q = t / FANOUT ** d
    return t * (1 - q) ** int(reach // spacing)


def window_bytes(index_bytes: float) -> float:
    entries = index_bytes / ENTRY
    return max(SCAN_BELOW, WINDOW_SPREAD * isqrt(int(entries / 256))) * ENTRY


def parts(command: str, n: int, seals: int = 3) -> tuple[float, float, float]:
    """(lookups, pack reads, pack bytes) that grow with n; the rest is the fixed part.
    `seals`: the one-case seals between the ingest and a K-case diff's old version."""
    levels = path_levels(n)
    # The bench's page and case are of the first ids, whose subtree is the last in the tree's
    # pack: a read-ahead receives that subtree only (7.4 bytes an id), not all it asks for.
    walk = len(levels) * INNER_NODE + sum(min(ahead(n, d), SUBTREE_PER_ID * ids_at(n, d))
                                          for d in levels)
    if command == "items page":
        return len(levels) + 2, len(levels) + 1 + WRITERS, walk
    if command == "case":
        return len(levels) + 2, len(levels) + 2, walk
    if command.startswith("diff"):
        k = int(command.split()[1]) if command != "diff" else 2  # 3 seals apart: 2 cases
        lookups, reads, size = 2.0, 0.0, 0.0  # both roots are sought in the large index first
        for d in levels[1:]:
            spacing = SUBTREE_PER_ID * ids_at(n, d) + INNER_NODE
            a = ahead(n, d)
            t = touched(d, k)
            r = runs(d, k, spacing, a + INNER_NODE + READ_GAP)
            lookups, reads = lookups + t, reads + r
            size += r * (a + INNER_NODE) + (t - r) * spacing
        lam = leaf_depth(n)
        d = fit_depth(n)
        if d + 1 < lam:
            # An old node read with read-ahead that a seal rewrote lies in the seal's small
            # pack, without its subtree: the node below it on the path is read too (with its
            # own subtree, fewer ids).
            extra = k * (1 - (1 - FANOUT ** -d) ** (1 if command == "diff" else seals))
            below = min(READ_AHEAD, 4 * ids_at(n, d + 1) * AHEAD_PER_ID)
            lookups, reads, size = lookups + extra, reads + extra, size + extra * below
        leaf = LEAF_PER_ID * ids_at(n, lam) + LEAF_HEAD
        t = touched(lam, k)
        r = runs(lam, k, leaf, READ_GAP + leaf)
        return lookups + t, reads + r, size + t * leaf
    return 0.0, 0.0, 0.0  # head: the dataset's state only


def index_cost(lookups: float, index_bytes: float) -> tuple[float, float]:
    """(requests, bytes) of the multi-pack index for a command making `lookups` lookups."""
    if lookups == 0:
        return 0.0, 0.0
    if index_bytes <= WHOLE_BELOW:
        return 2.0, OPEN + index_bytes
    return 1 + 2 * lookups, OPEN + lookups * window_bytes(index_bytes)


def model(command: str, n: int, index_bytes: float, seals: int) -> tuple[float, float]:
    lookups, reads, size = parts(command, n, seals)
    requests, read = index_cost(lookups, index_bytes)
    return requests + reads, read + size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("measured", nargs="+", help="JSON files written by bench/s3.py --json")
    ap.add_argument("--predict", type=int, action="append", default=None)
    ap.add_argument("--seals", type=int, default=3, help="bench/s3.py's --seals")
    args = ap.parse_args()
    sizes: dict[int, dict] = {}
    for path in args.measured:
        with open(path) as f:
            sizes.update({int(n): v for n, v in json.load(f)["sizes"].items()})
    whole = [n for n, v in sizes.items() if v["index_bytes"] <= WHOLE_BELOW and n >= 10_000]
    if not whole:
        raise SystemExit("need a size of 10k cases or more whose index is fetched whole "
                         "(<= 8 MiB) to fit the fixed parts")
    fit = max(whole)
    largest = max(sizes)
    per_case = sizes[largest]["index_bytes"] / largest
    targets = sorted(set(args.predict or [10_000_000]))
    shown = sorted(n for n in {*sizes, *targets} if n >= fit)

    def index_at(n: int) -> float:
        return sizes[n]["index_bytes"] if n in sizes else per_case * n

    print("tree: " + "; ".join(
        f"{n:,}: leaves at depth {leaf_depth(n)}, read ahead from depth {fit_depth(n)} "
        f"({ids_at(n, fit_depth(n)):,.0f} ids a node), {len(path_levels(n))} inner reads "
        f"a path" for n in shown))
    print(f"multi-pack index: {per_case:.1f} bytes a case (at {largest:,}); fixed parts "
          f"fitted at {fit:,} (index fetched whole)")
    print(f"{'command':<15}{'size':>12}{'req meas.':>10}{'model':>7}{'err':>5}"
          f"{'KiB meas.':>11}{'model':>8}{'err':>6}")
    rows: dict[tuple[str, int], tuple[float, float]] = {}
    for command in sizes[fit]["reads"]:
        measured = sizes[fit]["reads"][command]
        m_req, m_bytes = model(command, fit, index_at(fit), args.seals)
        fixed_req, fixed_bytes = measured["requests"] - m_req, measured["bytes"] - m_bytes
        for n in shown:
            req, size = model(command, n, index_at(n), args.seals)
            req, size = req + fixed_req, size + fixed_bytes
            rows[command, n] = req, size
            got = sizes.get(n, {}).get("reads", {}).get(command)
            if got is None:
                meas = f"{'-':>10}{req:>7.0f}{'':>5}{'-':>11}{size / 1024:>8,.0f}"
            else:
                kib = got["bytes"] / 1024
                err = (size / 1024 - kib) / kib * 100 if kib else 0.0
                meas = (f"{got['requests']:>10}{req:>7.0f}{req - got['requests']:>+5.0f}"
                        f"{kib:>11,.0f}{size / 1024:>8,.0f}{err:>+5.0f}%")
            note = f"  (fit: fixed part {fixed_req:.1f} requests)" if n == fit else ""
            print(f"{command:<15}{n:>12,}{meas}{note}")
    for n in targets:
        index = index_at(n)
        ranged = index > WHOLE_BELOW
        how = (f"read by ranges, {window_bytes(index) / 1024:.0f} KiB a lookup; a machine "
               f"fetches it whole after about "
               f"{index / FETCH_FRACTION / window_bytes(index):,.0f} lookups"
               if ranged else "fetched whole at a first lookup")
        print(f"at {n:,}: the multi-pack index is about {index / MIB:,.0f} MiB ({how})")
        for command, most in TARGETS.items():
            if (command, n) in rows:
                req = rows[command, n][0]
                print(f"  {command}: {req:.0f} requests (target <= {most} at 1M: "
                      f"{'PASS' if req <= most else 'MISS'})")
        over = [c for c in sizes[fit]["reads"] if (c, n) in rows and rows[c, n][1] >= MIB]
        print(f"  over the 1 MiB a cold command may read: {', '.join(over) or 'none'}")


if __name__ == "__main__":
    main()
