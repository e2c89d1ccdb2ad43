"""Dataset items: one example of another tool, read out of its file, and the case it becomes.

An item is what every reader yields: the example's input, its reference output, its own
metadata, the tool's ids and record fields (`record`), and the fields the tool's format does not
define (`extra`). `to_case` turns an item into a case dict, and `parts_of` takes a case back
apart for a writer; the two are inverse (docs/importers.md, "Datasets from other tools"):

- the tool's record (ids, source-trace ids, timestamps, and `extra`) goes to the case's
  `metadata.from.<tool>`, so a re-import of the same file gives the same case ids;
- a case exported by cas carries what the tool has no field for in `metadata.cas`
  (`run_id`, `started_at`, `steps`, `outcome`, `tenant`, `withheld`; `wrapped`: which of
  input and output had to be wrapped as `{"input": value}` / `{"output": value}` because the
  tool takes only objects there; `metadata`: the case's metadata whole, when it is no object
  or has a `cas` member of its own); an import takes it back out, so a round trip is exact.
"""

from __future__ import annotations

from typing import Any, Iterator, NamedTuple

from cas.errors import CasError, InvalidArgument
from cas.format import encoding
from cas.format.cases import EncodedCase, encode_case

FROM = "from"  # metadata.from.<tool>: the tool's own record of the item
CAS = "cas"    # metadata.cas: the case fields the tool has no place for
CAS_KEYS = ("run_id", "started_at", "steps", "outcome", "tenant", "withheld", "wrapped",
            "metadata")
_ABSENT = object()


class Item(NamedTuple):
    """One example as a reader found it. `where` names it in messages (`FILE line 3`,
    `FILE $[2]`); `record` the tool's fields kept under `metadata.from.<tool>`; `extra` the
    fields its format does not define (kept in the record as `extra`, named in the preview);
    `skip` a reason not to import it (e.g. `archived`), or None; `case` the whole case when
    the file is a cas export (`to_case` then only fills in or checks its tenant)."""

    where: str
    input: Any
    output: Any = None
    metadata: Any = None
    record: dict = {}
    extra: dict = {}
    skip: str | None = None
    case: dict | None = None  # a whole case, as a cas export holds it (tabular or JSON Lines)


class Prepared(NamedTuple):
    """An item made into a case: its place, the encoded case, and the fields that had no
    place to go (`extra`'s names)."""

    where: str
    case: EncodedCase
    unplaced: tuple[str, ...]


def refuse(where: str, message: str, **fields: Any) -> InvalidArgument:
    """A refusal naming the place in the file (`FILE line 3: ...`)."""
    return InvalidArgument(f"{where}: {message}", reason=fields.pop("reason", "INVALID_ITEM"),
                           where=where, **fields)


def split(value: dict, known: tuple[str, ...]) -> tuple[dict, dict]:
    """(the members of `value` named in `known`, the others), each in the file's order."""
    return ({k: v for k, v in value.items() if k in known},
            {k: v for k, v in value.items() if k not in known})


# -- reading files ----------------------------------------------------------------------------
def documents(data: bytes, source: str) -> tuple[str, Any]:
    """A file's JSON: `("json", value)` when the whole file is one JSON value, else
    `("jsonl", [(line number, value), ...])` (blank lines skipped). Strict JSON, nested at most
    MAX_DEPTH levels; a bad line is refused naming it and what is wrong."""
    if not data.strip():
        raise InvalidArgument(f"{source}: the file is empty", reason="EMPTY_FILE",
                              source=source)
    try:
        return "json", encoding.decode_json(data)
    except InvalidArgument as exc:
        whole = exc
    values = []
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            values.append((number, encoding.decode_json(line)))
        except CasError as exc:
            if not values:  # not JSON Lines either: one JSON document, malformed
                raise encoding.in_context(whole, source, source=source) from None
            raise encoding.in_context(exc, f"{source} line {number}", line=number,
                                      source=source) from None
    return "jsonl", values


def json_only(data: bytes, source: str, tool: str, instead: str) -> None:
    """Refuse a file that cannot be JSON at all (a CSV download, say), saying what is read
    instead, before any parse error could be mistaken for the reason."""
    start = data.lstrip()[:1]
    if start and start not in b"[{":
        first = data.lstrip().split(b"\n", 1)[0][:60].decode("utf-8", "replace")
        raise InvalidArgument(f"{source} is not JSON (it starts {first!r}): a {tool} dataset "
                              f"is read from {instead}", reason="NOT_THIS_FORMAT",
                              source=source)


