"""The suite runner: every case of a suite through an executor, into one SuiteResult whose digest
a rerun that changed nothing reproduces (docs/suites.md)."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import math
import os
import queue
import re
import signal
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Union

import msgspec
from blake3 import blake3

from cas.format import encoding
from cas.digest import PREFIX, SUITE_RESULT_DOMAIN, SUITE_RUN_ID_DOMAIN, parse_digest
from cas.errors import (AlreadyExists, CasError, FailedPrecondition, InvalidArgument,
                        InvalidJSONValue)
from cas.evals.suites.files import Suite, SuiteCase

COMPLETED, ERRORED, INCOMPLETE = OUTCOMES = ("COMPLETED", "ERRORED", "INCOMPLETE")
# The exit codes of a run that is not ok. They sit above the CLI's error codes (1-8, cli/main.py
# EXIT_CODES), so a CI script tells "the suite ran and is not green" from "the command was
# refused": 10 when any case ERRORED (the harness or the agent broke: a rerun will not fix it),
# else 11 when any case is INCOMPLETE (timed out, non-terminal, or stopped: it may on a rerun).
EXIT_OK, EXIT_ERRORED, EXIT_INCOMPLETE = 0, 10, 11
RESULT_FORMAT = 1
DEFAULT_CONCURRENCY = 4
MAX_CONCURRENCY = 1024
DEFAULT_GRACE = 2.0  # seconds a stopped run waits for the cases already running
MAX_REASON = 2000    # characters of a reason kept (an exception can carry a whole page)

# Derived identifiers, each BLAKE3 in a domain of its own (cas.digest, docs/format.md 3.1).
_RUN_ID = blake3(SUITE_RUN_ID_DOMAIN)
_RESULT_DIGEST = blake3(SUITE_RESULT_DOMAIN)
RUN_ID_PREFIX = "sr-"

ARTEFACT_FILES = ("case.json", "run.json", "result.json", "timings.json")
SHIPPED_EXECUTORS = ("cas:echo", "cas:replay", "cas:cassette")
NOT_STARTED = "not finished: written before the case ran (a run killed part way leaves this)"

_ENCODE = encoding.encode
_DECODE = msgspec.json.Decoder().decode


# -- records --------------------------------------------------------------------------------
class Run(msgspec.Struct, frozen=True):
    """What an executor returns: the answer, the tenant it answered for, and whether the run
    reached its end (a non-terminal run is INCOMPLETE)."""

    answer: Any
    tenant: str
    terminal: bool = True


class SuiteRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    version: str


class Shard(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Shard `index` of `count` (1-based, written `index/count`): the cases at positions p with
    p % count == index - 1. `cases` is the whole suite's case count (set in results)."""

    index: int
    count: int
    cases: Union[int, None] = None

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: Any) -> "Shard":
        """`i/n` with 1 <= i <= n (ASCII digits), a Shard, or a pair (i, n)."""
        if isinstance(text, Shard):
            return _check_shard(text.index, text.count, str(text))
        if isinstance(text, tuple) and len(text) == 2:
            return _check_shard(text[0], text[1], f"{text[0]}/{text[1]}")
        m = _SHARD_RE.match(text) if isinstance(text, str) else None
        if m is None:
            raise InvalidArgument(f"shard {encoding.describe(text)} is not i/n (e.g. 2/4: the "
                                  "second of four shards)", reason="INVALID_SHARD")
        return _check_shard(int(m[1]), int(m[2]), text)

    def positions(self, total: int) -> range:
        return range(self.index - 1, total, self.count)


_SHARD_RE = re.compile(r"([0-9]{1,7})/([0-9]{1,7})\Z", re.ASCII)


def _check_shard(index: Any, count: Any, text: str) -> Shard:
    if not (type(index) is int and type(count) is int and 1 <= index <= count):
        raise InvalidArgument(f"shard {text!r} is not i/n with 1 <= i <= n (e.g. 2/4)",
                              reason="INVALID_SHARD")
    return Shard(index, count)


class CaseResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One case's verdict. `answer` (a JSON value) and `scores` are set only when COMPLETED;
    `reason` says why a case is not (and is None when it is)."""

    id: str
    position: int  # 0-based index of the case in the suite
    run_id: str
    outcome: str
    answer: Any = None
    reason: Union[str, None] = None
    scores: Union[dict[str, Union[bool, int, float, str]], None] = None


class SuiteResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                  omit_defaults=True):
    """The verdict of one run of a suite (or of one shard of it), results in suite order."""

    suite: SuiteRef
    seed: int
    ok: bool
    exit_code: int
    digest: str
    counts: dict[str, int]
    results: tuple[CaseResult, ...]
    shard: Union[Shard, None] = None

    def to_json(self) -> dict[str, Any]:
        """The object `cas suite run --json` prints."""
        return msgspec.to_builtins(self)


class Recorded(msgspec.Struct, frozen=True, kw_only=True):
    """What `record` stored: the experiment (created now or found), and the score batch."""

    dataset: str
    version: int
    experiment: str
    created: bool
    batch: Union[str, None]  # the batch id, None when there was nothing to record
    scores: int


# -- derived identifiers --------------------------------------------------------------------
def run_id(suite_name: str, suite_version: str, case_id: str, seed: int = 0) -> str:
    """`sr-` + 32 hex: BLAKE3("cas:suite-run-id" 0x00 || canonical JSON of
    [suite_name, suite_version, case_id, seed]), truncated to 128 bits. Two machines running
    the same suite with the same seed agree on every run id without talking."""
    h = _RUN_ID.copy()
    h.update(_ENCODE((suite_name, suite_version, case_id, seed)))
    return RUN_ID_PREFIX + h.hexdigest()[:32]


def result_digest(suite: SuiteRef, results: Iterable[CaseResult],
                  shard: Shard | None = None) -> str:
    """`b3:` + BLAKE3("cas:suite-result" 0x00 || canonical JSON of {"format": 1, "suite":
    {name, version}, "results": [every CaseResult, in suite order]} (and "shard" {index,
    count, cases} for a shard)). Answers, outcomes, reasons, scores and run ids (hence the
    seed) are covered; timings are never in a result."""
    doc: dict[str, Any] = {"format": RESULT_FORMAT, "suite": suite, "results": list(results)}
    if shard is not None:
        doc["shard"] = shard
    h = _RESULT_DIGEST.copy()
    h.update(_ENCODE(doc))
    return PREFIX + h.hexdigest()


def _finish(suite: SuiteRef, seed: int, results: list[CaseResult],
            shard: Shard | None) -> SuiteResult:
    counts = {COMPLETED: 0, ERRORED: 0, INCOMPLETE: 0}
    for r in results:
        counts[r.outcome] += 1
    ok = counts[COMPLETED] == len(results)
    code = EXIT_OK if ok else EXIT_ERRORED if counts[ERRORED] else EXIT_INCOMPLETE
    return SuiteResult(suite=suite, seed=seed, ok=ok, exit_code=code,
                       digest=result_digest(suite, results, shard), counts=counts,
                       results=tuple(results), shard=shard)


# -- shipped executors ----------------------------------------------------------------------
async def echo(case: SuiteCase, *, run_id: str) -> Run:
    """`cas:echo`: answers with the case's input, for the case's tenant (for trying things)."""
    return Run(case.input, case.tenant)


def replay_executor(plan: Any = None, *, withheld: Iterable[str] = ()) -> Callable:
    """`cas:replay`: the sandbox replay (cas.evals.replay.replay_case) of the case's frozen case
    under `plan`, answering with the replayed run's output for the frozen case's tenant. Only
    a suite from a version has frozen cases (the runner refuses the others up front).
    `withheld`: content classes left out of the frozen case first, as `cas replay` leaves out
    what the dataset's content policy withholds now (`repo.content_policy(dataset).withheld`)."""
    from cas.evals import replay as _replay  # the replay module reads repositories: import on use
    from cas.repo.proposals import withhold
    parsed = _replay.parse_plan(plan)
    withheld = list(withheld)

    async def replay(case: SuiteCase, *, run_id: str) -> Run:
        if case.frozen is None:
            raise FailedPrecondition(f"case {case.id} has no frozen case to replay",
                                     reason="FROZEN_CASE_REQUIRED", case_id=case.id)
        frozen = withhold(case.frozen, withheld) if withheld else case.frozen
        replayed = _replay.replay_case(frozen, parsed).run
        return Run(replayed.output, replayed.tenant)
    replay.needs_frozen = True  # type: ignore[attr-defined]
    replay.plan_digest = _replay.plan_digest(parsed)  # type: ignore[attr-defined]
    return replay


async def cassette_executor(case: SuiteCase, *, run_id: str, cassette) -> Run:
    """`cas:cassette`: the frozen case's tool calls, in order, each answered from the case's
    cassette (request: the tool's name and recorded arguments). In a recording mode a call
    with no recording gets the frozen case's own answer ({"result"} or {"error"}, {} when it
    recorded none), which seeds cassettes from the version. The answer is the frozen
    output, for the frozen case's tenant: what the cassette adds is that every call is
    answered (a missing or stale one errors) and none is left over."""
    if case.frozen is None:
        raise FailedPrecondition(f"case {case.id} has no frozen case to answer from its "
                                 "cassette", reason="FROZEN_CASE_REQUIRED", case_id=case.id)
    from cas.evals.replay import ANSWER_KEYS
    for step in case.frozen.steps:
        name = step.get("tool_name")
        if step.get("type") != "tool_call" or not isinstance(name, str) or not name:
            continue
        recorded = {k: step[k] for k in ANSWER_KEYS if k in step}
        cassette.call(name, {"arguments": step.get("arguments")}, lambda: recorded)
    return Run(case.frozen.output, case.frozen.tenant)
