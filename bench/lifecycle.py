"""Lifecycle benchmark: recorded runs -> batch review -> promotion -> sealed versions, vs git.

Run by hand (not a timed test):

    python bench/lifecycle.py                  # 10k and 100k, 100 promotions each (a few minutes)
    python bench/lifecycle.py --git-versions 100   # the git baseline for all 100 versions too
    python bench/lifecycle.py --out DIR        # keep the work files in DIR (default: a new /tmp dir)

A. Promote N_small (10k) reviewed runs into one version: import the runs, review them in one
   batch (preview, then save with the token), stage one promotion (preview), seal it.
B. 100 promotions of 10 runs each onto the N_small version and onto an N_large (100k) version.
   Every promotion: import its 10 runs and review them (reported apart), then from a fresh
   `cas.open` stage the promotion (preview) and seal it (timed), and measure the bytes added to
   the repository. The N_large base is built by the same path in batches of N_small (import,
   batch review, promote, seal; `--base commit` instead commits the frozen cases directly).
C. git baseline: the dataset as one JSONL file (the frozen cases, one per line, in case-id
   order) rewritten for every version, then `git add` + `git commit`.

The runs are generated deterministically (bench/engine.py's generator, seed 1; the small
dataset's runs are a prefix of the large one's); the 100 x 10 promoted runs are the same for both
bases. See bench/README.md and docs/performance.md for what each row means.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

from engine import cli_command, dir_bytes, fmt_b, fmt_s, make_case, settle  # noqa: E402

DATASET = "bench"
REVIEWER = "Bench Reviewer <bench@example.com>"
AUTHOR = "bench"
METRIC, LABEL = "dataset_eligibility", "reviewed"
WARM = 100_000  # promotion numbers of the warm series (their runs differ from the cold ones)
MERGED = 200_000  # and of the series measured after merging the pack indexes (--merged)
CLI = 300_000  # and of the promotions made with the cas command


# -- runs ------------------------------------------------------------------------------------
def make_run(rng: random.Random, i: int) -> dict[str, Any]:
    """A recorded run in the schema of docs/runs.md, from engine.make_case's generator."""
    c = make_case(rng, i)
    meta = c["metadata"]
    run = {"run_id": meta.pop("run_id"), "tenant": c["tenant"], "person": c["person"],
           "started_at": meta.pop("recorded_at"), "input": c["input"], "output": c["output"],
           "steps": c["steps"], "outcome": c["outcome"], "metadata": meta}
    if i % 7 == 3:  # some tool answers not recorded, some recorded as null
        for step in run["steps"]:
            if step["type"] == "tool_call":
                del step["result"]
                break
    elif i % 11 == 5:
        for step in run["steps"]:
            if step["type"] == "tool_call":
                step["result"] = None
    return run


def generate(path: str, n: int, seed: int) -> str:
    """The first n runs of the seeded stream as JSON Lines (reused if already complete)."""
    import msgspec
    if os.path.exists(path):
        with open(path, "rb") as f:
            if sum(1 for _ in f) == n:
                return path
    rng = random.Random(seed)
    enc = msgspec.json.Encoder()
    with open(path + ".part", "wb") as f:
        for i in range(n):
            f.write(enc.encode(make_run(rng, i)) + b"\n")
    os.replace(path + ".part", path)
    return path


def extra_runs(seed: int, k: int, per: int) -> list[dict[str, Any]]:
    """The runs of promotion k: their own deterministic stream, the same for every base."""
    rng = random.Random(f"{seed}-promotion-{k}")
    return [make_run(rng, 10**9 + k * 1000 + j) for j in range(per)]


def read_lines(path: str, start: int, stop: int) -> bytes:
    out = []
    with open(path, "rb") as f:
        for i, line in enumerate(f):
            if i >= stop:
                break
            if i >= start:
                out.append(line)
    return b"".join(out)


def run_ids(data: bytes) -> list[str]:
    import msgspec
    return [msgspec.json.decode(line)["run_id"] for line in data.splitlines() if line.strip()]


