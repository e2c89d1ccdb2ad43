"""S3 benchmark: ingest and one-case seals, local directory vs SeaweedFS, in one run.

    python bench/s3.py [--n 100000] [--seals 10] [--diff-cases 10] [--out DIR] [--json PATH]

Starts a private SeaweedFS (`weed` from tests/requirements-seaweedfs.txt) on 127.0.0.1 unless
AWS_ENDPOINT_URL is set (then `--bucket` names an existing bucket). Prints times, request counts
and bytes, with the targets: S3 ingest within 3x of local; one-case seals at a constant request
count whatever the dataset size; and the requests of each read command (a detailed page, a
case, the head, a diff of two versions 3 one-case seals apart, a diff of a `--diff-cases`-case
change sealed at once) from a fresh open with an empty local cache, at both sizes, each also by
key family ("GET packs/*.midx": where its requests go).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "bench")]

from engine import extra_case, generate  # noqa: E402

import cas  # noqa: E402

# The issue's request targets for cold reads at 1M cases (issue 37: "An S3 page costs a request
# per case").
REQUEST_TARGETS = {"items page": 10, "diff 10 cases": 15}


def ingest(location: str, jsonl: str) -> tuple[float, "cas.Repository"]:
    repo = cas.init(location)
    repo.create_dataset("bench", admission="direct")
    t = time.perf_counter()
    with open(jsonl, "rb") as f:
        repo.commit("bench", base=None, add=cas.read_cases_jsonl(f))
    return time.perf_counter() - t, repo


def requests(repo) -> Counter:
    return getattr(repo.backend, "requests", Counter())


def received(repo) -> int:
    """Body bytes the S3 backend has read (0 in a tree from before it counted them)."""
    return getattr(repo.backend, "bytes_read", 0)


def seal_ones(location: str, base: int, seals: int, seed: int, writer_bytes: list) -> tuple[list, list]:
    """Seal `seals` one-case versions, each from a freshly opened repository (a new process's
    view: cold memory, warm local cache). Returns times and per-seal request counters."""
    times, counts = [], []
    for k in range(seals):
        repo = cas.open(location)
        before = Counter(requests(repo))
        t = time.perf_counter()
        record = repo.commit("bench", base=base, add=[extra_case(seed, k)])
        times.append(time.perf_counter() - t)
        counts.append(requests(repo) - before)
        base = record.number
    return times, counts


def families(trace: list[tuple[str, str]]) -> Counter:
    """Requests by kind and key family ("GET packs/*.pack", "HEAD datasets"): where a cold
    read's requests go."""
    out: Counter = Counter()
    for kind, key in trace:
        parts = key.split("/")
        ext = os.path.splitext(parts[-1])[1] if len(parts) > 1 else ""
        out[f"{kind} {parts[0]}{'/*' + ext if ext else ''}"] += 1
    return out


def seal_many(location: str, base: int, k: int, seed: int) -> int:
    """Seal `k` new cases onto version `base` (the head) in one commit (the issue's k-case
    diff); its number."""
    repo = cas.open(location)
    return repo.commit("bench", base=base, add=[extra_case(seed, 10_000 + i)
                                             for i in range(k)]).number


def read_requests(location: str, n_seals: int,
                  many: tuple[int, int] | None = None) -> dict[str, tuple[Counter, int, float]]:
    """Requests, bytes read and seconds of each read command from a freshly opened
    repository with an empty local cache (a new process on a new machine): a detailed page of
    100 cases (`cas items`), one case (`cas case`), the head (`repo.head`), the diff of the
    first and last one-case seals, and with `many` (k, version) the diff of that version and
    the one before it, k cases apart."""
    out = {}
    first = cas.open(location).items("bench", 1, limit=1).items[0]
    reads = {
        "items page": lambda r: r.items_detailed("bench", 1, limit=100),
        "case": lambda r: r.case("bench", 1, first),
        "head": lambda r: r.head("bench"),
        "diff": lambda r: r.diff("bench", 2, 1 + n_seals),
    }
    if many:
        reads[f"diff {many[0]} cases"] = lambda r: r.diff("bench", many[1] - 1, many[1])
    for name, read in reads.items():
        with tempfile.TemporaryDirectory(prefix="cas-bench-cold-") as cache:
            os.environ["CAS_CACHE_DIR"] = cache
            t = time.perf_counter()
            repo = cas.open(location)
            before, bytes_before = Counter(requests(repo)), received(repo)
            s3 = getattr(repo.backend, "inner", repo.backend)
            if hasattr(s3, "trace"):  # (a tree from before it could)
                s3.trace = []
            read(repo)
            out[name] = (requests(repo) - before, received(repo) - bytes_before,
                         time.perf_counter() - t)
            if getattr(s3, "trace", None) is not None:
                print(f"  ({name}: {dict(sorted(families(s3.trace).items()))})", flush=True)
                s3.trace = None
    return out


def index_bytes(local: str) -> int:
    """The bytes of the largest index (a multi-pack index, or a pack's own) of a local copy of
    the repository (the same packs): the one a first lookup opens."""
    packs = os.path.join(local, ".cas", "packs")
    return max((os.path.getsize(os.path.join(packs, f)) for f in os.listdir(packs)
                if f.endswith((".midx", ".idx"))), default=0)


