"""The suite runner: every case of a suite through an executor, at most `concurrency` at a time,
into one SuiteResult whose digest a rerun that changed nothing reproduces; shards, artefacts,
and a stop on SIGINT or SIGTERM that still returns a result (docs/suites.md)."""

from __future__ import annotations

import asyncio
import math
import os
import re
import signal
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

import msgspec

from cas.errors import CasError, FailedPrecondition, InvalidArgument
from cas.evals.calls import Threads, TimedOut, call, clean_reason, exception_text, is_async
from cas.evals.suites.executors import (check_cassettes, load_executor, load_scorer, returned_run,
                                        takes_keyword)
from cas.evals.suites.files import Suite, SuiteCase
from cas.evals.suites.recording import check_scores
from cas.evals.suites.results import (COMPLETED, ERRORED, INCOMPLETE, CaseResult, Shard, SuiteRef,
                                      SuiteResult, check_repeat, finish, repetition_seed, run_id)
from cas.format import encoding

DEFAULT_CONCURRENCY = 4
MAX_CONCURRENCY = 1024
DEFAULT_GRACE = 2.0  # seconds a stopped run waits for the cases already running
ARTEFACT_FILES = ("case.json", "run.json", "result.json", "timings.json")
NOT_STARTED = "not finished: written before the case ran (a run killed part way leaves this)"

# The temporary name of an artefact being written: `<artefact>.tmp-<pid>-<thread id>`.
_LEFTOVER = re.compile("(?:" + "|".join(re.escape(n) for n in ARTEFACT_FILES)
                       + r")\.tmp-\d+-\d+\Z")
_ENCODE = encoding.encode
_DECODE = msgspec.json.Decoder().decode


# -- artefacts ------------------------------------------------------------------------------
class _Artefacts:
    """`DIR/<suite name>/<case id>/`: case.json, run.json, result.json, timings.json; with
    more than one repetition, case.json there and the other three in `<case id>/<repetition>/`.
    Every file is written whole to a temporary name in its directory and renamed over the old
    one, so a reader (or a run killed with SIGKILL) only ever sees a whole file."""

    def __init__(self, root: str, suite: Suite, repeat: int = 1) -> None:
        # A Suite's name and case ids are safe path components (cas.suites.Suite checks them).
        self.dir = os.path.join(os.fspath(root), suite.name)
        self.ref = {"name": suite.name, "version": suite.version}
        self.repeat = repeat
        self._tmp = f".tmp-{os.getpid()}-{threading.get_ident()}"  # see _LEFTOVER

    def where(self, case_id: str, repetition: int | None = None) -> str:
        """The directory of a case (`repetition` None), or of one of its repetitions."""
        if repetition is None or self.repeat == 1:
            return os.path.join(self.dir, case_id)
        return os.path.join(self.dir, case_id, str(repetition))

    def write(self, case_id: str, name: str, value: Any, repetition: int | None = None) -> None:
        path = os.path.join(self.where(case_id, repetition), name)
        tmp = path + self._tmp
        with open(tmp, "wb") as f:
            f.write(msgspec.json.format(_ENCODE(value), indent=2))
            f.write(b"\n")
        os.replace(tmp, path)

    def result(self, r: CaseResult) -> None:
        doc = {"suite": self.ref, "id": r.id, "position": r.position, "run_id": r.run_id,
               "outcome": r.outcome, "answer": r.answer, "reason": r.reason,
               "scores": r.scores}
        if self.repeat > 1:
            doc["repetition"], doc["seed"] = r.repetition, r.seed
        self.write(r.id, "result.json", doc, r.repetition)

    def prepare(self, case: SuiteCase, placeholders: list[CaseResult]) -> None:
        """Before the first case runs: the case, and the result of each of its repetitions
        written as INCOMPLETE; what a previous run left of run.json and timings.json, and
        the temporary files a killed run left, are removed."""
        where = self.where(case.id)
        dirs = [where] if self.repeat == 1 else \
            [where] + [self.where(case.id, r.repetition) for r in placeholders]
        for d in dirs:
            os.makedirs(d, exist_ok=True)
            # A run killed mid-write leaves its temporary files (whole or partial,
            # unredacted): only this writer's own names (`<artefact>.tmp-<pid>-<thread>`)
            # are removed.
            stale = ["run.json", "timings.json"] + [n for n in os.listdir(d)
                                                    if _LEFTOVER.match(n)]
            for name in stale:
                try:
                    os.unlink(os.path.join(d, name))
                except FileNotFoundError:
                    pass
        view = {"id": case.id, "input": case.input, "tenant": case.tenant,
                "expected": case.expected, "user": case.user, "metadata": case.metadata}
        if case.frozen is not None:
            view["frozen"] = case.frozen
        try:
            encoding.check_json(view, "case")
        except InvalidArgument as exc:
            raise encoding.in_context(exc, f"case {case.id}", case_id=case.id) from None
        self.write(case.id, "case.json", view)
        for placeholder in placeholders:
            self.result(placeholder)


