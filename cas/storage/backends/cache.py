"""A local cache in front of a remote backend for immutable pack indexes.

Pack indexes and multi-pack indexes are named by content and never change, so a local copy can
never go stale (only outlive the remote one). Mapped, a lookup then costs no call instead of
a request or two. The cache fills on demand: an index not cached yet is read by ranges (a
command that looks up a few objects on a new machine reads a few kilobytes of a multi-pack
index of tens of megabytes), and is fetched whole, checked and kept once this machine has read
1/FETCH_FRACTION of its size by ranges, counted across processes in a small file beside where
the copy goes (so what ranges and the download cost together stays within 1 + 1/FETCH_FRACTION
of the download: a command that looks up many pays one download, and light commands fill the
cache for the next ones), or when a command reads it whole. Object bytes are cached by digest
one layer up (`cas.storage.store`).
"""

from __future__ import annotations

import os
from typing import Iterator

from blake3 import blake3

from cas.errors import DigestMismatch
from cas.storage.backends import HeldFile, check_key

# An uncached index is fetched whole once this machine has read this fraction of it by ranges:
# at 1M cases (a 50 MB multi-pack index, ~24 KiB a lookup) after about 270 lookups, at 10M
# (~490 MB, ~76 KiB a lookup) after about 800; never for a command that looks up a few.
FETCH_FRACTION = 8
# An index this small is fetched whole at its first use: one request of at most this many bytes
# costs about what the range reads of a few lookups do (at 100k cases a multi-pack index is
# ~6 MB, fetched; at 1M ~80 MB, read by ranges).
WHOLE_BELOW = 8 << 20


def default_cache_root() -> str:
    return (os.environ.get("CAS_CACHE_DIR")
            or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                            "cas"))


class CachingBackend:
    CONCURRENT_CALLS = True  # safe to call from several threads (get_ranges)
    ROUND_TRIPS = True  # what is not cached is read from the remote store, a round trip each

    def __init__(self, inner, cache_dir: str) -> None:
        self.inner = inner
        self.url = inner.url
        self.cache_dir = cache_dir
        self._ranged: dict[str, int] = {}  # KiB read by ranges of each index, where none is kept
        self._sizes: dict[str, int] = {}  # the size of each uncached index a reader opened

    def _local(self, key: str) -> str:
        return os.path.join(self.cache_dir, *check_key(key).split("/"))

    def _fetch(self, key: str) -> bytes:
        """The index from the remote backend, checked: it ends with the BLAKE3 of everything
        before it."""
        return _checked(key, self.inner.get(key))

    def _ensure(self, key: str, data: bytes | None = None) -> str:
        """The path of the local copy of index `key`, fetched if there is none (`data`: the
        whole index, read already; checked as a fetch is)."""
        path = self._local(key)
        if not os.path.exists(path):
            data = self._fetch(key) if data is None else _checked(key, data)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.urandom(6).hex()}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)  # a private cache file, so a plain rename is enough here
            try:
                os.unlink(path + ".ranges")  # the count that brought it here is done
            except FileNotFoundError:
                pass
        return path

    @staticmethod
    def _cached(key: str) -> bool:
        # pack indexes and multi-pack indexes: both named by content, both ending with the
        # BLAKE3 of what precedes it
        return isinstance(key, str) and key.startswith("packs/") and \
            key.endswith((".idx", ".midx"))

    def map(self, key: str):
        """A cached index held open (a `HeldFile`), as LocalBackend.map holds a local one:
        probes then cost neither a request nor a call (a `pread` each, and no resident memory
        but what they read), and what a lookup finds is confirmed against the remote (the
        local copy outlives the remote index). None for any other key."""
        if not self._cached(key) or not os.path.exists(self._local(key)):
            return None  # not cached yet: read by ranges (get_range fetches it on demand)
        try:
            fd = os.open(self._local(key), os.O_RDONLY)
        except FileNotFoundError:  # deleted by a concurrent `delete`, as in `get`
            return self._fetch(key)
        size = os.fstat(fd).st_size
        if not size:
            os.close(fd)
            return b""
        return HeldFile(fd, size)

    def keep(self, key: str, size: int, data: bytes | None = None):
        """An index a reader has opened by ranges and found to be `size` bytes: fetched whole
        (or kept as `data`, the whole index its opening read) and mapped now if it is small
        (WHOLE_BELOW), else None (it stays ranged)."""
        if not self._cached(key):
            return None
        if size > WHOLE_BELOW:
            self._sizes[key] = size  # (what get_range fetches it after)
            return None
        self._ensure(key, data)
        return self.map(key)

    def get(self, key: str) -> bytes:
        if self._cached(key):
            try:
                with open(self._ensure(key), "rb") as f:
                    return f.read()
            except FileNotFoundError:
                # deleted by a concurrent `delete` between the check and the open: the remote
                # says whether the index is still there (NotFound if it is gone)
                return self._fetch(key)
        return self.inner.get(key)

    def _count_range(self, key: str, read: int) -> int:
        """`read` more bytes read by ranges of an uncached index: the KiB this machine has
        read so of it (a byte appended to `<copy>.ranges` per KiB begun; in memory where the
        cache cannot be written)."""
        kib = -(-read // 1024) or 1
        path = self._local(key) + ".ranges"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "ab") as f:
                f.write(b"." * kib)
                return f.tell()
        except OSError:
            ranged = self._ranged[key] = self._ranged.get(key, 0) + kib
            return ranged

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        if self._cached(key) and not os.path.exists(self._local(key)):
            data = self.inner.get_range(key, offset, length)
            size = self._sizes.get(key)
            if size is not None and self._count_range(key, len(data)) * 1024 * FETCH_FRACTION \
                    >= size:
                try:
                    self._ensure(key)  # the next reads come from the local copy
                except OSError:
                    pass  # a cache that cannot be written: reads stay ranged
            return data
        if self._cached(key):
            try:
                with open(self._ensure(key), "rb") as f:
                    # Clamp to the file, as every backend does: seek refuses offsets past
                    # 2**63, and read would allocate `length` bytes up front.
                    size = os.fstat(f.fileno()).st_size
                    if length <= 0 or offset >= size:
                        return b""
                    f.seek(offset)
                    return f.read(min(length, size - offset))
            except FileNotFoundError:  # as in `get`
                data = self._fetch(key)
                return b"" if length <= 0 or offset >= len(data) else \
                    data[offset:offset + length]
        return self.inner.get_range(key, offset, length)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        return self.inner.put_if_absent(key, data)

    def replace(self, key: str, data: bytes) -> None:
        self.inner.replace(key, data)  # never an index: those are named by content

    def delete(self, key: str) -> bool:
        for path in (self._local(key), self._local(key) + ".ranges"):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        return self.inner.delete(key)

    def list(self, prefix: str = "") -> Iterator[str]:
        return self.inner.list(prefix)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def modified(self, key: str) -> float:
        return self.inner.modified(key)

    def __getattr__(self, name):
        return getattr(self.inner, name)  # e.g. S3Backend.requests


def _checked(key: str, data: bytes) -> bytes:
    """An index's bytes, if they end with the BLAKE3 of everything before them."""
    if blake3(memoryview(data)[:-32]).digest() != data[-32:]:
        raise DigestMismatch(data[-32:].hex(), blake3(memoryview(data)[:-32]).hexdigest(), key)
    return data
