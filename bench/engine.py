"""Engine benchmark: ingest, git baseline, one-case seals, pages, diffs, memory, cold reads.

Run by hand (not a timed test):

    python bench/engine.py                 # N = 10k and 100k (about 1-2 minutes)
    python bench/engine.py --million       # adds N = 1M (no git baseline at 1M)
    python bench/engine.py --out DIR       # keep the work files in DIR (default: a new /tmp dir)

Cases are generated deterministically from --seed (default 1): every size's JSONL file is a
prefix of the same stream. Every figure is measured in this one run; see bench/README.md and
docs/performance.md for what each row means.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

DATASET = "bench"
GIB = 1 << 30

# -- deterministic case generator ----------------------------------------------------------
WORDS = (
    "account address agent amount analysis api archive balance batch billing branch budget "
    "cache calendar campaign cancel cart change channel check claim client cluster code config "
    "contract copy cost coupon customer dashboard data date deadline delivery deploy detail "
    "device discount document draft email error estimate event export failure feature file "
    "filter flight forecast form group guide history hotel incident index inventory invoice "
    "issue item job key label language latency lead limit list log manager meeting message "
    "metric migration model monthly note notice number offer order owner package page partner "
    "password payment plan policy price priority product profile project quarter query quota "
    "rate record refund region release report request reservation result review role route "
    "rule schedule schema search server service session shipment sku snapshot status stock "
    "storage subscription summary supplier support table target task team template ticket "
    "timeline token total trace transfer trip update usage user vendor version warehouse "
    "weekly window workflow the a to for of in on with and from by please can you show me "
    "what is our last next all new open closed pending urgent late missing duplicate"
).split()
CITIES = ("Lisbon", "Berlin", "Nairobi", "Osaka", "Lima", "Toronto", "Hanoi", "Oslo", "Quito",
          "Madrid", "Seoul", "Accra", "Perth", "Dublin", "Austin", "Porto")
AGENTS = ("support-agent", "files-agent", "sql-agent", "travel-agent", "billing-agent",
          "research-agent", "ops-agent")
MODELS = ("m-1", "m-2", "m-2-mini", "m-3")
TENANTS = ("acme", "globex", "initech", "umbrella", "hooli", "stark")
STATUSES = ("success", "success", "success", "partial", "failure")


def _words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(lo, hi)))


def _tool_call(rng: random.Random) -> dict[str, Any]:
    kind = rng.randrange(8)
    if kind == 0:
        q = _words(rng, 3, 7)
        args = {"query": q, "top_k": rng.choice((3, 5))}
        result = [{"title": _words(rng, 2, 5), "url": f"https://docs.example.com/{rng.randrange(10**6)}",
                   "score": round(rng.random(), 3)} for _ in range(2)]
        name = "search"
    elif kind == 1:
        path = f"/srv/{rng.choice(WORDS)}/{rng.choice(WORDS)}-{rng.randrange(1000)}.txt"
        args = {"path": path, "max_bytes": 4096}
        result = {"content": _words(rng, 8, 16), "size": rng.randrange(100, 90000)}
        name = "read_file"
    elif kind == 2:
        t = rng.choice(("orders", "invoices", "tickets", "shipments"))
        args = {"sql": f"SELECT id, status, total FROM {t} WHERE customer_id = {rng.randrange(10**5)} "
                       f"ORDER BY created_at DESC LIMIT 3"}
        result = {"columns": ["id", "status", "total"],
                  "rows": [[rng.randrange(10**6), rng.choice(("open", "paid", "late")),
                            round(rng.uniform(1, 900), 2)] for _ in range(rng.randint(1, 3))]}
        name = "sql.query"
    elif kind == 3:
        args = {"city": rng.choice(CITIES), "units": "metric"}
        result = {"temp_c": rng.randint(-10, 38), "sky": rng.choice(("sunny", "cloudy", "rain")),
                  "wind_kph": rng.randint(0, 60)}
        name = "weather.lookup"
    elif kind == 4:
        oid = rng.randrange(10**6)
        args = {"order_id": oid}
        result = {"order_id": oid, "status": rng.choice(("shipped", "pending", "refunded")),
                  "items": [{"sku": f"SKU-{rng.randrange(10**5)}", "qty": rng.randint(1, 4)}
                            for _ in range(rng.randint(1, 3))],
                  "total": round(rng.uniform(5, 500), 2)}
        name = "orders.get"
    elif kind == 5:
        args = {"method": "GET", "url": f"https://api.example.com/v2/{rng.choice(WORDS)}/"
                                        f"{rng.randrange(10**6)}"}
        result = {"status": rng.choice((200, 200, 200, 404, 500)),
                  "body": {"id": rng.randrange(10**6), "note": _words(rng, 3, 8)}}
        name = "http.request"
    elif kind == 6:
        args = {"title": _words(rng, 2, 6), "start": f"2025-{rng.randint(1, 12):02d}-"
                f"{rng.randint(1, 28):02d}T{rng.randint(8, 17):02d}:00:00Z",
                "attendees": [f"user-{rng.randrange(5000)}" for _ in range(rng.randint(1, 3))]}
        result = {"event_id": f"evt_{rng.getrandbits(48):012x}", "created": True}
        name = "calendar.create"
    else:
        args = {"cmd": f"grep -rn '{rng.choice(WORDS)}' /var/log/{rng.choice(WORDS)}.log | tail -3"}
        result = {"exit_code": rng.choice((0, 0, 1)), "stdout": _words(rng, 4, 12)}
        name = "shell"
    return {"type": "tool_call", "tool_name": name, "arguments": args, "result": result}


def make_case(rng: random.Random, i: int) -> dict[str, Any]:
    """One realistic case (about 1.5 KB of JSON); `i` makes it unique."""
    task = _words(rng, 5, 12)
    steps: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": task}]
    for _ in range(rng.randint(1, 6)):
        if rng.random() < 0.3:
            steps.append({"type": "message", "role": "assistant", "content": _words(rng, 3, 8)})
        steps.append(_tool_call(rng))
    answer = _words(rng, 5, 12)
    steps.append({"type": "message", "role": "assistant", "content": answer})
    status = rng.choice(STATUSES)
    return {
        "input": {"task": task, "channel": rng.choice(("chat", "email", "api")),
                  "locale": rng.choice(("en-US", "en-GB", "de-DE", "pt-PT", "ja-JP"))},
        "output": answer,
        "steps": steps,
        "outcome": {"status": status,
                    "scores": {"task_success": 1.0 if status == "success" else 0.0,
                               "helpfulness": round(rng.random(), 3),
                               "tool_accuracy": round(rng.random(), 3)}},
        "metadata": {"run_id": f"run-{i:09d}-{rng.getrandbits(32):08x}",
                     "agent": rng.choice(AGENTS), "model": rng.choice(MODELS),
                     "recorded_at": f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
                                    f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z",
                     "latency_ms": rng.randint(300, 60000),
                     "tokens": {"input": rng.randint(200, 9000), "output": rng.randint(20, 900)}},
        "tenant": rng.choice(TENANTS),
        "person": f"user-{rng.randrange(10**5)}" if rng.random() < 0.6 else None,
    }


def extra_case(seed: int, k: int) -> dict[str, Any]:
    """Cases outside every generated file (for seals): a separate deterministic stream."""
    return make_case(random.Random(f"{seed}-extra-{k}"), 10**9 + k)


def generate(sizes: list[int], out: str, seed: int) -> dict[int, str]:
    """Write cases-s<seed>-N.jsonl for every N; the smaller files are prefixes of the largest."""
    import msgspec
    enc = msgspec.json.Encoder()
    paths = {n: os.path.join(out, f"cases-s{seed}-{n}.jsonl") for n in sizes}
    todo = [n for n in sizes if not _complete(paths[n], n)]
    if not todo:
        return paths
    rng = random.Random(seed)
    files = {n: open(paths[n] + ".part", "wb") for n in todo}
    top = max(todo)
    buf: list[bytes] = []
    written = 0
    for i in range(top):
        buf.append(enc.encode(make_case(rng, i)) + b"\n")
        if len(buf) == 10_000 or i == top - 1:
            chunk = b"".join(buf)
            for n, f in files.items():
                if written < n:
                    f.write(chunk if written + len(buf) <= n else b"".join(buf[:n - written]))
            written += len(buf)
            buf = []
    for n, f in files.items():
        f.close()
        os.replace(paths[n] + ".part", paths[n])
    return paths


def _complete(path: str, n: int) -> bool:
    if not os.path.exists(path):
        return False
    with open(path, "rb") as f:
        return sum(1 for _ in f) == n


# -- child processes: each measures one thing in a clean interpreter ----------------------
def child_floor(jsonl: str) -> dict[str, Any]:
    """Decode each line into cas.format.records.Case, encode canonically, hash. No storage."""
    import msgspec

    from cas.digest import digest_of
    from cas.format.encoding import encode
    from cas.format.records import Case
    dec = msgspec.json.Decoder(Case)
    n = 0
    t0 = time.perf_counter()
    with open(jsonl, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            digest_of("case", encode(dec.decode(line)))
            n += 1
    return {"seconds": time.perf_counter() - t0, "cases": n,
            "maxrss": peak_rss(),
            "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def child_ingest(jsonl: str, repo: str) -> dict[str, Any]:
    """cas.read_cases_jsonl + repo.commit into a fresh local repository (timed: the commit)."""
    import cas
    r = cas.init(repo)
    r.create_dataset(DATASET, admission="direct")
    rss0 = peak_rss()
    t0 = time.perf_counter()
    with open(jsonl, "rb") as f:
        rec = r.commit(DATASET, base=None, add=cas.read_cases_jsonl(f, jsonl), message="ingest")
    dt = time.perf_counter() - t0
    return {"seconds": dt, "item_count": rec.item_count, "content_digest": rec.content_digest,
            "rss_before": rss0,
            "maxrss": peak_rss(),
            # the process that stored the second half of the file (cas/repo/ingest.py), if any
            "helper_maxrss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
            "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def peak_rss() -> int:
    """This process's peak resident set in bytes: VmHWM where Linux has it (reset by exec, so
    it is the child's own), else ru_maxrss (which, on Linux, can carry over the RSS of the
    parent image that forked the child)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _tree_rss(pid: int) -> int:
    """Resident bytes of process `pid` and of its children (the ingest's helper), now."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(line.split()[1]) * 1024 for line in f
                              if line.startswith("VmRSS:"))
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, StopIteration, ValueError):
            continue  # ended meanwhile
    return total


def run_child(*args: str, one_process: bool = False) -> dict[str, Any]:
    """Run this script's child `args` and return its answer, with `sampled_rss`: the largest
    resident size of it and its children together, sampled every 20 ms (on Linux)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if one_process:
        env["CAS_INGEST_PROCESSES"] = "1"
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", *args],
                             stdout=out, stderr=err, env=env, text=True)
        sampled = 0
        while p.poll() is None:
            if os.path.isdir("/proc"):
                sampled = max(sampled, _tree_rss(p.pid))
            time.sleep(0.02)
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            raise RuntimeError(f"child {args} failed:\n{err.read()}")
        answer = json.loads(out.read().strip().splitlines()[-1])
    answer["sampled_rss"] = sampled
    return answer


