"""`cas config`, `cas status` and `cas serve`: who you are, what is waiting, the review page."""

import json
import os
import socket
import subprocess
import sys
import urllib.request

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


def test_serve_without_the_web_extra_names_it_and_an_install_line_that_works(run, tmp_path,
                                                                              monkeypatch):
    """cas is not on PyPI: the hint installs the extra from the checkout, not by a name."""
    assert run("init").exit_code == 0
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn fails
    r = run("--json", "serve")
    assert (r.exit_code, r.stdout) == (2, "")
    assert json.loads(r.stderr)["error"]["message"] == (
        "cas serve needs the `web` extra (uvicorn is missing): pip install '.[web]' in the cas "
        "checkout")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_json_prints_one_line_once_it_listens_and_nothing_else(run, tmp_path,
                                                                      monkeypatch):
    assert run("init").exit_code == 0
    port = _free_port()
    env = {**os.environ, "CAS_USER": "Ada <ada@example.com>",
           "CAS_CONFIG": str(tmp_path / "no-config.json")}
    env.pop("CAS_REPO", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", "from cas_cli.main import main; main()", "serve", "--json",
         "--port", str(port)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # printed once the socket listens, before serving
        assert json.loads(line) == {"url": f"http://127.0.0.1:{port}/", "host": "127.0.0.1",
                                    "port": port, "repository": str(tmp_path / ".cas"),
                                    "reviewer": "Ada <ada@example.com>"}
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy
        with direct.open(f"http://127.0.0.1:{port}/queue", timeout=10) as page:
            assert page.status == 200  # it listens as soon as the line is out
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    assert out == ""  # nothing else on stdout


def test_serve_on_a_port_in_use_is_refused_as_unavailable(run, tmp_path):
    assert run("init").exit_code == 0
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = run("--json", "serve", "--port", str(port))
    assert (r.exit_code, r.stdout) == (8, "")
    error = json.loads(r.stderr)["error"]
    assert (error["code"], error["reason"], error["port"]) == ("UNAVAILABLE", "LISTEN_FAILED",
                                                               port)
    assert error["message"].startswith(f"cannot listen on 127.0.0.1:{port}: ")
