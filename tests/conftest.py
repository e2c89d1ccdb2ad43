"""Shared fixtures: a real SeaweedFS server for every test that runs against S3."""

import os

import pytest
from hypothesis import settings

# In CI every property test runs the same examples on every run (a failure reproduces with the
# same seed); locally hypothesis explores new examples each time.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

from seaweed import SeaweedServer


@pytest.fixture(scope="session")
def seaweed():
    server = SeaweedServer().start()
    saved = {k: os.environ.get(k) for k in server.environ()}
    os.environ.update(server.environ())
    yield server
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    server.stop()


@pytest.fixture
def s3_url(seaweed, tmp_path, monkeypatch):
    """An empty S3 repository location, with a private local cache directory."""
    monkeypatch.setenv("CAS_CACHE_DIR", str(tmp_path / "cache"))
    return seaweed.url()


@pytest.fixture(params=["local", "s3"])
def location(request, tmp_path, monkeypatch):
    """A fresh repository location on each backend: a local directory, then SeaweedFS."""
    if request.param == "local":
        return str(tmp_path)
    server = request.getfixturevalue("seaweed")
    monkeypatch.setenv("CAS_CACHE_DIR", str(tmp_path / "cache"))
    return server.url()
