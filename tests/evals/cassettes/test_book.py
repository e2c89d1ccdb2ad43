"""The cassettes of a repository's versions (cas/evals/cassettes/book.py): a pinned version's
cassettes under an executor, recorded from the version and replayed through the runner, stale
and unused exchanges, one log batch per save; checked by fsck, kept by gc, mirrored, erased
with the case's person; through the pytest plugin, on each backend (through the CLI:
tests/cli/test_cassette.py)."""

from __future__ import annotations

import msgspec
import pytest

import cas
from cas.evals import cassettes
from cas.evals.cassettes import LIVE, RECORD, RECORD_MISSING, REPLAY, CassetteBook
from cas.evals.suites import COMPLETED, ERRORED, EXIT_ERRORED, Run, Suite, SuiteRunner, echo
from cas.storage.backends.memory import MemoryBackend
from support.evals import ADA, all_bytes, cassette_repo, frozen, pin, run_version, search

pytest_plugins = ["pytester"]


@pytest.fixture
def repo():
    return cassette_repo()


def test_cas_cassette_records_from_the_version_then_replays_it(repo):
    result, book = run_version(repo, RECORD_MISSING)
    assert result.ok and book.pending == 0
    current = cassettes.current(repo, "evals")
    assert len(current) == 3 and {e for _, e in current} == {"cas:cassette"}
    case_id = repo.items("evals", 1).items[0]
    record = cassettes.read(repo, "evals", case_id, "cas:cassette")
    assert record.case_id == case_id and record.person is not None
    assert [e.name for e in record.exchanges] == ["search", "open"]
    assert record.exchanges[1].response == {}  # the call recorded no answer
    again, _ = run_version(repo, REPLAY)
    assert again.ok and again.digest == result.digest
    assert len(cassettes.cassette_logs(repo, "evals")) == 1  # nothing changed: nothing stored
    assert repo.fsck().ok

def test_replay_without_a_cassette_errors_every_case_with_the_reason(repo):
    result, _ = run_version(repo, REPLAY)
    assert result.counts[ERRORED] == 3 and result.exit_code == EXIT_ERRORED
    assert all("StaleCassette" in r.reason and "is empty" in r.reason for r in result.results)
    assert cassettes.cassette_logs(repo, "evals") == []

def test_a_changed_case_is_stale_and_an_unused_exchange_errors_in_strict_mode(repo):
    run_version(repo, RECORD)

    async def drifted(case, *, run_id, cassette):
        tool = cassette.wrap(lambda arguments: None, "search")  # as cas:cassette asks
        q = case.frozen.steps[0]["arguments"]["q"]
        tool(arguments={"q": q + 100 if case.input == "task 0" else q})
        return Run("x", case.tenant)
    result, _ = run_version(repo, REPLAY, drifted, "cas:cassette")
    by_input = {repo.case("evals", 1, r.id).input: r for r in result.results}
    assert by_input["task 0"].outcome == ERRORED
    assert ('differs at /arguments/q, character 19 of its canonical JSON: recorded '
            '{"arguments":{"q":0}} requested {"arguments":{"q":100}}') in by_input["task 0"].reason
    # the others made the search call but never the recorded `open`: strict says so
    assert by_input["task 1"].outcome == ERRORED and "never requested" in by_input["task 1"].reason
    lenient, _ = run_version(repo, REPLAY, drifted, "cas:cassette", strict=False)
    assert [r.outcome for r in lenient.results].count(COMPLETED) == 2

def test_cassettes_are_per_executor_and_a_rerecording_supersedes(repo):
    run_version(repo, RECORD)

    async def mine(case, *, run_id, cassette):
        return Run(cassette.wrap(search, "search")(case.input), case.tenant)
    first, _ = run_version(repo, RECORD, mine, "pkg.mod:mine")
    assert first.ok and len(cassettes.current(repo, "evals")) == 6
    assert run_version(repo, REPLAY, mine, "pkg.mod:mine")[0].digest == first.digest
    run_version(repo, RECORD, mine, "pkg.mod:mine")  # the same exchanges: nothing new
    assert len(cassettes.cassette_logs(repo, "evals")) == 2

def test_saving_refuses_a_case_outside_the_version_and_a_retired_version(repo):
    repo.commit("evals", base=1, add=[frozen(9)], author=ADA)
    old = repo.items("evals", 1).items
    new_case = next(c for c in repo.items("evals", 2).items if c not in old)
    with pytest.raises(cas.NotFound):
        cassettes.save(repo, pin(repo), "x:y", {new_case: []})
    repo.retire("evals", 1, "CONTAMINATED", "leaked")
    with pytest.raises(cas.FailedPrecondition):
        CassetteBook(repo, pin(repo), "x:y", REPLAY)
    assert cassettes.cassette_logs(repo, "evals") == []

def test_a_suite_that_is_not_a_pin_needs_live_mode():
    s = Suite("demo", "v1", [{"id": "c1", "input": 1, "tenant": "acme"}])
    with pytest.raises(cas.FailedPrecondition) as e:
        CassetteBook(None, s.version, "x:y", REPLAY)
    assert e.value.reason == "SUITE_NOT_PINNED"

    async def agent(case, *, run_id, cassette):
        return Run(cassette.wrap(search, "search")(case.input), case.tenant)
    r = SuiteRunner(agent, cassettes=CassetteBook(None, s.version, "x:y", LIVE)).run(s)
    assert r.ok and r.results[0].answer == {"hits": ["1-0", "1-1"]}
    with pytest.raises(cas.InvalidArgument) as e:
        SuiteRunner(echo, cassettes=CassetteBook(None, s.version, "x:y", LIVE))
    assert e.value.reason == "CASSETTE_UNUSED_BY_EXECUTOR"

