"""Shared fixtures: a real SeaweedFS server for every test that runs against S3, a fresh
repository on each backend, and the people the lifecycle and erasure tests act as."""

import io
import os
import pathlib

import pytest
from click.testing import CliRunner
from hypothesis import settings

# In CI every property test runs the same examples on every run (a failure reproduces with the
# same seed); locally hypothesis explores new examples each time.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_configure(config) -> None:
    """Compile cas once before the tests start their `cas` processes: an editable install is
    not compiled by pip, and where PYTHONDONTWRITEBYTECODE is set (this machine sets it) every
    process would compile all of cas again, about 70 ms each. compileall writes the bytecode
    that a process may read, whatever that variable says."""
    import compileall
    root = pathlib.Path(__file__).resolve().parent.parent
    for package in ("cas", "cli", "web"):
        compileall.compile_dir(str(root / package), quiet=1)


import cas  # noqa: E402
from cas.backends.memory import MemoryBackend  # noqa: E402
from cas_cli.main import cli  # noqa: E402
from lifecycle_helpers import OPERATOR, REVIEWER, jsonl, review, run_obj  # noqa: E402
from seaweed import SeaweedServer  # noqa: E402


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


@pytest.fixture
def repo(location):
    """A fresh repository on each backend."""
    return cas.init(location)


@pytest.fixture
def mem():
    return cas.Repository.create(MemoryBackend())


@pytest.fixture
def staged(repo):
    """Four imported runs r-0..r-3, each with one saved review, and an empty dataset."""
    repo.import_runs(io.BytesIO(jsonl(*(run_obj(f"r-{i}", i) for i in range(4)))))
    anns = {f"r-{i}": review(repo, f"r-{i}") for i in range(4)}
    repo.create_dataset("evals")
    return repo, anns


@pytest.fixture
def as_reviewer(monkeypatch, tmp_path):
    """A configured person for reviews (REVIEWER), and never the real user's config file."""
    monkeypatch.setenv("CAS_USER", REVIEWER)
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "user-config.json"))


@pytest.fixture
def as_operator(monkeypatch, tmp_path):
    """The operator (OPERATOR) as the configured person, and never the real user's config."""
    monkeypatch.setenv("CAS_USER", OPERATOR)
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "user-config.json"))


@pytest.fixture
def small_packs(monkeypatch):
    monkeypatch.setattr("cas.store.PACK_MAX_BYTES", 20_000)


@pytest.fixture
def run(tmp_path, monkeypatch):
    """Run a `cas` command in tmp_path as Ada, with no user config and no CAS_REPO of the
    caller's (a module whose commands need another person has its own `run`)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "no-config.json"))
    monkeypatch.delenv("CAS_REPO", raising=False)
    runner = CliRunner()

    def invoke(*args, input=None):
        return runner.invoke(cli, list(args), input=input, catch_exceptions=False)
    return invoke


TRACES = pathlib.Path(os.environ.get("CAS_TRACES") or
                      pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "traces")


@pytest.fixture(scope="session")
def traces() -> pathlib.Path:
    """The real, externally produced trace files (`../shared/traces/`, or CAS_TRACES): read
    from there, never copied into the project."""
    if not (TRACES / "SOURCES.md").is_file():
        pytest.fail(f"the real trace files are not at {TRACES}: the importer tests read "
                    "../shared/traces/ beside the repository (or set CAS_TRACES)")
    return TRACES
