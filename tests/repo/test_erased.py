"""Who was erased (cas/repo/erased.py), and erasures that stay erased (runs.py, sealing.py,
erasure.py): an import or a direct commit naming an erased person is refused before anything is
stored, unless the import admits them deliberately (`run.admission`); erasing an id that matches
nothing writes nothing (the commands' wording: tests/cli/test_erasure_and_retirement.py,
tests/cli/test_runs.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas.format.keys import admission_key, import_key
from cas.format.records import RunAdmission, parse_record_file
from cas.storage.backends.memory import MemoryBackend
from support.lifecycle import OPERATOR, run_obj

pytestmark = pytest.mark.usefixtures("as_operator")

ALICE, BOB = "alice@example.org", "bob-17"


def everything(repo) -> dict[str, bytes]:
    """Every key with its bytes: a refusal must leave them all as they were."""
    return {k: repo.backend.get(k) for k in sorted(repo.backend.list(""))}


def direct(repo, name: str):
    """A dataset that takes direct commits."""
    return repo.create_dataset(name, admission="direct")


def erased_alice(repo):
    """Alice's and Bob's runs imported, Alice erased; returns her erasure record."""
    repo.import_runs([run_obj("a-1", 1, person=ALICE), run_obj("b-1", 2, person=BOB)])
    return repo.erase(ALICE, repo.erase(ALICE)["confirm_token"])


# -- (a) refused on re-import and direct commit ---------------------------------------------
def test_reimport_after_erase_is_refused_naming_the_run(mem):
    record = erased_alice(mem)
    before = everything(mem)
    with pytest.raises(cas.FailedPrecondition) as info:
        mem.import_runs([run_obj("b-2", 3, person=BOB), run_obj("a-1", 1, person=ALICE)])
    e = info.value
    assert e.reason == "PERSON_ERASED_BEFORE"
    assert e.fields == {"run_id": "a-1", "erased_at": record.erased_at, "erasure": record.id}
    assert e.message == (
        f"run 'a-1' names person {ALICE!r}, erased at {record.erased_at} (erasure {record.id}); "
        "nothing was stored. Bringing their data back needs their new consent: admit them "
        f"deliberately with --allow-erased-person {ALICE} (allow_erased_persons)")
    assert record.person not in e.message  # never the keyed digest, as if it were the person
    assert everything(mem) == before
    assert mem.runs() == ["b-1"]
    # data of anyone else still imports
    assert mem.import_runs([run_obj("b-2", 3, person=BOB)]) == (["b-2"], 0)


def test_allow_erased_person_admits_for_that_import_only(mem):
    record = erased_alice(mem)
    result = mem.import_runs([run_obj("a-1", 1, person=ALICE), run_obj("b-2", 3, person=BOB)],
                             allow_erased_persons=[ALICE, "never-erased"])
    assert result == (["a-1", "b-2"], 0)
    admissions = [k for k in mem.backend.list("runs/admissions/")]
    assert admissions == [admission_key(2)]  # beside import 2, which it speaks for
    admission = parse_record_file(mem.backend.get(admission_key(2)), RunAdmission, "a")
    assert (admission.number, admission.persons, admission.author) == (2, [record.person],
                                                                        OPERATOR)
    assert mem.backend.exists(import_key(2))
    report = mem.fsck()
    assert report.ok and not report.problems, report.problems
    # the same file again: nothing new, nobody brought back, nothing refused
    assert mem.import_runs([run_obj("a-1", 1, person=ALICE)]) == ([], 1)
    # new data of theirs needs its own admission
    with pytest.raises(cas.FailedPrecondition) as info:
        mem.import_runs([run_obj("a-2", 4, person=ALICE)])
    assert (info.value.reason, info.value.fields["run_id"]) == ("PERSON_ERASED_BEFORE", "a-2")
    # an import naming nobody erased writes no admission, even when it allows someone
    mem.import_runs([run_obj("b-3", 5, person=BOB)], allow_erased_persons=[ALICE])
    assert list(mem.backend.list("runs/admissions/")) == [admission_key(2)]


def test_allow_erased_persons_is_checked(mem):
    for bad in ("alice", [""], [None], ["x" * 513]):
        with pytest.raises(cas.InvalidArgument):
            mem.import_runs([run_obj("r-1")], allow_erased_persons=bad)
    assert mem.runs() == []


def test_an_import_that_loses_its_number_admits_again_at_the_next(mem):
    """The admission names the number its import record then takes: if another import takes
    that number first, the admission is written again for the next one."""
    erased_alice(mem)
    backend = mem.backend
    other = cas.Repository(backend)
    real = backend.put_if_absent
    raced = []

    def racing(key, data):
        if key == import_key(2) and not raced:
            raced.append(key)
            other.import_runs([run_obj("b-9", 9, person=BOB)], author="Other <o@example.com>")
        return real(key, data)
    backend.put_if_absent = racing
    try:
        mem.import_runs([run_obj("a-1", 1, person=ALICE)], allow_erased_persons=[ALICE])
    finally:
        backend.put_if_absent = real
    assert raced
    assert list(backend.list("runs/admissions/")) == [admission_key(2), admission_key(3)]
    ours = parse_record_file(backend.get(import_key(3)), cas.format.records.RunImport, "i")
    assert [e.run_id for e in ours.runs] == ["a-1"]
    assert mem.runs() == ["a-1", "b-1", "b-9"]
    assert mem.fsck().ok


def test_a_direct_commit_naming_an_erased_person_is_refused(mem):
    direct(mem, "golden")
    mem.commit("golden", base=None, add=[{"input": "a", "person": ALICE}])
    record = mem.erase(ALICE, mem.erase(ALICE)["confirm_token"])
    before = everything(mem)
    case = cas.encode_case({"input": "again", "person": ALICE})
    with pytest.raises(cas.FailedPrecondition) as info:
        mem.commit("golden", base=1, add=[{"input": "fine", "person": BOB},
                                          {"input": "again", "person": ALICE}])
    assert info.value.reason == "PERSON_ERASED_BEFORE"
    assert info.value.fields == {"case_id": case.case_id, "erased_at": record.erased_at,
                                 "erasure": record.id}
    assert info.value.message.startswith(f"case {case.case_id} names person {ALICE!r}, erased")
    assert everything(mem) == before
    assert mem.commit("golden", base=1, add=[{"input": "fine", "person": BOB}]).number == 2


# hypothesis: any mix of erased and other persons, any admissions: all or nothing
_SEED: dict[str, bytes] = {}
PEOPLE = [ALICE, BOB, "carol", None]  # Alice and Carol are erased
ERASED = {ALICE, "carol"}


def _seeded() -> cas.Repository:
    if not _SEED:
        repo = cas.Repository.create(MemoryBackend())
        repo.import_runs([run_obj("s-a", 0, person=ALICE), run_obj("s-c", 1, person="carol")])
        for p in ERASED:
            repo.erase(p, repo.erase(p)["confirm_token"])
        _SEED.update(everything(repo))
    backend = MemoryBackend()
    for k, v in _SEED.items():
        backend.put_if_absent(k, v)
    return cas.Repository(backend)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(persons=st.lists(st.sampled_from(PEOPLE), min_size=1, max_size=6),
       allowed=st.sets(st.sampled_from([ALICE, BOB, "carol"])))
def test_any_mix_of_persons_is_all_or_nothing(persons, allowed):
    repo = _seeded()
    before = everything(repo)
    runs = [run_obj(f"x-{i}", i, person=p) for i, p in enumerate(persons)]
    refused = [f"x-{i}" for i, p in enumerate(persons) if p in ERASED and p not in allowed]
    if refused:
        with pytest.raises(cas.FailedPrecondition) as info:
            repo.import_runs(runs, allow_erased_persons=sorted(allowed))
        assert info.value.reason == "PERSON_ERASED_BEFORE"
        assert info.value.fields["run_id"] in refused
        assert everything(repo) == before
        return
    repo.import_runs(runs, allow_erased_persons=sorted(allowed))
    assert repo.runs() == sorted(r["run_id"] for r in runs)
    back = {repo.store.person_digest(p) for p in persons if p in ERASED}
    admitted = list(repo.backend.list("runs/admissions/"))
    if back:
        [key] = admitted
        assert parse_record_file(repo.backend.get(key), RunAdmission, key).persons == \
            sorted(back)
    else:
        assert admitted == []


# -- (b) erasing an id that matches nothing -------------------------------------------------
def test_erasing_an_id_that_matches_nothing_writes_nothing(mem):
    erased_alice(mem)
    before = everything(mem)
    preview = mem.erase("nobody@example.com")
    assert preview["matched"] is False
    assert preview["warnings"] == ["nothing matched nobody@example.com: no case, run or review "
                                   "names this person id; confirming erases nothing and "
                                   "records nothing"]
    assert preview["cases"] == preview["runs"] == preview["versions_to_retire"] == []
    with pytest.raises(cas.FailedPrecondition) as info:
        mem.erase("nobody@example.com", preview["confirm_token"])
    assert info.value.reason == "NOTHING_TO_ERASE"
    assert everything(mem) == before
    assert len(mem.erasures()) == 1
    # and so an id that matched nothing is never refused on import later
    mem.import_runs([run_obj("n-1", person="nobody@example.com")])
    assert mem.erase(ALICE)["matched"] is False  # already erased: nothing left to match