# -- the lifecycle, one step per fresh cas.open (as one `cas` command would do it) ------------
class Meter:
    """Wall time and bytes added to the repository directory by one step."""

    def __init__(self, repo_dir: str) -> None:
        self.casdir = os.path.join(repo_dir, ".cas")

    def __enter__(self) -> "Meter":
        self.b0, self.f0 = dir_bytes(self.casdir)
        gc.collect()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.t0
        b1, f1 = dir_bytes(self.casdir)
        self.bytes, self.files = b1 - self.b0, f1 - self.f0


def import_and_review(repo_dir: str, source, ids: list[str]) -> tuple[list[str], dict]:
    """Import runs (a JSON Lines stream or a list of dicts), review them all in one batch.
    Returns (annotation ids, measures)."""
    import cas
    m: dict[str, Any] = {}
    with Meter(repo_dir) as t:
        result = cas.open(repo_dir).import_runs(source, author=AUTHOR)
    assert len(result.new) == len(ids), (len(result.new), len(ids))
    m["import"] = (t.seconds, t.bytes, t.files)
    requests = [{"run_id": r, "metric": METRIC, "label": LABEL} for r in ids]
    with Meter(repo_dir) as t:
        preview = cas.open(repo_dir).add_reviews(requests, reviewer=REVIEWER)
    m["review_preview"] = (t.seconds, t.bytes, t.files)
    with Meter(repo_dir) as t:
        saved = cas.open(repo_dir).add_reviews(requests, confirm_token=preview["confirm_token"],
                                               reviewer=REVIEWER)
    m["review_save"] = (t.seconds, t.bytes, t.files)
    return saved["annotation_ids"], m


def promote_and_seal(repo_dir: str, ids: list[str], annotations: list[str], key: str,
                     expect_count: int) -> dict:
    """Stage one promotion (preview) and seal it, each from a fresh cas.open."""
    import cas
    subjects = [{"subject_kind": "agent_run", "subject_ref": r, "review_annotation_id": a}
                for r, a in zip(ids, annotations)]
    with Meter(repo_dir) as tp:
        preview = cas.open(repo_dir).promote(DATASET, subjects, key, author=AUTHOR)
    with Meter(repo_dir) as ts:
        sealed = cas.open(repo_dir).seal(DATASET, preview["confirm_token"], author=AUTHOR)
    v = sealed.version
    assert v is not None and v.item_count == expect_count, (v, expect_count)
    return {"preview": (tp.seconds, tp.bytes, tp.files), "seal": (ts.seconds, ts.bytes, ts.files),
            "version": v.number, "item_count": v.item_count, "content_digest": v.content_digest}


def new_repo(repo_dir: str) -> None:
    import cas
    shutil.rmtree(repo_dir, ignore_errors=True)
    cas.init(repo_dir).create_dataset(DATASET, author=AUTHOR, admission="direct")


def part_a(jsonl: str, n: int, repo_dir: str, log) -> dict:
    """N reviewed runs promoted into one version."""
    new_repo(repo_dir)
    data = read_lines(jsonl, 0, n)
    ids = run_ids(data)
    annotations, m = import_and_review(repo_dir, io.BytesIO(data), ids)
    m.update(promote_and_seal(repo_dir, ids, annotations, "part-a", n))
    log(f"  A: import {fmt_s(m['import'][0])}, review {fmt_s(m['review_preview'][0])} + "
        f"{fmt_s(m['review_save'][0])}, promote preview {fmt_s(m['preview'][0])}, "
        f"seal {fmt_s(m['seal'][0])}")
    return m


