"""examples/quickstart.sh: the README's first command walks the whole lifecycle without error."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from support import ROOT

SCRIPT = ROOT / "examples" / "quickstart.sh"


VARIANTS = {"CAS_USER": "Quick Tester <qt@example.com>", "cas-config": None}


def start_quickstart(tmp_path: pathlib.Path, cas_user: str | None) -> subprocess.Popen:
    home = tmp_path / "home"
    home.mkdir()
    bindir = os.path.dirname(sys.executable)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAS_")}
    env.update(HOME=str(home), TMPDIR=str(tmp_path), CAS_CONFIG=str(home / "cas-config.json"),
               PATH=bindir + os.pathsep + env.get("PATH", "/usr/bin:/bin"))
    env.pop("XDG_CONFIG_HOME", None)
    if cas_user is not None:
        env["CAS_USER"] = cas_user
    return subprocess.Popen(["sh", str(SCRIPT)], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def quickstarts(tmp_path_factory) -> dict:
    """Both variants, run at once (each is a chain of `cas` processes: the machine's two cores
    run them side by side): variant -> (work directory, CompletedProcess)."""
    started = {}
    for variant, cas_user in VARIANTS.items():
        where = tmp_path_factory.mktemp(f"quickstart-{variant}")
        started[variant] = (where, start_quickstart(where, cas_user))
    done = {}
    for variant, (where, proc) in started.items():
        out, err = proc.communicate(timeout=300)
        done[variant] = (where, subprocess.CompletedProcess(proc.args, proc.returncode,
                                                             out, err))
    return done


@pytest.mark.skipif(shutil.which("cas", path=os.path.dirname(sys.executable)) is None,
                    reason="the cas console script is not installed next to this interpreter")
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_quickstart_walks_the_lifecycle(quickstarts, variant):
    tmp_path, p = quickstarts[variant]
    cas_user = VARIANTS[variant]
    assert p.returncode == 0, f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    out = p.stdout
    reviewer = cas_user or "Ada Lovelace <ada@example.com>"
    expected = [
        "imported 39 runs (0 already present, unchanged)",
        "imported 0 runs (39 already present, unchanged)",
        f"review of r-0101: dataset_eligibility = reviewed by {reviewer}",
        "saved 34 reviews",
        "created dataset support-evals (admission reviewed: only promotion of reviewed runs "
        "adds cases)",
        "result: not recorded",                      # the transcript of r-0104
        "its newest judgment on 'dataset_eligibility', ann-",  # r-0603 is refused: rejected
        "runs awaiting review (dataset_eligibility): 4",
        "  admission: reviewed (only promotion of reviewed runs adds cases)",
        "state:     ACTIVE",
        'there is no "latest"',
        "valid: b3:",
        "created experiment quickstart over support-evals@2 (b3:",
        "a cited version cannot be deleted",
        "checked ",
    ]
    for line in expected:
        assert line in out, f"{line!r} not in the output:\n{out}"
    assert re.search(r"^sealed support-evals@1: 10 cases \(\+10 -0\) b3:[0-9a-f]{64}$", out, re.M)
    assert re.search(r"^already sealed as support-evals@1: 10 cases", out, re.M)
    assert re.search(r"^sealed support-evals@2: 32 cases \(\+22 -0\) b3:[0-9a-f]{64}$", out, re.M)
    # previews, pages and diffs show each case beside its run, tenant and outcome
    assert re.search(r"^\+ b3:[0-9a-f]{64}  r-0103  acme    failure$", out, re.M)
    assert re.search(r"^b3:[0-9a-f]{64}  r-0104  acme    partial$", out, re.M)
    assert len(re.findall(r"^b3:[0-9a-f]{64}  r-0\d{3}  acme ", out, re.M)) >= 8  # two pages
    assert re.search(r"^\+ b3:[0-9a-f]{64}  r-0701  umbrella  success$", out, re.M)
    assert re.search(r'^\$ cas case support-evals 2 --run r-0104\n\{\n  "format": 1,\n'
                     r'  "id": "b3:[0-9a-f]{64}",$', out, re.M)  # a case named by its run
    assert re.search(r'^\$ cas case support-evals 2 b3:[0-9a-f]{8}\n\{\n', out, re.M)
    assert re.search(rf"^ann-[0-9a-f]{{32}}  dataset_eligibility = reviewed  {re.escape(reviewer)}",
                     out, re.M)
    pin = re.search(r"^support-evals@2#b3:[0-9a-f]{64}$", out, re.M)
    assert pin, out
    assert f"valid: {pin.group(0)} (32 cases, ACTIVE)" in out
    assert re.search(r"^recorded \S+: task_success=0\.875 on " + re.escape(pin.group(0)) + "$",
                     out, re.M)
    assert re.search(r"^datasets/support-evals/scores/0000000002  support-evals@2  "
                     r"task_success  1 +b3:[0-9a-f]{64}  quickstart  ACTIVE$", out, re.M)
    # erasing user-95 (runs r-0704, r-0705, promoted in v2) retires v2, keeps its scores, and
    # v3 is cut from the 30 cases left
    assert "will delete 2 cases, 2 runs and 2 reviews, and will retire 1 version:" in out
    assert re.search(r"^erased pk:[0-9a-f]{64} at \S+: 2 cases, 2 runs, 2 reviews; "
                     r"\d+ objects deleted from \d+ packs; retired: support-evals@2$", out, re.M)
    assert re.search(r"^retired:   PERSON_ERASED at \S+ by ", out, re.M)
    assert "support-evals@2 is RETIRED (PERSON_ERASED at " in out
    assert re.search(r"^datasets/support-evals/scores/0000000002  support-evals@2  "
                     r"task_success  1 +b3:[0-9a-f]{64}  quickstart  RETIRED$", out, re.M)
    assert re.search(r"^sealed support-evals@3: 30 cases \(\+0 -2\) b3:[0-9a-f]{64}$", out, re.M)
    # the diff for a pull request, and the lock: v2 locked, retired by the erasure (the check
    # fails naming `cas renew`), renewed as v3, and the lock moved to it
    assert "### `support-evals@1` \u2192 `support-evals@2`" in out
    assert "10 \u2192 32 cases: **+22** added, **\u22120** removed" in out
    assert re.search(r"^locked support-evals@2 \(cas.lock: support-evals@2#b3:[0-9a-f]{64}\)$",
                     out, re.M)
    assert "ok    support-evals@2\n" in out and "ok    support-evals@3\n" in out
    assert re.search(r"^\$ cas lock check   -> exit 5: cas: error: 1 of 1 locked pins fail: "
                     r"support-evals@2 is RETIRED \(PERSON_ERASED at .*`cas renew "
                     r"support-evals`$", out, re.M)
    assert re.search(r"^support-evals@2 -> support-evals@3; 2 cases removed by erasure "
                     r"ct-[0-9a-f]{32} at \S+$", out, re.M)
    assert "operation: renew" in out
    # the suite: exported from v3, replayed twice (the same verdict), recorded and compared
    assert re.search(r"^wrote 30 cases of support-evals@3 \(support-evals@3#b3:[0-9a-f]{64}\) "
                     r"to \S+suite\.jsonl$", out, re.M)
    assert re.search(r": 30 cases in [\d.]+ s: 30 completed, 0 errored, 0 incomplete; ok; "
                     r"digest b3:[0-9a-f]{64}$", out, re.M)
    assert "recorded 30 scores in experiment replay-a over support-evals@3" in out
    assert "0 changed, 30 unchanged" in out
    assert "0 cases scored differently" in out
    assert re.search(r"^checked \d+ objects in \d+ packs, 3 versions of 1 datasets: ok$", out, re.M)
    assert re.search(r"^would reclaim \d+ bytes: ", out, re.M)
    # The caller's own identity file is never written: the script keeps its demo reviewer in a
    # scratch config inside its work directory.
    assert not (tmp_path / "home" / "cas-config.json").exists()
    assert not (tmp_path / "home" / ".config").exists()
