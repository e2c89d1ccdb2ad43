"""Cassettes: request keys, the four modes, stale and unused exchanges, strict and ordered
matching, the HTTP adapter (a real local server, credentials never stored), and cassettes in
a repository: saved per (dataset, case, executor), checked by fsck, kept by gc, mirrored, and
deleted by the erasure of the case's person. Through the runner, the CLI and the plugin."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading

import msgspec
import pytest
from blake3 import blake3
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.evals.cassettes import http as cassette_http
from cas.evals import cassettes
from cas.format import encoding
from cas.evals.suites import runner
from cas.storage.backends.memory import MemoryBackend
from cas.evals.cassettes import (LIVE, RECORD, RECORD_MISSING, REPLAY, Cassette, CassetteBook,
                                 RecordedError, StaleCassette, UnusedExchanges)
from cas.evals.suites.runner import COMPLETED, ERRORED, SuiteRunner
from cas.evals.suites import from_version

ADA = "Ada <ada@example.com>"
pytest_plugins = ["pytester"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10 ** 6, 10 ** 6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=8)


def search(query, limit=2):
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


# -- request keys ---------------------------------------------------------------------------------
def test_request_key_is_blake3_of_its_domain_over_canonical_adapter_name_request():
    key = cassettes.request_key("call", "search", {"b": 1, "a": [1, "x"]})
    want = blake3(b"cas:cassette-request\x00" + b'["call","search",{"a":[1,"x"],"b":1}]')
    assert key == "b3:" + want.hexdigest()


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=5), json_values, max_size=4), st.randoms())
def test_a_call_is_matched_whatever_order_its_keyword_arguments_come_in(kwargs, rnd):
    def tool(**kw):
        return sorted(kw)
    rec = Cassette(mode=RECORD)
    answer = rec.wrap(tool, "tool")(**kwargs)
    shuffled = list(kwargs.items())
    rnd.shuffle(shuffled)
    replay = Cassette(rec.exchanges, REPLAY)
    assert replay.wrap(tool, "tool")(**dict(shuffled)) == answer
    replay.check()


# -- modes ---------------------------------------------------------------------------------------
def test_record_then_replay_makes_no_live_call_and_gives_the_same_answers():
    exchanges = recorded(("a", 2), ("b", 1))
    before = search.calls
    c = Cassette(exchanges, REPLAY)
    s = c.wrap(search, "search")
    assert s("b", limit=1) == {"hits": ["b-0"]}  # any order: matched by request, not position
    assert s(query="a") == {"hits": ["a-0", "a-1"]}
    assert search.calls == before
    c.check()
    assert not c.changed and c.exchanges == [exchanges[1], exchanges[0]]


def test_an_async_call_and_a_recorded_error_replay_as_they_ran():
    async def model(messages):
        return {"content": "hi " + messages[-1]}

    def broken(x):
        raise KeyError(x)
    rec = Cassette(mode=RECORD)
    assert asyncio.run(rec.wrap(model, "model")(["there"])) == {"content": "hi there"}
    with pytest.raises(KeyError):
        rec.wrap(broken, "broken")("k")
    replay = Cassette(rec.exchanges, REPLAY)
    assert asyncio.run(replay.wrap(model, "model")(["there"])) == {"content": "hi there"}
    with pytest.raises(RecordedError) as e:
        replay.wrap(broken, "broken")("k")
    assert e.value.type == "KeyError" and "'k'" in str(e.value)


def test_replay_refuses_a_changed_request_naming_the_call_and_the_first_differing_path():
    c = Cassette(recorded(("a", 2)), REPLAY)
    with pytest.raises(StaleCassette) as e:
        c.wrap(search, "search")("zz", limit=2)
    assert e.value.reason == "CASSETTE_STALE" and e.value.code == "FAILED_PRECONDITION"
    assert "call 'search'" in e.value.message and "/query" in e.value.message
    assert "'a'" in e.value.message and "'zz'" in e.value.message
    with pytest.raises(StaleCassette, match="no recording; the cassette has only call 'search'"):
        c.wrap(search, "lookup")("a")
    with pytest.raises(StaleCassette, match="is empty"):
        Cassette([], REPLAY).wrap(search, "search")("a")


def test_a_recording_is_used_once():
    c = Cassette(recorded(("a", 2)), REPLAY)
    s = c.wrap(search, "search")
    s("a")
    with pytest.raises(StaleCassette, match="requested again with the same arguments"):
        s("a")


def test_strict_reports_unused_exchanges_and_lenient_does_not():
    exchanges = recorded(("a", 2), ("b", 2), ("c", 2))
    c = Cassette(exchanges, REPLAY)
    c.wrap(search, "search")("b")
    assert [e.request["query"] for e in c.unused()] == ["a", "c"]
    with pytest.raises(UnusedExchanges, match="2 exchange") as e:
        c.check()
    assert e.value.reason == "CASSETTE_UNUSED"
    lenient = Cassette(exchanges, REPLAY, strict=False)
    lenient.wrap(search, "search")("b")
    lenient.check()
    assert len(lenient.unused()) == 2


def test_ordered_matching_refuses_a_call_out_of_order():
    exchanges = recorded(("a", 2), ("b", 2))
    c = Cassette(exchanges, REPLAY, ordered=True)
    with pytest.raises(StaleCassette, match="call 1 of the run is 'search'.*differ at /query"):
        c.wrap(search, "search")("b")
    in_order = Cassette(exchanges, REPLAY, ordered=True)
    s = in_order.wrap(search, "search")
    s("a"), s("b")
    in_order.check()


def test_record_missing_replays_what_exists_and_records_the_rest():
    exchanges = recorded(("a", 2), ("old", 2))
    before = search.calls
    c = Cassette(exchanges, RECORD_MISSING, strict=False)
    s = c.wrap(search, "search")
    s("a"), s("new")
    assert search.calls == before + 1  # only the missing one called through
    assert c.changed and [e.request["query"] for e in c.exchanges] == ["a", "new"]
    assert [e.request["query"] for e in c.unused()] == ["old"]


def test_record_ignores_the_old_recording_and_live_records_nothing():
    exchanges = recorded(("a", 2))
    before = search.calls
    c = Cassette(exchanges, RECORD)
    c.wrap(search, "search")("a")
    assert search.calls == before + 1 and c.recorded == [] and len(c.exchanges) == 1
    live = Cassette(exchanges, LIVE)
    live.wrap(search, "search")("zz")
    assert search.calls == before + 2 and live.exchanges == [] and not live.changed
    live.check()


def test_modes_resolve_from_the_flag_the_environment_and_ci():
    assert cassettes.resolve_mode("live", {}) == LIVE
    assert cassettes.resolve_mode(None, {"CAS_CASSETTE_MODE": "record"}) == RECORD
    assert cassettes.resolve_mode(None, {"CI": "true"}) == REPLAY
    assert cassettes.resolve_mode(None, {"CI": "false"}) == RECORD_MISSING
    assert cassettes.resolve_mode(None, {"CI": ""}) == REPLAY  # set, if empty
    assert cassettes.resolve_mode(None, {}) == RECORD_MISSING
    with pytest.raises(cas.InvalidArgument, match="CAS_CASSETTE_MODE 'replya'.*replay"):
        cassettes.resolve_mode(None, {"CAS_CASSETTE_MODE": "replya"})


def test_what_is_not_json_is_refused_naming_the_call():
    c = Cassette(mode=RECORD)
    with pytest.raises(cas.InvalidArgument, match="arguments of 'tool'"):
        c.wrap(lambda x: x, "tool")(object())
    with pytest.raises(cas.InvalidArgument, match="response of 'tool'"):
        c.wrap(lambda x: object(), "tool")(1)
    # with converters, any value
    conv = c.wrap(lambda x: {x}, "set", to_json=sorted, from_json=set)
    assert conv(3) == {3}
    assert Cassette(c.exchanges, REPLAY).wrap(lambda x: None, "set", from_json=set)(3) == {3}


# -- the HTTP adapter -----------------------------------------------------------------------------
class _Handler(http.server.BaseHTTPRequestHandler):
    hits: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["content-length"]))
        type(self).hits.append(body)
        out = json.dumps({"echo": json.loads(body), "n": len(self.hits)}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("set-cookie", "session=SETCOOKIESECRET")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()


SECRETS = ("sk-TOPSECRETTOPSECRETTOPSECRET", "COOKIESECRET", "QUERYSECRET", "SETCOOKIESECRET",
           "HEADERSECRET")


def _post(c: Cassette, base: str, text: str) -> dict:
    import httpx
    with cassette_http.use(c):
        r = httpx.post(f"{base}/v1/chat?api_key=QUERYSECRET&model=m", json={"q": text},
                       headers={"Authorization": f"Bearer {SECRETS[0]}",
                                "Cookie": "sid=COOKIESECRET", "X-Api-Key": "HEADERSECRET"})
        return r.json()


def test_http_is_recorded_replayed_and_never_stores_a_credential(server):
    rec = Cassette(mode=RECORD)
    first = _post(rec, server, "hello")
    hits = len(_Handler.hits)
    [exchange] = rec.exchanges
    assert exchange.adapter == "http" and exchange.name.startswith("POST http://127.0.0.1")
    stored = encoding.encode(rec.exchanges)
    for secret in SECRETS:
        assert secret.encode() not in stored
    assert b"model=m" in stored  # only what carries a credential is removed
    replay = Cassette(rec.exchanges, REPLAY)
    assert _post(replay, server, "hello") == first and len(_Handler.hits) == hits
    replay.check()
    with pytest.raises(StaleCassette, match="POST .*model=m has no recording.*body") as e:
        _post(Cassette(rec.exchanges, REPLAY), server, "changed")
    assert "QUERYSECRET" not in e.value.message
    with pytest.raises(StaleCassette):  # an SDK wrapping vcrpy's refusal in its own error
        with cassette_http.use(Cassette(rec.exchanges, REPLAY)):
            try:
                import httpx
                httpx.post(f"{server}/v1/other", json={})
            except Exception as exc:
                raise RuntimeError("connection error") from exc


def test_an_http_cassette_saved_in_a_repository_holds_no_credential(server):
    repo = cas.Repository.create(MemoryBackend())
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=[frozen(0)], author=ADA)
    p = str(repo.pin("evals", 1))

    async def agent(case, *, run_id, cassette):
        return runner.Run(_post(cassette, server, case.input), case.tenant)
    book = CassetteBook(repo, p, "agent:http", RECORD)
    assert SuiteRunner(agent, cassettes=book, concurrency=1).run(
        from_version(repo, "evals", 1)).ok
    stored = all_bytes(repo)
    assert b"task 0" in stored and b"127.0.0.1" in stored
    for secret in SECRETS:
        assert secret.encode() not in stored
    replayed = SuiteRunner(agent, cassettes=CassetteBook(repo, p, "agent:http", REPLAY)).run(
        from_version(repo, "evals", 1))
    assert replayed.ok


_TOKEN = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=24,
                 max_size=40)


@settings(max_examples=80, deadline=None)
@given(_TOKEN, st.sampled_from(["Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key",
                                "api-key", "X-Goog-Api-Key", "x-auth-token"]),
       st.sampled_from(["api_key", "key", "token", "access_token", "sig", "client_secret"]))
def test_no_generated_credential_reaches_a_recorded_http_exchange(secret, header, param):
    from vcr.request import Request
    value = f"Bearer {secret}" if header.endswith("Authorization") else secret
    request = Request("POST", f"https://api.example.com/v1?{param}={secret}&model=m",
                      json.dumps({"auth": f"Bearer {secret}", "q": "hi"}).encode(),
                      {header: value, "Content-Type": "application/json"})
    response = {"status": {"code": 200, "message": "OK"},
                "headers": {"Set-Cookie": [f"s={secret}"], header: [value]},
                "body": {"string": b'{"ok": true}'}}
    exchange = cassette_http._exchange(cassette_http.clean_request(request), response)
    stored = encoding.encode(exchange)
    assert secret.encode() not in stored
    assert b"model=m" in stored and b"application/json" in stored


class _ChatHandler(http.server.BaseHTTPRequestHandler):
    """Answers OpenAI's chat completions API, as a model server would (its replies echo)."""

    hits: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).hits.append(dict(self.headers))
        out = json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": body["model"], "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                              "total_tokens": 2},
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "echo: " + body["messages"][-1]["content"]}}],
        }).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def test_the_openai_sdk_records_and_replays_through_the_http_adapter():
    import openai
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        client = openai.OpenAI(api_key=SECRETS[0], max_retries=0,
                               base_url=f"http://127.0.0.1:{srv.server_port}/v1")

        def ask(c: Cassette, text: str) -> str:
            with cassette_http.use(c):
                reply = client.chat.completions.create(
                    model="gpt-x", messages=[{"role": "user", "content": text}])
            return reply.choices[0].message.content
        rec = Cassette(mode=RECORD)
        assert ask(rec, "hi") == "echo: hi" and len(_ChatHandler.hits) == 1
        assert SECRETS[0].encode() not in encoding.encode(rec.exchanges)
        replay = Cassette(rec.exchanges, REPLAY)
        assert ask(replay, "hi") == "echo: hi" and len(_ChatHandler.hits) == 1  # no live call
        replay.check()
        with pytest.raises(StaleCassette, match="chat/completions has no recording.*body"):
            ask(Cassette(rec.exchanges, REPLAY), "changed")  # the SDK wraps vcrpy's refusal
        assert len(_ChatHandler.hits) == 1
    finally:
        srv.shutdown()