cassette_executor.needs_frozen = True  # type: ignore[attr-defined]


def takes_cassette(executor: Callable) -> bool:
    """Whether an executor declares a `cassette` parameter (it then gets the case's)."""
    try:
        params = inspect.signature(executor).parameters
    except (TypeError, ValueError):
        return False
    param = params.get("cassette")
    return param is not None and param.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                 inspect.Parameter.POSITIONAL_OR_KEYWORD)


def load_callable(spec: Any, what: str = "executor") -> Callable:
    """The callable `module:function` names (`function` may be dotted: `module:Class.method`)."""
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise InvalidArgument(f"{what} {encoding.describe(spec)} is not module:function "
                              "(e.g. my_agent.evals:run_case)", reason="INVALID_CALLABLE")
    module_name, _, attr = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # the user's module failed to import: say how, never a traceback
        raise InvalidArgument(f"{what} {spec!r}: cannot import {module_name!r} "
                              f"({exception_text(exc)})", reason="INVALID_CALLABLE") from None
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise InvalidArgument(f"{what} {spec!r}: {module_name!r} has no {attr!r}",
                                  reason="INVALID_CALLABLE") from None
    if not callable(target):
        raise InvalidArgument(f"{what} {spec!r} is a {type(target).__name__}, not a function",
                              reason="INVALID_CALLABLE")
    return target


def load_executor(spec: Any, plan: Any = None) -> Callable:
    """An executor by name: `cas:echo`, `cas:replay` (needs `plan`), `cas:cassette`, or
    `module:function`. A plan with any executor other than `cas:replay` is refused (it would
    do nothing)."""
    if spec == "cas:replay":
        if plan is None:
            raise InvalidArgument("executor cas:replay needs a plan (--plan FILE: the effect "
                                  "of each tool, docs/replay.md)", reason="PLAN_REQUIRED")
        return replay_executor(plan)
    if plan is not None:
        raise InvalidArgument(f"a plan is only for executor cas:replay, not "
                              f"{encoding.describe(spec)}", reason="PLAN_UNUSED")
    if spec == "cas:echo":
        return echo
    if spec == "cas:cassette":
        return cassette_executor
    if isinstance(spec, str) and spec.startswith("cas:"):
        raise InvalidArgument(f"cas ships no executor {spec!r}; shipped: "
                              f"{', '.join(SHIPPED_EXECUTORS)}", reason="INVALID_CALLABLE")
    return load_callable(spec, "executor")


def load_scorer(spec: Any) -> Callable:
    return load_callable(spec, "scorer")


# -- helpers ----------------------------------------------------------------------------------
def exception_text(exc: BaseException) -> str:
    """`Type: message` of an exception (`module.Type` outside the builtins), one line, kept
    short and always encodable."""
    cls = type(exc)
    name = cls.__qualname__ if cls.__module__ == "builtins" else \
        f"{cls.__module__}.{cls.__qualname__}"
    try:
        message = exc.message if isinstance(exc, CasError) else str(exc)
    except Exception:
        message = ""
    return clean_reason(f"{name}: {message}" if message else name)


def clean_reason(text: str) -> str:
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # no lone surrogate
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + "..."


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def is_async(fn: Callable) -> bool:
    return inspect.iscoroutinefunction(fn) or \
        inspect.iscoroutinefunction(getattr(fn, "__call__", None))


class _Threads:
    """A fixed pool of daemon threads for plain-function executors and scorers. Daemon, and
    not concurrent.futures: a sync call that timed out or was stopped cannot be killed, and
    must not keep the process from exiting."""

    def __init__(self, size: int, loop: asyncio.AbstractEventLoop) -> None:
        self._size, self._loop = size, loop
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def call(self, fn: Callable, *args: Any, **kwargs: Any) -> asyncio.Future:
        future = self._loop.create_future()
        if len(self._threads) < self._size:
            t = threading.Thread(target=self._work, name="cas-suite-runner", daemon=True)
            t.start()
            self._threads.append(t)
        self._queue.put((future, fn, args, kwargs))
        return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args, kwargs = item
            try:
                value, error = fn(*args, **kwargs), None
            except BaseException as exc:  # handed to the loop, which decides
                value, error = None, exc
            try:
                self._loop.call_soon_threadsafe(settle, future, value, error)
            except RuntimeError:  # the loop is closed: nobody waits for this any more
                pass

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)


