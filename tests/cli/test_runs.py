"""`cas runs import`, `list` and `show`: exact output, --json shapes, refusals that store
nothing; runs of an erased person refused then admitted, other formats (and their flags), tool
calls hidden in messages, and a local capture store imported."""

import asyncio
import json
import os

import pytest

import cas
from cas.evals.capture.stores import LocalCaptureStore
from cas.format.keys import import_key
from cas.format.records import RunAdmission, parse_record_file
from support import lifecycle
from support.citing import snapshot as everything
from support.cli import add_review, commit_people, ok_json, refused, run_obj, write_jsonl
from support.evals import ADA, record
from support.lifecycle import OPERATOR, jsonl


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


@pytest.fixture
def cli_repo(run, tmp_path, monkeypatch):
    """Dataset `evals` with cases of p-1 and p-2 (two versions), made by the operator: the
    repository, opened through the API."""
    monkeypatch.setenv("CAS_USER", OPERATOR)
    return commit_people(run, tmp_path)


def test_cli_import_refused_then_admitted(run, cli_repo, tmp_path):
    cli_repo.import_runs([lifecycle.run_obj("r-1", 1, person="p-9")])
    record = cli_repo.erase("p-9", cli_repo.erase("p-9")["confirm_token"])
    (tmp_path / "runs.jsonl").write_bytes(jsonl(lifecycle.run_obj("r-1", 1, person="p-9"),
                                                lifecycle.run_obj("r-2", 2, person="p-3")))
    before = everything(cli_repo)
    r = run("runs", "import", "runs.jsonl")
    assert (r.exit_code, r.stdout) == (5, "")
    assert r.stderr == (
        f"cas: error: run 'r-1' names person 'p-9', erased at {record.erased_at} (erasure "
        f"{record.id}); nothing was stored. Bringing their data back needs their new consent: "
        "admit them deliberately with --allow-erased-person p-9 (allow_erased_persons)\n")
    r = run("--json", "runs", "import", "runs.jsonl")
    assert json.loads(r.stderr)["error"] == {
        "code": "FAILED_PRECONDITION", "reason": "PERSON_ERASED_BEFORE", "run_id": "r-1",
        "erased_at": record.erased_at, "erasure": record.id,
        "message": r.stderr and json.loads(r.stderr)["error"]["message"]}
    assert everything(cli_repo) == before
    r = run("--json", "runs", "import", "runs.jsonl", "--allow-erased-person", "p-9",
            "--allow-erased-person", "p-3")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == {"imported": ["r-1", "r-2"], "unchanged": 0, "warnings": []}
    [key] = cli_repo.backend.list("runs/admissions/")
    admission = parse_record_file(cli_repo.backend.get(key), RunAdmission, key)
    assert (admission.persons, admission.author) == ([record.person], OPERATOR)
    assert cli_repo.backend.exists(import_key(admission.number))
    assert json.loads(run("--json", "fsck").stdout)["ok"] is True


