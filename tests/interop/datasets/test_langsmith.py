"""LangSmith examples: the CLI's export, the SDK's examples, and the example-create shape
written back (round trips: test_importing.py)."""

import io
import json

import pytest

import cas
from cas.interop.datasets import langsmith
from support.dataset_exports import LANGSMITH_CLI, LANGSMITH_SDK, jsonl


def test_the_cli_export_reads_inputs_and_outputs():
    items = langsmith.read(json.dumps(LANGSMITH_CLI, indent=2).encode(), "ds.json")
    assert [(i.where, i.input, i.output, i.record, i.extra) for i in items] == [
        ("ds.json $[0]", {"question": "What is the capital of France?"}, {"answer": "Paris"},
         {}, {}),
        ("ds.json $[1]", {"question": "2 + 2?"}, {"answer": "4"}, {}, {})]


def test_an_element_without_inputs_or_outputs_is_all_inputs():
    [item] = langsmith.read(b'[{"question": "hi", "context": "c"}]', "ds.json")
    assert (item.input, item.output) == ({"question": "hi", "context": "c"}, None)


def test_sdk_examples_keep_their_ids_and_drop_nothing():
    items = langsmith.read(jsonl(LANGSMITH_SDK), "ex.jsonl")
    first = items[0]
    assert first.where == "ex.jsonl line 1"
    assert first.record == {k: LANGSMITH_SDK[0][k] for k in (
        "id", "name", "created_at", "modified_at", "dataset_id", "source_run_id", "runs")}
    assert first.metadata == {"dataset_split": ["base"], "priority": "high"}
    assert items[1].output is None and items[1].metadata is None
    assert "modified_at" not in items[1].record  # null is no value
    wrapped = langsmith.read(json.dumps({"examples": LANGSMITH_SDK}).encode(), "r.json")
    assert [i.record["id"] for i in wrapped] == [e["id"] for e in LANGSMITH_SDK]


def test_unknown_fields_are_extra():
    [item] = langsmith.read(b'[{"inputs": {"a": 1}, "rating": 5}]', "f")
    assert item.extra == {"rating": 5}


@pytest.mark.parametrize("row, says", [
    ({"inputs": "text"}, "`inputs` of a LangSmith example is an object, not str"),
    ({"inputs": {}, "outputs": [1]}, "`outputs` of a LangSmith example is an object or null"),
])
def test_values_langsmith_does_not_allow_are_refused_naming_the_example(row, says):
    with pytest.raises(cas.InvalidArgument) as exc:
        langsmith.read(json.dumps([{"inputs": {}}, row]).encode(), "f.json")
    assert exc.value.message.startswith(f"f.json $[1]: {says}")


def test_write_gives_example_create_objects():
    out = io.BytesIO()
    case = {"input": {"q": 1}, "output": None, "metadata": {"from": {"langsmith": {
        "id": "e-1", "source_run_id": "r-1", "dataset_id": "d-1"}}}}
    assert langsmith.write([("b3:x", case)], out, "gold") == 1
    [example] = json.loads(out.getvalue())
    assert example == {"inputs": {"q": 1}, "outputs": None, "id": "e-1", "source_run_id": "r-1",
                       "metadata": {"from": {"langsmith": {"dataset_id": "d-1"}}}}
    assert out.getvalue().startswith(b'[\n  {\n    "inputs"')  # the CLI's 2-space indent
