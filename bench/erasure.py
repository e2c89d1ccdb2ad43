"""Erasure benchmark: erase one person holding 10 cases from repositories of N cases, 100 versions.

Run by hand (not a timed test):

    python bench/erasure.py                 # N = 10k and 100k (about 40 s on 2 cores)
    python bench/erasure.py --million       # N = 100k and 1M, the issue's comparison (about 4 min)
    python bench/erasure.py --with-runs     # also N recorded runs, each reviewed
    python bench/erasure.py --out DIR       # keep the work files in DIR (default: a new /tmp dir)
    python bench/erasure.py --out DIR --reuse --baseline ../old   # the repositories a run with
        # --keep built in DIR, erased by this tree and by another checkout in turn, each round

For every N a fresh repository is built (untimed): one dataset whose version 1 holds
N - 99 x 50 cases (`engine.py`'s generator, committed from JSON Lines), then 99 small versions
each adding 50 new cases and removing 10 of version 1's. Person `erase-me` holds exactly 10 of
the added cases, in versions 91, 94 and 97 (4 + 3 + 3), each carrying a marker string; so
versions 91-100 hold them and 1-90 do not. With --with-runs, N runs are imported and reviewed
in batches of 10k (the person's 10 runs last), so the run and review logs have N entries.

Each erasure runs in a fresh hard-linked copy of the built repository (files are never modified
in place, so the copy is exact and the original stays intact), in a fresh child process that
opens it, previews the erasure and confirms it (timed apart), and reports its peak RSS, its
peak anonymous memory (sampled) and the storage calls each step made; --repeat copies per
size, interleaved across sizes. Afterwards (untimed, on the last copy): fsck, which versions
are retired, that version 90 still reads, and a byte search of every file under the repository
for the markers, the person id and the erased cases' run ids. Target (issue 5): the cost follows the packs and versions that held the
person's data, not N: largest / smallest N near 1x. See bench/README.md and docs/performance.md.
"""

from __future__ import annotations

import argparse
import io
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
import threading
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

from engine import dir_bytes, fmt_b, fmt_s, generate, make_case, peak_rss, settle  # noqa: E402

DATASET = "bench"
AUTHOR = "bench"
PERSON = "erase-me"
MARKER = "zqx-erasure-marker"  # in every erased case; nothing else in the repository has it
RUN_BATCH = 10_000  # --with-runs: runs per import and per review batch
TOLERANCE = 1.5  # "near 1x": the growth we accept from the smallest to the largest N


def label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


# -- the repository ----------------------------------------------------------------------------
def small_version_cases(seed: int, version: int, add: int, person_cases: int) -> list[dict]:
    """The cases added by small version `version`: the same for every N. The first
    `person_cases` of them are the person's, each with a marker in its input, steps and output."""
    rng = random.Random(f"{seed}-erasure-v{version}")
    cases = [make_case(rng, 2 * 10**9 + version * 1000 + j) for j in range(add)]
    for j, c in enumerate(cases[:person_cases]):
        mark = f"{MARKER}-v{version}-{j}"
        c["person"] = PERSON
        c["input"]["task"] = f"{c['input']['task']} {mark}"
        c["steps"][0]["content"] = c["input"]["task"]
        c["output"] = c["steps"][-1]["content"] = f"{c['output']} ({mark})"
    return cases


def person_layout(args) -> dict[int, int]:
    """Small version -> how many of the person's cases it adds."""
    versions = [int(v) for v in args.person_versions.split(",")]
    per, extra = divmod(args.person_cases, len(versions))
    return {v: per + (1 if i < extra else 0) for i, v in enumerate(versions)}


def as_run(case: dict[str, Any]) -> dict[str, Any]:
    """The recorded run a generated case came from (the schema of docs/runs.md)."""
    meta = dict(case["metadata"])
    return {"run_id": meta.pop("run_id"), "started_at": meta.pop("recorded_at"),
            "tenant": case["tenant"], "person": case["person"], "input": case["input"],
            "output": case["output"], "steps": case["steps"], "outcome": case["outcome"],
            "metadata": meta}


