"""Stored records (docs/format.md sections 4 and 6): the registry of kinds built from the
record Structs, their canonical bytes and digests, the object codec, and the record-file
envelope (format, then parse: a round trip; any damage refused with a cas error)."""

import pathlib

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cas import digest
from cas.errors import CasError, CorruptData, DigestMismatch, UnsupportedFormat
from cas.format import records as objects
from cas.format.records import (Case, DatasetRecord, Lease, TreeLeaf, VersionRecord, decode_object,
                                encode_object, format_record_file, parse_record_file,
                                parse_record_file_of)

DOC = (pathlib.Path(__file__).parents[2] / "docs" / "format.md").read_text()


# -- the registry of kinds ------------------------------------------------------------------
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
                                  "provenance": 8, "cassette": 9, "suite.result": 10}
    assert objects.KIND_BY_CODE == {v: k for k, v in objects.KIND_CODES.items()}
    assert len(set(objects.KIND_CODES.values())) == len(objects.KIND_CODES)
    # the objects: exactly the types stored in packs
    assert set(objects.Object.__args__) == {objects.TYPES[k] for k in objects.KIND_CODES}


def test_format_document_lists_every_kind_and_code():
    section3 = DOC[DOC.index("## 3. Digests"):DOC.index("## 4. Records")]
    for kind in objects.TYPES:
        assert f"`{kind}`" in section3, kind
    section7 = DOC[DOC.index("## 7. Pack files"):DOC.index("## 8. Pack index files")]
    for kind, code in objects.KIND_CODES.items():
        assert f"{code} `{kind}`" in section7, kind


# -- objects --------------------------------------------------------------------------------
def test_an_object_is_its_kind_canonical_bytes_and_their_digest():
    kind, data, d = encode_object(Case(input="hello"))
    assert kind == "case" and data.startswith(b'{"format":1,"input":"hello","kind":"case"')
    assert d == digest.digest_of("case", data)
    assert decode_object(kind, data) == Case(input="hello")
    assert encode_object(Case(input="hello"))[2] == d  # the same value, the same digest


def test_decoding_an_object_refuses_unknown_kinds_and_formats():
    with pytest.raises(CorruptData, match="unknown kind 'nope'"):
        decode_object("nope", b"{}", "object b3:x")
    with pytest.raises(UnsupportedFormat) as info:
        decode_object("case", b'{"kind":"case","format":2}')
    assert info.value.fields == {"format": 2} and "format 1 only" in info.value.message
    with pytest.raises(CorruptData):  # the bytes of another kind
        decode_object("tree.leaf", encode_object(Case(input=1))[1])


def test_records_are_frozen_and_refuse_fields_they_do_not_have():
    leaf = TreeLeaf(ids=[])
    with pytest.raises(AttributeError):
        leaf.ids = ["b3:" + "0" * 64]
    with pytest.raises(CorruptData):
        decode_object("tree.leaf", b'{"kind":"tree.leaf","format":1,"ids":[],"extra":1}')


# -- record files ---------------------------------------------------------------------------
VERSION = VersionRecord(dataset="d", number=1, parent=None, content_digest="b3:" + "0" * 64,
                        item_count=0, operation="commit", added=0, removed=0, author="a",
                        sealed_at="2026-11-30T12:00:00.000000Z")

records_st = st.builds(
    DatasetRecord, name=st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
    revision=st.integers(1, 10**6), description=st.text(max_size=40),
    tags=st.lists(st.text(max_size=10), max_size=4), author=st.text(max_size=30),
    edited_at=st.just("2026-11-30T12:00:00.000000Z"))


@settings(max_examples=80, deadline=None)
@given(records_st)
def test_format_then_parse_a_record_file_gives_back_the_record(record):
    data = format_record_file(record)
    assert parse_record_file(data, DatasetRecord, "k") == record
    envelope = msgspec.json.decode(data)
    assert envelope["digest"] == encode_object(record)[2]
    assert data.endswith(encode_object(record)[1] + b"}")


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_damage_to_a_record_file_is_a_cas_error(data):
    blob = bytearray(format_record_file(VERSION))
    at = data.draw(st.integers(0, len(blob) - 1))
    blob[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CasError):
        parse_record_file(bytes(blob), VersionRecord, "k")


def test_a_record_file_must_be_canonical_and_of_the_kind_asked_for():
    data = format_record_file(VERSION)
    with pytest.raises(CorruptData, match="canonical form"):
        parse_record_file(data.replace(b'{"digest"', b'{ "digest"'), VersionRecord, "k")
    record = encode_object(VERSION)[1]
    spaced = record.replace(b'"number":1', b'"number": 1')
    resealed = (b'{"digest":"' + digest.digest_of("version", spaced).encode() + b'","record":'
                + spaced + b"}")
    with pytest.raises(CorruptData, match="not in canonical form"):
        parse_record_file(resealed, VersionRecord, "k")
    with pytest.raises(DigestMismatch):  # read as another kind: its digest is another
        parse_record_file(data, DatasetRecord, "k")


