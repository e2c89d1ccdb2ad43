"""Suite files: exact refusals (code, reason, line, field), writes that leave nothing on a
refusal, round trips, a pinned version exported, a generated secret never written (`cas suite
export`: tests/cli/test_suite.py)."""

from __future__ import annotations

import io
import json
import os
import tempfile

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.evals import suites
from cas.evals.suites import Suite, SuiteCase, path_component_problem, read_jsonl, write_jsonl
from support import ROOT
from support.evals import listing
from support.secrets import around, placed, secrets, sensitive_part

EXAMPLE = ROOT / "examples" / "cases.jsonl"
AUTHOR = "Ada <ada@example.com>"
HEADER = '{"format": 1, "name": "refunds", "version": "2026-08-01"}'
SETTINGS = settings(max_examples=60, deadline=None)


def text_of(*lines: str) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def case(id="late-refund", **fields) -> dict:
    return {"id": id, "input": "my order never arrived", "tenant": "acme", **fields}


def refusal(exc) -> tuple:
    e = exc.value
    return e.code, e.reason, e.fields.get("line"), e.fields.get("field")


# -- reading: what is accepted --------------------------------------------------------------
def test_a_file_reads_as_its_suite_blank_lines_skipped():
    data = text_of(HEADER, json.dumps(case(expected="refund offered")), "",
                   json.dumps(case("b3:" + "0" * 64, user="ada@example.com",
                                   metadata={"agent": "a"}, input=None)))
    suite = read_jsonl(io.BytesIO(data))
    assert suite == Suite("refunds", "2026-08-01", [
        SuiteCase(id="late-refund", input="my order never arrived", tenant="acme",
                  expected="refund offered"),
        SuiteCase(id="b3:" + "0" * 64, input=None, tenant="acme", user="ada@example.com",
                  metadata={"agent": "a"})])
    assert isinstance(suite.cases, tuple) and suite.cases[0].frozen is None


# -- reading: every refusal, exactly ------------------------------------------------------------
BAD = [
    # (what, lines, error class, reason, line, field)
    ("newer format", ['{"format": 2, "name": "x", "version": "1"}'],
     cas.FailedPrecondition, "UNSUPPORTED_SUITE_FORMAT", 1, "format"),
    ("format as text", ['{"format": "1", "name": "x", "version": "1"}'],
     cas.FailedPrecondition, "UNSUPPORTED_SUITE_FORMAT", 1, "format"),
    ("format true", ['{"format": true, "name": "x", "version": "1"}'],
     cas.FailedPrecondition, "UNSUPPORTED_SUITE_FORMAT", 1, "format"),
    ("no header", [json.dumps(case())], cas.InvalidArgument, "MISSING_SUITE_HEADER", 1,
     "format"),
    ("empty file", [], cas.InvalidArgument, "MISSING_SUITE_HEADER", 1, "format"),
    ("header not an object", ["[1]"], cas.InvalidArgument, "MISSING_SUITE_HEADER", 1,
     "format"),
    ("header field unknown", ['{"format": 1, "name": "x", "version": "1", "by": "a"}'],
     cas.InvalidArgument, "UNKNOWN_FIELD", 1, "by"),
    ("header without version", ['{"format": 1, "name": "x"}'], cas.InvalidArgument,
     "MISSING_FIELD", 1, "version"),
    ("unsafe suite name", ['{"format": 1, "name": "../x", "version": "1"}'],
     cas.InvalidArgument, "INVALID_FIELD", 1, "name"),
    ("not json", [HEADER, "{nope"], cas.InvalidArgument, "INVALID_JSON", 2, None),
    ("not an object", [HEADER, "[]"], cas.InvalidArgument, "INVALID_FIELD", 2, "case"),
    ("no tenant", [HEADER, '{"id": "a", "input": 1}'], cas.InvalidArgument, "MISSING_FIELD",
     2, "tenant"),
    ("null tenant", [HEADER, json.dumps(case(tenant=None))], cas.InvalidArgument,
     "INVALID_FIELD", 2, "tenant"),
    ("empty tenant", [HEADER, json.dumps(case(tenant=""))], cas.InvalidArgument,
     "INVALID_FIELD", 2, "tenant"),
    ("no input", [HEADER, '{"id": "a", "tenant": "acme"}'], cas.InvalidArgument,
     "MISSING_FIELD", 2, "input"),
    ("no id", [HEADER, '{"input": 1, "tenant": "acme"}'], cas.InvalidArgument,
     "MISSING_FIELD", 2, "id"),
    ("unknown case field", [HEADER, json.dumps(case(person="p-1"))], cas.InvalidArgument,
     "UNKNOWN_FIELD", 2, "person"),
    ("metadata not an object", [HEADER, json.dumps(case(metadata=[1]))],
     cas.InvalidArgument, "INVALID_FIELD", 2, "metadata"),
    ("user not text", [HEADER, json.dumps(case(user=7))], cas.InvalidArgument,
     "INVALID_FIELD", 2, "user"),
    ("duplicate id", [HEADER, json.dumps(case("a")), json.dumps(case("b")), "",
                      json.dumps(case("a"))], cas.InvalidArgument, "DUPLICATE_CASE_ID", 5, "id"),
    ("id differing in case only", [HEADER, json.dumps(case("Refund")),
                                   json.dumps(case("refund"))],
     cas.InvalidArgument, "DUPLICATE_CASE_ID", 3, "id"),
    ("unsafe id", [HEADER, json.dumps(case("../etc"))], cas.InvalidArgument,
     "UNSAFE_CASE_ID", 2, "id"),
    ("credential id", [HEADER, json.dumps(case("ghp_" + "a" * 36))], cas.InvalidArgument,
     "CREDENTIAL_IN_IDENTITY_FIELD", 2, "id"),
    ("credential tenant", [HEADER, json.dumps(case(tenant="AKIAABCDEFGHIJKLMNOP"))],
     cas.InvalidArgument, "CREDENTIAL_IN_IDENTITY_FIELD", 2, "tenant"),
    ("credential user", [HEADER, json.dumps(case()), json.dumps(case(
        "b", user="Bearer abcdef0123456789"))], cas.InvalidArgument,
     "CREDENTIAL_IN_IDENTITY_FIELD", 3, "user"),
]


