"""`cas init`, `fsck`, `gc` and `cat`: exit codes and exact output, and the commands on an S3
repository (a real SeaweedFS)."""

import json
import os

import pytest
from click.testing import CliRunner

from cas_cli.main import EXIT_CODES, cli
from support import ROOT
from support.cli import commit_example, files, refused


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


def test_init_creates_dot_cas_and_refuses_a_second_time(run, tmp_path):
    r = run("init")
    assert r.exit_code == 0
    assert r.stdout == f"initialized empty cas repository in {tmp_path / '.cas'}\n"
    r = run("init")
    assert r.exit_code == EXIT_CODES["ALREADY_EXISTS"] == 4
    assert r.stderr == f"cas: error: a repository already exists at {tmp_path / '.cas'}\n"
    assert r.stdout == ""


def test_cat_prints_verified_canonical_bytes(run, repo):
    r = run("cat", repo["content_digest"])
    assert r.exit_code == 0
    from cas.digest import digest_of
    data = r.stdout_bytes.rstrip(b"\n")
    assert digest_of(json.loads(data)["kind"], data) == repo["content_digest"]
    r = run("cat", "b3:" + "0" * 64)
    assert r.exit_code == 3
    r = run("cat", "nonsense")
    assert r.exit_code == 2 and "64 hex digits" in r.stderr


def test_fsck_json_and_exit_code_on_damage(run, repo, tmp_path):
    r = run("--json", "fsck")
    assert r.exit_code == 0
    report = json.loads(r.stdout)
    assert report["ok"] is True and report["versions"] == 1 and report["problems"] == []
    version_file = tmp_path / ".cas" / "datasets" / "evals" / "versions" / "0000000001"
    data = bytearray(version_file.read_bytes())
    data[-5] ^= 0x01
    version_file.write_bytes(bytes(data))
    r = run("fsck")
    assert r.exit_code == 7
    assert "datasets/evals/versions/0000000001" in r.stdout and "DAMAGED" in r.stdout


def test_gc_reports_what_it_would_reclaim_and_refuses_a_bad_duration(run, repo, tmp_path):
    before = files(tmp_path)
    gc = json.loads(run("--json", "gc", "--dry-run", "--grace", "0").stdout)
    assert sorted(gc) == ["bytes_reclaimed", "deferred", "dry_run", "garbage_kept",
                          "log_indexes_deleted", "multi_indexes_deleted", "objects_deleted",
                          "packs", "packs_deleted", "packs_rewritten", "packs_written",
                          "proposals_deleted", "records_deleted"]
    assert gc["dry_run"] is True and gc["deferred"] == 0
    r = run("gc", "--dry-run", "--grace", "0")
    assert r.exit_code == 0 and r.stdout.startswith("would reclaim ")
    assert files(tmp_path) == before
    refused(run, tmp_path, ("gc", "--grace", "soon"), 2, "INVALID_ARGUMENT", None,
            "invalid grace period 'soon'; use seconds or a number with s, m, h or d, e.g. 0, "
            "90, 15m, 24h, 7d")


def test_cli_init_and_commands_on_s3(s3_url, tmp_path, monkeypatch):
    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    example = os.path.join(ROOT, "examples", "cases.jsonl")
    assert runner.invoke(cli, ["init", s3_url]).exit_code == 0
    assert runner.invoke(cli, ["init", s3_url]).exit_code == 4
    monkeypatch.setenv("CAS_REPO", s3_url)
    created = runner.invoke(cli, ["dataset", "create", "evals", "--admission", "direct"])
    assert created.exit_code == 0
    out = runner.invoke(cli, ["--json", "commit", "evals", "--add", example])
    assert out.exit_code == 0 and json.loads(out.stdout)["item_count"] == 5
    fsck = runner.invoke(cli, ["--json", "fsck"])
    assert fsck.exit_code == 0 and json.loads(fsck.stdout)["ok"]
    missing = runner.invoke(cli, ["--repo", s3_url + "-nothing", "dataset", "list"])
    assert missing.exit_code == 3 and "no cas repository" in missing.stderr


def test_fsck_of_a_killed_erasure_exits_0_with_a_notice(run, tmp_path, monkeypatch):
    """An erasure killed after purging the person's bytes, before redacting the log records
    that name their runs: its documented pending state, which fsck reports as a notice (exit
    0, `pending_erasures` in JSON), never as damage (exit 7)."""
    import cas
    from cas.repo import erasure
    from support.erasure_world import ALICE, InjectedFault, build
    repo = cas.init(str(tmp_path))
    build(repo)
    token = repo.erase(ALICE)["confirm_token"]
    redact = erasure._redact

    def killed(*args):
        raise InjectedFault("killed after the purge")
    monkeypatch.setattr(erasure, "_redact", killed)
    with pytest.raises(InjectedFault):
        repo.erase(ALICE, token)
    r = run("--json", "fsck")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["ok"] is True
    [pending] = report["pending_erasures"]
    assert pending == {"erasure": token, "key": f"erasures/pending/{token}",
                       "started_at": pending["started_at"], "cases": 3, "runs": 4, "reviews": 2}
    [notice] = [p for p in report["problems"] if p["where"] == pending["key"]]
    assert notice["severity"] == "notice"
    assert notice["message"].startswith(f"erasure {token} is pending (started ")
    assert not [p for p in report["problems"] if p["severity"] == "error"]
    r = run("fsck")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert f"notice: erasures/pending/{token}: erasure {token} is pending (started " \
        f"{pending['started_at']}; 3 case(s) and 4 run(s) to delete): what it names may " \
        "already be gone, which is expected, and reads refuse it meanwhile; the next command " \
        "that writes to the repository (e.g. `cas gc`) finishes it, as does `cas erase " \
        f"--person ID --confirm-token {token}` again" in lines
    assert lines[-1].endswith(": ok (1 erasure(s) pending: the next command that writes "
                              "finishes them)")
    # the next command that writes finishes it: then fsck is clean of it
    monkeypatch.setattr(erasure, "_redact", redact)
    assert run("gc", "--grace", "0").exit_code == 0
    report = json.loads(run("--json", "fsck").stdout)
    assert report["ok"] is True and report["pending_erasures"] == []
