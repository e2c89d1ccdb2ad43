"""The HTTP adapter of cassettes: vcrpy records and replays the requests of SDK clients, and a
persister keeps its interactions in a cas Cassette (so in the repository), with credentials
removed before anything is kept (docs/suites.md)."""

from __future__ import annotations

import copy
import itertools
import threading
from contextlib import contextmanager
from typing import Any, Iterator

try:
    import vcr
    from vcr.errors import CannotOverwriteExistingCassetteException
    from vcr.persisters.filesystem import CassetteNotFoundError
    from vcr.record_mode import RecordMode
    from vcr.request import Request
except ImportError as exc:  # an extra: say which
    from cas.errors import FailedPrecondition
    raise FailedPrecondition("HTTP cassettes need vcrpy, from the `cassette-http` extra: "
                             "pip install '.[cassette-http]' in the cas checkout",
                             reason="EXTRA_REQUIRED",
                             extra="cassette-http") from exc

from cas.errors import FailedPrecondition
from cas.evals.cassettes.matching import (HTTP, LIVE, RECORD, RECORD_MISSING, REPLAY, RERECORD,
                                          Cassette, StaleCassette, body_bytes, body_text,
                                          credential_name, request_key, strip_query)
from cas.format.records import CassetteExchange

_RECORD_MODES = {REPLAY: RecordMode.NONE, RECORD: RecordMode.ALL,
                 RECORD_MISSING: RecordMode.NEW_EPISODES}
MATCH_ON = ("method", "uri", "body")
_open: dict[str, list] = {}      # path token -> the recorded HTTP exchanges it loads
_active = threading.Lock()       # vcrpy patches the whole process: one block at a time
_tokens = itertools.count(1)


class _Persister:
    """Loads a block's recorded exchanges from its cas Cassette; saving is the Cassette's
    business once the block ends (the interactions are read from vcrpy's cassette then)."""

    @staticmethod
    def load_cassette(path: str, serializer: Any):
        recorded = _open.get(path) or []
        if not recorded:
            raise CassetteNotFoundError()
        return ([Request(e.request["method"], e.request["uri"], body_bytes(e.request["body"]),
                         e.request.get("headers") or {}) for e in recorded],
                [_response_of(e.response) for e in recorded])

    @staticmethod
    def save_cassette(path: str, cassette_dict: dict, serializer: Any) -> None:
        return None


def _response_of(value: dict) -> dict:
    body = value.get("body") or {}
    return {**value, "body": {**body, "string": body_bytes(body.get("string"))}}


def clean_request(request: Request) -> Request:
    """A copy of `request` without credential headers, query parameters or shapes in its body:
    applied to what is recorded and to every request matched against it, alike."""
    request = copy.deepcopy(request)
    for name in [k for k in request.headers if credential_name(k)]:
        del request.headers[name]
    request.uri = strip_query(request.uri)
    text = body_text(request.body)
    request.body = body_bytes(text) if isinstance(text, str) else request.body
    return request


def clean_response(response: dict) -> dict:
    response = copy.deepcopy(response)
    headers = response.get("headers") or {}
    response["headers"] = {k: v for k, v in headers.items() if not credential_name(k)}
    return response


def _exchange(request: Request, response: dict) -> CassetteExchange:
    name = f"{request.method} {request.uri}"
    body = body_text(request.body)
    headers = {k: v for k, v in request.headers.items() if not credential_name(k)}
    key = request_key(HTTP, name, {"method": request.method, "uri": request.uri, "body": body})
    answer = clean_response(response)
    got = answer.get("body") or {}
    answer["body"] = {**got, "string": body_text(got.get("string"))}
    return CassetteExchange(adapter=HTTP, name=name, key=key,
                            request={"method": request.method, "uri": request.uri,
                                     "body": body, "headers": headers},
                            response=answer)


def _unmatched(exc: BaseException):
    """vcrpy's refusal of an unrecorded request, whether it reached the block as raised or
    wrapped by the client (an SDK turning it into its own connection error)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, CannotOverwriteExistingCassetteException):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _stale(cassette: Cassette, exc) -> str:
    request = exc.failed_request
    what = (f"request {request.method} {strip_query(request.uri)}" if request is not None
            else "an HTTP request")
    if exc.reason == "cassette_not_found":
        why = f"{cassette.label} holds no HTTP exchange"
    elif exc.reason == "already_played":
        why = f"it was requested again, and {cassette.label} recorded it fewer times"
    elif exc.reason == "no_match" and exc.similar_requests:
        failed = [name for name, _ in exc.similar_requests[0][2]]
        why = f"the nearest recording differs in its {', '.join(failed)}"
    else:
        why = f"nothing in {cassette.label} resembles it"
    return f"stale cassette: {what} has no recording: {why}{RERECORD}"


@contextmanager
def use(cassette: Cassette, **options: Any) -> Iterator[Any]:
    """Answer the process's HTTP requests (httpx, requests, urllib3, aiohttp, ...: what vcrpy
    patches) from `cassette` while the block runs, matched on method, URL and body;
    authorization headers, API keys, cookies and credential-shaped text are removed before
    anything is kept. `options` go to vcrpy's VCR. In `live` mode nothing is patched or kept."""
    if cassette.mode == LIVE:
        yield None
        return
    if not _active.acquire(blocking=False):
        raise FailedPrecondition(
            "an HTTP cassette is already in use: vcrpy patches the HTTP clients of the whole "
            "process, so two cases recording HTTP at once would mix their requests; run such "
            "suites one case at a time (--concurrency 1)", reason="CASSETTE_HTTP_BUSY")
    try:
        positions = [i for i, e in enumerate(cassette.recorded) if e.adapter == HTTP]
        token = f"cas-cassette-{next(_tokens)}"
        _open[token] = [cassette.recorded[i] for i in positions]
        theirs = options.pop("before_record_request", None)

        def before(request):
            request = clean_request(request)
            return theirs(request) if theirs is not None else request
        recorder = vcr.VCR(record_mode=_RECORD_MODES[cassette.mode], match_on=MATCH_ON,
                           decode_compressed_response=True, before_record_request=before,
                           before_record_response=clean_response, **options)
        recorder.register_persister(_Persister)
        vcr_cassette = None
        try:
            with recorder.use_cassette(token) as vcr_cassette:
                try:
                    yield vcr_cassette
                except Exception as exc:
                    unmatched = _unmatched(exc)
                    if unmatched is None:
                        raise
                    raise StaleCassette(_stale(cassette, unmatched), call="http") from None
        finally:
            if vcr_cassette is not None:
                loaded = len(positions)
                played = [positions[i] for i in range(loaded) if vcr_cassette.play_counts[i]]
                made = [_exchange(req, resp) for req, resp in vcr_cassette.data[loaded:]]
                cassette.adopt_http(played, made)
            _open.pop(token, None)
    finally:
        _active.release()
