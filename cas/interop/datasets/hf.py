"""Hugging Face datasets: a dataset saved with `save_to_disk`, or a Parquet file, read with
pyarrow (the `parquet` extra; the `datasets` package is not needed to read).

A `save_to_disk` directory holds Arrow IPC stream files (`data-00000-of-00001.arrow`...)
listed in `state.json`, beside `dataset_info.json`; a DatasetDict's directory holds one such
directory per split (`dataset_dict.json`), and one split is imported at a time. A table in
the layout cas's own `parquet` and `hf` exports write (`case_id` and the case fields) is read
back as those cases, exactly; any other table is read through a column mapping
(`cas.interop.datasets.mapping`). The export side is `cas export --to hf` / `--to parquet`
(cas/interop/exports.py).
"""

from __future__ import annotations

import datetime
import decimal
import os
from typing import Any

from cas.errors import InvalidArgument, NotFound
from cas.format import encoding
from cas.interop.datasets import mapping as _mapping
from cas.interop.datasets.items import Item, refuse

NAME = "hf"


def _arrow():
    from cas.interop.exports import need
    need("parquet")
    import pyarrow as pa
    return pa


def table_of(path: str, source: str):
    """The pyarrow table of a Parquet file or a `save_to_disk` directory."""
    pa = _arrow()
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, "dataset_dict.json")):
            splits = sorted(d for d in os.listdir(path)
                            if os.path.isdir(os.path.join(path, d)))
            raise InvalidArgument(f"{source} is a DatasetDict: import one split's directory "
                                  f"({', '.join(os.path.join(source, s) for s in splits)})",
                                  reason="DATASET_DICT", splits=splits)
        files = _data_files(path, source)
        tables = []
        for name in files:
            try:
                with pa.memory_map(os.path.join(path, name)) as f:
                    try:
                        tables.append(pa.ipc.open_stream(f).read_all())
                    except pa.ArrowInvalid:
                        f.seek(0)
                        tables.append(pa.ipc.open_file(f).read_all())
            except (pa.ArrowInvalid, OSError) as exc:
                raise InvalidArgument(f"{os.path.join(source, name)}: not an Arrow file "
                                      f"({exc})", reason="NOT_THIS_FORMAT") from None
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    import pyarrow.parquet as pq
    try:
        return pq.read_table(path)
    except FileNotFoundError:
        raise NotFound(f"{source}: no such file", reason="FILE_NOT_FOUND") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise InvalidArgument(f"{source}: neither a Parquet file nor a directory saved with "
                              f"save_to_disk ({exc})", reason="NOT_THIS_FORMAT") from None


def _data_files(path: str, source: str) -> list[str]:
    state = os.path.join(path, "state.json")
    if os.path.exists(state):
        try:
            with open(state, "rb") as f:
                files = [d["filename"] for d in encoding.decode_json(f.read())["_data_files"]]
        except Exception:
            raise InvalidArgument(f"{source}/state.json does not list the data files "
                                  "(`_data_files`)", reason="NOT_THIS_FORMAT") from None
    else:
        files = sorted(n for n in os.listdir(path) if n.endswith(".arrow"))
    if not files:
        raise InvalidArgument(f"{source}: no Arrow data files: not a directory saved with "
                              "save_to_disk", reason="NOT_THIS_FORMAT")
    for name in files:
        if not isinstance(name, str) or os.path.basename(name) != name:
            raise InvalidArgument(f"{source}/state.json names a data file outside the "
                                  f"directory: {encoding.describe(name)}",
                                  reason="NOT_THIS_FORMAT")
    return files


def json_value(value: Any, where: str, column: str) -> Any:
    """A table value as JSON: times as ISO 8601 text, decimals as text; binary is refused."""
    if isinstance(value, dict):
        return {str(k): json_value(v, where, column) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v, where, column) for v in value]
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise refuse(where, f"column {column!r} holds binary data, which is no JSON value "
                     "(an image or audio column?)", reason="BINARY_COLUMN", column=column)
    return value


def _is_cas_layout(names: list[str]) -> bool:
    from cas.interop.exports import FIELDS
    return names == ["case_id", *FIELDS]


def items_of(table, source: str, mapping: Any) -> list[Item]:
    names = list(table.column_names)
    if _is_cas_layout(names):
        if mapping:
            raise InvalidArgument(f"{source} is a cas export: its columns are the case's "
                                  "fields, and take no --map", reason="INVALID_MAPPING")
        from cas.interop.exports import case_from_row
        items = []
        for i, row in enumerate(table.to_pylist()):
            where = f"{source} row {i}"
            try:
                case = case_from_row(row)
            except Exception as exc:
                raise refuse(where, f"not a case of a cas export ({exc})") from None
            items.append(Item(where, None, case=case))
        return items
    resolved = _mapping.resolve(_mapping.parse(mapping), names, source)
    return [_mapping.item({k: json_value(v, f"{source} row {i}", k) for k, v in row.items()},
                          resolved, f"{source} row {i}")
            for i, row in enumerate(table.to_pylist())]


def read_path(path: str, source: str, mapping: Any = None) -> list[Item]:
    return items_of(table_of(path, source), source, mapping)

