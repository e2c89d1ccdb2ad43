"""`cas suite export`, `run`, `merge` and `diff`: a version exported (to stdout or a file, in
both spellings, or refused), suite files and versions run (human output, --json, exit codes,
replay and record), shards merged and runs compared."""

import io
import json
import os
import sys

import pytest

import cas
from cas.evals import suites
from cas.evals.suites.files import Suite, write_jsonl
from cas.evals.suites.results import COMPLETED, ERRORED, INCOMPLETE, as_result
from support.cli import EXAMPLE, commit_example
from support.evals import ADA, frozen_case, listing

AUTHOR = ADA  # who retires the exported version


@pytest.fixture(autouse=True)
def _import_path(monkeypatch):
    """`cas suite run` puts the current directory on sys.path: undone after each test."""
    monkeypatch.setattr(sys, "path", list(sys.path))


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


@pytest.fixture
def cli_repo(run):
    """Dataset `evals` holds the example cases as version 1: the repository, opened through
    the API."""
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    assert run("commit", "evals", "--add", str(EXAMPLE)).exit_code == 0
    return cas.open(".")


def test_export_and_run_again_remove_the_temporary_files_a_kill_left(run, repo, tmp_path):
    leftover = tmp_path / ".suite.jsonl.a1b2c3d4.tmp"  # a killed `suite export -o suite.jsonl`
    other = tmp_path / ".other.jsonl.a1b2c3d4.tmp"      # another path's: not this command's
    for path in (leftover, other):
        path.write_bytes(b'{"format":"cas.suite"}\n{"input":"unredac')
    assert run("suite", "export", "evals@1", "-o", "suite.jsonl").exit_code == 0
    assert not leftover.exists() and other.exists()
    r = run("suite", "run", "suite.jsonl", "--executor", "cas:echo", "--artefacts", "art")
    assert r.exit_code == 0, r.output
    [case_dir] = [p for p in (tmp_path / "art").glob("*/*") if p.is_dir()][:1]
    (case_dir / "result.json.tmp-4242-1").write_bytes(b'{"outcome":"COMPL')  # a killed run's
    assert run("suite", "run", "suite.jsonl", "--executor", "cas:echo",
               "--artefacts", "art").exit_code == 0
    assert sorted(os.listdir(case_dir)) == ["case.json", "result.json", "run.json",
                                            "timings.json"]


def test_an_exported_suite_runs_the_same_twice(run, repo, tmp_path):
    r = run("suite", "export", "evals@1", "-o", "suite.jsonl")
    assert r.exit_code == 0, r.output
    for name in ("a", "b"):
        r = run("--json", "suite", "run", "suite.jsonl", "--executor", "cas:echo")
        assert r.exit_code == 0, r.output
        (tmp_path / f"{name}.json").write_text(r.stdout)
    result = json.loads(r.stdout)
    assert result["ok"] is True and len(result["results"]) == 5
    r = run("suite", "diff", "a.json", "b.json")
    assert (r.exit_code, r.stdout) == (0, "0 changed, 5 unchanged\n")
    r = run("suite", "run", "suite.jsonl", "--executor", "cas:echo")
    assert r.exit_code == 0
    assert r.stdout.startswith(f"suite evals {result['suite']['version']}: 5 cases in ")
    assert r.stdout.endswith(f"5 completed, 0 errored, 0 incomplete; ok; digest "
                             f"{result['digest']}\n")


def test_cli_export_to_stdout_in_both_spellings(run, cli_repo):
    out = io.BytesIO()
    suites.export(cli_repo, "evals", 1, out)
    for args in (("evals", "1"), ("evals@1",)):
        r = run("suite", "export", *args)
        assert r.exit_code == 0 and r.stdout_bytes == out.getvalue() and r.stderr == ""


def test_cli_export_to_a_file(run, cli_repo, tmp_path):
    pin = str(cli_repo.pin("evals", 1))
    r = run("--json", "suite", "export", "evals@1", "-o", "s.jsonl")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"suite": {"name": "evals", "version": pin}, "cases": 5,
                                    "path": str(tmp_path / "s.jsonl")}
    r = run("suite", "export", "evals", "1", "--output", "t.jsonl")
    assert r.exit_code == 0 and r.stderr == ""
    assert r.stdout == f"wrote 5 cases of evals@1 ({pin}) to {tmp_path / 't.jsonl'}\n"
    assert (tmp_path / "t.jsonl").read_bytes() == (tmp_path / "s.jsonl").read_bytes()