def settle(future: asyncio.Future, value: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled: the case was already marked
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def _timeout(seconds: float):
    return asyncio.timeout(seconds)


if not hasattr(asyncio, "timeout"):  # Python 3.10: wait_for does the same, at a task's cost
    _timeout = None  # type: ignore[assignment]


# -- artefacts ------------------------------------------------------------------------------
class _Artefacts:
    """`DIR/<suite name>/<case id>/`: case.json, run.json, result.json, timings.json. Every
    file is written whole to a temporary name in its directory and renamed over the old one,
    so a reader (or a run killed with SIGKILL) only ever sees a whole file."""

    def __init__(self, root: str, suite: Suite) -> None:
        # A Suite's name and case ids are safe path components (cas.evals.suites checks them).
        self.dir = os.path.join(os.fspath(root), suite.name)
        self.ref = {"name": suite.name, "version": suite.version}
        self._tmp = f".tmp-{os.getpid()}-{threading.get_ident()}"

    def write(self, case_id: str, name: str, value: Any) -> None:
        path = os.path.join(self.dir, case_id, name)
        tmp = path + self._tmp
        with open(tmp, "wb") as f:
            f.write(msgspec.json.format(_ENCODE(value), indent=2))
            f.write(b"\n")
        os.replace(tmp, path)

    def result(self, r: CaseResult) -> None:
        self.write(r.id, "result.json", {"suite": self.ref, "id": r.id, "position": r.position,
                                         "run_id": r.run_id, "outcome": r.outcome,
                                         "answer": r.answer, "reason": r.reason,
                                         "scores": r.scores})

    def prepare(self, case: SuiteCase, placeholder: CaseResult) -> None:
        """Before the first case runs: the case, and its result written as INCOMPLETE; what a
        previous run left of run.json and timings.json is removed."""
        where = os.path.join(self.dir, case.id)
        os.makedirs(where, exist_ok=True)
        for stale in ("run.json", "timings.json"):
            try:
                os.unlink(os.path.join(where, stale))
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
        self.result(placeholder)


# -- the runner -----------------------------------------------------------------------------
class _State:
    """One run in progress: what is done, and whether (and why) it is being stopped."""

    def __init__(self, suite: Suite, positions: range, run_ids: list[str]) -> None:
        self.suite, self.positions, self.run_ids = suite, positions, run_ids
        self.results: list[CaseResult | None] = [None] * len(positions)
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
    threads), or a name for `load_executor`. It returns a `Run` or a dict {answer, tenant,
    terminal=True}. An executor that declares a `cassette` parameter gets each case's
    cassette from `cassettes` (a cas.evals.cassettes.CassetteBook); a run whose cassette was stale
    or left exchanges unused (strict) is ERRORED, and what it recorded is saved at the end.
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
                 cassettes: Any = None) -> None:
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
        self.executor, self.scorer = executor, scorer
        self.concurrency, self.seed, self.timeout = concurrency, seed, timeout
        self.artefacts = artefacts
        self.shard = None if shard is None else Shard.parse(shard)
        self.grace = DEFAULT_GRACE if grace is None else grace
        self.handle_signals, self.progress = handle_signals, progress
        self.cassettes = cassettes
        self._takes_cassette = takes_cassette(executor)
        if cassettes is not None and not self._takes_cassette:
            raise InvalidArgument("cassettes are for an executor that declares a `cassette` "
                                  "parameter (async def f(case, *, run_id, cassette)); this "
                                  "one does not", reason="CASSETTE_UNUSED_BY_EXECUTOR")
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
            raise InvalidArgument(f"a suite runner runs a cas.evals.suites.Suite, not "
                                  f"{encoding.describe(suite)}")
        cases = suite.cases  # ids unique and safe path components: a Suite checks them
        if self._takes_cassette and self.cassettes is None:
            raise FailedPrecondition(
                "the executor declares a `cassette` parameter: give the runner the suite's "
                "cassettes (SuiteRunner(..., cassettes=cas.evals.cassettes.CassetteBook(repo, pin, "
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
        rid = [run_id(suite.name, suite.version, cases[p].id, self.seed) for p in positions]
        st = _State(suite, positions, rid)
        art = None
        if self.artefacts is not None:
            art = _Artefacts(self.artefacts, suite)
            for i, p in enumerate(positions):  # all of them before the first case runs
                art.prepare(cases[p], CaseResult(id=cases[p].id, position=p, run_id=rid[i],
                                                 outcome=INCOMPLETE, reason=NOT_STARTED))
        loop = asyncio.get_running_loop()
        needs_threads = not self._async_executor or \
            (self.scorer is not None and not self._async_scorer)
        threads = _Threads(self.concurrency, loop) if needs_threads else None
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
        for i, p in enumerate(positions):
            if results[i] is None:
                r = CaseResult(id=cases[p].id, position=p, run_id=rid[i], outcome=INCOMPLETE,
                               reason=f"not started: the suite was {why}")
                results[i] = r
                if art is not None:
                    art.result(r)
        return _finish(ref, self.seed, results, shard)  # type: ignore[arg-type]

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
        n = min(self.concurrency, len(st.positions))
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
        cases, positions, total = st.suite.cases, st.positions, len(st.positions)
        progress = self.progress
        while st.stop_reason is None and st.next < total:
            i = st.next
            st.next += 1
            case = cases[positions[i]]
            started = time.time() if art is not None else 0.0
            try:
                result, run_doc = await self._case(case, positions[i], st.run_ids[i], threads)
            except asyncio.CancelledError:
                if st.stop_reason is None:
                    raise  # cancelled from outside the runner: not ours to swallow
                task = asyncio.current_task()
                if task is not None and hasattr(task, "uncancel"):
                    task.uncancel()
                result = CaseResult(id=case.id, position=positions[i], run_id=st.run_ids[i],
                                    outcome=INCOMPLETE,
                                    reason=f"{st.stop_reason} before the case finished")
                run_doc = {"run_id": st.run_ids[i], "status": "stopped"}
            st.results[i] = result
            st.done += 1
            if art is not None:
                finished = time.time()
                art.write(case.id, "run.json", run_doc)
                art.write(case.id, "timings.json", {
                    "started_at": _iso(started), "finished_at": _iso(finished),
                    "seconds": round(finished - started, 6)})
                art.result(result)
            if progress is not None:
                progress(st.done, total)

    async def _case(self, case: SuiteCase, position: int, rid: str,
                    threads) -> tuple[CaseResult, dict]:
        timeout = self.timeout
        phase = ["executor"]
        if timeout is None:
            return await self._attempt(case, position, rid, threads, phase)
        try:
            if _timeout is not None:
                async with _timeout(timeout):
                    return await self._attempt(case, position, rid, threads, phase)
            return await asyncio.wait_for(self._attempt(case, position, rid, threads, phase),
                                          timeout)
        except (TimeoutError, asyncio.TimeoutError):  # ours: _attempt turns the rest into ERRORED
            reason = f"timed out after {timeout:g} s (in the {phase[0]})"
            return (CaseResult(id=case.id, position=position, run_id=rid, outcome=INCOMPLETE,
                               reason=reason),
                    {"run_id": rid, "status": "timed_out", "phase": phase[0]})

    async def _attempt(self, case: SuiteCase, position: int, rid: str, threads,
                       phase: list) -> tuple[CaseResult, dict]:
        def result(outcome: str, reason: str | None = None, answer: Any = None,
                   scores: dict | None = None) -> CaseResult:
            return CaseResult(id=case.id, position=position, run_id=rid, outcome=outcome,
                              answer=answer, reason=reason, scores=scores)
        more: dict[str, Any] = {}
        cassette = None
        if self._takes_cassette:
            cassette = self.cassettes.cassette(case.id)
            more["cassette"] = cassette
        try:
            if self._async_executor:
                returned = await self.executor(case, run_id=rid, **more)
            else:
                returned = await threads.call(self.executor, case, run_id=rid, **more)
                if inspect.isawaitable(returned):
                    returned = await returned
        except Exception as exc:
            text = exception_text(exc)
            return (result(ERRORED, f"the executor raised {text}"),
                    {"run_id": rid, "status": "raised", "error": text,
                     **_cassette_doc(cassette)})
        # What came back, checked in order of what matters most: its shape, whose data it is,
        # whether it finished, and whether its answer can be written at all.
        if type(returned) is Run or isinstance(returned, Run):
            answer, tenant, terminal = returned.answer, returned.tenant, returned.terminal
        elif isinstance(returned, dict) and "answer" in returned and "tenant" in returned \
                and set(returned) <= {"answer", "tenant", "terminal"}:
            answer, tenant = returned["answer"], returned["tenant"]
            terminal = returned.get("terminal", True)
        else:
            problem = _shape_problem(returned)
            return (result(ERRORED, problem),
                    {"run_id": rid, "status": "returned", "returned": encoding.describe(returned)})
        if not isinstance(tenant, str) or type(terminal) is not bool:
            problem = (f"the run's tenant is {encoding.describe(tenant)}, not a string"
                       if not isinstance(tenant, str) else
                       f"the run's terminal is {encoding.describe(terminal)}, not true or false")
            return (result(ERRORED, problem),
                    {"run_id": rid, "status": "returned", "returned": encoding.describe(returned)})
        doc = {"run_id": rid, "status": "returned", "tenant": tenant, "terminal": terminal}
        if tenant != case.tenant:
            # Another tenant's answer is never scored, and never copied into the result.
            doc["answer"] = None
            return (result(ERRORED, f"the run answered for tenant {tenant!r}, not the case's "
                                    f"tenant {case.tenant!r}"), doc)
        try:
            encoding.check_json(answer, "answer")
        except InvalidArgument as exc:  # InvalidJSONValue, or nested too deep
            doc["answer_repr"] = encoding.describe(answer)
            problem = f"the answer is not a JSON value: {exc.message}"
            return result(ERRORED, clean_reason(problem)), doc
        answer = _DECODE(_ENCODE(answer))  # plain JSON values, shared with nobody
        doc["answer"] = answer
        doc.update(_cassette_doc(cassette))
        if not terminal:
            return result(INCOMPLETE, "the run came back non-terminal"), doc
        if cassette is not None:
            try:
                cassette.check()  # strict: exchanges the run never asked for are an error
            except CasError as exc:
                return result(ERRORED, exc.message), doc
            self.cassettes.keep(case.id, cassette)
        if self.scorer is None:
            return result(COMPLETED, answer=answer), doc
        phase[0] = "scorer"
        try:
            if self._async_scorer:
                scores = await self.scorer(case, answer)
            else:
                scores = await threads.call(self.scorer, case, answer)
                if inspect.isawaitable(scores):
                    scores = await scores
        except Exception as exc:
            return result(ERRORED, f"the scorer raised {exception_text(exc)}"), doc
        checked, problem = _check_scores(scores)
        if problem is not None:
            return result(ERRORED, problem), doc
        return result(COMPLETED, answer=answer, scores=checked), doc


def _cassette_doc(cassette) -> dict:
    """What run.json says of a case's cassette (never part of the result or its digest)."""
    if cassette is None:
        return {}
    return {"cassette": {"mode": cassette.mode, "recorded": len(cassette.recorded),
                         "exchanges": len(cassette.exchanges), "unused": len(cassette.unused()),
                         "changed": cassette.changed}}


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _shape_problem(value: Any) -> str:
    if isinstance(value, dict):
        missing = [k for k in ("answer", "tenant") if k not in value]
        unknown = sorted((k for k in value if k not in ("answer", "tenant", "terminal")),
                         key=encoding.describe)
        what = (f"has no {' and no '.join(missing)}" if missing else
                f"has unknown key {encoding.describe(unknown[0])}")
        return (f"the executor returned a dict that {what}; a run is cas.evals.suites.runner.Run(answer, "
                "tenant, terminal=True) or a dict with those keys")
    return (f"the executor returned {encoding.describe(value)} (a {type(value).__name__}), "
            "not a cas.evals.suites.runner.Run(answer, tenant, terminal=True) or a dict with those keys")


def _check_scores(scores: Any) -> tuple[dict | None, str | None]:
    from cas.repo.scores import check_label, check_value
    if not isinstance(scores, dict):
        return None, (f"the scorer returned {encoding.describe(scores)}, not a dict "
                      "{metric: value}")
    out = {}
    try:
        for metric, value in scores.items():
            out[check_label(metric, "metric")] = check_value(value)
    except CasError as exc:
        return None, clean_reason(f"the scorer returned an invalid score: {exc.message}")
    return out, None


# -- reading results back (cas suite merge, cas suite diff) ---------------------------------------
def as_result(value: Any, source: str = "result") -> SuiteResult:
    """A SuiteResult, from itself, the object `cas suite run --json` prints (a `recorded` key
    it may hold is ignored), or that object's JSON bytes or text. Its digest, counts, ok and
    exit code are checked against its results: an edited result is refused."""
    if isinstance(value, SuiteResult):
        return value
    if isinstance(value, (bytes, bytearray, str)):
        try:
            value = encoding.decode_json(value)
        except InvalidArgument as exc:
            raise encoding.in_context(exc, source) from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{source} is not a suite result (the JSON object of `cas suite "
                              f"run --json`), but {encoding.describe(value)}",
                              reason="INVALID_SUITE_RESULT")
    value = {k: v for k, v in value.items() if k != "recorded"}
    try:
        result = msgspec.convert(value, SuiteResult)
    except msgspec.ValidationError as exc:
        raise InvalidArgument(f"{source} is not a suite result: {exc}",
                              reason="INVALID_SUITE_RESULT") from None
    for r in result.results:
        if r.outcome not in OUTCOMES:
            raise InvalidArgument(f"{source}: case {r.id} has outcome {r.outcome!r}; known: "
                                  f"{', '.join(OUTCOMES)}", reason="INVALID_SUITE_RESULT")
    try:
        encoding.check_json([r.answer for r in result.results], "answers")
        again = _finish(result.suite, result.seed, list(result.results), result.shard)
    except (InvalidJSONValue, KeyError):
        again = None
    if again is None or again != result:
        raise InvalidArgument(f"{source}: its digest, counts, ok or exit code do not match its "
                              "results (edited, or not written by cas suite run)",
                              reason="RESULT_DIGEST_MISMATCH")
    return result


