"""The capture pipeline (cas/evals/capture/pipeline.py): the rule and its sample, the off switch,
registration, the content policy, failures that never reach the caller, the bounded queue,
and the decorator and context manager."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time

import pytest

import cas
from cas.evals.capture import pipeline as capture
from cas.evals.capture.records import ToolCall
from support.evals import ListStore, captured, event


# -- the rule, the sample, the switch ---------------------------------------------------------
def test_the_rule_keeps_what_it_accepts_and_each_record_says_why():
    store = captured([event(0), event(1, status="failed", error_type="TimeoutError"),
                      event(2, tool_calls=(ToolCall(name="refund", result={"error": "no"}),))],
                     rule=lambda e: e.failed or e.tool_error)
    assert [(r.invocation_id, r.reasons) for r in store.records] == \
        [("inv-1", ("rule",)), ("inv-2", ("rule",))]
    assert store.records[0].error_type == "TimeoutError" and store.records[0].failed
    assert store.records[1].tool_calls[0].failed and store.records[1].tool_error
    assert capture.stats()["rejected"] == 1 and store.started == 1

def test_a_sample_of_the_rejected_is_kept_and_marked_sample():
    store = captured([event(i) for i in range(400)], sample_rate=0.25)
    assert {r.reasons for r in store.records} == {("sample",)}
    assert 60 <= len(store.records) <= 140
    # decided by the invocation id: the same invocations again, the same sample
    again = [r.invocation_id for r in store.records]
    capture.reset()
    assert [r.invocation_id for r in captured([event(i) for i in range(400)],
                                              sample_rate=0.25).records] == again

def test_the_sample_rate_is_the_registered_one_else_the_environment_else_zero(monkeypatch):
    monkeypatch.setenv("CAS_CAPTURE_SAMPLE_RATE", "1")
    assert len(captured([event(i) for i in range(5)], sample_rate=0.0).records) == 0
    capture.reset()
    assert len(captured([event(i) for i in range(5)]).records) == 5  # the environment's 1
    capture.reset()
    monkeypatch.delenv("CAS_CAPTURE_SAMPLE_RATE")
    store = captured([event(i) for i in range(5)] + [event(9, status="failed")])
    assert [r.invocation_id for r in store.records] == ["inv-9"]  # zero still keeps the rule's

@pytest.mark.parametrize("off", ["off", "OFF", "false", "0", "No", "disabled"])
def test_the_off_switch_wins_over_any_rate(monkeypatch, off):
    monkeypatch.setenv("CAS_CAPTURE", off)
    store = captured([event(1, status="failed"), event(2)], sample_rate=1.0)
    assert store.records == [] and capture.stats()["off"] == 2


# -- registration -----------------------------------------------------------------------------
def test_registration_refusals():
    store = ListStore()
    with pytest.raises(cas.InvalidArgument) as e:
        capture.rule(lambda e: True, store="nowhere")
    assert e.value.reason == "CAPTURE_STORE_UNKNOWN"
    capture.register_store("mem", store)

    class Sync:
        def start(self): ...
        async def close(self): ...
        async def append(self, r): ...
        async def list(self, since=None, limit=100): ...
    with pytest.raises(cas.InvalidArgument, match="start\\(\\) is not async") as e:
        capture.register_store("bad", Sync())
    assert e.value.reason == "CAPTURE_STORE_PROTOCOL"
    with pytest.raises(cas.InvalidArgument, match="no list") as e:
        capture.register_store("bad", type("S", (), {"start": ListStore.start,
                                                      "close": ListStore.close,
                                                      "append": ListStore.append})())
    for bad in (-0.1, 1.5, float("nan"), True, "0.5"):
        with pytest.raises(cas.InvalidArgument) as e:
            capture.rule(lambda e: True, store="mem", sample_rate=bad)
        assert e.value.reason == "CAPTURE_SAMPLE_RATE"
    for arity in (lambda: True, lambda a, b: True, lambda *a: True):
        with pytest.raises(cas.InvalidArgument) as e:
            capture.rule(arity, store="mem")
        assert e.value.reason == "CAPTURE_ARITY"
        with pytest.raises(cas.InvalidArgument):
            capture.redactor(arity)
    capture.rule(store="mem")(lambda e: True)
    with pytest.raises(cas.InvalidArgument) as e:
        capture.rule(lambda e: True, store="mem")
    assert e.value.reason == "CAPTURE_RULE_EXISTS"
    capture.redactor(lambda r: r)
    with pytest.raises(cas.InvalidArgument) as e:
        capture.redactor(lambda r: r)
    assert e.value.reason == "CAPTURE_REDACTOR_EXISTS"


# -- the content policy -----------------------------------------------------------------------
def test_without_a_redactor_a_record_keeps_structure_only():
    tools = (ToolCall(name="lookup", arguments={"order": "ORDER-7"}, result="RESULT-7"),
             ToolCall(name="refund", error="ERRTEXT-7"))
    [r] = captured([event(7, status="failed", error_type="ValueError", tool_calls=tools)]).records
    assert (r.content, r.input_text, r.output_text) == ("omitted", "", "")
    assert [(t.name, t.failed, t.arguments, t.result, t.error) for t in r.tool_calls] == \
        [("lookup", False, None, None, None), ("refund", True, None, None, None)]
    assert (r.status, r.error_type, r.reasons, r.schema_version) == \
        ("failed", "ValueError", ("rule",), 1)

def test_a_redactor_keeps_what_it_returns_and_anything_else_drops_the_capture(caplog):
    def redact(record):
        return record.replace(input_text=record.input_text.replace("question", "[Q]"),
                              id="forged", content="omitted")
    capture.redactor(redact)
    [r] = captured([event(3, status="failed")]).records
    assert r.content == "redacted" and r.input_text == "[Q] 3" and r.output_text == "answer 3"
    assert r.id.startswith("cr-")  # the redactor decides the content, never the identity
    capture.reset()
    capture.redactor(lambda record: {"not": "a record"})
    with caplog.at_level(logging.INFO, logger="cas.capture"):
        store = captured([event(4, status="failed")])
    assert store.records == [] and capture.stats()["redactor_dropped"] == 1
    assert "capture.failed stage=redactor" in caplog.text
    capture.reset()
    capture.redactor(lambda record: record.replace(input_text=None))  # a record, but not one
    store = captured([event(5, status="failed")])
    assert store.records == [] and capture.stats()["redactor_dropped"] == 1
    capture.reset()
    store = captured([{"agent_name": "a", "invocation_id": "i", "status": "failed",
                       "tool_calls": [{"no name": 1}]}, event(6, status="failed")])
    assert [r.invocation_id for r in store.records] == ["inv-6"]  # the bad one alone is lost
    assert capture.stats()["failed"] == 1

def test_failures_in_the_rule_the_redactor_and_the_store_never_reach_the_caller(caplog):
    class Broken(ListStore):
        async def append(self, record):
            raise OSError("disk full of answer 1")

    def rule(e):
        if e.invocation_id == "inv-0":
            raise RuntimeError("rule broke on question 0")
        return True
    with caplog.at_level(logging.INFO, logger="cas.capture"):
        capture.register_store("broken", Broken())
        capture.rule(rule, store="broken")
        capture.redactor(lambda r: 1 / 0 if r.invocation_id == "inv-2" else r)
        for i in range(3):
            assert capture.submit(event(i)) is True  # returns at once, whatever happens later
        assert capture.flush(5)
    assert capture.stats()["failed"] == 3
    assert "stage=rule" in caplog.text and "stage=redactor" in caplog.text
    assert "stage=store" in caplog.text
    for secret in ("question", "answer", "USER-", "SESSION-", "META-", "disk full"):
        assert secret not in caplog.text  # logs hold no content

def test_a_full_queue_drops_the_capture_and_counts_it(monkeypatch):
    gate = threading.Event()

    class Slow(ListStore):
        async def append(self, record):
            gate.wait(5)
            self.records.append(record)
    store = Slow()
    capture.register_store("slow", store)
    capture.rule(lambda e: True, store="slow")
    monkeypatch.setattr(capture._R, "queue", queue.Queue(2))
    results = [capture.submit(event(i)) for i in range(50)]
    gate.set()
    assert capture.flush(5)
    assert results.count(False) == capture.stats()["dropped"] > 0
    assert len(store.records) == results.count(True)


def _cancelled():
    raise asyncio.CancelledError()

@pytest.mark.parametrize("stage", ["rule", "redactor", "store"])
@pytest.mark.parametrize("raised", [SystemExit, KeyboardInterrupt, asyncio.CancelledError])
def test_a_base_exception_in_user_code_is_a_failure_and_the_worker_lives_on(caplog, stage,
                                                                          raised):
    """SystemExit, KeyboardInterrupt or CancelledError from the rule, the redactor or the
    store used to end the worker for good: nothing was captured or counted again."""
    def boom(first):
        if first.invocation_id == "inv-0":
            raise raised()
        return first

    class Store(ListStore):
        async def append(self, record):
            boom(record) if stage == "store" else None
            self.records.append(record)
    store = Store()
    capture.register_store("mem", store)
    capture.rule((lambda e: boom(e) is e) if stage == "rule" else (lambda e: True), store="mem")
    capture.redactor(boom if stage == "redactor" else (lambda r: r))
    with caplog.at_level(logging.INFO, logger="cas.capture"):
        assert capture.submit(event(0))
        assert capture.flush(5)
        assert capture.submit(event(1))  # after the failure: the worker still works
        assert capture.flush(2)
    assert [r.invocation_id for r in store.records] == ["inv-1"]
    assert capture.stats()["failed"] == 1 and capture.stats()["stored"] == 1
    assert f"capture.failed stage={stage} " in caplog.text and raised.__name__ in caplog.text

def test_a_rule_that_returns_no_bool_is_a_failure_saying_so(caplog):
    answers = {0: None, 1: "yes", 2: 1, 3: [], 4: True, 5: False}
    with caplog.at_level(logging.INFO, logger="cas.capture"):
        store = captured([event(i) for i in answers],
                         rule=lambda e: answers[int(e.invocation_id[4:])])
    assert [r.invocation_id for r in store.records] == ["inv-4"]
    assert capture.stats()["failed"] == 4 and capture.stats()["rejected"] == 1
    assert "capture.failed stage=rule agent=support invocation=inv-0 error=the rule returned " \
        "NoneType, not a bool" in caplog.text
    assert "error=the rule returned str, not a bool" in caplog.text

def _within(seconds: float, fn) -> list:
    """fn() in a thread; what it returned, or [] if it was still running after `seconds`."""
    done: list = []
    threading.Thread(target=lambda: done.append(fn()), daemon=True).start()
    deadline = time.monotonic() + seconds
    while not done and time.monotonic() < deadline:
        time.sleep(0.01)
    return done

def test_flush_and_reset_are_bounded_when_the_store_hangs_and_the_queue_is_full(monkeypatch):
    gate = threading.Event()

    class Hung(ListStore):
        async def append(self, record):
            gate.wait(30)
    capture.register_store("hung", Hung())
    capture.rule(lambda e: True, store="hung")
    monkeypatch.setattr(capture._R, "queue", queue.Queue(2))
    monkeypatch.setattr(capture, "FLUSH_TIMEOUT", 0.3)
    monkeypatch.setattr(capture, "RESET_TIMEOUT", 0.3)
    old = capture._R
    try:
        for i in range(10):
            capture.submit(event(i))  # the worker holds one; the queue fills behind it
        assert _within(3, capture.flush) == [False]  # no timeout given: still bounded
        assert _within(3, capture.reset) == [None]
        assert capture.stats() == {}  # a fresh registry, whatever the old worker does
    finally:
        gate.set()
    old.worker.join(5)  # unstuck, it handles what was queued and ends: no thread left behind
    assert not old.worker.is_alive() and old.counts["stored"] == 10 - old.counts["dropped"]


# -- the decorator and the context manager ----------------------------------------------------
def test_the_decorator_and_the_context_manager_capture_sync_and_async_calls():
    store = ListStore()
    capture.register_store("mem", store)
    capture.rule(lambda e: True, store="mem")
    capture.redactor(lambda r: r)

    @capture.invocation(agent="support", user_id=lambda q, **k: k.get("user"))
    def answer(q, user=None):
        if q == "boom":
            raise KeyError(q)
        return {"text": q.upper()}

    @capture.invocation(agent="async-support", input=lambda q: f"asked {q}")
    async def answer_async(q):
        return q[::-1]
    assert answer("hi", user="u1") == {"text": "HI"}
    with pytest.raises(KeyError):
        answer("boom")
    assert asyncio.run(answer_async("abc")) == "cba"
    with capture.invocation(agent="manual") as inv:
        inv.input_text = "refund"
        inv.tool("lookup", {"order": 7}, {"error": "not found"})
        inv.output_text = "sorry"
    assert capture.flush(5)
    got = {r.agent_name: r for r in store.records}
    assert len(store.records) == 4
    done = [r for r in store.records if r.agent_name == "support"]
    assert sorted(r.status for r in done) == ["completed", "failed"]
    failed = next(r for r in done if r.failed)
    assert failed.error_type == "KeyError" and failed.input_text == "boom"
    assert got["async-support"].input_text == "asked abc"
    assert got["async-support"].output_text == "cba"
    manual = got["manual"]
    assert manual.tool_error and manual.tool_calls[0].result == {"error": "not found"}