def import_runs(n: int, repo_dir: str, out: str, person_runs: list[dict], args, log) -> float:
    """`--with-runs`: n - len(person_runs) runs of other people (`lifecycle.py`'s runs), then
    the person's, each batch imported and reviewed as `lifecycle.py` does it."""
    from lifecycle import generate as generate_runs
    from lifecycle import import_and_review
    t0 = time.perf_counter()
    path = generate_runs(os.path.join(out, f"runs-s{args.seed}-{n - len(person_runs)}.jsonl"),
                         n - len(person_runs), args.seed)
    log(f"  runs generated in {time.perf_counter() - t0:.1f}s")
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        while True:
            lines = [line for _, line in zip(range(RUN_BATCH), f)]
            if not lines:
                break
            ids = [json.loads(line)["run_id"] for line in lines]
            import_and_review(repo_dir, io.BytesIO(b"".join(lines)), ids)
    import_and_review(repo_dir, person_runs, [r["run_id"] for r in person_runs])
    return time.perf_counter() - t0


def build(n: int, jsonl: str, repo_dir: str, args, log) -> dict[str, Any]:
    """Version 1 from the first n - (versions-1) x add lines of `jsonl`, then the small versions
    (and with --with-runs, n recorded runs, each reviewed)."""
    import cas
    small = args.versions - 1
    base_n = n - small * args.add
    if base_n < small * args.remove:
        raise SystemExit(f"N={n} is too small for {args.versions} versions of +{args.add} "
                         f"-{args.remove}")
    layout = person_layout(args)
    shutil.rmtree(repo_dir, ignore_errors=True)
    r = cas.init(repo_dir)
    r.create_dataset(DATASET, author=AUTHOR, admission="direct")
    removable: list[str] = []

    def base_cases():
        with open(jsonl, "rb") as f:
            for i, enc in enumerate(cas.read_cases_jsonl(f, jsonl)):
                if i >= base_n:
                    return
                if len(removable) < small * args.remove:
                    removable.append(enc.case_id)
                yield enc
    t0 = time.perf_counter()
    head = r.commit(DATASET, base=None, add=base_cases(), author=AUTHOR, message="base")
    t_base = time.perf_counter() - t0
    person_ids, run_ids, markers, person_runs = [], [], [], []
    for v in range(2, args.versions + 1):
        k = layout.get(v, 0)
        cases = small_version_cases(args.seed, v, args.add, k)
        encoded = [cas.encode_case(c) for c in cases]
        for c, e in zip(cases[:k], encoded[:k]):
            person_ids.append(e.case_id)
            person_runs.append(as_run(c))
            run_ids.append(c["metadata"]["run_id"])
            markers.append(c["output"].rsplit("(", 1)[1].rstrip(")"))
        out = removable[(v - 2) * args.remove:(v - 1) * args.remove]
        head = r.commit(DATASET, base=head.number, add=encoded, remove=out, author=AUTHOR,
                        message=f"small {v}")
    assert head.number == args.versions and len(person_ids) == args.person_cases
    seconds = time.perf_counter() - t0
    t_runs = import_runs(n, repo_dir, os.path.dirname(repo_dir), person_runs, args, log) \
        if args.with_runs else 0.0
    total, files = dir_bytes(os.path.join(repo_dir, ".cas"))
    packs = sum(1 for k in r.backend.list("packs/") if k.endswith(".pack"))
    persons = sum(1 for _ in r.backend.list("persons/"))
    runs = f", {n} runs imported and reviewed in {t_runs:.1f}s" if args.with_runs else ""
    log(f"  built: version 1 of {base_n} cases in {t_base:.1f}s, {small} small versions in "
        f"{seconds - t_base:.1f}s{runs}; {fmt_b(total)} in {files} files, {packs} packs, "
        f"{persons} person-index files; head holds {head.item_count} cases")
    return {"base_n": base_n, "build_seconds": seconds + t_runs, "base_seconds": t_base,
            "repo_bytes": total, "repo_files": files, "packs": packs, "person_files": persons,
            "head_items": head.item_count, "person_ids": person_ids, "run_ids": run_ids,
            "markers": markers, "first_holder": min(layout)}


