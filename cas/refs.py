"""The refs log: per dataset, append-only version records and metadata revisions, numbered 1, 2, 3…

A number is claimed by creating its key if absent, so two writers never both get N. Listing is
only a hint for finding the head; the head is confirmed by probing, so a stale listing can cost
a retry but never a gap or a lost version.
"""

from __future__ import annotations

import re

from .errors import InvalidArgument, NotFound
from .objects import DatasetRecord, VersionRecord, format_record_file, parse_record_file

DATASETS = "datasets/"
_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}\Z")


def check_dataset_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name) or ".." in name:
        raise InvalidArgument(
            f"invalid dataset name {name!r}: use 1-128 characters from a-z, 0-9, '.', '_', '-', "
            "starting with a letter or digit", name=str(name))
    return name


def version_key(dataset: str, number: int) -> str:
    return f"{DATASETS}{dataset}/versions/{number:010d}"


def meta_key(dataset: str, revision: int) -> str:
    return f"{DATASETS}{dataset}/meta/{revision:010d}"


class RefsLog:
    def __init__(self, backend) -> None:
        self.backend = backend

    # -- versions -------------------------------------------------------------------------
    def read_version(self, dataset: str, number: int) -> VersionRecord:
        key = version_key(dataset, number)
        try:
            data = self.backend.get(key)
        except NotFound:
            raise NotFound(f"dataset {dataset!r} has no version {number}",
                           dataset=dataset, version=number) from None
        return parse_record_file(data, VersionRecord, key)

    def head(self, dataset: str) -> int:
        """The highest sealed version number (0 if none), for the write path only."""
        return self._head(f"{DATASETS}{dataset}/versions/", lambda n: version_key(dataset, n))

    def append_version(self, record: VersionRecord) -> bool:
        """Claim `record.number`; False if another writer already holds it."""
        return self.backend.put_if_absent(version_key(record.dataset, record.number),
                                          format_record_file(record))

    def version_numbers(self, dataset: str) -> list[int]:
        return _numbers(self.backend.list(f"{DATASETS}{dataset}/versions/"))

    # -- dataset metadata -----------------------------------------------------------------
    def read_meta(self, dataset: str, revision: int) -> DatasetRecord:
        key = meta_key(dataset, revision)
        try:
            data = self.backend.get(key)
        except NotFound:
            raise NotFound(f"no dataset named {dataset!r}" if revision == 1 else
                           f"dataset {dataset!r} has no metadata revision {revision}",
                           dataset=dataset) from None
        return parse_record_file(data, DatasetRecord, key)

    def meta_head(self, dataset: str) -> int:
        return self._head(f"{DATASETS}{dataset}/meta/", lambda n: meta_key(dataset, n))

    def append_meta(self, record: DatasetRecord) -> bool:
        return self.backend.put_if_absent(meta_key(record.name, record.revision),
                                          format_record_file(record))

    def dataset_exists(self, dataset: str) -> bool:
        return self.backend.exists(meta_key(dataset, 1))

    def dataset_names(self) -> list[str]:
        suffix = f"/meta/{1:010d}"
        return sorted(k[len(DATASETS):-len(suffix)] for k in self.backend.list(DATASETS)
                      if k.endswith(suffix))

    def _head(self, prefix: str, key_of) -> int:
        numbers = _numbers(self.backend.list(prefix))
        n = numbers[-1] if numbers else 0
        while self.backend.exists(key_of(n + 1)):  # the listing may lag a fresh append
            n += 1
        return n


def read_log_from(backend, key_of, type_, after: int):
    """(n, record) for the records numbered after+1, after+2, ... up to the first missing one:
    how the append-only logs (run imports, review batches) are read incrementally."""
    n = after
    while True:
        key = key_of(n + 1)
        try:
            data = backend.get(key)
        except NotFound:
            return
        n += 1
        yield n, parse_record_file(data, type_, key)


def _numbers(keys) -> list[int]:
    out = []
    for k in keys:
        tail = k.rsplit("/", 1)[-1]
        if tail.isdigit() and len(tail) == 10:
            out.append(int(tail))
    return sorted(out)
