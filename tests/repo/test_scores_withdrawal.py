"""Score values (numbers, booleans, labels), batches from a file, withdrawal of a batch and the
deletion it allows (raced against the deletion's scan), comparing experiments, and pin-verify of
a retired version: the Python API and the CLI's exact output."""

from __future__ import annotations

import json
import threading

import pytest

import cas
from cas.repo import scores as scoresmod
from cas.format.keys import withdrawal_key
from cas.format.records import ScoreWithdrawal, format_record_file
from cas_cli.main import EXIT_CODES

ADA = "Ada <ada@example.com>"


def cases(n: int, tag: str = "c") -> list[dict]:
    return [{"input": f"{tag}-{i}"} for i in range(n)]


@pytest.fixture
def repo(location, monkeypatch):
    monkeypatch.setenv("CAS_USER", ADA)
    r = cas.init(location)
    r.create_dataset("evals", admission="direct")
    r.commit("evals", base=None, add=cases(3))
    r.commit("evals", base=1, add=cases(1, "more"))
    return r


def snapshot(r) -> dict:
    return {k: r.backend.get(k) for k in sorted(r.backend.list(""))}


def refused(result, code: str, message: str) -> None:
    assert (result.exit_code, result.stdout, result.stderr) == \
        (EXIT_CODES[code], "", f"cas: error: {message}\n")


# -- values -------------------------------------------------------------------------------
@pytest.mark.parametrize("text,value", [("true", True), ("false", False), ("3", 3),
                                        ("-0.25", -0.25), ("1e-3", 0.001), ("fast", "fast"),
                                        ("needs work", "needs work"), ("True?", "True?")])
def test_parse_value_reads_booleans_numbers_and_labels(text, value):
    got = scoresmod.parse_value(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text", ["nan", "inf", "+1", ".5", "1.", "1_000", "TRUE", "False",
                                  "", " x", "x ", "x" * 65, "a\tb", "1e999"])
def test_parse_value_refusals(text):
    with pytest.raises(cas.InvalidArgument) as info:
        scoresmod.parse_value(text)
    assert info.value.reason == "INVALID_SCORE_VALUE"


def test_a_boolean_stays_a_boolean_in_the_stored_bytes(repo):
    pin = repo.pin("evals", 1)
    recorded = repo.record_scores(pin, [{"metric": "ok", "value": True},
                                        {"metric": "ok", "value": 1},
                                        {"metric": "tone", "value": "x" * 64}])
    data = repo.backend.get(recorded[0].batch).decode()
    assert '"value":true' in data and '"value":1' in data and '"value":"' + "x" * 64 in data
    listed = repo.scores("evals")
    assert [(s.value, type(s.value)) for s in listed] == [(True, bool), (1, int),
                                                          ("x" * 64, str)]


