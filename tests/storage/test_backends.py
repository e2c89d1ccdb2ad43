"""The backends package: the key alphabet, a repository location's backend, and reading
several ranges of a key at once whatever the backend can do."""

import os
import threading

import pytest

from cas.errors import InvalidArgument, NotFound
from cas.storage.backends import backend_for, check_key, get_ranges, is_remote
from cas.storage.backends.local import LocalBackend
from cas.storage.backends.memory import MemoryBackend
from support.backend_contract import INVALID_KEYS, VALID_KEYS


@pytest.mark.parametrize("key", VALID_KEYS)
def test_check_key_accepts(key):
    assert check_key(key) == key


@pytest.mark.parametrize("key", INVALID_KEYS, ids=repr)
def test_check_key_refuses(key):
    with pytest.raises(InvalidArgument) as info:
        check_key(key)
    assert info.value.fields == {"key": str(key)}


def test_a_location_is_remote_when_it_is_a_url():
    assert is_remote("s3://bucket/prefix") and is_remote("gs://b")
    assert not is_remote("/srv/evals") and not is_remote("evals") and not is_remote(None)


def test_a_local_location_is_its_cas_directory(tmp_path):
    made = backend_for(str(tmp_path / "team"), create=True)
    assert isinstance(made, LocalBackend)
    assert made.root == str(tmp_path / "team" / ".cas") and os.path.isdir(made.root)
    again = backend_for(str(tmp_path / "team" / ".cas"))  # the .cas directory itself
    assert again.root == made.root
    backend_for(str(tmp_path / "elsewhere"))  # without `create`, nothing is made
    assert not (tmp_path / "elsewhere").exists()


def test_a_url_of_another_scheme_is_refused_naming_the_accepted_ones():
    with pytest.raises(InvalidArgument) as info:
        backend_for("gs://bucket/x")
    assert "s3://BUCKET/PREFIX" in info.value.message
    assert info.value.fields == {"location": "gs://bucket/x"}


class _Spans(MemoryBackend):
    """A memory backend that records which threads read ranges."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def get_range(self, key, offset, length):
        self.threads.append(threading.current_thread().name)
        return super().get_range(key, offset, length)


def test_get_ranges_reads_each_span_in_order_however_the_backend_is_called():
    spans = [(0, 3), (5, 2), (8, 100), (50, 1)]
    data = bytes(range(20))
    expected = [data[0:3], data[5:7], data[8:], b""]
    one_by_one = _Spans()
    one_by_one.put_if_absent("k", data)
    assert get_ranges(one_by_one, "k", spans) == expected
    assert set(one_by_one.threads) == {threading.current_thread().name}

    class Concurrent(_Spans):
        CONCURRENT_CALLS = True
    together = Concurrent()
    together.put_if_absent("k", data)
    assert get_ranges(together, "k", spans) == expected
    assert threading.current_thread().name not in together.threads  # from the pool
    with pytest.raises(NotFound):
        get_ranges(together, "absent", spans)


def test_get_ranges_uses_a_backends_own_reader(tmp_path):
    backend = LocalBackend(str(tmp_path / "r"))
    backend.put_if_absent("k", b"0123456789")
    calls = []
    real = LocalBackend.get_ranges

    class Own(LocalBackend):
        def get_ranges(self, key, spans):
            calls.append(spans)
            return real(self, key, spans)
    own = Own(str(tmp_path / "r"))
    assert get_ranges(own, "k", [(1, 2), (7, 5)]) == [b"12", b"789"]
    assert calls == [[(1, 2), (7, 5)]]
