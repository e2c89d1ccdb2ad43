"""The HTTP adapter of cassettes (cas/evals/cassettes/http.py): requests of real clients (httpx,
the OpenAI SDK) against a local server recorded and replayed, credentials never stored, a
changed request stale, one HTTP cassette at a time."""

from __future__ import annotations

import http.server
import json
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.evals.cassettes import RECORD, REPLAY, Cassette, CassetteBook, StaleCassette
from cas.evals.cassettes import http as cassette_http
from cas.evals.suites import Run, SuiteRunner, from_version
from cas.format import encoding
from cas.storage.backends.memory import MemoryBackend
from support.evals import ADA, all_bytes, frozen


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
        return Run(_post(cassette, server, case.input), case.tenant)
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


def test_live_mode_patches_nothing_and_keeps_nothing(server):
    c = Cassette(mode="live")
    first = _post(c, server, "live")
    assert first["echo"] == {"q": "live"} and c.exchanges == [] and not c.changed
