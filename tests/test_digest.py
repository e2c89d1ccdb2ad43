"""Digests: the kinds cas.digest hashes by (cas.format.records registers them), the domains of
the derived identifiers (docs/format.md sections 3 and 3.1), person digests and the digest
text form."""

import pathlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cas import digest
from cas.errors import InvalidArgument
from cas.format import records as objects

DOC = (pathlib.Path(__file__).parent.parent / "docs" / "format.md").read_text()


def test_digest_knows_exactly_the_registered_kinds():
    assert set(digest.registered_kinds()) == set(objects.TYPES)
    for kind in objects.TYPES:
        assert re.fullmatch(r"[a-z][a-z0-9]*(\.[a-z][a-z0-9]*)*", kind), kind
        assert digest.digest_of(kind, b"x") == "b3:" + __import__("blake3").blake3(
            b"cas:" + kind.encode() + b"\x00x").hexdigest()


@pytest.mark.parametrize("kind", ["replay.plan", "nope", "Case", "", None, 1, ["case"]])
def test_digest_of_refuses_an_unknown_kind(kind):
    with pytest.raises(InvalidArgument):
        digest.digest_of(kind, b"{}")


@pytest.mark.parametrize("kind", ["", "Case", "a..b", ".a", "a.", "request-digest", "a\x00b",
                                  "é", None])
def test_a_kind_is_spelled_as_dotted_lowercase_words(kind):
    with pytest.raises(InvalidArgument):
        digest.register_kind(kind)


# -- domains --------------------------------------------------------------------------------
def kind_domains() -> dict[str, bytes]:
    # every kind, and the one tag outside the registry that is hashed in a kind-style domain
    return {k: digest.domain(k) for k in (*objects.TYPES, "replay.plan")}


def test_derived_domains_are_distinct_from_each_other_and_from_every_kind():
    derived = digest.DERIVED_DOMAINS
    assert len(set(derived.values())) == len(derived)
    assert not set(derived.values()) & set(kind_domains().values())
    every = list(derived.values()) + list(kind_domains().values())
    for d in every:
        # "cas:" + a name without NUL + NUL: the domains form a prefix-free set, so the bytes
        # hashed tell which domain they belong to
        assert d.startswith(b"cas:") and d.endswith(b"\x00") and d.count(b"\x00") == 1
    for a in every:
        for b in every:
            assert a == b or not b.startswith(a)
    for name, d in derived.items():
        assert d == b"cas:" + name.encode() + b"\x00"
        assert f'"cas:{name}" || 0x00' in DOC or f"cas:{name}\\0" in DOC, name


def test_derived_identifiers_have_their_documented_shapes():
    assert re.fullmatch(r"b3:[0-9a-f]{64}", digest.request_digest(b"{}"))
    assert re.fullmatch(r"b3:[0-9a-f]{64}", digest.legacy_request_digest(b"{}"))
    assert re.fullmatch(r"ct-[0-9a-f]{32}", digest.proposal_token(b"{}"))
    assert re.fullmatch(r"ct-[0-9a-f]{32}", digest.confirm_token(b"{}"))
    assert re.fullmatch(r"ann-[0-9a-f]{32}", digest.annotation_id(b"{}"))
    assert re.fullmatch(r"[0-9a-f]{64}", digest.idempotency_claim_name("k"))
    # the legacy request digest is the "proposal" kind's digest, as records written before hold
    assert digest.legacy_request_digest(b"{}") == digest.digest_of("proposal", b"{}")


def _hexes(data: bytes) -> dict[str, str]:
    return {"request-digest": digest.request_digest(data)[3:],
            "proposal-token": digest.proposal_token(data)[3:],
            "confirm-token": digest.confirm_token(data)[3:],
            "annotation-id": digest.annotation_id(data)[4:]}


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=60).map(str.encode))
def test_no_derived_id_equals_a_kind_digest_of_the_same_bytes(data):
    derived = _hexes(data)
    assert len(set(derived.values())) == len(derived)
    for kind in objects.TYPES:
        kind_hex = digest.digest_of(kind, data)[3:]
        for name, h in derived.items():
            assert not kind_hex.startswith(h), (name, kind)


# -- person digests and the digest text form ------------------------------------------------
def test_a_person_digest_is_keyed_by_the_repository_and_a_digest_stands_for_itself():
    here, there = digest.person_key("repo-a"), digest.person_key("repo-b")
    assert here == __import__("blake3").blake3(b"cas:person-key\x00repo-a").digest()
    ada = digest.person_digest("ada", here)
    assert re.fullmatch(r"pk:[0-9a-f]{64}", ada)
    assert ada != digest.person_digest("ada", there) != digest.person_digest("bob", here)
    assert digest.person_digest(ada, there) == ada  # what a captured run names, as it is
    assert digest.person_digest("pk:" + "A" * 64, here) != "pk:" + "A" * 64  # not a digest


def test_a_digest_is_b3_and_64_lowercase_hex_digits():
    d = digest.digest_of("case", b"{}")
    assert digest.is_digest(d) and digest.from_bytes(digest.to_bytes(d)) == d
    assert len(digest.to_bytes(d)) == 32
    # one written by a person is folded to that form (case, surrounding space) ...
    for written in (d, d.upper(), f" {d}\n"):
        assert not digest.is_digest(written) or written == d
        assert digest.parse_digest(written) == d
    # ... and anything else refused, naming what it was meant to be
    for bad in ("b3:" + "0" * 63, "sha:" + "0" * 64, d + "0", None, 7):
        assert not digest.is_digest(bad)
        with pytest.raises(InvalidArgument) as info:
            digest.parse_digest(bad, "case id")
        assert info.value.message.startswith("case id ") and info.value.fields == {
            "value": str(bad)}