def objects(data: bytes, source: str, wrappers: tuple[str, ...] = ()) -> Iterator[tuple]:
    """`(where, object)` for each example of a file: a JSON array of objects, a single
    object holding the array under one of `wrappers` (an API response or request: `data`,
    `events`...), one bare object, or JSON Lines of objects."""
    return rows(documents(data, source), source, wrappers)


def rows(document: tuple[str, Any], source: str,
         wrappers: tuple[str, ...] = ()) -> Iterator[tuple]:
    """`objects` of a file already read by `documents`."""
    kind, value = document
    if kind == "jsonl":
        found = [(f"{source} line {n}", v) for n, v in value]
    elif isinstance(value, list):
        found = [(f"{source} $[{i}]", v) for i, v in enumerate(value)]
    elif isinstance(value, dict) and any(isinstance(value.get(w), list) for w in wrappers):
        key = next(w for w in wrappers if isinstance(value.get(w), list))
        found = [(f"{source} $.{key}[{i}]", v) for i, v in enumerate(value[key])]
    else:
        found = [(f"{source} $", value)]
    for where, row in found:
        if not isinstance(row, dict):
            raise refuse(where, f"an example is a JSON object, not {encoding.describe(row)}")
        yield where, row


# -- an item to a case, and back ----------------------------------------------------------------
def _cas_part(metadata: Any) -> tuple[Any, dict]:
    """The item's metadata without a `cas` member that cas itself wrote, and that member."""
    if isinstance(metadata, dict) and isinstance(metadata.get(CAS), dict) and \
            set(metadata[CAS]) <= set(CAS_KEYS):
        part = metadata[CAS]
        if "metadata" in part:  # the case's metadata, written whole (`parts_of`)
            return part["metadata"], part
        return {k: v for k, v in metadata.items() if k != CAS}, part
    return metadata, {}


def _unwrap(value: Any, name: str, wrapped: Any) -> Any:
    if isinstance(wrapped, list) and name in wrapped and isinstance(value, dict) and \
            set(value) == {name}:
        return value[name]
    return value


def to_case(item: Item, tool: str, tenant: str | None) -> dict:
    """The case an item becomes (a dict for `cas.encode_case`).

    `metadata` is the item's own metadata (none or null: `{}`), with `from.<tool>` added:
    the item's `record` and, when there are any, its `extra` fields. Where that cannot be
    added (the metadata is no object, or already has a `from` that is no object or that has
    this tool), the case's metadata is `{"from": {<tool>: {...record, "metadata": <the
    item's metadata as it was>}}}` instead: nothing is overwritten. `tenant` is the one given,
    else the one cas wrote in `metadata.cas`; two that differ are refused."""
    if item.case is not None:
        recorded = item.case.get("tenant")
        _same_tenant(item.where, recorded, tenant)
        return {**item.case, "tenant": recorded if recorded is not None else tenant}
    metadata, part = _cas_part({} if item.metadata is None else item.metadata)
    record = dict(item.record)
    if item.extra:
        record["extra"] = dict(item.extra)
    if record:
        have = metadata.get(FROM, _ABSENT) if isinstance(metadata, dict) else _ABSENT
        mine = have.get(tool, _ABSENT) if isinstance(have, dict) else _ABSENT
        if isinstance(metadata, dict) and (have is _ABSENT or (
                isinstance(have, dict) and mine is _ABSENT)):
            metadata = {**metadata, FROM: {**({} if have is _ABSENT else have),
                                           tool: record}}
        elif isinstance(mine, dict) and "metadata" not in mine and \
                not set(mine).intersection(record):
            # the rest of the record, which the tool's upload had no field for (`parts_of`)
            metadata = {**metadata, FROM: {**have, tool: {**mine, **record}}}
        else:
            metadata = {FROM: {tool: {**record, "metadata": metadata}}}
    elif not isinstance(metadata, dict):
        metadata = {FROM: {tool: {"metadata": metadata}}}
    recorded = part.get("tenant")
    _same_tenant(item.where, recorded, tenant)
    wrapped = part.get("wrapped")
    case = {"input": _unwrap(item.input, "input", wrapped),
            "output": _unwrap(item.output, "output", wrapped),
            "metadata": metadata, "tenant": tenant if tenant is not None else recorded}
    for key in ("run_id", "started_at", "steps", "outcome", "withheld"):
        if key in part:
            case[key] = part[key]
    return case


