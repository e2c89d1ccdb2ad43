"""Reads of a pinned version and its exports: JSON Lines, Parquet, Hugging Face, OpenAI chat,
and the upload shapes of LangSmith, Langfuse, Phoenix and Braintrust."""

from __future__ import annotations

import array
import contextlib
import functools
import itertools
import os
import re
import shutil
import tempfile
from typing import Any, Callable, Iterator, NamedTuple, Union

import msgspec

from cas.errors import AlreadyExists, DataLoss, FailedPrecondition, InvalidArgument
from cas.format import encoding
from cas.format.records import Case
from cas.format.version_names import Pin, as_pin
from cas.storage.backends.local import fsync_dir

TOOLS = ("langsmith", "langfuse", "phoenix", "braintrust")  # cas/interop/datasets/
FORMATS = ("jsonl", "parquet", "hf", "openai-chat") + TOOLS
EXPORT_FORMAT = 1  # of the JSON Lines header and of the metadata of parquet and hf exports
PAGE = 500  # ids per page read (the most repo.items gives)
# What an export reads of a repository: anything that has these is read as one (duck-typed).
_READS = ("version", "resolve_pin", "items", "objects_bytes")
ROW_GROUP = 8192  # rows per Arrow record batch at most (parquet, hf): bounds the memory held
BATCH_BYTES = 1 << 20  # case bytes per record batch at most (built holding about 3x this)
GROUP_BYTES = 3 << 20  # case bytes of the batches a parquet row group gathers (see export_parquet)
DICTIONARY_COLUMNS = ("tenant", "person", "outcome")  # parquet columns whose values repeat
# The case fields of the tabular exports, in column order after `case_id`. `kind` and
# `format` are not columns: every case of format 1 has them alike (the metadata names it).
FIELDS = ("run_id", "started_at", "input", "output", "steps", "outcome", "metadata",
          "tenant", "person", "withheld")
TEXT_FIELDS = ("run_id", "started_at", "tenant", "person")  # string or null
JSON_FIELDS = ("input", "output", "steps", "outcome", "metadata")  # canonical JSON text
EXTRAS = {"pandas": ("pandas", "pandas"), "parquet": ("pyarrow", "parquet"),
          "hf": ("datasets", "hf")}

_CASE = msgspec.json.Decoder(Case)
_JSON = msgspec.json.Decoder()


class ExportResult(NamedTuple):
    """What an export wrote: `cases` exported, cases `skipped` and conversations `truncated`
    (openai-chat only), and the `path` written (None for a stream)."""

    format: str
    pin: str
    cases: int
    skipped: int = 0
    truncated: int = 0
    path: str | None = None


# -- reads of a pinned version ---------------------------------------------------------------
def resolve(repo, pin: Any) -> tuple[Pin, Any]:
    """The checked pin and the first page of its ids.

    `pin` is a `cas.Pin`, its string, or a `(dataset, version)` pair (pinned as it is now).
    The pin is verified (`repo.resolve_pin`: PIN_MISMATCH, NotFound) and the first page is
    read at once, so a retired version is refused here, as `repo.items` refuses it, before
    anything is yielded or written."""
    if not all(callable(getattr(repo, m, None)) for m in _READS):
        raise InvalidArgument(f"an export reads a cas.Repository, not {encoding.describe(repo)}")
    if isinstance(pin, tuple) and len(pin) == 2:
        record = repo.version(*pin)
        pin = Pin(record.dataset, record.number, record.content_digest)
    p = as_pin(pin)
    repo.resolve_pin(p)
    return p, repo.items(p.dataset, p.version, after=None, limit=PAGE)


def _pages(repo, p: Pin, first) -> Iterator[list[str]]:
    page = first
    while True:
        yield page.items
        if page.next_cursor is None:
            return
        page = repo.items(p.dataset, p.version, after=page.next_cursor, limit=PAGE)


