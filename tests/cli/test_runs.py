"""`cas runs import`, `list` and `show`: exact output, --json shapes, refusals that store
nothing."""

import json

import pytest
from support.cli import ok_json, refused, run_obj, write_jsonl


def test_runs_import_list_show(run, runs_file, tmp_path):
    r = run("runs", "import", runs_file)
    assert (r.exit_code, r.stdout, r.stderr) == (
        0, "imported 4 runs (0 already present, unchanged)\n", "")
    assert ok_json(run("--json", "runs", "import", runs_file)) == {"imported": [],
                                                                   "unchanged": 4,
                                                                   "warnings": []}
    more = write_jsonl(tmp_path / "more.jsonl", run_obj("r-0", 0), run_obj("r-9", 9))
    assert ok_json(run("runs", "import", "--json", more)) == {"imported": ["r-9"],
                                                              "unchanged": 1, "warnings": []}
    # '-' reads stdin
    stdin = json.dumps(run_obj("r-a")) + "\n"
    assert ok_json(run("--json", "runs", "import", "-", input=stdin)) == {
        "imported": ["r-a"], "unchanged": 0, "warnings": []}
    ids = ["r-0", "r-1", "r-2", "r-3", "r-9", "r-a"]
    listed = ok_json(run("--json", "runs", "list"))
    assert (listed["runs"], listed["next_cursor"]) == (ids, None)
    assert [s["run_id"] for s in listed["summaries"]] == ids
    r = run("runs", "list")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["RUN", "TENANT", "STARTED", "STEPS", "TOOLS", "FIRST", "USER",
                                "MESSAGE"]
    assert [line.split()[0] for line in lines[1:]] == ids
    assert lines[1].split() == ["r-0", "acme", "2026-05-01T10:00:00Z", "3", "2", "task", "0"]
    page = ok_json(run("--json", "runs", "list", "--limit", "2", "--cursor", "r-1"))
    assert (page["runs"], page["next_cursor"]) == (["r-2", "r-3"], "r-3")
    assert ok_json(run("--json", "runs", "list", "--tenant", "other"))["runs"] == []
    shown = ok_json(run("--json", "runs", "show", "r-1"))
    assert shown == {"kind": "run", "format": 1, "extra": {}, **run_obj("r-1", 1)}
    r = run("runs", "show", "r-1")
    assert r.exit_code == 0
    assert r.stdout == json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_runs_show_unknown(run, runs_file, tmp_path):
    refused(run, tmp_path, ("runs", "show", "r-404"), 3, "NOT_FOUND", "RUN_NOT_FOUND",
            "no recorded run 'r-404' (import it with `cas runs import`)", run_id="r-404")


@pytest.mark.parametrize("bad,problem", [
    ({"run_id": "x", "steps": []}, "$.tenant: required field is missing"),
    ({"run_id": "x", "tenant": "a"}, "$.steps: required field is missing"),
    ({"tenant": "a", "steps": []}, "$.run_id: required field is missing"),
    ({"run_id": 7, "tenant": "a", "steps": []}, "$.run_id: must be a non-empty string"),
    ({"run_id": "x", "tenant": "a", "steps": [{"type": "tool_call"}]},
     "$.steps[0].tool_name: must be a non-empty string"),
    ({"run_id": "x", "tenant": "a", "steps": [{"type": "thought"}]},
     "$.steps[0].type: must be one of message, tool_call, not 'thought'"),
    ({"run_id": "x", "tenant": "a", "steps": [1]}, "$.steps[0]: a step must be a JSON object"),
    ({"run_id": "a\nb", "tenant": "a", "steps": []},
     "$.run_id: must be at most 256 printable characters; it contains the control character "
     "U+000A at character 1"),
])
def test_runs_import_refuses_a_bad_line_and_stores_nothing(run, runs_file, tmp_path, bad,
                                                           problem):
    assert run("runs", "import", runs_file).exit_code == 0
    path = write_jsonl(tmp_path / "bad.jsonl", run_obj("new-1"), bad, run_obj("new-2"))
    refused(run, tmp_path, ("runs", "import", path), 2, "INVALID_ARGUMENT", None,
            f"{path} line 2: {problem}", line=2)


def test_runs_import_refuses_undecodable_lines(run, runs_file, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(json.dumps(run_obj("ok")).encode() + b"\n"
                     + b'{"run_id": "x", "tenant": "\xff", "steps": []}\n')
    refused(run, tmp_path, ("runs", "import", str(path)), 2, "INVALID_ARGUMENT", None,
            f"{path} line 2: Invalid UTF-8 encoded string", line=2)
    path.write_bytes(b'{"run_id": "x", "tenant": "a", "steps": [], "input": NaN}\n')
    refused(run, tmp_path, ("runs", "import", str(path)), 2, "INVALID_ARGUMENT", None,
            f"{path} line 1: JSON is malformed: invalid character (byte 53)", line=1)


def test_runs_import_refuses_a_changed_run(run, runs_file, tmp_path):
    assert run("runs", "import", runs_file).exit_code == 0
    path = write_jsonl(tmp_path / "changed.jsonl", run_obj("r-new"),
                       run_obj("r-2", 2, output="rewritten"))
    refused(run, tmp_path, ("runs", "import", path), 5, "FAILED_PRECONDITION",
            "RUN_ID_CONFLICT", "run 'r-2' was already imported with different content; a run "
            "id names one recording", run_id="r-2")
    assert "r-new" not in ok_json(run("--json", "runs", "list"))["runs"]


def test_transcript_with_json_is_refused_as_a_usage_error(run, runs_file):
    assert run("runs", "import", runs_file).exit_code == 0
    message = "--transcript is text for reading; --json prints the run itself: give one of them"
    for args in (("runs", "show", "r-1", "--transcript", "--json"),
                 ("--json", "runs", "show", "--transcript", "r-1")):
        r = run(*args)
        assert (r.exit_code, r.stdout) == (2, "")
        assert json.loads(r.stderr) == {"error": {"code": "INVALID_ARGUMENT", "reason": "USAGE",
                                                  "message": message}}
    r = run("runs", "show", "r-404", "--transcript")
    assert (r.exit_code, r.stdout) == (3, "")
    assert r.stderr == "cas: error: no recorded run 'r-404' (import it with `cas runs import`)\n"
