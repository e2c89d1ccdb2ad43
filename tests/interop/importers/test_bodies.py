"""Recorded HTTP bodies (cas/interop/importers/bodies.py): stored forms and content codings
undone, bounded, and AWS event-stream frames split and checked."""

from __future__ import annotations

import base64
import gzip
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cas
from cas.interop.importers import bodies

brotli = pytest.importorskip("brotli")  # the vcr extra; the test command installs it


def encode(data: bytes, coding: str) -> bytes:
    if coding == "gzip":
        return gzip.compress(data, mtime=0)
    if coding == "deflate":
        return zlib.compress(data)
    if coding == "raw-deflate":  # what some servers send for `deflate`
        c = zlib.compressobj(wbits=-15)
        return c.compress(data) + c.flush()
    return brotli.compress(data)


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message (string headers), with both CRCs."""
    head = b"".join(bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v))
                    + v.encode() for k, v in headers.items())
    total = 16 + len(head) + len(payload)
    prelude = struct.pack(">II", total, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack(">I", zlib.crc32(body))


CODINGS = st.lists(st.sampled_from(["gzip", "deflate", "br"]), max_size=3)


@given(st.binary(max_size=2000), CODINGS)
def test_a_chain_of_codings_is_undone_last_first(data, chain):
    raw = data
    for coding in chain:
        raw = encode(raw, coding)
    headers = {"Content-Encoding": [", ".join(chain)]} if chain else {}
    assert bodies.read({"string": raw}, headers, "c", "body").data == data


def test_each_stored_form_gives_the_same_bytes():
    data = b'{"id": "chatcmpl-1", "choices": []}'
    packed = gzip.compress(data, mtime=0)
    headers = {"content-encoding": "gzip"}
    forms = [packed,                                            # YAML !!binary
             {"string": packed},                                # vcrpy
             {"base64_string": base64.b64encode(packed).decode()},  # Betamax
             [packed[:10].hex(), packed[10:].hex()],            # nock
             packed.decode("latin-1"),                          # text, one char per byte
             base64.b64encode(packed).decode()]                 # text, base64
    for form in forms:
        assert bodies.read(form, headers, "c", "body") == bodies.Body(data, data.decode())
    # a recorder that kept the header but stored the body already decoded
    assert bodies.read(data.decode(), headers, "c", "body").data == data
    assert bodies.read(encode(data, "raw-deflate"), {"Content-Encoding": "deflate"}, "c",
                       "b").data == data


def test_header_names_and_values_in_every_recorder_shape():
    assert bodies.codings({"Content-Encoding": ["gzip", "br"]}) == ["gzip", "br"]
    assert bodies.codings({"content-encoding": "gzip, identity"}) == ["gzip"]
    assert bodies.codings(["Date", "x", "Content-Encoding", "br"]) == ["br"]
    assert bodies.codings(None) == []


def test_a_coding_not_known_is_kept_raw_with_the_reason():
    read = bodies.read({"string": b"\x28\xb5\x2f\xfdzz"}, {"Content-Encoding": "zstd"}, "c",
                       "b")
    assert read.data is None
    assert read.kept == {"content_encoding": ["zstd"], "base64": "KLUv/Xp6",
                         "reason": "content coding 'zstd' is not one this reader decodes "
                                   "(accepted: gzip, x-gzip, deflate, br, identity)"}
    broken = bodies.read({"string": b"\x1f\x8bnot gzip"}, {"Content-Encoding": "gzip"}, "c",
                         "b")
    assert broken.data is None and broken.kept["reason"].startswith("not gzip data")


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
def test_a_decompression_bomb_is_refused_not_expanded(coding, monkeypatch):
    monkeypatch.setattr(bodies, "MAX_BODY", 1 << 20)
    bomb = encode(b"\0" * (8 << 20), coding)  # 8 MiB of zeros, a few KB packed
    assert len(bomb) < 64 << 10
    with pytest.raises(cas.InvalidArgument) as info:
        bodies.read(bomb, {"Content-Encoding": coding}, "c.yaml", "interactions[0] body")
    assert info.value.reason == "BODY_TOO_LARGE"
    assert info.value.message.startswith("c.yaml: interactions[0] body decodes to more than")


def test_an_event_stream_is_split_into_its_messages_and_checked():
    one = frame({":event-type": "chunk", ":message-type": "event"}, b'{"bytes": "e30="}')
    two = frame({":event-type": "messageStop", ":message-type": "event"}, b"{}")
    frames = bodies.event_stream(one + two)
    assert frames == [bodies.Frame({":event-type": "chunk", ":message-type": "event"},
                                   b'{"bytes": "e30="}'),
                      bodies.Frame({":event-type": "messageStop", ":message-type": "event"},
                                   b"{}")]
    damaged = bytearray(one)
    damaged[-6] ^= 1  # a payload byte: the message CRC no longer matches
    assert bodies.event_stream(bytes(damaged)) is None
    assert bodies.event_stream(one[:-1]) is None       # cut short
    assert bodies.event_stream(b'{"not": "frames"}') is None


@given(st.binary(max_size=300))
def test_any_bytes_are_a_stream_or_not_never_an_error(data):
    frames = bodies.event_stream(data)
    assert frames is None or all(isinstance(f, bodies.Frame) for f in frames)