def test_cli_export_refusals(run, cli_repo, tmp_path):
    before = listing(tmp_path)
    r = run("--json", "suite", "export", "evals", "1")
    assert r.exit_code == 2 and json.loads(r.stderr)["error"]["reason"] == "OUTPUT_REQUIRED"
    r = run("--json", "suite", "export", "evals", "-o", "x")
    assert r.exit_code == 2 and json.loads(r.stderr)["error"]["reason"] == "VERSION_REQUIRED"
    r = run("suite", "export", "evals@7", "-o", "x")
    assert r.exit_code == 3 and r.stderr.startswith("cas: error: ")
    cli_repo.retire("evals", 1, "contaminated", "leaked", author=AUTHOR)
    r = run("--json", "suite", "export", "evals@1", "-o", "x")
    assert r.exit_code == 5 and r.stdout == ""
    assert json.loads(r.stderr)["error"]["reason"] == "EVALUATION_DATASET_VERSION_RETIRED"
    r = run("suite", "export", "evals@1")
    assert r.exit_code == 5 and r.stdout == ""
    assert listing(tmp_path) == before


@pytest.fixture
def suite_file(tmp_path):
    path = tmp_path / "suite.jsonl"
    write_jsonl(path, Suite("demo", "v1", [{"id": f"c{i}", "input": {"n": i}, "tenant": "acme"}
                                           for i in range(4)]))
    (tmp_path / "mine.py").write_text(
        "from cas.runner import Run\n"
        "def flaky(case, *, run_id):\n"
        "    if case.input['n'] == 1:\n"
        "        raise ValueError('no luck')\n"
        "    return {'answer': case.input, 'tenant': case.tenant}\n"
        "async def score(case, answer):\n"
        "    return {'big': answer['n'] > 1}\n")
    sys.modules.pop("mine", None)
    return path


def test_cli_run_json_human_and_exit_codes(run, suite_file, tmp_path):
    r = run("suite", "run", str(suite_file), "--executor", "cas:echo", "--json")
    assert r.exit_code == 0
    out = json.loads(r.stdout)
    assert out["ok"] is True and out["counts"] == {COMPLETED: 4, ERRORED: 0, INCOMPLETE: 0}
    assert as_result(out).digest == out["digest"]
    r = run("suite", "run", str(suite_file), "--executor", "mine:flaky", "--scorer",
            "mine:score")
    assert r.exit_code == 10
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["ERRORED", "1", "c1", "the", "executor", "raised",
                                "ValueError:", "no", "luck"]
    assert lines[1].startswith("suite demo v1: 4 cases in ") and \
        "3 completed, 1 errored, 0 incomplete; NOT ok (exit 10); digest b3:" in lines[1]
    assert len(lines) == 2
    r = run("suite", "run", str(suite_file), "--executor", "mine:flaky", "--scorer",
            "mine:score", "--json")
    assert json.loads(r.stdout)["results"][3]["scores"] == {"big": True}
    r = run("suite", "run", str(suite_file), "--executor", "cas:cassette", "--json")
    assert r.exit_code == 5 and json.loads(r.stderr)["error"]["reason"] == \
        "SUITE_NOT_PINNED"  # its cassettes belong to the cases of a version
    r = run("suite", "run", str(suite_file), "--executor", "cas:echo", "--shard", "5/4")
    assert r.exit_code == 2 and "shard '5/4' is not i/n with 1 <= i <= n" in r.stderr
    r = run("suite", "run", "nowhere", "--executor", "cas:echo")
    assert r.exit_code == 2 and "neither a suite file nor DATASET@N" in r.stderr


