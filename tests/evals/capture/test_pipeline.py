"""Production capture: the rule and its sample, the off switch, the content policy, failures that
never reach the caller, the bounded queue, the local store (torn lines, retention by day), the
repository store (runs ready for review, erasure by the keyed person digest), the import of a
local store, the decorator and the OpenTelemetry span processor."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import threading
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas.evals.capture import pipeline as capture
from cas.storage.backends.memory import MemoryBackend
from cas.evals.capture.pipeline import CaptureEvent, CaptureRecord, LocalCaptureStore, ToolCall

ADA = "Ada <ada@example.com>"


class ListStore:
    """A store that keeps records in memory (the protocol, nothing more)."""

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


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv("CAS_CAPTURE", raising=False)
    monkeypatch.delenv("CAS_CAPTURE_SAMPLE_RATE", raising=False)
    capture.reset()
    yield
    capture.reset()


def event(i: int = 0, **kw) -> CaptureEvent:
    base = dict(agent_name="support", invocation_id=f"inv-{i}", session_id=f"SESSION-{i}",
                user_id=f"USER-{i}", input_text=f"question {i}", output_text=f"answer {i}",
                metadata={"secret": f"META-{i}"})
    base.update(kw)
    return CaptureEvent(**base)


def captured(events, rule=lambda e: e.failed, **kw) -> ListStore:
    store = ListStore()
    capture.register_store("mem", store)
    capture.rule(rule, store="mem", **kw)
    for e in events:
        assert capture.submit(e) in (True, False)
    assert capture.flush(5)
    return store


# -- the rule, the sample, the switch ------------------------------------------------------------
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


# -- registration ---------------------------------------------------------------------------------
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


# -- the content policy -------------------------------------------------------------------------
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


# -- the local store ------------------------------------------------------------------------------
class Clock:
    def __init__(self, when: datetime) -> None:
        self.now = when

    def __call__(self) -> datetime:
        return self.now


def record(i: int, when: str = "2026-12-01T10:00:00.000000Z") -> CaptureRecord:
    return CaptureRecord(id=f"cr-{i}", captured_at=when, agent_name="support",
                         invocation_id=f"inv-{i}", reasons=("rule",), status="failed")


def test_local_store_skips_and_reports_a_torn_last_line_and_starts_clean_after_it(tmp_path,
                                                                                 caplog):
    clock = Clock(datetime(2026, 12, 1, 10, tzinfo=timezone.utc))
    store = LocalCaptureStore(tmp_path, clock=clock)
    asyncio.run(store.start())
    asyncio.run(store.append(record(1)))
    path = tmp_path / "captures-2026-12-01.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"agent_name":"support","captured_at":"2026-12-01T10:0')  # a crash mid-append
    with caplog.at_level(logging.WARNING, logger="cas.capture"):
        assert [r.id for r in asyncio.run(store.list())] == ["cr-1"]
    assert store.torn == [(str(path), 2)] and "capture.torn_line" in caplog.text
    asyncio.run(store.append(record(2, "2026-12-01T11:00:00.000000Z")))
    assert [r.id for r in asyncio.run(store.list())] == ["cr-2", "cr-1"]


def test_local_store_keeps_retention_days_across_a_day_change(tmp_path):
    clock = Clock(datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc))
    store = LocalCaptureStore(tmp_path, retention_days=2, clock=clock)
    asyncio.run(store.start())
    for day in range(4):  # one record a day, the clock moving past midnight each time
        asyncio.run(store.append(record(day, f"2026-12-0{1 + day}T23:59:00.000000Z")))
        clock.now += timedelta(days=1)
    names = sorted(os.listdir(tmp_path))
    assert names == ["captures-2026-12-03.jsonl", "captures-2026-12-04.jsonl"]
    assert [r.id for r in asyncio.run(store.list(since="2026-12-04"))] == ["cr-3"]
    assert [r.id for r in asyncio.run(store.list(limit=1))] == ["cr-3"]
    clock.now += timedelta(days=5)
    asyncio.run(LocalCaptureStore(tmp_path, retention_days=2, clock=clock).start())
    assert os.listdir(tmp_path) == []


# -- the repository store, erasure, import --------------------------------------------------------
def every_byte(backend) -> bytes:
    return b"".join(backend.get(k) for k in backend.list(""))


def test_repository_store_makes_reviewable_runs_that_erasure_finds_without_the_user_id():
    repo = cas.Repository.create(MemoryBackend())
    store = capture.RepositoryCaptureStore(repo, "acme")
    capture.register_store("repo", store)
    capture.rule(lambda e: e.failed, store="repo")
    capture.redactor(lambda r: r)  # keep content: it is what the erasure must delete
    for i in range(3):
        capture.submit(event(i, status="failed" if i < 2 else "completed",
                             user_id="alice" if i == 0 else "bob"))
    assert capture.flush(5)
    runs = repo.runs()
    assert len(runs) == 2 and all(r.startswith("capture-cr-") for r in runs)
    queued = repo.review_queue()
    assert len(queued.runs if hasattr(queued, "runs") else queued["runs"]) == 2
    stored = every_byte(repo.backend)
    for secret in (b"alice", b"bob", b"SESSION-", b"META-", b"USER-"):
        assert secret not in stored
    assert b"question 0" in stored
    person = repo.run(runs[0]).person
    assert person.startswith("pk:") and person in (repo.store.person_digest("alice"),
                                                    repo.store.person_digest("bob"))
    preview = repo.erase("alice")
    assert len(preview["runs"]) == 1
    repo.erase("alice", confirm_token=preview["confirm_token"], author=ADA)
    stored = every_byte(repo.backend)
    assert b"question 0" not in stored and b"question 1" in stored
    assert [r.id for r in asyncio.run(store.list())] == [capture.record_of(repo.run(r)).id
                                                         for r in repo.runs()]
    assert repo.fsck().ok


def test_the_repository_store_leaves_out_an_erased_persons_new_captures(caplog):
    repo = cas.Repository.create(MemoryBackend())
    store = capture.RepositoryCaptureStore(repo, "acme")
    capture.register_store("repo", store)
    capture.rule(lambda e: True, store="repo")
    capture.submit(event(0, user_id="alice"))
    assert capture.flush(5)
    repo.erase("alice", confirm_token=repo.erase("alice")["confirm_token"], author=ADA)
    with caplog.at_level(logging.INFO, logger="cas.capture"):
        capture.submit(event(1, user_id="alice"))  # erased: stays erased
        capture.submit(event(2, user_id="bob"))    # the same batch or not, bob's is kept
        assert capture.flush(5)
    assert [capture.record_of(repo.run(r)).invocation_id for r in repo.runs()] == ["inv-2"]
    assert store.erased_skipped == 1 and "capture.skipped reason=person_erased" in caplog.text
    assert capture.stats().get("failed", 0) == 0


def test_runs_import_from_captures(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cas_cli.main import cli
    monkeypatch.setenv("CAS_USER", ADA)
    caps = tmp_path / "caps"
    store = LocalCaptureStore(caps)
    asyncio.run(store.start())
    asyncio.run(store.append(record(1)))
    with open(caps / os.listdir(caps)[0], "ab") as f:
        f.write(b'{"torn')
    location = str(tmp_path / "repo")
    cas.init(location)

    def run(*args):
        return CliRunner().invoke(cli, ["--repo", location, *args], catch_exceptions=False)
    out = run("runs", "import", "--from-captures", str(caps), "--tenant", "acme", "--json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["imported"] == ["capture-cr-1"] and data["torn"][0]["line"] == 2
    assert "torn or unreadable capture record was skipped" in out.stderr
    again = json.loads(run("runs", "import", "--from-captures", str(caps), "--tenant", "acme",
                           "--json").stdout)
    assert again["imported"] == [] and again["unchanged"] == 1
    refused = run("runs", "import", "--from-captures", str(caps), "--json")
    assert json.loads(refused.output)["error"]["reason"] == "TENANT_REQUIRED"
    both = run("runs", "import", "--from-captures", str(caps), "x.jsonl", "--tenant", "a")
    assert both.exit_code != 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=12, max_size=20))
def test_no_user_session_or_metadata_value_reaches_a_stored_byte(tmp_path_factory, token):
    capture.reset()
    repo = cas.Repository.create(MemoryBackend())
    local = LocalCaptureStore(tmp_path_factory.mktemp("caps"))
    capture.register_store("repo", capture.RepositoryCaptureStore(repo, "acme"))
    capture.rule(lambda e: True, store="repo")
    capture.redactor(lambda r: r)
    capture.submit(event(0, user_id=f"u{token}", session_id=f"s{token}",
                         metadata={"k": f"m{token}", f"key{token}": 1}))
    assert capture.flush(5)
    assert token.encode() not in every_byte(repo.backend)
    capture.reset()
    capture.register_store("local", local)
    capture.rule(lambda e: True, store="local")
    capture.submit(event(0, user_id=f"u{token}", session_id=f"s{token}",
                         metadata={"k": f"m{token}"}))
    assert capture.flush(5)
    written = b"".join(p.read_bytes() for p in local_dir(local))
    assert written and token.encode() not in written


def local_dir(store: LocalCaptureStore):
    import pathlib
    return list(pathlib.Path(store.directory).iterdir())


# -- integrations ---------------------------------------------------------------------------------
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


def test_the_span_processor_turns_genai_agent_spans_into_events():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Status, StatusCode

    store = ListStore()
    capture.register_store("mem", store)
    capture.rule(lambda e: e.failed or e.tool_error, store="mem")
    capture.redactor(lambda r: r)
    provider = TracerProvider()
    from cas.evals.capture.otel import CaptureSpanProcessor
    provider.add_span_processor(CaptureSpanProcessor())
    tracer = provider.get_tracer("test")
    msgs_in = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "refund 7"}]}])
    msgs_out = json.dumps([{"role": "assistant", "parts": [{"type": "text",
                                                            "content": "cannot"}]}])
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
            "gen_ai.conversation.id": "SESSION-X", "user.id": "USER-X"}) as agent:
        with tracer.start_as_current_span("chat", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.input.messages": msgs_in,
                "gen_ai.output.messages": msgs_out}):
            pass
        with tracer.start_as_current_span("execute_tool refund", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund",
                "gen_ai.tool.call.arguments": '{"order": 7}'}) as tool:
            tool.set_status(Status(StatusCode.ERROR, "order closed"))
        agent.set_attribute("error.type", "RefundError")
        agent.set_status(Status(StatusCode.ERROR))
    with tracer.start_as_current_span("invoke_agent ok", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        pass
    provider.force_flush()
    assert capture.flush(5)
    [r] = store.records
    assert (r.agent_name, r.status, r.error_type) == ("support", "failed", "RefundError")
    assert (r.input_text, r.output_text) == ("refund 7", "cannot")
    assert [(t.name, t.failed, t.arguments, t.error) for t in r.tool_calls] == \
        [("refund", True, {"order": 7}, {"status": "error", "message": "order closed"})]
    assert capture.stats()["rejected"] == 1
    from cas.evals.capture.records import format_record
    assert b"SESSION-X" not in format_record(r) and b"USER-X" not in format_record(r)


def test_the_presidio_redactor_masks_what_presidio_detects(tmp_path):
    """With a real Presidio analyzer over a blank spaCy pipeline (its pattern recognizers need
    no trained model; a trained one, which PyPI does not carry, adds names and places)."""
    import spacy
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import SpacyNlpEngine

    from cas.evals.capture.presidio import presidio_redactor
    spacy.blank("en").to_disk(tmp_path / "blank-en")
    engine = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": str(tmp_path / "blank-en")}])
    analyzer = AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])
    store = ListStore()
    capture.register_store("mem", store)
    capture.rule(lambda e: True, store="mem")
    capture.redactor(presidio_redactor(analyzer, entities=["EMAIL_ADDRESS", "CREDIT_CARD"]))
    capture.submit(event(1, input_text="refund to ada.lovelace@example.com, card "
                                       "4111 1111 1111 1111",
                         output_text="done for ada.lovelace@example.com",
                         tool_calls=(ToolCall(name="refund", arguments={"card": "4111"},
                                              error="declined"),)))
    assert capture.flush(10)
    [r] = store.records
    assert r.content == "redacted"
    assert r.input_text == "refund to <EMAIL_ADDRESS>, card <CREDIT_CARD>"
    assert r.output_text == "done for <EMAIL_ADDRESS>"
    assert [(t.name, t.failed, t.arguments, t.error) for t in r.tool_calls] == \
        [("refund", True, None, None)]


def test_the_span_processor_reads_the_older_conventions_span_events_too():
    """A model-call span at the root of its trace (as OpenAI's instrumentation emits it), its
    messages as `gen_ai.*.message` span events: read as the otel-genai importer reads them."""
    from opentelemetry.sdk.trace import TracerProvider

    from cas.evals.capture.otel import CaptureSpanProcessor
    store = ListStore()
    capture.register_store("mem", store)
    capture.rule(lambda e: True, store="mem")
    capture.redactor(lambda r: r)
    provider = TracerProvider()
    provider.add_span_processor(CaptureSpanProcessor(agent="chatbot"))
    with provider.get_tracer("t").start_as_current_span("chat gpt-4o", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.system": "openai"}) as span:
        span.add_event("gen_ai.system.message", {"content": "be brief"})
        span.add_event("gen_ai.user.message", {"content": "where is order 7?"})
        span.add_event("gen_ai.assistant.message", {"content": "it shipped"})
    assert capture.flush(5)
    [r] = store.records
    assert (r.agent_name, r.status, r.input_text) == ("chatbot", "completed",
                                                      "where is order 7?")
    assert r.output_text == "it shipped"


def test_the_repository_store_on_each_backend(location, monkeypatch):
    """Captures into a local directory and into S3 (SeaweedFS): the runs are there for any
    process that opens the repository, and the erasure of the user deletes them."""
    monkeypatch.setenv("CAS_USER", ADA)
    repo = cas.init(location)
    capture.register_store("repo", capture.RepositoryCaptureStore(repo, "acme"))
    capture.rule(lambda e: e.failed, store="repo")
    capture.redactor(lambda r: r)
    capture.submit(event(5, status="failed", user_id="dana"))
    assert capture.flush(10)
    other = cas.open(location)
    [run_id] = other.runs()
    assert other.run(run_id).input == "question 5"
    other.erase("dana", confirm_token=other.erase("dana")["confirm_token"], author=ADA)
    assert cas.open(location).runs() == [] and cas.open(location).fsck().ok
