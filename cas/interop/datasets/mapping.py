"""Column mappings: which columns of a table (a Hugging Face dataset, a Parquet file, plain
JSON Lines) are a case's input, output and metadata, and which is the example's id.

A mapping is `FIELD=COLUMN` or `FIELD=COLUMN,COLUMN,...` (several columns make an object of
them), FIELD one of `input`, `output`, `metadata`, `id`. Unmapped fields default to the
column of the same name (`output`: else `expected`), when the table has one. Every other
column has no place: it is kept in `metadata.from.<tool>.extra` and named in the preview.
"""

from __future__ import annotations

from typing import Any, Iterable

from cas.errors import InvalidArgument
from cas.format import encoding
from cas.interop.datasets.items import Item, refuse

FIELDS = ("input", "output", "metadata", "id")
DEFAULTS = {"input": ("input",), "output": ("output", "expected"), "metadata": ("metadata",),
            "id": ("id",)}
Mapping = dict  # field -> tuple of columns


def parse(specs: Any) -> Mapping:
    """A mapping from `FIELD=COLUMN[,COLUMN...]` strings (the CLI's `--map`, repeatable) or a
    dict `{field: column or [columns]}` (Python)."""
    if specs is None:
        return {}
    pairs: list[tuple[Any, Any]] = []
    if isinstance(specs, dict):
        pairs = list(specs.items())
    elif isinstance(specs, (list, tuple)):
        for spec in specs:
            if not isinstance(spec, str) or "=" not in spec:
                raise _bad(f"{encoding.describe(spec)} is no FIELD=COLUMN")
            field, _, columns = spec.partition("=")
            pairs.append((field.strip(), columns.split(",")))
    else:
        raise _bad(f"a mapping is a dict or FIELD=COLUMN strings, not "
                   f"{encoding.describe(specs)}")
    found: Mapping = {}
    for field, columns in pairs:
        if field not in FIELDS:
            raise _bad(f"{encoding.describe(field)} is no field; accepted: "
                       + ", ".join(FIELDS))
        columns = (columns,) if isinstance(columns, str) else tuple(columns)
        if not columns or not all(isinstance(c, str) and c for c in columns):
            raise _bad(f"{field}= names no column")
        if field == "id" and len(columns) != 1:
            raise _bad("id= names one column")
        if field in found:
            raise _bad(f"{field} is mapped twice")
        found[field] = columns
    return found


def _bad(message: str) -> InvalidArgument:
    return InvalidArgument(f"--map: {message} (FIELD=COLUMN[,COLUMN...], FIELD one of "
                           f"{', '.join(FIELDS)})", reason="INVALID_MAPPING")


def resolve(mapping: Mapping, columns: Iterable[str], source: str) -> Mapping:
    """The mapping completed with the defaults, checked against the table's `columns`."""
    columns = list(columns)
    have = set(columns)
    resolved: Mapping = {}
    for field in FIELDS:
        if field in mapping:
            missing = [c for c in mapping[field] if c not in have]
            if missing:
                raise InvalidArgument(f"{source}: no column {missing[0]!r} (mapped to "
                                      f"{field}); its columns: {', '.join(columns)}",
                                      reason="NO_SUCH_COLUMN", column=missing[0])
            resolved[field] = mapping[field]
        else:
            default = next((c for c in DEFAULTS[field] if c in have), None)
            if default is not None:
                resolved[field] = (default,)
    if "input" not in resolved:
        raise InvalidArgument(f"{source}: no column is the input: name one with --map "
                              f"input=COLUMN (or input=COL1,COL2); its columns: "
                              f"{', '.join(columns) or 'none'}", reason="NO_INPUT_COLUMN")
    return resolved


def item(row: dict, resolved: Mapping, where: str) -> Item:
    """The item of one row (a dict of column values)."""
    def value(field: str) -> Any:
        cols = resolved.get(field)
        if cols is None:
            return None
        if len(cols) == 1:
            return row.get(cols[0])
        return {c: row.get(c) for c in cols}

    first = resolved["input"]
    if len(first) == 1 and first[0] not in row:
        raise refuse(where, f"no {first[0]!r} (the input)", reason="NO_SUCH_COLUMN",
                     column=first[0])
    used = {c for cols in resolved.values() for c in cols}
    record = {"id": row[resolved["id"][0]]} if "id" in resolved and \
        row.get(resolved["id"][0]) is not None else {}
    extra = {k: v for k, v in row.items() if k not in used}
    return Item(where, value("input"), value("output"), value("metadata"), record, extra)