def test_cli_shards_merge_and_diff(run, suite_file, tmp_path):
    files = []
    for i in (1, 2):
        r = run("suite", "run", str(suite_file), "--executor", "cas:echo", "--shard",
                f"{i}/2", "--json")
        assert r.exit_code == 0 and json.loads(r.stdout)["shard"]["index"] == i
        files.append(tmp_path / f"s{i}.json")
        files[-1].write_text(r.stdout)
    whole = json.loads(run("suite", "run", str(suite_file), "--executor", "cas:echo",
                           "--json").stdout)
    r = run("suite", "merge", str(files[1]), str(files[0]), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout) == whole
    r = run("suite", "merge", str(files[0]), "--json")
    assert r.exit_code == 2 and "shard 2/2 is missing" in json.loads(r.stderr)["error"]["message"]
    (tmp_path / "whole.json").write_text(json.dumps(whole))
    r = run("suite", "run", str(suite_file), "--executor", "mine:flaky", "--json")
    (tmp_path / "flaky.json").write_text(r.stdout)
    r = run("suite", "diff", str(tmp_path / "whole.json"), str(tmp_path / "flaky.json"),
            "--json")
    assert r.exit_code == 0
    assert json.loads(r.stdout)["unchanged"] == 3
    assert [c["id"] for c in json.loads(r.stdout)["changed"]] == ["c1"]
    r = run("suite", "diff", str(tmp_path / "whole.json"), str(tmp_path / "flaky.json"))
    assert r.stdout.splitlines() == [
        'c1: COMPLETED {"n": 1} -> ERRORED (the executor raised ValueError: no luck)',
        "1 changed, 3 unchanged"]
    write_jsonl(tmp_path / "v2.jsonl", Suite("demo", "v2", [{"id": "c0", "input": 0,
                                                             "tenant": "acme"}]))
    (tmp_path / "v2.json").write_text(run("suite", "run", str(tmp_path / "v2.jsonl"),
                                          "--executor", "cas:echo", "--json").stdout)
    r = run("suite", "diff", str(tmp_path / "whole.json"), str(tmp_path / "v2.json"))
    assert r.exit_code == 5 and "one suite version" in r.stderr
    r = run("suite", "diff", str(tmp_path / "whole.json"), str(tmp_path / "v2.json"),
            "--allow-versions", "--json")
    assert r.exit_code == 0 and len(json.loads(r.stdout)["changed"]) == 4


