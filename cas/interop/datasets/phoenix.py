"""Arize Phoenix datasets: examples as Phoenix downloads and uploads them.

Read: the JSONL download (`GET /v1/datasets/{id}/jsonl`: `{"id", "node_id", "input",
"output", "metadata", "splits"}` per line), the examples response (`GET
/v1/datasets/{id}/examples`: `{"data": {"dataset_id", "version_id", "examples": [...]}}`,
each with `updated_at`, `source`), or an upload body (below). Written: the upload body both
Phoenix clients send to `POST /v1/datasets/upload`: `{"action": "create", "name",
"description", "inputs": [...], "outputs": [...], "metadata": [...], "splits": [...]}`
(`splits` only when a case has them). An upload takes no ids: Phoenix's own ids stay in
`metadata.from.phoenix`. Input and output are objects in Phoenix: another value is wrapped
(`metadata.cas.wrapped`).
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from cas.interop.datasets.items import Item, documents, json_only, parts_of, refuse, rows, split

NAME = "phoenix"
RECORD = ("id", "node_id", "updated_at", "source", "splits", "span_id")
TOP = ("splits",)
_UPLOAD = ("inputs", "outputs", "metadata", "splits", "span_ids")


def _upload(body: dict, source: str) -> list[Item]:
    inputs = body["inputs"]
    columns = {k: body.get(k) for k in _UPLOAD if body.get(k) is not None}
    for key, column in columns.items():
        if not isinstance(column, list) or len(column) != len(inputs):
            raise refuse(f"{source} $.{key}", f"`{key}` of a Phoenix upload is a list as "
                         f"long as `inputs` ({len(inputs)})")
    items = []
    for i, value in enumerate(inputs):
        record = {}
        if columns.get("splits") and columns["splits"][i] is not None:
            record["splits"] = columns["splits"][i]
        if columns.get("span_ids") and columns["span_ids"][i] is not None:
            record["span_id"] = columns["span_ids"][i]
        output = columns["outputs"][i] if "outputs" in columns else None
        metadata = columns["metadata"][i] if "metadata" in columns else None
        items.append(Item(f"{source} $.inputs[{i}]", value, output, metadata, record))
    return items


def read(data: bytes, source: str) -> list[Item]:
    json_only(data, source, "Phoenix",
              "the JSONL download (/v1/datasets/{id}/jsonl), the examples response "
              "or an upload body; the CSV download (values flattened to text) is not "
              "read")
    kind, value = document = documents(data, source)
    if kind == "json" and isinstance(value, dict) and isinstance(value.get("inputs"), list):
        return _upload(value, source)
    shared: dict = {}
    found = None
    if kind == "json" and isinstance(value, dict) and isinstance(value.get("data"), dict) \
            and isinstance(value["data"].get("examples"), list):
        shared = {k: value["data"][k] for k in ("dataset_id", "version_id")
                  if value["data"].get(k) is not None}
        found = rows(("json", value["data"]["examples"]), f"{source} $.data.examples")
    items = []
    for where, row in found if found is not None else rows(document, source):
        fields, extra = split(row, ("input", "output", "metadata") + RECORD)
        record = {**shared, **{k: fields[k] for k in RECORD if fields.get(k) is not None}}
        items.append(Item(where.replace(" $[", "[") if shared else where,
                          fields.get("input"), fields.get("output"), fields.get("metadata"),
                          record, extra))
    return items


def write(rows: Iterable[tuple[str, dict]], f: Any, dataset: str) -> int:
    body: dict = {"action": "create", "name": dataset, "description": "",
                  "inputs": [], "outputs": [], "metadata": []}
    splits = []
    for case_id, case in rows:
        p = parts_of({**case, "case_id": case_id}, NAME, TOP, objects_only=True,
                     null_output=False)
        body["inputs"].append(p.input)
        body["outputs"].append(p.output)
        body["metadata"].append(p.metadata)
        splits.append(p.record.get("splits"))
    if any(s is not None for s in splits):
        body["splits"] = splits
    f.write(json.dumps(body, indent=2, ensure_ascii=False).encode() + b"\n")
    return len(body["inputs"])