# -- helpers -------------------------------------------------------------------------------
def dir_bytes(path: str) -> tuple[int, int]:
    """(bytes, files) under `path`, without the backend's staging directory."""
    total = files = 0
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = [d for d in dirnames if d != "~tmp"]
        for name in filenames:
            total += os.lstat(os.path.join(dirpath, name)).st_size
            files += 1
    return total, files


def settle() -> None:
    """Flush dirty pages (generated files, git trees) so background writeback does not slow
    the next measurement's fsyncs."""
    os.sync()
    time.sleep(0.5)


def random_cursor(rng: random.Random) -> str:
    return "b3:" + f"{rng.getrandbits(256):064x}"


def git_ingest(jsonl: str, work: str) -> dict[str, float]:
    """One file per case, then `git add -A && git commit -q` (timed: all three)."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "cases"))
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
               GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.com")
    subprocess.run(["git", "init", "-q", work], check=True, env=env)
    t0 = time.perf_counter()
    with open(jsonl, "rb") as f:
        for i, line in enumerate(f):
            with open(os.path.join(work, "cases", f"{i:07d}.json"), "wb") as out:
                out.write(line)
    t1 = time.perf_counter()
    subprocess.run(["git", "add", "-A"], cwd=work, check=True, env=env)
    t2 = time.perf_counter()
    subprocess.run(["git", "commit", "-q", "-m", "cases"], cwd=work, check=True, env=env)
    t3 = time.perf_counter()
    return {"seconds": t3 - t0, "write": t1 - t0, "add": t2 - t1, "commit": t3 - t2}


def cli_command() -> list[str] | None:
    exe = os.path.join(os.path.dirname(sys.executable), "cas")
    return [exe] if os.access(exe, os.X_OK) else None


# -- one size ------------------------------------------------------------------------------
def bench_size(n: int, jsonl: str, out: str, args, rng: random.Random, log) -> dict[str, Any]:
    import cas
    res: dict[str, Any] = {"n": n}
    reps = 1 if n >= 1_000_000 else args.repeat
    floors, ingests = [], []
    repo = os.path.join(out, f"repo-{n}")
    for k in range(reps):
        settle()
        floors.append(run_child("floor", jsonl))
        shutil.rmtree(repo, ignore_errors=True)
        ingests.append(run_child("ingest", jsonl, repo))
        log(f"  N={n} rep {k + 1}/{reps}: floor {floors[-1]['seconds']:.3f}s, "
            f"ingest {ingests[-1]['seconds']:.3f}s, "
            f"peak RSS {ingests[-1]['maxrss'] / 2**20:.0f} MiB "
            f"(helper {ingests[-1]['helper_maxrss'] / 2**20:.0f} MiB, both sampled "
            f"{ingests[-1]['sampled_rss'] / 2**20:.0f} MiB)")
    assert ingests[-1]["item_count"] == n, ingests[-1]
    # The same ingest by one process (a file this large is otherwise split in two: cas/repo/ingest.py)
    settle()
    shutil.rmtree(repo, ignore_errors=True)
    alone = run_child("ingest", jsonl, repo, one_process=True)
    assert alone["content_digest"] == ingests[-1]["content_digest"], (alone, ingests[-1])
    res["ingest_one_process"] = alone["seconds"]
    res["maxrss_one_process"] = alone["sampled_rss"] or alone["maxrss"]
    log(f"  N={n} one process: ingest {alone['seconds']:.3f}s, "
        f"peak RSS {res['maxrss_one_process'] / 2**20:.0f} MiB")
    res["floor"] = statistics.median(f["seconds"] for f in floors)
    res["ingest"] = statistics.median(i["seconds"] for i in ingests)
    res["ingest_runs"] = [i["seconds"] for i in ingests]
    res["floor_runs"] = [f["seconds"] for f in floors]
    res["maxrss"] = max(i["maxrss"] for i in ingests)
    res["helper_maxrss"] = max(i["helper_maxrss"] for i in ingests)
    # both processes together (sampled), never less than the committing process's own peak
    res["sampled_rss"] = max(max(i["sampled_rss"], i["maxrss"]) for i in ingests)
    res["ru_maxrss"] = max(i["ru_maxrss"] for i in ingests)
    res["rss_before"] = ingests[-1]["rss_before"]
    res["floor_maxrss"] = max(f["maxrss"] for f in floors)
    res["repo_bytes"], res["repo_files"] = dir_bytes(os.path.join(repo, ".cas"))
    res["jsonl_bytes"] = os.path.getsize(jsonl)

    if n <= args.git_max and not args.no_git:
        g = git_ingest(jsonl, os.path.join(out, f"git-{n}"))
        res["git"] = g["seconds"]
        res["git_parts"] = g
        log(f"  N={n} git: {g['seconds']:.2f}s (write {g['write']:.2f}, add {g['add']:.2f}, "
            f"commit {g['commit']:.2f})")
        if not args.keep:
            shutil.rmtree(os.path.join(out, f"git-{n}"), ignore_errors=True)
    settle()

    # 3. one-case seals onto the N-case version, each from a fresh cas.open
    casedir = os.path.join(repo, ".cas")
    seal_t, seal_b, seal_f = [], [], []
    head = 1
    for k in range(args.runs):
        r = cas.open(repo)
        b0, f0 = dir_bytes(casedir)
        t0 = time.perf_counter()
        rec = r.commit(DATASET, base=head, add=[extra_case(args.seed, n * 100 + k)],
                       message="one case")
        seal_t.append(time.perf_counter() - t0)
        b1, f1 = dir_bytes(casedir)
        seal_b.append(b1 - b0)
        seal_f.append(f1 - f0)
        head = rec.number
    res["seal"] = statistics.median(seal_t)
    res["seal_bytes"] = statistics.median(seal_b)
    res["seal_files"] = statistics.median(seal_f)

    # 4. a page and a diff are timed later, both sizes in turn (paired_reads); here the diff's
    # second version: 10 cases apart from the head (5 removed, 5 added)
    r = cas.open(repo)
    victims = []
    while len(victims) < 5:
        got = r.items(DATASET, head, after=random_cursor(rng), limit=1).items
        if got and got[0] not in victims:
            victims.append(got[0])
    rec = r.commit(DATASET, base=head, remove=victims,
                   add=[extra_case(args.seed, n * 100 + 50 + k) for k in range(5)],
                   message="swap 5")
    res["diff_versions"] = (head, rec.number, sorted(victims))

    # Storage calls behind one page / one diff / one case from a fresh cas.open (untimed pass):
    # (calls of every kind, bytes read, files mapped into memory: a local index is mapped
    # once, then sliced).
    def counted(op: Callable[[Any], Any]) -> tuple[int, int, int]:
        from cas.storage.backends.local import LocalBackend
        r = cas.open(repo)
        be = r.backend
        calls = [0, 0, 0]
        get, get_range, real_map = be.get, be.get_range, LocalBackend.map
        exists, listing, real_ranges = be.exists, be.list, LocalBackend.get_ranges

        def c_ranges(self, key, spans):
            blobs = real_ranges(self, key, spans)
            calls[0] += 1  # one call, the file opened once
            calls[1] += sum(map(len, blobs))
            return blobs

        def c_exists(key):
            calls[0] += 1
            return exists(key)

        def c_list(prefix=""):
            calls[0] += 1
            return listing(prefix)

        def c_map(self, key):
            calls[2] += 1
            return real_map(self, key)

        def c_get(key):
            data = get(key)
            calls[0] += 1
            calls[1] += len(data)
            return data

        def c_get_range(key, offset, length):
            data = get_range(key, offset, length)
            calls[0] += 1
            calls[1] += len(data)
            return data
        be.get, be.get_range, be.exists, be.list = c_get, c_get_range, c_exists, c_list
        LocalBackend.map, LocalBackend.get_ranges = c_map, c_ranges
        try:
            op(r)
        finally:
            LocalBackend.map, LocalBackend.get_ranges = real_map, real_ranges
        return calls[0], calls[1], calls[2]
    res["reads_page"] = counted(lambda r: r.items(DATASET, 1, after=random_cursor(rng), limit=100))
    res["reads_diff"] = counted(lambda r: r.diff(DATASET, head, rec.number))
    res["reads_case"] = counted(lambda r: r.case(DATASET, 1, victims[0]))
    res["indexes"] = sum(1 for k in cas.open(repo).backend.list("packs/") if k.endswith(".idx"))
    res["cold_case_id"] = cas.open(repo).items(DATASET, 1, after=random_cursor(rng), limit=1).items
    res["repo"] = repo
    return res


def paired_reads(results: list[dict[str, Any]], args, rng: random.Random, log) -> None:
    """4a/4b: a page of 100 ids at a random cursor of version 1 and the diff of the two
    versions 10 cases apart, each from a fresh cas.open, timed for every size in turn within
    each run (so the VM's drift over minutes hits every size alike); medians per size."""
    import cas
    page_t: dict[int, list[float]] = {r["n"]: [] for r in results}
    diff_t: dict[int, list[float]] = {r["n"]: [] for r in results}
    for _ in range(args.runs):
        for res in results:
            r = cas.open(res["repo"])
            cursor = random_cursor(rng)
            t0 = time.perf_counter()
            p = r.items(DATASET, 1, after=cursor, limit=100)
            page_t[res["n"]].append(time.perf_counter() - t0)
            assert len(p.items) <= 100 and all(i > cursor for i in p.items)
            old, new, victims = res["diff_versions"]
            r = cas.open(res["repo"])
            t0 = time.perf_counter()
            d = r.diff(DATASET, old, new)
            diff_t[res["n"]].append(time.perf_counter() - t0)
            assert len(d.added) == 5 and sorted(d.removed) == victims, d
    for res in results:
        res["page"] = statistics.median(page_t[res["n"]])
        res["diff"] = statistics.median(diff_t[res["n"]])
        log(f"  N={res['n']}: page {res['page'] * 1e3:.2f} ms, diff {res['diff'] * 1e3:.2f} ms")


def cold_processes(results: list[dict[str, Any]], args, rng: random.Random, log) -> dict:
    """A cold process reading one case and one page, from the smallest and largest repo."""
    cli = cli_command()
    use_cli = False
    small, large = results[0], results[-1]
    if cli:
        probe = subprocess.run(cli + ["--repo", small["repo"], "case", f"{DATASET}@1",
                                      small["cold_case_id"][0]], capture_output=True)
        use_cli = probe.returncode == 0
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def cmd(res, what: str) -> list[str]:
        if what == "case":
            cid = res["cold_case_id"][0]
            if use_cli:
                return cli + ["--repo", res["repo"], "case", f"{DATASET}@1", cid]
            code = f"import cas; cas.open({res['repo']!r}).case({DATASET!r}, 1, {cid!r})"
        else:
            cur = random_cursor(rng)
            if use_cli:
                return cli + ["--repo", res["repo"], "items", f"{DATASET}@1", "--after", cur]
            code = f"import cas; cas.open({res['repo']!r}).items({DATASET!r}, 1, after={cur!r})"
        return [sys.executable, "-c", code]

    def timed(argv: list[str]) -> float:
        t0 = time.perf_counter()
        p = subprocess.run(argv, capture_output=True, env=env)
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"{argv} failed: {p.stderr.decode()}")
        return dt

    # Where PYTHONDONTWRITEBYTECODE is set (this VM sets it), an editable install compiles all
    # of cas in every process: compile it once, as pip does for an installed package.
    import compileall
    for package in ("cas", "cas_cli"):
        compileall.compile_dir(os.path.join(ROOT, package), quiet=1)
    out: dict[str, Any] = {"tool": "cas CLI" if use_cli else "python -c 'import cas; ...'"}
    startup = [sys.executable, "-c", "pass"]
    # The floor "import cas" is the library loaded: `import cas` itself now imports its names
    # on first use (cas/__init__.py), so it is `import cas; cas.Repository` (the facade and
    # every operation module, what `import cas` loaded before).
    library = [sys.executable, "-c", "import cas; cas.Repository"]
    base = cli + ["--help"] if use_cli else library
    timed(base)  # warm the OS page cache for the interpreter and modules
    out["python"] = statistics.median(timed(startup) for _ in range(args.runs))
    out["baseline"] = statistics.median(timed(base) for _ in range(args.runs))
    out["import_cas"] = statistics.median(timed(library) for _ in range(args.runs))
    for what in ("case", "items"):
        ts: dict[int, list[float]] = {small["n"]: [], large["n"]: []}
        for _ in range(args.runs):  # interleaved, so drift hits both sizes alike
            for res in (small, large):
                ts[res["n"]].append(timed(cmd(res, what)))
        out[what] = {k: statistics.median(v) for k, v in ts.items()}
    log(f"  cold processes ({out['tool']}): {out}")
    return out