def merge(results: Iterable[Any], sources: Iterable[str] | None = None) -> SuiteResult:
    """The shards of one run (each as `as_result` reads it) as the result of one unsharded
    run: suite order restored, the same digest. Refused: results of different suites or
    seeds, a result that is not a shard, a shard missing or given twice (named)."""
    results = list(results)
    names = list(sources) if sources is not None else [f"result {i + 1}"
                                                       for i in range(len(results))]
    if len(names) != len(results):
        raise InvalidArgument("merge: give one source name per result")
    if not results:
        raise InvalidArgument("merge: no shards given", reason="SHARD_MISSING")
    parsed = [as_result(r, s) for r, s in zip(results, names)]
    first, src0 = parsed[0], names[0]
    for r, src in zip(parsed, names):
        if r.shard is None:
            raise InvalidArgument(f"{src} is not a shard (run with --shard i/n): there is "
                                  "nothing to merge it with", reason="NOT_A_SHARD")
        if r.suite != first.suite:
            raise FailedPrecondition(
                f"{src} is a result of suite {r.suite.name} {r.suite.version}, {src0} of "
                f"{first.suite.name} {first.suite.version}: results compare only within one "
                "suite version", reason="SUITE_VERSION_MISMATCH",
                versions=[first.suite.version, r.suite.version])
        if r.seed != first.seed:
            raise InvalidArgument(f"{src} was run with seed {r.seed}, {src0} with seed "
                                  f"{first.seed}", reason="SEED_MISMATCH")
        if (r.shard.count, r.shard.cases) != (first.shard.count, first.shard.cases):
            raise InvalidArgument(f"{src} is shard {r.shard} of {r.shard.cases} cases, "
                                  f"{src0} shard {first.shard} of {first.shard.cases}: not "
                                  "shards of one split", reason="SHARD_MISMATCH")
    count, total = first.shard.count, first.shard.cases or 0
    by_index: dict[int, str] = {}
    for r, src in zip(parsed, names):
        if r.shard.index in by_index:
            raise InvalidArgument(f"shard {r.shard} is given twice ({by_index[r.shard.index]} "
                                  f"and {src})", reason="SHARD_REPEATED",
                                  shard=str(r.shard))
        by_index[r.shard.index] = src
        expected = list(Shard(r.shard.index, count).positions(total))
        if [c.position for c in r.results] != expected:
            raise InvalidArgument(f"{src}: shard {r.shard} does not hold the positions the "
                                  "split gives it (position % count == index - 1)",
                                  reason="SHARD_MISMATCH", shard=str(r.shard))
    missing = [i for i in range(1, count + 1) if i not in by_index]
    if missing:
        shown = ", ".join(f"{i}/{count}" for i in missing)
        raise InvalidArgument(f"shard{'s' if len(missing) > 1 else ''} {shown} "
                              f"{'are' if len(missing) > 1 else 'is'} missing",
                              reason="SHARD_MISSING", missing=[f"{i}/{count}" for i in missing])
    merged = sorted((c for r in parsed for c in r.results), key=lambda c: c.position)
    ids = {c.id for c in merged}
    if len(ids) != len(merged):
        raise InvalidArgument("merge: the shards hold one case id twice",
                              reason="SHARD_MISMATCH")
    return _finish(first.suite, first.seed, merged, None)


