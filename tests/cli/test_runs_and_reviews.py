"""`cas config`, `cas status` and `cas serve`: who you are, what is waiting, the review page."""

import json

from support.cli import ok_json, refused


def test_config_reads_and_sets_who_you_are(run, tmp_path, monkeypatch):
    config = tmp_path / "config" / "cas.json"
    monkeypatch.setenv("CAS_CONFIG", str(config))
    r = run("config", "user.name")
    assert (r.exit_code, r.stdout, r.stderr) == (1, "", "")  # not set: nothing, and exit 1
    assert ok_json(run("--json", "config", "user.name")) == {"key": "user.name", "value": None}
    r = run("config", "user.name", "Grace Hopper")
    assert (r.exit_code, r.stdout) == (0, "Grace Hopper\n")
    assert ok_json(run("--json", "config", "user.email", "grace@example.com")) == {
        "key": "user.email", "value": "grace@example.com"}
    assert run("config", "user.email").stdout == "grace@example.com\n"
    assert config.exists()  # kept outside any repository: there is none here
    assert run("init").exit_code == 0
    refused(run, tmp_path, ("config", "user.phone", "123"), 2, "INVALID_ARGUMENT", None,
            "unknown setting 'user.phone'; accepted: user.name, user.email")


def test_status_names_what_is_waiting(run, runs_file):
    assert run("runs", "import", runs_file).exit_code == 0
    assert run("dataset", "create", "evals").exit_code == 0
    r = run("status")
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout == ("staged proposals not sealed: 0\n"
                        "runs awaiting review (dataset_eligibility): 4\n"
                        "  r-0\n  r-1\n  r-2\n  r-3\n"
                        "erasures not finished: 0\n")
    data = ok_json(run("--json", "status", "--metric", "tone"))
    assert (data["staged_proposals"], data["runs_awaiting_review"],
            data["first_runs_awaiting_review"], data["pending_erasures"]) == (
        [], 4, ["r-0", "r-1", "r-2", "r-3"], [])


def test_serve_refuses_a_port_out_of_range_before_serving(run, tmp_path):
    assert run("init").exit_code == 0
    for port in ("0", "65536"):
        r = run("--json", "serve", "--port", port)
        assert (r.exit_code, r.stdout) == (2, "")
        assert json.loads(r.stderr)["error"] == {
            "code": "INVALID_ARGUMENT", "reason": None,
            "message": f"--port must be from 1 to 65535, not {port}"}