@pytest.mark.parametrize("what,lines,cls,reason,line,field", BAD, ids=[b[0] for b in BAD])
def test_reading_refuses_naming_the_line_and_field(what, lines, cls, reason, line, field):
    with pytest.raises(cls) as exc:
        read_jsonl(io.BytesIO(text_of(*lines)))
    assert refusal(exc) == (cls.code, reason, line, field)
    assert exc.value.message.startswith(f"suite line {line}: ")


def test_an_unknown_format_names_the_formats_known_and_the_migration(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(text_of('{"format": 2, "name": "x", "version": "1"}', "not even json"))
    with pytest.raises(cas.FailedPrecondition) as exc:
        read_jsonl(path)
    fields = exc.value.fields
    assert (fields["format"], fields["known"]) == (2, [1])
    assert "update your cas checkout and reinstall it (git pull && pip install .)" in \
        fields["migration"] and "cas suite export" in fields["migration"]
    assert fields["migration"] in exc.value.message and str(path) in exc.value.message
    with pytest.raises(cas.FailedPrecondition) as exc:
        read_jsonl(io.BytesIO(text_of('{"format": 0, "name": "x", "version": "1"}')))
    assert "no cas writes suite format 0" in exc.value.fields["migration"]


def test_a_missing_file_is_not_found(tmp_path):
    with pytest.raises(cas.NotFound) as exc:
        read_jsonl(tmp_path / "nope.jsonl")
    assert exc.value.reason == "SUITE_FILE_NOT_FOUND"


@pytest.mark.parametrize("text", ["b3:" + "0" * 64, "late-refund", "refund 2", "ünïcode",
                                  "a" * 255, "é" * 127, "x.y", "~x", "a:b"])
def test_safe_ids(text):
    assert path_component_problem(text) is None


@pytest.mark.parametrize("text", ["", ".", "..", "a/b", "/a", "a\\b", "a\x00b", "a\nb",
                                  "\x1b[31m", "a\u202eb", "-rf", " a", "a ", "a" * 256,
                                  "é" * 128, 7, None])
def test_unsafe_ids(text):
    assert path_component_problem(text) is not None


# -- building a suite in Python --------------------------------------------------------------------
def test_a_suite_takes_dicts_suite_cases_and_frozen_cases():
    frozen = cas.Case(input={"q": 1}, output="a", tenant="acme", person="p-1", run_id="r-1",
                      metadata={"model": "m"})
    case_id = cas.encode_case(frozen).case_id
    suite = Suite("s", "1", [case("a"), SuiteCase(id="b", input=2, tenant="t"), frozen])
    assert [c.id for c in suite.cases] == ["a", "b", case_id]
    mapped = suite.cases[2]
    assert (mapped.input, mapped.expected, mapped.tenant, mapped.user) == ({"q": 1}, "a",
                                                                           "acme", None)
    assert mapped.metadata == {"model": "m", "cas": {"run_id": "r-1", "started_at": None,
                                                     "outcome": None, "withheld": []}}
    assert mapped.frozen == frozen


@pytest.mark.parametrize("cases,reason,index,field", [
    ([case("a"), case("a")], "DUPLICATE_CASE_ID", 1, "id"),
    ([case("a"), {"id": "b", "input": 1}], "MISSING_FIELD", 1, "tenant"),
    ([case("a/b")], "UNSAFE_CASE_ID", 0, "id"),
    ([case(extra=1)], "UNKNOWN_FIELD", 0, "extra"),
    ([case(input={1, 2})], "INVALID_JSON_VALUE", 0, "input"),
    ([SuiteCase(id="a", input=1, tenant=None)], "INVALID_FIELD", 0, "tenant"),
    (["a"], "INVALID_FIELD", 0, None),
])
def test_a_suite_refuses_bad_cases_naming_their_index(cases, reason, index, field):
    with pytest.raises(cas.InvalidArgument) as exc:
        Suite("s", "1", cases)
    assert (exc.value.reason, exc.value.fields.get("index"), exc.value.fields.get("field")) \
        == (reason, index, field)
    assert exc.value.message.startswith(f"cases[{index}]")


def test_a_frozen_case_without_tenant_is_refused_naming_it():
    frozen = cas.Case(input=1)
    with pytest.raises(cas.FailedPrecondition) as exc:
        Suite("s", "1", [frozen])
    assert exc.value.reason == "CASE_WITHOUT_TENANT"
    assert exc.value.fields["case_id"] == cas.encode_case(frozen).case_id


def test_a_suite_name_and_version_are_checked():
    with pytest.raises(cas.InvalidArgument) as exc:
        Suite("a/b", "1", [])
    assert exc.value.fields["field"] == "name"
    with pytest.raises(cas.InvalidArgument) as exc:
        Suite("s", "", [])
    assert exc.value.fields["field"] == "version"


# -- writing ------------------------------------------------------------------------------------
def test_write_then_read_is_the_suite_and_the_layout_is_fixed(tmp_path):
    suite = Suite("refunds", "2026-08-01", [
        case("late-refund", expected="refund offered"),
        case("b", input={"z": 1, "a": [1, 2.5, None, True]}, user="u-1",
             metadata={"k": "ü"}),
    ])
    path = tmp_path / "s.jsonl"
    assert write_jsonl(path, suite) is None
    assert read_jsonl(path) == suite
    assert path.read_bytes() == text_of(
        '{"format":1,"name":"refunds","version":"2026-08-01"}',
        '{"id":"late-refund","tenant":"acme","input":"my order never arrived",'
        '"expected":"refund offered"}',
        '{"id":"b","tenant":"acme","user":"u-1","input":{"a":[1,2.5,null,true],"z":1},'
        '"metadata":{"k":"ü"}}')
    assert listing(tmp_path) == ["s.jsonl"]  # no temporary file left beside it
    out = io.BytesIO()
    write_jsonl(out, suite)
    assert out.getvalue() == path.read_bytes()


safe_ids = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Cf", "Zl", "Zp", "Zs", "Co",
                                                       "Cn"), blacklist_characters="/\\"),
                   min_size=1, max_size=20).filter(lambda t: path_component_problem(t) is None)