def _encoded(repo, p: Pin, first) -> Iterator[tuple[str, bytes]]:
    """The verified canonical bytes of each case of the pages, read a page at a time
    (`objects_bytes`: the tree page has just answered membership)."""
    for ids in _pages(repo, p, first):
        for case_id, (kind, data) in zip(ids, repo.objects_bytes(ids)):
            if kind != "case":
                raise DataLoss(f"object {case_id} named by a version is a {kind}, not a case",
                               reason="NOT_A_CASE", case_id=case_id)
            yield case_id, data


def case_bytes(repo, pin: Any) -> Iterator[tuple[str, bytes]]:
    """`(case_id, canonical bytes)` of every case of a pinned version, in id order, one page
    of ids held at a time. Checks (see `resolve`) happen at the call, not at the first item."""
    p, first = resolve(repo, pin)
    return _encoded(repo, p, first)


def cases(repo, pin: Any) -> Iterator[tuple[str, Case]]:
    """`(case_id, cas.Case)` of every case of a pinned version, in id order, streaming."""
    return ((i, _CASE.decode(data)) for i, data in case_bytes(repo, pin))


def _rows(repo, pin: Any) -> tuple[Pin, Iterator[tuple[str, dict]]]:
    p, first = resolve(repo, pin)
    return p, ((i, _JSON.decode(data)) for i, data in _encoded(repo, p, first))


def need(extra: str):
    """Import the module an optional extra provides, or refuse naming the install line."""
    module, name = EXTRAS[extra]
    try:
        return __import__(module)
    except ImportError:
        raise FailedPrecondition(f"this needs {module}, from the `{name}` extra: pip install "
                                 f"'.[{name}]' in the cas checkout",
                                 reason="EXTRA_REQUIRED", extra=name) from None


def to_pandas(repo, pin: Any):
    """A pandas DataFrame of a pinned version: `case_id`, then one column per case field
    (FIELDS) of dtype object holding the values as Python objects, exactly (a JSON object is
    a dict, null is None: never NaN), in id order; `frame.attrs["cas.pin"]` is the pin."""
    pd = need("pandas")
    p, rows = _rows(repo, pin)
    columns: dict[str, list] = {c: [] for c in ("case_id",) + FIELDS}
    for case_id, row in rows:
        columns["case_id"].append(case_id)
        for f in FIELDS:
            columns[f].append(row[f])
    frame = pd.DataFrame({c: pd.Series(v, dtype=object) for c, v in columns.items()})
    frame.attrs["cas.pin"] = str(p)
    return frame


# -- the tabular layout (parquet, hf) ----------------------------------------------------------
class _Columns(msgspec.Struct):
    """A case's fields as the tabular exports hold them: a JSON-valued field is the raw slice
    of the case's canonical bytes (itself canonical JSON), never decoded and encoded again."""

    run_id: Union[str, None]
    started_at: Union[str, None]
    input: msgspec.Raw
    output: msgspec.Raw
    steps: msgspec.Raw
    outcome: msgspec.Raw
    metadata: msgspec.Raw
    tenant: Union[str, None]
    person: Union[str, None]
    withheld: list[str]


_COLUMNS = msgspec.json.Decoder(_Columns)


def table_row(case_id: str, data: bytes) -> dict[str, Any]:
    """One row of the tabular exports from a case's canonical bytes: `case_id`, then FIELDS,
    the JSON-valued ones as canonical JSON text."""
    c = _COLUMNS.decode(data)
    return {"case_id": case_id, "run_id": c.run_id, "started_at": c.started_at,
            "input": bytes(c.input).decode(), "output": bytes(c.output).decode(),
            "steps": bytes(c.steps).decode(), "outcome": bytes(c.outcome).decode(),
            "metadata": bytes(c.metadata).decode(), "tenant": c.tenant, "person": c.person,
            "withheld": c.withheld}


def case_from_row(row: dict[str, Any]) -> dict[str, Any]:
    """The case dict a tabular row holds (`cas.encode_case` of it gives back `case_id`)."""
    return {f: encoding.decode_json(row[f]) if f in JSON_FIELDS else
            (list(row[f]) if f == "withheld" else row[f]) for f in FIELDS}


def header(pin: Pin) -> dict[str, Any]:
    """What every export records about its source: its format and the pin."""
    return {"format": EXPORT_FORMAT, "pin": str(pin)}