def diff(a: Any, b: Any, allow_versions: bool = False) -> dict[str, Any]:
    """The cases whose answer or outcome changed from result `a` to result `b`:
    {"changed": [{"id", "before", "after"}], "unchanged": N}, `before`/`after` being
    {outcome, answer, reason} (None for a case absent from that side), in `b`'s order then
    `a`'s. Two different suites (name or version) are refused unless `allow_versions`."""
    a, b = as_result(a, "before"), as_result(b, "after")
    if a.suite != b.suite and not allow_versions:
        raise FailedPrecondition(
            f"the results are of different suites ({a.suite.name} {a.suite.version} and "
            f"{b.suite.name} {b.suite.version}): results compare only within one suite "
            "version (allow it explicitly to compare anyway)",
            reason="SUITE_VERSION_MISMATCH", versions=[a.suite.version, b.suite.version])

    def view(r: CaseResult | None) -> dict | None:
        return None if r is None else {"outcome": r.outcome, "answer": r.answer,
                                       "reason": r.reason}
    before = {r.id: r for r in a.results}
    after_ids = set()
    changed, unchanged = [], 0
    for r in b.results:
        after_ids.add(r.id)
        old = before.get(r.id)
        if old is not None and old.outcome == r.outcome and \
                _ENCODE(old.answer) == _ENCODE(r.answer):
            unchanged += 1
        else:
            changed.append({"id": r.id, "before": view(old), "after": view(r)})
    changed += [{"id": r.id, "before": view(r), "after": None}
                for r in a.results if r.id not in after_ids]
    return {"changed": changed, "unchanged": unchanged}