plain_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-999_999, 999_999),
              st.from_regex(r"[a-z ]{0,12}", fullmatch=True)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True),
                                            inner, max_size=3)), max_leaves=8)


@SETTINGS
@given(ids=st.lists(safe_ids, min_size=0, max_size=5,
                    unique_by=lambda t: __import__("unicodedata").normalize("NFC", t).casefold()),
       data=st.data())
def test_round_trip_of_generated_suites(ids, data):
    cases = [{"id": i, "input": data.draw(plain_json), "tenant": data.draw(safe_ids),
              "expected": data.draw(plain_json),
              "metadata": data.draw(st.dictionaries(st.from_regex(r"[a-z]{1,5}", fullmatch=True),
                                                    plain_json, max_size=2))}
             for i in ids]
    cases = [{k: v for k, v in c.items() if v is not None or k == "input"} for c in cases]
    suite = Suite("s", "1", cases)
    out = io.BytesIO()
    write_jsonl(out, suite)
    assert read_jsonl(io.BytesIO(out.getvalue())) == suite


@pytest.mark.parametrize("field,value", [("id", "sk-" + "a" * 30), ("tenant", "Bearer " + "9" * 20),
                                         ("user", "AKIA" + "B" * 16)])
def test_a_credential_shaped_identity_field_is_refused_and_no_file_is_left(tmp_path, field,
                                                                           value):
    good = case("a")
    bad = case("b") | {field: value}
    suite = Suite("s", "1", [good, good | {"id": "c"}, bad])
    path = tmp_path / "s.jsonl"
    with pytest.raises(cas.InvalidArgument) as exc:
        write_jsonl(path, suite)
    assert refusal(exc) == ("INVALID_ARGUMENT", "CREDENTIAL_IN_IDENTITY_FIELD", 4, field)
    assert exc.value.message.startswith(f"{path} line 4: {field} looks like a credential")
    assert listing(tmp_path) == []  # no file, no partial file, no temporary file
    path.write_bytes(b"before\n")
    with pytest.raises(cas.InvalidArgument):
        write_jsonl(path, suite)
    assert path.read_bytes() == b"before\n" and listing(tmp_path) == ["s.jsonl"]
    out = io.BytesIO()
    with pytest.raises(cas.InvalidArgument):
        write_jsonl(out, suite)
    assert out.getvalue() == b""  # a stream gets nothing either


