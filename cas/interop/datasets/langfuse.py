"""Langfuse datasets: dataset items as the Langfuse API lists them and creates them.

Read: the public API's list response `{"data": [...], "meta": {...}}` (`GET
/api/public/dataset-items`), a JSON array of items, or one item per line. An item is
`{"id", "status", "input", "expectedOutput", "metadata", "sourceTraceId",
"sourceObservationId", "datasetId", "datasetName", "createdAt", "updatedAt"}`; an ARCHIVED
item is not in the dataset, and is skipped (counted as `archived`). Written: JSON Lines of
create-item request bodies (`POST /api/public/dataset-items`, the SDKs' `create_dataset_item`):
`{"id", "datasetName", "status", "input", "expectedOutput", "metadata", "sourceTraceId",
"sourceObservationId"}`, `id` and `datasetName` when the case came from Langfuse.
"""

from __future__ import annotations

from typing import Any, Iterable

from cas.format import encoding
from cas.interop.datasets.items import Item, json_only, objects, parts_of, split

NAME = "langfuse"
RECORD = ("id", "status", "sourceTraceId", "sourceObservationId", "datasetId", "datasetName",
          "createdAt", "updatedAt")
TOP = ("id", "status", "sourceTraceId", "sourceObservationId", "datasetName")


def read(data: bytes, source: str) -> list[Item]:
    json_only(data, source, "Langfuse",
              "the API's list of dataset items, a JSON array or JSON Lines of them")
    items = []
    for where, row in objects(data, source, ("data", "items")):
        fields, extra = split(row, ("input", "expectedOutput", "metadata") + RECORD)
        record = {k: fields[k] for k in RECORD if fields.get(k) is not None}
        skip = "archived" if fields.get("status") == "ARCHIVED" else None
        items.append(Item(where, fields.get("input"), fields.get("expectedOutput"),
                          fields.get("metadata"), record, extra, skip))
    return items


def write(rows: Iterable[tuple[str, dict]], f: Any, dataset: str) -> int:
    n = 0
    for case_id, case in rows:
        p = parts_of({**case, "case_id": case_id}, NAME, TOP)
        f.write(encoding.encode({**p.record, "input": p.input, "expectedOutput": p.output,
                                 "metadata": p.metadata}) + b"\n")
        n += 1
    return n
