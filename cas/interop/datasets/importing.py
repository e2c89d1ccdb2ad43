"""A dataset import: another tool's export read whole, then its items sealed as the cases of
a `direct` dataset in one version (or nothing, when the head already holds them all)."""

from __future__ import annotations

import importlib
import os
from typing import Any, NamedTuple

from cas.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from cas.format import encoding
from cas.interop.datasets.items import Item, Prepared, prepare

# Each tool's module, imported when first used.
TOOLS = {"langsmith": "langsmith", "langfuse": "langfuse", "phoenix": "phoenix",
         "braintrust": "braintrust", "hf": "hf", "jsonl": "jsonl"}
MAPPED = ("hf", "jsonl")  # the sources that take a column mapping
MAX_FILE = 1 << 30  # a JSON export larger than this is refused before it is read
PAGE = 500


class DatasetImport(NamedTuple):
    """What an import read and did. `items`: examples read; `skipped`: `{reason: count}`
    (e.g. `archived`); `cases`: distinct cases (`duplicates`: items that gave a case
    already given); `new`: cases the dataset's head did not hold; `unplaced`: every field
    that had no place in a case, `{field: {"count", "first"}}` (`first`: where it was first
    seen), kept in `metadata.from.<tool>.extra`; `created`: the dataset was (or, in a dry
    run, would be) created; `status`: `sealed`, `unchanged` or `dry-run`; `version`: the
    version sealed (None unless sealed); `base`: the head it was built on (0: none)."""

    dataset: str
    source: str
    path: str
    items: int
    skipped: dict
    cases: int
    duplicates: int
    new: int
    unplaced: dict
    created: bool
    status: str
    base: int
    version: Any = None
    case_ids: list = []


def module_of(source: str):
    """The module that reads `source` (one of TOOLS)."""
    if source not in TOOLS:
        raise InvalidArgument(f"unknown dataset source {encoding.describe(source)}; accepted: "
                              + ", ".join(TOOLS), reason="UNKNOWN_FORMAT",
                              accepted=list(TOOLS))
    return importlib.import_module(f".{TOOLS[source]}", __package__)


def read_items(source: str, path: Any, mapping: Any = None) -> list[Item]:
    """The items of an export file (or, for `hf`, a directory). Pure: nothing is stored."""
    module = module_of(source)
    if mapping and source not in MAPPED:
        raise InvalidArgument(f"--map applies to {' and '.join(MAPPED)} only: a {source} "
                              "export names its own fields", reason="INVALID_MAPPING")
    path = os.fspath(path)
    if not os.path.exists(path):
        raise NotFound(f"{path}: no such file or directory", reason="FILE_NOT_FOUND",
                       path=path)
    if hasattr(module, "read_path"):
        return module.read_path(path, path, mapping)
    if os.path.isdir(path):
        raise InvalidArgument(f"{path} is a directory; a {source} export is one file",
                              reason="NOT_THIS_FORMAT", path=path)
    if os.path.getsize(path) > MAX_FILE:
        raise InvalidArgument(f"{path} is larger than {MAX_FILE >> 20} MiB",
                              reason="FILE_TOO_LARGE", path=path)
    with open(path, "rb") as f:
        data = f.read()
    return module.read(data, path, mapping) if source in MAPPED else module.read(data, path)


def prepared(source: str, path: Any, tenant: str | None = None,
             mapping: Any = None) -> tuple[list[Item], list[Prepared]]:
    """The items of an export and the cases they become, every one checked: a refusal
    names the file and the line (or item) and nothing is stored."""
    if tenant is not None:  # as a run's tenant: 1 to 512 printable characters
        problem = "is empty" if tenant == "" else (
            "is not a string" if not isinstance(tenant, str) else
            encoding.text_problem(tenant, 512))
        if problem is not None:
            raise InvalidArgument(f"the tenant must be 1 to 512 printable characters; it "
                                  f"{problem}", reason="INVALID_TENANT")
    items = read_items(source, path, mapping)
    return items, list(prepare(items, source, tenant))


def _head_ids(repo, name: str, head: int) -> set[str]:
    ids: set[str] = set()
    after = None
    while True:
        page = repo.items(name, head, after=after, limit=PAGE)
        ids.update(page.items)
        if page.next_cursor is None:
            return ids
        after = page.next_cursor


def import_dataset(repo, source: str, path: Any, dataset: str, *, tenant: str | None = None,
                   mapping: Any = None, dry_run: bool = False, message: str | None = None,
                   author: str | None = None) -> DatasetImport:
    """Import another tool's dataset export into `dataset` (created `direct` if it does not
    exist) as one sealed version: its head plus every case of the file. All or nothing: the
    whole file is read and checked first, and a refusal changes nothing. When the head holds
    every case already, nothing is sealed (`status` `unchanged`); `dry_run` reads and
    reports without writing."""
    items, cases = prepared(source, path, tenant, mapping)
    skipped: dict[str, int] = {}
    for item in items:
        if item.skip is not None:
            skipped[item.skip] = skipped.get(item.skip, 0) + 1
    unplaced: dict[str, dict] = {}
    for p in cases:
        for field in p.unplaced:
            seen = unplaced.setdefault(field, {"count": 0, "first": p.where})
            seen["count"] += 1
    distinct = {p.case.case_id: p.case for p in cases}
    ids = sorted(distinct)
    created = False
    try:
        rule = repo.dataset(dataset).admits
    except NotFound as exc:
        if exc.reason == "DATASET_DELETED":
            raise
        rule, created = "direct", True
    if rule != "direct":
        raise FailedPrecondition(
            f"dataset {dataset!r} admits only reviewed runs; an import adds cases directly, "
            "so it needs a dataset created with --admission direct (or a new name)",
            reason="ADMISSION_REVIEWED_ONLY", dataset=dataset, admission=rule)
    head = 0 if created else repo.head(dataset)
    try:
        have = _head_ids(repo, dataset, head) if head else set()
    except FailedPrecondition as exc:
        if exc.reason != "EVALUATION_DATASET_VERSION_RETIRED":
            raise
        have = set()  # a retired head cannot be listed: every case is sealed anew on it
    new = [i for i in ids if i not in have]
    result = DatasetImport(dataset, source, os.path.abspath(os.fspath(path)), len(items),
                           skipped, len(distinct), len(cases) - len(distinct), len(new),
                           unplaced, created, "dry-run" if dry_run else "unchanged", head,
                           None, ids)
    if not distinct and not head:
        raise InvalidArgument(f"{os.fspath(path)}: no example to import"
                              + (f" ({', '.join(f'{n} {r}' for r, n in skipped.items())})"
                                 if skipped else ""), reason="NO_EXAMPLES")
    if dry_run or (head and not new):
        return result
    if created:
        try:
            repo.create_dataset(dataset, description=f"imported from {source}",
                                admission="direct")
        except AlreadyExists as exc:
            if exc.reason == "DATASET_DELETED":
                raise
            return import_dataset(repo, source, path, dataset, tenant=tenant,
                                  mapping=mapping, message=message, author=author)
    text = message if message is not None else \
        f"import from {source}: {os.path.basename(os.path.abspath(os.fspath(path)))}"
    record = repo.commit(dataset, base=head or None, add=[distinct[i] for i in new],
                         message=text, author=author)  # a direct commit, as the format knows it
    return result._replace(status="sealed", version=record)