def test_runs_import_from_captures(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cas_cli.main import cli
    monkeypatch.setenv("CAS_USER", ADA)
    caps = tmp_path / "caps"
    store = LocalCaptureStore(caps)
    asyncio.run(store.start())
    asyncio.run(store.append(record(1)))
    with open(caps / os.listdir(caps)[0], "ab") as f:
        f.write(b'{"torn')
    location = str(tmp_path / "repo")
    cas.init(location)

    def run(*args):
        return CliRunner().invoke(cli, ["--repo", location, *args], catch_exceptions=False)
    out = run("runs", "import", "--from-captures", str(caps), "--tenant", "acme", "--json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["imported"] == ["capture-cr-1"] and data["torn"][0]["line"] == 2
    assert "torn or unreadable capture record was skipped" in out.stderr
    again = json.loads(run("runs", "import", "--from-captures", str(caps), "--tenant", "acme",
                           "--json").stdout)
    assert again["imported"] == [] and again["unchanged"] == 1
    refused = run("runs", "import", "--from-captures", str(caps), "--json")
    assert json.loads(refused.output)["error"]["reason"] == "TENANT_REQUIRED"
    both = run("runs", "import", "--from-captures", str(caps), "x.jsonl", "--tenant", "a")
    assert both.exit_code != 0
    assert f"cas: warning: the captures in {caps} were made by a LocalCaptureStore opened " \
        "without a repository" in out.stderr  # its runs name nobody: an erasure misses them


def test_runs_imported_from_a_keyed_local_store_are_found_by_erase(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cas_cli.main import cli
    monkeypatch.setenv("CAS_USER", ADA)
    location, caps = str(tmp_path / "repo"), tmp_path / "caps"
    cas.init(location)
    store = LocalCaptureStore(caps, repo=cas.open(location))
    asyncio.run(store.start())
    asyncio.run(store.append(record(1).replace(person=store.person_key("alice"))))

    def run(*args):
        return CliRunner().invoke(cli, ["--repo", location, *args], catch_exceptions=False)
    out = run("runs", "import", "--from-captures", str(caps), "--tenant", "acme")
    assert (out.exit_code, out.stderr) == (0, ""), out.output
    token = json.loads(run("--json", "erase", "--person", "alice").stdout)["confirm_token"]
    erased = run("--json", "erase", "--person", "alice", "--confirm-token", token)
    assert erased.exit_code == 0, erased.output
    assert json.loads(run("--json", "runs", "list").stdout)["runs"] == []


def test_the_cli_imports_another_format_and_refuses_format_flags_for_native(run, tmp_path):
    assert run("init").exit_code == 0
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps({"messages": [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a b"},
        {"role": "assistant", "content": "a and b"}]}))
    r = run("--json", "runs", "import", "--format", "openai-chat", "--tenant", "acme", str(chat))
    assert r.exit_code == 0, r.output
    imported = json.loads(r.stdout)
    assert len(imported["imported"]) == 1 and imported["unchanged"] == 0
    (run_id,) = imported["imported"]
    steps = json.loads(run("--json", "runs", "show", run_id).stdout)["steps"]
    (call,) = [s for s in steps if s["type"] == "tool_call"]
    assert (call["tool_name"], call["arguments"], call["result"]) == ("ls", {}, "a b")
    again = run("runs", "import", "--format", "openai-chat", "--tenant", "acme", str(chat))
    assert again.stdout == "imported 0 runs (1 already present, unchanged)\n"
    r = run("runs", "import", "--tenant", "acme", str(chat))
    assert (r.exit_code, r.stderr) == (2, "cas: error: --tenant applies to another format's "
                                          "documents; cas's own runs name their tenant and "
                                          "person (give --format)\n")


def test_the_cli_warns_of_tool_calls_hidden_in_native_messages(run, tmp_path):
    assert run("init").exit_code == 0
    native = tmp_path / "runs.jsonl"
    native.write_text(json.dumps({"run_id": "r-1", "tenant": "acme", "steps": [
        {"type": "message", "role": "tool", "tool_call_id": "c1", "content": "x"}]}) + "\n")
    r = run("runs", "import", str(native))
    assert r.exit_code == 0
    assert r.stderr == ("cas: warning: run 'r-1': its message steps hold tool calls that are "
                        "not tool_call steps; import the original with --format openai-chat\n")
    assert r.stdout == "imported 1 runs (0 already present, unchanged)\n"


SINCE_FORMS = ["2025-05-12 (a date: its midnight UTC)",
               "2025-05-12T20:27, 2025-05-12T20:27:36 or 2025-05-12T20:27:36.123 (UTC)",
               "any of those times followed by Z, +02:00, -0400 or +02 (an offset)"]


def _since_runs(run, tmp_path) -> None:
    """ny: 00:27 UTC on the 13th, written in New York; utc: 22:00 UTC on the 12th; odd: a
    started_at that is not a time."""
    assert run("init").exit_code == 0
    path = write_jsonl(tmp_path / "times.jsonl",
                       run_obj("ny", 1, started_at="2025-05-12T20:27:36-04:00"),
                       run_obj("odd", 2, started_at="5/13/2025"),
                       run_obj("utc", 3, started_at="2025-05-12T22:00:00Z"))
    assert run("runs", "import", path).exit_code == 0


@pytest.mark.parametrize("command", [("runs", "list"), ("review", "queue")])
def test_since_compares_times_whatever_the_offset(run, tmp_path, command):
    _since_runs(run, tmp_path)
    page = ok_json(run("--json", *command, "--since", "2025-05-12T23:00:00Z"))
    assert (page["runs"], page["undated"], page["next_cursor"]) == (["ny"], ["odd"], None)
    # a date alone is its midnight UTC
    page = ok_json(run("--json", *command, "--since", "2025-05-12"))
    assert (page["runs"], page["undated"]) == (["ny", "utc"], ["odd"])
    assert ok_json(run("--json", *command, "--since", "2025-05-13"))["runs"] == ["ny"]
    assert ok_json(run("--json", *command))["undated"] == []  # no filter: nothing left out
    r = run(*command, "--since", "2025-05-13T00:27:37Z")
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout.splitlines()[-1] == ("# not placed in time (started_at absent or not a "
                                         "time): odd")


@pytest.mark.parametrize("since", ["yesterday", "5/1/2025"])
@pytest.mark.parametrize("command", [("runs", "list"), ("review", "queue"),
                                     ("promote", "evals", "--reviewed", "--idempotency-key",
                                      "k")])
def test_since_that_is_not_a_time_is_refused_naming_the_accepted_forms(run, tmp_path, since,
                                                                       command):
    _since_runs(run, tmp_path)
    assert run("dataset", "create", "evals").exit_code == 0
    refused(run, tmp_path, (*command, "--since", since), 2, "INVALID_ARGUMENT", "INVALID_TIME",
            f"since: {since!r} is not a time; accepted: " + "; ".join(SINCE_FORMS),
            what="since", accepted=SINCE_FORMS)


def test_promote_reviewed_since_selects_by_time(run, tmp_path):
    _since_runs(run, tmp_path)
    assert run("dataset", "create", "evals").exit_code == 0
    for run_id in ("ny", "odd", "utc"):
        add_review(run, run_id)
    args = ("promote", "evals", "--reviewed", "--since", "2025-05-12T23:00:00Z")
    p = ok_json(run("--json", *args, "--idempotency-key", "k1"))
    assert [s["run_id"] for s in p["subjects"]] == ["ny"]
    refused(run, tmp_path, (*args, "--run", "odd", "--idempotency-key", "k2"), 5,
            "FAILED_PRECONDITION", "RUN_NOT_SELECTED",
            "run 'odd' has a started_at of '5/13/2025', which is not a time, so --since "
            "2025-05-12T23:00:00Z cannot select it", run_id="odd")


# -- several files, warnings, and refusals that say what a file is (issue 33) ------------------
def _chat_doc(tag: str) -> dict:
    return {"messages": [{"role": "user", "content": f"hello {tag}"}],
            "response": {"id": f"chatcmpl-{tag}", "choices": [{"index": 0, "message": {
                "role": "assistant", "content": f"hi {tag}"}, "finish_reason": "stop"}]}}


def test_a_converted_file_is_read_a_line_at_a_time_and_a_bad_last_line_imports_none(
        run, tmp_path):
    assert run("init").exit_code == 0
    docs = [_chat_doc(f"s{i}") for i in range(40)]
    path = tmp_path / "chats.jsonl"
    path.write_bytes(b"".join(json.dumps(d).encode() + b"\n" for d in docs) + b'{"messages": [\n')
    for fmt in ("openai-chat", "auto"):  # (auto: read twice, to detect, then to convert)
        refused(run, tmp_path, ("runs", "import", "--format", fmt, "--tenant", "acme",
                                str(path)), 2, "INVALID_ARGUMENT", None,
                f"{path} line 41: Input data was truncated", line=41, source=str(path))
        assert ok_json(run("--json", "runs", "list"))["runs"] == []
    path.write_bytes(b"".join(json.dumps(d).encode() + b"\n" for d in docs))
    r = ok_json(run("--json", "runs", "import", "--format", "openai-chat", "--tenant", "acme",
                    str(path)))
    assert r["imported"] == sorted(f"openai-chat:chatcmpl-s{i}" for i in range(40))


def test_several_files_are_one_import_all_or_nothing(run, tmp_path):
    assert run("init").exit_code == 0
    a = write_jsonl(tmp_path / "a.jsonl", _chat_doc("a"), _chat_doc("b"))
    bad = write_jsonl(tmp_path / "bad.jsonl", {"model": "m", "input": "responses, not chat"})
    c = write_jsonl(tmp_path / "c.jsonl", _chat_doc("c"))
    args = ("runs", "import", "--format", "openai-chat", "--tenant", "acme", a, bad, c)
    r = run("--json", *args)
    assert (r.exit_code, r.stdout) == (2, "")
    error = json.loads(r.stderr)["error"]
    assert (error["code"], error["reason"], error["source"]) == (
        "INVALID_ARGUMENT", "NOT_THIS_FORMAT", bad)
    assert error["message"].startswith(f"{bad}: not an openai-chat document (it looks like "
                                       "OpenAI Responses items")
    assert ok_json(run("--json", "runs", "list"))["runs"] == []  # none of the three imported
    r = run("--json", "runs", "import", "--format", "openai-chat", "--tenant", "acme", a, c)
    assert ok_json(r) == {"imported": ["openai-chat:chatcmpl-a", "openai-chat:chatcmpl-b",
                                       "openai-chat:chatcmpl-c"], "unchanged": 0,
                          "warnings": []}
    # cas's own runs, several files too
    one = write_jsonl(tmp_path / "one.jsonl", run_obj("r-1"))
    two = write_jsonl(tmp_path / "two.jsonl", run_obj("r-2"), run_obj("r-3"))
    assert ok_json(run("--json", "runs", "import", one, two))["imported"] == ["r-1", "r-2",
                                                                              "r-3"]


def test_a_conversions_warnings_are_printed_and_returned(run, tmp_path):
    assert run("init").exit_code == 0
    uri = "https://api.openai.com/v1/chat/completions"
    cassette = tmp_path / "c.json"
    cassette.write_text(json.dumps({"interactions": [
        {"request": {"method": "POST", "uri": "https://telemetry.example/runs", "body": "{}"},
         "response": {"status": {"code": 200}, "headers": {}, "body": {"string": "{}"}}},
        {"request": {"method": "POST", "uri": uri, "body": json.dumps(
            {"model": "m", "messages": [{"role": "user", "content": "hi"}]})},
         "response": {"status": {"code": 200}, "headers": {"Content-Encoding": ["zstd"]},
                      "body": {"string": "(\ufffd/\ufffd"}}}]}))
    args = ("runs", "import", "--format", "openai-chat", "--container", "vcr", "--tenant",
            "acme", str(cassette))
    r = run(*args)
    assert r.exit_code == 0, r.output
    [run_id] = json.loads(run("--json", "runs", "list").stdout)["runs"]
    said = ["interactions[0] (https://telemetry.example/runs) is not read by openai-chat (not "
            "a call of its API): not imported",
            f"the final response ({uri}) could not be read: its body is not JSON; the run ends "
            "at its last request"]
    lines = r.stderr.splitlines()
    assert lines == [f"cas: warning: {cassette}: run {run_id!r}: {said[1]}",
                     f"cas: warning: {cassette}: {said[0]}"]
    out = json.loads(run("--json", *args).stdout)
    assert out["warnings"] == [
        {"source": str(cassette), "run_id": run_id, "message": said[1]},
        {"source": str(cassette), "run_id": None, "message": said[0]}]
    shown = json.loads(run("--json", "runs", "show", run_id).stdout)
    assert shown["outcome"] == {"response_unread": "its body is not JSON"}


def test_a_file_of_another_shape_is_refused_saying_what_it_looks_like(run, tmp_path):
    assert run("init").exit_code == 0
    cassette = tmp_path / "c.yaml"
    cassette.write_text("interactions:\n- request:\n    method: POST\n    uri: "
                        "https://api.openai.com/v1/chat/completions\n    body: '{}'\n"
                        "  response:\n    status: {code: 200}\n    body: {string: '{}'}\n"
                        "version: 1\n")
    r = run("--json", "runs", "import", "--format", "openai-chat", "--tenant", "acme",
            str(cassette))
    error = json.loads(r.stderr)["error"]
    assert r.exit_code == 2
    assert error["looks_like"] == "it looks like a vcr cassette: give --container vcr"
    assert error["message"].endswith("(it looks like a vcr cassette: give --container vcr)")
    # a per-line file of another format, given as cas's own runs (no --format)
    chat = write_jsonl(tmp_path / "chat.jsonl", _chat_doc("a"), _chat_doc("b"))
    r = run("--json", "runs", "import", chat)
    error = json.loads(r.stderr)["error"]
    assert (r.exit_code, error["code"], error["line"]) == (2, "INVALID_ARGUMENT", 1)
    assert error["looks_like"] == ("it looks like openai-chat or anthropic documents: give "
                                   "--format with one of them")
    assert error["message"] == (f"{chat} line 1: $.run_id: required field is missing (it looks "
                                "like openai-chat or anthropic documents: give --format with "
                                "one of them)")
    one = write_jsonl(tmp_path / "one.jsonl", {"model": "m", "input": [
        {"type": "message", "role": "user", "content": "hi"}]})
    r = run("--json", "runs", "import", one)
    assert json.loads(r.stderr)["error"]["looks_like"] == (
        "it looks like openai-responses documents: give --format openai-responses")
    r = run("--json", "runs", "import", str(cassette))
    assert json.loads(r.stderr)["error"]["looks_like"] == (
        "it looks like a vcr cassette: give --format auto --container vcr")
    assert ok_json(run("--json", "runs", "list"))["runs"] == []
