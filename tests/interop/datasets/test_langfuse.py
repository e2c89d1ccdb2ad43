"""Langfuse dataset items: the API's list, arrays and lines; archived items; the create-item
bodies written back."""

import io
import json

from cas.interop.datasets import langfuse
from support.dataset_exports import LANGFUSE_LIST, jsonl


def test_the_api_list_is_read_and_archived_items_are_skipped():
    items = langfuse.read(json.dumps(LANGFUSE_LIST).encode(), "items.json")
    assert [i.where for i in items] == [f"items.json $.data[{n}]" for n in range(3)]
    first = items[0]
    assert (first.input, first.output, first.metadata) == (
        {"text": "refund please"}, "refund offered", {"lang": "en"})
    assert first.record["sourceTraceId"] == "trace-9f" and first.record["id"] == "item-1"
    assert first.record["sourceObservationId"] == "obs-3"
    assert "sourceTraceId" not in items[1].record and items[1].input == "plain text input"
    assert [i.skip for i in items] == [None, None, "archived"]


def test_lines_and_arrays_read_the_same():
    rows = LANGFUSE_LIST["data"]
    assert [i.record for i in langfuse.read(jsonl(rows), "f")] == \
        [i.record for i in langfuse.read(json.dumps(rows).encode(), "f")]


def test_write_gives_create_item_bodies():
    out = io.BytesIO()
    case = {"input": "q", "output": "a", "metadata": {"k": 1, "from": {"langfuse": {
        "id": "item-1", "datasetName": "support", "sourceTraceId": "t", "createdAt": "c"}}}}
    langfuse.write([("b3:x", case), ("b3:y", {"input": 2, "tenant": "acme"})], out, "gold")
    first, second = map(json.loads, out.getvalue().splitlines())
    assert first == {"id": "item-1", "datasetName": "support", "sourceTraceId": "t",
                     "input": "q", "expectedOutput": "a",
                     "metadata": {"k": 1, "from": {"langfuse": {"createdAt": "c"}}}}
    assert second == {"input": 2, "expectedOutput": None,
                      "metadata": {"cas": {"tenant": "acme"}}}
