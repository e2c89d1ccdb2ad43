"""The in-memory backend: the backend contract, and values kept apart from the caller's."""

import pytest

from cas.storage.backends.memory import MemoryBackend
from support.backend_contract import BackendContract


@pytest.fixture
def make_backend():
    return MemoryBackend


class TestMemoryBackend(BackendContract):
    """Every test of the backend contract, on a MemoryBackend."""


def test_a_value_is_a_copy_of_the_bytes_put():
    backend = MemoryBackend()
    data = bytearray(b"before")
    backend.put_if_absent("k", data)
    backend.replace("r", data)
    data[:] = b"after!"  # the writer's buffer changes after the write: the value does not
    assert backend.get("k") == backend.get("r") == b"before"
    assert type(backend.get("k")) is bytes


def test_a_key_is_listed_as_soon_as_it_is_written():
    """MemoryBackend promises a listing that never lags (readers need not look past it)."""
    backend = MemoryBackend()
    assert MemoryBackend.LISTING_MAY_LAG is False and backend.url == "memory:"
    backend.put_if_absent("a/1", b"")
    assert list(backend.list("a/")) == ["a/1"]
