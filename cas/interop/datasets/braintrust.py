"""Braintrust datasets: dataset records as Braintrust fetches, inserts and uploads them.

Read: JSON Lines of records (what `bt datasets create --file` takes), a JSON array of them,
or an object holding them under `events` (the insert request `POST
/v1/dataset/{id}/insert` and the fetch response). A record is `{"id", "input", "expected",
"metadata", "tags", "created", "origin", "span_id", "root_span_id", "span_parents"}`, and
fetched rows add `dataset_id`, `project_id`, `_xact_id`. Written: JSON Lines of records,
`{"id", "input", "expected", "metadata", "tags", "created", "origin", "span_id",
"root_span_id", "span_parents"}` (`id` and the rest when the case came from Braintrust).
"""

from __future__ import annotations

from typing import Any, Iterable

from cas.format import encoding
from cas.interop.datasets.items import Item, json_only, objects, parts_of, split

NAME = "braintrust"
TOP = ("id", "tags", "created", "origin", "span_id", "root_span_id", "span_parents")
RECORD = TOP + ("dataset_id", "project_id", "_xact_id")


def read(data: bytes, source: str) -> list[Item]:
    json_only(data, source, "Braintrust",
              "JSON Lines or a JSON array of dataset records, or an events body")
    items = []
    for where, row in objects(data, source, ("events",)):
        fields, extra = split(row, ("input", "expected", "metadata") + RECORD)
        record = {k: fields[k] for k in RECORD if fields.get(k) is not None}
        items.append(Item(where, fields.get("input"), fields.get("expected"),
                          fields.get("metadata"), record, extra))
    return items


def write(rows: Iterable[tuple[str, dict]], f: Any, dataset: str) -> int:
    n = 0
    for case_id, case in rows:
        p = parts_of({**case, "case_id": case_id}, NAME, TOP)
        f.write(encoding.encode({**p.record, "input": p.input, "expected": p.output,
                                 "metadata": p.metadata}) + b"\n")
        n += 1
    return n
