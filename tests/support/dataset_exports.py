"""Dataset exports of other tools, built in the shapes their documentation and SDKs give
(../shared/traces/SOURCES.md section 13: no real export file could be used), and the cases
the datasets tests start from."""

from __future__ import annotations

import json

from hypothesis import strategies as st

# LangSmith: `langsmith dataset export` writes this (an indented array, no ids).
LANGSMITH_CLI = [
    {"inputs": {"question": "What is the capital of France?"},
     "outputs": {"answer": "Paris"}},
    {"inputs": {"question": "2 + 2?"}, "outputs": {"answer": "4"}},
]
# LangSmith: examples as the SDK lists them (`list_examples`, the REST API).
LANGSMITH_SDK = [
    {"id": "0f1e3a52-6c1b-4b8e-9d3a-1c2b3d4e5f60", "name": "#0f1e @ refunds",
     "created_at": "2026-11-02T10:00:00.000000+00:00",
     "modified_at": "2026-11-03T09:30:00.000000+00:00",
     "dataset_id": "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d",
     "source_run_id": "aa11bb22-cc33-4d44-8e55-ff6677889900",
     "inputs": {"messages": [{"role": "user", "content": "my order never arrived"}]},
     "outputs": {"answer": "I have issued a refund."},
     "metadata": {"dataset_split": ["base"], "priority": "high"},
     "attachment_urls": None, "runs": []},
    {"id": "1a2b3c4d-0000-4000-8000-000000000002", "created_at": "2026-11-02T10:01:00Z",
     "modified_at": None, "dataset_id": "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d",
     "source_run_id": None, "inputs": {"question": "hours?"}, "outputs": None,
     "metadata": None, "runs": []},
]
# Langfuse: the public API's list of dataset items.
LANGFUSE_LIST = {
    "data": [
        {"id": "item-1", "status": "ACTIVE", "input": {"text": "refund please"},
         "expectedOutput": "refund offered", "metadata": {"lang": "en"},
         "sourceTraceId": "trace-9f", "sourceObservationId": "obs-3",
         "datasetId": "ds-1", "datasetName": "support", "createdAt": "2026-10-01T00:00:00.000Z",
         "updatedAt": "2026-10-02T00:00:00.000Z"},
        {"id": "item-2", "status": "ACTIVE", "input": "plain text input",
         "expectedOutput": None, "metadata": None, "sourceTraceId": None,
         "sourceObservationId": None, "datasetId": "ds-1", "datasetName": "support",
         "createdAt": "2026-10-01T00:00:01.000Z", "updatedAt": "2026-10-01T00:00:01.000Z"},
        {"id": "item-3", "status": "ARCHIVED", "input": {"text": "old"},
         "expectedOutput": "gone", "metadata": {}, "sourceTraceId": None,
         "sourceObservationId": None, "datasetId": "ds-1", "datasetName": "support",
         "createdAt": "2026-09-01T00:00:00.000Z", "updatedAt": "2026-09-02T00:00:00.000Z"},
    ],
    "meta": {"page": 1, "limit": 50, "totalItems": 3, "totalPages": 1},
}
# Phoenix: the JSONL download, one example per line.
PHOENIX_JSONL = [
    {"id": "RGF0YXNldEV4YW1wbGU6MQ==", "input": {"question": "Is the sky blue?"},
     "output": {"answer": "yes"}, "metadata": {"source": "manual"}, "splits": ["train"]},
    {"id": "RGF0YXNldEV4YW1wbGU6Mg==", "input": {"question": "Is grass red?"},
     "output": {"answer": "no"}, "metadata": {}},
]
PHOENIX_EXAMPLES = {"data": {
    "dataset_id": "RGF0YXNldDox", "version_id": "RGF0YXNldFZlcnNpb246MQ==",
    "examples": [
        {"id": "RGF0YXNldEV4YW1wbGU6MQ==", "input": {"question": "Is the sky blue?"},
         "output": {"answer": "yes"}, "metadata": {"source": "manual"},
         "updated_at": "2026-08-01T12:00:00+00:00"},
    ]}}
PHOENIX_UPLOAD = {"action": "create", "name": "qa", "description": "",
                  "inputs": [{"q": "a"}, {"q": "b"}], "outputs": [{"a": 1}, {}],
                  "metadata": [{}, {"k": "v"}], "splits": [None, "test"]}
# Braintrust: rows as `bt datasets create --file` takes them, and as fetched.
BRAINTRUST_ROWS = [
    {"id": "case-1", "input": {"text": "hi"}, "expected": "hello"},
    {"id": "case-2", "input": {"text": "bye"}, "expected": "goodbye",
     "metadata": {"difficulty": "easy"}, "tags": ["smoke"],
     "origin": {"object_type": "project_logs", "object_id": "3c90c3cc-0d44-4b50-8888",
                "id": "log-77", "_xact_id": "1000192", "created": "2026-07-01T00:00:00Z"}},
]
BRAINTRUST_FETCH = {"events": [
    {"id": "case-9", "input": "q", "expected": "a", "metadata": {}, "tags": None,
     "created": "2026-07-02T00:00:00Z", "dataset_id": "ds-9", "project_id": "p-1",
     "_xact_id": "1000200", "span_id": "s-1", "root_span_id": "s-1", "span_parents": None,
     "_pagination_key": "p0"},
], "cursor": None}


def jsonl(rows) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def write(path, data) -> str:
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data, indent=2).encode())
    return str(path)


# Cases as cas holds them: a run's projection (steps, outcome...), a golden case, odd values.
NATIVE = [
    {"run_id": "r-1", "started_at": "2026-05-12T09:30:00Z", "input": {"task": "refund 1187"},
     "output": "I could not find order 1187.", "tenant": "acme",
     "steps": [{"type": "message", "role": "user", "content": "refund 1187"},
               {"type": "tool_call", "tool_name": "lookup", "arguments": {"id": 1187},
                "result": None}],
     "outcome": {"status": "failure"}, "metadata": {"agent": "support"},
     "withheld": []},
    {"input": "my order never arrived", "output": "refund offered", "tenant": "acme",
     "metadata": {}},
    {"input": {"input": 1}, "output": {"output": [1, 2]}, "tenant": "acme",
     "metadata": {"from": "an email"}},
    {"input": None, "output": None, "tenant": "acme", "metadata": {"nested": {"a": [1]}}},
]

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                     st.text(max_size=8))
json_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["a", "b", "input", "output", "from", "cas", "x"]),
                    inner, max_size=3)), max_leaves=8)
metadata_values = st.dictionaries(st.sampled_from(["a", "from", "k", "langsmith", "cas"]),
                                  json_values, max_size=3)
cases = st.fixed_dictionaries(
    {"input": json_values, "output": json_values, "metadata": metadata_values,
     "tenant": st.sampled_from(["acme", "globex"])},
    optional={"run_id": st.text(min_size=1, max_size=5),
              "steps": st.lists(st.fixed_dictionaries(
                  {"type": st.just("message"), "role": st.just("user"),
                   "content": st.text(max_size=5)}), max_size=2),
              "outcome": json_values})
