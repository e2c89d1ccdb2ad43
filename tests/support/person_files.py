"""Person index files as the tests need them: the person tables of a repository, one rewritten
with other rows, and a repository's tables turned into the files a cas from before person
tables wrote (a person index record per shard and a person-shards record per pack), so that
the tests check such repositories are still read, erased, mirrored and collected."""

from __future__ import annotations

from cas.digest import to_bytes
from cas.format.keys import (PERSON_TABLES, parse_person_table_key, person_index_key,
                             person_shards_key, person_table_key)
from cas.format.records import PersonIndex, PersonObject, PersonShards, format_record_file
from cas.storage import person_index


def tables(backend) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Pack id -> (key of its person table, its rows (keyed person, digest) in order)."""
    out = {}
    for key in backend.list(PERSON_TABLES):
        pid, shards = person_index.parse_table(backend.get(key), key)
        assert parse_person_table_key(key) == (pid, set(shards)), key
        out[pid] = (key, [row for shard in sorted(shards) for row in shards[shard]])
    return out


def write_table(backend, pid: str, rows: list[tuple[str, str]]) -> str:
    """Replace the person table of pack `pid` by one of `rows`; returns its key."""
    persons: dict[bytes, set[str]] = {}
    for person, digest in rows:
        persons.setdefault(to_bytes(digest), set()).add(person)
    old = tables(backend).get(pid)
    if old is not None:
        backend.delete(old[0])
    data, shards = person_index.format_table(pid, persons)
    key = person_table_key(pid, shards)
    backend.replace(key, data)
    return key


def to_records(backend) -> int:
    """Write every person table as the per-shard person index records and person-shards record
    of a cas from before person tables (in the order it wrote them), then delete the table.
    Returns the number of packs converted."""
    converted = tables(backend)
    for pid, (key, rows) in sorted(converted.items()):
        shards: dict[str, list[PersonObject]] = {}
        for person, digest in rows:
            shards.setdefault(person[3:5], []).append(PersonObject(person=person, digest=digest))
        backend.put_if_absent(person_shards_key(pid, shards), format_record_file(
            PersonShards(pack=pid, shards=sorted(shards))))
        for shard, entries in sorted(shards.items()):
            backend.put_if_absent(person_index_key(shard, pid), format_record_file(
                PersonIndex(pack=pid, entries=entries)))
        backend.delete(key)
    return len(converted)