def test_two_http_cassettes_at_once_are_refused(server):
    a, b = Cassette(mode=RECORD), Cassette(mode=RECORD)
    with cassette_http.use(a):
        with pytest.raises(cas.FailedPrecondition) as e:
            with cassette_http.use(b):
                pass
    assert e.value.reason == "CASSETTE_HTTP_BUSY"


# -- in a repository ------------------------------------------------------------------------------
def frozen(i: int, person: str | None = None) -> dict:
    return {"run_id": f"r-{i}", "tenant": "acme", "input": f"task {i}", "output": f"done {i}",
            "person": person if person is not None else f"user-{i}",
            "steps": [{"type": "tool_call", "tool_name": "search", "arguments": {"q": i},
                       "result": [f"PAYLOAD-{i}"]},
                      {"type": "tool_call", "tool_name": "open", "arguments": {"n": i}}]}


@pytest.fixture
def repo():
    r = cas.Repository.create(MemoryBackend())
    r.create_dataset("evals", admission="direct")
    r.commit("evals", base=None, add=[frozen(i) for i in range(3)], author=ADA)
    return r


def pin(repo, n: int = 1) -> str:
    return str(repo.pin("evals", n))


def run_version(repo, mode, executor=runner.cassette_executor, name="cas:cassette",
                n: int = 1, **kw):
    book = CassetteBook(repo, pin(repo, n), name, mode, **kw)
    return SuiteRunner(executor, cassettes=book).run(from_version(repo, "evals", n)), book