def test_writing_needs_a_suite_and_a_path_or_stream(tmp_path):
    with pytest.raises(cas.InvalidArgument):
        write_jsonl(tmp_path / "s.jsonl", {"name": "s"})
    with pytest.raises(cas.InvalidArgument):
        write_jsonl(42, Suite("s", "1", []))


def test_writing_scrubs_everything_but_the_identity_fields(tmp_path):
    suite = Suite("s", "1", [case("ada@example.com", user="bob@example.com",
                                  input={"to": "ada@example.com"},
                                  expected="card 4111 1111 1111 1111",
                                  metadata={"phone": "+44 20 7946 0958"})])
    path = tmp_path / "s.jsonl"
    write_jsonl(path, suite)
    [back] = read_jsonl(path).cases
    assert (back.id, back.user) == ("ada@example.com", "bob@example.com")
    assert (back.input, back.expected, back.metadata) == (
        {"to": "[REDACTED:email]"}, "card [REDACTED:card]", {"phone": "[REDACTED:phone]"})


def _all_strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _all_strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_all_strings(v)]]
    return []


@st.composite
def case_with_secret(draw, secret: str) -> dict:
    text = placed(draw(around), secret, draw(around))
    where = draw(st.sampled_from(["input", "input.nested", "input.key", "expected",
                                  "expected.list", "metadata", "metadata.nested"]))
    c = case("x", input={"task": "t"}, expected="e", metadata={"m": 1})
    if where == "input":
        c["input"] = text
    elif where == "input.nested":
        c["input"] = {"messages": [{"role": "user", "content": text}]}
    elif where == "input.key":
        c["input"] = {text: 1}
    elif where == "expected":
        c["expected"] = text
    elif where == "expected.list":
        c["expected"] = ["a", 1, text]
    elif where == "metadata":
        c["metadata"] = {"note": text}
    else:
        c["metadata"] = {"a": {"b": [None, {"c": text}]}}
    return c


@SETTINGS
@given(data=st.data(), kind_secret=secrets)
def test_a_generated_secret_anywhere_in_a_case_never_reaches_the_file(data, kind_secret):
    kind, secret = kind_secret
    part = sensitive_part(kind, secret)
    suite = Suite("s", "1", [case("a"), data.draw(case_with_secret(secret))])
    with tempfile.TemporaryDirectory() as where:
        path = os.path.join(where, "s.jsonl")
        write_jsonl(path, suite)
        with open(path, "rb") as f:
            written = f.read()
    for form in (part.encode(), cas.format.encoding.encode(part)[1:-1]):  # as is, and JSON-escaped
        assert form not in written
    for line in written.splitlines():
        assert all(part not in s for s in _all_strings(json.loads(line)))


# -- a pinned version -----------------------------------------------------------------------------
@pytest.fixture
def evals(mem):
    """evals@1: the five example cases (tenants acme and globex, persons user-42, user-7)."""
    mem.create_dataset("evals", admission="direct")
    mem.commit("evals", base=None, add=list(cas.read_cases_jsonl(EXAMPLE.open("rb"))))
    return mem


