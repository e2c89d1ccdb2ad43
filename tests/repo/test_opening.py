"""Creating, opening and finding a repository (cas/repo/opening.py): `init` refuses a location
that holds one; opening reads and never writes; an erasure left pending is finished by the next
writer, and reads refuse what it names meanwhile (docs/concepts.md, "Opening a repository"; a
command's refusal: tests/cli/test_datasets_and_versions.py)."""

from __future__ import annotations

import pytest

import cas
from support.lifecycle import PERSON, pending_erasure, snapshot
from support.sample_cases import case_id

pytestmark = pytest.mark.usefixtures("as_reviewer")


@pytest.fixture
def pending(monkeypatch):
    """A repository whose erasure of PERSON crashed right after storing its plan: (backend,
    the erased run's case id)."""
    return pending_erasure(monkeypatch)


def test_opening_and_reading_never_write_and_refuse_what_the_erasure_names(pending):
    backend, case_id = pending
    before = snapshot(backend)
    (plan,) = backend.list("erasures/pending/")
    repo = cas.Repository(backend)
    for read in (lambda: repo.case("evals", 1, case_id), lambda: repo.object(case_id),
                 lambda: repo.object_bytes(case_id), lambda: repo.run("r-0"),
                 lambda: repo.reviews("r-0")):
        with pytest.raises(cas.FailedPrecondition) as refused:
            read()
        assert refused.value.reason == "ERASURE_PENDING"
        assert plan == f"erasures/pending/{refused.value.fields['erasure']}"
    # what the erasure does not name reads as before
    assert repo.run("r-1").person == "other"
    assert len(repo.items("evals", 1).items) == 2
    assert repo.fsck().ok
    assert repo.gc(dry_run=True, grace=0).dry_run
    assert snapshot(backend) == before  # nothing at all was written


def test_the_next_writer_finishes_the_erasure_first(pending):
    backend, case_id = pending
    repo = cas.Repository(backend)
    repo.create_dataset("later")  # any operation that stores
    assert not list(backend.list("erasures/pending/"))
    (done,) = repo.erasures()
    assert done.cases == [case_id]
    assert repo.version_state("evals", 1) == "RETIRED"
    with pytest.raises(cas.NotFound):
        repo.run("r-0")
    assert PERSON.encode() not in b"".join(snapshot(backend).values())
    assert repo.fsck().ok


def test_finish_erasures_completes_it_alone(pending):
    backend, _ = pending
    repo = cas.Repository(backend)
    (done,) = repo.finish_erasures()
    assert repo.erasures() == [done]
    assert repo.finish_erasures() == []  # nothing left to finish



def test_open_missing_repository_not_found(tmp_path):
    with pytest.raises(cas.NotFound) as info:
        cas.open(str(tmp_path))
    assert info.value.code == "NOT_FOUND"
    with pytest.raises(cas.NotFound):
        cas.open(str(tmp_path / "nowhere"))
    assert not (tmp_path / ".cas").exists()


def test_a_repository_this_process_may_not_read_is_permission_denied(tmp_path, monkeypatch):
    """Not "no repository, run cas init": the user can fix the mode, and must not init over it.
    (The tests may run as root, whom modes do not stop: the refusal is injected at the open.)"""
    cas.init(str(tmp_path))
    config = str(tmp_path / ".cas" / "config")
    real_open = open

    def refusing(file, *args, **kwargs):
        if str(file) == config:
            raise PermissionError(13, "Permission denied", config)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refusing)
    for attempt in (lambda: cas.open(str(tmp_path)), lambda: cas.find(str(tmp_path / "sub"))):
        with pytest.raises(cas.PermissionDenied) as info:
            attempt()
        assert info.value.code == "PERMISSION_DENIED"
        assert info.value.fields["location"] == str(tmp_path / ".cas")
        assert "cannot open the repository at" in info.value.message


def test_init_twice_already_exists(tmp_path):
    repo = cas.init(str(tmp_path))
    assert (tmp_path / ".cas" / "config").is_file()
    with pytest.raises(cas.AlreadyExists) as info:
        cas.init(str(tmp_path))
    assert info.value.code == "ALREADY_EXISTS"
    # The first repository is untouched and opens (by the dir or by .cas itself).
    assert cas.open(str(tmp_path)).config == repo.config
    assert cas.open(str(tmp_path / ".cas")).config == repo.config
    with pytest.raises(cas.AlreadyExists):
        cas.Repository.create(repo.backend)


def test_open_reads_what_another_handle_wrote(tmp_path):
    a = cas.init(str(tmp_path))
    a.create_dataset("ds", admission="direct")
    b = cas.open(str(tmp_path))
    assert b.store.indexes() == []  # b has listed the (no) packs before a writes one
    a.commit("ds", base=None, add=[{"input": 1}])
    # b listed the packs before a wrote one: it must still find the new objects.
    assert b.items("ds", 1).items == [case_id({"input": 1})]
    assert b.case("ds", 1, case_id({"input": 1})).input == 1