# -- the measured child ------------------------------------------------------------------------
class Counter:
    """Storage calls (and bytes read / written, keys listed) through a backend's methods."""

    METHODS = ("get", "get_range", "list", "put_if_absent", "replace", "delete", "exists")

    def __init__(self, backend) -> None:
        self.calls = {m: 0 for m in self.METHODS}
        self.read = self.written = self.listed = 0
        for m in self.METHODS:
            setattr(backend, m, self._wrap(m, getattr(backend, m)))

    def _wrap(self, name, fn):
        def wrapped(*a, **kw):
            self.calls[name] += 1
            out = fn(*a, **kw)
            if name in ("get", "get_range"):
                self.read += len(out)
            elif name in ("put_if_absent", "replace"):
                self.written += len(a[1])
            elif name == "list":
                out = list(out)
                self.listed += len(out)
            return out
        return wrapped

    def snapshot(self) -> dict[str, Any]:
        return {"calls": dict(self.calls), "read": self.read, "written": self.written,
                "listed": self.listed}

    @staticmethod
    def delta(a: dict, b: dict) -> dict[str, Any]:
        return {"calls": {k: b["calls"][k] - a["calls"][k] for k in a["calls"]},
                "read": b["read"] - a["read"], "written": b["written"] - a["written"],
                "listed": b["listed"] - a["listed"]}


def vm_rss(field: str = "VmRSS") -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


