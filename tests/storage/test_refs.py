"""The refs log: atomic appends, head probing past a lagging listing."""

from __future__ import annotations

import pytest

import cas
from cas.format.keys import meta_key, version_key
from cas.format.records import DatasetRecord, VersionRecord, format_record_file
from cas.storage.backends.memory import MemoryBackend
from cas.storage.refs import RefsLog
from cas.storage.tree import EMPTY_ROOT


class LaggingBackend:
    """A backend whose listing under `prefix` misses the newest `lag` keys (as an eventually
    consistent object store might), while reads and exists see everything."""

    LISTING_MAY_LAG = True  # (the memory backend it wraps says False)

    def __init__(self, inner, prefix: str = "datasets/", lag: int = 1) -> None:
        self.inner = inner
        self.prefix = prefix
        self.lag = lag
        self.url = inner.url
        self.listed: list[str] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def list(self, prefix: str = ""):
        keys = list(self.inner.list(prefix))
        self.listed.append(prefix)
        if prefix.startswith(self.prefix) and prefix.endswith("/") and self.lag:
            keys = keys[:-self.lag] if self.lag < len(keys) else []
        return iter(keys)


def vrec(number: int, dataset: str = "ds") -> VersionRecord:
    return VersionRecord(dataset=dataset, number=number, parent=number - 1 or None,
                         content_digest=EMPTY_ROOT, item_count=0, operation="commit",
                         added=0, removed=0, author="t", sealed_at="2024-01-01T00:00:00Z")


def mrec(revision: int, name: str = "ds") -> DatasetRecord:
    return DatasetRecord(name=name, revision=revision, author="t",
                         edited_at="2024-01-01T00:00:00Z", description=f"r{revision}")


@pytest.mark.parametrize("lag", [0, 1, 2, 5, 100])
def test_head_probes_past_a_lagging_listing(lag):
    inner = MemoryBackend()
    refs = RefsLog(LaggingBackend(inner, lag=lag))
    assert refs.head("ds") == 0
    for n in range(1, 6):
        assert refs.append_version(vrec(n))
        assert refs.head("ds") == n
        assert refs.append_meta(mrec(n))
        assert refs.meta_head("ds") == n
    # The listing really lags (else this test would prove nothing).
    if lag:
        assert RefsLog(LaggingBackend(inner, lag=lag)).version_numbers("ds") == \
            list(range(1, max(6 - lag, 1)))


def test_head_with_a_gap_in_the_log():
    backend = MemoryBackend()
    refs = RefsLog(backend)
    for n in (1, 2, 3):
        assert refs.append_version(vrec(n))
    assert backend.put_if_absent(version_key("ds", 5), format_record_file(vrec(5)))
    # A gap is damage (fsck reports it); the head is the highest listed number, probing on.
    assert refs.head("ds") == 5
    assert RefsLog(LaggingBackend(backend, lag=1)).head("ds") == 3


def test_append_returns_false_on_an_existing_number_and_keeps_the_first():
    backend = MemoryBackend()
    refs = RefsLog(backend)
    first = vrec(1)
    assert refs.append_version(first) is True
    other = VersionRecord(dataset="ds", number=1, parent=None, content_digest=EMPTY_ROOT,
                          item_count=0, operation="commit", added=0, removed=0,
                          author="someone else", sealed_at="2030-01-01T00:00:00Z")
    assert refs.append_version(other) is False
    assert refs.read_version("ds", 1) == first
    assert refs.append_meta(mrec(1)) is True
    other = DatasetRecord(name="ds", revision=1, author="x", edited_at="t")
    assert refs.append_meta(other) is False
    assert refs.read_meta("ds", 1) == mrec(1)


def test_read_missing_version_and_meta_not_found():
    refs = RefsLog(MemoryBackend())
    with pytest.raises(cas.NotFound) as info:
        refs.read_version("ds", 1)
    assert info.value.fields == {"dataset": "ds", "version": 1}
    with pytest.raises(cas.NotFound):
        refs.read_meta("ds", 1)
    assert not refs.dataset_exists("ds")


def test_read_corrupt_record_is_data_loss():
    backend = MemoryBackend()
    refs = RefsLog(backend)
    data = bytearray(format_record_file(vrec(1)))
    data[len(data) // 2] ^= 0x01
    backend.put_if_absent(version_key("ds", 1), bytes(data))
    with pytest.raises(cas.DataLoss):
        refs.read_version("ds", 1)


def test_dataset_names_listing():
    backend = MemoryBackend()
    refs = RefsLog(backend)
    assert refs.dataset_names() == []
    for name in ("zeta", "a.b", "a", "a-b", "m_1"):
        assert refs.append_meta(mrec(1, name))
    refs.append_meta(mrec(2, "a"))
    refs.append_version(vrec(1, "zeta"))
    # A dataset with later revisions but (damaged) no revision 1 is not listed as a dataset.
    backend.put_if_absent(meta_key("orphan", 2), format_record_file(mrec(2, "orphan")))
    assert refs.dataset_names() == ["a", "a-b", "a.b", "m_1", "zeta"]
    assert refs.dataset_exists("a.b") and not refs.dataset_exists("orphan")
    # Names that are prefixes of others are not confused by the listing.
    assert refs.version_numbers("a") == []
    assert refs.version_numbers("zeta") == [1]


def test_version_numbers_ignore_foreign_keys():
    backend = MemoryBackend()
    refs = RefsLog(backend)
    refs.append_version(vrec(1))
    refs.append_version(vrec(2))
    backend.put_if_absent("datasets/ds/versions/notes.txt", b"x")
    backend.put_if_absent("datasets/ds/versions/12", b"x")
    assert refs.version_numbers("ds") == [1, 2]
    assert refs.head("ds") == 2


def test_keys_sort_by_number():
    keys = [version_key("ds", n) for n in (1, 2, 9, 10, 11, 100, 10**9)]
    assert keys == sorted(keys)
    assert version_key("ds", 7) == "datasets/ds/versions/0000000007"
    assert meta_key("ds", 12) == "datasets/ds/meta/0000000012"


def test_repository_on_a_lagging_listing_seals_and_detects_conflicts():
    inner = MemoryBackend()
    repo = cas.Repository.create(LaggingBackend(inner, lag=1))
    repo.create_dataset("ds", admission="direct")
    for i in range(4):
        assert repo.head("ds") == i
        record = repo.commit("ds", base=repo.head("ds"), add=[{"input": i}])
        assert record.number == i + 1
    with pytest.raises(cas.VersionConflict) as info:
        repo.commit("ds", base=2, add=[{"input": "late"}])
    assert info.value.head == 4
    assert repo.commit("ds", base=2, add=[{"input": "late"}], retry=True).number == 5
    assert repo.versions("ds", limit=10).versions[0].number == 5
    assert cas.Repository(inner).fsck().ok