def all_bytes(repo) -> bytes:
    b = repo.backend
    return b"".join(b.get(k) for k in b.list(""))


def test_cas_cassette_records_from_the_version_then_replays_it(repo):
    result, book = run_version(repo, RECORD_MISSING)
    assert result.ok and book.pending == 0
    current = cassettes.current(repo, "evals")
    assert len(current) == 3 and {e for _, e in current} == {"cas:cassette"}
    case_id = repo.items("evals", 1).items[0]
    record = cassettes.read(repo, "evals", case_id, "cas:cassette")
    assert record.case_id == case_id and record.person is not None
    assert [e.name for e in record.exchanges] == ["search", "open"]
    assert record.exchanges[1].response == {}  # the call recorded no answer
    again, _ = run_version(repo, REPLAY)
    assert again.ok and again.digest == result.digest
    assert len(cassettes.cassette_logs(repo, "evals")) == 1  # nothing changed: nothing stored
    assert repo.fsck().ok


def test_replay_without_a_cassette_errors_every_case_with_the_reason(repo):
    result, _ = run_version(repo, REPLAY)
    assert result.counts[ERRORED] == 3 and result.exit_code == runner.EXIT_ERRORED
    assert all("StaleCassette" in r.reason and "is empty" in r.reason for r in result.results)
    assert cassettes.cassette_logs(repo, "evals") == []


