"""Request matching (cas/evals/cassettes/matching.py): request keys, the four modes, stale and
unused exchanges, strict and ordered matching, recorded errors, and what is no JSON refused."""

from __future__ import annotations

import asyncio
import json

import pytest
from blake3 import blake3
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.evals.calls import exception_text
from cas.evals.cassettes.matching import (LIVE, RECORD, RECORD_MISSING, REPLAY, Cassette,
                                          RecordedError, StaleCassette, UnusedExchanges,
                                          credential_name, request_key, resolve_mode, strip_query)
from support.evals import recorded, search

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10 ** 6, 10 ** 6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=8)


# -- request keys -----------------------------------------------------------------------------
def test_request_key_is_blake3_of_its_domain_over_canonical_adapter_name_request():
    key = request_key("call", "search", {"b": 1, "a": [1, "x"]})
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


# -- modes ------------------------------------------------------------------------------------
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
    assert 'recorded {"limit":2,"query":"a"} requested {"limit":2,"query":"zz"}' in \
        e.value.message
    with pytest.raises(StaleCassette, match="no recording; the cassette has only call 'search'"):
        c.wrap(search, "lookup")("a")
    with pytest.raises(StaleCassette, match="is empty"):
        Cassette([], REPLAY).wrap(search, "search")("a")

def test_a_stale_request_shows_its_first_difference_however_far_into_a_long_value():
    head = "refund policy for order " * 200  # 4,800 characters the two requests share
    c = Cassette(recorded((head + "42", 2)), REPLAY)
    with pytest.raises(StaleCassette) as e:
        c.wrap(search, "search")(head + "43", limit=2)
    message = e.value.message
    at = len('{"limit":2,"query":"' + head + "4") + 1  # counted from 1
    assert f"differs at /query, character {at} of its canonical JSON" in message
    assert 'der 42"} requested ...' in message and message.endswith(
        'der 43"} (record it again with --cassette-mode record or record-missing)')
    assert "\n" not in message and len(message) < 400

def test_ordered_stale_calls_show_the_difference_too_and_every_message_stays_bounded():
    name = "search/" + "n" * 5000
    long_value = ["x" * 3000 + "\u2028" + "a"]
    rec = Cassette(mode=RECORD)
    rec.wrap(lambda q: 1, name)(long_value)
    c = Cassette(rec.exchanges, REPLAY, ordered=True)
    with pytest.raises(StaleCassette) as e:
        c.wrap(lambda q: 1, name)(["x" * 3000 + "\u2028" + "b"])
    message = e.value.message
    assert "its arguments differ at /q/0, character 3009" in message
    assert '\\u2028a"]} requested' in message  # escaped: the message is one line
    assert len(message) < 600 and "\u2028" not in message and "\n" not in message

def test_a_stale_message_never_shows_what_the_redaction_masks():
    key, other = "sk-" + "A1b2C3d4" * 5, "sk-" + "Z9y8X7w6" * 5
    rec = Cassette(mode=RECORD)
    rec.wrap(lambda q, api_key: 1, "model")("hello", api_key=key)
    rec.wrap(lambda q, note: 1, "mail")("x", note="write to ada@example.com")
    c = Cassette(rec.exchanges, REPLAY, strict=False)
    # (a call's credentials are masked before it is matched, as an HTTP request's are: one
    # that differs only in its key is the recorded call)
    assert c.wrap(lambda q, api_key: 1, "model")("hello", api_key=other) == 1
    with pytest.raises(StaleCassette) as e:  # only personal data differs (kept, and matched)
        c.wrap(lambda q, note: 1, "mail")("x", note="write to bob@example.org")
    assert "only inside values masked" in e.value.message
    with pytest.raises(StaleCassette) as e:  # the secret is beside what differs
        c.wrap(lambda q, api_key: 1, "model")("hellO", api_key=key)
    assert "differs at /q" in e.value.message
    with pytest.raises(StaleCassette) as e:
        c.wrap(lambda q, note: 1, "mail")("y", note="write to bob@example.org")
    for message in [e.value.message]:
        assert "bob@example" not in message and "ada@example" not in message
    for secret in (key, other, key[:12], other[:12]):
        assert secret not in e.value.message

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
    assert resolve_mode("live", {}) == LIVE
    assert resolve_mode(None, {"CAS_CASSETTE_MODE": "record"}) == RECORD
    assert resolve_mode(None, {"CI": "true"}) == REPLAY
    assert resolve_mode(None, {"CI": "false"}) == RECORD_MISSING
    assert resolve_mode(None, {"CI": ""}) == REPLAY  # set, if empty
    assert resolve_mode(None, {}) == RECORD_MISSING
    with pytest.raises(cas.InvalidArgument, match="CAS_CASSETTE_MODE 'replya'.*replay"):
        resolve_mode(None, {"CAS_CASSETTE_MODE": "replya"})

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


