"""Recordings to replay (tests/evals/test_replay.py and `cas replay`'s tests): message and
tool-call steps and a case of them; a file-organising agent's multi-turn run, with or without
its tool answers, promoted into a version on any backend; the plan that stubs its effects and
the dispositions it gives each step."""

from __future__ import annotations

import json

import cas

# the dispositions of a replayed step
C, R, U, S = "CARRIED", "RECORDED", "UNRECORDED", "STUBBED"


def msg(role: str, content: str) -> dict:
    return {"type": "message", "role": role, "content": content}


def call(name, arguments=None, **answer) -> dict:
    """A tool call; `answer` holds `result` and/or `error` only when they were recorded."""
    step = {"type": "tool_call"}
    if name is not ...:  # `...`: the recording has no tool_name key at all
        step["tool_name"] = name
    step["arguments"] = arguments if arguments is not None else {}
    step.update(answer)
    return step


def case_of(*steps, **over) -> dict:
    case = {"run_id": "r-1", "tenant": "acme", "input": {"task": "tidy"}, "output": "done",
            "steps": list(steps), "outcome": {"status": "success", "score": 1.0}}
    case.update(over)
    return case


def organiser_run(run_id: str, with_results: bool) -> dict:
    """A multi-turn file-organising agent: reads (list, read, search) and effects (move, write,
    send), optionally with the tool answers recorded."""
    def answer(value):
        return {"result": value} if with_results else {}
    return {
        "run_id": run_id, "tenant": "acme", "person": "user-42",
        "started_at": "2026-05-01T10:00:00Z", "input": {"task": "file the invoices"},
        "output": "Filed 2 invoices and told finance.",
        "steps": [
            msg("user", "File the invoices from my inbox folder, then tell finance."),
            msg("assistant", "Let me look at the folder first."),
            call("list_dir", {"path": "inbox"}, **answer(["inv-1.pdf", "inv-2.pdf", "cv.pdf"])),
            call("read_file", {"path": "inbox/inv-1.pdf"}, **answer("Invoice #1 total 40 EUR")),
            call("search", {"query": "invoice", "path": "inbox"},
                 **answer([{"path": "inbox/inv-2.pdf", "score": 0.93}])),
            call("move_file", {"src": "inbox/inv-1.pdf", "dst": "invoices/inv-1.pdf"},
                 **answer({"ok": True})),
            call("move_file", {"src": "inbox/inv-2.pdf", "dst": "invoices/inv-2.pdf"},
                 **({"error": "destination exists"} if with_results else {})),
            msg("assistant", "inv-2 already exists there; writing a note."),
            call("write_file", {"path": "invoices/NOTE.txt", "content": "inv-2 duplicate"},
                 **answer({"bytes": 15})),
            msg("user", "Good, tell finance."),
            call("send_email", {"to": "finance@acme.test", "subject": "Invoices filed"},
                 **answer({"message_id": "m-1"})),
            msg("assistant", "Filed 2 invoices and told finance."),
        ],
        "outcome": {"status": "success", "checks": {"filed": 2}},
        "metadata": {"model": "m-1"}}


PLAN = {"default_effect": "none",
        "tools": [{"tool_name": "move_file", "effect": "internal"},
                  {"tool_name": "write_file", "effect": "internal"},
                  {"tool_name": "send_email", "effect": "external"}]}
DETAIL_NAMES = [None, None, "list_dir", "read_file", "search", "move_file", "move_file", None,
                "write_file", None, "send_email", None]


def expected_detail(dispositions_):
    return [{"index": i, "type": "tool_call" if n else "message", "tool_name": n,
             "disposition": d} for i, (n, d) in enumerate(zip(DETAIL_NAMES, dispositions_))]


def promote_all(repo, runs: list[dict], dataset: str = "evals", key: str = "k-1") -> int:
    repo.import_runs(runs)
    subjects = []
    for run in runs:
        req = [{"run_id": run["run_id"], "metric": "dataset_eligibility", "label": "reviewed"}]
        token = repo.add_reviews(req)["confirm_token"]
        ann = repo.add_reviews(req, confirm_token=token)["annotation_ids"][0]
        subjects.append({"subject_kind": "agent_run", "subject_ref": run["run_id"],
                         "review_annotation_id": ann})
    if dataset not in repo.datasets():
        repo.create_dataset(dataset, admission="direct")
    p = repo.promote(dataset, subjects, key)
    return repo.seal(dataset, p["confirm_token"]).version.number


def keys_and_bytes(repo) -> dict:
    return {k: repo.backend.get(k) for k in sorted(repo.backend.list(""))}


def write(path, value) -> str:
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return str(path)


def organised_version(location: str) -> tuple:
    """A repository at `location` with one version holding both organiser runs (promoted by
    whoever CAS_USER names): (location, repo, version number, run id -> case id)."""
    repo = cas.init(location)
    number = promote_all(repo, [organiser_run("with", True), organiser_run("without", False)])
    ids = {}
    for case_id in repo.items("evals", number).items:
        ids[repo.case("evals", number, case_id).run_id] = case_id
    return location, repo, number, ids
