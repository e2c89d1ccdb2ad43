"""The cassette log (cas/repo/cassettes.py): a save stores one object per case and one log record
naming the cassettes that changed; the newest entry of each (case, executor) is in force; a
cassette erased with its person reads as none; refusals store nothing."""

from __future__ import annotations

import pytest

import cas
from cas.format.keys import cassette_log_key
from cas.format.records import CassetteExchange, CassetteRecord, parse_record_file
from cas.repo import cassettes
from support.evals import ADA, all_bytes, cassette_repo, pin


def exchange(query: str, answer) -> CassetteExchange:
    return CassetteExchange(adapter="call", name="search", key=f"b3:{'0' * 64}",
                            request={"q": query}, response=answer)


@pytest.fixture
def repo():
    return cassette_repo()


def test_a_save_stores_a_cassette_per_case_and_one_log_record(repo):
    ctx = repo.context
    first, second = repo.items("evals", 1).items[:2]
    log = cassettes.save(ctx, pin(repo), "x:y", {second: [exchange("b", 2)],
                                                  first: [exchange("a", 1)]}, author=ADA)
    assert (log.dataset, log.number, log.author) == ("evals", 1, ADA)
    assert [e.case_id for e in log.entries] == sorted([first, second])  # in case order
    key = cassette_log_key("evals", 1)
    stored = parse_record_file(repo.backend.get(key), type(log), key)
    assert stored == log and cassettes.cassette_logs(ctx, "evals") == [log]
    record = cassettes.read(ctx, "evals", first, "x:y")
    assert isinstance(record, CassetteRecord) and record.exchanges == [exchange("a", 1)]
    assert record.person == repo.case("evals", 1, first).person  # erased with its person
    assert cassettes.read(ctx, "evals", first, "other:executor") is None


def test_only_what_changed_is_logged_and_the_newest_entry_is_in_force(repo):
    ctx = repo.context
    case_id = repo.items("evals", 1).items[0]
    old = cassettes.save(ctx, pin(repo), "x:y", {case_id: [exchange("a", 1)]})
    assert cassettes.save(ctx, pin(repo), "x:y", {case_id: [exchange("a", 1)]}) is None
    new = cassettes.save(ctx, pin(repo), "x:y", {case_id: [exchange("a", 2)]})
    assert (old.number, new.number) == (1, 2)
    in_force = cassettes.current(ctx, "evals")
    assert in_force == {(case_id, "x:y"): new.entries[0].cassette}
    assert cassettes.load(ctx, new.entries[0].cassette).exchanges == [exchange("a", 2)]
    assert cassettes.load(ctx, "b3:" + "1" * 64) is None  # none stored (or erased)


def test_refusals_store_nothing(repo):
    ctx = repo.context
    repo.commit("evals", base=1, add=[{"input": "late", "tenant": "acme"}], author=ADA)
    outside = next(c for c in repo.items("evals", 2).items
                   if c not in repo.items("evals", 1).items)
    before = all_bytes(repo)
    with pytest.raises(cas.NotFound):
        cassettes.save(ctx, pin(repo), "x:y", {outside: []})
    forged = pin(repo).replace("evals@1", "evals@2")
    with pytest.raises(cas.FailedPrecondition) as e:
        cassettes.save(ctx, forged, "x:y", {})
    assert e.value.reason == "PIN_MISMATCH"
    with pytest.raises(cas.InvalidArgument):
        cassettes.save(ctx, pin(repo), 7, {})  # an executor is named by text
    assert all_bytes(repo) == before
    with pytest.raises(cas.NotFound):
        cassettes.cassette_logs(ctx, "no-such-dataset")
