"""Helpers shared by the tests of runs, reviews, proposals and the whole lifecycle: a recorded
run, JSON Lines, the repository's key listing, a saved review, a promotion subject."""

from __future__ import annotations

import json

from cas.format.keys import PACKS

REVIEWER = "Ada <ada@example.com>"
OPERATOR = "Grace <grace@example.com>"


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
    from cas.storage.backends.memory import MemoryBackend
    from cas.repo.runs import parse_run
    for run in runs:
        parse_run(run, "$")
    repo = cas.Repository.create(MemoryBackend())
    result = repo.import_runs(runs)
    assert result.warnings == []
    return repo, result
