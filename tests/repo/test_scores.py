"""Pins, scores, experiments and deletion: the Python API on both backends, the CLI's exact
output for every refusal, and the property that a cited version is never deletable."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas.repo import scores as scoresmod
from cas.storage.backends.memory import MemoryBackend
from cas.format.records import (DatasetTombstone, Fence, Score, ScoreBatch, VersionTombstone,
                                format_record_file)
from cas.storage.refs import deleted_key, score_batch_key, tombstone_key, version_key
from cas_cli.main import EXIT_CODES

ZERO = "b3:" + "0" * 64
from support.sample_cases import plain_cases


@pytest.fixture
def repo(location, monkeypatch):
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    r = cas.init(location)
    r.create_dataset("evals", admission="direct")
    r.commit("evals", base=None, add=plain_cases(4))
    r.commit("evals", base=1, add=plain_cases(2, "more"))
    return r


def keys(r, prefix):
    return sorted(r.backend.list(prefix))


# -- pins ---------------------------------------------------------------------------------
def test_pin_round_trips_through_its_string(repo):
    v = repo.version("evals", 2)
    pin = repo.pin("evals", 2)
    assert pin == cas.Pin("evals", 2, v.content_digest)
    text = str(pin)
    assert text == f"evals@2#{v.content_digest}"
    assert cas.Pin.parse(text) == pin
    assert cas.Pin.parse(text.upper().replace("EVALS", "evals").replace("B3:", "b3:")) == pin
    assert repo.resolve_pin(text) == v
    assert repo.resolve_pin(pin) == v


def test_tampered_pin_digest_is_refused(repo):
    pin = repo.pin("evals", 1)
    other = repo.version("evals", 2).content_digest
    tampered = f"evals@1#{other}"
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.resolve_pin(tampered)
    assert info.value.reason == "PIN_MISMATCH"
    assert info.value.message == (f"pin {tampered} does not match the repository: evals@1 has "
                                  f"content_digest {pin.content_digest}")
    with pytest.raises(cas.FailedPrecondition):
        repo.record_score(tampered, metric="acc", value=1)
    assert repo.scores("evals") == []
    assert keys(repo, "datasets/evals/scores/") == []


@pytest.mark.parametrize("text", ["evals@1", "evals#b3:00", "@1#" + ZERO, "evals@0#" + ZERO,
                                  "evals@01#" + ZERO, "Evals@1#" + ZERO, "evals@x#" + ZERO,
                                  "evals@1#" + ZERO[:-1], "", "../x@1#" + ZERO])
def test_malformed_pins_are_refused_naming_the_form(text):
    with pytest.raises(cas.InvalidArgument) as info:
        cas.Pin.parse(text)
    assert info.value.reason == "INVALID_PIN"
    assert "DATASET@VERSION#b3:<64 hex digits>" in info.value.message


@given(st.text(max_size=120))
@settings(max_examples=300)
def test_pin_parse_raises_only_its_error(text):
    try:
        pin = cas.Pin.parse(text)
    except cas.InvalidArgument:
        return
    assert cas.Pin.parse(str(pin)) == pin


@given(st.from_regex(r"[a-z0-9][a-z0-9_-]{0,20}", fullmatch=True), st.integers(1, 10**12),
       st.binary(min_size=32, max_size=32))
def test_pin_format_parse_round_trip(name, version, raw):
    pin = cas.Pin(name, version, "b3:" + raw.hex())
    assert cas.Pin.parse(str(pin)) == pin


def test_pins_of_missing_or_deleted_versions_are_refused(repo):
    with pytest.raises(cas.NotFound):
        repo.pin("evals", 3)
    with pytest.raises(cas.NotFound):
        repo.pin("nope", 1)
    old = str(repo.pin("evals", 2))
    repo.delete_version("evals", 2)
    with pytest.raises(cas.NotFound) as info:
        repo.pin("evals", 2)
    assert info.value.reason == "VERSION_DELETED"
    with pytest.raises(cas.NotFound) as info:
        repo.resolve_pin(old)
    assert info.value.reason == "VERSION_DELETED"
    assert "was deleted" in info.value.message


def test_retired_versions_cannot_be_pinned_scored_or_experimented_on(repo):
    pin = repo.pin("evals", 1)
    score = repo.record_score(pin, metric="acc", value=1)
    retired = repo.retire("evals", 1, "Contaminated", "leaked into a training set")
    assert (retired.cause, retired.note) == ("CONTAMINATED", "leaked into a training set")
    before = keys(repo, "datasets/evals/scores/") + keys(repo, "datasets/evals/experiments/")
    for call, what in ((lambda: repo.pin("evals", 1), "pinning"),
                       (lambda: repo.record_score(pin, metric="acc", value=1), "pinning"),
                       (lambda: repo.create_experiment("evals", 1, "base"), "pinning")):
        with pytest.raises(cas.FailedPrecondition) as info:
            call()
        assert info.value.reason == "EVALUATION_DATASET_VERSION_RETIRED"
        assert info.value.message == (
            f"evals@1 is RETIRED (CONTAMINATED at {retired.retired_at}): pinning, scoring or an "
            "experiment over it is refused, permanently; cut a new version to bring the "
            "dataset back into use")
    after = keys(repo, "datasets/evals/scores/") + keys(repo, "datasets/evals/experiments/")
    assert after == before
    # the score recorded before stays, and says what became of its version
    [kept] = repo.scores("evals", 1)
    assert kept.score_id == score.score_id and kept.version_state == "RETIRED"
    other = repo.record_score(repo.pin("evals", 2), metric="acc", value=0)
    assert repo.scores("evals", 2) == [other] and other.version_state == "ACTIVE"


# -- scores -------------------------------------------------------------------------------
def test_scores_are_listed_per_version_and_per_dataset(repo):
    item = repo.items("evals", 1).items[0]
    a = repo.record_score(repo.pin("evals", 1), metric="acc", value=0.75)
    b = repo.record_score(str(repo.pin("evals", 2)), metric="acc", value=1, item=item)
    assert a.score_id == "datasets/evals/scores/0000000001#0"
    assert b.score_id == "datasets/evals/scores/0000000002#0"
    assert (a.value, type(b.value), b.item) == (0.75, int, item)
    assert a.author == "Ada <ada@example.com>" and a.pin == repo.pin("evals", 1)
    assert repo.scores("evals") == [a, b]
    assert repo.scores("evals", 1) == [a]
    assert repo.scores("evals", 2) == [b]
    with pytest.raises(cas.NotFound):
        repo.scores("evals", 3)
    with pytest.raises(cas.NotFound):
        repo.scores("nope")


def test_many_scores_are_one_batch_file(repo):
    items = repo.items("evals", 1).items
    recorded = repo.record_scores(repo.pin("evals", 1), [
        {"metric": "task_success", "value": i % 2, "item": case} for i, case in enumerate(items)
    ] + [{"metric": "mean", "value": 0.5}])
    assert [s.score_id for s in recorded] == [
        f"datasets/evals/scores/0000000001#{i}" for i in range(len(items) + 1)]
    assert keys(repo, "datasets/evals/scores/") == ["datasets/evals/scores/0000000001"]
    assert repo.scores("evals", 1) == recorded


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "1", "0.5", "nan", "true",
                                   "False", "", " x", "x" * 65, "a\nb", "\ud800", None, [1]])
def test_non_finite_numbers_and_bad_labels_are_refused(repo, value):
    with pytest.raises(cas.InvalidArgument) as info:
        repo.record_score(repo.pin("evals", 1), metric="acc", value=value)
    assert info.value.reason == "INVALID_SCORE_VALUE"
    assert keys(repo, "datasets/evals/scores/") == []


@pytest.mark.parametrize("metric", ["", " acc", "a\nb", 3, None, "x" * 129, "\ud800"])
def test_bad_metric_names_are_refused(repo, metric):
    with pytest.raises(cas.InvalidArgument):
        repo.record_score(repo.pin("evals", 1), metric=metric, value=1)
    assert keys(repo, "datasets/evals/scores/") == []


def test_items_and_experiments_must_belong_to_the_version(repo):
    pin1 = repo.pin("evals", 1)
    only_in_2 = sorted(set(repo.items("evals", 2).items) - set(repo.items("evals", 1).items))[0]
    with pytest.raises(cas.NotFound) as info:
        repo.record_score(pin1, metric="acc", value=1, item=only_in_2)
    assert info.value.reason == "ITEM_NOT_IN_VERSION"
    with pytest.raises(cas.InvalidArgument):
        repo.record_score(pin1, metric="acc", value=1, item="not-a-digest")
    with pytest.raises(cas.NotFound) as info:
        repo.record_score(pin1, metric="acc", value=1, experiment="ghost")
    assert info.value.reason == "EXPERIMENT_NOT_FOUND"
    repo.create_experiment("evals", 2, "on-two")
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.record_score(pin1, metric="acc", value=1, experiment="on-two")
    assert info.value.reason == "EXPERIMENT_VERSION_MISMATCH"
    with pytest.raises(cas.InvalidArgument):
        repo.record_scores(pin1, [{"metric": "acc", "value": 1, "weight": 2}])
    with pytest.raises(cas.InvalidArgument):
        repo.record_scores(pin1, [])
    # one bad score in a batch stores none of them
    with pytest.raises(cas.NotFound):
        repo.record_scores(pin1, [{"metric": "a", "value": 1},
                                  {"metric": "b", "value": 2, "item": only_in_2}])
    assert repo.scores("evals") == []


def test_experiments(repo):
    e = repo.create_experiment("evals", 1, "baseline")
    assert (e.dataset, e.number, e.name, e.version) == ("evals", 1, "baseline", 1)
    assert e.content_digest == repo.version("evals", 1).content_digest
    with pytest.raises(cas.AlreadyExists) as info:
        repo.create_experiment("evals", 2, "baseline")
    assert info.value.reason == "EXPERIMENT_EXISTS"
    f = repo.create_experiment("evals", 2, "candidate")
    assert repo.experiments("evals") == [e, f]
    s = repo.record_score(repo.pin("evals", 2), metric="acc", value=1, experiment="candidate")
    assert s.experiment == "candidate"
    with pytest.raises(cas.NotFound):
        repo.create_experiment("evals", 9, "later")


# -- deletion -----------------------------------------------------------------------------
def test_a_cited_version_or_dataset_is_not_deletable(repo):
    s = repo.record_score(repo.pin("evals", 1), metric="acc", value=0.5)
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.delete_version("evals", 1)
    assert info.value.reason == "VERSION_CITED"
    assert info.value.fields["cited_by"] == s.score_id
    assert info.value.message == (
        f"version evals@1 is cited by score {s.score_id} (acc=0.5 on evals@1, recorded "
        f"{s.recorded_at} by Ada <ada@example.com>); a cited version cannot be deleted")
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.delete_dataset("evals")
    assert info.value.reason == "VERSION_CITED" and s.score_id in info.value.message
    assert repo.version("evals", 1) and repo.datasets() == ["evals"]
    assert keys(repo, "datasets/evals/deleted/") == []
    assert not repo.backend.exists(tombstone_key("evals"))
    assert repo.fsck().ok


def test_a_version_cited_by_an_experiment_is_not_deletable(repo):
    repo.create_experiment("evals", 2, "baseline")
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.delete_version("evals", 2)
    assert info.value.message == (
        "version evals@2 is cited by experiment 'baseline' (datasets/evals/experiments/"
        "0000000001, over evals@2); a cited version cannot be deleted")
    repo.delete_version("evals", 1)  # nothing cites version 1


def test_a_deleted_number_is_never_reused(repo):
    v2 = repo.version("evals", 2)
    tomb = repo.delete_version("evals", 2)
    assert tomb == VersionTombstone(dataset="evals", number=2, content_digest=v2.content_digest,
                                    item_count=v2.item_count, author="Ada <ada@example.com>",
                                    deleted_at=tomb.deleted_at)
    with pytest.raises(cas.NotFound) as info:
        repo.version("evals", 2)
    assert info.value.reason == "VERSION_DELETED"
    assert info.value.message == (f"version 2 of dataset 'evals' was deleted "
                                  f"({tomb.deleted_at} by Ada <ada@example.com>)")
    assert repo.head("evals") == 1 and repo.refs.last_number("evals") == 2
    # sealing on the head after deleting the newest version gets the next number
    v3 = repo.commit("evals", base=1, add=plain_cases(1, "third"))
    assert (v3.number, v3.parent) == (3, 1)
    # a writer still on base 1 conflicts with 3 instead of reusing 2
    with pytest.raises(cas.VersionConflict) as conflict:
        repo.commit("evals", base=1, add=plain_cases(1, "stale"))
    assert conflict.value.head == 3
    assert [v.number for v in repo.versions("evals").versions] == [3, 1]
    page = repo.versions("evals", limit=1)
    assert [v.number for v in page.versions] == [3] and page.next_before == 3
    assert [v.number for v in repo.versions("evals", before=3).versions] == [1]
    with pytest.raises(cas.NotFound) as info:
        repo.delete_version("evals", 2)
    assert info.value.message.startswith("version 2 of dataset 'evals' was already deleted")
    # every version deleted: the next seal is a first version with a new number
    repo.delete_version("evals", 3)
    repo.delete_version("evals", 1)
    assert repo.head("evals") == 0 and repo.versions("evals").versions == []
    v4 = repo.commit("evals", base=None, add=plain_cases(1, "fresh"))
    assert (v4.number, v4.parent) == (4, None)
    report = repo.fsck()
    assert report.ok, report.problems
    assert report.versions == 1


def test_a_stale_claim_of_a_deleted_number_is_withdrawn(repo):
    """A writer that chose number 3 just before version 3 was deleted never keeps it."""
    v3 = repo.commit("evals", base=2, add=plain_cases(1, "x"))
    repo.delete_version("evals", 3)
    assert repo.refs.append_version(v3) is False
    assert not repo.backend.exists(version_key("evals", 3))


def test_deleting_a_dataset(repo):
    repo.create_dataset("other", admission="direct")
    tomb = repo.delete_dataset("evals")
    assert (tomb.dataset, tomb.head, tomb.author) == ("evals", 2, "Ada <ada@example.com>")
    assert repo.datasets() == ["other"]
    msg = f"dataset 'evals' was deleted ({tomb.deleted_at} by Ada <ada@example.com>)"
    for read in (lambda: repo.dataset("evals"), lambda: repo.version("evals", 1),
                 lambda: repo.scores("evals"), lambda: repo.experiments("evals"),
                 lambda: repo.pin("evals", 1)):
        with pytest.raises(cas.NotFound) as info:
            read()
        assert info.value.reason == "DATASET_DELETED" and info.value.message == msg
    with pytest.raises(cas.AlreadyExists) as info:
        repo.create_dataset("evals", admission="direct")
    assert info.value.reason == "DATASET_DELETED"
    assert info.value.message == (f"dataset 'evals' was deleted ({tomb.deleted_at} by Ada "
                                  "<ada@example.com>); the name of a deleted dataset cannot "
                                  "be used again")
    with pytest.raises(cas.NotFound) as info:
        repo.delete_dataset("evals")
    assert info.value.message.startswith("dataset 'evals' was already deleted")
    # the tombstone and one fence per citation log stay; every other record is gone
    assert keys(repo, "datasets/evals/") == ["datasets/evals/experiments/0000000001",
                                             "datasets/evals/scores/0000000001",
                                             "datasets/evals/tombstone"]
    report = repo.fsck()
    assert report.ok, report.problems
    assert report.datasets == 1


def test_an_interrupted_dataset_deletion_is_finished_by_running_it_again(repo):
    # as if the process died right after writing the tombstone
    tomb = DatasetTombstone(dataset="evals", head=2, author="x", deleted_at="t")
    repo.backend.put_if_absent(tombstone_key("evals"), format_record_file(tomb))
    assert repo.datasets() == []
    with pytest.raises(cas.AlreadyExists):
        repo.create_dataset("evals", admission="direct")
    report = repo.fsck()
    assert report.ok and any("interrupted deletion" in p.message for p in report.problems)
    assert repo.delete_dataset("evals") == tomb
    assert keys(repo, "datasets/evals/") == ["datasets/evals/experiments/0000000001",
                                             "datasets/evals/scores/0000000001",
                                             "datasets/evals/tombstone"]
    assert repo.fsck().ok


def test_a_citation_that_races_a_deletion_wins(repo, monkeypatch):
    """A score claimed after the deletion scanned the log (and before its fence) is found by
    the fence: the deletion is withdrawn and refused, and the version stays."""
    real_scan = scoresmod._scan

    def scan_then_score(r, name, target, what, rollback=None, **fields):
        heads = real_scan(r, name, target, what, rollback, **fields)
        repo.record_score(repo.pin("evals", 1), metric="late", value=1)
        return heads

    monkeypatch.setattr(scoresmod, "_scan", scan_then_score)
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.delete_version("evals", 1)
    assert info.value.fields["cited_by"] == "datasets/evals/scores/0000000001#0"
    assert not repo.backend.exists(deleted_key("evals", 1))
    assert repo.version("evals", 1).number == 1
    assert repo.fsck().ok


def test_a_citation_after_the_tombstone_is_refused(repo):
    """While a version is being deleted (tombstone written, file not yet removed), nothing
    new may cite it."""
    v = repo.version("evals", 1)
    tomb = VersionTombstone(dataset="evals", number=1, content_digest=v.content_digest,
                            item_count=v.item_count, author="x", deleted_at="t")
    repo.backend.put_if_absent(deleted_key("evals", 1), format_record_file(tomb))
    pin = cas.Pin("evals", 1, v.content_digest)
    with pytest.raises(cas.NotFound) as info:
        repo.record_score(pin, metric="acc", value=1)
    assert info.value.message == "version 1 of dataset 'evals' is being deleted"
    with pytest.raises(cas.NotFound):
        repo.create_experiment("evals", 1, "base")
    with pytest.raises(cas.NotFound):
        repo.resolve_pin(pin)
    assert repo.scores("evals") == [] and repo.experiments("evals") == []
    # the interrupted deletion is reported as a notice and finished by running it again
    assert [p.severity for p in repo.fsck().problems if "being deleted" in p.message] == \
        ["notice"]
    repo.delete_version("evals", 1)
    assert not repo.backend.exists(version_key("evals", 1))


def test_fsck_checks_the_new_records(location, monkeypatch):
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    r = cas.init(location)
    r.create_dataset("evals", admission="direct")
    v = r.commit("evals", base=None, add=plain_cases(2))
    r.record_score(r.pin("evals", 1), metric="acc", value=1)
    assert r.fsck().ok
    # a gap in the score log, a score citing a version that does not exist, a bad fence
    bad = ScoreBatch(dataset="evals", number=3, scores=[Score(
        dataset="evals", version=7, content_digest=v.content_digest, metric="m", value=1,
        author="x", recorded_at="t")])
    r.backend.put_if_absent(score_batch_key("evals", 3), format_record_file(bad))
    r.backend.put_if_absent("datasets/evals/experiments/0000000001", format_record_file(
        Fence(dataset="evals", log="scores", number=1, reason="r", author="x", written_at="t")))
    r.backend.put_if_absent("datasets/evals/scores/notes", b"x")
    problems = {(p.where, p.message) for p in r.fsck().problems if p.severity == "error"}
    assert problems == {
        ("datasets/evals/scores/", "numbers are not contiguous from 1; missing [2]"),
        ("datasets/evals/scores/0000000003#0", "cites evals@7, which is missing or deleted"),
        ("datasets/evals/experiments/0000000001", "fence of the 'scores' log"),
        ("datasets/evals/scores/notes", "unexpected key under datasets/"),
    }


# -- the property: a version any score cites is never deletable ----------------------------
ops = st.lists(st.tuples(st.sampled_from(["seal", "score", "delete", "delete-dataset"]),
                         st.integers(1, 6)), max_size=25)


@given(ops)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_versions_cited_by_any_score_are_never_deletable(steps):
    repo = cas.Repository.create(MemoryBackend())
    repo.create_dataset("d", admission="direct")
    live: dict[int, str] = {}   # version -> content_digest
    used: set[int] = set()
    cited: set[int] = set()
    deleted_dataset = False
    for op, n in steps:
        if deleted_dataset:
            break
        if op == "seal":
            base = repo.head("d")
            v = repo.commit("d", base=base or None, add=plain_cases(1, f"{len(used)}"))
            assert v.number not in used and v.number > max(used, default=0)
            used.add(v.number)
            live[v.number] = v.content_digest
        elif op == "score" and n in live:
            repo.record_score(repo.pin("d", n), metric="m", value=n)
            cited.add(n)
        elif op == "delete":
            if n in cited:
                with pytest.raises(cas.FailedPrecondition) as info:
                    repo.delete_version("d", n)
                assert info.value.reason == "VERSION_CITED"
                assert repo.version("d", n).content_digest == live[n]
            elif n in live:
                repo.delete_version("d", n)
                del live[n]
            else:
                with pytest.raises(cas.NotFound):
                    repo.delete_version("d", n)
        elif op == "delete-dataset":
            if cited:
                with pytest.raises(cas.FailedPrecondition):
                    repo.delete_dataset("d")
            else:
                repo.delete_dataset("d")
                deleted_dataset = True
    if not deleted_dataset:
        assert {v.number for v in repo.versions("d", limit=100).versions} == set(live)
        assert {s.version for s in repo.scores("d")} == cited
    assert repo.fsck().ok


# -- the CLI --------------------------------------------------------------------------------
@pytest.fixture
def evals(run, tmp_path):
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(c) + "\n" for c in plain_cases(3)))
    (tmp_path / "b.jsonl").write_text(json.dumps({"input": "extra"}) + "\n")
    assert run("init").exit_code == 0
    assert run("dataset", "create", "evals", "--admission", "direct").exit_code == 0
    assert run("commit", "evals", "--add", "a.jsonl").exit_code == 0
    assert run("commit", "evals", "--base", "1", "--add", "b.jsonl").exit_code == 0
    return cas.open(str(tmp_path))


def refused(result, code: str, message: str) -> None:
    assert (result.exit_code, result.stdout, result.stderr) == \
        (EXIT_CODES[code], "", f"cas: error: {message}\n")


def test_cli_pin_and_verify(run, evals):
    digest = evals.version("evals", 2).content_digest
    r = run("pin", "evals", "2")
    assert (r.exit_code, r.stdout) == (0, f"evals@2#{digest}\n")
    assert run("pin", "evals@2").stdout == r.stdout
    r = run("pin", "evals", "2", "--json")
    assert json.loads(r.stdout) == {"pin": f"evals@2#{digest}", "dataset": "evals",
                                    "version": 2, "content_digest": digest}
    r = run("pin-verify", f"evals@2#{digest.upper().replace('B3:', 'b3:')}")
    assert (r.exit_code, r.stdout) == (0, f"valid: evals@2#{digest} (4 cases, ACTIVE)\n")
    r = run("--json", "pin-verify", f"evals@2#{digest}")
    assert json.loads(r.stdout) == {"valid": True, "pin": f"evals@2#{digest}",
                                    "dataset": "evals", "version": 2, "content_digest": digest,
                                    "item_count": 4, "state": "ACTIVE"}


def test_cli_pin_refusals(run, evals):
    digest = evals.version("evals", 1).content_digest
    refused(run("pin", "evals"), "INVALID_ARGUMENT",
            "no version given for dataset 'evals'; every read names an exact version, there "
            'is no "latest" (use: cas pin DATASET VERSION or cas pin DATASET@VERSION)')
    refused(run("pin", "evals", "3"), "NOT_FOUND", "dataset 'evals' has no version 3")
    refused(run("pin", "nope", "1"), "NOT_FOUND", "no dataset named 'nope'")
    refused(run("pin-verify", "evals@1"), "INVALID_ARGUMENT",
            "'evals@1' is not a pin; expected DATASET@VERSION#b3:<64 hex digits>, e.g. "
            f"evals@3#{ZERO}")
    refused(run("pin-verify", f"evals@2#{digest}"), "FAILED_PRECONDITION",
            f"pin evals@2#{digest} does not match the repository: evals@2 has content_digest "
            f"{evals.version('evals', 2).content_digest}")
    r = run("--json", "pin-verify", f"evals@2#{digest}")
    assert r.exit_code == 5 and r.stdout == ""
    error = json.loads(r.stderr)["error"]
    assert (error["code"], error["reason"], error["pin"]) == \
        ("FAILED_PRECONDITION", "PIN_MISMATCH", f"evals@2#{digest}")


def test_cli_scores(run, evals):
    item = evals.items("evals", 1).items[0]
    r = run("score", "add", "evals", "1", "--metric", "acc", "--value", "0.5")
    s = evals.scores("evals")[0]
    pin = f"evals@1#{evals.version('evals', 1).content_digest}"
    assert (r.exit_code, r.stdout) == (
        0, f"recorded datasets/evals/scores/0000000001#0: acc=0.5 on {pin}\n")
    assert run("experiment", "create", "evals", "1", "--name", "base").exit_code == 0
    r = run("--json", "score", "add", "evals@1", "--metric", "ok", "--value", "1",
            "--item", item, "--experiment", "base")
    t = json.loads(r.stdout)
    assert t == {"score_id": "datasets/evals/scores/0000000002#0", "dataset": "evals",
                 "version": 1, "content_digest": pin.split("#")[1], "metric": "ok", "value": 1,
                 "item": item, "experiment": "base", "author": "Ada <ada@example.com>",
                 "recorded_at": t["recorded_at"], "pin": pin, "version_state": "ACTIVE",
                 "batch": "datasets/evals/scores/0000000002", "withdrawn": False}
    r = run("score", "list", "evals")
    pad = " " * (len(item) - 4)
    assert r.stdout == (
        f"BATCH                             VERSION  METRIC  VALUE  ITEM{pad}  EXPERIMENT  STATE\n"
        f"datasets/evals/scores/0000000001  evals@1  acc     0.5    -{pad}     -           ACTIVE\n"
        f"datasets/evals/scores/0000000002  evals@1  ok      1      {item}  base        ACTIVE\n")
    listed = json.loads(run("score", "list", "evals", "1", "--json").stdout)
    assert listed["dataset"] == "evals" and listed["version"] == 1
    assert [x["score_id"] for x in listed["scores"]] == [s.score_id, t["score_id"]]
    assert json.loads(run("--json", "score", "list", "evals", "2").stdout) == \
        {"dataset": "evals", "version": 2, "scores": []}


def test_cli_score_refusals(run, evals):
    only_in_2 = sorted(set(evals.items("evals", 2).items) - set(evals.items("evals", 1).items))[0]
    refused(run("score", "add", "evals", "1", "--metric", "acc", "--value", "x" * 65),
            "INVALID_ARGUMENT", f"score label '{'x' * 56}... is refused: a label is 1-64 "
            "printable characters without leading or trailing spaces; it is 65 characters long")
    refused(run("score", "add", "evals", "1", "--metric", "acc", "--value", "nan"),
            "INVALID_ARGUMENT", "score label 'nan' is refused: it reads as a number or a "
            "boolean; give the number (as JSON writes numbers: 3, 0.25, 1e-3) or the boolean "
            "(true, false) itself")
    refused(run("score", "add", "evals", "1", "--metric", "acc", "--value", "1e999"),
            "INVALID_ARGUMENT", "a score's value must be a finite number, not inf")
    refused(run("score", "add", "evals", "1", "--metric", "", "--value", "1"),
            "INVALID_ARGUMENT", "metric must be a non-empty string, not ''")
    refused(run("score", "add", "evals", "1", "--metric", "acc", "--value", "1", "--item",
                only_in_2), "NOT_FOUND",
            f"case {only_in_2} is not in evals@1; a score's item must be a case of the version "
            "it cites")
    refused(run("score", "add", "evals", "1", "--metric", "acc", "--value", "1",
                "--experiment", "ghost"), "NOT_FOUND",
            "dataset 'evals' has no experiment 'ghost' (create it first with `cas experiment "
            "create`)")
    assert run("experiment", "create", "evals", "2", "--name", "two").exit_code == 0
    refused(run("score", "add", "evals", "1", "--metric", "acc", "--value", "1",
                "--experiment", "two"), "FAILED_PRECONDITION",
            "experiment 'two' is over evals@2, not evals@1; its scores must cite that version")
    refused(run("score", "add", "evals", "7", "--metric", "acc", "--value", "1"), "NOT_FOUND",
            "dataset 'evals' has no version 7")
    refused(run("score", "list"), "INVALID_ARGUMENT",
            "missing DATASET (use: cas score list DATASET [VERSION])")
    refused(run("score", "list", "evals", "9"), "NOT_FOUND", "dataset 'evals' has no version 9")
    assert evals.scores("evals") == []


def test_cli_experiments(run, evals):
    digest = evals.version("evals", 1).content_digest
    r = run("experiment", "create", "evals", "1", "--name", "baseline")
    assert (r.exit_code, r.stdout) == (0, f"created experiment baseline over evals@1 ({digest})\n")
    refused(run("experiment", "create", "evals", "2", "--name", "baseline"), "ALREADY_EXISTS",
            "dataset 'evals' already has an experiment named 'baseline' (over evals@1)")
    refused(run("experiment", "create", "evals", "1", "--name", " x"), "INVALID_ARGUMENT",
            "invalid experiment name ' x': use 1-128 printable characters without leading or "
            "trailing spaces")
    e = json.loads(run("--json", "experiment", "list", "evals").stdout)
    assert e == {"dataset": "evals", "experiments": [{
        "kind": "experiment", "format": 1, "dataset": "evals", "number": 1, "name": "baseline",
        "version": 1, "content_digest": digest, "author": "Ada <ada@example.com>",
        "created_at": e["experiments"][0]["created_at"]}]}
    assert run("experiment", "list", "evals").stdout == (
        f"baseline  evals@1  {digest}  {e['experiments'][0]['created_at']}  "
        "Ada <ada@example.com>\n")


def test_cli_version_delete(run, evals):
    v2 = evals.version("evals", 2)
    assert run("score", "add", "evals", "1", "--metric", "acc", "--value", "1").exit_code == 0
    s = evals.scores("evals")[0]
    refused(run("version", "delete", "evals", "1"), "FAILED_PRECONDITION",
            f"version evals@1 is cited by score {s.score_id} (acc=1 on evals@1, recorded "
            f"{s.recorded_at} by Ada <ada@example.com>); a cited version cannot be deleted")
    r = run("--json", "version", "delete", "evals", "1")
    error = json.loads(r.stderr)["error"]
    assert (r.exit_code, r.stdout, error["reason"], error["cited_by"]) == \
        (5, "", "VERSION_CITED", s.score_id)
    r = run("version", "delete", "evals", "2")
    assert (r.exit_code, r.stdout) == (
        0, f"deleted evals@2 (4 cases, {v2.content_digest}); number 2 will not be used again\n")
    tomb = evals.refs.read_version_tombstone("evals", 2)
    refused(run("version", "delete", "evals", "2"), "NOT_FOUND",
            f"version 2 of dataset 'evals' was already deleted ({tomb.deleted_at} by "
            "Ada <ada@example.com>)")
    refused(run("show", "evals", "2"), "NOT_FOUND",
            f"version 2 of dataset 'evals' was deleted ({tomb.deleted_at} by "
            "Ada <ada@example.com>)")
    r = run("--json", "commit", "evals", "--base", "1", "--add", "b.jsonl")
    assert json.loads(r.stdout)["number"] == 3
    r = run("--json", "version", "delete", "evals", "3")
    t = json.loads(r.stdout)
    assert t == {"kind": "version.tombstone", "format": 1, "dataset": "evals", "number": 3,
                 "content_digest": v2.content_digest, "item_count": 4,
                 "author": "Ada <ada@example.com>", "deleted_at": t["deleted_at"]}
    assert run("fsck").exit_code == 0


def test_cli_dataset_delete(run, evals):
    assert run("experiment", "create", "evals", "2", "--name", "base").exit_code == 0
    refused(run("dataset", "delete", "evals"), "FAILED_PRECONDITION",
            "dataset 'evals' is cited by experiment 'base' (datasets/evals/experiments/"
            "0000000001, over evals@2); a cited dataset cannot be deleted")
    assert run("dataset", "create", "spare", "--admission", "direct").exit_code == 0
    r = run("dataset", "delete", "spare")
    assert (r.exit_code, r.stdout) == (
        0, "deleted dataset spare; the name 'spare' cannot be used again\n")
    tomb = evals.refs.read_dataset_tombstone("spare")
    refused(run("dataset", "create", "spare", "--admission", "direct"), "ALREADY_EXISTS",
            f"dataset 'spare' was deleted ({tomb.deleted_at} by Ada <ada@example.com>); the "
            "name of a deleted dataset cannot be used again")
    refused(run("dataset", "show", "spare"), "NOT_FOUND",
            f"dataset 'spare' was deleted ({tomb.deleted_at} by Ada <ada@example.com>)")
    refused(run("dataset", "delete", "spare"), "NOT_FOUND",
            f"dataset 'spare' was already deleted ({tomb.deleted_at} by Ada <ada@example.com>)")
    assert run("dataset", "list").stdout == "evals\n"
    assert run("dataset", "create", "other", "--admission", "direct").exit_code == 0
    t = json.loads(run("--json", "dataset", "delete", "other").stdout)
    assert t == {"kind": "dataset.tombstone", "format": 1, "dataset": "other", "head": 0,
                 "author": "Ada <ada@example.com>", "deleted_at": t["deleted_at"]}
    assert run("fsck").exit_code == 0
