"""The CI recipes of docs/ci.md run as written, so they cannot rot.

Each recipe in examples/ci/ is parsed, its matrix, parallel jobs or completion indexes expanded
(for each shard, the variables the CI system sets), and its shell steps run in order on a project
built here: a dataset pinned in `cas.lock`, an executor module, a baseline made first by the
documented refresh script and committed, a git remote holding the base branch. `cas` is the
venv's. What the CI system itself provides is stood in for: a job's checkout is a fresh copy of
the project, artefacts are files copied between jobs' directories, `pip` checks the extra it is
asked for against the cas checkout it runs in (installing nothing), `gh` and `curl` record the
comment they would post. Steps that call hosted actions (`uses:`) are listed, and the list is
asserted, so a new one is noticed.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from support import ROOT

CI = ROOT / "examples" / "ci"
DOC = ROOT / "docs" / "ci.md"
BIN = Path(sys.executable).parent  # the venv's bin, where `cas` is
PR = "7"
TOKEN = "ghs-test-token"

AGENT = '''"""The agent under test: it adds two numbers."""


def run_case(case, *, run_id):
    return {"answer": case.input["a"] + case.input["b"], "tenant": case.tenant}


def score(case, answer):
    return {"correct": answer == case.expected}
'''
BROKEN = AGENT.replace('case.input["a"] + case.input["b"]', 'case.input["a"] - case.input["b"]')

# The stand-ins on PATH. pip: `pip install -q '.[EXTRA]'` in a checkout of cas whose pyproject
# declares EXTRA; gh and curl: record what they were asked to post.
PIP = '''
import json, os, sys, tomllib
args = sys.argv[1:]
ok = len(args) == 3 and args[:2] == ["install", "-q"] and args[2].startswith(".[")
with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
extra = args[2][2:-1] if ok else None
if not ok or project["name"] != "cas-datasets" or extra not in project["optional-dependencies"]:
    sys.exit(f"pip stand-in: not an install line of a cas checkout: {args}")
with open(os.path.join(os.environ["SHIM_LOG"], "pip.jsonl"), "a") as f:
    f.write(json.dumps({"extra": extra}) + "\\n")
'''
RECORD = '''
import json, os, sys
args = sys.argv[1:]
body = None
for i, a in enumerate(args):
    if a == "--body-file" or (a == "--data-urlencode" and args[i + 1].startswith("body@")):
        with open(args[i + 1].removeprefix("body@"), encoding="utf-8") as f:
            body = f.read()
env = {k: os.environ.get(k) for k in ("GH_TOKEN",)}
with open(os.path.join(os.environ["SHIM_LOG"], "NAME.jsonl"), "a") as f:
    f.write(json.dumps({"args": args, "body": body, "env": env, "cwd": os.getcwd()}) + "\\n")
'''


# -- the project ------------------------------------------------------------------------------
def _run(args, cwd, env, check=True) -> subprocess.CompletedProcess:
    p = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    assert not check or p.returncode == 0, (args, p.stdout, p.stderr)
    return p


class World:
    """The project (two checkouts: `main` and a pull request that breaks the agent), the
    repository its lock pins, and the environment every step starts from."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.logs = tmp / "logs"
        self.logs.mkdir()
        shims = tmp / "shims"
        shims.mkdir()
        for name, body in (("pip", PIP), ("gh", RECORD.replace("NAME", "gh")),
                           ("curl", RECORD.replace("NAME", "curl"))):
            (shims / name).write_text(f"#!{sys.executable} -S\n{body}")
            (shims / name).chmod(0o755)
        (tmp / "gitconfig").write_text("")
        self.store = tmp / "store"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CAS_", "GIT_", "GITHUB_", "CI", "AWS_"))}
        env.update(PATH=f"{shims}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                   CAS_USER="CI Bot <ci@example.com>", CAS_REPO=str(self.store),
                   CAS_CACHE_DIR=str(tmp / "cache"), SHIM_LOG=str(self.logs),
                   GIT_CONFIG_GLOBAL=str(tmp / "gitconfig"), GIT_CONFIG_NOSYSTEM="1",
                   GIT_AUTHOR_NAME="Dev", GIT_AUTHOR_EMAIL="dev@example.com",
                   GIT_COMMITTER_NAME="Dev", GIT_COMMITTER_EMAIL="dev@example.com")
        self.env = env
        # the cas a pipeline clones (CAS_GIT_URL): a git repository holding this checkout's
        # pyproject.toml, which is all the pip stand-in reads (a clone of the whole checkout
        # per job would take most of the test's time)
        self.cas_git = tmp / "cas.git"
        self.cas_git.mkdir()
        shutil.copy(ROOT / "pyproject.toml", self.cas_git)
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "cas"]):
            _run(["git", *args], self.cas_git, env)
        self._build()

    def _build(self) -> None:
        tmp, env = self.tmp, dict(self.env)
        cases = tmp / "cases.jsonl"
        cases.write_text("".join(json.dumps({
            "run_id": f"r-{i:02d}", "tenant": ("acme", "globex")[i % 2],
            "input": {"a": i, "b": i + 1}, "output": 2 * i + 1,
            "steps": [{"type": "message", "role": "user", "content": f"What is {i} + {i + 1}?"}],
            "outcome": {"status": "success"}}) + "\n" for i in range(12)))
        _run(["cas", "init", str(self.store)], tmp, env)
        _run(["cas", "dataset", "create", "support-evals", "--admission", "direct"], tmp, env)
        _run(["cas", "commit", "support-evals", "--add", str(cases), "-m", "first"], tmp, env)
        project = tmp / "project"
        (project / "evals").mkdir(parents=True)
        (project / "evals" / "__init__.py").write_text("")
        (project / "evals" / "agent.py").write_text(AGENT)
        (project / ".gitignore").write_text(".cas/\n.cas-cache/\n__pycache__/\n")
        _run(["cas", "lock", "add", "support-evals@1"], project, env)
        # the baseline, by the documented command
        refreshed = _run(["sh", str(CI / "refresh-baseline.sh")], project, env)
        assert "evals/baseline.json" in refreshed.stdout
        baseline = json.loads((project / "evals" / "baseline.json").read_text())
        assert baseline["ok"] and baseline["repeat"] == 5 and baseline["counts"]["COMPLETED"] == 60
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "evals"],
                     ["clone", "-q", "--bare", ".", str(tmp / "origin.git")],
                     ["remote", "add", "origin", str(tmp / "origin.git")], ["fetch", "-q"]):
            _run(["git", *args], project, env)
        committed = _run(["git", "ls-files"], project, env).stdout.split()
        assert sorted(committed) == [".gitignore", "cas.lock", "evals/__init__.py",
                                     "evals/agent.py", "evals/baseline.json"]
        self.main = tmp / "checkout-main"
        shutil.copytree(project, self.main)
        (project / "evals" / "agent.py").write_text(BROKEN)
        _run(["git", "checkout", "-q", "-b", "pr"], project, env)
        _run(["git", "commit", "-q", "-am", "a faster agent"], project, env)
        self.pr = project

    def log(self, name: str) -> list[dict]:
        path = self.logs / f"{name}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] \
            if path.exists() else []


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    return World(tmp_path_factory.mktemp("ci"))