# -- writing files atomically ---------------------------------------------------------------
@contextlib.contextmanager
def atomic_file(path: str) -> Iterator[Any]:
    """A binary file that appears at `path` only whole: written to a hidden temporary file
    beside it, fsynced, then renamed over `path`. A refusal or crash leaves nothing at `path`
    (after a crash, at most the hidden `.NAME.*.tmp` file, which the next write of `path`
    removes)."""
    path = os.fspath(path)
    where, name = os.path.split(os.path.abspath(path))
    remove_leftovers(where, name)
    tmp = os.path.join(where, f".{name}.{os.urandom(4).hex()}.tmp")
    try:
        with open(tmp, "xb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
    fsync_dir(where)  # the rename itself is durable only once the directory is


def remove_leftovers(where: str, name: str) -> list[str]:
    """Remove the hidden temporary files (`.NAME.<8 hex>.tmp`) that writes of `where/name`
    killed before their rename left: each is a partial copy of an export (unredacted, for a
    suite file), which nothing else would ever delete. Only that path's own pattern is
    touched. Returns the paths removed."""
    own = re.compile(re.escape(f".{name}.") + r"[0-9a-f]{8}\.tmp\Z")
    try:
        names = os.listdir(where)
    except OSError:  # no directory yet: open() will say so
        return []
    gone = []
    for found in names:
        if own.match(found):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(where, found))
                gone.append(os.path.join(where, found))
    return gone


def _write_to(out: Any, write: Callable[[Any], ExportResult]) -> ExportResult:
    """Run `write` on a binary stream `out`, or on an atomic file at the path `out`."""
    if hasattr(out, "write"):
        return write(out)
    if not isinstance(out, (str, os.PathLike)):
        raise InvalidArgument(f"out is a path or a binary stream, not {encoding.describe(out)}")
    with atomic_file(out) as f:
        result = write(f)
    return result._replace(path=os.path.abspath(out))


def _required_path(out: Any, fmt: str) -> str:
    if out is None or hasattr(out, "write") or not isinstance(out, (str, os.PathLike)):
        raise InvalidArgument(f"a {fmt} export is written to a file, not a stream: name its "
                              "path (cas export -o PATH; out= in Python)",
                              reason="OUTPUT_REQUIRED", format=fmt)
    return os.fspath(out)


# -- JSON Lines -------------------------------------------------------------------------------
def export_jsonl(repo, pin: Any, out: Any) -> ExportResult:
    """The header line `{"format":1,"pin":"..."}`, then `{"case":{...},"case_id":"b3:..."}`
    per case in id order (canonical JSON: keys sorted, no spaces; the case as its canonical
    bytes). `out` is a binary stream or a path (written atomically)."""
    p, first = resolve(repo, pin)

    def write(f) -> ExportResult:
        f.write(encoding.encode(header(p)) + b"\n")
        n = 0
        for case_id, data in _encoded(repo, p, first):
            f.write(b'{"case":%s,"case_id":"%s"}\n' % (data, case_id.encode()))
            n += 1
        return ExportResult("jsonl", str(p), n)
    return _write_to(out, write)


def read_jsonl(lines) -> tuple[dict, Iterator[tuple[str, dict]]]:
    """An export read back: its header and `(case_id, case dict)` per line."""
    it = (line for line in lines if line.strip())  # blank lines are no records
    head = encoding.decode_json(next(it))
    if not isinstance(head, dict) or head.get("format") != EXPORT_FORMAT or "pin" not in head:
        raise InvalidArgument("not a cas JSON Lines export: the first line must be "
                              '{"format":1,"pin":"..."}', reason="NOT_THIS_FORMAT")
    return head, ((d["case_id"], d["case"]) for d in map(encoding.decode_json, it))


