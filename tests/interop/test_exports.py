"""Reads of a pinned version and exports: exact layouts, round trips, refusals, streaming
(`cas export`: tests/cli/test_datasets_and_versions.py)."""

import io
import json
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas.interop import exports
from cas.storage.backends.memory import MemoryBackend
from support import ROOT
from support.backends import every_outage

EXAMPLE = ROOT / "examples" / "cases.jsonl"
AUTHOR = "Ada <ada@example.com>"

CHAT = {  # every step kind of the openai-chat mapping, in one case
    "input": {"task": "t"}, "output": "done",
    "steps": [
        {"type": "message", "role": "system", "content": "be brief"},
        {"type": "message", "role": "user", "content": "rename a", "name": "ada"},
        {"type": "tool_call", "tool_name": "mv", "arguments": {"src": "a", "dst": "b"},
         "result": None},
        {"type": "tool_call", "tool_name": "ls", "id": "c-7", "error": {"code": 2}},
        {"type": "message", "role": "assistant", "content": {"k": 1}},
        {"type": "tool_call", "tool_name": "rm", "arguments": ["b"]},
        {"type": "message", "role": "assistant", "content": "never reached"},
    ],
    "metadata": {"model": "m-1"},
}


@pytest.fixture
def small(mem):
    """Version evals@1: the five example cases and CHAT."""
    mem.create_dataset("evals", admission="direct")
    added = [e for e in cas.read_cases_jsonl(EXAMPLE.open("rb"))] + [cas.encode_case(CHAT)]
    mem.commit("evals", base=None, add=added)
    return mem, mem.pin("evals", 1)


def all_ids(repo, name="evals", number=1):
    out, cursor = [], None
    while True:
        page = repo.items(name, number, after=cursor, limit=500)
        out += page.items
        if (cursor := page.next_cursor) is None:
            return out


def refusal(exc):
    return exc.value.code, exc.value.reason


# -- cases() and to_pandas() ------------------------------------------------------------------
def test_cases_yields_every_case_in_id_order_as_repo_case_reads_it(small):
    repo, pin = small
    got = list(cas.interop.exports.cases(repo, pin))
    assert [i for i, _ in got] == all_ids(repo) and len(got) == 6
    assert all(case == repo.case("evals", 1, i) for i, case in got)
    assert list(exports.cases(repo, str(pin))) == got == list(exports.cases(repo, ("evals", 1)))


def test_a_pin_that_does_not_match_or_is_no_pin_is_refused_at_the_call(small):
    repo, pin = small
    with pytest.raises(cas.FailedPrecondition) as exc:
        exports.cases(repo, f"evals@1#b3:{'0' * 64}")
    assert refusal(exc) == ("FAILED_PRECONDITION", "PIN_MISMATCH")
    assert exc.value.fields["got"] == pin.content_digest
    with pytest.raises(cas.InvalidArgument) as exc:
        exports.cases(repo, "evals@1")
    assert refusal(exc) == ("INVALID_ARGUMENT", "INVALID_PIN")
    with pytest.raises(cas.NotFound):
        exports.cases(repo, f"evals@2#{pin.content_digest}")


def test_a_retired_version_is_refused_as_items_refuses_it(small):
    repo, pin = small
    repo.retire("evals", 1, "contaminated", "leaked", author=AUTHOR)
    with pytest.raises(cas.FailedPrecondition) as read:
        repo.items("evals", 1)
    with pytest.raises(cas.FailedPrecondition) as exc:
        exports.cases(repo, pin)  # at the call: no item has to be asked for
    assert exc.value.to_json() == read.value.to_json()
    assert exc.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"


def test_cases_streams_it_yields_before_reading_the_version(mem, monkeypatch):
    mem.create_dataset("big", admission="direct")
    mem.commit("big", base=None, add=[{"input": i} for i in range(1200)])
    calls = {"objects_bytes": 0, "items": 0}
    for name in calls:
        def counted(*a, _real=getattr(mem, name), _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)
        monkeypatch.setattr(mem, name, counted)
    stream = exports.cases(mem, mem.pin("big", 1))
    assert calls == {"objects_bytes": 0, "items": 1}  # checked at the call, nothing read yet
    next(stream)
    assert calls == {"objects_bytes": 1, "items": 1}  # one page of 500 read, not the version
    assert sum(1 for _ in stream) == 1199 and calls == {"objects_bytes": 3, "items": 3}


