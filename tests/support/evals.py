"""What the tests of cas.evals (and of their commands) share: small suites and runs of them, a
directory's listing, frozen cases with tool calls and repositories holding them, a tool whose
calls cassettes record, eval set scenarios, and capture records, events and an in-memory
capture store."""

from __future__ import annotations

import itertools
import os

import cas
from cas.evals.capture import pipeline as capture
from cas.evals.capture.records import CaptureEvent, CaptureRecord
from cas.evals.cassettes import RECORD, Cassette, CassetteBook
from cas.evals.suites import Suite, SuiteResult, SuiteRunner, echo, from_version
from cas.evals.suites.executors import cassette_executor
from cas.storage.backends.memory import MemoryBackend

ADA = "Ada <ada@example.com>"
AUTHOR = "ada@example.com"


# -- suites -----------------------------------------------------------------------------------
def suite_of(n: int = 6, name: str = "demo", version: str = "v1", tenant: str = "acme") -> Suite:
    """Cases c0, c1, ... with input {"n": i}."""
    return Suite(name, version, [{"id": f"c{i}", "input": {"n": i}, "tenant": tenant}
                                 for i in range(n)])


def run_suite(suite: Suite, executor=echo, **kw) -> SuiteResult:
    return SuiteRunner(executor, **kw).run(suite)


def listing(path) -> list[str]:
    """The names in a directory, sorted: a refused write leaves them as they were."""
    return sorted(os.listdir(path))


def frozen_case(i: int, tenant: str = "acme") -> dict:
    """A case whose run called `ls` then `rm` and answered `done i`."""
    return {"run_id": f"r-{i}", "tenant": tenant, "input": {"task": f"t{i}"},
            "output": f"done {i}", "outcome": {"status": "success"},
            "steps": [{"type": "tool_call", "tool_name": "ls", "arguments": {},
                       "result": ["a"]},
                      {"type": "tool_call", "tool_name": "rm", "arguments": {"p": "a"},
                       "result": "ok"}]}


def versioned_repo() -> cas.Repository:
    """Dataset `evals`: version 1 holds frozen cases 0-2, version 2 adds case 3."""
    repo = cas.Repository.create(MemoryBackend())
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=[frozen_case(i) for i in range(3)], author=ADA)
    repo.commit("evals", base=1, add=[frozen_case(3)], author=ADA)
    return repo


# -- cassettes --------------------------------------------------------------------------------
def search(query, limit=2):
    """A tool: counts its live calls in `search.calls`."""
    search.calls += 1
    return {"hits": [f"{query}-{i}" for i in range(limit)]}


search.calls = 0


def recorded(*calls) -> list:
    """The exchanges of a run in record mode making `calls` (query, limit) to search."""
    c = Cassette(mode=RECORD)
    wrapped = c.wrap(search, "search")
    for q, limit in calls:
        wrapped(q, limit=limit)
    return c.exchanges


def frozen(i: int, person: str | None = None) -> dict:
    """A case of person `user-i` whose run searched (answered `PAYLOAD-i`) then opened."""
    return {"run_id": f"r-{i}", "tenant": "acme", "input": f"task {i}", "output": f"done {i}",
            "person": person if person is not None else f"user-{i}",
            "steps": [{"type": "tool_call", "tool_name": "search", "arguments": {"q": i},
                       "result": [f"PAYLOAD-{i}"]},
                      {"type": "tool_call", "tool_name": "open", "arguments": {"n": i}}]}


def cassette_repo() -> cas.Repository:
    """Dataset `evals`: version 1 holds `frozen` cases 0-2."""
    r = cas.Repository.create(MemoryBackend())
    r.create_dataset("evals", admission="direct")
    r.commit("evals", base=None, add=[frozen(i) for i in range(3)], author=ADA)
    return r


def pin(repo, n: int = 1) -> str:
    return str(repo.pin("evals", n))


def run_version(repo, mode, executor=cassette_executor, name="cas:cassette", n: int = 1,
                **kw):
    """`evals@n` run with its cassettes under `name` in `mode`: (the result, the book)."""
    book = CassetteBook(repo, pin(repo, n), name, mode, **kw)
    return SuiteRunner(executor, cassettes=book).run(from_version(repo, "evals", n)), book


def all_bytes(repo) -> bytes:
    """Every stored byte of the repository."""
    return every_byte(repo.backend)


# -- eval sets --------------------------------------------------------------------------------
def ticking_clock():
    """A clock one second later at each call: captures have a strict order."""
    ticks = itertools.count()

    def clock() -> str:
        i = next(ticks)
        return f"2026-12-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000000Z"
    return clock


def clocked_repo() -> cas.Repository:
    return cas.Repository.create(MemoryBackend(), clock=ticking_clock())


def fill(es, kinds: str, replay_input=None):
    """One scenario per letter of `kinds` (f: failure, w: win), sessions s0, s1, ..."""
    out = []
    for i, k in enumerate(kinds):
        kind = "failure" if k == "f" else "win"
        out.append(es.capture(f"s{i}", kind, [f"label{i % 2}"],
                              {"success": 0.0 if kind == "failure" else 1.0},
                              replay_input=replay_input, author=AUTHOR))
    return out


def record(i: int, when: str = "2026-12-01T10:00:00.000000Z") -> CaptureRecord:
    """A failed capture record cr-i (invocation inv-i), captured at `when`."""
    return CaptureRecord(id=f"cr-{i}", captured_at=when, agent_name="support",
                         invocation_id=f"inv-{i}", reasons=("rule",), status="failed")


def capture_record(**changes) -> CaptureRecord:
    """A failed capture record (TimeoutError, content omitted), with `changes`."""
    fields = dict(id="r1", captured_at="2026-12-01T10:00:00.000000Z", agent_name="support",
                  invocation_id="i1", reasons=("rule",), status="failed",
                  error_type="TimeoutError", content="omitted")
    return CaptureRecord(**{**fields, **changes})


# -- capture ----------------------------------------------------------------------------------
class ListStore:
    """A capture store that keeps records in memory (the protocol, nothing more)."""

    def __init__(self) -> None:
        self.records: list[CaptureRecord] = []
        self.started = self.closed = 0

    async def start(self) -> None:
        self.started += 1

    async def close(self) -> None:
        self.closed += 1

    async def append(self, record) -> None:
        self.records.append(record)

    async def list(self, since=None, limit=100):
        return list(reversed(self.records))[:limit]


def event(i: int = 0, **kw) -> CaptureEvent:
    """Invocation inv-i of agent `support`: its session, user and metadata values are what no
    stored byte may hold (SESSION-i, USER-i, META-i)."""
    base = dict(agent_name="support", invocation_id=f"inv-{i}", session_id=f"SESSION-{i}",
                user_id=f"USER-{i}", input_text=f"question {i}", output_text=f"answer {i}",
                metadata={"secret": f"META-{i}"})
    base.update(kw)
    return CaptureEvent(**base)


def captured(events, rule=lambda e: e.failed, **kw) -> ListStore:
    """The records the capture of `events` under `rule` stored (into a ListStore)."""
    store = ListStore()
    capture.register_store("mem", store)
    capture.rule(rule, store="mem", **kw)
    for e in events:
        assert capture.submit(e) in (True, False)
    assert capture.flush(5)
    return store


def every_byte(backend) -> bytes:
    return b"".join(backend.get(k) for k in backend.list(""))
