"""Test vectors of docs/format.md: input JSON -> canonical bytes -> digest, for every object kind.

The digests are recomputed here with the blake3 package directly (domain bytes written out),
not through cas.digest, so a change to either side is caught. Regenerate the golden file only
on purpose: CAS_UPDATE_VECTORS=1 python -m pytest tests/test_vectors.py
"""

import json
import os
import pathlib

import msgspec
import pytest
from blake3 import blake3

from cas import encoding, objects, tree

VECTORS = pathlib.Path(__file__).parent / "vectors" / "vectors.json"

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
    ("score-batch", "score.batch", """{"kind": "score.batch", "format": 1,
        "dataset": "support-evals", "number": 1, "scores": [{"dataset": "support-evals",
        "version": 2, "content_digest": "b3:0000000000000000000000000000000000000000000000000000000000000000",
        "metric": "task_success", "value": 0.875, "item": null, "experiment": "baseline",
        "author": "Ada <ada@example.com>", "recorded_at": "2026-11-30T12:00:00.000000Z"},
        {"dataset": "support-evals", "version": 2, "metric": "tool_calls", "value": 3,
        "content_digest": "b3:0000000000000000000000000000000000000000000000000000000000000000",
        "item": "b3:1111111111111111111111111111111111111111111111111111111111111111",
        "author": "Ada <ada@example.com>", "recorded_at": "2026-11-30T12:00:00.000000Z"}]}"""),
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


def test_vectors_match_golden_file():
    got = {name: compute(kind, text) for name, kind, text in INPUTS}
    got["person-digest"] = person_vector()
    if os.environ.get("CAS_UPDATE_VECTORS"):
        VECTORS.write_text(json.dumps(got, indent=2, ensure_ascii=False) + "\n")
    want = json.loads(VECTORS.read_text())
    assert got == want


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
    doc = (pathlib.Path(__file__).parent.parent / "docs" / "format.md").read_text()
    for name, vec in json.loads(VECTORS.read_text()).items():
        if name == "person-digest":
            assert vec["key_hex"] in doc and vec["person_digest"] in doc
            continue
        assert vec["digest"] in doc, name
        assert vec["canonical"] in doc, name
