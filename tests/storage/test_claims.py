"""Claim loops are bounded: against a backend whose conditional writes of numbered records
always conflict, every claiming operation gives up with ABORTED naming what contended."""

from __future__ import annotations

import re
import time

import pytest

import cas
from cas.storage import claims
from cas.storage.backends.memory import MemoryBackend

# The numbered records claimed by create-if-absent: versions, citation logs, run imports,
# review batches, settings revisions.
CLAIMED = re.compile(r"(datasets/[^/]+/(versions|scores|experiments)/|runs/imports/|reviews/"
                     r"|settings/)")


class AlwaysTaken(MemoryBackend):
    """Every claim of a numbered record finds the number taken (and nothing is written)."""

    contended = False

    def put_if_absent(self, key, data):
        if self.contended and CLAIMED.match(key):
            return False
        return super().put_if_absent(key, data)


@pytest.fixture
def repo(monkeypatch):
    monkeypatch.setattr(claims, "MAX_PAUSE", 0.001)  # the bound, not the pauses, is tested
    backend = AlwaysTaken()
    repo = cas.Repository.create(backend)
    repo.create_dataset("ds", author="a", admission="direct")
    repo.commit("ds", base=0, add=[{"input": "one"}], author="a")
    repo.import_runs([{"run_id": "r1", "tenant": "t", "steps": []}], author="a")
    backend.contended = True
    return repo


OPERATIONS = {
    "commit": lambda r: r.commit("ds", base=1, add=[{"input": "two"}], author="a", retry=True),
    "import": lambda r: r.import_runs([{"run_id": "r2", "tenant": "t", "steps": []}],
                                      author="a"),
    "review": lambda r: r.add_reviews(
        [{"run_id": "r1", "metric": "m", "label": "l"}],
        r.add_reviews([{"run_id": "r1", "metric": "m", "label": "l"}],
                      reviewer="Rita")["confirm_token"], reviewer="Rita"),
    "settings": lambda r: r.set_content_policy(["input"], author="a"),
    "score": lambda r: r.record_score(r.pin("ds", 1), metric="acc", value=1, author="a"),
    "experiment": lambda r: r.create_experiment("ds", 1, "exp", author="a"),
    "delete": lambda r: r.delete_version("ds", 1, author="a"),
}


@pytest.mark.parametrize("op", list(OPERATIONS))
def test_every_claim_loop_gives_up_with_aborted(repo, op):
    before = {k: repo.backend.get(k) for k in repo.backend.list("") if not k.startswith(
        ("packs/", "persons/"))}
    start = time.monotonic()
    with pytest.raises(cas.Aborted) as caught:
        OPERATIONS[op](repo)
    assert time.monotonic() - start < 10
    err = caught.value
    assert err.reason == "CLAIM_CONTENDED" and err.fields["attempts"] == claims.ATTEMPTS
    assert "could not claim" in err.message and err.fields["contended"] in err.message
    after = {k: repo.backend.get(k) for k in repo.backend.list("") if not k.startswith(
        ("packs/", "persons/"))}
    assert after == before  # nothing recorded (a deletion's tombstone is withdrawn)
    assert repo.fsck().ok


def test_the_pauses_grow_and_are_jittered():
    pauses = [claims.pause(n) for n in range(1, claims.ATTEMPTS)]
    assert all(0 <= p <= claims.MAX_PAUSE for p in pauses)
    assert len(set(pauses)) > 1
