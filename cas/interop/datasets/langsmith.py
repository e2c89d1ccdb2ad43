"""LangSmith datasets: examples as the LangSmith CLI and SDK export and upload them.

Read: a JSON array of examples (`langsmith dataset export` writes `{"inputs", "outputs"}`;
the SDK's `list_examples` and the REST API add `id`, `metadata`, `source_run_id`,
`dataset_id`, `created_at`, `modified_at`...), the same one per line (JSON Lines), or an
object holding them under `examples`. An element with neither `inputs` nor `outputs` is all
inputs, as `langsmith dataset upload` reads it. Written: a JSON array (2-space indent) of
example-create objects, `{"inputs", "outputs", "metadata", "id", "source_run_id", "split",
"created_at"}`: what `Client.create_examples(examples=...)` and `langsmith dataset upload`
take.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from cas.interop.datasets.items import Item, json_only, objects, parts_of, refuse, split

NAME = "langsmith"
RECORD = ("id", "dataset_id", "source_run_id", "created_at", "modified_at", "name", "split",
          "attachments", "attachment_urls", "runs")
TOP = ("id", "source_run_id", "split", "created_at")  # the example-create fields


def read(data: bytes, source: str) -> list[Item]:
    json_only(data, source, "LangSmith",
              "a JSON array or JSON Lines of examples (`langsmith dataset export`, the "
              "SDK's list_examples); its CSV and OpenAI-format exports are not read")
    items = []
    for where, row in objects(data, source, ("examples",)):
        if "inputs" not in row and "outputs" not in row:
            items.append(Item(where, row))
            continue
        fields, extra = split(row, ("inputs", "outputs", "metadata") + RECORD)
        inputs = fields.get("inputs", {})
        if not isinstance(inputs, dict):
            raise refuse(where, "`inputs` of a LangSmith example is an object, not "
                         f"{type(inputs).__name__}")
        outputs = fields.get("outputs")
        if outputs is not None and not isinstance(outputs, dict):
            raise refuse(where, "`outputs` of a LangSmith example is an object or null, not "
                         f"{type(outputs).__name__}")
        record = {k: fields[k] for k in RECORD if fields.get(k) is not None}
        items.append(Item(where, inputs, outputs, fields.get("metadata"), record, extra))
    return items


def write(rows: Iterable[tuple[str, dict]], f: Any, dataset: str) -> int:
    examples = []
    for case_id, case in rows:
        p = parts_of({**case, "case_id": case_id}, NAME, TOP, objects_only=True)
        examples.append({"inputs": p.input, "outputs": p.output, "metadata": p.metadata,
                         **p.record})
    f.write(json.dumps(examples, indent=2, ensure_ascii=False).encode() + b"\n")
    return len(examples)