def _bash(script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    """A step's shell as GitHub and GitLab run it: bash, errexit and pipefail."""
    return _run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd, env,
                check=False)


def _fresh(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


# -- GitHub Actions ---------------------------------------------------------------------------
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _expand(text, ctx: dict) -> str:
    def one(m: re.Match) -> str:
        value = ctx
        for part in m.group(1).split("."):
            value = value[part]
        return str(value)
    return EXPR.sub(one, str(text))


def _upload(ws: Path, with_: dict, store: Path) -> int:
    into = store / with_["name"]
    into.mkdir(parents=True)
    for path in with_["path"].split():
        if (ws / path).exists():  # upload-artifact warns on a path it does not find
            shutil.copy(ws / path, into / Path(path).name)
    return 0


def _download(ws: Path, with_: dict, store: Path) -> int:
    assert with_["merge-multiple"] == "True"
    into = ws / with_["path"]
    into.mkdir(parents=True, exist_ok=True)
    for name in sorted(fnmatch.filter(os.listdir(store), with_["pattern"])):
        for f in (store / name).iterdir():
            shutil.copy(f, into / f.name)
    return 0


def run_github(world: World, checkout: Path, out: Path) -> dict:
    """Every job of the workflow, in `needs` order, each matrix cell at once as CI runs them.
    Returns {job: [cell, ...]}, a cell being {"steps": [(name, exit code or "skipped")],
    "ws": its workspace}; and the hosted actions under key "uses"."""
    workflow = yaml.safe_load((CI / "github-actions.yml").read_text())
    assert list(workflow[True]) == ["pull_request"]  # `on:` (YAML 1.1 reads it as true)
    store, hosted, done = out / "artefacts", set(), {}
    store.mkdir()
    ctx0 = {"vars": {"CAS_REPO": str(world.store), "CAS_GIT_URL": str(world.cas_git)},
            "secrets": {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""},
            "github": {"token": TOKEN, "event": {"pull_request": {"number": PR}}}}
    uses = {"actions/checkout": lambda ws, w: _fresh(checkout, ws) and 0,
            "actions/setup-python": lambda ws, w: 0,  # `cas` is the venv's, already on PATH
            "actions/upload-artifact": lambda ws, w: _upload(ws, w, store),
            "actions/download-artifact": lambda ws, w: _download(ws, w, store)}

    def cell(name: str, job: dict, matrix: dict, index: int, total: int) -> dict:
        ctx = dict(ctx0, matrix=matrix, strategy={"job-total": total, "job-index": index})
        home = out / f"{name}-{index}"
        ws, temp = home / "workspace", home / "temp"
        temp.mkdir(parents=True)
        env = dict(world.env, CI="true", GITHUB_ACTIONS="true", GITHUB_BASE_REF="main",
                   GITHUB_WORKSPACE=str(ws), RUNNER_TEMP=str(temp))
        env.update({k: _expand(v, ctx) for k, v in workflow["env"].items()})
        env.update({k: _expand(v, ctx) for k, v in job.get("env", {}).items()})
        steps, failed = [], False
        for step in job["steps"]:
            label = step.get("name", step.get("uses"))
            assert step.get("if") in (None, "always()"), step["if"]
            if failed and step.get("if") != "always()":
                steps.append((label, "skipped"))
                continue
            if "uses" in step:
                hosted.add((name, step["uses"]))
                with_ = {k: _expand(v, ctx) for k, v in step.get("with", {}).items()}
                code = uses[step["uses"].split("@")[0]](ws, with_)
            else:
                assert "working-directory" not in step and "shell" not in step
                step_env = dict(env, **{k: _expand(v, ctx) for k, v in step.get("env", {}).items()})
                p = _bash(_expand(step["run"], ctx), ws, step_env)
                code = p.returncode
                if code:
                    steps.append((label, code, p.stderr))
                    failed = True
                    continue
            steps.append((label, code))
        return {"steps": steps, "ws": ws, "ok": not failed}

    jobs = workflow["jobs"]
    while len(done) < len(jobs):
        for name, job in jobs.items():
            needs = job.get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            if name in done or any(n not in done for n in needs):
                continue
            if not all(c["ok"] for n in needs for c in done[n]):
                done[name] = [{"steps": "skipped", "ok": False}]
                continue
            matrix = job.get("strategy", {}).get("matrix", {})
            cells = [dict(zip(matrix, values)) for values in itertools.product(*matrix.values())]
            with ThreadPoolExecutor(len(cells)) as pool:
                done[name] = list(pool.map(lambda ic: cell(name, job, ic[1], ic[0], len(cells)),
                                           enumerate(cells)))
    return dict(done, uses=sorted(hosted))


def test_github_actions_gates_a_pull_request_that_regressed(world, tmp_path):
    before = len(world.log("gh"))
    ran = run_github(world, world.pr, tmp_path)
    # the hosted actions: checkout is a copy of the project, artefacts are copied between the
    # jobs' directories; setup-python is skipped (cas is the venv's)
    assert ran["uses"] == [
        ("compare", "actions/checkout@v4"), ("compare", "actions/download-artifact@v4"),
        ("compare", "actions/setup-python@v5"), ("compare", "actions/upload-artifact@v4"),
        ("lock", "actions/checkout@v4"), ("lock", "actions/setup-python@v5"),
        ("shards", "actions/checkout@v4"), ("shards", "actions/setup-python@v5"),
        ("shards", "actions/upload-artifact@v4")]
    lock, = ran["lock"]
    assert lock["ok"], lock["steps"]
    assert [s[:2] for s in lock["steps"]][-1] == (
        "Every pin in cas.lock is active and matches its digest", 0)
    assert len(ran["shards"]) == 4 and all(c["ok"] for c in ran["shards"]), ran["shards"]
    shards = sorted(os.listdir(tmp_path / "artefacts"))
    assert shards == ["cas-compare", "shard-1", "shard-2", "shard-3", "shard-4"]
    for i in range(1, 5):
        shard = json.loads((tmp_path / "artefacts" / f"shard-{i}" / f"shard-{i}.json").read_text())
        assert shard["shard"] == {"index": i, "count": 4, "cases": 12}
        assert shard["counts"]["COMPLETED"] == 3 * 5  # 12 cases in 4 shards, 5 repetitions
    compare, = ran["compare"]
    steps = {s[0]: s[1] for s in compare["steps"]}
    assert steps == {
        "actions/checkout@v4": 0, "actions/setup-python@v5": 0,
        "Install cas from a checkout of it": 0, "actions/download-artifact@v4": 0,
        "What the pull request changes in cas.lock": 0, "Merge the shards into one result": 0,
        "Compare with the baseline (the gate)": 14,  # regressed: the gate fails the job
        "Post the report on the pull request": 0, "actions/upload-artifact@v4": 0,
        "Fail on cases that errored or did not finish": "skipped"}
    # the report, posted with gh, and the JUnit file, uploaded
    comment, = world.log("gh")[before:]
    assert comment["args"] == ["pr", "comment", PR, "--edit-last", "--create-if-none",
                               "--body-file", "comment.md"]
    assert comment["env"]["GH_TOKEN"] == TOKEN
    assert comment["body"].startswith("<!-- cas-compare -->\n**cas suite compare: REGRESSED")
    assert "- correct: regressed, -100.00 points" in comment["body"]
    assert "## Dataset changes in `cas.lock since FETCH_HEAD`" in comment["body"]
    assert "No dataset pin changed." in comment["body"]
    junit = ET.parse(tmp_path / "artefacts" / "cas-compare" / "junit.xml").getroot()
    assert _properties(junit)["verdict"] == "regressed"
    assert int(junit.find("testsuite").get("tests")) == 12
    assert (tmp_path / "artefacts" / "cas-compare" / "report.md").read_text().startswith(
        "<!-- cas-compare -->")
    # cas was installed from a checkout of it, with extras its pyproject declares, in each job
    assert {e["extra"] for e in world.log("pip")} == {"stats", "s3"}


def _properties(junit: ET.Element) -> dict:
    return {p.get("name"): p.get("value") for p in junit.iter("property")}


# -- GitLab CI --------------------------------------------------------------------------------
GITLAB_KEYWORDS = {"workflow", "stages", "variables", "default", "include", "image", "services",
                   "before_script", "after_script", "cache"}


def run_gitlab(world: World, checkout: Path, out: Path) -> dict:
    """Stage by stage; a job of `parallel: N` runs N times at once with CI_NODE_INDEX 1..N and
    CI_NODE_TOTAL N; each job starts from a fresh checkout holding the artefacts of the jobs of
    earlier stages. Returns {job: [instance, ...]}."""
    pipeline = yaml.safe_load((CI / "gitlab-ci.yml").read_text())
    assert pipeline["workflow"] == {
        "rules": [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]}
    default = pipeline["default"]
    jobs = {k: v for k, v in pipeline.items() if k not in GITLAB_KEYWORDS}
    assert set(j["stage"] for j in jobs.values()) <= set(pipeline["stages"])
    artefacts, done = out / "artefacts", {}
    artefacts.mkdir()
    provided = {  # what GitLab sets, and the project's CI/CD variables
        "CI": "true", "GITLAB_CI": "true", "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_MERGE_REQUEST_IID": PR, "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
        "CI_PROJECT_ID": "42", "CI_API_V4_URL": "https://gitlab.example.com/api/v4",
        "CAS_REPO": str(world.store), "CAS_GIT_URL": str(world.cas_git),
        "CAS_BOT_TOKEN": "glpat-test",
    }

    def instance(name: str, job: dict, node: int | None, total: int | None) -> dict:
        ws = _fresh(checkout, out / f"{name}-{node or 1}")
        for d in sorted(artefacts.iterdir()):
            shutil.copytree(d, ws, dirs_exist_ok=True)
        env = dict(world.env, **provided, CI_PROJECT_DIR=str(ws), TMPDIR=str(out))
        env.update({k: str(v) for k, v in pipeline.get("variables", {}).items()})
        env.update({k: str(v) for k, v in job.get("variables", {}).items()})
        if node is not None:
            env.update(CI_NODE_INDEX=str(node), CI_NODE_TOTAL=str(total))
        script = job.get("before_script", default.get("before_script", [])) + job["script"]
        p = _bash("\n".join(script), ws, env)
        after = job.get("after_script", default.get("after_script"))
        after_code = None if after is None else _bash("\n".join(after), ws, env).returncode
        kept = job.get("artifacts", {})
        if p.returncode == 0 or kept.get("when") == "always":
            into = artefacts / f"{name}-{node or 1}"
            for path in kept.get("paths", []):
                if (ws / path).is_dir():
                    shutil.copytree(ws / path, into / path)
                elif (ws / path).exists():
                    into.mkdir(parents=True, exist_ok=True)
                    shutil.copy(ws / path, into / path)
        return {"code": p.returncode, "stderr": p.stderr, "after": after_code, "ws": ws}

    for stage in pipeline["stages"]:
        if any(i["code"] for runs in done.values() for i in runs):
            break  # a failed stage stops the pipeline
        for name, job in jobs.items():
            if job["stage"] != stage:
                continue
            n = job.get("parallel")
            nodes = [(None, None)] if n is None else [(i, n) for i in range(1, n + 1)]
            with ThreadPoolExecutor(len(nodes)) as pool:
                done[name] = list(pool.map(lambda nt: instance(name, job, *nt), nodes))
    return done


def test_gitlab_ci_passes_a_merge_request_that_held(world, tmp_path):
    before = len(world.log("curl"))
    ran = run_gitlab(world, world.main, tmp_path)
    assert sorted(ran) == ["compare", "lock", "suite"]
    assert [i["code"] for i in ran["lock"]] == [0], ran["lock"][0]["stderr"]
    assert [i["code"] for i in ran["suite"]] == [0, 0, 0, 0], [i["stderr"] for i in ran["suite"]]
    shards = sorted(os.listdir(ran["compare"][0]["ws"] / "shards"))
    assert shards == [f"shard-{i}.json" for i in range(1, 5)]
    compare, = ran["compare"]
    assert (compare["code"], compare["after"]) == (0, 0), compare["stderr"]
    # the report, posted as a note of the merge request; the JUnit report kept
    note, = world.log("curl")[before:]
    assert note["args"][-1] == (f"https://gitlab.example.com/api/v4/projects/42/merge_requests/"
                                f"{PR}/notes")
    assert "PRIVATE-TOKEN: glpat-test" in note["args"]
    assert note["body"].startswith("<!-- cas-compare -->\n**cas suite compare: HELD")
    assert "No dataset pin changed." in note["body"]
    kept = tmp_path / "artefacts" / "compare-1"
    junit = yaml.safe_load((CI / "gitlab-ci.yml").read_text())["compare"]["artifacts"]
    assert junit["reports"]["junit"] in junit["paths"]
    assert _properties(ET.parse(kept / junit["reports"]["junit"]).getroot())["verdict"] == "held"
    assert (kept / "report.md").read_text() in note["body"]


# -- a Kubernetes Indexed Job -----------------------------------------------------------------
def _pod(world: World, spec: dict, image: Path, out: Path, index: int | None) -> int:
    """One pod of a Job's template: the image is a copy of the checkout at its workingDir, each
    volume mount a local directory, the Secret's keys the test's repository."""
    container, = spec["template"]["spec"]["containers"]
    mounts = {m["mountPath"]: out / m["name"] for m in container["volumeMounts"]}
    project = _fresh(image, out / f"{container['name']}-{index}")
    local = {container["workingDir"]: str(project), **{k: str(v) for k, v in mounts.items()}}

    def localise(text: str) -> str:
        for there, here in local.items():
            text = text.replace(there, here)
        return text
    for d in mounts.values():
        d.mkdir(exist_ok=True)
    assert container["envFrom"] == [{"secretRef": {"name": "cas-eval"}}]
    env = dict(world.env, CAS_REPO=str(world.store))  # the Secret `cas-eval`
    env.update({e["name"]: localise(e["value"]) for e in container["env"]})
    if index is not None:
        env["JOB_COMPLETION_INDEX"] = str(index)
    p = _run([localise(a) for a in container["command"] + container["args"]], project, env,
             check=False)
    assert p.returncode in (0, 14), p.stderr
    return p.returncode


def test_kubernetes_indexed_job_shards_from_a_zero_based_index(world, tmp_path):
    shards, compare = yaml.safe_load_all((CI / "k8s-indexed-job.yml").read_text())
    assert (shards["kind"], compare["kind"]) == ("Job", "Job")
    spec = shards["spec"]
    assert spec["completionMode"] == "Indexed"
    n = spec["completions"]
    assert spec["parallelism"] == n
    for job in (shards, compare):  # SHARDS is kept equal to completions
        container, = job["spec"]["template"]["spec"]["containers"]
        assert {e["name"]: e["value"] for e in container["env"]}["SHARDS"] == str(n)
    with ThreadPoolExecutor(n) as pool:
        codes = list(pool.map(lambda i: _pod(world, spec, world.pr, tmp_path, i), range(n)))
    assert codes == [0] * n
    results = tmp_path / "results" / "eval-run-1"
    assert sorted(os.listdir(results)) == [f"shard-{i}.json" for i in range(1, n + 1)]
    for i in range(1, n + 1):  # index 0 ran --shard 1/n, and so on: every case once
        shard = json.loads((results / f"shard-{i}.json").read_text())
        assert (shard["shard"]["index"], shard["shard"]["count"]) == (i, n)
    assert _pod(world, compare["spec"], world.pr, tmp_path, None) == 14  # the gate
    assert (results / "report.md").read_text().startswith(
        "<!-- cas-compare -->\n**cas suite compare: REGRESSED")
    assert _properties(ET.parse(results / "junit.xml").getroot())["verdict"] == "regressed"
    merged = json.loads((results / "candidate.json").read_text())
    assert "shard" not in merged and merged["counts"]["COMPLETED"] == 12 * 5


# -- the doc shows the files as they are --------------------------------------------------------
SHOWN = re.compile(r"<!-- file: (examples/ci/\S+) -->\n```[a-z]*\n(.*?)```\n", re.S)


def test_the_doc_shows_every_recipe_exactly():
    shown = SHOWN.findall(DOC.read_text(encoding="utf-8"))
    assert sorted(path for path, _ in shown) == sorted(
        f"examples/ci/{p.name}" for p in CI.iterdir() if not p.name.startswith("."))
    for path, text in shown:
        assert text == (ROOT / path).read_text(encoding="utf-8"), path
    assert "docs/ci.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_github_actions_stops_at_a_pin_the_repository_does_not_honour(world, tmp_path):
    """A lock whose pin names another set of cases than the repository's version: the lock
    job fails (exit 5) and no shard, merge or comment runs."""
    checkout = _fresh(world.pr, tmp_path / "checkout")
    lock = checkout / "cas.lock"
    text = lock.read_text()
    digest = re.search(r"#b3:([0-9a-f]{64})", text).group(1)
    lock.write_text(text.replace(digest, ("0" if digest[0] != "0" else "1") + digest[1:]))
    before = len(world.log("gh"))
    (tmp_path / "run").mkdir()
    ran = run_github(world, checkout, tmp_path / "run")
    lock_cell, = ran["lock"]
    assert lock_cell["steps"][-1][:2] == (
        "Every pin in cas.lock is active and matches its digest", 5)
    assert "support-evals@1" in lock_cell["steps"][-1][2]
    assert ran["shards"] == ran["compare"] == [{"steps": "skipped", "ok": False}]
    assert world.log("gh")[before:] == []
