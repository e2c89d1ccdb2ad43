"""`cas evalset capture`, `list`, `show`, `matching`, `attach`, `regress` and `renew`: a scenario
in words, a replay input that is not JSON, and an eval set captured, read and regressed end to
end (exit codes, --json shapes, refusals)."""

import json

import pytest

import cas
from support.cli import ok_json
from support.evals import AUTHOR


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


REPLAY_MODULE = '''
def replay(scenario, system_context):
    return "new-" + scenario.session_id + ("-ctx" if system_context else "")

def score(scenario, run_id):
    return {"success": 0.0 if run_id.endswith("-ctx") else 1.0}
'''


def test_cli_capture_list_show_matching_attach_and_regress(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cas_cli.main import cli
    monkeypatch.setenv("CAS_USER", AUTHOR)
    location = str(tmp_path / "repo")
    cas.init(location)
    (tmp_path / "evalset_cli_agent.py").write_text(REPLAY_MODULE)
    monkeypatch.chdir(tmp_path)

    def run(*args):
        return CliRunner().invoke(cli, ["--repo", location, *args], catch_exceptions=False)

    def ok(*args):
        r = run(*args, "--json")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)
    win = ok("evalset", "capture", "es", "--session", "s1", "--kind", "win", "--signature",
             "refund", "--baseline", "success=1", "--replay-input", '{"q": "refund"}')
    assert win["sealed"] and win["version"] == 1 and win["evicted"] == []
    assert win["scenario"]["baseline_scores"] == {"success": 1}
    fail = ok("evalset", "capture", "es", "--session", "s2", "--kind", "failure",
              "--signature", "tool_failed:search", "--signature", "failed",
              "--baseline", "success=0", "--notes", "call +1 415 555 0100")
    assert "555" not in fail["scenario"]["notes"]
    again = ok("evalset", "capture", "es", "--session", "s2", "--kind", "failure",
               "--signature", "failed", "--signature", "tool_failed:search",
               "--baseline", "success=0")
    assert not again["sealed"] and again["version"] == 2
    listed = ok("evalset", "list", "es")
    assert listed["version"] == 2 and len(listed["scenarios"]) == 2
    assert [s["kind"] for s in ok("evalset", "list", "es", "--kind", "win")["scenarios"]] == \
        ["win"]
    assert "es@2: 2 scenarios" in run("evalset", "list", "es").stdout
    shown = ok("evalset", "show", "es", fail["scenario"]["id"])
    assert shown["scenario"]["signature"] == ["failed", "tool_failed:search"]
    matched = ok("evalset", "matching", "es", "--signature", "failed")
    assert [s["id"] for s in matched["scenarios"]] == [fail["scenario"]["id"]]
    attached = ok("evalset", "attach", "es", fail["scenario"]["id"], "--replay-input", '"q"')
    assert attached["version"] == 3 and attached["scenario"]["replay_input"] == "q"

    r = run("evalset", "regress", "es@3", "--json")   # no replay: all skipped, exit 13
    assert r.exit_code == 13 and "cas: warning: no replay function" in r.stderr
    out = json.loads(r.stdout)
    assert out["counts"]["skipped"] == 2 and out["recorded"] is None
    assert set(out) == {"evalset", "version", "results", "counts", "warnings", "exit_code",
                        "recorded"}
    assert set(out["results"][0]) == {"id", "kind", "outcome", "scores", "baseline", "reason"}
    r = run("evalset", "regress", "es@3", "--replay", "evalset_cli_agent:replay",
            "--scorer", "evalset_cli_agent:score", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["recorded"]["scores"] == 4
    (tmp_path / "context.txt").write_text("be terse")
    r = run("evalset", "regress", "es@3", "--replay", "evalset_cli_agent:replay",
            "--scorer", "evalset_cli_agent:score", "--system-context", "@context.txt",
            "--no-record")
    assert r.exit_code == 12 and "1 regressed" in r.stdout and "NOT ok (exit 12)" in r.stdout

    refused = run("evalset", "capture", "es", "--session", "s3", "--kind", "win",
                  "--baseline", "success", "--json")
    assert refused.exit_code == 2 and json.loads(refused.output)["error"]["reason"] == "USAGE"
    bad = run("evalset", "capture", "es", "--session", "s3", "--kind", "win",
              "--baseline", "success=great", "--json")
    assert bad.exit_code == 2 and json.loads(bad.output)["error"]["field"] == "baseline_scores"
    missing = run("evalset", "list", "nope", "--json")
    assert missing.exit_code == 3
    assert run("evalset", "renew", "es", "--json").exit_code == 0


FLAKY_REPLAY_MODULE = '''
def replay(scenario, system_context, *, repetition):
    return f"new-{scenario.session_id}-{repetition}"

def score(scenario, run_id):
    return {"success": 0.0 if run_id.endswith("-2") else 1.0}
'''


def test_regress_repeat_names_a_flaky_win_and_does_not_fail_on_it(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cas_cli.main import cli
    monkeypatch.setenv("CAS_USER", AUTHOR)
    location = str(tmp_path / "repo")
    cas.init(location)
    (tmp_path / "evalset_flaky_agent.py").write_text(FLAKY_REPLAY_MODULE)
    monkeypatch.chdir(tmp_path)

    def run(*args):
        return CliRunner().invoke(cli, ["--repo", location, *args], catch_exceptions=False)
    r = run("evalset", "capture", "es", "--session", "s1", "--kind", "win", "--baseline",
            "success=1", "--replay-input", '{"q": "refund"}')
    assert r.exit_code == 0, r.output
    args = ("evalset", "regress", "es@1", "--replay", "evalset_flaky_agent:replay",
            "--scorer", "evalset_flaky_agent:score", "--repeat", "5")
    r = run(*args)
    assert r.exit_code == 0, r.output
    assert "es@1: 1 scenarios x 5 repetitions: 0 held, 0 regressed" in r.stdout
    assert "0 skipped, 1 flaky; ok" in r.stdout
    assert "FLAKY (regressed in some repetitions only): b3:" in r.stdout
    out = json.loads(run(*args, "--json", "--no-record").stdout)
    assert out["repeat"] == 5 and len(out["flaky"]) == 1
    assert [x["outcome"] for x in out["results"][0]["repetitions"]] == \
        ["held", "held", "regressed", "held", "held"]
    r = run(*args[:-1], "0", "--json")
    assert r.exit_code == 2 and json.loads(r.stderr)["error"]["reason"] == "INVALID_REPEAT"