# -- report --------------------------------------------------------------------------------
def fmt_s(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} us"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def fmt_b(b: float) -> str:
    if b >= 1 << 20:
        return f"{b / 2**20:.0f} MiB"
    if b >= 1 << 10:
        return f"{b / 2**10:.1f} KiB"
    return f"{b:.0f} B"


def report(results: list[dict[str, Any]], cold: dict, args, elapsed: float, out: str) -> str:
    rows: list[tuple[str, str, str, str, str, str]] = []

    def row(step, what, result, baseline, ratio, target, ok=None):
        status = "" if ok is None else ("PASS" if ok else "MISS")
        rows.append((step, what, result, baseline, ratio, target + (f"  {status}" if status else "")))

    ns = [r["n"] for r in results]
    label = {n: (f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else
                 f"{n // 1000}k" if n % 1000 == 0 else str(n)) for n in ns}
    for r in results:
        ratio = r["ingest"] / r["floor"]
        row("1", f"ingest {label[r['n']]} -> 1 version", fmt_s(r["ingest"]),
            f"floor {fmt_s(r['floor'])}", f"{ratio:.2f}x floor", "<= 1.6x (issue 16)",
            ratio <= 1.6)
    for r in results:
        ratio = r["ingest_one_process"] / r["floor"]
        row("1", f"ingest {label[r['n']]}, one process", fmt_s(r["ingest_one_process"]),
            f"floor {fmt_s(r['floor'])}", f"{ratio:.2f}x floor", "(CAS_INGEST_PROCESSES=1)")
    for r in results:
        if "git" in r:
            ratio = r["git"] / r["ingest"]
            row("2", f"git, 1 file/case, {label[r['n']]}", fmt_s(r["git"]),
                f"cas {fmt_s(r['ingest'])}", f"git/cas {ratio:.1f}x", ">= 15x", ratio >= 15)
    lo, hi = results[0], results[-1]
    grow = f"{label[hi['n']]}/{label[lo['n']]}"
    for r in results:
        row("3", f"seal +1 case onto {label[r['n']]}", fmt_s(r["seal"]), "", "", "")
    g = hi["seal"] / lo["seal"]
    row("3", f"seal time growth {grow}", "", "", f"{g:.2f}x", "<= 2x", g <= 2)
    for r in results:
        row("3", f"bytes written per version, {label[r['n']]}",
            f"{fmt_b(r['seal_bytes'])} ({r['seal_files']:.0f} files)", "", "", "")
    g = hi["seal_bytes"] / lo["seal_bytes"]
    row("3", f"bytes/version growth {grow}", "", "", f"{g:.2f}x",
        "no growth with N (<= 2x)", g <= 2)
    for key, name in (("page", "page of 100 at random cursor"),
                      ("diff", "diff of versions 10 cases apart")):
        for r in results:
            row("4", f"{name}, {label[r['n']]}", fmt_s(r[key]), "", "", "")
        g = hi[key] / lo[key]
        row("4", f"{key} growth {grow}", "", "", f"{g:.2f}x", "<= 1.5x (issue 16)", g <= 1.5)
    target = ("< 512 MiB at 1M (issue 16)" if hi["n"] >= 1_000_000 else
              "< 512 MiB (issue 16's target is for 1M)")
    row("5", f"peak RSS, ingest {label[hi['n']]}, both processes (sampled every 20 ms)",
        fmt_b(hi["sampled_rss"]), f"floor child {fmt_b(hi['floor_maxrss'])}", "", target,
        hi["sampled_rss"] < GIB // 2)
    row("5", "peak RSS (VmHWM) of each: the commit's, the helper's", fmt_b(hi["maxrss"]),
        fmt_b(hi["helper_maxrss"]), "", "")
    row("5", f"peak RSS, ingest {label[hi['n']]}, one process", fmt_b(hi["maxrss_one_process"]),
        "", "", target, hi["maxrss_one_process"] < GIB // 2)
    row("6", "cold process: interpreter only", fmt_s(cold["python"]), "", "", "")
    row("6", f"cold process: {'cas --help' if cold['tool'] == 'cas CLI' else 'import cas'}",
        fmt_s(cold["baseline"]), "", "", "")
    row("6", "cold process: python -c 'import cas; cas.Repository'", fmt_s(cold["import_cas"]),
        "", "", "")
    for what, name in (("case", "read one case by id"), ("items", "one page of 100 ids")):
        a, b = cold[what][lo["n"]], cold[what][hi["n"]]
        row("6", f"cold {name}, {label[hi['n']]}", fmt_s(b), f"{label[lo['n']]} {fmt_s(a)}",
            f"{b / a:.2f}x", "within 2x", b / a <= 2)
        r = b / cold["import_cas"]
        row("6", f"cold {name}, {label[hi['n']]}, vs import cas", fmt_s(b),
            f"import cas {fmt_s(cold['import_cas'])}", f"{r:.2f}x", "<= 1.5x", r <= 1.5)

    heads = ("step", "measure", "result", "baseline", "ratio", "target")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(heads, widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    extra = []
    for r in results:
        extra.append(f"N={label[r['n']]}: JSONL {fmt_b(r['jsonl_bytes'])} "
                     f"({r['jsonl_bytes'] / r['n']:.0f} B/case), repository {fmt_b(r['repo_bytes'])} "
                     f"in {r['repo_files']} files; ingest runs {[round(x, 3) for x in r['ingest_runs']]}, "
                     f"floor runs {[round(x, 3) for x in r['floor_runs']]}; ingest peak RSS "
                     f"{fmt_b(r['maxrss'])} (ru_maxrss {fmt_b(r['ru_maxrss'])}; before ingest "
                     f"{fmt_b(r['rss_before'])}); "
                     f"{r['indexes']} pack indexes after the seals; storage calls (all kinds, bytes read, files mapped) "
                     f"from a fresh open: page {tuple(r['reads_page'])}, diff "
                     f"{tuple(r['reads_diff'])}, case {tuple(r['reads_case'])}"
                     + (f"; git write {r['git_parts']['write']:.2f}s add {r['git_parts']['add']:.2f}s "
                        f"commit {r['git_parts']['commit']:.2f}s" if "git" in r else ""))
    head = (f"cas engine benchmark: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}, seed {args.seed}, {args.runs} runs per median; "
            f"cold-process tool: {cold['tool']}; total {elapsed:.0f} s; work dir {out}")
    return "\n".join([head, "", *lines, "", *extra])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--million", action="store_true", help="also N = 1,000,000 (no git at 1M)")
    p.add_argument("--out", help="work directory (default: a new directory under /tmp)")
    p.add_argument("--sizes", help="comma-separated sizes instead of 10000,100000[,1000000]")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3, help="ingest/floor repetitions below 1M")
    p.add_argument("--runs", type=int, default=7, help="runs per median for steps 3, 4, 6")
    p.add_argument("--git-max", type=int, default=100_000, help="largest N for the git baseline")
    p.add_argument("--no-git", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the git work trees")
    p.add_argument("--json", dest="json_out", help="also write raw results as JSON here")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.child:
        what, *rest = args.child
        fn = {"floor": child_floor, "ingest": child_ingest}[what]
        print(json.dumps(fn(*rest)))
        return 0

    sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes else
             [10_000, 100_000] + ([1_000_000] if args.million else []))
    sizes.sort()
    out = os.path.abspath(args.out) if args.out else tempfile.mkdtemp(prefix="cas-bench-", dir="/tmp")
    if os.path.commonpath([out, ROOT]) == ROOT:
        p.error("--out must be outside the repository")
    os.makedirs(out, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    start = time.perf_counter()
    log(f"work dir {out}; generating {', '.join(map(str, sizes))} cases (seed {args.seed})")
    t0 = time.perf_counter()
    paths = generate(sizes, out, args.seed)
    log(f"  generated in {time.perf_counter() - t0:.1f}s")
    rng = random.Random(args.seed + 7)
    results = []
    for n in sizes:
        log(f"N={n}")
        results.append(bench_size(n, paths[n], out, args, rng, log))
    log("pages and diffs, every size in turn")
    paired_reads(results, args, rng, log)
    cold = cold_processes(results, args, rng, log)
    text = report(results, cold, args, time.perf_counter() - start, out)
    print(text)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"results": results, "cold": {k: v for k, v in cold.items()}}, f, indent=1,
                      default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