# -- a batch from a file ------------------------------------------------------------------
def test_cli_score_add_file_is_one_batch(run, tmp_path, monkeypatch):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases(2)))
    assert run("commit", "evals", "--add", "a.jsonl").exit_code == 0
    repo = cas.open(str(tmp_path))
    items = repo.items("evals", 1).items
    assert run("experiment", "create", "evals", "1", "--name", "base").exit_code == 0
    lines = [{"metric": "ok", "value": True, "item": items[0]},
             {"metric": "tone", "value": "terse", "item": items[1]}, {"metric": "acc", "value": 0.5}]
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + "\n")
    pin = str(repo.pin("evals", 1))
    r = run("score", "add", "evals", "1", "--file", "s.jsonl", "--experiment", "base")
    assert (r.exit_code, r.stdout) == (
        0, f"recorded batch datasets/evals/scores/0000000001: 3 scores on {pin}\n")
    r = run("--json", "score", "add", "evals@1", "--file", "s.jsonl")
    out = json.loads(r.stdout)
    assert (out["batch"], out["pin"]) == ("datasets/evals/scores/0000000002", pin)
    assert [(s["score_id"], s["value"], s["experiment"], s["batch"], s["withdrawn"])
            for s in out["scores"]] == [
        (f"datasets/evals/scores/0000000002#{i}", x["value"], None,
         "datasets/evals/scores/0000000002", False) for i, x in enumerate(lines)]
    before = snapshot(repo)
    (tmp_path / "bad.jsonl").write_text(json.dumps(lines[0]) + "\n"
                                        + json.dumps({"metric": "m", "value": "0.5"}) + "\n")
    refused(run("score", "add", "evals", "1", "--file", "bad.jsonl"), "INVALID_ARGUMENT",
            "bad.jsonl line 2: score label '0.5' is refused: it reads as a number or a boolean; "
            "give the number (as JSON writes numbers: 3, 0.25, 1e-3) or the boolean (true, "
            "false) itself")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"metric": "m", "value": 1, "w": 2}) + "\n")
    refused(run("score", "add", "evals", "1", "--file", "bad.jsonl"), "INVALID_ARGUMENT",
            "bad.jsonl line 1: unknown field 'w'; a line is {\"metric\", \"value\", \"item\"?}")
    (tmp_path / "bad.jsonl").write_text("\n")
    refused(run("score", "add", "evals", "1", "--file", "bad.jsonl"), "INVALID_ARGUMENT",
            "bad.jsonl holds no scores")
    refused(run("score", "add", "evals", "1", "--file", "s.jsonl", "--metric", "m"),
            "INVALID_ARGUMENT", "give either --metric --value [--item], or --file, not both")
    refused(run("score", "add", "evals", "1", "--metric", "m"), "INVALID_ARGUMENT",
            "score add needs --metric and --value (or --file)")
    assert snapshot(repo) == before


# -- withdrawal ---------------------------------------------------------------------------
def test_withdrawing_a_batch_lets_its_version_be_deleted(repo):
    a = repo.record_scores(repo.pin("evals", 1), [{"metric": "acc", "value": 1}])
    b = repo.record_score(repo.pin("evals", 2), metric="acc", value=0)
    batch = scoresmod.parse_batch_id(a[0].batch)
    assert batch == ("evals", 1)
    w = scoresmod.withdraw_batch(repo.context, "evals", a[0].batch, "wrong rubric")
    assert w == ScoreWithdrawal(dataset="evals", batch=1, reason="wrong rubric", author=ADA,
                                withdrawn_at=w.withdrawn_at)
    assert repo.backend.get(withdrawal_key("evals", 1)) == format_record_file(w)
    assert [(s.score_id, s.withdrawn) for s in repo.scores("evals")] == [
        (a[0].score_id, True), (b.score_id, False)]
    before = snapshot(repo)
    with pytest.raises(cas.AlreadyExists) as info:
        scoresmod.withdraw_batch(repo.context, "evals", 1, "again")
    assert info.value.reason == "SCORE_BATCH_ALREADY_WITHDRAWN"
    assert info.value.message == (
        f"score batch datasets/evals/scores/0000000001 was already withdrawn ({w.withdrawn_at} "
        f"by {ADA}: wrong rubric); a batch is withdrawn once")
    for batch, reason, error in ((9, "x", cas.NotFound), ("datasets/other/scores/0000000001",
                                                          "x", cas.InvalidArgument),
                                 (2, "", cas.InvalidArgument), (2, "x" * 4097,
                                                                cas.InvalidArgument)):
        with pytest.raises(error):
            scoresmod.withdraw_batch(repo.context, "evals", batch, reason)
    assert snapshot(repo) == before
    with pytest.raises(cas.FailedPrecondition):
        repo.delete_version("evals", 2)  # batch 2 still cites it
    repo.delete_version("evals", 1)  # cited only by a withdrawn batch
    assert repo.backend.exists(a[0].batch)  # the batch stays as it was
    assert [s.withdrawn for s in repo.scores("evals")] == [True, False]


def test_a_fence_is_not_a_batch(repo):
    repo.delete_version("evals", 1)  # leaves a fence at scores/1
    with pytest.raises(cas.NotFound) as info:
        scoresmod.withdraw_batch(repo.context, "evals", 1, "x")
    assert info.value.reason == "SCORE_BATCH_NOT_FOUND"
    assert info.value.message == ("datasets/evals/scores/0000000001 is not a score batch: it "
                                  "is a fence a deletion wrote (delete version 1)")


