"""In-memory backend, for tests: the same contract as the local directory."""

from __future__ import annotations

import threading
import time
from typing import Iterator

from cas.errors import NotFound
from cas.storage.backends import check_key


class MemoryBackend:
    LISTING_MAY_LAG = False  # a key is listed as soon as it is written

    def __init__(self) -> None:
        self.url = "memory:"
        self._data: dict[str, bytes] = {}
        self._times: dict[str, float] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes:
        check_key(key)
        try:
            return self._data[key]
        except KeyError:
            raise NotFound(f"no such key {key!r}", key=key) from None

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        return self.get(key)[offset:offset + length]

    def put_if_absent(self, key: str, data: bytes) -> bool:
        check_key(key)
        with self._lock:
            if key in self._data:
                return False
            self._data[key] = bytes(data)
            self._times[key] = time.time()
            return True

    def replace(self, key: str, data: bytes) -> None:
        check_key(key)
        with self._lock:
            self._data[key] = bytes(data)
            self._times[key] = time.time()

    def delete(self, key: str) -> bool:
        check_key(key)
        with self._lock:
            return self._data.pop(key, None) is not None

    def list(self, prefix: str = "") -> Iterator[str]:
        with self._lock:
            keys = sorted(k for k in self._data if k.startswith(prefix))
        return iter(keys)

    def exists(self, key: str) -> bool:
        check_key(key)
        return key in self._data

    def modified(self, key: str) -> float:
        self.get(key)
        return self._times[key]