def test_a_changed_case_is_stale_and_an_unused_exchange_errors_in_strict_mode(repo):
    run_version(repo, RECORD)

    async def drifted(case, *, run_id, cassette):
        tool = cassette.wrap(lambda arguments: None, "search")  # as cas:cassette asks
        q = case.frozen.steps[0]["arguments"]["q"]
        tool(arguments={"q": q + 100 if case.input == "task 0" else q})
        return runner.Run("x", case.tenant)
    result, _ = run_version(repo, REPLAY, drifted, "cas:cassette")
    by_input = {repo.case("evals", 1, r.id).input: r for r in result.results}
    assert by_input["task 0"].outcome == ERRORED
    assert "differs at /arguments/q: recorded 0, requested 100" in by_input["task 0"].reason
    # the others made the search call but never the recorded `open`: strict says so
    assert by_input["task 1"].outcome == ERRORED and "never requested" in by_input["task 1"].reason
    lenient, _ = run_version(repo, REPLAY, drifted, "cas:cassette", strict=False)
    assert [r.outcome for r in lenient.results].count(COMPLETED) == 2


def test_cassettes_are_per_executor_and_a_rerecording_supersedes(repo):
    run_version(repo, RECORD)

    async def mine(case, *, run_id, cassette):
        return runner.Run(cassette.wrap(search, "search")(case.input), case.tenant)
    first, _ = run_version(repo, RECORD, mine, "pkg.mod:mine")
    assert first.ok and len(cassettes.current(repo, "evals")) == 6
    assert run_version(repo, REPLAY, mine, "pkg.mod:mine")[0].digest == first.digest
    run_version(repo, RECORD, mine, "pkg.mod:mine")  # the same exchanges: nothing new
    assert len(cassettes.cassette_logs(repo, "evals")) == 2


def test_saving_refuses_a_case_outside_the_version_and_a_retired_version(repo):
    repo.commit("evals", base=1, add=[frozen(9)], author=ADA)
    old = repo.items("evals", 1).items
    new_case = next(c for c in repo.items("evals", 2).items if c not in old)
    with pytest.raises(cas.NotFound):
        cassettes.save(repo, pin(repo), "x:y", {new_case: []})
    repo.retire("evals", 1, "CONTAMINATED", "leaked")
    with pytest.raises(cas.FailedPrecondition):
        CassetteBook(repo, pin(repo), "x:y", REPLAY)
    assert cassettes.cassette_logs(repo, "evals") == []


def test_a_suite_that_is_not_a_pin_needs_live_mode():
    s = cas.evals.suites.Suite("demo", "v1", [{"id": "c1", "input": 1, "tenant": "acme"}])
    with pytest.raises(cas.FailedPrecondition) as e:
        CassetteBook(None, s.version, "x:y", REPLAY)
    assert e.value.reason == "SUITE_NOT_PINNED"

    async def agent(case, *, run_id, cassette):
        return runner.Run(cassette.wrap(search, "search")(case.input), case.tenant)
    r = SuiteRunner(agent, cassettes=CassetteBook(None, s.version, "x:y", LIVE)).run(s)
    assert r.ok and r.results[0].answer == {"hits": ["1-0", "1-1"]}
    with pytest.raises(cas.InvalidArgument) as e:
        SuiteRunner(runner.echo, cassettes=CassetteBook(None, s.version, "x:y", LIVE))
    assert e.value.reason == "CASSETTE_UNUSED_BY_EXECUTOR"