class AnonPeak:
    """The peak of this process's anonymous resident memory (RssAnon: its heap, not the
    pages of files it maps, which are the page cache's and are counted in VmHWM too),
    sampled every `interval` seconds by a thread while the block runs; a spike shorter
    than that can be missed."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval, self.peak = interval, vm_rss("RssAnon")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, vm_rss("RssAnon"))

    def __enter__(self) -> "AnonPeak":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, vm_rss("RssAnon"))


def child_erase(repo_dir: str, profile: str = "") -> dict[str, Any]:
    """Open, preview, confirm; each timed. With `profile`, cProfile the confirmation into it."""
    import cas
    t0 = time.perf_counter()
    r = cas.open(repo_dir)
    t_open = time.perf_counter() - t0
    counter = Counter(r.backend)
    rss_open, anon_open = vm_rss(), vm_rss("RssAnon")
    s0 = counter.snapshot()
    with AnonPeak() as anon:
        t0 = time.perf_counter()
        preview = r.erase(PERSON)
        t_preview = time.perf_counter() - t0
        s1 = counter.snapshot()
        prof = None
        if profile:
            import cProfile
            prof = cProfile.Profile()
            prof.enable()
        t0 = time.perf_counter()
        record = r.erase(PERSON, preview["confirm_token"], author=AUTHOR)
        t_erase = time.perf_counter() - t0
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)
        s2 = counter.snapshot()
    return {"open": t_open, "preview": t_preview, "erase": t_erase,
            "preview_cases": len(preview["cases"]), "runs_erased": len(record.runs),
            "reviews_erased": len(record.reviews), "cases_erased": len(record.cases),
            "preview_versions": [[v["dataset"], v["number"]]
                                 for v in preview["versions_to_retire"]],
            "objects_deleted": record.objects_deleted, "packs_rewritten": record.packs_rewritten,
            "bytes_rewritten": record.bytes_rewritten,
            "retired": [[v.dataset, v.number] for v in record.retired],
            "io_preview": Counter.delta(s0, s1), "io_erase": Counter.delta(s1, s2),
            "rss_open": rss_open, "maxrss": peak_rss(),
            "anon_open": anon_open, "anon_peak": anon.peak,
            "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def run_child(*argv: str, tree: str = ROOT) -> dict[str, Any]:
    """A child of `tree`'s own copy of this script (its cas, its bench), in a neutral cwd."""
    env = dict(os.environ, PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, os.path.join(tree, "bench", "erasure.py"), "--child",
                        *argv], capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    if p.returncode != 0:
        raise RuntimeError(f"child {argv} failed:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


# -- checks after the erasure --------------------------------------------------------------------
def scan(root: str, needles: list[bytes]) -> list[tuple[str, bytes]]:
    """(file, needle) for every needle found in any file under root (packs are not compressed,
    so the raw bytes are the content)."""
    hits = []
    overlap = max(len(x) for x in needles)
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                tail = b""
                while True:
                    chunk = f.read(16 << 20)
                    if not chunk:
                        break
                    buf = tail + chunk
                    for x in needles:
                        if x in buf:
                            hits.append((path, x))
                    tail = buf[-overlap:]
    return sorted(set(hits))


def verify(repo_dir: str, built: dict, got: dict, args) -> dict[str, Any]:
    import cas
    from cas.errors import CasError
    r = cas.open(repo_dir)
    t0 = time.perf_counter()
    report = r.fsck()
    t_fsck = time.perf_counter() - t0
    retired = [v for v in range(1, args.versions + 1)
               if r.version_state(DATASET, v) == "RETIRED"]
    expect = list(range(built["first_holder"], args.versions + 1))
    v_before = built["first_holder"] - 1
    readable = r.items(DATASET, v_before, limit=5).items
    first_case = r.case(DATASET, v_before, readable[0]) is not None
    try:
        r.items(DATASET, args.versions, limit=1)
        refused = False
    except CasError as exc:
        refused = getattr(exc, "reason", None) == "EVALUATION_DATASET_VERSION_RETIRED"
    gone = all(r.store.locate(c) is None for c in built["person_ids"])
    needles = [PERSON.encode(), MARKER.encode()] + [m.encode() for m in built["markers"]] + \
        [x.encode() for x in built["run_ids"]]
    t0 = time.perf_counter()
    hits = scan(repo_dir, needles)
    t_scan = time.perf_counter() - t0
    return {"fsck_ok": bool(report.ok), "fsck_seconds": t_fsck, "retired": retired,
            "retired_ok": retired == expect and [v for _, v in got["retired"]] == expect,
            "older_readable": bool(readable) and first_case, "retired_refused": refused,
            "cases_gone": gone, "hits": [f"{os.path.relpath(p, repo_dir)}: {x.decode()}"
                                         for p, x in hits],
            "scan_seconds": t_scan, "needles": len(needles)}


# -- one size ------------------------------------------------------------------------------------
def clone(src: str, dst: str) -> None:
    """A copy of a built repository made of hard links: every file is immutable (writers create
    new files and rename; erasure unlinks), so erasing in the copy leaves the original intact."""
    shutil.rmtree(dst, ignore_errors=True)
    subprocess.run(["cp", "-al", src, dst], check=True)


def measure_baseline(n: int, built_dir: str, out: str, args, log) -> float:
    """Preview + erase by the --baseline tree's own child, in a fresh copy (then removed)."""
    repo_dir = os.path.join(out, f"erasure-{n}-baseline")
    clone(built_dir, repo_dir)
    settle()
    got = run_child("erase", repo_dir, "", tree=os.path.abspath(args.baseline))
    shutil.rmtree(repo_dir, ignore_errors=True)
    log(f"  N={label(n)} baseline: preview {fmt_s(got['preview'])}, erase {fmt_s(got['erase'])}")
    return got["preview"] + got["erase"]


def measure(n: int, built_dir: str, out: str, k: int, args, log) -> dict[str, Any]:
    """One erasure in a fresh hard-linked copy of the built repository, by a fresh child."""
    repo_dir = os.path.join(out, f"erasure-{n}-run{k}")
    clone(built_dir, repo_dir)
    before, files_before = dir_bytes(os.path.join(repo_dir, ".cas"))
    settle()  # the build's dirty pages must not be flushed during the measurement
    profile = os.path.join(out, f"erase-{n}.prof") if args.profile and k == 0 else ""
    got = run_child("erase", repo_dir, profile)
    after, files_after = dir_bytes(os.path.join(repo_dir, ".cas"))
    got["dir_delta"] = after - before
    got["files_delta"] = files_after - files_before
    got["repo_dir"] = repo_dir
    log(f"  N={label(n)} run {k + 1}: open {fmt_s(got['open'])}, preview {fmt_s(got['preview'])}, "
        f"erase {fmt_s(got['erase'])}: {got['objects_deleted']} objects deleted, "
        f"{got['packs_rewritten']} packs rewritten ({fmt_b(got['bytes_rewritten'])}), "
        f"{len(got['retired'])} versions retired; peak RSS {fmt_b(got['maxrss'])} "
        f"(after open {fmt_b(got['rss_open'])}); erase read {fmt_b(got['io_erase']['read'])} "
        f"in {got['io_erase']['calls']['get'] + got['io_erase']['calls']['get_range']} reads, "
        f"listed {got['io_erase']['listed']} keys")
    if profile:
        import pstats
        buf = io.StringIO()
        pstats.Stats(profile, stream=buf).sort_stats("tottime").print_stats(20)
        log(f"  profile of the confirmed erase (tottime; {profile}):\n{buf.getvalue()}")
    return got


def finish(n: int, built: dict, runs: list[dict], args, log) -> dict[str, Any]:
    """Medians of the runs, and the checks on the last run's repository."""
    res: dict[str, Any] = {"n": n}
    res.update({k: v for k, v in built.items() if k not in ("person_ids", "run_ids", "markers")})
    last = runs[-1]
    res.update({k: v for k, v in last.items() if k not in ("open", "preview", "erase")})
    for key in ("open", "preview", "erase"):
        res[key] = statistics.median(r[key] for r in runs)
        res[key + "_runs"] = [r[key] for r in runs]
    res["total"] = statistics.median(r["preview"] + r["erase"] for r in runs)
    res["maxrss"] = max(r["maxrss"] for r in runs)
    res["rss_open"] = min(r["rss_open"] for r in runs)
    res["above_open"] = max(r["maxrss"] - r["rss_open"] for r in runs)
    res["anon_above_open"] = max(r["anon_peak"] - r["anon_open"] for r in runs)
    checks = verify(last["repo_dir"], built, last, args)
    same = {(r["objects_deleted"], r["packs_rewritten"], r["bytes_rewritten"], str(r["retired"]))
            for r in runs}
    checks["runs_agree"] = len(same) == 1  # every copy erased exactly the same
    res["checks"] = checks
    log(f"  N={label(n)}: fsck {'ok' if checks['fsck_ok'] else 'NOT OK'} "
        f"({checks['fsck_seconds']:.1f}s); retired "
        f"{checks['retired'][:1]}..{checks['retired'][-1:]} "
        f"({'as expected' if checks['retired_ok'] else 'UNEXPECTED'}); byte search for "
        f"{checks['needles']} strings: {len(checks['hits'])} hits ({checks['scan_seconds']:.1f}s)")
    return res


# -- report --------------------------------------------------------------------------------------
def correct(r: dict[str, Any]) -> bool:
    c = r["checks"]
    return (c["fsck_ok"] and c["retired_ok"] and c["retired_refused"] and c["older_readable"]
            and c["cases_gone"] and not c["hits"] and c["runs_agree"])


def report(results: list[dict[str, Any]], args, elapsed: float, out: str) -> str:
    rows: list[tuple[str, ...]] = []

    def row(what, *cells, target="", ok=None):
        status = "" if ok is None else ("PASS" if ok else "MISS")
        rows.append((what, *cells, target + (f"  {status}" if status else "")))

    lo, hi = results[0], results[-1]
    grow = f"{label(hi['n'])}/{label(lo['n'])}"
    target = f"near 1x (<= {TOLERANCE}x)"
    # Memory is gated on the heap: the RSS rows also count the pages of the indexes it maps,
    # which grow with the repository and are the page cache's (docs/performance.md).
    gated = ("preview + erase", "bytes rewritten (record)",
             "peak anonymous RSS above that after open (sampled)")
    measures = [
        ("preview, fresh process (median)", lambda r: r["preview"], fmt_s),
        ("confirmed erase (median)", lambda r: r["erase"], fmt_s),
        ("preview + erase", lambda r: r["total"], fmt_s),
        ("bytes rewritten (record)", lambda r: r["bytes_rewritten"], fmt_b),
        ("peak RSS of the child (VmHWM)", lambda r: r["maxrss"], fmt_b),
        ("peak RSS above RSS after open", lambda r: r["above_open"], fmt_b),
        ("peak anonymous RSS above that after open (sampled)", lambda r: r["anon_above_open"],
         fmt_b),
        ("bytes read, preview", lambda r: r["io_preview"]["read"], fmt_b),
        ("bytes read, erase", lambda r: r["io_erase"]["read"], fmt_b),
        ("storage calls, preview", lambda r: sum(r["io_preview"]["calls"].values()), str),
        ("storage calls, erase", lambda r: sum(r["io_erase"]["calls"].values()), str),
        ("keys listed, preview + erase",
         lambda r: r["io_preview"]["listed"] + r["io_erase"]["listed"], str),
        ("packs rewritten", lambda r: r["packs_rewritten"], str),
        ("objects deleted", lambda r: r["objects_deleted"], str),
        ("cases / runs / reviews erased",
         lambda r: f"{r['cases_erased']} / {r['runs_erased']} / {r['reviews_erased']}", str),
        ("versions retired", lambda r: len(r["retired"]), str),
    ]
    for name, get, fmt in measures:
        a, b = get(lo), get(hi)
        if not isinstance(a, (int, float)) or len(results) < 2:
            row(name, *(fmt(get(r)) for r in results), "")
            continue
        g = b / a if a else float("inf")
        row(name, *(fmt(get(r)) for r in results), f"{g:.2f}x",
            target=target if name in gated else "", ok=(g <= TOLERANCE) if name in gated else None)
    if args.baseline:
        base = [r["baseline"] for r in results]
        row(f"preview + erase, baseline {args.baseline} (same rounds)", *map(fmt_s, base),
            f"{base[-1] / base[0]:.2f}x" if len(base) > 1 else "")
        row("preview + erase, this tree / baseline",
            *(f"{r['total'] / r['baseline']:.2f}x" for r in results), "")
    row("correct (below)", *("yes" if correct(r) else "NO" for r in results), "",
        target="all", ok=all(correct(r) for r in results))

    heads = ("measure", *(f"N={label(r['n'])}" for r in results), f"ratio {grow}", "target")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(heads, widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    extra = [f"correct: fsck ok; versions {lo['first_holder']}-{args.versions} retired and only "
             f"they; listing a retired version refused; version {lo['first_holder'] - 1} still "
             "reads; the erased cases are in no pack; no file under the repository holds the "
             "person id, a marker or an erased run id; every run erased the same."]
    for r in results:
        c = r["checks"]
        ms = lambda xs: [round(x * 1000) for x in xs]  # noqa: E731
        extra.append(
            f"N={label(r['n'])}: version 1 {r['base_n']} cases + {args.versions - 1} versions of "
            f"+{args.add} -{args.remove} (build {r['build_seconds']:.0f}s, untimed); repository "
            f"{fmt_b(r['repo_bytes'])} in {r['repo_files']} files ({r['packs']} packs, "
            f"{r['person_files']} person-index files); runs (ms): preview {ms(r['preview_runs'])}, "
            f"erase {ms(r['erase_runs'])}, open {ms(r['open_runs'])}; RSS after open "
            f"{fmt_b(r['rss_open'])}; directory {r['dir_delta']:+d} bytes, {r['files_delta']:+d} "
            f"files; storage calls: preview {r['io_preview']['calls']}, erase "
            f"{r['io_erase']['calls']} (written {fmt_b(r['io_erase']['written'])}); fsck "
            f"{c['fsck_seconds']:.1f}s; byte search of {c['needles']} strings "
            f"{c['scan_seconds']:.1f}s" + (f"; HITS: {c['hits']}" if c["hits"] else "")
            + ("" if correct(r) else f"; CHECKS: {c}"))
    head = (f"cas erasure benchmark: {platform.node()} {platform.machine()}, {os.cpu_count()} "
            f"CPUs, Python {platform.python_version()}, seed {args.seed}; person {PERSON!r} holds "
            f"{args.person_cases} cases added in versions {args.person_versions} of "
            f"{args.versions}; {args.repeat} erasures per size; total {elapsed:.0f} s; "
            f"work dir {out}")
    return "\n".join([head, "", *lines, "", *extra])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--million", action="store_true", help="N = 100k and 1M instead")
    p.add_argument("--sizes", help="comma-separated sizes instead of 10000,100000")
    p.add_argument("--versions", type=int, default=100)
    p.add_argument("--add", type=int, default=50, help="cases added by each small version")
    p.add_argument("--remove", type=int, default=10, help="cases removed by each small version")
    p.add_argument("--person-cases", type=int, default=10)
    p.add_argument("--person-versions", default="91,94,97",
                   help="the small versions that add the person's cases")
    p.add_argument("--with-runs", action="store_true",
                   help="also import N recorded runs (the person's 10 among them) and review "
                        "each, in batches of 10k, as bench/lifecycle.py does")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", help="work directory (default: a new directory under /tmp)")
    p.add_argument("--repeat", type=int, default=5,
                   help="erasures per size, each in a fresh hard-linked copy (medians reported)")
    p.add_argument("--keep", action="store_true",
                   help="keep the built repositories and the last erased copy of each")
    p.add_argument("--profile", action="store_true",
                   help="cProfile the confirmed erase (its time is then inflated)")
    p.add_argument("--json", dest="json_out", help="also write raw results as JSON here")
    p.add_argument("--reuse", action="store_true",
                   help="erase copies of the repositories an earlier run with --keep built in "
                        "--out (same options), instead of building them again")
    p.add_argument("--baseline", metavar="TREE",
                   help="another checkout of cas (a git worktree): each round also erases a "
                        "copy with that tree's own bench/erasure.py, and the report compares")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.child:
        what, *rest = args.child
        print(json.dumps({"erase": child_erase}[what](*rest)))
        return 0

    sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes else
             [100_000, 1_000_000] if args.million else [10_000, 100_000])
    sizes.sort()
    layout = person_layout(args)
    if min(layout) < 2 or max(layout) > args.versions or max(layout.values()) > args.add:
        p.error("--person-versions must be small versions (2..--versions) holding <= --add each")
    out = os.path.abspath(args.out) if args.out else tempfile.mkdtemp(prefix="cas-erasure-",
                                                                     dir="/tmp")
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
    built: dict[int, tuple[str, dict]] = {}
    for n in sizes:  # every size gets its own repository, built from nothing (untimed)
        log(f"N={n}: building")
        built_dir = os.path.join(out, f"erasure-{n}-built")
        facts = built_dir + ".json"  # what verify needs of the build, for --reuse
        if args.reuse and os.path.isdir(built_dir) and os.path.exists(facts):
            with open(facts) as f:
                built[n] = (built_dir, json.load(f))
            log("  reused the repository built before")
            continue
        built[n] = (built_dir, build(n, paths[n], built_dir, args, log))
        with open(facts, "w") as f:
            json.dump(built[n][1], f)
    runs: dict[int, list[dict]] = {n: [] for n in sizes}
    baseline: dict[int, list[float]] = {n: [] for n in sizes}
    for k in range(args.repeat):  # interleaved, so drift in the machine's load hits every size
        for n in sizes:
            runs[n].append(measure(n, built[n][0], out, k, args, log))
            if k < args.repeat - 1:
                shutil.rmtree(runs[n][-1]["repo_dir"], ignore_errors=True)
            if args.baseline:
                baseline[n].append(measure_baseline(n, built[n][0], out, args, log))
    results = []
    for n in sizes:
        results.append(finish(n, built[n][1], runs[n], args, log))
        if args.baseline:
            results[-1]["baseline"] = statistics.median(baseline[n])
        if not args.keep:
            shutil.rmtree(runs[n][-1]["repo_dir"], ignore_errors=True)
            shutil.rmtree(built[n][0], ignore_errors=True)
    print(report(results, args, time.perf_counter() - start, out))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0 if all(correct(r) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