def test_lookup_answers_only_from_a_recording_in_any_mode():
    c = Cassette(recorded(("a", 2)), RECORD_MISSING)
    assert c.lookup("search", {"query": "a", "limit": 2}) == {"hits": ["a-0", "a-1"]}
    with pytest.raises(StaleCassette):
        c.lookup("search", {"query": "b", "limit": 2})


def test_the_errors_are_named_by_their_public_module():
    """A case's reason names the class of what its executor raised, and a result's digest
    covers reasons: the name must not follow the module the class lives in."""
    import cas.cassettes
    for error in (StaleCassette, UnusedExchanges, RecordedError):
        assert error.__module__ == "cas.cassettes"
        assert getattr(cas.cassettes, error.__name__) is error
    reason = exception_text(StaleCassette("stale cassette: call 'search' has no recording"))
    assert reason == "cas.cassettes.StaleCassette: stale cassette: call 'search' has no recording"


def test_credentials_are_named_by_their_header_or_parameter_and_left_out_of_a_uri():
    assert credential_name("Authorization") and credential_name(" X-API-KEY ")
    assert credential_name("client_secret") and not credential_name("model")
    assert strip_query("https://h/p?api_key=S&model=m&sig=T") == "https://h/p?model=m"
    assert strip_query("https://h/p") == "https://h/p"


# -- the credential names, as docs/format.md section 4.10 lists them -------------------------
def _documented(marker: str) -> list[str]:
    """The backquoted names between `<!-- marker -->` and `<!-- /marker -->` in section 4.10
    of docs/format.md (the normative list a reader implements)."""
    import re
    from pathlib import Path
    doc = (Path(__file__).parents[3] / "docs" / "format.md").read_text("utf-8")
    start = re.search(r"<!--\s*" + marker + r"\s*-->", doc)
    end = re.search(r"<!--\s*/" + marker + r"\s*-->", doc)
    assert start and end, f"docs/format.md lost its {marker} list"
    return re.findall(r"`([^`]+)`", doc[start.end():end.start()])


def test_documented_credential_names_are_the_codes():
    from cas.evals.cassettes import matching
    names = _documented("credential-names")
    assert len(names) == len(set(names)) == 16
    assert set(names) == matching._CREDENTIAL_NAMES


def test_documented_sensitive_words_are_the_codes():
    """The doc spells out every alternative of the sensitive-key pattern (`client[_-]?secret`
    as client_secret, client-secret, clientsecret); the pattern is exactly those words, each at
    the start of a name or after `_` or `-`, at its end."""
    import re

    from cas.format import redaction
    words = _documented("sensitive-words")
    expanded = []
    for alt in (redaction._SENSITIVE + "|authorization|cookie|set-cookie").split("|"):
        if "[_-]?" in alt:
            expanded += [alt.replace("[_-]?", sep) for sep in ("_", "-", "")]
        else:
            assert re.fullmatch(r"[a-z-]+", alt), alt
            expanded.append(alt)
    assert words == list(dict.fromkeys(expanded))  # `apikey` is spelled twice in the pattern
    assert redaction.SENSITIVE_KEY.pattern == \
        r"(?i)(?:^|[_-])(?:" + redaction._SENSITIVE + r"|authorization|cookie|set-cookie)\Z"
    for word in words:
        for name in (word, f"x-{word}", f"db_{word}", f" {word.upper()} "):
            assert credential_name(name), name
        assert not credential_name(f"{word}s") or f"{word}s" in words
    for kept in ("tokens", "keyword", "x-request-id", "content-type", "xpassword", "code-1"):
        assert not credential_name(kept), kept


def test_a_call_keeps_no_credential_of_its_arguments_or_answer_and_replays_all_the_same():
    """A wrapped call's request and answer are kept with their credentials masked (an argument
    named like a key, a credential shape in a string), as an HTTP exchange's are; a replay
    masks its request alike, so it matches, whatever the key it is given."""
    secret, bearer = "sk-" + "a1B2c3D4" * 5, "Bearer " + "x9Y8z7W6" * 5

    def ask(question, api_key, headers):
        return {"answer": f"about {question}", "echo": headers["Authorization"]}
    rec = Cassette([], RECORD)
    live = rec.wrap(ask, "ask")("refunds", api_key=secret, headers={"Authorization": bearer})
    assert live["echo"] == bearer  # the caller gets what the function returned
    (kept,) = rec.exchanges
    stored = json.dumps([kept.request, kept.response])
    assert secret not in stored and "x9Y8z7W6" not in stored
    assert kept.request["question"] == "refunds" and "about refunds" in stored
    replay = Cassette(rec.exchanges, REPLAY)
    other_key = "sk-" + "Q7r8S9t0" * 5
    again = replay.wrap(ask, "ask")("refunds", api_key=other_key,
                                    headers={"Authorization": bearer})
    assert again == kept.response and again["answer"] == "about refunds"
    replay.check()
    with pytest.raises(cas.cassettes.StaleCassette):
        Cassette(rec.exchanges, REPLAY).wrap(ask, "ask")(
            "invoices", api_key=secret, headers={"Authorization": bearer})