def test_a_record_file_of_several_types_is_read_by_the_kind_it_names():
    data = format_record_file(VERSION)
    assert parse_record_file_of(data, (Lease, VersionRecord), "k") == VERSION
    with pytest.raises(CorruptData, match="holds a 'version' record; expected 'lease'"):
        parse_record_file_of(data, (Lease,), "k")
    with pytest.raises(CorruptData, match="does not parse"):
        parse_record_file_of(b"{", (Lease,), "k")


# -- defaults, as section 4 lists them -------------------------------------------------------
_TABLE_ROWS = {"`case`": "Case", "`version`": "VersionRecord", "`dataset`": "DatasetRecord",
               "`run`": "RunRecord", "`review.batch`": "ReviewBatch", "`settings`": "Settings",
               "`provenance`": "Provenance", "`provenance` entry": "ProvenanceEntry",
               "`proposal`": "Proposal", "score (in `score.batch`)": "Score",
               "`version.retirement`": "VersionRetirement", "`lease`": "Lease",
               "`cassette`": "CassetteRecord", "cassette exchange (in `cassette`)":
               "CassetteExchange", "`score.batch`": "ScoreBatch", "`metrics`": "Metrics",
               "metric (in `metrics`)": "MetricSpec", "review (in `review.batch`)": "Review",
               "`eligibility`": "Eligibility"}


def _section4_table(head: str) -> dict[str, str]:
    import re
    section = DOC[DOC.index("## 4. Records"):DOC.index("### 4.1 ")]
    table = section[section.index(head):].split("\n\n")[0]
    rows = re.findall(r"^\| (.+?) \| (.+) \|$", table, re.MULTILINE)[1:]  # past the head
    return {_TABLE_ROWS[label]: text for label, text in rows}


def test_section4_lists_every_default_and_every_field_absent_when_unset():
    """The two tables of section 4 are the Structs' defaults exactly: each field with a default
    value and its value, and each field absent when unset (msgspec.UNSET); no record type omits
    defaults when it encodes."""
    import json
    import re
    defaults: dict[str, dict[str, object]] = {}
    for label, text in _section4_table("| record | field: default").items():
        for part in text.split("; "):
            names, _, rest = part.partition(": ")
            value = re.match(r"`([^`]*)`", rest).group(1)
            for name in re.findall(r"`([^`]+)`", names):
                defaults.setdefault(label, {})[name] = json.loads(value)
    unset = {label: set(re.findall(r"`([^`]+)`", re.sub(r"\([^)]*\)", "", text)))
             for label, text in _section4_table("| record | fields absent when unset").items()}
    code_defaults: dict[str, dict[str, object]] = {}
    code_unset: dict[str, set[str]] = {}
    for name, t in vars(objects).items():
        if not (isinstance(t, type) and issubclass(t, msgspec.Struct)) or name.startswith("_") \
                or t.__module__ != objects.__name__:
            continue
        assert t.__struct_config__.omit_defaults is False, name
        for f in msgspec.structs.fields(t):
            if f.name == "format":
                continue
            if f.default is msgspec.UNSET:
                code_unset.setdefault(name, set()).add(f.encode_name)
            elif f.default is not msgspec.NODEFAULT:
                code_defaults.setdefault(name, {})[f.encode_name] = f.default
            elif f.default_factory is not msgspec.NODEFAULT:
                code_defaults.setdefault(name, {})[f.encode_name] = f.default_factory()
    code_unset.pop("ProvenanceRun", None)  # a partial reader of provenance, never written
    assert defaults == code_defaults
    assert unset == code_unset


def test_a_record_file_lacking_a_field_at_its_default_is_refused_not_filled_in():
    """Section 4: a writer never omits a default; a reader refuses a stored record without it."""
    record = encode_object(VERSION)[1]
    assert b'"message":""' in record and b'"proposal":null' in record
    short = record.replace(b',"proposal":null', b"")
    assert short != record
    resealed = (b'{"digest":"' + digest.digest_of("version", short).encode() + b'","record":'
                + short + b"}")
    with pytest.raises(CorruptData, match="not in canonical form"):
        parse_record_file(resealed, VersionRecord, "k")


def test_an_exchange_key_is_the_request_key_of_its_request_http_without_headers():
    from cas.format.records import CassetteExchange, exchange_key, request_key
    call = CassetteExchange(adapter="call", name="search", key="", request={"q": 1}, response=1)
    assert exchange_key(call) == request_key("call", "search", {"q": 1})
    sent = {"method": "GET", "uri": "https://api.test/", "body": None}
    http = CassetteExchange(adapter="http", name="GET https://api.test/", key="",
                            request={**sent, "headers": {"accept": "*/*"}}, response={})
    # (headers are kept to read, never matched on: docs/format.md 4.10)
    assert exchange_key(http) == request_key("http", "GET https://api.test/", sent)