def test_to_pandas_has_case_id_and_one_column_per_field(small):
    repo, pin = small
    frame = cas.interop.exports.to_pandas(repo, pin)
    assert list(frame.columns) == ["case_id", "run_id", "started_at", "input", "output",
                                   "steps", "outcome", "metadata", "tenant", "person",
                                   "withheld"]
    assert list(frame["case_id"]) == all_ids(repo) and frame.attrs["cas.pin"] == str(pin)
    for row in frame.to_dict("records"):
        case_id = row.pop("case_id")
        assert cas.encode_case(row).case_id == case_id


def test_a_missing_extra_is_refused_naming_the_install_line(small, monkeypatch):
    repo, pin = small
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now fails
    with pytest.raises(cas.FailedPrecondition) as exc:
        exports.to_pandas(repo, pin)
    assert refusal(exc) == ("FAILED_PRECONDITION", "EXTRA_REQUIRED")
    assert "the `pandas` extra: pip install '.[pandas]' in the cas checkout" in exc.value.message


# -- JSON Lines -------------------------------------------------------------------------------
def test_jsonl_is_a_header_then_canonical_case_lines(small):
    repo, pin = small
    out = io.BytesIO()
    result = exports.export_jsonl(repo, pin, out)
    assert result == exports.ExportResult("jsonl", str(pin), 6)
    lines = out.getvalue().split(b"\n")
    assert lines[0] == b'{"format":1,"pin":"%s"}' % str(pin).encode() and lines[-1] == b""
    ids = all_ids(repo)
    assert lines[1:-1] == [b'{"case":%s,"case_id":"%s"}' % (repo.object_bytes(i)[1],
                                                             i.encode()) for i in ids]
    head, rows = exports.read_jsonl(io.BytesIO(out.getvalue()))
    assert head == {"format": 1, "pin": str(pin)}
    assert [(cas.encode_case(c).case_id, i) for i, c in rows] == [(i, i) for i in ids]


def test_jsonl_to_a_path_replaces_it_only_whole(small, tmp_path, monkeypatch):
    repo, pin = small
    path = tmp_path / "out.jsonl"
    path.write_bytes(b"old")
    result = exports.export_jsonl(repo, pin, str(path))
    assert result.path == str(path) and path.read_bytes().count(b"\n") == 7
    def failing(digests):
        raise cas.DataLoss("disk gone")  # after the header was written
    monkeypatch.setattr(repo, "objects_bytes", failing)
    path.write_bytes(b"old")
    with pytest.raises(cas.DataLoss):
        exports.export_jsonl(repo, pin, path)
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["out.jsonl"]


# -- Parquet and Hugging Face -----------------------------------------------------------------
def test_parquet_schema_pin_row_groups_and_round_trip(small, tmp_path, monkeypatch):
    import pyarrow.parquet as pq
    repo, pin = small
    monkeypatch.setattr(exports, "ROW_GROUP", 4)
    monkeypatch.setattr(exports, "GROUP_BYTES", 1)  # a row group per record batch
    result = exports.export_parquet(repo, pin, tmp_path / "v.parquet")
    assert result.cases == 6 and result.path == str(tmp_path / "v.parquet")
    f = pq.ParquetFile(result.path)
    assert f.metadata.num_row_groups == 2  # 4 + 2: written a group at a time
    schema = f.schema_arrow
    assert schema.metadata == {b"cas.pin": str(pin).encode(), b"cas.format": b"1",
                               b"cas.case_format": b"1"}
    assert [(x.name, str(x.type)) for x in schema] == [
        ("case_id", "string"), ("run_id", "string"), ("started_at", "string"),
        ("input", "string"), ("output", "string"), ("steps", "string"),
        ("outcome", "string"), ("metadata", "string"), ("tenant", "string"),
        ("person", "string"), ("withheld", "list<element: string>")]
    rows = f.read().to_pylist()
    assert [r["case_id"] for r in rows] == all_ids(repo)
    for r in rows:  # JSON fields are JSON text: rebuilt by hand, then by the helper
        case = {k: json.loads(v) if k in exports.JSON_FIELDS else v
                for k, v in r.items() if k != "case_id"}
        assert cas.encode_case(case).case_id == r["case_id"]
        assert exports.case_from_row(r) == case


_TEXT = st.one_of(st.none(), st.text(max_size=12))
_CASES = st.lists(st.fixed_dictionaries({
    "input": st.one_of(st.text(max_size=30), st.dictionaries(st.text(max_size=5),
                                                             st.integers(), max_size=3)),
    "output": st.text(max_size=200), "run_id": _TEXT, "tenant": _TEXT, "person": _TEXT,
    "started_at": st.sampled_from([None, "2026-01-02T03:04:05Z"]),
    "withheld": st.lists(st.sampled_from(["tool_results", "pii", "secrets"]), unique=True),
    "steps": st.lists(st.fixed_dictionaries({"type": st.just("message"),
                                             "role": st.just("user"),
                                             "content": st.text(max_size=40)}), max_size=3)}),
    min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases=_CASES, batch_bytes=st.integers(1, 2000), row_group=st.integers(1, 5),
       group_bytes=st.integers(1, 4000))
