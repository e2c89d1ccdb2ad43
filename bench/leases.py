"""Lease overhead: what the gc/erasure protocol (cas/storage/leases.py) costs a writer.

Run by hand (not a timed test):

    python bench/leases.py              # 200 one-case commits and 50 one-run imports, local
    python bench/leases.py --n 1000

Baseline, measured in the same run and interleaved with it: the same writes with the protocol
switched off (`leases.writing` replaced by a lease that is never stored or read), which is what
cas did before. For each kind of write it prints the median time per write and the storage
calls per write (every backend call counted: on S3 each is a request), and their ratios to the
baseline. The protocol adds a lease write, one listing of `leases/` and a delete to every write,
so the ratio shrinks as the write itself grows.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cas  # noqa: E402
from cas.storage import leases  # noqa: E402
from cas.storage.backends.local import LocalBackend  # noqa: E402


class Counting:
    """Counts every storage call the wrapped backend serves."""

    CALLS = ("get", "get_range", "put_if_absent", "replace", "delete", "list", "exists",
             "modified")

    def __init__(self, inner):
        self.inner, self.url, self.calls = inner, inner.url, Counter()

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name not in self.CALLS:
            return attr

        def call(*args, **kwargs):
            self.calls[name] += 1
            return attr(*args, **kwargs)
        return call


class NoLease:
    """What a writer held before leases: nothing. It keeps the repository's context and a key
    that is never stored for the writers' own upkeep (maintenance.merge_packs), which both
    sides then do alike."""
    avoid_packs = frozenset()
    doomed_proposals = frozenset()
    key = None

    def __init__(self, ctx):
        self.ctx = ctx

    def check(self, *_):
        pass

    def renew(self):
        pass

    def release(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


@contextlib.contextmanager
def protocol(on: bool):
    original = leases.writing
    if not on:
        leases.writing = lambda ctx, operation: NoLease(ctx)
    try:
        yield
    finally:
        leases.writing = original


def run(kind: str, on: bool, n: int, root: Path) -> tuple[float, float]:
    """(median seconds per write, storage calls per write) of n writes of `kind`."""
    path = root / f"{kind}-{'on' if on else 'off'}-{time.monotonic_ns()}"
    cas.init(str(path))
    backend = Counting(LocalBackend(str(path / ".cas")))
    repo = cas.Repository(backend)
    repo.create_dataset("ds", author="bench", admission="direct")
    times = []
    with protocol(on):
        backend.calls.clear()
        for i in range(n):
            start = time.perf_counter()
            if kind == "commit":
                repo.commit("ds", base=i, add=[{"input": f"case {i}"}], author="bench")
            else:
                repo.import_runs([{"run_id": f"r{i}", "tenant": "t", "steps": []}],
                                 author="bench")
            times.append(time.perf_counter() - start)
    return statistics.median(times), sum(backend.calls.values()) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cas-bench-leases-") as tmp:
        root = Path(tmp)
        print(f"{'write':<8} {'n':>5} {'ms/write':>9} {'baseline':>9} {'ratio':>6} "
              f"{'calls':>6} {'baseline':>9} {'ratio':>6}")
        for kind, n in (("commit", args.n), ("import", max(1, args.n // 4))):
            on, off = [], []
            for _ in range(3):  # interleaved, so drift hits both alike
                off.append(run(kind, False, n, root))
                on.append(run(kind, True, n, root))
            t_on = statistics.median(t for t, _ in on)
            t_off = statistics.median(t for t, _ in off)
            c_on, c_off = on[0][1], off[0][1]
            print(f"{kind:<8} {n:>5} {t_on * 1e3:>9.2f} {t_off * 1e3:>9.2f} "
                  f"{t_on / t_off:>6.2f} {c_on:>6.1f} {c_off:>9.1f} {c_on / c_off:>6.2f}")


if __name__ == "__main__":
    main()