def build_base(jsonl: str, n: int, chunk: int, repo_dir: str, how: str, log) -> dict:
    """An n-case dataset: import + review + promote + seal in chunks (or commit the cases)."""
    import cas
    from cas.format.projection import freeze
    from cas.format.records import RunRecord
    new_repo(repo_dir)
    t0 = time.perf_counter()
    for start in range(0, n, chunk):
        data = read_lines(jsonl, start, min(start + chunk, n))
        ids = run_ids(data)
        annotations, _ = import_and_review(repo_dir, io.BytesIO(data), ids)
        if how == "promote":
            promote_and_seal(repo_dir, ids, annotations, f"base-{start}", start + len(ids))
        log(f"  base: {start + len(ids)} runs ({time.perf_counter() - t0:.0f} s)")
    if how == "commit":
        r = cas.open(repo_dir)
        from cas.repo.runs import index as run_index
        cases = (freeze(r.store.get(d, RunRecord), [])
                 for _, d in sorted(run_index(r.context).all().items()))
        r.commit(DATASET, base=None, add=cases, author=AUTHOR, message="base")
    seconds = time.perf_counter() - t0
    r = cas.open(repo_dir)
    head = r.head(DATASET)
    assert r.version(DATASET, head).item_count == n
    return {"seconds": seconds, "how": how, "versions": head}


def head_count(repo_dir: str) -> int:
    import cas
    r = cas.open(repo_dir)
    return r.version(DATASET, r.head(DATASET)).item_count


def part_b(repo_dir: str, n: int, args, log, first: int = 0, count: int | None = None) -> dict:
    """`count` (default args.promotions) promotions of args.per runs each onto the head, each
    step from a fresh cas.open; promotion k uses extra_runs(seed, first + k)."""
    out: dict[str, list] = {"ingest": [], "preview": [], "seal": [], "total": [], "bytes": [],
                            "files": [], "ingest_bytes": []}
    done = head_count(repo_dir)
    for k in range(args.promotions if count is None else count):
        runs = extra_runs(args.seed, first + k, args.per)
        ids = [r["run_id"] for r in runs]
        annotations, m = import_and_review(repo_dir, runs, ids)
        out["ingest"].append(m["import"][0] + m["review_preview"][0] + m["review_save"][0])
        out["ingest_bytes"].append(m["import"][1] + m["review_save"][1])
        p = promote_and_seal(repo_dir, ids, annotations, f"promotion-{first + k}",
                             done + (k + 1) * args.per)
        out["preview"].append(p["preview"][0])
        out["seal"].append(p["seal"][0])
        out["total"].append(p["preview"][0] + p["seal"][0])
        out["bytes"].append(p["preview"][1] + p["seal"][1])
        out["files"].append(p["preview"][2] + p["seal"][2])
        if (k + 1) % 25 == 0:
            log(f"  B onto {n}: {k + 1} promotions, median preview+seal "
                f"{fmt_s(statistics.median(out['total']))}, "
                f"{fmt_b(statistics.median(out['bytes']))}")
    return out


def part_b_warm(repo_dir: str, n: int, args, log, first: int = WARM,
                count: int | None = None) -> dict:
    """Promotions from one long-lived Repository (run and review logs loaded once): what a
    service that keeps the repository open pays per promotion."""
    import cas
    done = head_count(repo_dir)
    from cas.repo import reviews, runs
    r = cas.open(repo_dir)
    runs.index(r.context).refresh()
    reviews.index(r.context).refresh()
    casdir = os.path.join(repo_dir, ".cas")
    out: dict[str, list] = {"ingest": [], "preview": [], "seal": [], "total": [], "bytes": []}
    for k in range(args.promotions if count is None else count):
        runs = extra_runs(args.seed, first + k, args.per)
        ids = [x["run_id"] for x in runs]
        t0 = time.perf_counter()
        r.import_runs(runs, author=AUTHOR)
        requests = [{"run_id": i, "metric": METRIC, "label": LABEL} for i in ids]
        token = r.add_reviews(requests, reviewer=REVIEWER)["confirm_token"]
        annotations = r.add_reviews(requests, confirm_token=token,
                                    reviewer=REVIEWER)["annotation_ids"]
        out["ingest"].append(time.perf_counter() - t0)
        subjects = [{"subject_kind": "agent_run", "subject_ref": i, "review_annotation_id": a}
                    for i, a in zip(ids, annotations)]
        b0, _ = dir_bytes(casdir)
        gc.collect()
        t0 = time.perf_counter()
        preview = r.promote(DATASET, subjects, f"promotion-{first + k}", author=AUTHOR)
        t1 = time.perf_counter()
        v = r.seal(DATASET, preview["confirm_token"], author=AUTHOR).version
        t2 = time.perf_counter()
        assert v is not None and v.item_count == done + (k + 1) * args.per, v
        out["preview"].append(t1 - t0)
        out["seal"].append(t2 - t1)
        out["total"].append(t2 - t0)
        out["bytes"].append(dir_bytes(casdir)[0] - b0)
    what = "warm" if first == WARM else "warm, merged indexes"
    log(f"  B {what} onto {n}: median preview+seal {fmt_s(statistics.median(out['total']))}")
    return out