def test_fsck_checks_cassettes_and_gc_keeps_them(repo):
    run_version(repo, RECORD)
    assert repo.fsck().ok
    report = repo.gc(grace=0)
    assert report.objects_deleted == 0 and repo.fsck().ok
    assert run_version(repo, REPLAY)[0].ok
    # a log entry naming a missing cassette is damage
    [log] = cassettes.cassette_logs(repo, "evals")
    bogus = msgspec.structs.replace(log.entries[0], cassette="b3:" + "0" * 64)
    forged = msgspec.structs.replace(log, number=2, entries=[bogus])
    from cas.format.keys import cassette_log_key
    from cas.format.records import format_record_file
    repo.backend.put_if_absent(cassette_log_key("evals", 2), format_record_file(forged))
    problems = [p for p in repo.fsck().problems if p.severity == "error"]
    assert len(problems) == 1 and "is missing" in problems[0].message

def test_erasing_the_person_deletes_their_cassettes_everywhere(repo):
    run_version(repo, RECORD)
    assert b"PAYLOAD-1" in all_bytes(repo)
    preview = repo.erase("user-1")
    assert preview["cassettes"] == 1
    repo.erase("user-1", confirm_token=preview["confirm_token"], author=ADA)
    stored = all_bytes(repo)
    assert b"PAYLOAD-1" not in stored and b"user-1" not in stored
    assert b"PAYLOAD-0" in stored and b"PAYLOAD-2" in stored
    assert repo.fsck().ok
    with pytest.raises(cas.FailedPrecondition):  # the version that held it is retired
        CassetteBook(repo, pin(repo), "cas:cassette", REPLAY)

def test_a_recording_kept_while_its_person_was_erased_is_refused_not_stored(repo):
    book = CassetteBook(repo, pin(repo), "cas:cassette", RECORD)
    case_id = next(c for c in repo.items("evals", 1).items
                   if repo.case("evals", 1, c).person == "user-1")
    cassette = book.cassette(case_id)
    cassette.call("search", {"q": 1}, lambda: ["PAYLOAD-LATE"])
    book.keep(case_id, cassette)
    repo.erase("user-1", confirm_token=repo.erase("user-1")["confirm_token"], author=ADA)
    with pytest.raises(cas.FailedPrecondition) as e:
        book.save()
    assert e.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"
    assert b"PAYLOAD-LATE" not in all_bytes(repo) and repo.fsck().ok

def test_a_mirror_copies_the_cassettes(repo, tmp_path):
    run_version(repo, RECORD)
    from cas.repo import mirror
    dst = MemoryBackend()
    mirror.mirror(repo.backend, dst)
    copy = cas.Repository(dst)
    assert copy.fsck().ok and cassettes.current(copy, "evals") == cassettes.current(repo, "evals")
    assert run_version(copy, REPLAY)[0].ok


# -- the plugin ------------------------------------------------------------------------------
PLUGIN_TEST = """
import pytest

def lookup(q):
    import os
    if os.environ.get("NO_LIVE"):
        raise AssertionError("a live call")
    return {{"q": q, "hits": 2}}

@pytest.mark.cas_suite({pin!r})
def test_agent(cas_case, cas_cassette):
    tool = cas_cassette.wrap(lookup, "lookup")
    assert tool(cas_case.input)["hits"] == 2
"""

def test_the_plugin_fixture_records_then_replays(pytester, tmp_path, monkeypatch):
    monkeypatch.setenv("CAS_USER", ADA)
    location = str(tmp_path / "repo")
    r = cas.init(location)
    r.create_dataset("evals", admission="direct")
    r.commit("evals", base=None, add=[frozen(i) for i in range(2)], author=ADA)
    pytester.makepyfile(test_agent=PLUGIN_TEST.format(pin=str(r.pin("evals", 1))))
    first = pytester.runpytest_inprocess("--cas-repo", location, "--cas-cassette-mode",
                                         "record-missing", "-p", "no:randomly")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(
        ["*cas: recorded 2 cassettes of *test_agent.py::test_agent on evals@1*"])
    monkeypatch.setenv("NO_LIVE", "1")
    second = pytester.runpytest_inprocess("--cas-repo", location, "--cas-cassette-mode",
                                          "replay", "-p", "no:randomly")
    second.assert_outcomes(passed=2)
    assert len(cassettes.current(cas.open(location), "evals")) == 2

def test_cassettes_on_each_backend_mirror_and_erase(location, tmp_path, monkeypatch):
    """On a local directory and on S3 (SeaweedFS): recorded, replayed, mirrored to a local
    copy, and erased with their person in every byte of the repository."""
    from cas.repo import mirror
    monkeypatch.setenv("CAS_USER", ADA)
    r = cas.init(location)
    r.create_dataset("evals", admission="direct")
    r.commit("evals", base=None, add=[frozen(i) for i in range(3)], author=ADA)
    assert run_version(r, RECORD)[0].ok and run_version(r, REPLAY)[0].ok
    copy_at = str(tmp_path / "copy")
    mirror.copy(location, copy_at)
    copy = cas.open(copy_at)
    assert copy.fsck().ok and run_version(copy, REPLAY)[0].ok
    r.erase("user-2", confirm_token=r.erase("user-2")["confirm_token"], author=ADA)
    stored = b"".join(r.backend.get(k) for k in r.backend.list(""))
    assert b"PAYLOAD-2" not in stored and b"PAYLOAD-1" in stored and r.fsck().ok