# -- Parquet ----------------------------------------------------------------------------------
def arrow_schema(pa, p: Pin):
    """The parquet / hf schema: `case_id`, FIELDS (JSON ones as text), the pin as metadata."""
    types = {f: pa.string() for f in FIELDS}
    types["withheld"] = pa.list_(pa.string())
    fields = [pa.field("case_id", pa.string(), nullable=False)]
    fields += [pa.field(f, types[f], nullable=f in TEXT_FIELDS) for f in FIELDS]
    meta = {"cas.pin": str(p), "cas.format": str(EXPORT_FORMAT), "cas.case_format": "1"}
    return pa.schema(fields, metadata=meta)


def export_parquet(repo, pin: Any, out: Any) -> ExportResult:
    """A Parquet file at the path `out` (atomically): schema `arrow_schema`, in row groups
    that each gather the record batches (`_record_batches`) of GROUP_BYTES of case bytes,
    so memory does not grow with the version. The columns are built straight from the
    cases' canonical bytes (`_arrow_batch`), never as Python rows."""
    need("parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq
    path = _required_path(out, "parquet")
    p, first = resolve(repo, pin)
    schema = arrow_schema(pa, p)

    def write(f) -> ExportResult:
        n = 0
        # Dictionaries only where values repeat; statistics only on the short columns (the
        # JSON ones are large, unique text: their min/max would only be truncated copies).
        with pq.ParquetWriter(f, schema, use_dictionary=list(DICTIONARY_COLUMNS),
                              write_statistics=["case_id", *TEXT_FIELDS]) as writer:
            # A row group per record batch (1,600 at 1M cases) kept the writer's metadata
            # growing with the version, about 16 KB a group until the footer is written
            # (25 MiB, and a 13 MiB spike at the close, at 1M). A group of three batches
            # cuts that threefold for about 12 MiB more while a group is written.
            group: list[Any] = []
            size = 0
            for record_batch, batch_size in _record_batches(pa, schema,
                                                            _encoded(repo, p, first)):
                n += record_batch.num_rows
                group.append(record_batch)
                size += batch_size
                del record_batch
                if size >= GROUP_BYTES:
                    _write_group(pa, writer, group)
                    size = 0
            if group:
                _write_group(pa, writer, group)
        return ExportResult("parquet", str(p), n)
    return _write_to(path, write)


def _write_group(pa, writer, group: list[Any]) -> None:
    """Write record batches as one row group (`write_batch` makes a group of each), and
    let go of them."""
    table = pa.Table.from_batches(group)
    group.clear()
    writer.write_table(table, row_group_size=table.num_rows)
    del table
    # pyarrow's allocator (mimalloc) keeps the pages the encoder freed; handed back after
    # each group (about 0.1 ms) they cost 4 to 5 MiB less peak RSS.
    pa.default_memory_pool().release_unused()


def _record_batches(pa, schema,
                    pairs: Iterator[tuple[str, bytes]]) -> Iterator[tuple[Any, int]]:
    """Arrow record batches of ROW_GROUP cases or BATCH_BYTES of case bytes, the first met,
    each with its case bytes; the Python bytes of a batch are let go before it is yielded."""
    batch: list[tuple[str, bytes]] = []
    size = 0
    for pair in pairs:
        batch.append(pair)
        size += len(pair[1])
        if len(batch) == ROW_GROUP or size >= BATCH_BYTES:
            record_batch = _arrow_batch(pa, schema, batch)
            batch = []
            yield record_batch, size
            size = 0
    if batch:
        record_batch = _arrow_batch(pa, schema, batch)
        del batch
        yield record_batch, size


def _arrow_batch(pa, schema, batch: list[tuple[str, bytes]]):
    """An arrow record batch of `arrow_schema` from cases' canonical bytes: each string column
    is one buffer of UTF-8 (the JSON fields their raw canonical slices) and its offsets, made
    without Python str objects (and without `pa.array`, which imports pandas: 50 MB)."""
    columns: list[list[bytes | None]] = [[] for _ in range(len(FIELDS))]
    withheld: list[list[bytes]] = []
    for case_id, data in batch:
        c = _COLUMNS.decode(data)
        values = (case_id.encode(), _utf8(c.run_id), _utf8(c.started_at), bytes(c.input),
                  bytes(c.output), bytes(c.steps), bytes(c.outcome), bytes(c.metadata),
                  _utf8(c.tenant), _utf8(c.person))
        for column, value in zip(columns, values):
            column.append(value)
        withheld.append([w.encode() for w in c.withheld])
    arrays = [_string_array(pa, column) for column in columns]
    flat = [w for ws in withheld for w in ws]
    arrays.append(pa.ListArray.from_arrays(
        _offsets_array(pa, itertools.accumulate((len(ws) for ws in withheld), initial=0),
                       len(withheld)),
        _string_array(pa, flat)))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _utf8(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


def _string_array(pa, values: list[bytes | None]):
    n = len(values)
    offsets = array.array("i", [0])
    total, valid, nulls = 0, 0, 0
    for i, v in enumerate(values):
        if v is None:
            nulls += 1
        else:
            total += len(v)
            valid |= 1 << i
            if total >= 1 << 31:  # (one case of 2 GiB: a batch closes at BATCH_BYTES)
                raise InvalidArgument("a parquet string column holds at most 2 GiB a row "
                                      "group; a case's field is larger", reason="TOO_LARGE")
        offsets.append(total)
    bitmap = pa.py_buffer(valid.to_bytes((n + 7) // 8, "little")) if nulls else None
    data = pa.py_buffer(b"".join(v for v in values if v is not None))
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), data, bitmap, nulls)


def _offsets_array(pa, offsets: Iterator[int], n: int):
    return pa.Array.from_buffers(pa.int32(), n + 1,
                                 [None, pa.py_buffer(array.array("i", offsets))])


# -- Hugging Face -------------------------------------------------------------------------------
def export_hf(repo, pin: Any, out: Any) -> ExportResult:
    """A Hugging Face dataset saved with `save_to_disk` in the new directory `out`: the
    tabular columns; `info.description` is the header JSON `{"format":1,"pin":"..."}`.
    Written as an Arrow stream in a temporary directory (the record batches of
    `export_parquet`) and mapped by `Dataset.from_file`, so memory stays flat."""
    need("hf")
    import datasets
    import pyarrow as pa  # a dependency of datasets
    path = os.path.abspath(_required_path(out, "hf"))
    if os.path.lexists(path):
        raise AlreadyExists(f"{path} exists; an hf export makes a new directory",
                            reason="OUTPUT_EXISTS", path=path)
    p, first = resolve(repo, pin)
    schema = arrow_schema(pa, p)
    features = datasets.Features.from_arrow_schema(schema)
    info = datasets.DatasetInfo(description=encoding.encode(header(p)).decode(),
                                features=features)
    work = tempfile.mkdtemp(prefix=".cas-hf-", dir=os.path.dirname(path))
    counted = [0]
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # the CLI's stderr is for errors (and its own progress)
    try:
        # The rows go to an Arrow stream file in `work` (the cache format of datasets) in the
        # record batches of the parquet export, then `Dataset.from_file` maps it: no Python
        # row per case, and the same flat memory as parquet.
        arrow = os.path.join(work, "data.arrow")
        with pa.OSFile(arrow, "wb") as sink, pa.ipc.new_stream(sink, schema) as stream:
            for record_batch, _ in _record_batches(pa, schema, _encoded(repo, p, first)):
                counted[0] += record_batch.num_rows
                stream.write_batch(record_batch)
                del record_batch
        ds = datasets.Dataset.from_file(arrow, info=info)
        ds.save_to_disk(os.path.join(work, "out"))
        del ds
        os.rename(os.path.join(work, "out"), path)
        fsync_dir(os.path.dirname(path))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if bars:
            datasets.enable_progress_bars()
    return ExportResult("hf", str(p), counted[0], path=path)


# -- OpenAI chat fine-tuning -------------------------------------------------------------------
def _text(value: Any) -> str:
    """A message content: a string as it is, any other JSON value as canonical JSON text."""
    return value if isinstance(value, str) else encoding.encode(value).decode()


def _message(step: dict) -> dict:
    content = step.get("content", "")
    msg = {"role": step["role"],
           "content": content if isinstance(content, (str, list)) else _text(content)}
    if isinstance(step.get("name"), str):
        msg["name"] = step["name"]
    return msg


def _call_id(step: dict, index: int) -> str:
    given = step.get("id", step.get("tool_call_id"))
    return given if isinstance(given, str) and given else f"call_{index}"


def openai_chat(case: dict) -> tuple[dict | None, str]:
    """One case as an OpenAI chat fine-tuning example and what happened to it: `complete`,
    `truncated` (it ends before the first tool call whose result was not recorded) or
    `skipped` (no message is left, or no assistant turn)."""
    messages: list[dict] = []
    tools: dict[str, None] = {}
    status = "complete"
    for index, step in enumerate(case.get("steps", ())):
        if step.get("type") == "message" and isinstance(step.get("role"), str):
            messages.append(_message(step))
        elif step.get("type") == "tool_call" and isinstance(step.get("tool_name"), str):
            if "result" not in step and "error" not in step:
                status = "truncated"  # never invent an answer the run did not record
                break
            call_id, name = _call_id(step, index), step["tool_name"]
            tools.setdefault(name)
            messages.append({"role": "assistant", "tool_calls": [{
                "id": call_id, "type": "function",
                "function": {"name": name, "arguments": _text(step.get("arguments", {}))}}]})
            answer = step["result"] if "result" in step else step["error"]
            messages.append({"role": "tool", "tool_call_id": call_id, "content": _text(answer)})
    if not any(m["role"] == "assistant" for m in messages):
        return None, "skipped"
    example: dict[str, Any] = {"messages": messages}
    recorded = case.get("metadata", {}).get("tools")
    if isinstance(recorded, list) and recorded and all(isinstance(t, dict) for t in recorded):
        example["tools"] = recorded
    elif tools:
        example["tools"] = [{"type": "function", "function": {"name": n}} for n in tools]
    return example, status


def export_openai_chat(repo, pin: Any, out: Any) -> ExportResult:
    """OpenAI chat fine-tuning JSON Lines: one `openai_chat` example per case, in id order,
    no header (the format has none). `out` is a binary stream or a path (atomically)."""
    p, rows = _rows(repo, pin)

    def write(f) -> ExportResult:
        counts = {"complete": 0, "truncated": 0, "skipped": 0}
        for _, case in rows:
            example, status = openai_chat(case)
            counts[status] += 1
            if example is not None:
                f.write(encoding.encode(example) + b"\n")
        return ExportResult("openai-chat", str(p), counts["complete"] + counts["truncated"],
                            counts["skipped"], counts["truncated"])
    return _write_to(out, write)


# -- the tools teams already use (cas/interop/datasets/) -------------------------------------
def export_tool(repo, pin: Any, out: Any, tool: str) -> ExportResult:
    """A version in the shape `tool` uploads (one of TOOLS: docs/export.md), its ids kept:
    each tool's module in cas/interop/datasets/ writes it. Every case renders before the
    file appears (`out`: a binary stream or a path, written atomically)."""
    import importlib
    module = importlib.import_module(f"cas.interop.datasets.{tool}")
    p, rows = _rows(repo, pin)

    def write(f) -> ExportResult:
        return ExportResult(tool, str(p), module.write(rows, f, p.dataset))
    if hasattr(out, "write"):  # a stream gets the file only once every case has rendered
        import io
        buffer = io.BytesIO()
        result = write(buffer)
        out.write(buffer.getvalue())
        return result
    return _write_to(out, write)


EXPORTERS = {"jsonl": export_jsonl, "parquet": export_parquet, "hf": export_hf,
             "openai-chat": export_openai_chat,
             **{t: functools.partial(export_tool, tool=t) for t in TOOLS}}


def export(repo, pin: Any, to: str, out: Any = None) -> ExportResult:
    """Export a pinned version `to` one of FORMATS; an unknown format is refused naming them."""
    if to not in EXPORTERS:
        raise InvalidArgument(f"unknown export format {encoding.describe(to)}; accepted: "
                              + ", ".join(FORMATS), reason="UNKNOWN_FORMAT",
                              accepted=list(FORMATS))
    if to in ("parquet", "hf"):
        _required_path(out, to)
    return EXPORTERS[to](repo, pin, out)
