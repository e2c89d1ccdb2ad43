"""Phoenix datasets: the JSONL download, the examples response, the upload body (read and
written)."""

import io
import json

import pytest

import cas
from cas.interop.datasets import phoenix
from support.dataset_exports import PHOENIX_EXAMPLES, PHOENIX_JSONL, PHOENIX_UPLOAD, jsonl


def test_the_jsonl_download_keeps_ids_and_splits():
    items = phoenix.read(jsonl(PHOENIX_JSONL), "ds.jsonl")
    assert items[0].record == {"id": "RGF0YXNldEV4YW1wbGU6MQ==", "splits": ["train"]}
    assert (items[0].input, items[0].output, items[0].metadata) == (
        {"question": "Is the sky blue?"}, {"answer": "yes"}, {"source": "manual"})
    assert items[1].where == "ds.jsonl line 2"


def test_the_examples_response_records_the_dataset_and_version():
    [item] = phoenix.read(json.dumps(PHOENIX_EXAMPLES).encode(), "ex.json")
    assert item.where == "ex.json $.data.examples[0]"
    assert item.record == {"dataset_id": "RGF0YXNldDox",
                           "version_id": "RGF0YXNldFZlcnNpb246MQ==",
                           "id": "RGF0YXNldEV4YW1wbGU6MQ==",
                           "updated_at": "2026-08-01T12:00:00+00:00"}


def test_an_upload_body_is_read_column_by_column():
    items = phoenix.read(json.dumps(PHOENIX_UPLOAD).encode(), "up.json")
    assert [(i.where, i.input, i.output, i.metadata, i.record) for i in items] == [
        ("up.json $.inputs[0]", {"q": "a"}, {"a": 1}, {}, {}),
        ("up.json $.inputs[1]", {"q": "b"}, {}, {"k": "v"}, {"splits": "test"})]
    with pytest.raises(cas.InvalidArgument) as exc:
        phoenix.read(json.dumps({**PHOENIX_UPLOAD, "outputs": [{}]}).encode(), "up.json")
    assert exc.value.message.startswith("up.json $.outputs: `outputs` of a Phoenix upload is "
                                        "a list as long as `inputs` (2)")


def test_write_gives_the_upload_body():
    out = io.BytesIO()
    phoenix.write([("b3:x", {"input": {"q": 1}, "output": {"a": 2}, "metadata": {
        "from": {"phoenix": {"id": "E1", "splits": ["train"]}}}}),
                   ("b3:y", {"input": "text", "output": None})], out, "qa")
    body = json.loads(out.getvalue())
    assert body == {"action": "create", "name": "qa", "description": "",
                    "inputs": [{"q": 1}, {"input": "text"}],
                    "outputs": [{"a": 2}, {"output": None}],
                    "metadata": [{"from": {"phoenix": {"id": "E1"}}},
                                 {"cas": {"wrapped": ["input", "output"]}}],
                    "splits": [["train"], None]}


def test_the_csv_download_is_refused_saying_what_is_read_instead():
    with pytest.raises(cas.InvalidArgument) as exc:
        phoenix.read(b"id,input.question,output.answer\nE1,Is it?,yes\n", "ds.csv")
    assert exc.value.reason == "NOT_THIS_FORMAT"
    assert exc.value.message.startswith("ds.csv is not JSON (it starts 'id,input.question,")
    assert "the JSONL download" in exc.value.message
