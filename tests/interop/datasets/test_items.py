"""An item to a case and back: `to_case` and `parts_of` are inverse for every tool's options,
nothing is overwritten where metadata collides, and the file readers' refusals."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.interop.datasets.items import Item, documents, objects, parts_of, to_case
from support.dataset_exports import cases, json_values

OPTIONS = {  # tool: (top, objects_only, null_output), as each writer calls parts_of
    "langsmith": (("id", "source_run_id", "split", "created_at"), True, True),
    "phoenix": (("splits",), True, False),
    "langfuse": (("id", "status", "sourceTraceId"), False, True),
    "braintrust": (("id", "tags", "origin"), False, True),
}


def canonical(case):
    return cas.encode_case(case).data


def back(case, tool):
    top, objects_only, null_output = OPTIONS[tool]
    p = parts_of(case, tool, top, objects_only, null_output)
    return to_case(Item("x", p.input, p.output, p.metadata, p.record), tool, None)


@settings(max_examples=200, deadline=None)
@given(case=cases, tool=st.sampled_from(sorted(OPTIONS)))
def test_parts_of_then_to_case_gives_the_case_back(case, tool):
    assert canonical(back(case, tool)) == canonical(case)


@settings(max_examples=100, deadline=None)
@given(inp=json_values, out=json_values, meta=json_values,
       record=st.dictionaries(st.sampled_from(["id", "source_run_id", "extra", "dataset_id"]),
                              st.text(min_size=1, max_size=4), max_size=3),
       tool=st.sampled_from(sorted(OPTIONS)))
def test_an_item_survives_to_case_then_parts_of(inp, out, meta, record, tool):
    """Whatever an item's metadata (no object, a `from` of its own...), its case gives back
    the item's values, and the case of that is the same case."""
    case = to_case(Item("x", inp, out, meta, record), tool, "acme")
    again = back(case, tool)
    assert canonical(again) == canonical(case)


def test_metadata_that_cannot_take_the_record_is_kept_whole_under_it():
    item = Item("x", {"q": 1}, None, "a string", {"id": "e-1"})
    assert to_case(item, "langsmith", None)["metadata"] == {
        "from": {"langsmith": {"id": "e-1", "metadata": "a string"}}}
    item = Item("x", 1, None, {"from": {"langsmith": {"id": "other"}}}, {"id": "e-1"})
    assert to_case(item, "langsmith", None)["metadata"] == {
        "from": {"langsmith": {"id": "e-1", "metadata": {"from": {"langsmith": {"id": "other"}}}}}}
    item = Item("x", 1, None, {"from": {"langfuse": {"id": "f"}}, "k": 2}, {"id": "e-1"},
                {"odd": True})
    assert to_case(item, "langsmith", None)["metadata"] == {
        "k": 2, "from": {"langfuse": {"id": "f"}, "langsmith": {"id": "e-1",
                                                                "extra": {"odd": True}}}}


def test_the_cas_member_restores_the_case_fields():
    meta = {"k": 1, "cas": {"run_id": "r-1", "tenant": "acme", "wrapped": ["input"],
                            "steps": [{"type": "message", "role": "user", "content": "x"}]}}
    case = to_case(Item("x", {"input": "hello"}, None, meta), "phoenix", None)
    assert (case["input"], case["run_id"], case["tenant"], case["metadata"]) == (
        "hello", "r-1", "acme", {"k": 1})
    foreign = {"cas": {"not": "ours"}}  # a `cas` member cas did not write stays metadata
    assert to_case(Item("x", 1, None, foreign), "phoenix", None)["metadata"] == foreign


def test_documents_tells_one_json_value_from_json_lines():
    assert documents(b'[{"a": 1}]', "f") == ("json", [{"a": 1}])
    assert documents(b'{"a": 1}\n\n{"a": 2}\n', "f") == ("jsonl", [(1, {"a": 1}),
                                                                    (3, {"a": 2})])
    with pytest.raises(cas.InvalidArgument) as exc:
        documents(b'{"a": 1}\n{"a": NaN}\n', "f.jsonl")
    assert exc.value.message.startswith("f.jsonl line 2: ") and exc.value.fields["line"] == 2
    with pytest.raises(cas.InvalidArgument) as exc:
        documents(b"  \n", "f")
    assert exc.value.reason == "EMPTY_FILE"


def test_objects_reads_arrays_wrappers_and_lines_and_refuses_what_is_no_object():
    assert [w for w, _ in objects(b'{"data": [{"a": 1}, {"a": 2}]}', "f", ("data",))] == [
        "f $.data[0]", "f $.data[1]"]
    assert [w for w, _ in objects(b'{"a": 1}', "f", ("data",))] == ["f $"]
    with pytest.raises(cas.InvalidArgument) as exc:
        list(objects(json.dumps([{"a": 1}, 7]).encode(), "f"))
    assert exc.value.message == "f $[1]: an example is a JSON object, not 7"


def test_a_malformed_json_document_is_named_as_one_not_by_its_first_line():
    data = b'[\n  {"inputs": {"a": 1}},\n  {"inputs": {"a": 2},\n]\n'
    with pytest.raises(cas.InvalidArgument) as exc:
        documents(data, "ds.json")
    assert exc.value.message.startswith("ds.json: invalid JSON")
    assert "line 1" not in exc.value.message
