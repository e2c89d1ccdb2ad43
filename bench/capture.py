"""Capture overhead on the caller, and the local store's sustained records per second.

Run by hand (not a timed test):

    python bench/capture.py                  # 20k calls a round, 7 rounds
    python bench/capture.py --calls 50000 --rounds 9

Caller side: an agent function decorated with `@capture.invocation` is called N times with
capture on and a rule that rejects, then with one that accepts (the worker then builds and
stores a record per call, in the background), against the same decorated function with
capture off (CAS_CAPTURE=off: the decorator still builds nothing but checks the switch) and the
bare function. Rounds are interleaved so drift hits all alike; it prints the median
microseconds added per call against capture off (targets of issue 14: at most 20 us when the
rule rejects, 50 us when it accepts). The time the worker spends after the calls is not the
caller's and is excluded (the queue is drained between rounds, untimed).

Store: records through the whole pipeline (rule accepts, no redactor) into a LocalCaptureStore
in a temporary directory, timed from the first submit until `flush` returns: sustained records
per second, against appending the same records directly with `append_many_sync` (the file
writes alone).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cas import capture  # noqa: E402
from cas.capture_records import CaptureRecord  # noqa: E402


class NullStore:
    async def start(self): ...
    async def close(self): ...
    async def append(self, record): ...
    async def append_many(self, records): ...
    async def list(self, since=None, limit=100): return []


def agent(question: str) -> str:
    return "an answer to " + question


def timed_calls(fn, n: int) -> float:
    t = time.perf_counter()
    for i in range(n):
        fn("question")
    return (time.perf_counter() - t) / n


def configure(accept: bool) -> None:
    capture.reset()
    capture.register_store("null", NullStore())
    capture.rule(lambda e: accept, store="null", sample_rate=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args()
    decorated = capture.invocation(agent="bench")(agent)
    times: dict[str, list[float]] = {"bare": [], "off": [], "reject": [], "accept": []}
    for _ in range(args.rounds):
        times["bare"].append(timed_calls(agent, args.calls))
        os.environ["CAS_CAPTURE"] = "off"
        configure(True)
        times["off"].append(timed_calls(decorated, args.calls))
        del os.environ["CAS_CAPTURE"]
        for mode in ("reject", "accept"):
            configure(mode == "accept")
            times[mode].append(timed_calls(decorated, args.calls))
            capture.flush()
            assert capture.stats().get("dropped", 0) == 0, capture.stats()
    capture.reset()
    med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    print(f"{args.calls} calls x {args.rounds} rounds, Python {sys.version.split()[0]} "
          "(medians, us per call)")
    print(f"  bare function            {med['bare']:8.2f}")
    print(f"  decorated, capture off   {med['off']:8.2f}   (the baseline)")
    for mode, target in (("reject", 20), ("accept", 50)):
        added = med[mode] - med["off"]
        print(f"  decorated, rule {mode:6}   {med[mode]:8.2f}   +{added:.2f} us over off "
              f"({med[mode] / med['off']:.2f}x; target: at most +{target} us)")

    with tempfile.TemporaryDirectory(prefix="cas-bench-capture-") as tmp:
        store = capture.LocalCaptureStore(tmp)
        capture.register_store("local", store)
        capture.rule(lambda e: True, store="local")
        events = [capture.CaptureEvent(agent_name="bench", invocation_id=f"i{i}",
                                       input_text="q", output_text="a")
                  for i in range(args.records)]
        t = time.perf_counter()
        for e in events:
            while not capture.submit(e):  # the queue is full: wait as a steady producer would
                time.sleep(0.0005)
        capture.flush()
        pipeline = time.perf_counter() - t
        capture.reset()
        records = [CaptureRecord(id=f"cr-{i}", captured_at="2026-12-01T10:00:00.000000Z",
                                 agent_name="bench", invocation_id=f"i{i}",
                                 reasons=("rule",), status="completed")
                   for i in range(args.records)]
        direct = capture.LocalCaptureStore(os.path.join(tmp, "direct"))
        os.makedirs(direct.directory)
        t = time.perf_counter()
        for start in range(0, len(records), 100):
            direct.append_many_sync(records[start:start + 100])
        writes = time.perf_counter() - t
    print(f"\nlocal store, {args.records} records through the pipeline: "
          f"{args.records / pipeline:,.0f} records/s sustained; "
          f"the file writes alone {args.records / writes:,.0f} records/s "
          f"({pipeline / writes:.1f}x)")


if __name__ == "__main__":
    main()
