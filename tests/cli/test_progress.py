"""Progress of long work goes to stderr only when it is a terminal (a pseudo-terminal here),
also under --json, whose stdout stays exactly one JSON document; never when it is a pipe."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest

import cas as cas_api
from support.lifecycle import jsonl, run_obj

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")


def cas(args, cwd, env, terminal: bool) -> tuple[int, str, str]:
    """Run `cas ARGS` with stderr on a pseudo-terminal (or a pipe): (exit, stdout, stderr)."""
    cmd = [sys.executable, "-c", "from cas_cli.main import main; main()", *args]
    if not terminal:
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
        return done.returncode, done.stdout, done.stderr
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=follower,
                                stdin=subprocess.DEVNULL)
        os.close(follower)
        err = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            err += chunk
        out = proc.stdout.read().decode()
        proc.wait()
    finally:
        os.close(leader)
    return proc.returncode, out, err.decode("utf-8", "replace")


@pytest.fixture
def scene(tmp_path):
    env = {**os.environ, "CAS_USER": "Ada <ada@example.com>",
           "CAS_CONFIG": str(tmp_path / "c.json")}
    env.pop("CAS_REPO", None)
    (tmp_path / "runs.jsonl").write_bytes(jsonl(*(run_obj(f"r-{i}", i) for i in range(3))))
    cas_api.init(str(tmp_path))
    return tmp_path, env


def test_import_and_review_show_progress_on_a_terminal_and_keep_stdout_json(scene):
    cwd, env = scene
    code, out, err = cas(["--json", "runs", "import", "runs.jsonl"], cwd, env, True)
    assert code == 0
    assert json.loads(out)["imported"] == ["r-0", "r-1", "r-2"]  # one JSON document
    assert "encoding runs [" in err and "0/3" in err
    code, out, err = cas(["--json", "review", "add", "r-0", "--run", "r-1", "--metric", "m",
                          "--label", "ok"], cwd, env, True)
    assert "checking reviewed runs [" in err
    repo = cas_api.open(str(cwd))  # the rest of the scene, in this process
    repo.set_eligibility("m", ["ok"], author="a")
    requests = [{"run_id": r, "metric": "m", "label": "ok"} for r in ("r-0", "r-1")]
    token = repo.add_reviews(requests, reviewer="a")["confirm_token"]
    repo.add_reviews(requests, confirm_token=token, reviewer="a")
    repo.create_dataset("evals", author="a")
    code, out, err = cas(["--json", "promote", "evals", "--reviewed", "--idempotency-key", "k"],
                         cwd, env, True)
    assert code == 0 and len(json.loads(out)["proposed"]["added"]) == 2
    assert "checking and freezing runs [" in err


def test_no_progress_when_stderr_is_not_a_terminal(scene):
    cwd, env = scene
    code, out, err = cas(["runs", "import", "runs.jsonl"], cwd, env, False)
    assert (code, err) == (0, "")
    assert out.startswith("imported 3 runs")