def import_cas_seconds(rounds: int = 7) -> float:
    """The median time of `python -c "import cas; cas.Repository"`: the floor a cold command
    is compared to (the cold reads above run in this process, so their time plus this is a
    command's). `import cas` alone imports its names on first use: the library loaded is
    what it loaded before, and what every command loads."""
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import cas; cas.Repository"], check=True,
                       cwd=ROOT)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--small", type=int, default=1_000, help="a small dataset to compare seals")
    ap.add_argument("--seals", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--diff-cases", type=int, default=10, metavar="K",
                    help="also seal K new cases at once and time a cold diff of K cases "
                         "(0: not)")
    ap.add_argument("--bucket", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", default=None, metavar="PATH",
                    help="also write each size's read measurements here (bench/s3_model.py "
                         "reads them)")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="cas-bench-s3-")
    os.makedirs(out, exist_ok=True)  # (--out may name a directory not made yet)
    os.environ.setdefault("CAS_CACHE_DIR", os.path.join(out, "cache"))
    server = None
    if not os.environ.get("AWS_ENDPOINT_URL"):
        from support.seaweed import BUCKET, SeaweedServer
        server = SeaweedServer().start()
        os.environ.update(server.environ())
        bucket = BUCKET
    else:
        bucket = args.bucket or sys.exit("--bucket is required with AWS_ENDPOINT_URL")
    try:
        files = generate(sorted({args.small, args.n}), out, args.seed)
        rows = []
        for label, n in (("small", args.small), ("large", args.n)):
            local = os.path.join(out, f"local-{n}")
            remote = f"s3://{bucket}/bench-{uuid.uuid4().hex[:8]}-{n}"
            t_local, _ = ingest(local, files[n])
            t_s3, repo = ingest(remote, files[n])
            ingest_requests = requests(repo)
            seal_local, _ = seal_ones(local, 1, args.seals, args.seed, [])
            seal_s3, seal_counts = seal_ones(remote, 1, args.seals, args.seed, [])
            per_seal = [sum(c.values()) for c in seal_counts]
            cache = os.environ["CAS_CACHE_DIR"]
            many = ((args.diff_cases, seal_many(remote, 1 + args.seals, args.diff_cases,
                                                   args.seed))
                    if args.diff_cases else None)
            reads = read_requests(remote, args.seals, many)
            os.environ["CAS_CACHE_DIR"] = cache
            rows.append((label, n, t_local, t_s3, ingest_requests, seal_local, seal_s3,
                         per_seal, seal_counts[-1], reads))
        print(f"cas S3 benchmark: {args.n} cases, {args.seals} one-case seals per size; "
              f"work dir {out}")
        print(f"{'':28}{'local':>12}{'SeaweedFS':>12}{'ratio':>8}   target")
        for label, n, t_local, t_s3, reqs, sl, ss, per_seal, last, reads in rows:
            ratio = t_s3 / t_local
            verdict = "PASS" if ratio <= 3 else "MISS"
            print(f"ingest {n:>9,} cases      {t_local:>10.2f}s{t_s3:>11.2f}s{ratio:>8.2f}   "
                  f"<= 3x  {verdict}")
            print(f"  ingest requests           {dict(sorted(reqs.items()))}")
            print(f"one-case seal onto {n:>7,}  {statistics.median(sl) * 1000:>9.1f}ms"
                  f"{statistics.median(ss) * 1000:>10.1f}ms")
            print(f"  requests per seal         min {min(per_seal)} median "
                  f"{statistics.median(per_seal)} max {max(per_seal)}; last: "
                  f"{dict(sorted(last.items()))}")
            floor = import_cas_seconds()
            for name, (counted, received, seconds) in reads.items():
                ratio = (floor + seconds) / floor
                total = sum(counted.values())
                most = REQUEST_TARGETS.get(name)
                extra = (f"; <= {most} requests: {'PASS' if total <= most else 'MISS'}"
                         if most else "")
                print(f"  requests, cold {name:<13} {total:>4}  "
                      f"{dict(sorted(counted.items()))}; {received / 1024:,.0f} KiB read; "
                      f"{seconds * 1000:.0f} ms + import cas {floor * 1000:.0f} ms = "
                      f"{ratio:.2f}x import cas (target <= 2x, < 1 MiB: "
                      f"{'PASS' if ratio <= 2 and received < 1 << 20 else 'MISS'}{extra})")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"sizes": {str(n): {
                    "index_bytes": index_bytes(os.path.join(out, f"local-{n}")),
                    "seal_requests": statistics.median(per_seal),
                    "reads": {name: {"requests": sum(c.values()), "bytes": received_,
                                     "seconds": seconds}
                              for name, (c, received_, seconds) in reads.items()}}
                    for _, n, *_, per_seal, _, reads in rows}}, f, indent=1)
        small, large = rows[0][7], rows[1][7]
        same = max(large) - max(small)
        print(f"requests per one-case seal, {args.small:,} vs {args.n:,} cases: "
              f"{statistics.median(small)} vs {statistics.median(large)} "
              f"({'PASS' if same <= 6 else 'MISS'}: constant up to the extra tree levels)")
    finally:
        if server:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