def part_b_cli(repo_dir: str, args, cli: list[str], count: int = 7) -> list[float]:
    """Promotions through the command line: `cas promote --json` then `cas seal`, two processes
    (timed together; the runs are imported and reviewed through the library first)."""
    ts = []
    subjects_file = os.path.join(os.path.dirname(repo_dir), "subjects.json")
    for k in range(count):
        runs = extra_runs(args.seed, CLI + k, args.per)
        ids = [x["run_id"] for x in runs]
        annotations, _ = import_and_review(repo_dir, runs, ids)
        with open(subjects_file, "w") as f:
            json.dump([{"subject_kind": "agent_run", "subject_ref": i, "review_annotation_id": a}
                       for i, a in zip(ids, annotations)], f)
        t0 = time.perf_counter()
        p = subprocess.run(cli + ["--repo", repo_dir, "--json", "promote", DATASET, "--file",
                                  subjects_file, "--idempotency-key", f"promotion-{CLI + k}"],
                           capture_output=True, check=True)
        token = json.loads(p.stdout)["confirm_token"]
        subprocess.run(cli + ["--repo", repo_dir, "seal", DATASET, "--confirm-token", token],
                       capture_output=True, check=True)
        ts.append(time.perf_counter() - t0)
    return ts


def cold_index_loads(repo_dir: str, runs: int = 5, ids: int = 10) -> dict:
    """What a fresh process pays to resolve `ids` run ids and their reviews through the keyed
    log indexes, against reading both logs whole (what it did before them), side by side."""
    import random

    import cas
    from cas.repo import reviews
    from cas.repo import runs as run_log
    known = sorted(run_log.index(cas.open(repo_dir).context).all())
    wanted = random.Random(7).sample(known, ids)
    out: dict[str, list] = {"keyed": [], "whole": []}
    for _ in range(runs):
        for what in ("keyed", "whole"):
            r = cas.open(repo_dir)
            t0 = time.perf_counter()
            if what == "keyed":
                found = run_log.index(r.context).get_many(wanted)
                reviews.index(r.context).prefetch([], wanted)
                assert len(found) == ids
            else:
                run_log.index(r.context).all()
                reviews.index(r.context).all()
            out[what].append(time.perf_counter() - t0)
    return {what: statistics.median(ts) for what, ts in out.items()}


def store_shape(repo_dir: str) -> dict[str, int]:
    """What the writers' own upkeep (maintenance.maintain) left: packs, how many are small, and the
    indexes a fresh process searches for an object."""
    import cas
    from cas.storage.maintenance import SMALL_PACK
    repo = cas.open(repo_dir)
    packs = repo.store.pack_ids()
    small = sum(os.path.getsize(os.path.join(repo_dir, ".cas", "packs", f"{pid}.pack"))
                < SMALL_PACK for pid in packs)
    return {"packs": len(packs), "small": small,
            "indexes": len(repo.store.indexes())}


