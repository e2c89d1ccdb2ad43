"""Braintrust dataset records: `bt datasets create` rows, insert and fetch bodies, and the
rows written back."""

import io
import json

from cas.interop.datasets import braintrust
from support.dataset_exports import BRAINTRUST_FETCH, BRAINTRUST_ROWS, jsonl


def test_rows_keep_id_tags_and_origin():
    items = braintrust.read(jsonl(BRAINTRUST_ROWS), "rows.jsonl")
    assert [(i.where, i.input, i.output) for i in items] == [
        ("rows.jsonl line 1", {"text": "hi"}, "hello"),
        ("rows.jsonl line 2", {"text": "bye"}, "goodbye")]
    assert items[1].record == {"id": "case-2", "tags": ["smoke"],
                               "origin": BRAINTRUST_ROWS[1]["origin"]}
    assert items[1].metadata == {"difficulty": "easy"}


def test_fetch_and_insert_bodies_are_read_under_events():
    [item] = braintrust.read(json.dumps(BRAINTRUST_FETCH).encode(), "fetch.json")
    assert item.where == "fetch.json $.events[0]"
    assert item.record == {"id": "case-9", "created": "2026-07-02T00:00:00Z",
                           "dataset_id": "ds-9", "project_id": "p-1", "_xact_id": "1000200",
                           "span_id": "s-1", "root_span_id": "s-1"}
    assert item.extra == {"_pagination_key": "p0"}


def test_write_gives_rows_the_cli_takes():
    out = io.BytesIO()
    case = {"input": {"t": 1}, "output": "o", "metadata": {"from": {"braintrust": {
        "id": "case-2", "origin": {"id": "log-77"}, "_xact_id": "9"}}}}
    braintrust.write([("b3:x", case)], out, "gold")
    assert json.loads(out.getvalue()) == {
        "id": "case-2", "origin": {"id": "log-77"}, "input": {"t": 1}, "expected": "o",
        "metadata": {"from": {"braintrust": {"_xact_id": "9"}}}}
