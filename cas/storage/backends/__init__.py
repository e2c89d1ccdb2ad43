"""Backends: bytes in a flat key space of immutable files (create-if-absent and delete; erasure
alone replaces). They move bytes and know nothing of the format.

- `local`: a local directory, the embedded default (atomic create-if-absent via link(2)).
- `s3`: S3-compatible object storage (atomic via `If-None-Match: *`).
- `memory`: in memory, for tests.
- `cache`: a local cache in front of a remote backend for immutable pack indexes.
"""

from __future__ import annotations

import os
import re
from typing import Iterator, Protocol

from cas.errors import InvalidArgument

_KEY_RE = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*\Z")


def check_key(key: str) -> str:
    """Keys are '/'-separated segments of [A-Za-z0-9._-]; no empty, '.' or '..' segment."""
    if not isinstance(key, str) or not _KEY_RE.match(key) or any(
            part in (".", "..") for part in key.split("/")):
        raise InvalidArgument(f"invalid storage key {key!r}", key=str(key))
    return key


class Backend(Protocol):
    """The contract every backend meets; tests/support/backend_contract.py checks it, run by
    each backend's test file.

    - `get` returns the whole value or raises NotFound.
    - `get_range` returns `length` bytes at `offset` (fewer only at the end), NotFound if absent
      (a range of no bytes may answer b"" without looking: S3 sends no request for it).
    - `put_if_absent` atomically creates the key and returns True, or returns False and leaves
      the existing value untouched. A reader never sees a partial value.
    - `replace` atomically sets the key to new bytes, present or not. Only erasure uses it, to
      swap a log record for its redacted copy: a reader sees the old or the new value, whole.
    - `delete` removes the key; deleting an absent key is not an error (returns False).
    - `list(prefix)` yields the keys starting with `prefix` in ascending byte order. A backend
      whose class sets `LISTING_MAY_LAG = False` promises that a listing shows every key
      written before it began (a local directory, memory); readers of the others look past a
      listing for a key it may not show yet.
    - `modified(key)` is when the key was last written (seconds since the epoch), NotFound if
      absent: gc keeps what is younger than its grace period.
    - optionally `get_ranges(key, spans)`: `get_range` of each (offset, length), in order, in
      one call (`get_ranges` below uses it where a backend has it).
    """

    url: str

    def get(self, key: str) -> bytes: ...

    def get_range(self, key: str, offset: int, length: int) -> bytes: ...

    def put_if_absent(self, key: str, data: bytes) -> bool: ...

    def replace(self, key: str, data: bytes) -> None: ...

    def delete(self, key: str) -> bool: ...

    def list(self, prefix: str = "") -> Iterator[str]: ...

    def exists(self, key: str) -> bool: ...

    def modified(self, key: str) -> float: ...


CALLS_IN_FLIGHT = 16  # calls get_ranges makes at once


def is_remote(location: str) -> bool:
    return isinstance(location, str) and "://" in location


def remote_backend(url: str):
    """The backend for a URL location (`s3://BUCKET/PREFIX`), with its local cache directory."""
    import os

    from blake3 import blake3

    from cas.storage.backends.cache import CachingBackend, default_cache_root
    if not url.startswith("s3://"):
        raise InvalidArgument(f"unsupported repository location {url!r}; accepted: a local "
                              "directory or s3://BUCKET/PREFIX", location=url)
    from cas.storage.backends.s3 import S3Backend
    inner = S3Backend(url)
    cache_dir = os.path.join(default_cache_root(), blake3(inner.url.encode()).hexdigest()[:32])
    return CachingBackend(inner, cache_dir)


def backend_for(location: str, create: bool = False):
    """The backend of a repository location: `s3://BUCKET/PREFIX`, or a directory holding
    `.cas` (or the `.cas` directory itself). With `create`, a missing local one is made."""
    import os

    from cas.storage.backends.local import LocalBackend
    if is_remote(location):
        return remote_backend(location)
    root = os.path.abspath(location)
    if os.path.basename(root) != ".cas":
        root = os.path.join(root, ".cas")
    if create:
        os.makedirs(root, exist_ok=True)
    return LocalBackend(root)


def get_ranges(backend, key: str, spans: list[tuple[int, int]]) -> list[bytes]:
    """`get_range(key, offset, length)` for each (offset, length) of `spans`, in order (NotFound
    if the key is absent). A backend with its own `get_ranges` reads them in one call (a local
    file is opened once); one whose class says `CONCURRENT_CALLS` gets the requests from
    several threads at once (S3: one round trip's wait for all of them); any other, one at a
    time."""
    own = getattr(type(backend), "get_ranges", None)
    if own is not None:
        return own(backend, key, spans)
    if len(spans) < 2 or not getattr(type(backend), "CONCURRENT_CALLS", False):
        return [backend.get_range(key, offset, length) for offset, length in spans]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(min(CALLS_IN_FLIGHT, len(spans))) as pool:
        return list(pool.map(lambda span: backend.get_range(key, *span), spans))


class HeldFile:
    """An immutable file held open: slices of it are bytes, each one `pread` (no open, no
    stat: not a backend call). `LocalBackend.map` gave a memory map until issue 37: the pages
    of a mapped file that a process touches count in its resident memory and stay there, and
    Linux maps page cache in large folios (here about 0.8 MB a scattered probe), so the
    probes of a scan in id order kept all of a 48 MB multi-pack index resident at 1M cases.
    A read costs about 0.8 us more than a slice of a map (a random lookup at 1M cases 13.7 us
    against 11.1), and no memory but its bytes. A file deleted since it was opened stays
    readable, as a mapped one did."""

    __slots__ = ("_fd", "_size")

    def __init__(self, fd: int, size: int) -> None:
        self._fd, self._size = fd, size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, span: slice) -> bytes:
        start, stop, step = span.indices(self._size)  # clamped to the file, as bytes are
        if step != 1:
            raise ValueError("a held file is sliced with step 1")
        return os.pread(self._fd, stop - start, start) if stop > start else b""

    def __del__(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass
