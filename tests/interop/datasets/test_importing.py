"""Dataset imports into a repository: one sealed version, re-import unchanged, all or nothing,
deterministic, and the round trip through `cas export --to <tool>` (the CLI:
tests/cli/test_dataset.py)."""

import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas.interop import exports
from cas.interop.datasets import TOOLS, import_dataset, read_items
from cas.storage.backends.memory import MemoryBackend
from support.dataset_exports import (BRAINTRUST_ROWS, LANGFUSE_LIST, LANGSMITH_SDK, NATIVE,
                                     PHOENIX_JSONL, cases, jsonl, write)

SOURCES = {"langsmith": LANGSMITH_SDK, "langfuse": LANGFUSE_LIST,
           "phoenix": jsonl(PHOENIX_JSONL), "braintrust": jsonl(BRAINTRUST_ROWS)}


def ids_of(repo, name, number):
    return sorted(cas_id for cas_id, _ in exports.cases(repo, (name, number)))


def case_dicts(repo, name, number):
    return {i: json.loads(cas.encode_case(c).data) for i, c in exports.cases(repo, (name, number))}


def versions(repo, name):
    try:
        return repo.head(name)
    except cas.NotFound:
        return None


@pytest.mark.parametrize("tool", sorted(SOURCES))
def test_an_import_seals_one_version_and_a_reimport_seals_nothing(mem, tmp_path, tool):
    path = write(tmp_path / f"export.{tool}", SOURCES[tool])
    first = import_dataset(mem, tool, path, "gold", tenant="acme")
    assert first.status == "sealed" and first.created and first.base == 0
    record = first.version
    assert (record.number, record.operation, record.item_count) == (1, "commit", first.cases)
    assert mem.dataset("gold").admits == "direct"
    assert ids_of(mem, "gold", 1) == first.case_ids
    again = import_dataset(mem, tool, path, "gold", tenant="acme")
    assert (again.status, again.new, again.version, again.case_ids) == (
        "unchanged", 0, None, first.case_ids)
    assert mem.head("gold") == 1
    for case in case_dicts(mem, "gold", 1).values():
        assert case["tenant"] == "acme"


def test_the_ids_of_each_tool_are_kept_in_the_case_metadata(mem, tmp_path):
    import_dataset(mem, "langsmith", write(tmp_path / "ls.json", LANGSMITH_SDK), "ls")
    got = {c["metadata"]["from"]["langsmith"]["id"]: c for c in case_dicts(mem, "ls", 1).values()}
    first = got["0f1e3a52-6c1b-4b8e-9d3a-1c2b3d4e5f60"]
    assert first["metadata"]["from"]["langsmith"]["source_run_id"] == \
        "aa11bb22-cc33-4d44-8e55-ff6677889900"
    assert first["metadata"]["priority"] == "high"
    assert first["input"] == LANGSMITH_SDK[0]["inputs"]
    assert first["output"] == {"answer": "I have issued a refund."}
    import_dataset(mem, "langfuse", write(tmp_path / "lf.json", LANGFUSE_LIST), "lf")
    got = [c["metadata"]["from"]["langfuse"] for c in case_dicts(mem, "lf", 1).values()]
    assert {g["id"] for g in got} == {"item-1", "item-2"}  # item-3 is ARCHIVED
    assert {g.get("sourceTraceId") for g in got} == {"trace-9f", None}
    import_dataset(mem, "braintrust", write(tmp_path / "bt.jsonl", jsonl(BRAINTRUST_ROWS)), "bt")
    got = {c["metadata"]["from"]["braintrust"]["id"]: c for c in case_dicts(mem, "bt", 1).values()}
    assert got["case-2"]["metadata"]["from"]["braintrust"]["origin"]["id"] == "log-77"
    assert got["case-2"]["metadata"]["difficulty"] == "easy"
    assert got["case-1"]["output"] == "hello"


def test_an_import_adds_to_the_head_and_names_what_is_new(mem, tmp_path):
    mem.create_dataset("gold", admission="direct")
    mem.commit("gold", base=None, add=[{"input": "kept", "tenant": "acme"}])
    path = write(tmp_path / "bt.jsonl", jsonl(BRAINTRUST_ROWS))
    r = import_dataset(mem, "braintrust", path, "gold", tenant="acme")
    assert (r.status, r.created, r.base, r.new, r.version.number) == ("sealed", False, 1, 2, 2)
    assert r.version.item_count == 3
    more = jsonl(BRAINTRUST_ROWS + [{"id": "case-3", "input": "x", "expected": "y"}])
    r = import_dataset(mem, "braintrust", write(tmp_path / "bt2.jsonl", more), "gold",
                       tenant="acme")
    assert (r.new, r.version.added, r.version.item_count) == (1, 1, 4)


