"""The lock file: any set of pins round-trips through cas.lock; a malformed file is refused;
the file is found as pyproject.toml is; `add`, `check` and `update` against a repository (a
check never passes on a retired or mismatched pin; an update never leaves a retired pin that
has a successor, and a refused update leaves the file as it was); a name resolves only through
the lock; the lock at a git revision."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas.errors import CasError, FailedPrecondition, InvalidArgument
from cas.format.version_names import MAX_VERSION, Pin
from cas.interop import lockfile
from cas.interop.lockfile import LockEntry
from cas.storage.backends.memory import MemoryBackend
from support.evals import ticking_clock

AUTHOR = "Ada <ada@example.com>"
NAMES = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True).filter(
    lambda n: ".." not in n)
DIGESTS = st.binary(min_size=32, max_size=32).map(lambda b: "b3:" + b.hex())
LOCATIONS = st.none() | st.text(st.characters(blacklist_categories=("Cs",)), min_size=1,
                                max_size=30)


@st.composite
def lock_entries(draw) -> dict:
    names = draw(st.lists(NAMES, unique=True, max_size=8))
    return {n: LockEntry(Pin(n, draw(st.integers(1, MAX_VERSION)), draw(DIGESTS)),
                         draw(LOCATIONS)) for n in names}


# -- the file ------------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(lock_entries())
def test_any_set_of_pins_round_trips_through_the_file(entries):
    text = lockfile.format_lock(entries)
    assert lockfile.parse(text) == entries
    assert lockfile.format_lock(lockfile.parse(text)) == text  # one spelling per lock
    names = list(lockfile.parse(text))
    assert names == sorted(entries)  # tables are written sorted by name


def test_write_then_read_and_tables_sorted(tmp_path):
    path = tmp_path / "cas.lock"
    pins = {n: LockEntry(Pin(n, 3, "b3:" + "a" * 64)) for n in ("zeta", "alpha", "mid.v2")}
    lockfile.write(path, pins)
    text = path.read_text()
    assert [line for line in text.splitlines() if line.startswith("[")] == \
        ["[datasets.alpha]", '[datasets."mid.v2"]', "[datasets.zeta]"]
    assert lockfile.read(path) == pins
    assert lockfile.read(tmp_path / "absent.lock") == {}
    assert [p.name for p in tmp_path.iterdir()] == ["cas.lock"]  # no temporary file left


@pytest.mark.parametrize("text, problem", [
    ("[datasets.a\n", "not TOML"),
    ("version = 1\n", "unknown top-level key 'version'"),
    ("datasets = 3\n", "`datasets` is not a table"),
    ('[datasets.a]\npin = "b@1#b3:' + "0" * 64 + '"\n', "pins another dataset"),
    ('[datasets.a]\npin = "a@1"\n', "is not a pin"),
    ('[datasets.a]\npin = "a@1#b3:' + "0" * 64 + '"\nbranch = "main"\n', "unknown key 'branch'"),
    ('[datasets.a]\nrepository = "x"\n', "has no pin string"),
    ('[datasets."A B"]\npin = "a@1#b3:' + "0" * 64 + '"\n', "invalid dataset name"),
    ('[datasets.a]\npin = "a@1#b3:' + "0" * 64 + '"\nrepository = 3\n', "not a location"),
])
def test_a_malformed_lock_file_is_refused_naming_the_problem(text, problem):
    with pytest.raises(InvalidArgument) as refused:
        lockfile.parse(text, "ci/cas.lock")
    assert refused.value.reason == "INVALID_LOCK_FILE"
    assert problem in refused.value.message and "ci/cas.lock" in refused.value.message


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_parse_raises_only_its_documented_error(text):
    try:
        lockfile.parse(text)
    except InvalidArgument as exc:
        assert exc.reason == "INVALID_LOCK_FILE"


def test_the_lock_is_found_here_or_in_a_parent(tmp_path):
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    assert lockfile.find(nested) is None
    with pytest.raises(InvalidArgument) as none:
        lockfile.locate(start=nested)
    assert none.value.reason == "NOT_LOCKED" and "cas lock add" in none.value.message
    assert lockfile.locate(start=nested, create=True) == nested / "cas.lock"
    (tmp_path / "cas.lock").write_text("")
    assert lockfile.find(nested) == (tmp_path / "cas.lock").resolve()
    (nested / "cas.lock").write_text("")
    assert lockfile.find(nested) == (nested / "cas.lock").resolve()
    assert lockfile.locate("elsewhere.lock", start=nested).name == "elsewhere.lock"


# -- against a repository ------------------------------------------------------------------------
def _repo():
    repo = cas.Repository.create(MemoryBackend(), clock=ticking_clock())
    repo.create_dataset("ds", admission="direct", author=AUTHOR)
    return repo


def _case(person: str, n: int) -> dict:
    return {"input": f"case {n}", "person": person, "tenant": "acme",
            "steps": [{"type": "message", "role": "user", "content": f"question {n}"}]}


def _erase(repo, person: str) -> None:
    preview = repo.erase(person, author=AUTHOR)
    if preview["matched"]:
        repo.erase(person, preview["confirm_token"], author=AUTHOR)


def test_add_check_and_update_after_an_erasure(tmp_path):
    repo, path = _repo(), tmp_path / "cas.lock"
    repo.commit("ds", base=None, add=[_case("p-1", 0), _case("p-2", 1)], author=AUTHOR)
    move = lockfile.add(repo, path, "ds@1")
    assert move.old is None and move.new == repo.pin("ds", 1)
    assert [c.ok for c in lockfile.check(repo, path)] == [True]
    _erase(repo, "p-1")
    [failed] = lockfile.check(repo, path)
    assert (failed.ok, failed.state, failed.successor) == (False, "RETIRED", None)
    assert "cas renew ds" in failed.error["message"]
    with pytest.raises(FailedPrecondition) as refused:
        lockfile.require([failed])
    assert refused.value.reason == "LOCK_CHECK_FAILED"
    assert refused.value.fields["retirement_cause"] == "PERSON_ERASED"
    assert refused.value.fields["retired_at"] == repo.retirement("ds", 1).retired_at
    before = path.read_bytes()
    with pytest.raises(FailedPrecondition) as none:
        lockfile.update(repo, path)
    assert none.value.reason == "NO_SUCCESSOR" and "cas renew" in none.value.message
    assert path.read_bytes() == before  # a refused update changes nothing
    [moved] = lockfile.update(repo, path, renew=True, author=AUTHOR)
    assert (moved.old.version, moved.new.version) == (1, 2)
    [(erasure, _when, removed)] = moved.erasures
    assert removed == 1 and erasure == repo.erasures()[0].id
    assert [c.ok for c in lockfile.check(repo, path)] == [True]
    assert lockfile.update(repo, path) == []  # nothing retired: nothing moves
    # `--to` moves to exactly that version; a retired one is refused
    repo.commit("ds", base=2, add=[_case("p-3", 3)], author=AUTHOR)
    assert lockfile.update(repo, path, "ds", to=3)[0].new.version == 3
    with pytest.raises(FailedPrecondition):
        lockfile.update(repo, path, "ds", to=1)
    with pytest.raises(InvalidArgument) as unlocked:
        lockfile.update(repo, path, "other")
    assert unlocked.value.reason == "NOT_LOCKED"


def test_add_verifies_a_full_pin_and_moves_a_locked_dataset(tmp_path):
    repo, path = _repo(), tmp_path / "cas.lock"
    repo.commit("ds", base=None, add=[_case("p-1", 0)], author=AUTHOR)
    repo.commit("ds", base=1, add=[_case("p-1", 1)], author=AUTHOR)
    with pytest.raises(FailedPrecondition) as mismatch:
        lockfile.add(repo, path, "ds@1#b3:" + "0" * 64)
    assert mismatch.value.reason == "PIN_MISMATCH" and not path.exists()
    lockfile.add(repo, path, str(repo.pin("ds", 1)))
    move = lockfile.add(repo, path, "ds@2")
    assert (move.old.version, move.new.version) == (1, 2)
    assert lockfile.resolve("ds", path).pin == repo.pin("ds", 2)
    with pytest.raises(InvalidArgument) as unlocked:
        lockfile.resolve("nope", path)
    assert unlocked.value.reason == "NOT_LOCKED" and "cas lock add nope@N" in \
        unlocked.value.message
    assert lockfile.remove(path, "ds") == repo.pin("ds", 2) and lockfile.read(path) == {}


OPS = st.lists(st.one_of(
    st.tuples(st.just("commit"), st.sampled_from(["p-1", "p-2", "p-3"])),
    st.tuples(st.just("erase"), st.sampled_from(["p-1", "p-2", "p-3"])),
    st.tuples(st.just("renew"), st.none()),
    st.tuples(st.just("retire"), st.none())), min_size=1, max_size=8)


def _play(repo, ops) -> None:
    n = 0
    for op, person in ops:
        head = repo.head("ds")
        try:
            if op == "commit":
                n += 1
                repo.commit("ds", base=head or None, add=[_case(person, n)], author=AUTHOR)
            elif op == "erase":
                _erase(repo, person)
            elif op == "renew":
                repo.renew("ds", author=AUTHOR)
            elif head:
                repo.retire("ds", head, "contaminated", "leaked", author=AUTHOR)
        except FailedPrecondition:
            pass  # nothing to renew, or already retired: the world goes on


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, pinned=st.integers(1, 9), wrong=st.booleans(), renew=st.booleans())
def test_update_never_leaves_a_retired_pin_that_has_a_successor_and_check_never_passes_one(
        tmp_path_factory, ops, pinned, wrong, renew):
    repo = _repo()
    repo.commit("ds", base=None, add=[_case("p-1", 0)], author=AUTHOR)
    _play(repo, ops)
    number = min(pinned, repo.head("ds"))
    digest = "b3:" + "e" * 64 if wrong else repo.version("ds", number).content_digest
    path = tmp_path_factory.mktemp("lock") / "cas.lock"
    lockfile.write(path, {"ds": LockEntry(Pin("ds", number, digest))})
    retired = repo.version_state("ds", number) == "RETIRED"
    [checked] = lockfile.check(repo, path)
    assert checked.ok == (not retired and not wrong)
    before = path.read_bytes()
    try:
        lockfile.update(repo, path, renew=renew, author=AUTHOR)
    except CasError as exc:
        assert path.read_bytes() == before  # refused: the lock is unchanged
        assert exc.reason in ("NO_SUCCESSOR", "PIN_MISMATCH")
        if exc.reason == "NO_SUCCESSOR":
            with pytest.raises(FailedPrecondition):
                repo.renewed_to("ds", number)
        return
    pin = lockfile.read(path)["ds"].pin
    # after an update the pin is ACTIVE (a retired one with a successor always moved), and it
    # moved only along renewals: never to a plain later version
    assert repo.version_state("ds", pin.version) == "ACTIVE"
    if pin.version != number:
        assert [r.number for r in repo.renewal_path("ds", number)][-1] == pin.version
    assert [c.ok for c in lockfile.check(repo, path)] == [True]


# -- the lock at a git revision --------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_lock_at_a_git_revision(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=A", "-c",
                        "user.email=a@example.com", *args], check=True, capture_output=True)
    path = tmp_path / "cas.lock"
    with pytest.raises(FailedPrecondition) as not_git:
        lockfile.read_at_ref(path)
    assert not_git.value.reason == "NOT_A_GIT_REPOSITORY"
    git("init", "-q")
    git("commit", "-q", "--allow-empty", "-m", "empty")
    assert lockfile.read_at_ref(path) == {}  # not in that commit: every dataset is added
    old = {"ds": LockEntry(Pin("ds", 1, "b3:" + "1" * 64))}
    lockfile.write(path, old)
    git("add", "cas.lock")
    git("commit", "-q", "-m", "lock")
    lockfile.write(path, {"ds": LockEntry(Pin("ds", 2, "b3:" + "2" * 64))})
    assert lockfile.read_at_ref(path, "HEAD") == old
    assert lockfile.read_at_ref(path, "HEAD~1") == {}
    for ref in ("no-such-branch", "--output=x"):
        with pytest.raises(InvalidArgument) as bad:
            lockfile.read_at_ref(path, ref)
        assert bad.value.reason == "INVALID_GIT_REF"