# -- the runner -----------------------------------------------------------------------------
class _State:
    """One run in progress: what is done, and whether (and why) it is being stopped."""

    def __init__(self, suite: Suite, slots: list[tuple[int, int, int, str]]) -> None:
        # one slot per (case, repetition): (position, repetition, its seed, its run id), in
        # suite order then repetition order; workers take them in that order
        self.suite, self.slots = suite, slots
        self.results: list[CaseResult | None] = [None] * len(slots)
        self.next = 0
        self.done = 0
        self.stop_reason: str | None = None
        self.stopped = asyncio.Event()
        self.hurried = asyncio.Event()

    def stop(self, why: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = why
            self.stopped.set()
        else:  # asked twice: stop waiting for the running cases
            self.hurried.set()


class SuiteRunner:
    """Runs a suite through `executor` with at most `concurrency` cases at a time.

    `executor(case, *, run_id)` is async, or a plain function (run in a pool of `concurrency`
    threads), or a name for `load_executor`. With `repeat` N, every case runs N times (each
    repetition its own run id and seed, `results.run_id` and `results.repetition_seed`);
    an executor that declares a `repetition` and/or `seed` parameter gets them. At most
    `concurrency` (case, repetition) pairs run at once. It returns a `Run` or a dict
    {answer, tenant, terminal=True}. An executor that declares a `cassette` parameter gets
    each case's cassette from `cassettes` (a cas.cassettes.CassetteBook); a run whose
    cassette was stale or left exchanges unused (strict) is ERRORED, and what it recorded is
    saved at the end.
    `scorer(case, answer) -> {metric: value}` (sync or async) scores each COMPLETED case.
    `timeout` (seconds) bounds each case's executor and scorer. `artefacts` is a directory
    for per-case evidence. `shard` ("i/n") runs only that shard's cases.
    On SIGINT or SIGTERM (with `handle_signals`, in the main thread) the run stops starting
    cases, waits up to `grace` seconds for the running ones (a second signal cuts it short),
    marks the rest INCOMPLETE and returns its result. `progress(done, total)` is called after
    each case.
    """

    def __init__(self, executor: Any, concurrency: int = DEFAULT_CONCURRENCY,
                 artefacts: Any = None, seed: int = 0, timeout: float | None = None,
                 scorer: Any = None, shard: Any = None, *, grace: float = DEFAULT_GRACE,
                 handle_signals: bool = True,
                 progress: Callable[[int, int], Any] | None = None,
                 cassettes: Any = None, repeat: int = 1) -> None:
        if isinstance(executor, str):
            executor = load_executor(executor)
        if not callable(executor):
            raise InvalidArgument(f"an executor is a function (case, *, run_id), not "
                                  f"{encoding.describe(executor)}", reason="INVALID_CALLABLE")
        if isinstance(scorer, str):
            scorer = load_scorer(scorer)
        if scorer is not None and not callable(scorer):
            raise InvalidArgument(f"a scorer is a function (case, answer), not "
                                  f"{encoding.describe(scorer)}", reason="INVALID_CALLABLE")
        if type(concurrency) is not int or not 1 <= concurrency <= MAX_CONCURRENCY:
            raise InvalidArgument(f"concurrency {encoding.describe(concurrency)} is not a whole "
                                  f"number from 1 to {MAX_CONCURRENCY}",
                                  reason="INVALID_CONCURRENCY")
        if type(seed) is not int or not -2 ** 63 <= seed < 2 ** 63:
            raise InvalidArgument(f"seed {encoding.describe(seed)} is not a 64-bit integer",
                                  reason="INVALID_SEED")
        for value, what in ((timeout, "timeout"), (grace, "grace")):
            if value is not None and (isinstance(value, bool) or
                                      not isinstance(value, (int, float)) or
                                      not math.isfinite(value) or value < 0 or
                                      (what == "timeout" and value == 0)):
                raise InvalidArgument(f"{what} {encoding.describe(value)} is not a number of "
                                      f"seconds {'above' if what == 'timeout' else 'from'} 0",
                                      reason="INVALID_TIMEOUT")
        if artefacts is not None and not isinstance(artefacts, (str, os.PathLike)):
            raise InvalidArgument(f"artefacts is a directory path, not "
                                  f"{encoding.describe(artefacts)}")
        self.repeat = check_repeat(repeat)
        self.executor, self.scorer = executor, scorer
        self.concurrency, self.seed, self.timeout = concurrency, seed, timeout
        self.artefacts = artefacts
        self.shard = None if shard is None else Shard.parse(shard)
        self.grace = DEFAULT_GRACE if grace is None else grace
        self.handle_signals, self.progress = handle_signals, progress
        self.cassettes = cassettes
        self._takes_cassette = check_cassettes(executor, cassettes is not None)
        self._takes_repetition = takes_keyword(executor, "repetition")
        self._takes_seed = takes_keyword(executor, "seed")
        self._async_executor = is_async(executor)
        self._async_scorer = scorer is not None and is_async(scorer)
        self._state: _State | None = None

    # -- entry points ---------------------------------------------------------------------
    def run(self, suite: Suite) -> SuiteResult:
        """Run `suite` in a new event loop (use `run_async` inside one)."""
        return asyncio.run(self.run_async(suite))

    def stop(self, why: str = "stopped") -> None:
        """Stop the run in progress as a signal would (from the loop's thread)."""
        if self._state is not None:
            self._state.stop(why)

    async def run_async(self, suite: Suite) -> SuiteResult:
        if not isinstance(suite, Suite):
            raise InvalidArgument(f"a suite runner runs a cas.suites.Suite, not "
                                  f"{encoding.describe(suite)}")
        cases = suite.cases  # ids unique and safe path components: a Suite checks them
        if self._takes_cassette and self.cassettes is None:
            raise FailedPrecondition(
                "the executor declares a `cassette` parameter: give the runner the suite's "
                "cassettes (SuiteRunner(..., cassettes=cas.cassettes.CassetteBook(repo, pin, "
                "executor_name, mode)))", reason="CASSETTES_REQUIRED")
        if getattr(self.executor, "needs_frozen", False):
            bare = next((c for c in cases if c.frozen is None), None)
            if bare is not None:
                raise FailedPrecondition(
                    f"executor cas:{getattr(self.executor, '__name__', 'replay').split('_')[0]}"
                    f" answers from the frozen cases of a version, and suite "
                    f"{suite.name!r} has none (case {bare.id} is not frozen: a suite file "
                    "carries no frozen case); run it from the repository as DATASET@N",
                    reason="FROZEN_CASE_REQUIRED", case_id=bare.id)
        ref = SuiteRef(suite.name, suite.version)
        shard = None if self.shard is None else \
            Shard(self.shard.index, self.shard.count, len(cases))
        positions = range(len(cases)) if shard is None else shard.positions(len(cases))
        seeds = [repetition_seed(self.seed, k) for k in range(self.repeat)]
        # a shard holds every repetition of its cases: shards split cases, never repetitions
        slots = [(p, k, seeds[k], run_id(suite.name, suite.version, cases[p].id, self.seed, k))
                 for p in positions for k in range(self.repeat)]
        st = _State(suite, slots)
        art = None
        if self.artefacts is not None:
            art = _Artefacts(self.artefacts, suite, self.repeat)
            for j, p in enumerate(positions):  # all of them before the first case runs
                art.prepare(cases[p], [CaseResult(
                    id=cases[p].id, position=p, run_id=rid, outcome=INCOMPLETE,
                    reason=NOT_STARTED, repetition=k, seed=sd)
                    for _, k, sd, rid in slots[j * self.repeat:(j + 1) * self.repeat]])
        loop = asyncio.get_running_loop()
        needs_threads = not self._async_executor or \
            (self.scorer is not None and not self._async_scorer)
        threads = Threads(self.concurrency, loop) if needs_threads else None
        self._state = st
        installed = self._install_signals(loop, st)
        try:
            await self._supervise(st, art, threads)
        finally:
            for sig, old in installed:
                loop.remove_signal_handler(sig)
                if old is not None:
                    signal.signal(sig, old)
            if threads is not None:
                threads.close()
            self._state = None
        if self.cassettes is not None:
            self.cassettes.save()  # what the cases that completed recorded (also when stopped)
        why = st.stop_reason or "stopped"
        results = st.results
        for i, (p, k, sd, rid) in enumerate(slots):
            if results[i] is None:
                r = CaseResult(id=cases[p].id, position=p, run_id=rid, outcome=INCOMPLETE,
                               reason=f"not started: the suite was {why}", repetition=k,
                               seed=sd)
                results[i] = r
                if art is not None:
                    art.result(r)
        return finish(ref, self.seed, results, shard, self.repeat)  # type: ignore[arg-type]

    def _install_signals(self, loop, st: _State) -> list:
        installed: list = []
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return installed
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                old = signal.getsignal(sig)
                loop.add_signal_handler(sig, st.stop, f"stopped by {sig.name}")
            except (ValueError, RuntimeError, NotImplementedError):  # not on this platform
                continue
            installed.append((sig, old))
        return installed

    async def _supervise(self, st: _State, art: _Artefacts | None, threads) -> None:
        n = min(self.concurrency, len(st.slots))
        workers = [asyncio.ensure_future(self._worker(st, art, threads)) for _ in range(n)]
        if not workers:
            return
        group = asyncio.gather(*workers)
        group.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: no warning
        stopped = asyncio.ensure_future(st.stopped.wait())
        try:
            await asyncio.wait((group, stopped), return_when=asyncio.FIRST_COMPLETED)
            if not group.done():  # stopped: let the running cases finish, briefly
                hurried = asyncio.ensure_future(st.hurried.wait())
                await asyncio.wait((group, hurried), timeout=self.grace,
                                   return_when=asyncio.FIRST_COMPLETED)
                hurried.cancel()
                for w in workers:
                    w.cancel()  # each marks its case INCOMPLETE and returns
            await group
        finally:
            stopped.cancel()
            running = [w for w in workers if not w.done()]
            if running:  # cancelled from outside, or a worker failed (gather leaves the rest)
                for w in running:
                    w.cancel()
                await asyncio.gather(*running, return_exceptions=True)

    async def _worker(self, st: _State, art: _Artefacts | None, threads) -> None:
        cases, slots, total = st.suite.cases, st.slots, len(st.slots)
        progress = self.progress
        while st.stop_reason is None and st.next < total:
            i = st.next
            st.next += 1
            slot = slots[i]
            case = cases[slot[0]]
            started = time.time() if art is not None else 0.0
            try:
                result, run_doc = await self._case(case, slot, threads)
            except asyncio.CancelledError:
                if st.stop_reason is None:
                    raise  # cancelled from outside the runner: not ours to swallow
                task = asyncio.current_task()
                if task is not None and hasattr(task, "uncancel"):
                    task.uncancel()
                result = CaseResult(id=case.id, position=slot[0], run_id=slot[3],
                                    outcome=INCOMPLETE,
                                    reason=f"{st.stop_reason} before the case finished",
                                    repetition=slot[1], seed=slot[2])
                run_doc = {"run_id": slot[3], "status": "stopped"}
            st.results[i] = result
            st.done += 1
            if art is not None:
                finished = time.time()
                art.write(case.id, "run.json", run_doc, slot[1])
                art.write(case.id, "timings.json", {
                    "started_at": _iso(started), "finished_at": _iso(finished),
                    "seconds": round(finished - started, 6)}, slot[1])
                art.result(result)
            if progress is not None:
                progress(st.done, total)

    async def _case(self, case: SuiteCase, slot: tuple[int, int, int, str],
                    threads) -> tuple[CaseResult, dict]:
        """One repetition of one case, within `timeout` seconds in all: the executor, what it
        returned, the scorer. Returns its result and what its run.json says."""
        position, repetition, seed, rid = slot

        def result(outcome: str, reason: str | None = None, answer: Any = None,
                   scores: dict | None = None) -> CaseResult:
            return CaseResult(id=case.id, position=position, run_id=rid, outcome=outcome,
                              answer=answer, reason=reason, scores=scores,
                              repetition=repetition, seed=seed)
        loop = asyncio.get_running_loop()
        deadline = None if self.timeout is None else loop.time() + self.timeout

        def left() -> float | None:
            return None if deadline is None else max(0.0, deadline - loop.time())

        def timed_out(phase: str) -> tuple[CaseResult, dict]:
            return (result(INCOMPLETE, f"timed out after {self.timeout:g} s (in the {phase})"),
                    {"run_id": rid, "status": "timed_out", "phase": phase})
        cassette = self.cassettes.cassette(case.id) if self._takes_cassette else None
        more = {} if cassette is None else {"cassette": cassette}
        if self._takes_repetition:
            more["repetition"] = repetition
        if self._takes_seed:
            more["seed"] = seed
        try:
            returned = await call(self.executor, (case,), {"run_id": rid, **more},
                                  threads=threads, timeout=left())
        except TimedOut:
            return timed_out("executor")
        except Exception as exc:
            text = exception_text(exc)
            return (result(ERRORED, f"the executor raised {text}"),
                    {"run_id": rid, "status": "raised", "error": text,
                     **_cassette_doc(cassette)})
        ended, reason, answer, doc = self._returned(case, rid, returned, cassette)
        if ended is not None:
            return result(ended, reason), doc
        if self.scorer is None:
            return result(COMPLETED, answer=answer), doc
        try:
            scores = await call(self.scorer, (case, answer), threads=threads, timeout=left())
        except TimedOut:
            return timed_out("scorer")
        except Exception as exc:
            return result(ERRORED, f"the scorer raised {exception_text(exc)}"), doc
        checked, problem = check_scores(scores)
        if problem is not None:
            return result(ERRORED, clean_reason(f"the scorer returned {problem}")), doc
        return result(COMPLETED, answer=answer, scores=checked), doc

    def _returned(self, case: SuiteCase, rid: str, returned: Any,
                  cassette) -> tuple[str | None, str | None, Any, dict]:
        """What the executor returned, checked in order of what matters most: its shape, whose
        data it is, whether it finished, whether its answer can be written at all; then what
        its cassette left unused. (the outcome when the case ends here, else None; its reason;
        the answer as plain JSON values; what run.json says)."""
        run, problem = returned_run(returned)
        if run is None:
            return ERRORED, problem, None, {"run_id": rid, "status": "returned",
                                            "returned": encoding.describe(returned)}
        doc = {"run_id": rid, "status": "returned", "tenant": run.tenant,
               "terminal": run.terminal}
        if run.tenant != case.tenant:
            # Another tenant's answer is never scored, and never copied into the result.
            doc["answer"] = None
            return ERRORED, (f"the run answered for tenant {run.tenant!r}, not the case's "
                             f"tenant {case.tenant!r}"), None, doc
        try:
            encoding.check_json(run.answer, "answer")
        except InvalidArgument as exc:  # InvalidJSONValue, or nested too deep
            doc["answer_repr"] = encoding.describe(run.answer)
            problem = f"the answer is not a JSON value: {exc.message}"
            return ERRORED, clean_reason(problem), None, doc
        answer = _DECODE(_ENCODE(run.answer))  # plain JSON values, shared with nobody
        doc["answer"] = answer
        doc.update(_cassette_doc(cassette))
        if not run.terminal:
            return INCOMPLETE, "the run came back non-terminal", None, doc
        if cassette is not None:
            try:
                cassette.check()  # strict: exchanges the run never asked for are an error
            except CasError as exc:
                return ERRORED, exc.message, None, doc
            self.cassettes.keep(case.id, cassette)
        return None, None, answer, doc


def _cassette_doc(cassette) -> dict:
    """What run.json says of a case's cassette (never part of the result or its digest)."""
    if cassette is None:
        return {}
    return {"cassette": {"mode": cassette.mode, "recorded": len(cassette.recorded),
                         "exchanges": len(cassette.exchanges), "unused": len(cassette.unused()),
                         "changed": cassette.changed}}


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