def test_export_of_a_pinned_version(evals, tmp_path):
    repo = evals
    pin = str(repo.pin("evals", 1))
    path = tmp_path / "evals-1.jsonl"
    result = suites.export(repo, "evals", 1, path)
    assert result == suites.SuiteExport("evals", pin, 5, str(path))
    suite = read_jsonl(path)
    assert (suite.name, suite.version) == ("evals", pin)
    frozen = dict(cas.cases(repo, pin))
    assert [c.id for c in suite.cases] == list(frozen)  # in case-id order
    for c in suite.cases:
        f = frozen[c.id]
        assert (c.input, c.tenant, c.expected, c.user) == (f.input, f.tenant, f.output, None)
        assert c.metadata == {**f.metadata, "cas": {
            "run_id": f.run_id, "started_at": f.started_at, "outcome": f.outcome,
            "withheld": f.withheld}}
    written = path.read_bytes()
    assert b"user-42" not in written and b"user-7" not in written  # persons never copied
    assert b'"steps"' not in written
    in_memory = suites.from_version(repo, "evals", 1)
    assert [c.frozen for c in in_memory.cases] == list(frozen.values())
    assert msgspec.structs.replace(in_memory, cases=tuple(
        msgspec.structs.replace(c, frozen=None) for c in in_memory.cases)) == suite
    out = io.BytesIO()
    assert suites.export(repo, "evals", 1, out).path is None
    assert out.getvalue() == written


def test_an_export_removes_what_a_killed_export_of_the_same_path_left(evals, tmp_path):
    path = tmp_path / "s.jsonl"
    ours = [tmp_path / ".s.jsonl.0badc0de.tmp", tmp_path / ".s.jsonl.12345678.tmp"]
    theirs = [tmp_path / ".t.jsonl.0badc0de.tmp", tmp_path / ".s.jsonl.notours.tmp",
              tmp_path / "s.jsonl.0badc0de.tmp", tmp_path / ".s.jsonl.0badc0de.tmp.keep"]
    for leftover in ours + theirs:  # as a kill leaves them: a partial, unredacted suite
        leftover.write_bytes(b'{"format":"cas.suite"}\n{"id":"b3:...","input":"partial')
    suites.export(evals, "evals", 1, path)
    assert listing(tmp_path) == sorted(["s.jsonl"] + [p.name for p in theirs])
    ours[0].write_bytes(b"partial")  # write_jsonl writes through the same atomic file
    write_jsonl(path, read_jsonl(path))
    assert listing(tmp_path) == sorted(["s.jsonl"] + [p.name for p in theirs])


def test_export_reads_a_version_in_pages(mem, tmp_path):
    mem.create_dataset("big", admission="direct")
    mem.commit("big", base=None, add=[{"input": i, "tenant": "t"} for i in range(1100)])
    out = io.BytesIO()
    assert suites.export(mem, "big", 1, out).cases == 1100
    ids = [json.loads(line)["id"] for line in out.getvalue().splitlines()[1:]]
    assert ids == sorted(ids) and len(set(ids)) == 1100


def test_export_refusals_leave_no_file(evals, tmp_path):
    repo = evals
    repo.commit("evals", base=1, add=[{"input": "x", "tenant": None}])
    no_tenant = cas.encode_case({"input": "x", "tenant": None}).case_id
    with pytest.raises(cas.FailedPrecondition) as exc:
        suites.export(repo, "evals", 2, tmp_path / "s.jsonl")
    assert (exc.value.reason, exc.value.fields["case_id"]) == ("CASE_WITHOUT_TENANT", no_tenant)
    assert no_tenant in exc.value.message
    repo.commit("evals", base=2, remove=[no_tenant],
                add=[{"input": "x", "tenant": "sk-" + "k" * 40}])
    with pytest.raises(cas.InvalidArgument) as exc:
        suites.export(repo, "evals", 3, tmp_path / "s.jsonl")
    assert exc.value.reason == "CREDENTIAL_IN_IDENTITY_FIELD"
    assert exc.value.fields["field"] == "tenant" and "line" in exc.value.fields
    assert exc.value.fields["case_id"].startswith("b3:")
    repo.retire("evals", 1, "contaminated", "leaked", author=AUTHOR)
    with pytest.raises(cas.FailedPrecondition) as exc:
        suites.export(repo, "evals", 1, tmp_path / "s.jsonl")
    assert exc.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"
    with pytest.raises(cas.FailedPrecondition):
        suites.from_version(repo, "evals", 1)
    with pytest.raises(cas.NotFound):
        suites.export(repo, "evals", 9, tmp_path / "s.jsonl")
    assert listing(tmp_path) == []


def test_a_suites_version_is_its_pin_or_refused_saying_why_one_is_needed():
    from cas.evals.suites.files import version_pin
    pin = "evals@3#b3:" + "a" * 64
    assert str(version_pin(pin, "to record it")) == pin
    with pytest.raises(cas.FailedPrecondition, match="not a pin .*: to record it") as e:
        version_pin("2026-08-01", "to record it")
    assert e.value.reason == "SUITE_NOT_PINNED" and e.value.fields["version"] == "2026-08-01"
