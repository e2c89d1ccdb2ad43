"""Plain JSON Lines: one example per line, read through a column mapping
(`cas.interop.datasets.mapping`: `input`, `output` or `expected`, `metadata`, `id` by
default), or a cas JSON Lines export (`cas export --to jsonl`: its header line, then
`{"case", "case_id"}` per line), read back as exactly those cases."""

from __future__ import annotations

from typing import Any

from cas.errors import InvalidArgument
from cas.interop.datasets import mapping as _mapping
from cas.interop.datasets.items import Item, documents, refuse, rows

NAME = "jsonl"


def _is_header(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"format", "pin"}


def read(data: bytes, source: str, mapping: Any = None) -> list[Item]:
    kind, value = documents(data, source)
    lines = value if kind == "jsonl" else [(1, value)]
    if kind == "json" and not isinstance(value, dict):
        raise InvalidArgument(f"{source}: JSON Lines hold one JSON object per line, not one "
                              "JSON value for the whole file", reason="NOT_THIS_FORMAT")
    if lines and _is_header(lines[0][1]):
        if lines[0][1]["format"] != 1:
            raise refuse(f"{source} line {lines[0][0]}", "a cas export of format "
                         f"{lines[0][1]['format']!r}; this cas reads format 1",
                         reason="UNSUPPORTED_FORMAT")
        if mapping:
            raise InvalidArgument(f"{source} is a cas export: its lines are cases, and take "
                                  "no --map", reason="INVALID_MAPPING")
        items = []
        for n, line in lines[1:]:
            where = f"{source} line {n}"
            if not isinstance(line, dict) or set(line) != {"case", "case_id"} or \
                    not isinstance(line["case"], dict):
                raise refuse(where, 'a line of a cas export is {"case": {...}, "case_id": '
                             '"b3:..."}')
            items.append(Item(where, None, case=line["case"]))
        return items
    found = list(rows(("jsonl", lines), source))
    columns: dict[str, None] = {}
    for _, row in found:
        columns.update(dict.fromkeys(row))
    resolved = _mapping.resolve(_mapping.parse(mapping), columns, source)
    return [_mapping.item(row, resolved, where) for where, row in found]