def merge_indexes(repo_dir: str) -> int:
    """Write one multi-pack index over every pack at once (writers now merge indexes as they
    go, maintenance.maintain: this shows what one full merge adds to that). Readers then search one
    index instead of one per pack."""
    import cas
    from cas.format.keys import PACKS, multi_index_key
    from cas.storage import pack as packfmt
    backend = cas.open(repo_dir).backend
    keys = [k for k in backend.list(PACKS) if k.endswith(".idx")]
    data = packfmt.format_multi_index([backend.get(k) for k in keys])
    backend.put_if_absent(multi_index_key(data[-packfmt.DIGEST_LEN:].hex()), data)
    return len(keys)


# -- git baseline ----------------------------------------------------------------------------
GIT_ENV = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
               GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.com")


def frozen(run: dict[str, Any]) -> tuple[str, bytes]:
    """(case id, canonical bytes) of the case a run becomes: the bytes cas stores."""
    from cas.format.projection import freeze
    from cas.format.records import encode_object
    from cas.repo.runs import parse_run
    _, data, case_id = encode_object(freeze(parse_run(run, "$"), []))
    return case_id, data


def git(work: str, *argv: str) -> None:
    subprocess.run(["git", *argv], cwd=work, check=True, env=GIT_ENV,
                   stdout=subprocess.DEVNULL)