def test_a_withdrawal_racing_a_deletion_never_frees_a_cited_version(repo, monkeypatch):
    """The deletion scans, a new batch citing the version arrives, and the old one is
    withdrawn: the fence finds the new batch, so the version stays."""
    old = repo.record_score(repo.pin("evals", 1), metric="acc", value=1)
    real_scan = scoresmod._scan

    def scan_then_race(ctx, name, target, what, rollback=None, **fields):
        with pytest.raises(cas.FailedPrecondition):  # the old batch still cites: refused
            real_scan(ctx, name, target, what, rollback, **fields)
        scoresmod.withdraw_batch(repo.context, "evals", 1, "wrong rubric")
        heads = real_scan(ctx, name, target, what, rollback, **fields)  # now passes
        repo.record_score(repo.pin("evals", 1), metric="late", value=2)
        return heads

    monkeypatch.setattr(scoresmod, "_scan", scan_then_race)
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.delete_version("evals", 1)
    assert info.value.fields["cited_by"] == "datasets/evals/scores/0000000002#0"
    assert repo.version("evals", 1).number == 1
    assert [s.withdrawn for s in repo.scores("evals")] == [True, False]
    assert old.batch == "datasets/evals/scores/0000000001"


def test_withdrawals_and_deletions_in_threads(repo):
    """Many threads withdraw, score and delete at once: whatever the order, a version that a
    batch not withdrawn cites is never deleted."""
    for _ in range(3):
        repo.record_score(repo.pin("evals", 1), metric="acc", value=1)
    errors: list[BaseException] = []

    def attempt(call):
        try:
            call()
        except cas.CasError:
            pass
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    calls = [lambda n=n: scoresmod.withdraw_batch(repo.context, "evals", n, "redo")
             for n in (1, 2, 3)]
    calls += [lambda: repo.record_score(repo.pin("evals", 1), metric="late", value=1),
              lambda: repo.delete_version("evals", 1), lambda: repo.delete_version("evals", 1)]
    threads = [threading.Thread(target=attempt, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    live = [s for s in repo.scores("evals") if not s.withdrawn and s.version == 1]
    deleted = repo.refs.read_version_tombstone("evals", 1) is not None and \
        not repo.backend.exists("datasets/evals/versions/0000000001")
    assert not (live and deleted)


def test_cli_score_list_and_withdraw(run, tmp_path):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    (tmp_path / "a.jsonl").write_text(json.dumps({"input": "x"}) + "\n")
    assert run("commit", "evals", "--add", "a.jsonl").exit_code == 0
    assert run("score", "add", "evals", "1", "--metric", "ok", "--value", "true").exit_code == 0
    assert run("score", "add", "evals", "1", "--metric", "tone", "--value", "terse").exit_code == 0
    batch = "datasets/evals/scores/0000000001"
    r = run("score", "withdraw", batch, "--reason", "wrong rubric")
    assert (r.exit_code, r.stdout) == (0, f"withdrew {batch}: wrong rubric\n")
    r = run("score", "list", "evals")
    assert r.stdout == (
        "BATCH                             VERSION  METRIC  VALUE  ITEM  EXPERIMENT  STATE\n"
        f"{batch}  evals@1  ok      true   -     -           ACTIVE WITHDRAWN\n"
        "datasets/evals/scores/0000000002  evals@1  tone    terse  -     -           ACTIVE\n")
    listed = json.loads(run("--json", "score", "list", "evals").stdout)["scores"]
    assert [(s["value"], s["withdrawn"], s["batch"]) for s in listed] == [
        (True, True, batch), ("terse", False, "datasets/evals/scores/0000000002")]
    repo = cas.open(str(tmp_path))
    before = snapshot(repo)
    r = run("score", "withdraw", batch, "--reason", "again")
    assert r.exit_code == EXIT_CODES["ALREADY_EXISTS"] and "already withdrawn" in r.stderr
    refused(run("score", "withdraw", "evals#1", "--reason", "x"), "INVALID_ARGUMENT",
            "'evals#1' is not a score batch id; expected datasets/DATASET/scores/NNNNNNNNNN as "
            "`cas score list` shows it")
    refused(run("score", "withdraw", "datasets/evals/scores/0000000009", "--reason", "x"),
            "NOT_FOUND", "dataset 'evals' has no score batch datasets/evals/scores/0000000009")
    assert snapshot(repo) == before
    r = run("--json", "score", "withdraw", "datasets/evals/scores/0000000002", "--reason", "r")
    out = json.loads(r.stdout)
    assert out == {"kind": "score.withdrawal", "format": 1, "dataset": "evals", "batch": 2,
                   "reason": "r", "author": ADA, "withdrawn_at": out["withdrawn_at"],
                   "batch_id": "datasets/evals/scores/0000000002"}
    r = run("version", "delete", "evals", "1")
    assert r.exit_code == 0, r.stderr


# -- comparing experiments ----------------------------------------------------------------
def test_compare_experiments(repo):
    items = repo.items("evals", 1).items
    repo.create_experiment("evals", 1, "base")
    repo.create_experiment("evals", 2, "cand")
    p1, p2 = repo.pin("evals", 1), repo.pin("evals", 2)
    repo.record_scores(p1, [{"metric": "acc", "value": v, "item": i, "experiment": "base"}
                            for v, i in zip((1, 0, 1), items)]
                       + [{"metric": "ok", "value": True, "experiment": "base"}])
    repo.record_scores(p2, [{"metric": "acc", "value": v, "item": i, "experiment": "cand"}
                            for v, i in zip((1.0, 1, True), items)]
                       + [{"metric": "ok", "value": "unsure", "experiment": "cand"}])
    c = scoresmod.compare_experiments(repo.context, "evals", "base", "cand")
    assert (c.a.name, c.b.name) == ("base", "cand")
    acc, ok = c.metrics
    assert (acc.metric, acc.a.count, acc.a.numbers, acc.a.mean, acc.a.values) == \
        ("acc", 3, 3, 2 / 3, {})
    assert (acc.b.count, acc.b.numbers, acc.b.mean, acc.b.values) == (3, 2, 1.0, {"true": 1})
    assert (ok.a.values, ok.b.values, ok.a.mean) == ({"true": 1}, {"unsure": 1}, None)
    # 1 and 1.0 are the same; 0 and 1 differ; 1 and True differ (a bool is not a number)
    assert [(d.item, d.a, d.b) for d in c.differences] == sorted(
        [(items[1], 0, 1), (items[2], 1, True)])
    with pytest.raises(cas.NotFound) as info:
        scoresmod.compare_experiments(repo.context, "evals", "base", "ghost")
    assert info.value.reason == "EXPERIMENT_NOT_FOUND"
    with pytest.raises(cas.InvalidArgument) as info:
        scoresmod.compare_experiments(repo.context, "evals", "base", "base")
    assert info.value.reason == "SAME_EXPERIMENT"


def test_cli_experiment_compare(run, tmp_path):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases(2)))
    assert run("commit", "evals", "--add", "a.jsonl").exit_code == 0
    repo = cas.open(str(tmp_path))
    i0, i1 = repo.items("evals", 1).items
    for name in ("base", "cand"):
        assert run("experiment", "create", "evals", "1", "--name", name).exit_code == 0
    (tmp_path / "b.jsonl").write_text(json.dumps({"metric": "acc", "value": 1, "item": i0})
                                      + "\n" + json.dumps({"metric": "acc", "value": 0,
                                                           "item": i1}) + "\n")
    (tmp_path / "c.jsonl").write_text(json.dumps({"metric": "acc", "value": 1, "item": i0})
                                      + "\n")
    for f, e in (("b.jsonl", "base"), ("c.jsonl", "cand")):
        assert run("score", "add", "evals", "1", "--file", f, "--experiment", e).exit_code == 0
    r = run("experiment", "compare", "evals", "base", "cand")
    pad = " " * (len(i1) - 4)
    assert (r.exit_code, r.stdout) == (0, (
        "base (evals@1) vs cand (evals@1)\n"
        "METRIC  EXPERIMENT  COUNT  MEAN  VALUES\n"
        "acc     base        2      0.5   -\n"
        "acc     cand        1      1.0   -\n"
        "1 case scored differently:\n"
        f"METRIC  ITEM{pad}  base  cand\n"
        f"acc     {i1}  0     -\n"))
    out = json.loads(run("--json", "experiment", "compare", "evals", "base", "cand").stdout)
    assert out["metrics"] == [{"metric": "acc",
                               "a": {"count": 2, "numbers": 2, "mean": 0.5, "values": {}},
                               "b": {"count": 1, "numbers": 1, "mean": 1.0, "values": {}}}]
    assert out["differences"] == [{"metric": "acc", "item": i1, "a": 0, "b": None}]
    assert (out["dataset"], out["a"]["name"], out["b"]["kind"]) == ("evals", "base",
                                                                    "experiment")
    refused(run("experiment", "compare", "evals", "base", "ghost"), "NOT_FOUND",
            "dataset 'evals' has no experiment 'ghost'")


