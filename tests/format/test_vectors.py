"""Test vectors of docs/format.md: input JSON -> canonical bytes -> digest, for every object kind,
and input -> identifier for every derived identifier (section 3.1).

The digests are recomputed here with the blake3 package directly (domain bytes written out),
not through cas.digest, so a change to either side is caught. The golden files are the
reference: a run without the update flag fails when an encoding or a derivation changed.
Regenerate them only on purpose: CAS_UPDATE_VECTORS=1 python -m pytest tests/format/test_vectors.py
(that run writes the files and reports each changed vector as a skip; it asserts nothing
against what it just wrote).
"""

import json
import os
import pathlib

import msgspec
import pytest
from blake3 import blake3

from cas.format import encoding
from cas.format import records as objects
from cas.storage import tree
from support import ROOT

VECTORS = pathlib.Path(__file__).parents[1] / "vectors" / "vectors.json"

# (name, kind, input JSON text as a person might write it: any key order, any spacing)
INPUTS = [
    ("case-minimal", "case", '{"input": "hello"}'),
    ("case-run", "case", """{"steps": [{"type": "message", "role": "user", "content": "Rename a.txt"},
        {"type": "tool_call", "tool_name": "mv", "arguments": {"src": "a.txt", "dst": "b.txt"},
         "result": null}, {"type": "tool_call", "tool_name": "ls", "arguments": {}}],
        "input": {"task": "Rename a.txt"}, "output": "done", "tenant": "acme", "person": "user-42",
        "outcome": {"status": "success", "scores": {"task_success": 1.0, "latency_s": 0.25}},
        "metadata": {"model": "m-1"}, "withheld": []}"""),
    ("case-text-and-numbers", "case", """{"input": {"z": 1, "a": [1.0, 1e16, 1.5e-7, 0.00001,
        -0.0, 12345678901234567890, -3], "\\u00e9": "caf\\u00e9 \\ud83d\\ude00",
        "ctrl": "tab\\tnl\\nnul\\u0000del\\u007f", "quote": "\\"\\\\/"}}"""),
    ("tree-leaf-empty", "tree.leaf", '{"ids": [], "kind": "tree.leaf", "format": 1}'),
    ("tree-leaf", "tree.leaf", """{"kind": "tree.leaf", "format": 1, "ids": [
        "b3:1111111111111111111111111111111111111111111111111111111111111111",
        "b3:2222222222222222222222222222222222222222222222222222222222222222"]}"""),
    ("tree-node", "tree.node", """{"kind": "tree.node", "format": 1, "count": 65, "children": [
        {"nibble": 0, "count": 40, "node": "b3:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
        {"nibble": 15, "count": 25, "node": "b3:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}"""),
    ("version", "version", """{"kind": "version", "format": 1, "dataset": "support-evals",
        "number": 2, "parent": 1, "item_count": 2, "operation": "commit", "added": 1, "removed": 0,
        "content_digest": "b3:0000000000000000000000000000000000000000000000000000000000000000",
        "author": "Ada <ada@example.com>", "sealed_at": "2026-11-30T12:00:00.000000Z",
        "message": "add one case"}"""),
    ("dataset", "dataset", """{"kind": "dataset", "format": 1, "name": "support-evals",
        "revision": 1, "description": "Reviewed runs", "tags": ["demo"],
        "author": "Ada <ada@example.com>", "edited_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("run", "run", """{"kind": "run", "format": 1, "run_id": "r-17", "tenant": "acme",
        "person": "user-42", "started_at": "2026-05-01T10:00:00Z", "input": {"task": "ls"},
        "output": "two files", "steps": [{"type": "tool_call", "tool_name": "ls",
        "arguments": {"path": "."}, "result": ["a", "b"]}], "outcome": {"status": "success"},
        "metadata": {}, "extra": {}}"""),
    ("run-import", "run.import", """{"kind": "run.import", "format": 1, "number": 1,
        "runs": [{"run_id": "r-17",
        "run": "b3:22bad69bb3870becf495c12a2487ebcf8eeb54355a45d4d2b909c1ce0a6d2fff"}],
        "author": "Ada <ada@example.com>", "imported_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("review-batch", "review.batch", """{"kind": "review.batch", "format": 1, "number": 1,
        "reviews": [{"annotation_id": "ann-0123456789abcdef0123456789abcdef", "run_id": "r-17",
        "run": "b3:22bad69bb3870becf495c12a2487ebcf8eeb54355a45d4d2b909c1ce0a6d2fff",
        "metric": "dataset_eligibility", "label": "reviewed", "reviewer": "Ada <ada@example.com>",
        "reviewed_at": "2026-11-30T12:00:00.000000Z"}]}"""),
    ("settings", "settings", """{"kind": "settings", "format": 1, "revision": 1,
        "withheld": ["tool_results"], "author": "Ada <ada@example.com>",
        "edited_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("proposal", "proposal", """{"kind": "proposal", "format": 1, "dataset": "support-evals",
        "operation": "promote", "base": 1, "idempotency_key": "promote-2026-11-30",
        "request": "b3:1111111111111111111111111111111111111111111111111111111111111111",
        "add": ["b3:2222222222222222222222222222222222222222222222222222222222222222"],
        "carried": 1, "remove": [],
        "provenance": "b3:3333333333333333333333333333333333333333333333333333333333333333",
        "proposed_root": "b3:4444444444444444444444444444444444444444444444444444444444444444",
        "proposed_count": 2, "author": "Ada <ada@example.com>",
        "created_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("idempotency", "idempotency", """{"kind": "idempotency", "format": 1,
        "dataset": "support-evals", "key": "promote-2026-11-30",
        "request": "b3:1111111111111111111111111111111111111111111111111111111111111111",
        "token": "ct-0123456789abcdef0123456789abcdef"}"""),
    ("provenance", "provenance", """{"kind": "provenance", "format": 1, "entries": [
        {"case_id": "b3:2222222222222222222222222222222222222222222222222222222222222222",
        "run_id": "r-17", "annotation_id": "ann-0123456789abcdef0123456789abcdef",
        "reviewer": "Ada <ada@example.com>", "reviewed_at": "2026-11-30T12:00:00.000000Z",
        "withheld": ["tool_results"]}]}"""),
    ("provenance-commit", "provenance", """{"kind": "provenance", "format": 1, "entries": [
        {"case_id": "b3:2222222222222222222222222222222222222222222222222222222222222222",
        "committed_by": "Ada <ada@example.com>", "withheld": []}]}"""),
    ("provenance-first-commit", "provenance", """{"kind": "provenance", "format": 1,
        "committed_by": "Ada <ada@example.com>", "entries": []}"""),
    ("dataset-admission", "dataset", """{"kind": "dataset", "format": 1, "name": "golden",
        "revision": 1, "description": "Hand-written cases", "tags": [], "admission": "direct",
        "author": "Ada <ada@example.com>", "edited_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("dataset-retired", "dataset", """{"kind": "dataset", "format": 1, "name": "support-evals",
        "revision": 3, "description": "", "tags": [], "admission": "reviewed", "retired": [2],
        "author": "Ada <ada@example.com>", "edited_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("settings-override", "settings", """{"kind": "settings", "format": 1, "revision": 2,
        "dataset": "support-evals", "withheld": ["input", "tool_arguments"],
        "author": "Ada <ada@example.com>", "edited_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("score-batch", "score.batch", """{"kind": "score.batch", "format": 1,
        "dataset": "support-evals", "number": 1, "scores": [{"dataset": "support-evals",
        "version": 2, "content_digest": "b3:0000000000000000000000000000000000000000000000000000000000000000",
        "metric": "task_success", "value": 0.875, "item": null, "experiment": "baseline",
        "author": "Ada <ada@example.com>", "recorded_at": "2026-11-30T12:00:00.000000Z"},
        {"dataset": "support-evals", "version": 2, "metric": "tool_calls", "value": 3,
        "content_digest": "b3:0000000000000000000000000000000000000000000000000000000000000000",
        "item": "b3:1111111111111111111111111111111111111111111111111111111111111111",
        "author": "Ada <ada@example.com>", "recorded_at": "2026-11-30T12:00:00.000000Z"}]}"""),
    ("score-withdrawal", "score.withdrawal", """{"kind": "score.withdrawal", "format": 1,
        "dataset": "support-evals", "batch": 1, "reason": "scored with the wrong rubric",
        "author": "Ada <ada@example.com>", "withdrawn_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("run-admission", "run.admission", """{"kind": "run.admission", "format": 1, "number": 7,
        "persons": ["pk:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"],
        "author": "Grace <grace@example.com>", "admitted_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("eligibility", "eligibility", """{"kind": "eligibility", "format": 1, "revision": 1,
        "metric": "dataset_eligibility", "accepted": ["accepted", "reviewed"],
        "author": "Ada <ada@example.com>", "edited_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("eligibility-reviewers", "eligibility", """{"kind": "eligibility", "format": 1,
        "revision": 2, "metric": "dataset_eligibility", "accepted": ["accepted", "reviewed"],
        "reviewers": 2, "rule": "majority",
        "author": "Ada <ada@example.com>", "edited_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("metrics", "metrics", """{"kind": "metrics", "format": 1, "revision": 1,
        "metrics": [{"name": "tone", "labels": ["calm", "curt", "rude"],
        "description": "How the agent sounds"}], "declared_only": true,
        "author": "Ada <ada@example.com>", "edited_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("review-batch-comment", "review.batch", """{"kind": "review.batch", "format": 1,
        "number": 2, "confirm_token": null, "reviews": [{"annotation_id":
        "ann-0123456789abcdef0123456789abcdef", "run_id": "r-17", "run":
        "b3:22bad69bb3870becf495c12a2487ebcf8eeb54355a45d4d2b909c1ce0a6d2fff",
        "metric": "dataset_eligibility", "label": "needs-work",
        "reviewer": "Ada <ada@example.com>", "reviewed_at": "2026-11-30T12:00:00.000000Z",
        "comment": "cites the 2025 refund policy\\nnot the current one",
        "correction": {"answer": "refund within 30 days"}}]}"""),
    ("experiment", "experiment", """{"kind": "experiment", "format": 1,
        "dataset": "support-evals", "number": 1, "name": "baseline", "version": 2,
        "content_digest": "b3:0000000000000000000000000000000000000000000000000000000000000000",
        "author": "Ada <ada@example.com>", "created_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("version-tombstone", "version.tombstone", """{"kind": "version.tombstone", "format": 1,
        "dataset": "support-evals", "number": 3, "item_count": 40,
        "content_digest": "b3:2222222222222222222222222222222222222222222222222222222222222222",
        "author": "Ada <ada@example.com>", "deleted_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("dataset-tombstone", "dataset.tombstone", """{"kind": "dataset.tombstone", "format": 1,
        "dataset": "old-evals", "head": 4, "author": "Ada <ada@example.com>",
        "deleted_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("fence", "fence", """{"kind": "fence", "format": 1, "dataset": "support-evals",
        "log": "scores", "number": 2, "reason": "delete version 3",
        "author": "Ada <ada@example.com>", "written_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("config", "config", """{"kind": "config", "format": 1,
        "repository_id": "00112233445566778899aabbccddeeff", "created_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("version-retirement", "version.retirement", """{"kind": "version.retirement", "format": 1,
        "dataset": "support-evals", "number": 2, "cause": "PERSON_ERASED",
        "retired_at": "2026-11-30T12:00:00.000000Z", "note": "", "author": "Ada <ada@example.com>",
        "erasure": "ct-0123456789abcdef0123456789abcdef"}"""),
    ("person-index", "person.index", """{"kind": "person.index", "format": 1,
        "pack": "5555555555555555555555555555555555555555555555555555555555555555",
        "entries": [{"person": "pk:bbe52a6ec46a1d8af332e9c84bcdf4cc773422c8ea6bbc7a34e12337ca4eb1ab",
        "digest": "b3:2222222222222222222222222222222222222222222222222222222222222222"}]}"""),
    ("erasure-plan", "erasure.plan", """{"kind": "erasure.plan", "format": 1,
        "id": "ct-0123456789abcdef0123456789abcdef",
        "person": "pk:bbe52a6ec46a1d8af332e9c84bcdf4cc773422c8ea6bbc7a34e12337ca4eb1ab",
        "cases": ["b3:2222222222222222222222222222222222222222222222222222222222222222"],
        "runs": ["b3:22bad69bb3870becf495c12a2487ebcf8eeb54355a45d4d2b909c1ce0a6d2fff"],
        "reviews": ["ann-0123456789abcdef0123456789abcdef"], "author": "Ada <ada@example.com>",
        "started_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("erasure", "erasure", """{"kind": "erasure", "format": 1,
        "id": "ct-0123456789abcdef0123456789abcdef",
        "person": "pk:bbe52a6ec46a1d8af332e9c84bcdf4cc773422c8ea6bbc7a34e12337ca4eb1ab",
        "cases": ["b3:2222222222222222222222222222222222222222222222222222222222222222"],
        "runs": ["b3:22bad69bb3870becf495c12a2487ebcf8eeb54355a45d4d2b909c1ce0a6d2fff"],
        "reviews": ["ann-0123456789abcdef0123456789abcdef"],
        "retired": [{"dataset": "support-evals", "number": 2}], "proposals_deleted": 0,
        "objects_deleted": 3, "packs_rewritten": 1, "bytes_rewritten": 4096,
        "author": "Ada <ada@example.com>", "started_at": "2026-11-30T12:00:00.000000Z",
        "erased_at": "2026-11-30T12:00:01.000000Z"}"""),
    ("person-shards", "person.shards", """{"kind": "person.shards", "format": 1,
        "pack": "5555555555555555555555555555555555555555555555555555555555555555",
        "shards": ["0a", "bb"]}"""),
    ("cassette", "cassette", """{"kind": "cassette", "format": 1, "dataset": "support-evals",
        "case_id": "b3:2222222222222222222222222222222222222222222222222222222222222222",
        "executor": "my_agent.evals:run_case", "person": "user-42", "exchanges": [
        {"adapter": "call", "name": "search",
         "key": "b3:1111111111111111111111111111111111111111111111111111111111111111",
         "request": {"query": "refund policy"}, "response": {"hits": ["doc-7"]}},
        {"adapter": "call", "name": "send_email",
         "key": "b3:3333333333333333333333333333333333333333333333333333333333333333",
         "request": {"to": "team"}, "error": {"type": "TimeoutError", "message": "timed out"}}]}"""),
    ("cassette-log", "cassette.log", """{"kind": "cassette.log", "format": 1,
        "dataset": "support-evals", "number": 1, "entries": [
        {"case_id": "b3:2222222222222222222222222222222222222222222222222222222222222222",
         "executor": "my_agent.evals:run_case",
         "cassette": "b3:4444444444444444444444444444444444444444444444444444444444444444"}],
        "author": "Ada <ada@example.com>", "recorded_at": "2026-11-30T12:00:00.000000Z"}"""),
    ("suite-result", "suite.result", """{"kind": "suite.result", "format": 1,
        "dataset": "support-evals", "version": 2, "suite": "support-evals",
        "content_digest": "b3:0000000000000000000000000000000000000000000000000000000000000000",
        "seed": 7, "repeat": 2, "shard": null,
        "digest": "b3:cfd9fc38fdf88064a1a9caa516ab1708f1554f7c0f9822afb3897cae36286277",
        "results": [{"id": "b3:1111111111111111111111111111111111111111111111111111111111111111",
         "position": 0, "repetition": 0, "seed": 7, "run_id": "sr-53985397251948bb79f18aece91f9d38",
         "outcome": "COMPLETED", "answer": "Refunds take 5 days.", "reason": null,
         "scores": {"exact": true}},
        {"id": "b3:1111111111111111111111111111111111111111111111111111111111111111",
         "position": 0, "repetition": 1, "seed": 9170549854531933786,
         "run_id": "sr-841aed6929fff12699ee04f5a4ae2891", "outcome": "ERRORED", "answer": null,
         "reason": "the executor raised TimeoutError: timed out", "scores": null}]}"""),
    ("score-batch-result", "score.batch", """{"kind": "score.batch", "format": 1,
        "dataset": "support-evals", "number": 2, "scores": [{"dataset": "support-evals",
        "version": 2, "content_digest": "b3:0000000000000000000000000000000000000000000000000000000000000000",
        "metric": "exact", "value": true, "experiment": "baseline",
        "item": "b3:1111111111111111111111111111111111111111111111111111111111111111",
        "author": "Ada <ada@example.com>", "recorded_at": "2026-11-30T12:00:00.000000Z"}],
        "result": "b3:3510aeea4badfeadc91752548bae6bfb014c534b50480ebcae6d415af6419d4b"}"""),
    ("lease", "lease", """{"kind": "lease", "format": 1, "id": "0123456789abcdef",
        "role": "gc", "operation": "gc", "host": "build-7", "pid": 4242,
        "started_at": "2026-11-30T12:00:00.000000Z", "expires_at": "2026-11-30T12:05:00.000000Z",
        "packs": ["5555555555555555555555555555555555555555555555555555555555555555"],
        "proposals": ["datasets/support-evals/proposals/ct-0123456789abcdef0123456789abcdef"],
        "erasure": null}"""),
]

# The keyed digest of a person id (docs/format.md section 4.8): the key is BLAKE3 of
# "cas:person-key" NUL + the repository id; the digest is keyed BLAKE3 of the id's UTF-8 bytes.
PERSON_VECTOR = {"repository_id": "00112233445566778899aabbccddeeff", "person": "user-42"}


def person_vector() -> dict:
    key = blake3(b"cas:person-key\x00" + PERSON_VECTOR["repository_id"].encode()).digest()
    return {**PERSON_VECTOR, "key_hex": key.hex(),
            "person_digest": "pk:" + blake3(PERSON_VECTOR["person"].encode(), key=key).hexdigest()}


def compute(kind: str, text: str) -> dict:
    value = msgspec.json.decode(text.encode(), type=objects.TYPES[kind])
    canonical = encoding.encode(value)
    h = blake3(b"cas:" + kind.encode() + b"\x00" + canonical)
    return {"kind": kind, "input": text, "canonical": canonical.decode("utf-8"),
            "canonical_hex": canonical.hex(), "digest": "b3:" + h.hexdigest()}


# Derived identifiers (docs/format.md section 3.1): (name, domain bytes written out, input
# value whose canonical bytes are hashed, output prefix, hex digits kept).
DERIVED_INPUTS = [
    ("request-digest", b"cas:request-digest\x00",
     {"operation": "promote", "subjects": [["agent_run", "r-17",
                                            "ann-0123456789abcdef0123456789abcdef"]],
      "withheld": ["tool_results"]}, "b3:", 64),
    ("proposal-token", b"cas:proposal-token\x00",
     {"dataset": "support-evals", "operation": "promote", "base": 1,
      "idempotency_key": "promote-2026-11-30",
      "request": "b3:1111111111111111111111111111111111111111111111111111111111111111",
      "add": ["b3:2222222222222222222222222222222222222222222222222222222222222222"],
      "carried": 1, "remove": [],
      "provenance": "b3:3333333333333333333333333333333333333333333333333333333333333333",
      "proposed_root": "b3:4444444444444444444444444444444444444444444444444444444444444444",
      "proposed_count": 2}, "ct-", 32),
    ("confirm-token", b"cas:confirm-token\x00",
     {"kind": "review", "request": [
         {"run_id": "r-17",
          "run": "b3:22bad69bb3870becf495c12a2487ebcf8eeb54355a45d4d2b909c1ce0a6d2fff",
          "metric": "dataset_eligibility", "label": "reviewed",
          "reviewer": "Ada <ada@example.com>"}]}, "ct-", 32),
    ("annotation-id", b"cas:annotation-id\x00",
     {"run_id": "r-17",
      "run": "b3:22bad69bb3870becf495c12a2487ebcf8eeb54355a45d4d2b909c1ce0a6d2fff",
      "metric": "dataset_eligibility", "label": "reviewed", "reviewer": "Ada <ada@example.com>",
      "reviewed_at": "2026-11-30T12:00:00.000000Z", "batch": 1, "position": 0}, "ann-", 32),
    ("suite-run-id", b"cas:suite-run-id\x00",
     ["support-evals", "support-evals@2#b3:" + "5" * 64,
      "b3:" + "2" * 64, 0], "sr-", 32),
    ("suite-result", b"cas:suite-result\x00",
     {"format": 1, "suite": {"name": "support-evals", "version": "support-evals@2#b3:" + "5" * 64},
      "results": [{"id": "b3:" + "2" * 64, "position": 0, "run_id": "sr-" + "6" * 32,
                   "outcome": "COMPLETED", "answer": "done", "reason": None, "scores": None}]},
     "b3:", 64),
    ("cassette-request", b"cas:cassette-request\x00",
     ["call", "search", {"query": "refund policy"}], "b3:", 64),
    ("evalset-regression", b"cas:evalset-regression\x00",
     {"pin": "support-regressions@3#b3:" + "5" * 64, "replay": "my_agent.evals:replay",
      "scorer": None, "system_context": "", "lower_is_better": [], "tolerance": 0.0},
     "regress-", 12),
    # Not canonical JSON: the UTF-8 bytes of an idempotency key, in the "idempotency" kind's
    # domain (kept: it names where claims are found).
    ("idempotency-claim-name", b"cas:idempotency\x00", "promote-2026-11-30", "", 64),
]
DERIVED = pathlib.Path(__file__).parents[1] / "vectors" / "derived.json"


def derived_vector(name: str, dom: bytes, value, prefix: str, keep: int) -> dict:
    data = value.encode("utf-8") if isinstance(value, str) else encoding.encode(value)
    return {"domain": dom.decode("ascii").replace("\x00", "\\0"), "domain_hex": dom.hex(),
            "input": data.decode("utf-8"), "input_hex": data.hex(),
            "output": prefix + blake3(dom + data).hexdigest()[:keep]}


def check_golden(path: pathlib.Path, got: dict) -> None:
    """Compare with the golden file; with CAS_UPDATE_VECTORS set, write it instead and report
    which vectors changed (a skip), never comparing the file with what was just written."""
    text = json.dumps(got, indent=2, ensure_ascii=False) + "\n"
    if os.environ.get("CAS_UPDATE_VECTORS"):
        old = json.loads(path.read_text()) if path.exists() else {}
        changed = sorted(n for n in set(old) | set(got) if old.get(n) != got.get(n))
        if text != (path.read_text() if path.exists() else None):
            path.write_text(text)
        pytest.skip(f"CAS_UPDATE_VECTORS: wrote {path.name}; changed: {', '.join(changed)}"
                    if changed else f"CAS_UPDATE_VECTORS: {path.name} unchanged")
    want = json.loads(path.read_text())
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name
    assert path.read_text() == text  # the file is exactly what the update flag would write


def test_vectors_match_golden_file():
    got = {name: compute(kind, text) for name, kind, text in INPUTS}
    got["person-digest"] = person_vector()
    check_golden(VECTORS, got)


def test_derived_vectors_match_golden_file():
    check_golden(DERIVED, {n: derived_vector(n, *rest) for n, *rest in DERIVED_INPUTS})


def test_golden_files_are_consistent_in_themselves():
    """Each vector's hex, text and digest agree with each other, computed from the file alone
    (so a hand edit of one of them is caught even where the code agrees with it)."""
    for vec in json.loads(VECTORS.read_text()).values():
        if "canonical" not in vec:
            continue
        canonical = bytes.fromhex(vec["canonical_hex"])
        assert canonical.decode("utf-8") == vec["canonical"]
        assert vec["digest"] == "b3:" + blake3(
            b"cas:" + vec["kind"].encode() + b"\x00" + canonical).hexdigest()
    for vec in json.loads(DERIVED.read_text()).values():
        dom, data = bytes.fromhex(vec["domain_hex"]), bytes.fromhex(vec["input_hex"])
        assert data.decode("utf-8") == vec["input"]
        assert dom.decode("ascii") == vec["domain"].replace("\\0", "\x00")
        h = blake3(dom + data).hexdigest()
        tail = vec["output"].split("-", 1)[-1].removeprefix("b3:")
        assert len(tail) in (12, 32, 64) and h.startswith(tail)


def test_derived_vectors_agree_with_library():
    from cas import digest
    vec = json.loads(DERIVED.read_text())
    data = {n: bytes.fromhex(v["input_hex"]) for n, v in vec.items()}
    assert digest.request_digest(data["request-digest"]) == vec["request-digest"]["output"]
    assert digest.proposal_token(data["proposal-token"]) == vec["proposal-token"]["output"]
    assert digest.confirm_token(data["confirm-token"]) == vec["confirm-token"]["output"]
    assert digest.annotation_id(data["annotation-id"]) == vec["annotation-id"]["output"]
    key = data["idempotency-claim-name"].decode()
    assert digest.idempotency_claim_name(key) == vec["idempotency-claim-name"]["output"]
    assert digest.digest_of("idempotency", key.encode())[3:] == digest.idempotency_claim_name(key)
    from cas.evals.suites import results
    case = json.loads(vec["suite-run-id"]["input"])
    assert results.run_id(*case) == vec["suite-run-id"]["output"]
    from cas.evals import cassettes
    assert cassettes.request_key(*json.loads(vec["cassette-request"]["input"])) == \
        vec["cassette-request"]["output"]
    from cas.evals import evalset
    from cas.format.version_names import as_pin
    inputs = json.loads(vec["evalset-regression"]["input"])
    named = type("F", (), {"__module__": "my_agent.evals", "__qualname__": "replay"})
    assert evalset.experiment_name(as_pin(inputs["pin"]), named, None, "", [], 0.0) \
        == vec["evalset-regression"]["output"]
    result = json.loads(vec["suite-result"]["input"])
    ref = results.SuiteRef(**result["suite"])
    rows = [results.CaseResult(**r) for r in result["results"]]
    assert results.result_digest(ref, rows) == vec["suite-result"]["output"]
    for n, v in vec.items():
        if n != "idempotency-claim-name":
            assert digest.DERIVED_DOMAINS[n] == bytes.fromhex(v["domain_hex"])


def test_person_digest_vector_agrees_with_library():
    from cas.digest import person_digest, person_key
    vec = json.loads(VECTORS.read_text())["person-digest"]
    key = person_key(vec["repository_id"])
    assert key.hex() == vec["key_hex"]
    assert person_digest(vec["person"], key) == vec["person_digest"]


@pytest.mark.parametrize("name", [n for n, _, _ in INPUTS])
def test_vector_digest_agrees_with_library(name):
    vec = json.loads(VECTORS.read_text())[name]
    obj = objects.decode_object(vec["kind"], vec["canonical"].encode())
    assert objects.encode_object(obj) == (vec["kind"], vec["canonical"].encode(), vec["digest"])


def test_empty_tree_root_is_the_empty_leaf_vector():
    vec = json.loads(VECTORS.read_text())["tree-leaf-empty"]
    assert tree.EMPTY_ROOT == vec["digest"]


def test_format_document_shows_every_vector():
    doc = (ROOT / "docs" / "format.md").read_text()
    for name, vec in json.loads(DERIVED.read_text()).items():
        assert vec["input"] in doc and vec["output"] in doc, name
    for name, vec in json.loads(VECTORS.read_text()).items():
        if name == "person-digest":
            assert vec["key_hex"] in doc and vec["person_digest"] in doc
            continue
        assert vec["digest"] in doc, name
        assert vec["canonical"] in doc, name