def test_a_dry_run_reports_and_writes_nothing(mem, tmp_path):
    path = write(tmp_path / "bt.jsonl", jsonl(BRAINTRUST_ROWS + [{"input": 1, "why": "x"}]))
    r = import_dataset(mem, "braintrust", path, "gold", dry_run=True)
    assert (r.status, r.created, r.new, r.cases) == ("dry-run", True, 3, 3)
    assert r.unplaced == {"why": {"count": 1, "first": f"{path} line 3"}}
    assert mem.datasets() == []


def test_duplicates_and_skips_are_counted(mem, tmp_path):
    rows = BRAINTRUST_ROWS + [BRAINTRUST_ROWS[0]]
    r = import_dataset(mem, "braintrust", write(tmp_path / "d.jsonl", jsonl(rows)), "gold")
    assert (r.items, r.cases, r.duplicates) == (3, 2, 1)
    r = import_dataset(mem, "langfuse", write(tmp_path / "lf.json", LANGFUSE_LIST), "lf")
    assert (r.items, r.skipped, r.cases) == (3, {"archived": 1}, 2)


def _untouched(mem):
    return (mem.datasets(), [mem.head(n) for n in mem.datasets()])


@pytest.mark.parametrize("data, where, reason", [
    (b'{"input": 1}\n{"input": 2\n', "line 2", None),
    (b'{"input": 1}\n[1, 2]\n', "line 2", "INVALID_ITEM"),
    (b'{"input": 1}\n' + b"[" * 5000 + b"]" * 5000 + b"\n", "line 2", None),
    (b"", "", "EMPTY_FILE"),
])
def test_bad_input_is_refused_naming_the_line_and_changes_nothing(mem, tmp_path, data, where,
                                                                    reason):
    mem.create_dataset("gold", admission="direct")
    mem.commit("gold", base=None, add=[{"input": "kept"}])
    before = _untouched(mem)
    path = write(tmp_path / "bad.jsonl", data)
    with pytest.raises(cas.InvalidArgument) as exc:
        import_dataset(mem, "braintrust", path, "gold")
    assert exc.value.message.startswith(f"{path} {where}".rstrip())
    if reason:
        assert exc.value.reason == reason
    with pytest.raises(cas.InvalidArgument):
        import_dataset(mem, "braintrust", path, "new-one")
    assert _untouched(mem) == before


def test_refusals(mem, tmp_path):
    path = write(tmp_path / "bt.jsonl", jsonl(BRAINTRUST_ROWS))
    with pytest.raises(cas.InvalidArgument) as exc:
        import_dataset(mem, "csv", path, "gold")
    assert exc.value.reason == "UNKNOWN_FORMAT" and exc.value.fields["accepted"] == list(TOOLS)
    with pytest.raises(cas.NotFound) as exc:
        import_dataset(mem, "braintrust", tmp_path / "none.jsonl", "gold")
    assert exc.value.reason == "FILE_NOT_FOUND"
    with pytest.raises(cas.InvalidArgument) as exc:
        import_dataset(mem, "braintrust", path, "gold", mapping=["input=x"])
    assert exc.value.reason == "INVALID_MAPPING"
    mem.create_dataset("reviewed")
    with pytest.raises(cas.FailedPrecondition) as exc:
        import_dataset(mem, "braintrust", path, "reviewed")
    assert exc.value.reason == "ADMISSION_REVIEWED_ONLY"
    with pytest.raises(cas.FailedPrecondition):  # a dry run says so too
        import_dataset(mem, "braintrust", path, "reviewed", dry_run=True)
    assert mem.head("reviewed") == 0
    with pytest.raises(cas.InvalidArgument) as exc:
        import_dataset(mem, "braintrust", path, "Bad Name")
    for tenant in ("", "a\nb", "x" * 513, 7):
        with pytest.raises(cas.InvalidArgument) as exc:
            import_dataset(mem, "braintrust", path, "gold", tenant=tenant)
        assert exc.value.reason == "INVALID_TENANT"
    assert mem.datasets() == ["reviewed"]


def test_a_tenant_recorded_by_an_export_is_kept_and_a_different_one_refused(mem, tmp_path):
    mem.create_dataset("native", admission="direct")
    mem.commit("native", base=None, add=NATIVE)
    out = io.BytesIO()
    exports.export(mem, ("native", 1), "braintrust", out)
    path = write(tmp_path / "back.jsonl", out.getvalue())
    r = import_dataset(mem, "braintrust", path, "back")  # no --tenant: the recorded one
    assert r.case_ids == ids_of(mem, "native", 1)
    with pytest.raises(cas.InvalidArgument) as exc:
        import_dataset(mem, "braintrust", path, "other", tenant="globex")
    assert exc.value.reason == "TENANT_MISMATCH" and exc.value.message.startswith(f"{path} line")
    assert "other" not in mem.datasets()