def test_fsck_checks_cassettes_and_gc_keeps_them(repo):
    run_version(repo, RECORD)
    assert repo.fsck().ok
    report = repo.gc(grace=0)
    assert report.objects_deleted == 0 and repo.fsck().ok
    assert run_version(repo, REPLAY)[0].ok
    # a log entry naming a missing cassette is damage
    [log] = cassettes.cassette_logs(repo, "evals")
    bogus = msgspec.structs.replace(log.entries[0], cassette="b3:" + "0" * 64)
    forged = msgspec.structs.replace(log, number=2, entries=[bogus])
    from cas.format.keys import cassette_log_key
    from cas.format.records import format_record_file
    repo.backend.put_if_absent(cassette_log_key("evals", 2), format_record_file(forged))
    problems = [p for p in repo.fsck().problems if p.severity == "error"]
    assert len(problems) == 1 and "is missing" in problems[0].message


def test_erasing_the_person_deletes_their_cassettes_everywhere(repo):
    run_version(repo, RECORD)
    assert b"PAYLOAD-1" in all_bytes(repo)
    preview = repo.erase("user-1")
    assert preview["cassettes"] == 1
    repo.erase("user-1", confirm_token=preview["confirm_token"], author=ADA)
    stored = all_bytes(repo)
    assert b"PAYLOAD-1" not in stored and b"user-1" not in stored
    assert b"PAYLOAD-0" in stored and b"PAYLOAD-2" in stored
    assert repo.fsck().ok
    with pytest.raises(cas.FailedPrecondition):  # the version that held it is retired
        CassetteBook(repo, pin(repo), "cas:cassette", REPLAY)


def test_a_recording_kept_while_its_person_was_erased_is_refused_not_stored(repo):
    book = CassetteBook(repo, pin(repo), "cas:cassette", RECORD)
    case_id = next(c for c in repo.items("evals", 1).items
                   if repo.case("evals", 1, c).person == "user-1")
    cassette = book.cassette(case_id)
    cassette.call("search", {"q": 1}, lambda: ["PAYLOAD-LATE"])
    book.keep(case_id, cassette)
    repo.erase("user-1", confirm_token=repo.erase("user-1")["confirm_token"], author=ADA)
    with pytest.raises(cas.FailedPrecondition) as e:
        book.save()
    assert e.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"
    assert b"PAYLOAD-LATE" not in all_bytes(repo) and repo.fsck().ok


def test_a_mirror_copies_the_cassettes(repo, tmp_path):
    run_version(repo, RECORD)
    from cas.repo import mirror
    dst = MemoryBackend()
    mirror.mirror(repo.backend, dst)
    copy = cas.Repository(dst)
    assert copy.fsck().ok and cassettes.current(copy, "evals") == cassettes.current(repo, "evals")
    assert run_version(copy, REPLAY)[0].ok