# -- pin-verify of a retired version ------------------------------------------------------
def test_pin_verify_of_a_retired_version_fails(repo, run, tmp_path):
    pin = repo.pin("evals", 1)
    r = repo.retire("evals", 1, "CONTAMINATED", "leaked")
    with pytest.raises(cas.FailedPrecondition) as info:
        scoresmod.verify_pin(repo.context, str(pin))
    assert info.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"
    assert info.value.message == (
        f"evals@1 is RETIRED (CONTAMINATED at {r.retired_at}): every read of it (listing, "
        "replaying, scoring) is refused, permanently; cut a new version to bring the dataset "
        "back into use")
    assert repo.resolve_pin(pin).number == 1  # resolving still answers "is this the set"
    assert scoresmod.verify_pin(repo.context, repo.pin("evals", 2)).number == 2


def test_cli_pin_verify_of_a_retired_version_fails(run, tmp_path):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    (tmp_path / "a.jsonl").write_text(json.dumps({"input": "x"}) + "\n")
    assert run("commit", "evals", "--add", "a.jsonl").exit_code == 0
    pin = run("pin", "evals", "1").stdout.strip()
    repo = cas.open(str(tmp_path))
    r = repo.retire("evals", 1, "CONTAMINATED", "leaked")
    refused(run("pin-verify", pin), "FAILED_PRECONDITION",
            f"evals@1 is RETIRED (CONTAMINATED at {r.retired_at}): every read of it (listing, "
            "replaying, scoring) is refused, permanently; cut a new version to bring the "
            "dataset back into use")
    out = run("--json", "pin-verify", pin)
    error = json.loads(out.stderr)["error"]
    assert (out.exit_code, out.stdout, error["code"], error["reason"]) == (
        EXIT_CODES["FAILED_PRECONDITION"], "", "FAILED_PRECONDITION",
        "EVALUATION_DATASET_VERSION_RETIRED")


def test_a_dataset_cited_only_by_withdrawn_batches_can_be_deleted(repo):
    repo.record_score(repo.pin("evals", 1), metric="acc", value=1)
    scoresmod.withdraw_batch(repo.context, "evals", 1, "redo")
    repo.delete_dataset("evals")
    # the batch and its withdrawal stay, beside the tombstone and the fences
    assert sorted(repo.backend.list("datasets/evals/")) == [
        "datasets/evals/experiments/0000000001", "datasets/evals/scores/0000000001",
        "datasets/evals/scores/0000000002", "datasets/evals/tombstone",
        "datasets/evals/withdrawn/0000000001"]
    with pytest.raises(cas.NotFound):
        scoresmod.withdraw_batch(repo.context, "evals", 1, "again")


def test_fsck_accepts_a_withdrawn_batch_of_a_deleted_version(repo):
    repo.record_score(repo.pin("evals", 1), metric="acc", value=1)
    scoresmod.withdraw_batch(repo.context, "evals", 1, "redo")
    repo.delete_version("evals", 1)
    assert [p for p in repo.fsck().problems if p.severity == "error"] == []
