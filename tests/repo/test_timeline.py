"""The timeline and the state of work (cas/repo/timeline.py): every event, newest first and in
pages, and what is waiting (`cas log`, `cas status`: tests/cli/test_datasets_and_versions.py)."""

from __future__ import annotations

import io
import json

import pytest

import cas
from support.lifecycle import jsonl, promote_and_seal, review, run_obj

pytestmark = pytest.mark.usefixtures("as_reviewer")


@pytest.fixture
def lived(mem):
    """evals@1 promoted, @2 committed then retired, an experiment and a score batch on @1,
    scratch@1 deleted, and the erasure of the person of one run."""
    repo = mem
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-0"), run_obj("r-1", 1, person="p-9"))))
    anns = {r: review(repo, r) for r in ("r-0", "r-1")}
    repo.create_dataset("evals", admission="direct")
    promote_and_seal(repo, anns, ["r-0"], "k")
    repo.commit("evals", base=1, add=[{"input": "golden"}], message="a golden case")
    repo.retire("evals", 2, "contaminated", "leaked")
    pin = repo.pin("evals", 1)
    repo.create_experiment("evals", 1, "baseline")
    repo.record_scores(pin, [{"metric": "ok", "value": 1, "experiment": "baseline"}])
    repo.create_dataset("scratch", admission="direct")
    repo.commit("scratch", base=None, add=[{"input": "x"}])
    repo.delete_version("scratch", 1)
    token = repo.erase("p-9")["confirm_token"]
    repo.erase("p-9", token)
    return repo


def test_the_log_is_every_event_newest_first_and_pages(lived):
    entries = lived.log().entries
    kinds = [e["kind"] for e in entries]
    # (scratch@1's seal is gone with its record: its deletion stands for it)
    assert sorted(kinds) == sorted(["seal", "seal", "retirement", "experiment", "scores",
                                    "deletion", "erasure"])
    assert [e["at"] for e in entries] == sorted((e["at"] for e in entries), reverse=True)
    (erased,) = [e for e in entries if e["kind"] == "erasure"]
    assert erased["cases"] == 0 and erased["runs"] == 1 and erased["retired"] == []
    assert "p-9" not in json.dumps(entries)  # an erasure entry never names the person
    first = lived.log(limit=3)
    rest = lived.log(limit=50, cursor=first.next_cursor)
    assert first.entries + rest.entries == entries and rest.next_cursor is None
    evals = lived.log("evals").entries
    assert {e["dataset"] for e in evals} == {"evals"}
    assert [e["kind"] for e in evals if e["kind"] == "seal"] == ["seal", "seal"]


def test_the_log_refuses_what_it_cannot_read(lived):
    for bad in ({"limit": 0}, {"limit": 501}, {"dataset": "nope"}):
        with pytest.raises(cas.CasError):
            lived.log(**bad)


def test_status_names_what_is_waiting(lived):
    lived.import_runs([run_obj("r-2", 2), run_obj("r-3", 3)])
    ann = review(lived, "r-3")
    p = lived.promote("evals", [{"subject_kind": "agent_run", "subject_ref": "r-3",
                                 "review_annotation_id": ann}], "staged-and-left")
    s = lived.status()
    assert s["runs_awaiting_review"] == 1 and s["first_runs_awaiting_review"] == ["r-2"]
    assert s["pending_erasures"] == []
    assert [(x["dataset"], x["confirm_token"], x["changes"]) for x in s["staged_proposals"]] \
        == [("evals", p["confirm_token"], 1)]
    lived.seal("evals", p["confirm_token"])
    assert lived.status()["staged_proposals"] == []