# -- recording a run as scores ----------------------------------------------------------------
def _pinned(repo, version: str):
    from cas.repo.scores import as_pin
    try:
        pin = as_pin(version)
    except InvalidArgument:
        raise FailedPrecondition(
            f"suite version {version!r} is not a pin (DATASET@N#b3:...) of this repository: "
            "only a suite exported from a version (cas suite export, or DATASET@N) can be "
            "recorded", reason="SUITE_NOT_PINNED", version=version) from None
    return pin, repo.verify_pin(pin)  # refused if it does not match, or is retired


def check_record(repo, suite: Any, experiment: str):
    """Refuse up front (before a long run) what `record` would refuse: a suite version that is
    not a pin of `repo`, a retired version, case ids that are not case ids, an experiment of
    that name over another version. Returns the pin."""
    from cas.repo.scores import check_label
    ref = suite.suite if isinstance(suite, SuiteResult) else suite
    check_label(experiment, "experiment name")
    pin, _ = _pinned(repo, ref.version)
    ids = [c.id for c in (suite.results if isinstance(suite, SuiteResult) else suite.cases)]
    for case_id in ids:
        parse_digest(case_id, "case id")
    experiment_over(repo, pin, experiment)
    return pin


def experiment_over(repo, pin, name: str):
    """The experiment `name` of the pinned dataset (None if there is none); refused
    (EXPERIMENT_VERSION_MISMATCH) when it is over another version than the pin's."""
    for e in repo.experiments(pin.dataset):
        if e.name == name:
            if e.version != pin.version:
                raise FailedPrecondition(
                    f"experiment {name!r} is over {pin.dataset}@{e.version}, not "
                    f"{pin.dataset}@{pin.version}: record these results under another name",
                    reason="EXPERIMENT_VERSION_MISMATCH", experiment=name,
                    version=e.version)
            return e
    return None