# -- the CLI and the plugin -----------------------------------------------------------------------
def test_cli_records_replays_and_refuses_a_cassette_mode_the_executor_cannot_use(tmp_path,
                                                                                 monkeypatch):
    from click.testing import CliRunner

    from cas_cli.main import cli
    monkeypatch.setenv("CAS_USER", ADA)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("CAS_CASSETTE_MODE", raising=False)
    location = str(tmp_path / "repo")
    r = cas.init(location)
    r.create_dataset("evals", admission="direct")
    r.commit("evals", base=None, add=[frozen(i) for i in range(2)], author=ADA)

    def cli_run(*args):
        return CliRunner().invoke(cli, ["--repo", location, *args], catch_exceptions=False)
    replayed = cli_run("suite", "run", "evals@1", "--executor", "cas:cassette",
                       "--cassette-mode", "replay", "--json")
    assert replayed.exit_code == runner.EXIT_ERRORED
    assert "stale cassette" in json.loads(replayed.stdout)["results"][0]["reason"]
    assert cli_run("suite", "run", "evals@1", "--executor", "cas:cassette").exit_code == 0
    monkeypatch.setenv("CI", "true")  # replay by default under CI
    again = cli_run("suite", "run", "evals@1", "--executor", "cas:cassette", "--json")
    assert again.exit_code == 0, again.stdout
    refused = cli_run("suite", "run", "evals@1", "--executor", "cas:echo",
                      "--cassette-mode", "record", "--json")
    assert json.loads(refused.output)["error"]["reason"] == "CASSETTE_UNUSED_BY_EXECUTOR"
    listed = cli_run("cassette", "list", "evals", "--json")
    assert listed.exit_code == 0 and len(json.loads(listed.stdout)["cassettes"]) == 2
    case_id = json.loads(listed.stdout)["cassettes"][0]["case_id"]
    assert "recorded 2 cassettes of evals under cas:cassette (batch 1)" in \
        cli_run("log", "evals").output
    shown = cli_run("cassette", "show", "evals", case_id, "--executor", "cas:cassette", "--json")
    assert [e["name"] for e in json.loads(shown.stdout)["exchanges"]] == ["search", "open"]


PLUGIN_TEST = """
import pytest

def lookup(q):
    import os
    if os.environ.get("NO_LIVE"):
        raise AssertionError("a live call")
    return {{"q": q, "hits": 2}}

@pytest.mark.cas_suite({pin!r})
def test_agent(cas_case, cas_cassette):
    tool = cas_cassette.wrap(lookup, "lookup")
    assert tool(cas_case.input)["hits"] == 2
"""


def test_the_plugin_fixture_records_then_replays(pytester, tmp_path, monkeypatch):
    monkeypatch.setenv("CAS_USER", ADA)
    location = str(tmp_path / "repo")
    r = cas.init(location)
    r.create_dataset("evals", admission="direct")
    r.commit("evals", base=None, add=[frozen(i) for i in range(2)], author=ADA)
    pytester.makepyfile(test_agent=PLUGIN_TEST.format(pin=str(r.pin("evals", 1))))
    first = pytester.runpytest_inprocess("--cas-repo", location, "--cas-cassette-mode",
                                         "record-missing", "-p", "no:randomly")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(
        ["*cas: recorded 2 cassettes of *test_agent.py::test_agent on evals@1*"])
    monkeypatch.setenv("NO_LIVE", "1")
    second = pytester.runpytest_inprocess("--cas-repo", location, "--cas-cassette-mode",
                                          "replay", "-p", "no:randomly")
    second.assert_outcomes(passed=2)
    assert len(cassettes.current(cas.open(location), "evals")) == 2


def test_cassettes_on_each_backend_mirror_and_erase(location, tmp_path, monkeypatch):
    """On a local directory and on S3 (SeaweedFS): recorded, replayed, mirrored to a local
    copy, and erased with their person in every byte of the repository."""
    from cas.repo import mirror
    monkeypatch.setenv("CAS_USER", ADA)
    r = cas.init(location)
    r.create_dataset("evals", admission="direct")
    r.commit("evals", base=None, add=[frozen(i) for i in range(3)], author=ADA)
    assert run_version(r, RECORD)[0].ok and run_version(r, REPLAY)[0].ok
    copy_at = str(tmp_path / "copy")
    mirror.copy(location, copy_at)
    copy = cas.open(copy_at)
    assert copy.fsck().ok and run_version(copy, REPLAY)[0].ok
    r.erase("user-2", confirm_token=r.erase("user-2")["confirm_token"], author=ADA)
    stored = b"".join(r.backend.get(k) for k in r.backend.list(""))
    assert b"PAYLOAD-2" not in stored and b"PAYLOAD-1" in stored and r.fsck().ok
