"""What the command-line tests share: a repository whose dataset `evals` holds the example
cases, the exact-read error messages, refusals checked in both forms (one line on stderr, the
JSON error object) with nothing stored, and the lifecycle's steps through `cas`."""

from __future__ import annotations

import json

from support import ROOT

EXAMPLE = ROOT / "examples" / "cases.jsonl"
ADA = "Ada <ada@example.com>"  # who the `run` fixture is
ITEMS_FORMS = ("items DATASET VERSION", "items DATASET@VERSION")


def commit_example(run) -> dict:
    """A repository here whose dataset `evals` holds the example cases as version 1: the
    commit's JSON."""
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    r = run("--json", "commit", "evals", "--add", str(EXAMPLE), "-m", "first")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def ids(run, *ref) -> list[str]:
    """Every case id of a version, in order (one page: the example is small)."""
    r = run("--json", "items", *ref, "--limit", "500")
    assert r.exit_code == 0, r.output
    return [i["id"] for i in json.loads(r.stdout)["items"]]


def error_line(message: str) -> str:
    return f"cas: error: {message}\n"


def no_latest(problem: str, *forms: str) -> str:
    """The message of a read that names no exact version."""
    usage = " or ".join(f"cas {f}" for f in forms)
    return (f'{problem}; every read names an exact version, there is no "latest" '
            f"(use: {usage})")


def files(tmp_path) -> list[tuple[str, int]]:
    """Every file of the repository, with its size: what a refusal must leave alone."""
    return sorted((str(p.relative_to(tmp_path)), p.stat().st_size)
                  for p in (tmp_path / ".cas").rglob("*") if p.is_file())


def ok_json(r) -> dict:
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert r.stderr == ""
    return json.loads(r.stdout)


def refused(run, tmp_path, args, exit_code, code, reason, message, **fields) -> None:
    """The refusal as one line and as a JSON error, with nothing stored by either."""
    before = files(tmp_path)
    r = run(*args)
    assert (r.exit_code, r.stdout) == (exit_code, ""), (r.stdout, r.stderr)
    assert r.stderr == error_line(message)
    r = run("--json", *args)
    assert (r.exit_code, r.stdout) == (exit_code, "")
    assert json.loads(r.stderr) == {"error": {"code": code, "reason": reason,
                                              "message": message, **fields}}
    assert files(tmp_path) == before


def run_obj(run_id: str, n: int = 0, **over) -> dict:
    """A recorded run: three steps, two of them tool calls."""
    obj = {"run_id": run_id, "tenant": "acme", "person": "user-42",
           "started_at": "2026-05-01T10:00:00Z", "input": {"task": f"task {n}"},
           "output": f"done {n}",
           "steps": [{"type": "message", "role": "user", "content": f"task {n}"},
                     {"type": "tool_call", "tool_name": "ls", "arguments": {"path": "."},
                      "result": ["a"]},
                     {"type": "tool_call", "tool_name": "rm", "arguments": {"path": "a"}}],
           "outcome": {"status": "success"}, "metadata": {"model": "m-1"}}
    obj.update(over)
    return obj


def write_jsonl(path, *objs) -> str:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return str(path)


def add_review(run, run_id: str, label: str = "reviewed") -> str:
    """A saved review (preview, then confirm): its annotation id."""
    args = ("review", "add", run_id, "--metric", "dataset_eligibility", "--label", label)
    token = ok_json(run("--json", *args))["confirm_token"]
    return ok_json(run("--json", *args, "--confirm-token", token))["annotation_id"]


def subjects_file(tmp_path, *subjects, name: str = "subjects.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(list(subjects)))
    return str(path)


def subject(ref: str, annotation_id: str | None = None, **over) -> dict:
    s = {"subject_kind": "agent_run", "subject_ref": ref}
    if annotation_id is not None:
        s["review_annotation_id"] = annotation_id
    return s | over


def promote(run, tmp_path, anns, run_ids, key, name="evals") -> dict:
    path = subjects_file(tmp_path, *(subject(r, anns[r]) for r in run_ids), name=f"{key}.json")
    return ok_json(run("--json", "promote", name, "--file", path, "--idempotency-key", key))


def seal(run, token: str, name: str = "evals") -> dict:
    return ok_json(run("--json", "seal", name, "--confirm-token", token))


def commit_people(run, tmp_path):
    """A repository here whose dataset `evals` holds cases of p-1 and p-2: version 1 both
    people's, version 2 adds one more of p-2's. The repository, opened through the API."""
    import cas
    assert run("init").exit_code == 0
    repo = cas.open(str(tmp_path))
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=[{"input": "a", "person": "p-1"},
                                         {"input": "b", "person": "p-2"}])
    repo.commit("evals", base=1, add=[{"input": "c", "person": "p-2"}])
    return repo