def _ensure_experiment(repo, pin, experiment: str, author: str | None) -> bool:
    """The experiment over the pinned version exists afterwards; True if this created it."""
    if experiment_over(repo, pin, experiment) is not None:
        return False
    try:
        repo.create_experiment(pin.dataset, pin.version, experiment, author=author)
        return True
    except AlreadyExists:  # created meanwhile by another writer: over which version?
        if experiment_over(repo, pin, experiment) is None:
            raise
        return False


def record_scores_of(repo, pin_text: str, experiment: str, scores: list[dict],
                     author: str | None = None) -> list:
    """Record `scores` (dicts of metric, value, item) as one batch of `experiment` over the
    pinned version `pin_text` (the experiment created if missing; refused if it exists over
    another version, or if the version is retired): what the pytest plugin records."""
    from cas.repo.scores import check_label
    check_label(experiment, "experiment name")
    pin, _ = _pinned(repo, pin_text)
    _ensure_experiment(repo, pin, experiment, author)
    return repo.record_scores(pin, [{**s, "experiment": experiment} for s in scores],
                              author=author) if scores else []


def record(repo, result: Any, experiment: str, *, scored: bool | None = None,
           author: str | None = None) -> Recorded:
    """Record `result` as one score batch citing its pinned version, in `experiment` (created
    over that version if missing; refused if it exists over another). Each case is the
    score's `item`. With a scorer (`scored`, by default: any case has scores), each
    COMPLETED case's scores; without, a boolean `completed` for every case."""
    result = as_result(result)
    pin = check_record(repo, result, experiment)
    created = _ensure_experiment(repo, pin, experiment, author)
    if scored is None:
        scored = any(r.scores is not None for r in result.results)
    if scored:
        rows = [{"metric": m, "value": v, "item": r.id, "experiment": experiment}
                for r in result.results if r.scores for m, v in sorted(r.scores.items())]
    else:
        rows = [{"metric": "completed", "value": r.outcome == COMPLETED, "item": r.id,
                 "experiment": experiment} for r in result.results]
    batch = None
    if rows:
        stored = repo.record_scores(pin, rows, author=author)
        batch = stored[0].batch
    return Recorded(dataset=pin.dataset, version=pin.version, experiment=experiment,
                    created=created, batch=batch, scores=len(rows))