def git_baseline(jsonl: str, n: int, work: str, args, log) -> dict:
    """The dataset as one JSONL file in case-id order, rewritten and committed per version."""
    import msgspec
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    git(work, "init", "-q")
    cases: dict[str, bytes] = {}
    with open(jsonl, "rb") as f:
        for i, line in enumerate(f):
            if i >= n:
                break
            case_id, data = frozen(msgspec.json.decode(line))
            cases[case_id] = data
    path = os.path.join(work, "dataset.jsonl")
    gitdir = os.path.join(work, ".git")

    def write() -> None:
        with open(path, "wb") as f:
            f.write(b"\n".join(cases[c] for c in sorted(cases)) + b"\n")

    t0 = time.perf_counter()
    write()
    git(work, "add", "dataset.jsonl")
    git(work, "commit", "-q", "-m", "version 1")
    first = time.perf_counter() - t0
    settle()
    out: dict[str, Any] = {"first": first, "file_bytes": os.path.getsize(path),
                           "seconds": [], "bytes": [], "write": [], "add": [], "commit": []}
    for k in range(min(args.git_versions, args.promotions)):
        for run in extra_runs(args.seed, k, args.per):
            case_id, data = frozen(run)
            cases[case_id] = data
        b0, _ = dir_bytes(gitdir)
        t0 = time.perf_counter()
        write()
        t1 = time.perf_counter()
        git(work, "add", "dataset.jsonl")
        t2 = time.perf_counter()
        git(work, "commit", "-q", "-m", f"version {k + 2}")
        t3 = time.perf_counter()
        b1, _ = dir_bytes(gitdir)
        out["seconds"].append(t3 - t0)
        out["write"].append(t1 - t0)
        out["add"].append(t2 - t1)
        out["commit"].append(t3 - t2)
        out["bytes"].append(b1 - b0)
    assert len(cases) == n + len(out["seconds"]) * args.per
    out["git_bytes"], _ = dir_bytes(gitdir)
    if args.git_gc:
        t0 = time.perf_counter()
        git(work, "gc", "-q")
        out["gc_seconds"] = time.perf_counter() - t0
        out["gc_bytes"], _ = dir_bytes(gitdir)
    log(f"  git {n}: first version {fmt_s(first)}, then median "
        f"{fmt_s(statistics.median(out['seconds']))} and "
        f"{fmt_b(statistics.median(out['bytes']))} per version ({len(out['seconds'])} versions)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return out


# -- report ----------------------------------------------------------------------------------
def label(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def ratio(x: float) -> str:
    return f"git/cas {x:.2f}x" if x < 20 else f"git/cas {x:.0f}x"


def p90(xs: list[float]) -> float:
    return sorted(xs)[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]


def report(res: dict, args, elapsed: float, out: str) -> str:
    rows: list[tuple[str, ...]] = []

    def row(part, what, result, baseline="", ratio="", target="", ok=None):
        status = "" if ok is None else ("PASS" if ok else "MISS")
        rows.append((part, what, result, baseline, ratio, target + (f"  {status}" if status else "")))

    small, large = args.small, args.large
    a = res["a"]
    S = label(small)
    for key, name in (("import", f"import {S} runs (one file)"),
                      ("review_preview", f"review {S} runs: preview"),
                      ("review_save", f"review {S} runs: save")):
        sec, b, files = a[key]
        row("A", name, fmt_s(sec), f"{fmt_b(b)} in {files} files" if b else "")
    for key, name in (("preview", f"promote {S} reviewed runs: preview"),
                      ("seal", f"promote {S}: seal -> 1 version")):
        sec, b, files = a[key]
        row("A", name, fmt_s(sec), f"{fmt_b(b)} in {files} files")
    row("A", f"promote {S}: preview + seal", fmt_s(a["preview"][0] + a["seal"][0]),
        f"{fmt_b(a['preview'][1] + a['seal'][1])}")
    per = args.per
    grow = f"{label(large)}/{label(small)}"
    target = "independent of N (<= 1.5x)"
    b_small, b_large = res["b"][small], res["b"][large]
    for n, b in ((small, b_small), (large, b_large)):
        L = label(n)
        row("B", f"cold: promote {per} onto {L}: preview (median)",
            fmt_s(statistics.median(b["preview"])))
        row("B", f"cold: promote {per} onto {L}: seal (median)", fmt_s(statistics.median(b["seal"])))
        row("B", f"cold: promote {per} onto {L}: preview + seal",
            fmt_s(statistics.median(b["total"])),
            f"p90 {fmt_s(p90(b['total']))}, max {fmt_s(max(b['total']))}")
        row("B", f"bytes per promotion onto {L} (median)",
            f"{fmt_b(statistics.median(b['bytes']))} ({statistics.median(b['files']):.0f} files)",
            f"max {fmt_b(max(b['bytes']))}")
    g = statistics.median(b_large["total"]) / statistics.median(b_small["total"])
    row("B", f"cold: preview + seal growth {grow}", "", "", f"{g:.2f}x", target, g <= 1.5)
    gb = statistics.median(b_large["bytes"]) / statistics.median(b_small["bytes"])
    row("B", f"bytes per promotion growth {grow}", "", "", f"{gb:.2f}x", target, gb <= 1.5)
    for n in (small, large):
        c = res["cold"][n]
        row("B", f"cold: resolve 10 run ids + their reviews, repo of {label(n)}",
            fmt_s(c["keyed"]), f"reading both logs whole {fmt_s(c['whole'])}",
            f"{c['whole'] / c['keyed']:.0f}x less")
    keyed = res["cold"][large]["keyed"] / res["cold"][small]["keyed"]
    row("B", f"cold: resolve 10 ids, growth {grow}", "", "", f"{keyed:.2f}x", target,
        keyed <= 1.5)
    w_small, w_large = res["warm"][small], res["warm"][large]
    for n, w in ((small, w_small), (large, w_large)):
        row("B", f"warm: promote {per} onto {label(n)}: preview + seal",
            fmt_s(statistics.median(w["total"])),
            f"preview {fmt_s(statistics.median(w['preview']))}, seal "
            f"{fmt_s(statistics.median(w['seal']))}, p90 {fmt_s(p90(w['total']))}")
    g = statistics.median(w_large["total"]) / statistics.median(w_small["total"])
    row("B", f"warm: preview + seal growth {grow}", "", "", f"{g:.2f}x",
        "<= 1.3x (issue 16)", g <= 1.3)
    for n in (small, large):
        shape = res["store"][n]
        row("B", f"after the promotions onto {label(n)}: packs; indexes a lookup searches",
            f"{shape['packs']}; {shape['indexes']}", f"{shape['small']} packs under 4 MiB",
            "", "a handful, no manual step (<= 16)", shape["indexes"] <= 16)
    for n in (small, large) if res["cli"] else ():
        row("B", f"CLI: cas promote + cas seal onto {label(n)}", fmt_s(statistics.median(res["cli"][n])),
            f"two processes; median of {len(res['cli'][n])}")
    for n, b, w in ((small, b_small, w_small), (large, b_large, w_large)):
        row("B", f"import + review {per} runs, repo of {label(n)} (not in the above)",
            f"cold {fmt_s(statistics.median(b['ingest']))}",
            f"warm {fmt_s(statistics.median(w['ingest']))}; "
            f"{fmt_b(statistics.median(b['ingest_bytes']))}")
    if res["merged"]:
        for mode in ("cold", "warm"):
            ms = {n: statistics.median(res["merged"][n][mode]["total"]) for n in (small, large)}
            for n in (small, large):
                row("B'", f"merged indexes, {mode}: promote {per} onto {label(n)}", fmt_s(ms[n]),
                    f"{res['merged'][n]['indexes']} indexes merged into one; "
                    f"{len(res['merged'][n][mode]['total'])} promotions")
            g = ms[large] / ms[small]
            row("B'", f"merged indexes, {mode}: growth {grow}", "", "", f"{g:.2f}x", target,
                g <= 1.5)
    for n in (small, large):
        git_r = res["git"].get(n)
        if not git_r:
            continue
        L = label(n)
        gt, gbytes = statistics.median(git_r["seconds"]), statistics.median(git_r["bytes"])
        ct, cbytes = statistics.median(res["b"][n]["total"]), statistics.median(res["b"][n]["bytes"])
        wt = statistics.median(res["warm"][n]["total"])
        row("C", f"git: rewrite {L} JSONL + add + commit, per version", fmt_s(gt),
            f"cas cold {fmt_s(ct)}", ratio(gt / ct), ">= 10x", gt / ct >= 10)
        row("C", f"git vs cas warm, {L}", "", f"cas warm {fmt_s(wt)}", ratio(gt / wt),
            ">= 10x", gt / wt >= 10)
        if res["cli"]:
            cl = statistics.median(res["cli"][n])
            row("C", f"git vs cas CLI, {L}", "", f"cas CLI {fmt_s(cl)}", ratio(gt / cl), ">= 10x",
                gt / cl >= 10)
        row("C", f"git: bytes added to .git per version, {L}", fmt_b(gbytes),
            f"cas {fmt_b(cbytes)}", ratio(gbytes / cbytes), ">= 10x",
            gbytes / cbytes >= 10)
    heads = ("part", "measure", "result", "baseline / detail", "ratio", "target")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(heads, widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    extra = []
    base = res["base"]
    extra.append(f"{label(large)} base built by {base['how']} in batches of {label(small)}: "
                 f"{base['seconds']:.1f} s, {base['versions']} versions before part B")
    for n in (small, large):
        b = res["b"][n]
        extra.append(f"onto {label(n)}: preview+seal min {fmt_s(min(b['total']))}, median "
                     f"{fmt_s(statistics.median(b['total']))}, p90 {fmt_s(p90(b['total']))}, max "
                     f"{fmt_s(max(b['total']))}; bytes min {fmt_b(min(b['bytes']))}, max "
                     f"{fmt_b(max(b['bytes']))}; repository after the cold, warm and CLI series "
                     f"{fmt_b(res['repo_bytes'][n][0])} in {res['repo_bytes'][n][1]} files")
        git_r = res["git"].get(n)
        if git_r:
            extra.append(
                f"git {label(n)}: file {fmt_b(git_r['file_bytes'])}, first commit "
                f"{fmt_s(git_r['first'])}; per version (median of {len(git_r['seconds'])}): write "
                f"{fmt_s(statistics.median(git_r['write']))}, add "
                f"{fmt_s(statistics.median(git_r['add']))}, commit "
                f"{fmt_s(statistics.median(git_r['commit']))}; .git {fmt_b(git_r['git_bytes'])}"
                + (f", after `git gc` {fmt_b(git_r['gc_bytes'])} ({fmt_s(git_r['gc_seconds'])})"
                   if "gc_bytes" in git_r else ""))
    head = (f"cas lifecycle benchmark: {platform.node()} {platform.machine()}, {os.cpu_count()} "
            f"CPUs, Python {platform.python_version()}, seed {args.seed}, "
            f"{args.promotions} promotions of {args.per} runs per base; total {elapsed:.0f} s; "
            f"work dir {out}")
    return "\n".join([head, "", *lines, "", *extra])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="work directory (default: a new directory under /tmp)")
    p.add_argument("--small", type=int, default=10_000, help="part A size and small base")
    p.add_argument("--large", type=int, default=100_000, help="large base size")
    p.add_argument("--promotions", type=int, default=100)
    p.add_argument("--per", type=int, default=10, help="runs per promotion in part B")
    p.add_argument("--base", choices=("promote", "commit"), default="promote",
                   help="how the large base is built (after importing and reviewing its runs)")
    p.add_argument("--git-versions", type=int, default=20,
                   help="versions committed in the git baseline (the first of the promotions)")
    p.add_argument("--merged", action="store_true",
                   help="then merge every pack index into one multi-pack index and measure "
                        "promotions/5 more promotions cold and warm")
    p.add_argument("--no-git", action="store_true")
    p.add_argument("--git-gc", action="store_true", help="also report .git after `git gc`")
    p.add_argument("--keep", action="store_true", help="keep the git work trees")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", dest="json_out", help="also write raw results as JSON here")
    args = p.parse_args(argv)
    if args.large % args.small:
        p.error("--large must be a multiple of --small (the base is built in --small batches)")

    out = os.path.abspath(args.out) if args.out else tempfile.mkdtemp(prefix="cas-lifecycle-",
                                                                      dir="/tmp")
    if os.path.commonpath([out, ROOT]) == ROOT:
        p.error("--out must be outside the repository")
    os.makedirs(out, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    start = time.perf_counter()
    jsonl = os.path.join(out, f"runs-s{args.seed}-{args.large}.jsonl")
    log(f"work dir {out}; generating {args.large} runs (seed {args.seed})")
    generate(jsonl, args.large, args.seed)
    res: dict[str, Any] = {"b": {}, "warm": {}, "cold": {}, "merged": {}, "cli": {}, "git": {},
                           "repo_bytes": {}, "store": {}}
    cli = cli_command()
    repos = {args.small: os.path.join(out, f"repo-{args.small}"),
             args.large: os.path.join(out, f"repo-{args.large}")}
    settle()
    log(f"A: {args.small} reviewed runs -> one version")
    res["a"] = part_a(jsonl, args.small, repos[args.small], log)
    log(f"base: {args.large} cases ({args.base})")
    res["base"] = build_base(jsonl, args.large, args.small, repos[args.large], args.base, log)
    for n in (args.small, args.large):
        settle()
        log(f"B: {args.promotions} promotions of {args.per} onto {n}")
        res["b"][n] = part_b(repos[n], n, args, log)
        res["cold"][n] = cold_index_loads(repos[n])
        res["warm"][n] = part_b_warm(repos[n], n, args, log)
        if cli:
            res["cli"][n] = part_b_cli(repos[n], args, cli)
            log(f"  B cli onto {n}: median {fmt_s(statistics.median(res['cli'][n]))}")
        res["repo_bytes"][n] = dir_bytes(os.path.join(repos[n], ".cas"))
        res["store"][n] = store_shape(repos[n])
        if args.merged:
            merged = merge_indexes(repos[n])
            count = max(1, args.promotions // 5)
            res["merged"][n] = {
                "indexes": merged,
                "cold": part_b(repos[n], n, args, log, first=MERGED, count=count),
                "warm": part_b_warm(repos[n], n, args, log, first=MERGED + count, count=count)}
    if not args.no_git:
        for n in (args.small, args.large):
            settle()
            log(f"C: git baseline at {n}")
            res["git"][n] = git_baseline(jsonl, n, os.path.join(out, f"git-{n}"), args, log)
    text = report(res, args, time.perf_counter() - start, out)
    print(text)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(res, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
