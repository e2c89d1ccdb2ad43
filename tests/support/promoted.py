"""Versions promoted from recorded runs of three tenants, a dataset of hand-authored cases, and
the cases of a run in a version: what the tests of reads share, the library's
(tests/repo/test_reads.py) and the commands' (tests/cli/)."""

from __future__ import annotations

import cas
from support.lifecycle import promote_and_seal, review, run_obj

ADA = "Ada <ada@example.com>"


def promoted_runs(location: str, monkeypatch) -> cas.Repository:
    """evals@1 promoted from r-1 (acme) and r-2 (globex); evals@2 adds r-3 (the first two are
    carried: their provenance is that of evals@1); evals@3 adds r-1 again, frozen under
    another content policy, so it holds two cases of r-1. Ada does all of it, at `location`."""
    monkeypatch.setenv("CAS_USER", ADA)
    repo = cas.init(location)
    repo.import_runs([run_obj("r-1", 1), run_obj("r-2", 2, tenant="globex",
                                                   outcome={"status": "failure"}),
                      run_obj("r-3", 3, tenant="initech", outcome=None)])
    anns = {r: review(repo, r) for r in ("r-1", "r-2", "r-3")}
    repo.create_dataset("evals", admission="direct")
    promote_and_seal(repo, anns, ["r-1", "r-2"], "k1")
    promote_and_seal(repo, anns, ["r-3"], "k2")
    repo.set_content_policy(["tool_results"])
    promote_and_seal(repo, anns, ["r-1"], "k3")
    return repo


def make_gold(repo):
    """A dataset whose cases are committed directly (hand-authored: no run)."""
    try:
        repo.create_dataset("gold", admission="direct")
    except TypeError:  # before datasets had an admission rule
        repo.create_dataset("gold", admission="direct")
    return repo.commit("gold", base=None, add=[
        {"input": "q1", "tenant": "hand", "outcome": "pass"}, {"input": "q2"}])


def case_of(repo, number, run_id):
    """The case ids of evals@number whose bytes name `run_id`."""
    ids = repo.items("evals", number, limit=500).items
    return [i for i in ids if repo.case("evals", number, i).run_id == run_id]
