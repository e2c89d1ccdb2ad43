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


MEMORY_FS = "/dev/shm"
_scratch: dict[str, object] = {}  # root (str), status (int)


def _use_memory_scratch(config) -> None:
    """Scratch space on a memory filesystem: every repository, SeaweedFS's data and every
    temporary file of the tests and of the processes they start (TMPDIR) go to one fresh
    directory under /dev/shm, where there is one and no --basetemp is given. On this
    machine's disk the suite spent a third of its time in file system calls (creating,
    fsyncing and deleting some 70,000 files a run; pytest deletes an older run's directories
    at the end of each). The directory is removed after a run that passed and kept, and
    named, after one that failed. CAS_TEST_DISK=1 keeps everything on the disk."""
    if hasattr(config, "workerinput") or config.option.basetemp or \
            os.environ.get("CAS_TEST_DISK") or not os.access(MEMORY_FS, os.W_OK):
        return  # an xdist worker inherits the controller's choice (basetemp and TMPDIR)
    import tempfile
    root = tempfile.mkdtemp(prefix="cas-tests-", dir=MEMORY_FS)
    _scratch["root"] = root
    config.option.basetemp = os.path.join(root, "pytest")
    os.environ["TMPDIR"] = tempfile.tempdir = root


def pytest_sessionfinish(session, exitstatus) -> None:
    _scratch["status"] = exitstatus


def pytest_terminal_summary(terminalreporter) -> None:
    if "root" in _scratch and _scratch.get("status"):
        terminalreporter.write_line(f"the tests' scratch space is kept at {_scratch['root']}")


def pytest_unconfigure(config) -> None:
    if "root" in _scratch and not _scratch.get("status"):
        import shutil
        shutil.rmtree(_scratch["root"], ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before the tmp_path plugin reads --basetemp
def pytest_configure(config) -> None:
    _use_memory_scratch(config)
    _compile()


def _compile() -> None:
    """Compile cas once before the tests start their `cas` processes: an editable install is
    not compiled by pip, and where PYTHONDONTWRITEBYTECODE is set (this machine sets it) every
    process would compile all of cas again, about 70 ms each. compileall writes the bytecode
    that a process may read, whatever that variable says."""
    import compileall
    root = pathlib.Path(__file__).resolve().parent.parent
    for package in ("cas", "cas_cli", "cas_web"):
        compileall.compile_dir(str(root / package), quiet=1)


import cas  # noqa: E402
from cas.storage.backends.memory import MemoryBackend  # noqa: E402
from cas_cli.main import cli  # noqa: E402
from support.lifecycle import OPERATOR, REVIEWER, jsonl, review, run_obj  # noqa: E402
from support.seaweed import SeaweedServer  # noqa: E402


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
    monkeypatch.setattr("cas.storage.pack.PACK_MAX_BYTES", 20_000)


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
