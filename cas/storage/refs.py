"""The refs log: per dataset, append-only version records and metadata revisions, numbered 1, 2, 3…

A number is claimed by creating its key if absent, so two writers never both get N. Listing is
only a hint for finding the head; the head is confirmed by probing, so a stale listing can cost
a retry but never a gap or a lost version.
"""

from __future__ import annotations

from cas.errors import NotFound
from cas.format.keys import (DATASETS, citation_key_of, deleted_key, meta_key, numbers,
                             parse_meta_key, parse_tombstone_key, retired_key, tombstone_key,
                             version_key)
from cas.format.records import (DatasetRecord, DatasetTombstone, VersionRecord, VersionRetirement,
                                VersionTombstone, format_record_file, parse_record_file)

LISTED_VERSIONS_KEPT = 1 << 16  # version records a log remembers for read_listed_version


class RefsLog:
    def __init__(self, backend) -> None:
        self.backend = backend
        self._listed: dict[tuple[str, int], VersionRecord] = {}

    # -- versions -------------------------------------------------------------------------
    def read_version(self, dataset: str, number: int) -> VersionRecord:
        key = version_key(dataset, number)
        try:
            data = self.backend.get(key)
        except NotFound:
            gone = self.read_version_tombstone(dataset, number)
            if gone is not None:
                raise NotFound(f"version {number} of dataset {dataset!r} was deleted "
                               f"({gone.deleted_at} by {gone.author})", reason="VERSION_DELETED",
                               dataset=dataset, version=number) from None
            raise NotFound(f"dataset {dataset!r} has no version {number}",
                           dataset=dataset, version=number) from None
        return parse_record_file(data, VersionRecord, key)

    def read_listed_version(self, dataset: str, number: int) -> VersionRecord:
        """`read_version` of a version the caller has just listed and found not deleted,
        from memory when this log read it before: a record never changes under its key (a
        deleted version's number and a deleted dataset's name are never used again), and
        whether it still exists is the caller's listing to say. A walk over every version
        (an erasure makes several) then reads each record once."""
        kept = self._listed.get((dataset, number))
        if kept is None:
            kept = self.read_version(dataset, number)
            if len(self._listed) >= LISTED_VERSIONS_KEPT:
                self._listed.clear()
            self._listed[(dataset, number)] = kept
        return kept

    def head(self, dataset: str) -> int:
        """The newest version that is not deleted (0 if none): the base a writer builds on.
        For the write path only; reads name their version. One listing and, for the newest
        listed, one look for its tombstone (a version being deleted is still listed); where
        a listing may lag a fresh append (a remote store), also a look past it."""
        listed = self.version_numbers(dataset)
        if getattr(self.backend, "LISTING_MAY_LAG", True):
            n = listed[-1] if listed else 0
            while self.backend.exists(version_key(dataset, n + 1)):
                n += 1
                listed.append(n)
        for number in reversed(listed):
            if not self.backend.exists(deleted_key(dataset, number)):
                return number
        return 0

    def last_number(self, dataset: str) -> int:
        """The highest version number ever used, sealed or deleted (0 if none): both
        listings, then probing past them (a listing may lag a fresh append) for a version or a
        tombstone at each next number."""
        n = max(self.version_numbers(dataset) + self.deleted_numbers(dataset), default=0)
        while self.backend.exists(version_key(dataset, n + 1)) or \
                self.backend.exists(deleted_key(dataset, n + 1)):
            n += 1
        return n

    def next_number(self, dataset: str, base: int) -> int:
        """The number a version built on `base` claims: base+1, skipping deleted numbers
        (a deleted number is never used again)."""
        n = base + 1
        while self.backend.exists(deleted_key(dataset, n)):
            n += 1
        return n

    def append_version(self, record: VersionRecord) -> bool:
        """Claim `record.number`; False if another writer already holds it, or if the number
        was used by a version since deleted."""
        key = version_key(record.dataset, record.number)
        if not self.backend.put_if_absent(key, format_record_file(record)):
            return False
        # A writer that chose its number just before that number's version was deleted could
        # otherwise bring the number back. The tombstone is written before the version file is
        # deleted, so it is visible by now: withdraw the claim.
        if self.backend.exists(deleted_key(record.dataset, record.number)):
            self.backend.delete(key)
            return False
        return True

    def read_version_tombstone(self, dataset: str, number: int) -> VersionTombstone | None:
        key = deleted_key(dataset, number)
        try:
            data = self.backend.get(key)
        except NotFound:
            return None
        return parse_record_file(data, VersionTombstone, key)

    def read_retirement(self, dataset: str, number: int) -> VersionRetirement | None:
        key = retired_key(dataset, number)
        try:
            data = self.backend.get(key)
        except NotFound:
            return None
        return parse_record_file(data, VersionRetirement, key)

    def read_dataset_tombstone(self, dataset: str) -> DatasetTombstone | None:
        key = tombstone_key(dataset)
        try:
            data = self.backend.get(key)
        except NotFound:
            return None
        return parse_record_file(data, DatasetTombstone, key)

    def citation_head(self, dataset: str, log: str) -> int:
        """The highest claimed number of a citation log ("scores" or "experiments")."""
        return self._head(f"{DATASETS}{dataset}/{log}/", citation_key_of(dataset, log))

    def deleted_numbers(self, dataset: str) -> list[int]:
        return numbers(self.backend.list(f"{DATASETS}{dataset}/deleted/"))

    def version_numbers(self, dataset: str) -> list[int]:
        return numbers(self.backend.list(f"{DATASETS}{dataset}/versions/"))

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
        """Datasets that exist and are not deleted (an interrupted deletion leaves records
        behind its tombstone; the dataset is deleted all the same)."""
        keys = list(self.backend.list(DATASETS))
        deleted = {found[0] for found in map(parse_tombstone_key, keys) if found}
        return sorted(found[0] for found in map(parse_meta_key, keys)
                      if found and found[1] == 1 and found[0] not in deleted)

    def _head(self, prefix: str, key_of) -> int:
        listed = numbers(self.backend.list(prefix))
        n = listed[-1] if listed else 0
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