def test_parquet_rows_are_the_tabular_rows_whatever_the_batches(cases, batch_bytes, row_group,
                                                                 group_bytes, tmp_path_factory):
    """The columns built from the cases' bytes (nulls, non-ASCII text, withheld lists) read
    back as `table_row` gives them, cut into record batches by cases and by bytes, and the
    batches gathered into row groups by bytes."""
    import pyarrow.parquet as pq
    repo = cas.Repository.create(MemoryBackend())
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=[cas.encode_case(c) for c in cases])
    out = tmp_path_factory.mktemp("pq") / "v.parquet"
    old = exports.ROW_GROUP, exports.BATCH_BYTES, exports.GROUP_BYTES
    exports.ROW_GROUP, exports.BATCH_BYTES, exports.GROUP_BYTES = (row_group, batch_bytes,
                                                                   group_bytes)
    try:
        result = exports.export_parquet(repo, ("evals", 1), out)
    finally:
        exports.ROW_GROUP, exports.BATCH_BYTES, exports.GROUP_BYTES = old
    expected = [exports.table_row(i, data) for i, data in exports.case_bytes(repo, ("evals", 1))]
    f = pq.ParquetFile(out)
    assert result.cases == len(expected) == f.metadata.num_rows
    assert f.read().to_pylist() == expected
    batches, n, size = [], 0, 0  # ROW_GROUP rows, or fewer at BATCH_BYTES
    for _, data in exports.case_bytes(repo, ("evals", 1)):
        n, size = n + 1, size + len(data)
        if n == row_group or size >= batch_bytes:
            batches.append((n, size))
            n, size = 0, 0
    batches += [(n, size)] if n else []
    groups, n, size = [], 0, 0  # the batches up to GROUP_BYTES of case bytes
    for rows, nbytes in batches:
        n, size = n + rows, size + nbytes
        if size >= group_bytes:
            groups.append(n)
            n, size = 0, 0
    groups += [n] if n else []
    assert [f.metadata.row_group(g).num_rows for g in range(f.metadata.num_row_groups)] == groups


def test_hf_rows_are_the_tabular_rows_across_batches(small, tmp_path, monkeypatch):
    import datasets
    repo, pin = small
    monkeypatch.setattr(exports, "BATCH_BYTES", 1)  # a record batch per case
    result = exports.export_hf(repo, pin, tmp_path / "hf")
    expected = [exports.table_row(i, data) for i, data in exports.case_bytes(repo, pin)]
    assert result.cases == len(expected) == 6
    assert datasets.load_from_disk(str(tmp_path / "hf")).to_list() == expected
    assert os.listdir(tmp_path) == ["hf"]  # the Arrow stream's directory is gone

def test_a_parquet_export_does_not_import_pandas(tmp_path):
    """pyarrow's `pa.array` and `Table.from_pydict` import pandas (about 50 MB and seconds);
    the export builds its columns from buffers and never does."""
    code = ("import sys, cas\nfrom cas.interop import exports\n"
            "from cas.storage.backends.memory import MemoryBackend\n"
            "r = cas.Repository.create(MemoryBackend())\n"
            "r.create_dataset('d', admission='direct')\n"
            "r.commit('d', base=None, add=[cas.encode_case({'input': 1, 'output': 2})])\n"
            f"exports.export_parquet(r, ('d', 1), {str(tmp_path / 'v.parquet')!r})\n"
            "print('pandas' in sys.modules)\n")
    import subprocess
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(ROOT), check=True)
    assert out.stdout.strip() == "False"


def test_hf_dataset_holds_the_columns_and_the_pin_in_its_info(small, tmp_path):
    import datasets
    repo, pin = small
    result = exports.export_hf(repo, str(pin), tmp_path / "hf")
    ds = datasets.load_from_disk(result.path)
    assert json.loads(ds.info.description) == {"format": 1, "pin": str(pin)}
    assert ds.column_names == ["case_id", *exports.FIELDS] and result.cases == 6
    assert [r["case_id"] for r in ds] == all_ids(repo)
    assert all(cas.encode_case(exports.case_from_row(r)).case_id == r["case_id"] for r in ds)
    assert sorted(os.listdir(tmp_path)) == ["hf"]  # the work directory is gone
    with pytest.raises(cas.AlreadyExists):
        exports.export_hf(repo, pin, tmp_path / "hf")