def _same_tenant(where: str, recorded: Any, tenant: str | None) -> None:
    if tenant is not None and recorded is not None and recorded != tenant:
        raise refuse(where, f"the example was exported with tenant "
                     f"{encoding.describe(recorded)}, not {encoding.describe(tenant)} "
                     "(--tenant): import it with its own tenant, or without --tenant",
                     reason="TENANT_MISMATCH", recorded=recorded, given=tenant)


def prepare(items, tool: str, tenant: str | None) -> Iterator[Prepared]:
    """Each item not skipped, as an encoded case; a case cas refuses is refused naming the
    item's place."""
    for item in items:
        if item.skip is not None:
            continue
        try:
            encoded = encode_case(to_case(item, tool, tenant))
        except CasError as exc:
            if exc.message.startswith(item.where):
                raise
            raise encoding.in_context(exc, item.where, where=item.where) from None
        yield Prepared(item.where, encoded, tuple(item.extra))


class Parts(NamedTuple):
    """A case taken apart for a writer: `input`/`output` (wrapped as `{"input": v}` when the
    tool takes only objects there and the value is none), `metadata` (the case's, without
    the part of this tool's record that goes back in `record`, with `cas` added when the case
    has fields the tool has no place for), and `record`: the tool's fields recorded at
    import that its upload takes (empty for a case from elsewhere)."""

    input: Any
    output: Any
    metadata: Any
    record: dict


def parts_of(case: dict, tool: str, top: tuple[str, ...] = (), objects_only: bool = False,
             null_output: bool = True) -> Parts:
    """The inverse of `to_case`. `top`: the record fields the tool's upload takes (the
    others stay in `metadata.from.<tool>`, where the import finds them again).
    `objects_only`: the tool takes only objects as input and output (`null_output`: or null
    as output); other values are wrapped, and `metadata.cas.wrapped` says which. The case's
    person is never written (a file for another tool is no place for it). Metadata that is
    no object, or that has a `cas` member of its own, is written whole as
    `metadata.cas.metadata`."""
    metadata = case.get("metadata") or {}
    record: dict = {}
    have = metadata.get(FROM)
    if isinstance(have, dict) and isinstance(have.get(tool), dict):
        mine = have[tool]
        rest = {k: v for k, v in have.items() if k != tool}
        if "metadata" in mine and set(metadata) == {FROM} and not rest:
            if set(mine) - {"metadata"} <= set(top):  # the nested form: all of it goes back
                record = {k: v for k, v in mine.items() if k != "metadata"}
                metadata = mine["metadata"]
        else:
            record = {k: v for k, v in mine.items() if k in top}
            left = {k: v for k, v in mine.items() if k not in top}
            metadata = {k: v for k, v in metadata.items() if k != FROM}
            if left:
                rest[tool] = left
            if rest:
                metadata[FROM] = rest
    part: dict = {}
    for key in ("run_id", "started_at", "outcome", "tenant"):
        if case.get(key) is not None:
            part[key] = case[key]
    for key in ("steps", "withheld"):
        if case.get(key):
            part[key] = case[key]
    value_in, value_out = case.get("input"), case.get("output")
    if objects_only:
        wrapped = []
        if not isinstance(value_in, dict) or set(value_in) == {"input"}:
            value_in, wrapped = {"input": value_in}, wrapped + ["input"]
        if (value_out is not None or not null_output) and (
                not isinstance(value_out, dict) or set(value_out) == {"output"}):
            value_out, wrapped = {"output": value_out}, wrapped + ["output"]
        if wrapped:
            part["wrapped"] = wrapped
    if not isinstance(metadata, dict) or CAS in metadata:  # kept whole, inside cas's own
        metadata = {CAS: {**part, "metadata": metadata}}
    elif part:
        metadata = {**metadata, CAS: part}
    return Parts(value_in, value_out, metadata, record)