def test_cli_run_a_version_with_replay_and_record(run, tmp_path):
    repo = cas.init(str(tmp_path))
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=[frozen_case(i) for i in range(3)], author=ADA)
    (tmp_path / "plan.json").write_text('{"default_effect": "none"}')
    r = run("suite", "run", "evals@1", "--executor", "cas:replay", "--plan", "plan.json",
            "--record", "replayed", "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["suite"]["version"] == str(repo.pin("evals", 1))
    assert out["recorded"]["experiment"] == "replayed" and out["recorded"]["scores"] == 3
    assert sorted(c["answer"] for c in out["results"]) == ["done 0", "done 1", "done 2"]
    assert {s.metric for s in cas.open(str(tmp_path)).scores("evals", 1)} == {"completed"}
    r = run("suite", "run", str(repo.pin("evals", 1)), "--executor", "cas:echo", "--json")
    assert r.exit_code == 0
    write_jsonl(tmp_path / "plain.jsonl", Suite("evals", "hand-made", [
        {"id": "x", "input": 1, "tenant": "acme"}]))
    r = run("suite", "run", "plain.jsonl", "--executor", "cas:echo", "--record", "x")
    assert r.exit_code == 5 and "is not a pin" in r.stderr
    r = run("suite", "run", "plain.jsonl", "--executor", "cas:replay", "--plan", "plan.json")
    assert r.exit_code == 5 and "DATASET@N" in r.stderr


# -- repetitions (--repeat, --pass-k) and a recorded result ------------------------------------
_FLAKY_AGENT = """from cas.evals.suites.executors import Run
async def run_case(case, *, run_id, repetition):
    return Run({"pass": not (case.input["n"] == 1 and repetition == 3)}, case.tenant)
def score(case, answer):
    return {"pass": answer["pass"]}
"""


def test_suite_run_repeat_prints_the_summary_and_names_flaky_cases(run, tmp_path):
    (tmp_path / "flaky_agent.py").write_text(_FLAKY_AGENT)
    write_jsonl(tmp_path / "s.jsonl", Suite("demo", "v1", [
        {"id": f"c{i}", "input": {"n": i}, "tenant": "acme"} for i in range(3)]))
    args = ["suite", "run", "s.jsonl", "--executor", "flaky_agent:run_case", "--scorer",
            "flaky_agent:score", "--repeat", "5", "--pass-k", "1,3"]
    r = run(*args)
    assert r.exit_code == 0, r.output  # a flaky case alone does not fail the run
    assert "FLAKY            1  c1  5/5 completed" in r.stdout
    assert ("pass: 4/5 passed  pass@1=0.800 pass^1=0.800 pass@3=1.000 pass^3=0.400  FLAKY"
            in r.stdout)
    assert "1 flaky case: c1" in r.stdout and "3 cases x 5 repetitions" in r.stdout
    r = run("--json", *args)
    doc = json.loads(r.stdout)
    assert doc["repeat"] == 5 and len(doc["results"]) == 15
    assert [(e["id"], e["repetition"]) for e in doc["results"][:6]] == \
        [("c0", 0), ("c0", 1), ("c0", 2), ("c0", 3), ("c0", 4), ("c1", 0)]
    assert doc["summary"]["flaky"] == ["c1"] and doc["summary"]["pass_k"] == [1, 3]
    assert as_result(doc).repeat == 5  # the printed summary is not part of the result
    one = json.loads(run("--json", *args[:7]).stdout)  # no --repeat: today's result
    assert "summary" not in one and "repeat" not in one and "seed" not in one["results"][0]
    for bad, reason in ((["--repeat", "0"], "INVALID_REPEAT"),
                        (["--pass-k", "0,2"], "INVALID_PASS_K")):
        r = run("--json", *args[:7], *bad)
        assert r.exit_code == 2 and json.loads(r.stderr)["error"]["reason"] == reason


def test_suite_run_record_stores_the_whole_result_and_reads_it_back(run, cli_repo, tmp_path):
    from cas.evals.suites.recording import recorded_result

    # its own module name: the previous test's module stays imported
    (tmp_path / "each_fails_once.py").write_text(
        _FLAKY_AGENT.replace('case.input["n"] == 1', "True"))
    r = run("--json", "suite", "run", "evals@1", "--executor", "each_fails_once:run_case",
            "--repeat", "4", "--scorer", "each_fails_once:score", "--record", "live-1")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["recorded"]["result"].startswith("b3:"), doc["recorded"]
    back = recorded_result(cas.open("."), "evals:live-1")
    assert back == as_result(doc) and back.repeat == 4 and back.digest == doc["digest"]
    assert len({r.id for r in back.results}) * 4 == len(back.results)
    assert len(doc["summary"]["flaky"]) == len(back.results) // 4  # each fails one time in 4
    fsck = run("fsck")
    assert fsck.exit_code == 0, fsck.output
    assert run("gc", "--grace", "0").exit_code == 0
    assert recorded_result(cas.open("."), "evals:live-1") == back  # gc kept it: cited


_GATED_AGENT = """from cas.evals.suites.executors import Run
FAIL = {fail!r}
async def run_case(case, *, run_id, repetition):
    return Run({{"pass": not FAIL}}, case.tenant)
def score(case, answer):
    return {{"pass": answer["pass"]}}
"""


def _compared_runs(run, tmp_path):
    """evals@1 run four times a case by an agent that passes (result a.json, recorded as
    evals:base) and by one that fails (b.json, evals:cand)."""
    for name, fail, experiment in (("a", False, "base"), ("b", True, "cand")):
        (tmp_path / f"gated_{name}.py").write_text(_GATED_AGENT.format(fail=fail))
        r = run("--json", "suite", "run", "evals@1", "--executor", f"gated_{name}:run_case",
                "--scorer", f"gated_{name}:score", "--repeat", "4", "--record", experiment)
        assert r.exit_code == 0, r.output
        (tmp_path / f"{name}.json").write_text(r.stdout)


def test_suite_compare_gates_files_and_recorded_experiments(run, cli_repo, tmp_path):
    pytest.importorskip("scipy")
    _compared_runs(run, tmp_path)
    r = run("suite", "compare", "a.json", "a.json")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("compare a.json -> a.json (suite evals evals@1#b3:")
    assert "HELD: 0 regressed" in r.stdout.splitlines()[0]
    r = run("suite", "compare", "a.json", "b.json", "--junit", "report.xml")
    assert r.exit_code == 14, r.output
    assert "REGRESSED: 5 regressed" in r.stdout and "(exit 14)" in r.stdout
    assert (tmp_path / "report.xml").read_text().count("<failure ") == 5
    for pair in (("evals:base", "evals:cand"), ("a.json", "evals:cand")):
        r = run("--json", "suite", "compare", *pair)
        assert r.exit_code == 14, r.output
        doc = json.loads(r.stdout)
        assert doc["verdict"] == "regressed" and doc["exit_code"] == 14
        assert doc["baseline"]["source"] == pair[0] and doc["candidate"]["repeat"] == 4
        assert [m["metric"] for m in doc["metrics"]] == ["pass"]
        assert doc["metrics"][0]["effect"] == -1.0 and set(doc["power"]) == {"pass"}
    r = run("suite", "compare", "evals:base", "evals:cand", "--format", "markdown",
            "--marker", "cas-compare")
    assert r.exit_code == 14
    lines = r.stdout.splitlines()
    assert lines[0] == "<!-- cas-compare -->" and lines[1].startswith("**cas suite compare: ")
    assert "### Regressed (5)" in r.stdout and "inputs not shown" not in r.stdout
    r = run("suite", "compare", "b.json", "a.json", "--max-regressed-cases", "0")
    assert r.exit_code == 0 and "IMPROVED" in r.stdout.splitlines()[0]


def test_suite_compare_refusals(run, cli_repo, tmp_path, monkeypatch):
    pytest.importorskip("scipy")
    _compared_runs(run, tmp_path)
    write_jsonl(tmp_path / "s.jsonl", Suite("demo", "v1", [
        {"id": f"c{i}", "input": {"n": i}, "tenant": "acme"} for i in range(3)]))
    r = run("--json", "suite", "run", "s.jsonl", "--executor", "cas:echo")
    (tmp_path / "other.json").write_text(r.stdout)
    r = run("--json", "suite", "compare", "a.json", "other.json")
    err = json.loads(r.stderr)["error"]
    assert (r.exit_code, err["reason"]) == (5, "SUITE_VERSION_MISMATCH")
    assert "a.json" in err["message"] and "other.json" in err["message"]
    for args, reason in ((["--min-effect", "pass"], "INVALID_MIN_EFFECT"),
                         (["--min-effect", "acuracy=0.1"], "UNKNOWN_METRIC"),
                         (["--alpha", "2"], "INVALID_ALPHA"),
                         (["--format", "markdown"], "USAGE")):
        r = run("--json", "suite", "compare", "a.json", "b.json", *args)
        assert r.exit_code == 2 and json.loads(r.stderr)["error"]["reason"] == reason, args
    r = run("--json", "suite", "compare", "a.json", "nowhere.json")
    assert r.exit_code == 2 and "neither a result file" in r.stderr
    r = run("--json", "suite", "compare", "a.json", "evals:nothing")
    assert r.exit_code == 3
    assert json.loads(r.stderr)["error"]["reason"] == "RECORDED_RESULT_NOT_FOUND"
    import builtins
    real = builtins.__import__

    def no_scipy(name, *args, **kwargs):
        if name.startswith("scipy"):
            raise ImportError(name)
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_scipy)
    r = run("suite", "compare", "a.json", "b.json")
    assert r.exit_code == 5 and "pip install '.[stats]'" in r.stderr and r.stdout == ""


def test_merge_record_stores_the_whole_sharded_run(run, cli_repo, tmp_path):
    from cas.evals.suites.recording import recorded_result
    shards = []
    for i in (1, 2):
        r = run("--json", "suite", "run", "evals@1", "--executor", "cas:echo", "--repeat", "2",
                "--shard", f"{i}/2")
        assert r.exit_code == 0, r.output
        (tmp_path / f"s{i}.json").write_text(r.stdout)
        shards.append(f"s{i}.json")
    r = run("--json", "suite", "merge", *shards, "--record", "nightly")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    back = recorded_result(cas.open("."), "evals:nightly")
    assert back.shard is None and back.repeat == 2 and back.digest == doc["digest"]
    whole = json.loads(run("--json", "suite", "run", "evals@1", "--executor", "cas:echo",
                           "--repeat", "2").stdout)
    assert back.digest == whole["digest"]  # the merged run is the unsharded run
