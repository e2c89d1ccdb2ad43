"""The registry of kinds (cas.format.records builds it from the record Structs, cas.digest hashes by
it) and the domains of the derived identifiers (docs/format.md sections 3, 3.1 and 7)."""

import pathlib
import re

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cas import digest
from cas.format import records as objects
from cas.errors import InvalidArgument

DOC = (pathlib.Path(__file__).parent.parent / "docs" / "format.md").read_text()


def record_structs() -> list[type]:
    """Every Struct of cas.format.records that carries a `kind` tag: the stored records."""
    return [t for t in vars(objects).values()
            if isinstance(t, type) and issubclass(t, msgspec.Struct)
            and t.__struct_config__.tag_field == "kind" and t is not objects._Record]


def test_every_record_struct_is_registered_exactly_once():
    structs = record_structs()
    assert structs and sorted(objects.TYPES.values(), key=id) == sorted(structs, key=id)
    for kind, type_ in objects.TYPES.items():
        assert type_.__struct_config__.tag == kind
        assert objects.KIND_OF[type_] == kind
    assert len(objects.KIND_OF) == len(objects.TYPES)


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


def test_two_structs_with_one_tag_are_refused():
    class Twin(objects._Record, tag="case", kw_only=True):
        pass
    try:
        with pytest.raises(TypeError, match="'case'"):
            objects._build_registry()
    finally:
        del Twin
        import gc
        gc.collect()  # drop the class, so _Record no longer lists it among its subclasses
    assert objects._build_registry() == objects.TYPES


def test_pack_codes_are_those_ever_written_and_unique():
    assert objects.KIND_CODES == {"case": 1, "tree.leaf": 2, "tree.node": 3, "run": 7,
                                  "provenance": 8, "cassette": 9}
    assert objects.KIND_BY_CODE == {v: k for k, v in objects.KIND_CODES.items()}
    assert len(set(objects.KIND_CODES.values())) == len(objects.KIND_CODES)
    # the objects: exactly the types stored in packs
    assert set(objects.Object.__args__) == {objects.TYPES[k] for k in objects.KIND_CODES}


def test_dead_helpers_are_gone():
    assert not hasattr(objects, "kind_of")
    assert not hasattr(digest, "KINDS")


def test_format_document_lists_every_kind_and_code():
    section3 = DOC[DOC.index("## 3. Digests"):DOC.index("## 4. Records")]
    for kind in objects.TYPES:
        assert f"`{kind}`" in section3, kind
    section7 = DOC[DOC.index("## 7. Pack files"):DOC.index("## 8. Pack index files")]
    for kind, code in objects.KIND_CODES.items():
        assert f"{code} `{kind}`" in section7, kind


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
