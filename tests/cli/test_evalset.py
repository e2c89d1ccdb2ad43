"""`cas evalset capture`, `list` and `show`: a scenario in words, and a replay input that is
not JSON."""

import json

import pytest
from support.cli import ok_json


@pytest.fixture
def repo(run):
    assert run("init").exit_code == 0


def test_a_captured_scenario_listed_and_shown_in_words(run, repo):
    r = run("evalset", "list", "es")
    assert r.exit_code == 3 and r.stdout == ""
    captured = ok_json(run("--json", "evalset", "capture", "es", "--session", "s1", "--kind",
                           "win", "--signature", "refund", "--baseline", "success=1",
                           "--replay-input", '{"q": "refund"}'))
    s = captured["scenario"]
    r = run("evalset", "list", "es")
    assert (r.exit_code, r.stdout) == (
        0, f"win      {s['id']}  {s['captured_at']}  s1  refund  replayable\n"
           "es@1: 1 scenario\n")
    r = run("evalset", "show", "es", s["id"])
    assert (r.exit_code, r.stdout) == (0, "es@1\n"
                                          f"id:           {s['id']}\n"
                                          "kind:         win\n"
                                          "signature:    refund\n"
                                          'baseline:     {"success": 1}\n'
                                          'replay input: {"q": "refund"}\n'
                                          "notes:        -\n"
                                          "session:      s1\n"
                                          f"captured at:  {s['captured_at']}\n")


def test_a_replay_input_that_is_not_json_is_refused(run, repo):
    r = run("--json", "evalset", "capture", "es", "--session", "s1", "--kind", "win",
            "--replay-input", "{not json")
    assert (r.exit_code, r.stdout) == (2, "")
    assert json.loads(r.stderr)["error"] == {
        "code": "INVALID_ARGUMENT", "reason": None,
        "message": "--replay-input: JSON is malformed: object keys must be strings (byte 1)"}
    assert run("evalset", "list", "es").exit_code == 3  # no eval set was created