# -- round trips through `cas export --to <tool>` ---------------------------------------------
@pytest.mark.parametrize("tool", sorted(SOURCES))
def test_a_tools_export_goes_back_to_it_with_its_ids(mem, tmp_path, tool):
    """import --from X, export --to X, import again: the same cases; and what the export wrote
    carries the tool's ids in the tool's own fields."""
    path = write(tmp_path / f"in.{tool}", SOURCES[tool])
    first = import_dataset(mem, tool, path, "a", tenant="acme")
    out = io.BytesIO()
    result = exports.export(mem, ("a", 1), tool, out)
    assert (result.format, result.cases) == (tool, first.cases)
    again = import_dataset(mem, tool, write(tmp_path / f"out.{tool}", out.getvalue()), "b")
    assert again.case_ids == first.case_ids
    assert mem.version("b", 1).content_digest == mem.version("a", 1).content_digest
    text = out.getvalue().decode()
    for own in {"langsmith": ["0f1e3a52-6c1b-4b8e-9d3a-1c2b3d4e5f60", "source_run_id"],
                "langfuse": ['"id":"item-1"', '"sourceTraceId":"trace-9f"'],
                "braintrust": ['"id":"case-2"', '"origin":{'],
                "phoenix": ['"splits"']}[tool]:
        assert own in text


@pytest.mark.parametrize("tool", sorted(SOURCES) + ["jsonl"])
def test_any_case_survives_a_round_trip_through_a_tool(mem, tmp_path, tool):
    mem.create_dataset("native", admission="direct")
    mem.commit("native", base=None, add=NATIVE)
    out = io.BytesIO()
    exports.export(mem, ("native", 1), tool, out)
    r = import_dataset(mem, tool, write(tmp_path / "back", out.getvalue()), "back")
    assert r.case_ids == ids_of(mem, "native", 1)
    assert case_dicts(mem, "back", 1) == case_dicts(mem, "native", 1)


def test_the_person_is_never_exported(mem, tmp_path):
    mem.create_dataset("native", admission="direct")
    mem.commit("native", base=None, add=[{**NATIVE[1], "person": "user-42"}])
    out = io.BytesIO()
    exports.export(mem, ("native", 1), "langfuse", out)
    assert b"user-42" not in out.getvalue()


def test_a_case_with_its_own_cas_metadata_key_goes_to_a_tool_and_back(mem, tmp_path):
    mem.create_dataset("native", admission="direct")
    mem.commit("native", base=None, add=[{"input": 1, "metadata": {"cas": {"tenant": "x"}}}])
    out = io.BytesIO()
    exports.export(mem, ("native", 1), "langsmith", out)
    assert json.loads(out.getvalue())[0]["metadata"] == {
        "cas": {"metadata": {"cas": {"tenant": "x"}}, "wrapped": ["input"]}}
    r = import_dataset(mem, "langsmith", write(tmp_path / "x.json", out.getvalue()), "back")
    assert r.case_ids == ids_of(mem, "native", 1)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(batch=st.lists(cases, min_size=1, max_size=5, unique_by=lambda c: json.dumps(c)),
       tool=st.sampled_from(sorted(SOURCES) + ["jsonl"]), data=st.data())
def test_an_import_is_deterministic_and_a_round_trip_is_exact(tmp_path_factory, batch, tool,
                                                               data):
    """Any cases, exported to a tool and imported back, in any order of the file's items: the
    same case ids and the same version digest, every time."""
    repo = cas.Repository.create(MemoryBackend())
    where = tmp_path_factory.mktemp("rt")
    repo.create_dataset("native", admission="direct")
    repo.commit("native", base=None, add=batch)
    out = io.BytesIO()
    exports.export(repo, ("native", 1), tool, out)
    path = write(where / "x", out.getvalue())
    items = read_items(tool, path)
    r = import_dataset(repo, tool, path, "back")
    assert r.case_ids == ids_of(repo, "native", 1)
    assert repo.version("back", 1).content_digest == repo.version("native", 1).content_digest
    again = import_dataset(repo, tool, path, "back")
    assert again.status == "unchanged"
    if tool in ("braintrust", "langfuse", "jsonl") and len(items) > 1:
        lines = out.getvalue().splitlines(keepends=True)
        head, body = (lines[:1], lines[1:]) if tool == "jsonl" else ([], lines)
        shuffled = data.draw(st.permutations(body))
        p2 = write(where / "y", b"".join(head + list(shuffled)))
        assert import_dataset(repo, tool, p2, "back", dry_run=True).case_ids == r.case_ids


def test_an_import_onto_a_retired_head_seals_every_case_anew(mem, tmp_path):
    path = write(tmp_path / "bt.jsonl", jsonl(BRAINTRUST_ROWS))
    import_dataset(mem, "braintrust", path, "gold")
    mem.retire("gold", 1, "CONTAMINATED", "leaked")
    r = import_dataset(mem, "braintrust", path, "gold")
    assert (r.status, r.base, r.new, r.version.number) == ("sealed", 1, 2, 2)
    assert ids_of(mem, "gold", 2) == r.case_ids