@pytest.mark.parametrize("to", ["parquet", "hf"])
def test_parquet_and_hf_need_a_path(small, to):
    repo, pin = small
    for out in (None, io.BytesIO()):
        with pytest.raises(cas.InvalidArgument) as exc:
            exports.export(repo, pin, to, out)
        assert exc.value.reason == "OUTPUT_REQUIRED" and "-o PATH" in exc.value.message


def test_an_unknown_format_is_refused_naming_the_accepted_ones(small):
    repo, pin = small
    with pytest.raises(cas.InvalidArgument) as exc:
        exports.export(repo, pin, "csv", io.BytesIO())
    assert exc.value.fields["accepted"] == ["jsonl", "parquet", "hf", "openai-chat",
                                            "langsmith", "langfuse", "phoenix", "braintrust"]
    assert exc.value.message == ("unknown export format 'csv'; accepted: jsonl, parquet, hf, "
                                 "openai-chat, langsmith, langfuse, phoenix, braintrust")


# -- OpenAI chat ------------------------------------------------------------------------------
def test_openai_chat_mapping_of_every_step_kind():
    example, status = exports.openai_chat(json.loads(cas.encode_case(CHAT).data))
    assert status == "truncated"  # at `rm`, whose result was not recorded
    mv = {"id": "call_2", "type": "function",
          "function": {"name": "mv", "arguments": '{"dst":"b","src":"a"}'}}
    ls = {"id": "c-7", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    assert example == {"messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "rename a", "name": "ada"},
        {"role": "assistant", "tool_calls": [mv]},
        {"role": "tool", "tool_call_id": "call_2", "content": "null"},  # a recorded null
        {"role": "assistant", "tool_calls": [ls]},
        {"role": "tool", "tool_call_id": "c-7", "content": '{"code":2}'},  # the error
        {"role": "assistant", "content": '{"k":1}'},
    ], "tools": [{"type": "function", "function": {"name": "mv"}},
                 {"type": "function", "function": {"name": "ls"}}]}
    tools = [{"type": "function", "function": {"name": "mv", "parameters": {}}}]
    example, status = exports.openai_chat({**CHAT, "metadata": {"tools": tools}})
    assert example["tools"] == tools
    assert exports.openai_chat({"steps": [CHAT["steps"][1]]}) == (None, "skipped")


def test_openai_chat_export_keeps_the_conversations_in_id_order(small):
    repo, pin = small
    out = io.BytesIO()
    result = exports.export_openai_chat(repo, pin, out)
    # The example whose only tool call is unrecorded has no assistant turn left: skipped.
    assert (result.cases, result.skipped, result.truncated) == (5, 1, 1)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    expected = [exports.openai_chat(c)[0] for _, c in exports._rows(repo, pin)[1]]
    assert lines == [e for e in expected if e is not None]
    # Lossy: what is kept is the conversation, in order, not the case or its id.
    weather = next(x for x in lines if "Lisbon" in x["messages"][0]["content"])
    assert [m["role"] for m in weather["messages"]] == ["user", "assistant", "tool",
                                                        "assistant"]
    assert json.loads(weather["messages"][2]["content"]) == {"temp_c": 21, "sky": "sunny"}


def test_a_jsonl_export_reimports_as_the_same_version(small):
    repo, pin = small
    out = io.BytesIO()
    exports.export_jsonl(repo, pin, out)
    lines = [json.dumps(json.loads(x)["case"]).encode() for x in out.getvalue().splitlines()[1:]]
    repo.create_dataset("copy", admission="direct")
    copy = repo.commit("copy", base=None, add=cas.read_cases_jsonl(lines))
    assert copy.content_digest == pin.content_digest


@pytest.mark.parametrize("lasting", [True, False], ids=["server-gone", "blink"])
def test_an_outage_at_any_read_of_an_export_is_unavailable_never_a_short_file(
        small, lasting, monkeypatch, tmp_path):
    """Whichever read fails, the export raises UNAVAILABLE and leaves no file; never a file
    missing the cases it could not read."""
    repo, pin = small
    monkeypatch.setattr(exports, "PAGE", 2)  # several pages of ids
    files = {k: repo.backend.get(k) for k in repo.backend.list("")}
    out = tmp_path / "evals.jsonl"

    def fresh() -> MemoryBackend:
        backend = MemoryBackend()
        for key, data in files.items():
            backend.put_if_absent(key, data)
        return backend

    def export(backend):
        result = exports.export_jsonl(cas.Repository(backend), str(pin), str(out))
        data = out.read_bytes()
        out.unlink()
        return result, data

    def nothing_written(_) -> None:
        assert os.listdir(tmp_path) == []

    n, (result, data) = every_outage(fresh, export, lasting, check=nothing_written)
    assert result.cases == 6 and len(data.splitlines()) == 7 and n > 5
