"""Helpers shared by the tests of runs, reviews, proposals and the whole lifecycle: a recorded
run, JSON Lines, the repository's key listing, a saved review, a promotion subject, and an
erasure left pending (its process killed right after it stored its plan)."""

from __future__ import annotations

import io
import json

import pytest

from cas.format.keys import PACKS

REVIEWER = "Ada <ada@example.com>"
OPERATOR = "Grace <grace@example.com>"
PERSON = "user-42"  # the person of every run_obj


def run_obj(run_id: str, n: int = 0, **over) -> dict:
    obj = {"run_id": run_id, "tenant": "acme", "person": "user-42",
           "started_at": "2026-05-01T10:00:00Z", "input": {"task": f"task {n}"},
           "output": f"done {n}",
           "steps": [{"type": "message", "role": "user", "content": f"task {n}"},
                     {"type": "tool_call", "tool_name": "ls", "arguments": {"path": "."},
                      "result": ["a", "b"]},
                     {"type": "tool_call", "tool_name": "mv", "arguments": {"src": "a"},
                      "error": "permission denied"},
                     {"type": "tool_call", "tool_name": "cat", "arguments": {"path": "a"}}],
           "outcome": {"status": "success"}, "metadata": {"model": "m-1"}}
    obj.update(over)
    return obj


def jsonl(*objs) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


def keys(repo) -> list[str]:
    return sorted(repo.backend.list(""))


def multi_keys(backend) -> list[str]:
    """The multi-pack index keys of a backend."""
    return [k for k in backend.list(PACKS) if k.endswith(".midx")]


def review(repo, run_id: str, metric: str = "dataset_eligibility", label: str = "reviewed"):
    req = [{"run_id": run_id, "metric": metric, "label": label}]
    token = repo.add_reviews(req)["confirm_token"]
    return repo.add_reviews(req, confirm_token=token)["annotation_ids"][0]


def subject(ref: str, annotation_id: str | None, **over) -> dict:
    s = {"subject_kind": "agent_run", "subject_ref": ref}
    if annotation_id is not None:
        s["review_annotation_id"] = annotation_id
    s.update(over)
    return s


def promote_and_seal(repo, anns, run_ids, key, name="evals"):
    p = repo.promote(name, [subject(r, anns[r]) for r in run_ids], key)
    return p, repo.seal(name, p["confirm_token"])


def import_checked(runs):
    """Runs an importer gave, each valid, imported into a fresh memory repository with no
    warning (no tool call hidden in a message step): (repo, RunImportResult)."""
    import cas
    from cas.repo.runs import parse_run
    from cas.storage.backends.memory import MemoryBackend
    for run in runs:
        parse_run(run, "$")
    repo = cas.Repository.create(MemoryBackend())
    result = repo.import_runs(runs)
    assert result.warnings == []
    return repo, result


def snapshot(backend) -> dict[str, bytes]:
    """Every key of a backend and its bytes."""
    return {k: backend.get(k) for k in backend.list("")}


def pending_erasure(monkeypatch):
    """A memory repository whose erasure of PERSON crashed right after storing its plan:
    (backend, the erased run's case id). Its reviews need a configured reviewer (as_reviewer)."""
    import cas
    from cas.repo import erasure
    from cas.storage.backends.memory import MemoryBackend
    repo = cas.Repository.create(MemoryBackend())
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-0"), run_obj("r-1", 1, person="other"))))
    anns = {r: review(repo, r) for r in ("r-0", "r-1")}
    repo.create_dataset("evals")
    promote_and_seal(repo, anns, ["r-0", "r-1"], "k")
    case_id = next(c for c in repo.items("evals", 1).items
                   if repo.case("evals", 1, c).run_id == "r-0")
    token = repo.erase(PERSON)["confirm_token"]

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed after the plan was stored")
    with monkeypatch.context() as m:
        m.setattr(erasure, "complete", crash)
        with pytest.raises(KeyboardInterrupt):
            repo.erase(PERSON, token)
    assert list(repo.backend.list("erasures/pending/")) == [f"erasures/pending/{token}"]
    return repo.backend, case_id
