"""Recorded runs, reviews, content policy, promote/remove/seal and provenance (the Python API).

Every refusal is checked to leave the repository's key listing unchanged: the lifecycle refuses
before it stores anything. Tests that touch storage run on both backends (`location`).
"""

from __future__ import annotations

import datetime
import io
import itertools
import json
import os
import re

import msgspec
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import cas
from cas import runs as runs_mod
from cas import userconfig
from cas.backends.memory import MemoryBackend

REVIEWER = "Ada <ada@example.com>"


@pytest.fixture(autouse=True)
def person(monkeypatch, tmp_path):
    """A configured person for reviews, and never the real user's config file."""
    monkeypatch.setenv("CAS_USER", REVIEWER)
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "user-config.json"))


def run_obj(run_id: str, n: int = 0, **over) -> dict:
    obj = {"run_id": run_id, "tenant": "acme", "person": "user-42",
           "started_at": "2026-05-01T10:00:00Z", "input": {"task": f"task {n}"},
           "output": f"done {n}",
           "steps": [{"type": "message", "role": "user", "content": f"task {n}"},
                     {"type": "tool_call", "tool_name": "ls", "arguments": {"path": "."},
                      "result": ["a", "b"]},
                     {"type": "tool_call", "tool_name": "mv", "arguments": {"src": "a"},
                      "error": "permission denied"},
                     {"type": "tool_call", "tool_name": "cat", "arguments": {"path": "a"}}],
           "outcome": {"status": "success"}, "metadata": {"model": "m-1"}}
    obj.update(over)
    return obj


def jsonl(*objs) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


def keys(repo) -> list[str]:
    return sorted(repo.backend.list(""))


def review(repo, run_id: str, metric: str = "dataset_eligibility", label: str = "reviewed"):
    req = [{"run_id": run_id, "metric": metric, "label": label}]
    token = repo.add_reviews(req)["confirm_token"]
    return repo.add_reviews(req, confirm_token=token)["annotation_ids"][0]


def subject(ref: str, annotation_id: str | None, **over) -> dict:
    s = {"subject_kind": "agent_run", "subject_ref": ref}
    if annotation_id is not None:
        s["review_annotation_id"] = annotation_id
    s.update(over)
    return s


@pytest.fixture
def repo(location):
    return cas.init(location)


@pytest.fixture
def mem():
    return cas.Repository.create(MemoryBackend())


@pytest.fixture
def staged(repo):
    """Four imported runs r-0..r-3, each with one saved review, and an empty dataset."""
    repo.import_runs(io.BytesIO(jsonl(*(run_obj(f"r-{i}", i) for i in range(4)))))
    anns = {f"r-{i}": review(repo, f"r-{i}") for i in range(4)}
    repo.create_dataset("evals")
    return repo, anns


def promote_and_seal(repo, anns, run_ids, key, name="evals"):
    p = repo.promote(name, [subject(r, anns[r]) for r in run_ids], key)
    return p, repo.seal(name, p["confirm_token"])


# -- runs import ----------------------------------------------------------------------------
def test_import_is_all_or_nothing(repo):
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-old"))))
    before = keys(repo)
    lines = [run_obj(f"r-{i}", i) for i in range(10)]
    del lines[6]["tenant"]
    with pytest.raises(cas.InvalidArgument) as info:
        repo.import_runs(io.BytesIO(jsonl(*lines)))
    assert info.value.message == "input line 7: $.tenant: required field is missing"
    assert info.value.fields == {"line": 7}
    assert keys(repo) == before
    assert repo.runs() == ["r-old"]
    # the same file without the bad line imports every run in one import record
    good = lines[:6] + lines[7:]
    result = repo.import_runs(io.BytesIO(jsonl(*good)))
    assert result == (sorted(r["run_id"] for r in good), 0)
    assert [k for k in keys(repo) if k.startswith("runs/")] == [
        "runs/imports/0000000001", "runs/imports/0000000002"]


GOOD = run_obj("g-1")
BAD_LINES = [
    ({k: v for k, v in GOOD.items() if k != "run_id"}, "$.run_id: required field is missing"),
    ({k: v for k, v in GOOD.items() if k != "tenant"}, "$.tenant: required field is missing"),
    ({k: v for k, v in GOOD.items() if k != "steps"}, "$.steps: required field is missing"),
    (dict(GOOD, run_id=17), "$.run_id: must be a non-empty string"),
    (dict(GOOD, run_id=""), "$.run_id: must be a non-empty string"),
    (dict(GOOD, tenant=None), "$.tenant: must be a non-empty string"),
    (dict(GOOD, person=42), "$.person: must be a non-empty string or null"),
    (dict(GOOD, started_at=["2026"]), "$.started_at: must be a non-empty string or null"),
    (dict(GOOD, steps={"type": "message"}), "$.steps: must be a list of steps"),
    (dict(GOOD, steps=[{"type": "message", "role": "user"}, {"type": "thought"}]),
     "$.steps[1].type: must be one of message, tool_call, not 'thought'"),
    (dict(GOOD, steps=[{"role": "user"}]),
     "$.steps[0].type: must be one of message, tool_call, not None"),
    (dict(GOOD, steps=[{"type": "message", "role": "user"},
                       {"type": "tool_call", "arguments": {}}]),
     "$.steps[1].tool_name: must be a non-empty string"),
    (dict(GOOD, steps=[{"type": "tool_call", "tool_name": 3}]),
     "$.steps[0].tool_name: must be a non-empty string"),
    (dict(GOOD, steps=[{"type": "tool_call", "tool_name": "ls", "arguments": "."}]),
     "$.steps[0].arguments: must be a JSON object or array"),
    (dict(GOOD, steps=[{"type": "message"}]),
     "$.steps[0].role: a message needs a non-empty string role"),
    (dict(GOOD, steps=["hello"]), "$.steps[0]: a step must be a JSON object"),
    (dict(GOOD, steps=[["type", "message"]]), "$.steps[0]: a step must be a JSON object"),
    (dict(GOOD, metadata=["m"]), "$.metadata: must be a JSON object"),
    ([GOOD], "$: a run must be a JSON object"),
    ("r-1", "$: a run must be a JSON object"),
]


@pytest.mark.parametrize("bad,problem", BAD_LINES)
def test_validation_names_line_and_field(mem, bad, problem):
    before = keys(mem)
    data = jsonl(run_obj("ok-1"), run_obj("ok-2")) + b"\n" + jsonl(bad, run_obj("ok-3"))
    with pytest.raises(cas.InvalidArgument) as info:
        mem.import_runs(io.BytesIO(data))
    # the blank line counts: the bad run is on line 4 of the file
    assert info.value.message == f"input line 4: {problem}"
    assert info.value.code == "INVALID_ARGUMENT" and info.value.fields["line"] == 4
    assert keys(mem) == before and mem.runs() == []


@pytest.mark.parametrize("raw,problem", [
    (b'{"run_id": "x", "tenant": "a", "steps": [], "input": "caf\xe9"}',
     "Invalid UTF-8 encoded string"),
    (b'{"run_id": "x", "tenant": "a", "steps": [], "input": NaN}', "JSON is malformed"),
    (b'{"run_id": "x", "tenant": "a", "steps": [], "input": Infinity}', "JSON is malformed"),
    (b'{"run_id": "x", "tenant": "a", "steps": [],}', "JSON is malformed"),
    (b'{"run_id": "x", "tenant": "a", "steps": [', "truncated"),
    (b'\xff\xfe{}', "JSON is malformed"),
])
def test_undecodable_lines_are_refused_by_number(mem, raw, problem):
    data = jsonl(run_obj("ok-1")) + raw + b"\n" + jsonl(run_obj("ok-2"))
    with pytest.raises(cas.InvalidArgument) as info:
        mem.import_runs(io.BytesIO(data))
    assert info.value.message.startswith("input line 2: ")
    assert problem in info.value.message
    assert info.value.fields == {"line": 2}
    assert keys(mem) == [k for k in keys(mem) if not k.startswith("runs/")]


def test_nan_from_python_is_refused_naming_the_path(mem):
    with pytest.raises(cas.InvalidJSONValue) as info:
        mem.import_runs([run_obj("ok"), run_obj("nan", input={"x": [1, float("nan")]})])
    assert info.value.path == "$[1].input.x[1]"
    assert mem.runs() == []


def test_a_line_over_the_limit_is_refused_and_nothing_stored(mem):
    big = (b'{"run_id": "big", "tenant": "a", "steps": [], "input": "'
           + b"x" * runs_mod.MAX_LINE + b'"}\n')
    before = keys(mem)
    with pytest.raises(cas.InvalidArgument) as info:
        mem.import_runs(io.BytesIO(jsonl(run_obj("ok")) + big))
    assert info.value.message == f"input line 2: longer than {runs_mod.MAX_LINE} bytes"
    assert keys(mem) == before and mem.runs() == []


def test_identical_reimport_is_a_no_op(repo):
    lines = [run_obj(f"r-{i}", i) for i in range(3)]
    assert repo.import_runs(io.BytesIO(jsonl(*lines))) == (["r-0", "r-1", "r-2"], 0)
    before = keys(repo)
    assert repo.import_runs(io.BytesIO(jsonl(*lines))) == ([], 3)
    # the same runs with other key order and spacing are the same recordings
    respelled = b"".join(json.dumps(dict(reversed(list(o.items()))), indent=1)
                         .replace("\n", " ").encode() + b"\n" for o in lines)
    assert repo.import_runs(io.BytesIO(respelled)) == ([], 3)
    assert keys(repo) == before
    # a repeated line within one file is one run
    assert repo.import_runs(io.BytesIO(jsonl(run_obj("r-9"), run_obj("r-9")))) == (["r-9"], 0)


def test_same_run_id_with_other_content_is_refused(repo):
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-1", 1))))
    before = keys(repo)
    stored = repo.run("r-1")
    changed = run_obj("r-1", 1, output="something else")
    for data in (jsonl(changed), jsonl(run_obj("r-new"), changed)):
        with pytest.raises(cas.FailedPrecondition) as info:
            repo.import_runs(io.BytesIO(data))
        err = info.value
        assert (err.code, err.reason) == ("FAILED_PRECONDITION", "RUN_ID_CONFLICT")
        assert err.message == ("run 'r-1' was already imported with different content; a run id "
                               "names one recording")
        assert err.fields == {"run_id": "r-1"}
        assert keys(repo) == before
        assert repo.runs() == ["r-1"] and repo.run("r-1") == stored
    # within one file, the same id twice with different content
    with pytest.raises(cas.InvalidArgument) as info:
        repo.import_runs(io.BytesIO(jsonl(run_obj("r-2", 2), run_obj("r-2", 3))))
    assert info.value.message == "run 'r-2' appears twice with different content"
    assert keys(repo) == before


class RacingBackend(MemoryBackend):
    """Runs `hook` once, just after the first pack of a batch is published (its index stored):
    the moment between an import's checks and its claim of a number."""

    hook = None

    def put_if_absent(self, key, data):
        done = super().put_if_absent(key, data)
        if key.endswith(".idx") and self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        return done


@pytest.mark.parametrize("theirs", ["conflicting", "identical"])
def test_an_import_that_lands_during_an_import_is_checked_too(theirs):
    backend = RacingBackend()
    mine = cas.Repository.create(backend)
    other = cas.Repository(backend)
    mine.import_runs([run_obj("r-0")])
    other.runs()  # the other writer has read the log too
    rival = run_obj("r-1", 1) if theirs == "identical" else run_obj("r-1", 1, output="rival")
    backend.hook = lambda: other.import_runs([rival])
    if theirs == "conflicting":
        with pytest.raises(cas.FailedPrecondition) as info:
            mine.import_runs([run_obj("r-1", 1), run_obj("r-2", 2)])
        assert info.value.reason == "RUN_ID_CONFLICT"
        assert cas.Repository(backend).runs() == ["r-0", "r-1"]
        assert cas.Repository(backend).run("r-1").output == "rival"
    else:
        result = mine.import_runs([run_obj("r-1", 1), run_obj("r-2", 2)])
        assert result == (["r-2"], 1)
    # each run id is in exactly one import record
    from cas.objects import RunImport, parse_record_file
    ids = [e.run_id for k in backend.list("runs/imports/")
           for e in parse_record_file(backend.get(k), RunImport, k).runs]
    assert sorted(ids) == sorted(set(ids))
    assert cas.Repository(backend).fsck().ok


def test_absent_result_and_null_result_stay_distinct(repo):
    steps = [{"type": "tool_call", "tool_name": "rm", "arguments": {"path": "a"}, "result": None},
             {"type": "tool_call", "tool_name": "rm", "arguments": {"path": "a"}}]
    repo.import_runs(io.BytesIO(jsonl(run_obj("null", steps=steps[:1]),
                                      run_obj("absent", steps=steps[1:]),
                                      run_obj("both", steps=steps))))
    assert repo.run("null").steps == steps[:1]
    assert repo.run("absent").steps == steps[1:]
    assert "result" in repo.run("both").steps[0] and "result" not in repo.run("both").steps[1]
    repo.create_dataset("evals")
    anns = {r: review(repo, r) for r in ("null", "absent", "both")}
    p, sealed = promote_and_seal(repo, anns, ["null", "absent", "both"], "k")
    assert len(p["proposed"]["added"]) == 3  # three different cases
    by_run = {repo.case("evals", 1, c).run_id: repo.case("evals", 1, c)
              for c in p["proposed"]["added"]}
    assert by_run["null"].steps == steps[:1] and by_run["null"].steps[0]["result"] is None
    assert by_run["absent"].steps == steps[1:] and "result" not in by_run["absent"].steps[0]
    assert by_run["both"].steps == steps


UNSAFE_KEPT = ["../x", "a/b", "../../../etc/passwd", "/abs", ".", "..", "x\\y", "C:\\x",
               "runs/imports/0000000001", "sp ace", "\u00e9\u4e2d"]
# each refused run id, and what the refusal says is wrong with it
UNSAFE_REFUSED = {
    "x\ny": "contains the control character U+000A at character 1",
    "x\x00y": "contains the control character U+0000 at character 1",
    "tab\there": "contains the control character U+0009 at character 3",
    "\x1b[31m": "contains the control character U+001B at character 0",
    "x\u2028y": "contains the non-printable character U+2028 (LINE SEPARATOR) at character 1",
    "x" * 257: "is 257 characters long",
}


def test_path_like_run_ids_are_stored_safely_never_as_paths(repo, location, tmp_path):
    outside = sorted(str(p) for p in tmp_path.rglob("*"))
    lines = [run_obj(r, i) for i, r in enumerate(UNSAFE_KEPT)]
    assert repo.import_runs(io.BytesIO(jsonl(*lines))).new == sorted(UNSAFE_KEPT)
    assert repo.runs() == sorted(UNSAFE_KEPT)
    repo.create_dataset("evals")
    anns = {r: review(repo, r) for r in UNSAFE_KEPT}
    p, sealed = promote_and_seal(repo, anns, UNSAFE_KEPT, "k")
    assert sealed.version.item_count == len(UNSAFE_KEPT)
    assert {e.run_id for e in repo.provenance("evals", 1)} == set(UNSAFE_KEPT)
    for r in UNSAFE_KEPT:
        assert repo.run(r).run_id == r and [x.run_id for x in repo.reviews(r)] == [r]
    # no key is made from a run id: every key is one of the documented shapes
    shapes = re.compile(r"(config|packs/[0-9a-f]{64}\.(pack|idx|midx)|runs/imports/\d{10}|"
                        r"reviews/\d{10}|datasets/evals/(meta|versions)/\d{10}|"
                        r"persons/[0-9a-f]{2}/[0-9a-f]{64}|persons/shards/[0-9a-f]{64}\.[0-9a-f]{64}|"
                        r"datasets/evals/proposals/ct-[0-9a-f]{32}|datasets/evals/keys/[0-9a-f]{64})\Z")
    assert [k for k in keys(repo) if not shapes.match(k)] == []
    if location == str(tmp_path):
        # nothing was written outside the repository directory (or the private test cache)
        now = sorted(str(p) for p in tmp_path.rglob("*")
                     if not str(p).startswith(str(tmp_path / ".cas")))
        assert now == [p for p in outside if not p.startswith(str(tmp_path / ".cas"))]
    assert not os.path.exists("/abs") and not (tmp_path.parent / "x").exists()
    assert repo.fsck().ok


@pytest.mark.parametrize("run_id", UNSAFE_REFUSED)
def test_control_characters_in_run_ids_are_refused(mem, run_id):
    with pytest.raises(cas.InvalidArgument) as info:
        mem.import_runs(io.BytesIO(jsonl(run_obj("fine"), run_obj(run_id))))
    assert info.value.message == ("input line 2: $.run_id: must be at most 256 printable "
                                  f"characters; it {UNSAFE_REFUSED[run_id]}")
    assert mem.runs() == []


def test_extra_fields_are_kept_and_unknown_run_is_refused(mem):
    mem.import_runs(io.BytesIO(jsonl(run_obj("r-1", session="s-9", cost={"usd": 0.1}))))
    assert mem.run("r-1").extra == {"session": "s-9", "cost": {"usd": 0.1}}
    with pytest.raises(cas.NotFound) as info:
        mem.run("r-2")
    assert info.value.reason == "RUN_NOT_FOUND"
    assert info.value.message == "no recorded run 'r-2' (import it with `cas runs import`)"


# -- reviews --------------------------------------------------------------------------------
def test_review_preview_saves_nothing_and_the_token_saves(repo):
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-1"))))
    before = keys(repo)
    req = [{"run_id": "r-1", "metric": "dataset_eligibility", "label": "reviewed"}]
    preview = repo.add_reviews(req)
    token = preview["confirm_token"]
    assert token.startswith("ct-") and len(token) == 35
    assert [{k: r[k] for k in ("run_id", "metric", "label", "reviewer")}
            for r in preview["reviews"]] == [dict(req[0], reviewer=REVIEWER)]
    assert keys(repo) == before and repo.reviews("r-1") == []
    assert repo.add_reviews(req)["confirm_token"] == token  # the same request, the same token
    saved = repo.add_reviews(req, confirm_token=token)
    [ann] = saved["annotation_ids"]
    assert ann.startswith("ann-")
    [r] = repo.reviews("r-1")
    assert (r.annotation_id, r.run_id, r.metric, r.label, r.reviewer) == (
        ann, "r-1", "dataset_eligibility", "reviewed", REVIEWER)
    assert r.run == preview["reviews"][0]["run"]
    assert [k for k in keys(repo) if k not in before] == ["reviews/0000000001"]


def test_wrong_or_stale_review_token_is_refused(repo, monkeypatch):
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-1"), run_obj("r-2"))))
    req = [{"run_id": "r-1", "metric": "m", "label": "good"}]
    token = repo.add_reviews(req)["confirm_token"]
    other = repo.add_reviews([dict(req[0], label="bad")])["confirm_token"]
    monkeypatch.setenv("CAS_USER", "Grace <grace@example.com>")
    as_grace = repo.add_reviews(req)["confirm_token"]
    monkeypatch.setenv("CAS_USER", REVIEWER)
    before = keys(repo)
    for wrong in ("ct-" + "0" * 32, other, as_grace, "nonsense", ""):
        with pytest.raises(cas.FailedPrecondition) as info:
            repo.add_reviews(req, confirm_token=wrong)
        assert (info.value.code, info.value.reason) == ("FAILED_PRECONDITION",
                                                        "CONFIRM_TOKEN_MISMATCH")
        assert info.value.message == (
            "the confirm token does not match this request (it was issued for a different "
            "request, or what it previewed has changed); run the command without "
            "--confirm-token to preview again")
    assert keys(repo) == before and repo.reviews("r-1") == []
    assert len({token, other, as_grace}) == 3
    repo.add_reviews(req, confirm_token=token)  # the right token still saves
    assert [r.label for r in repo.reviews("r-1")] == ["good"]


@pytest.mark.parametrize("config_text", [None, "", "{}\n", '{"other": "x"}'])
def test_review_without_a_configured_person_is_refused(repo, monkeypatch, tmp_path, config_text):
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-1"))))
    monkeypatch.delenv("CAS_USER")
    path = tmp_path / "empty-config.json"
    if config_text is not None:
        path.write_text(config_text)
    monkeypatch.setenv("CAS_CONFIG", str(path))
    before = keys(repo)
    req = [{"run_id": "r-1", "metric": "m", "label": "l"}]
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.add_reviews(req)
    assert info.value.reason == "NO_CONFIGURED_PERSON"
    assert info.value.message == (
        'a review needs to know who you are: run `cas config user.name "Your Name"` and '
        '`cas config user.email you@example.com`, or set CAS_USER="Name <email>"')
    assert keys(repo) == before
    userconfig.set_value("user.name", "Grace Hopper")
    userconfig.set_value("user.email", "grace@example.com")
    token = repo.add_reviews(req)["confirm_token"]
    repo.add_reviews(req, confirm_token=token)
    assert [r.reviewer for r in repo.reviews("r-1")] == ["Grace Hopper <grace@example.com>"]


def test_a_batch_of_reviews_is_one_preview_and_one_record(mem):
    ids = [f"r-{i:03d}" for i in range(300)]
    mem.import_runs(io.BytesIO(jsonl(*(run_obj(r, i) for i, r in enumerate(ids)))))
    reqs = [{"run_id": r, "metric": "dataset_eligibility", "label": "reviewed"} for r in ids]
    before = keys(mem)
    token = mem.add_reviews(reqs)["confirm_token"]
    assert keys(mem) == before
    saved = mem.add_reviews(reqs, confirm_token=token)
    assert len(set(saved["annotation_ids"])) == 300
    assert [k for k in keys(mem) if k not in before] == ["reviews/0000000001"]
    assert all(len(mem.reviews(r)) == 1 for r in ids[:5])


def test_annotation_ids_are_unique_even_for_the_same_judgment_at_the_same_instant():
    repo = cas.Repository.create(MemoryBackend(), clock=lambda: "2026-05-01T10:00:00.000000Z")
    repo.import_runs([run_obj("r-1")])
    req = {"run_id": "r-1", "metric": "m", "label": "l"}
    token = repo.add_reviews([req, req])["confirm_token"]
    first = repo.add_reviews([req, req], confirm_token=token)["annotation_ids"]
    assert len(set(first)) == 2
    assert sorted(r.annotation_id for r in repo.reviews("r-1")) == sorted(first)


def test_confirming_the_same_token_again_saves_nothing_new():
    repo = cas.Repository.create(MemoryBackend())
    repo.import_runs([run_obj("r-1")])
    req = {"run_id": "r-1", "metric": "m", "label": "l"}
    token = repo.add_reviews([req])["confirm_token"]
    first = repo.add_reviews([req], confirm_token=token)
    keys_after_first = keys(repo)
    again = cas.Repository(repo.backend).add_reviews([req], confirm_token=token)
    assert again["annotation_ids"] == first["annotation_ids"]
    assert keys(repo) == keys_after_first
    assert [r.annotation_id for r in repo.reviews("r-1")] == first["annotation_ids"]


def test_review_of_an_unknown_run_is_refused(repo):
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-1"))))
    before = keys(repo)
    for reqs in ([{"run_id": "r-404", "metric": "m", "label": "l"}],
                 [{"run_id": "r-1", "metric": "m", "label": "l"},
                  {"run_id": "r-404", "metric": "m", "label": "l"}]):
        with pytest.raises(cas.NotFound) as info:
            repo.add_reviews(reqs)
        assert (info.value.reason, info.value.fields) == ("RUN_NOT_FOUND", {"run_id": "r-404"})
    with pytest.raises(cas.NotFound):
        repo.reviews("r-404")
    assert keys(repo) == before


@pytest.mark.parametrize("req,problem", [
    ({"run_id": "r-1", "metric": "", "label": "l"}, "review metric must be 1-256 printable "
                                                    "characters"),
    ({"run_id": "r-1", "metric": "m", "label": "a\nb"}, "review label must be 1-256 printable "
                                                        "characters; it contains the control "
                                                        "character U+000A at character 1"),
    ({"run_id": "r-1", "metric": "m"}, None),
    ({"run_id": "r-1", "metric": "m", "label": "l", "score": 3}, None),
    ({"run_id": "r-1", "metric": 5, "label": "l"}, None),
])
def test_malformed_review_requests_are_refused(mem, req, problem):
    mem.import_runs(io.BytesIO(jsonl(run_obj("r-1"))))
    with pytest.raises(cas.InvalidArgument) as info:
        mem.add_reviews([req])
    if problem:
        assert info.value.message == problem


def test_an_empty_review_batch_is_refused(mem):
    before = keys(mem)
    with pytest.raises(cas.InvalidArgument):
        mem.add_reviews([])
    assert keys(mem) == before


# -- promote, remove, seal ------------------------------------------------------------------
def test_promote_previews_and_seal_seals(staged):
    repo, anns = staged
    before = keys(repo)
    p = repo.promote("evals", [subject("r-0", anns["r-0"]), subject("r-1", anns["r-1"])], "k-1")
    assert p["base_version"] is None and p["operation"] == "promote" and p["changes"] is True
    assert p["proposed"]["item_count"] == 2 and p["proposed"]["carried"] == []
    assert p["proposed"]["added"] == sorted(p["proposed"]["added"])
    assert p["withheld"] == {c: [] for c in p["proposed"]["added"]}
    assert repo.head("evals") == 0  # nothing sealed by a preview
    new = set(keys(repo)) - set(before)
    # a preview stores the frozen cases (packs, with their person index), the proposal and the key
    assert {k for k in new if not k.startswith(("packs/", "persons/"))} == {
        f"datasets/evals/proposals/{p['confirm_token']}",
        next(k for k in new if k.startswith("datasets/evals/keys/"))}
    result = repo.seal("evals", p["confirm_token"], message="first")
    v = result.version
    assert result.already_sealed is False
    assert (v.number, v.parent, v.item_count, v.added, v.removed, v.operation, v.message) == (
        1, None, 2, 2, 0, "promote", "first")
    assert v.content_digest == p["proposed"]["content_digest"] and v.proposal == p["confirm_token"]
    assert repo.items("evals", 1).items == p["proposed"]["added"]
    # the next preview names the base and carries its cases
    p2 = repo.promote("evals", [subject("r-2", anns["r-2"])], "k-2")
    assert p2["base_version"] == {"number": 1, "item_count": 2, "content_digest": v.content_digest}
    assert p2["proposed"]["carried"] == repo.items("evals", 1).items
    assert p2["proposed"]["carried_count"] == 2 and p2["proposed"]["carried_complete"] is True
    assert p2["proposed"]["item_count"] == 3 and len(p2["proposed"]["added"]) == 1
    assert repo.fsck().ok


def refusal_cases(anns):
    return [
        ([subject("r-0", None)], "FAILED_PRECONDITION", "REVIEW_REQUIRED",
         "subject 0 ('r-0'): a promotion needs a saved review: give its review_annotation_id "
         "(see `cas review add`)"),
        ([subject("r-0", "")], "FAILED_PRECONDITION", "REVIEW_REQUIRED", None),
        ([subject("r-0", anns["r-0"]), subject("r-1", anns["r-0"])], "FAILED_PRECONDITION",
         "REVIEW_RUN_MISMATCH",
         f"subject 1 ('r-1'): review {anns['r-0']} is a review of run 'r-0', not of this run"),
        ([subject("r-0", "ann-" + "0" * 32)], "NOT_FOUND", "REVIEW_NOT_FOUND",
         f"subject 0 ('r-0'): no review 'ann-{'0' * 32}'"),
        ([subject("r-404", anns["r-0"])], "NOT_FOUND", "RUN_NOT_FOUND",
         "no recorded run 'r-404' (import it with `cas runs import`)"),
        ([subject("r-0", anns["r-0"], subject_kind="dataset_item")], "INVALID_ARGUMENT",
         "SUBJECT_KIND_INVALID",
         "subject 0 ('r-0'): subject_kind 'dataset_item' is not a run; accepted: agent_run, "
         "SUBJECT_KIND_AGENT_RUN"),
        ([subject("r-0", anns["r-0"], subject_kind="SUBJECT_KIND_DATASET_ITEM")],
         "INVALID_ARGUMENT", "SUBJECT_KIND_INVALID", None),
        ([subject("r-0", anns["r-0"], run_id="r-1")], "INVALID_ARGUMENT", "RUN_MISMATCH",
         "subject 0 ('r-0'): run_id 'r-1' and subject_ref 'r-0' name different runs"),
    ]


def test_promotion_refusals_store_nothing(staged):
    repo, anns = staged
    for subjects, code, reason, message in refusal_cases(anns):
        before = keys(repo)
        with pytest.raises(cas.CasError) as info:
            repo.promote("evals", subjects, "the-key")
        err = info.value
        assert (err.code, err.reason) == (code, reason), subjects
        if message:
            assert err.message == message
        assert keys(repo) == before, subjects
    # no refusal used up the key
    p = repo.promote("evals", [subject("r-0", anns["r-0"])], "the-key")
    assert repo.seal("evals", p["confirm_token"]).version.number == 1
    # and refusals on a dataset with versions store nothing either
    for subjects, code, reason, message in refusal_cases(anns):
        before = keys(repo)
        with pytest.raises(cas.CasError):
            repo.promote("evals", subjects, "another-key")
        assert keys(repo) == before


def test_promotion_input_refusals(staged):
    repo, anns = staged
    before = keys(repo)
    s = [subject("r-0", anns["r-0"])]
    for name, subjects, key, exc in [
            ("nope", s, "k", cas.NotFound), ("Bad Name", s, "k", cas.InvalidArgument),
            ("evals", s, "", cas.InvalidArgument), ("evals", s, "a\nb", cas.InvalidArgument),
            ("evals", s, "k" * 257, cas.InvalidArgument),
            ("evals", [{"subject_kind": "agent_run"}], "k", cas.InvalidArgument),
            ("evals", [{"subject_ref": "r-0", "subject_kind": "agent_run", "x": 1}], "k",
             cas.InvalidArgument),
            ("evals", ["r-0"], "k", cas.InvalidArgument)]:
        with pytest.raises(exc):
            repo.promote(name, subjects, key)
    assert keys(repo) == before


def test_native_subject_kind_spelling_is_the_same_request(staged):
    repo, anns = staged
    a = repo.promote("evals", [subject("r-0", anns["r-0"])], "k")
    b = repo.promote("evals", [subject("r-0", anns["r-0"], subject_kind="SUBJECT_KIND_AGENT_RUN",
                                       run_id="r-0")], "k")
    assert a == b


def test_removal_refusals_store_nothing(staged):
    repo, anns = staged
    before = keys(repo)
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.remove("evals", [], "k")  # no version yet
    assert info.value.reason == "EMPTY_REMOVAL"
    promote_and_seal(repo, anns, ["r-0", "r-1"], "p-1")
    held = repo.items("evals", 1).items
    stranger = cas.encode_case({"input": "never promoted"}).case_id
    before = keys(repo)
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.remove("evals", [], "k")
    assert (info.value.code, info.value.reason) == ("FAILED_PRECONDITION", "EMPTY_REMOVAL")
    assert info.value.message == ("a removal needs at least one case id; an empty removal is "
                                  "accepted only when the current version is retired")
    for ids in ([stranger], [held[0], stranger]):
        with pytest.raises(cas.NotFound) as info:
            repo.remove("evals", ids, "k")
        assert (info.value.reason, info.value.fields) == ("ITEM_NOT_IN_VERSION",
                                                          {"case_id": stranger})
        assert info.value.message == f"evals@1 does not hold {stranger}"
    with pytest.raises(cas.InvalidArgument) as info:
        repo.remove("evals", ["r-0"], "k")
    assert info.value.message == ("case id 'r-0' is not a digest; expected 'b3:' followed by "
                                  "64 hex digits")
    assert keys(repo) == before
    # the key was not used up by the refusals; an id in upper case is the same id
    p = repo.remove("evals", [held[0].upper()], "k")
    assert repo.remove("evals", [held[0]], "k") == p
    assert p["operation"] == "remove" and p["proposed"]["removed"] == [held[0]]
    assert p["proposed"]["added"] == [] and p["proposed"]["carried"] == [held[1]]
    v = repo.seal("evals", p["confirm_token"]).version
    assert (v.number, v.item_count, v.added, v.removed, v.operation) == (2, 1, 0, 1, "remove")
    assert repo.provenance("evals", 2) == []


def test_preview_carries_a_first_page_of_a_large_base(staged, monkeypatch):
    from cas import proposals
    repo, anns = staged
    promote_and_seal(repo, anns, ["r-0", "r-1", "r-2"], "k1")
    monkeypatch.setattr(proposals, "CARRIED_PAGE", 2)
    p = repo.promote("evals", [subject("r-3", anns["r-3"])], "k2")
    held = repo.items("evals", 1).items
    assert p["proposed"]["carried"] == held[:2]
    assert (p["proposed"]["carried_count"], p["proposed"]["carried_complete"]) == (3, False)
    assert p["proposed"]["item_count"] == 4


def test_idempotency_keys(staged):
    repo, anns = staged
    s0, s1 = subject("r-0", anns["r-0"]), subject("r-1", anns["r-1"])
    p = repo.promote("evals", [s0, s1], "key-A")
    before = keys(repo)
    # the same key and content: the same token, nothing new stored (order does not matter)
    assert repo.promote("evals", [s1, s0], "key-A") == p
    assert keys(repo) == before
    # the same key, other content: refused
    for other in ([s0], [s0, subject("r-2", anns["r-2"])]):
        with pytest.raises(cas.FailedPrecondition) as info:
            repo.promote("evals", other, "key-A")
        assert (info.value.code, info.value.reason) == ("FAILED_PRECONDITION",
                                                        "IDEMPOTENCY_KEY_REUSED")
        assert info.value.message == ("idempotency key 'key-A' was already used for a different "
                                      "request; use a new key")
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.remove("evals", [p["proposed"]["added"][0]], "key-A")
    assert info.value.reason == "IDEMPOTENCY_KEY_REUSED"
    assert keys(repo) == before
    # a key belongs to one dataset
    repo.create_dataset("other")
    q = repo.promote("other", [s0, s1], "key-A")
    assert q["confirm_token"] != p["confirm_token"] and q["dataset"] == "other"
    # after sealing, replaying the key still returns the same proposal and seal is idempotent
    v = repo.seal("evals", p["confirm_token"]).version
    assert repo.promote("evals", [s0, s1], "key-A")["confirm_token"] == p["confirm_token"]
    again = repo.seal("evals", p["confirm_token"])
    assert again == (v, True)


def test_sealing_twice_returns_the_same_version(staged):
    repo, anns = staged
    p, first = promote_and_seal(repo, anns, ["r-0"], "k")
    before = keys(repo)
    second = repo.seal("evals", p["confirm_token"])
    assert second.already_sealed is True and second.version == first.version
    assert keys(repo) == before and repo.head("evals") == 1
    # still true once later versions exist
    promote_and_seal(repo, anns, ["r-1"], "k2")
    assert repo.seal("evals", p["confirm_token"]) == (first.version, True)


def test_sealing_twice_over_a_deleted_number(staged):
    """A number deleted above the base is skipped: the proposal seals as the next free number,
    and sealing its token again still returns that version."""
    repo, anns = staged
    promote_and_seal(repo, anns, ["r-0"], "k0")
    promote_and_seal(repo, anns, ["r-1"], "k1")
    repo.delete_version("evals", 2)
    assert repo.head("evals") == 1
    p = repo.promote("evals", [subject("r-2", anns["r-2"])], "k2")
    assert p["base_version"]["number"] == 1
    first = repo.seal("evals", p["confirm_token"])
    assert (first.version.number, first.version.parent, first.already_sealed) == (3, 1, False)
    before = keys(repo)
    assert repo.seal("evals", p["confirm_token"]) == (first.version, True)
    assert keys(repo) == before


def test_stale_token_is_refused_naming_the_head(staged):
    repo, anns = staged
    promote_and_seal(repo, anns, ["r-0"], "k0")
    a = repo.promote("evals", [subject("r-1", anns["r-1"])], "ka")
    b = repo.promote("evals", [subject("r-2", anns["r-2"])], "kb")
    assert a["base_version"]["number"] == b["base_version"]["number"] == 1
    assert repo.seal("evals", a["confirm_token"]).version.number == 2
    before = keys(repo)
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.seal("evals", b["confirm_token"])
    err = info.value
    assert (err.code, err.reason, err.fields) == ("FAILED_PRECONDITION", "PROPOSAL_STALE",
                                                  {"base": 1, "head": 2})
    assert err.message == ("this proposal was made on evals@1, but the head is now evals@2; "
                           "preview again to build on the head")
    assert keys(repo) == before
    # the same subjects with a new key build on the head
    c = repo.promote("evals", [subject("r-2", anns["r-2"])], "kc")
    assert repo.seal("evals", c["confirm_token"]).version.number == 3


def test_unknown_and_malformed_tokens(staged):
    repo, anns = staged
    repo.create_dataset("other")
    p = repo.promote("other", [subject("r-0", anns["r-0"])], "k")
    before = keys(repo)
    for token, code, reason in [("ct-" + "f" * 32, "NOT_FOUND", "PROPOSAL_NOT_FOUND"),
                                (p["confirm_token"], "NOT_FOUND", "PROPOSAL_NOT_FOUND"),
                                ("ct-../../config", "INVALID_ARGUMENT", None),
                                ("ct-" + "F" * 32, "INVALID_ARGUMENT", None),
                                ("", "INVALID_ARGUMENT", None)]:
        with pytest.raises(cas.CasError) as info:
            repo.seal("evals", token)
        assert (info.value.code, info.value.reason) == (code, reason), token
    assert keys(repo) == before


def test_a_proposal_that_changes_nothing_seals_nothing(staged):
    repo, anns = staged
    p1, v1 = promote_and_seal(repo, anns, ["r-0", "r-1"], "k1")
    # the same runs again, under another key and with a second review of one of them
    ann2 = review(repo, "r-0", label="still good")
    p = repo.promote("evals", [subject("r-0", ann2), subject("r-1", anns["r-1"])], "k2")
    assert p["changes"] is False and p["proposed"]["added"] == []
    assert p["proposed"]["content_digest"] == v1.version.content_digest
    assert p["proposed"]["carried"] == p1["proposed"]["added"]
    before = keys(repo)
    assert repo.seal("evals", p["confirm_token"]) == (None, False)
    assert repo.head("evals") == 1 and keys(repo) == before


def test_same_run_is_one_case_and_keeps_its_id(staged):
    repo, anns = staged
    ann_b = review(repo, "r-0", label="second opinion")
    # one request naming the run twice (two reviews): one case
    p = repo.promote("evals", [subject("r-0", anns["r-0"]), subject("r-0", ann_b)], "k1")
    assert len(p["proposed"]["added"]) == 1 and p["proposed"]["item_count"] == 1
    case_id = p["proposed"]["added"][0]
    repo.seal("evals", p["confirm_token"])
    # two promotions in two datasets under two keys: the same case id
    repo.create_dataset("other")
    q, _ = promote_and_seal(repo, anns, ["r-0", "r-1"], "k2", name="other")
    assert case_id in q["proposed"]["added"]
    # the id survives later versions of the first dataset
    _, v2 = promote_and_seal(repo, anns, ["r-2", "r-3"], "k3")
    r1 = next(c for c in q["proposed"]["added"] if c != case_id)
    _, v3 = promote_and_seal(repo, anns, ["r-1"], "k4")
    assert v3.version.number == 3 and r1 in repo.items("evals", 3).items
    for n in (1, 2, 3):
        assert case_id in repo.items("evals", n).items
        assert repo.case("evals", n, case_id) == repo.case("evals", 1, case_id)
    frozen = repo.case("evals", 3, case_id)
    assert cas.encode_case(frozen).case_id == case_id and frozen.run_id == "r-0"


def test_provenance_names_review_reviewer_and_time(staged):
    repo, anns = staged
    p, v1 = promote_and_seal(repo, anns, ["r-0", "r-1"], "k1")
    entries = repo.provenance("evals", 1)
    assert [e.case_id for e in entries] == p["proposed"]["added"]
    by_run = {e.run_id: e for e in entries}
    for run_id in ("r-0", "r-1"):
        [r] = repo.reviews(run_id)
        e = by_run[run_id]
        assert (e.annotation_id, e.reviewer, e.reviewed_at, e.withheld) == (
            r.annotation_id, REVIEWER, r.reviewed_at, [])
        assert repo.case("evals", 1, e.case_id).run_id == run_id
    # a later version records only the cases it promoted
    p2, _ = promote_and_seal(repo, anns, ["r-0", "r-2"], "k2")
    assert [(e.run_id, e.annotation_id) for e in repo.provenance("evals", 2)] == [
        ("r-2", anns["r-2"])]
    assert repo.provenance("evals", 1) == entries
    # a committed version has no provenance
    repo.create_dataset("plain")
    repo.commit("plain", base=None, add=[{"input": 1}])
    assert repo.provenance("plain", 1) == []


CLASS_EFFECT = {
    "input": lambda c, r: c.input is None and r.input is not None,
    "output": lambda c, r: c.output is None and r.output is not None,
    "metadata": lambda c, r: c.metadata == {} and r.metadata,
    "tool_arguments": lambda c, r: all("arguments" not in s for s in c.steps
                                       if s["type"] == "tool_call"),
    "tool_results": lambda c, r: all("result" not in s and "error" not in s for s in c.steps
                                     if s["type"] == "tool_call"),
}


@pytest.mark.parametrize("withheld", [["input"], ["output"], ["metadata"], ["tool_arguments"],
                                      ["tool_results"], ["input", "tool_results"],
                                      sorted(CLASS_EFFECT)])
def test_content_policy_withholds_classes(staged, withheld):
    repo, anns = staged
    assert repo.settings() is None
    p0 = repo.promote("evals", [subject("r-0", anns["r-0"])], "before-policy")
    settings = repo.set_content_policy(list(reversed(withheld)) + withheld[:1], author="ops")
    assert (settings.revision, settings.withheld, settings.author) == (1, sorted(withheld), "ops")
    assert repo.settings() == settings
    p = repo.promote("evals", [subject("r-0", anns["r-0"])], "after-policy")
    [case_id] = p["proposed"]["added"]
    assert case_id != p0["proposed"]["added"][0]  # a different projection is a different case
    assert p["withheld"] == {case_id: sorted(withheld)}
    repo.seal("evals", p["confirm_token"])
    case, run = repo.case("evals", 1, case_id), repo.run("r-0")
    assert case.withheld == sorted(withheld)
    for cls, effect in CLASS_EFFECT.items():
        assert bool(effect(case, run)) is (cls in withheld), cls
    # what is not withheld is copied as recorded
    assert case.outcome == run.outcome and (case.tenant, case.person) == (run.tenant, run.person)
    assert [s["type"] for s in case.steps] == [s["type"] for s in run.steps]
    if "tool_results" not in withheld:
        assert case.steps == [s if "tool_arguments" not in withheld or s["type"] != "tool_call"
                              else {k: v for k, v in s.items() if k != "arguments"}
                              for s in run.steps]
    [entry] = repo.provenance("evals", 1)
    assert entry.withheld == sorted(withheld)
    # copying everything again: the earlier, full case id
    assert repo.set_content_policy([]).revision == 2
    assert repo.promote("evals", [subject("r-0", anns["r-0"])], "after-reset")[
        "proposed"]["added"] == p0["proposed"]["added"]


def test_content_policy_refuses_unknown_classes(mem):
    before = keys(mem)
    with pytest.raises(cas.InvalidArgument) as info:
        mem.set_content_policy(["input", "secrets"])
    assert info.value.message == ("unknown content class 'secrets'; accepted: input, output, "
                                  "tool_arguments, tool_results, metadata")
    assert keys(mem) == before and mem.settings() is None


def test_a_policy_change_makes_a_replayed_key_a_different_request(staged):
    repo, anns = staged
    s = [subject("r-0", anns["r-0"])]
    repo.promote("evals", s, "k")
    repo.set_content_policy(["input"])
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.promote("evals", s, "k")
    assert info.value.reason == "IDEMPOTENCY_KEY_REUSED"


def test_lifecycle_on_a_fresh_process_view(staged, location):
    """A second Repository opened on the same location sees runs, reviews and proposals."""
    repo, anns = staged
    p = repo.promote("evals", [subject("r-0", anns["r-0"])], "k")
    again = cas.open(location)
    assert again.runs() == repo.runs()
    assert again.reviews("r-0") == repo.reviews("r-0")
    assert again.seal("evals", p["confirm_token"]).version.number == 1
    assert repo.seal("evals", p["confirm_token"]).already_sealed is True
    report = again.fsck()
    assert report.ok, report.problems


# -- the lifecycle against a model (hypothesis stateful) --------------------------------------
POOL = [f"run-{i}" for i in range(6)]
DATASETS = ["ds-a", "ds-b"]
KEYS = ["k0", "k1", "k2", "k3"]
CLASSES = ["input", "output", "tool_arguments", "tool_results", "metadata"]


def pool_run(run_id: str, variant: int) -> dict:
    """Two different recordings per run id (a conflict when both are imported)."""
    steps = [{"type": "message", "role": "user", "content": run_id},
             {"type": "tool_call", "tool_name": "ls", "arguments": {"v": variant},
              "result": None if variant else ["a"]},
             {"type": "tool_call", "tool_name": "rm", "arguments": {}, "error": "denied"}]
    return run_obj(run_id, int(run_id.split("-")[1]), steps=steps, output=f"out {variant}")


def expected_case(run: dict, withheld: frozenset) -> dict:
    """The frozen projection of a run, written out independently of cas.proposals.freeze."""
    steps = []
    for s in run["steps"]:
        s = dict(s)
        if s["type"] == "tool_call":
            if "tool_arguments" in withheld:
                s.pop("arguments", None)
            if "tool_results" in withheld:
                s.pop("result", None)
                s.pop("error", None)
        steps.append(s)
    return {"run_id": run["run_id"], "started_at": run.get("started_at"),
            "input": None if "input" in withheld else run.get("input"),
            "output": None if "output" in withheld else run.get("output"),
            "steps": steps, "outcome": run.get("outcome"),
            "metadata": {} if "metadata" in withheld else run.get("metadata", {}),
            "tenant": run["tenant"], "person": run.get("person"), "withheld": sorted(withheld)}


class LifecycleMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.backend = MemoryBackend()
        # A clock that ticks per call: review times and so annotation ids and tokens are the
        # same on every replay of an example (hypothesis needs reproducible draws).
        ticks = itertools.count(1)
        start = datetime.datetime(2026, 5, 1, tzinfo=datetime.timezone.utc)
        self.repo = cas.Repository.create(self.backend, clock=lambda: (
            start + datetime.timedelta(seconds=next(ticks))).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
        for name in DATASETS:
            self.repo.create_dataset(name, author="t")
        self.runs: dict[str, tuple[int, dict]] = {}      # run id -> (variant, run)
        self.review_of: dict[str, str] = {}              # annotation id -> run id
        self.reviewed_at: dict[str, str] = {}
        self.review_tokens: dict[tuple, str] = {}        # request -> token it previewed with
        self.confirmed: dict = {}  # confirm token -> annotation ids saved
        self.withheld: frozenset = frozenset()
        self.versions = {n: [] for n in DATASETS}        # name -> [(set, record, provenance)]
        self.proposals: dict[str, dict] = {}             # token -> what it proposes
        self.claims: dict[tuple, tuple] = {}             # (name, key) -> (request, token)
        self.case_of: dict[tuple, str] = {}              # (run id, withheld) -> case id

    @initialize()
    def some_reviewed_runs(self):
        self.repo.import_runs(io.BytesIO(jsonl(*(pool_run(r, 0) for r in POOL[:3]))))
        self.runs.update({r: (0, pool_run(r, 0)) for r in POOL[:3]})
        reqs = [{"run_id": r, "metric": "m", "label": "good"} for r in POOL[:3]]
        token = self.repo.add_reviews(reqs)["confirm_token"]
        saved = self.repo.add_reviews(reqs, confirm_token=token)
        for ann, row in zip(saved["annotation_ids"], saved["reviews"]):
            self.review_of[ann] = row["run_id"]
            self.reviewed_at[ann] = row["reviewed_at"]

    def keys(self):
        return sorted(self.backend.list(""))

    def head(self, name):
        return len(self.versions[name])

    def head_set(self, name):
        return self.versions[name][-1][0] if self.versions[name] else frozenset()

    def refused(self, call, code, reason=None):
        before = self.keys()
        with pytest.raises(cas.CasError) as info:
            call()
        assert (info.value.code, info.value.reason if reason else None) == (code, reason), \
            info.value.to_json()
        assert self.keys() == before
        return info.value

    def case_id(self, run_id):
        case = expected_case(self.runs[run_id][1], self.withheld)
        cid = cas.encode_case(case).case_id
        # same run under the same policy -> same case id, for the whole life of the repository
        assert self.case_of.setdefault((run_id, self.withheld), cid) == cid
        return cid

    # -- rules ---------------------------------------------------------------------------
    @rule(picks=st.lists(st.tuples(st.sampled_from(POOL), st.sampled_from([0, 0, 0, 1])),
                         min_size=1, max_size=4),
          bad_line=st.sampled_from([None, None, None, 0, 2]))
    def import_runs(self, picks, bad_line):
        lines = [pool_run(r, v) for r, v in picks]
        if bad_line is not None:
            lines.insert(min(bad_line, len(lines)), {"run_id": "broken", "tenant": "t"})
        data = io.BytesIO(jsonl(*lines))
        variants: dict[str, set] = {}
        for r, v in picks:
            variants.setdefault(r, set()).add(v)
        if bad_line is not None or any(len(v) > 1 for v in variants.values()):
            self.refused(lambda: self.repo.import_runs(data), "INVALID_ARGUMENT")
            return
        conflict = [r for r, v in variants.items() if r in self.runs and self.runs[r][0] not in v]
        if conflict:
            err = self.refused(lambda: self.repo.import_runs(data), "FAILED_PRECONDITION",
                               "RUN_ID_CONFLICT")
            assert err.fields["run_id"] in conflict
            return
        new = sorted(r for r in variants if r not in self.runs)
        before = self.keys()
        result = self.repo.import_runs(data)
        assert result == (new, len(variants) - len(new))
        if not new:
            assert self.keys() == before
        for r, v in picks:
            self.runs.setdefault(r, (v, pool_run(r, v)))
        assert self.repo.runs() == sorted(self.runs)

    @rule(data=st.data(), mode=st.sampled_from(["confirm", "confirm", "preview", "wrong",
                                                 "stale"]),
          wrong=st.binary(min_size=16, max_size=16), ghost=st.sampled_from([False] * 5 + [True]))
    def review(self, data, mode, wrong, ghost):
        reqs = data.draw(st.lists(st.tuples(st.sampled_from(sorted(self.runs)),
                                            st.sampled_from(["m", "n"]),
                                            st.sampled_from(["good", "bad"])),
                                  min_size=1, max_size=3))
        if ghost:
            reqs = reqs + [("ghost", "m", "good")]
        requests = [{"run_id": r, "metric": m, "label": lab} for r, m, lab in reqs]
        if any(r not in self.runs for r, _, _ in reqs):
            self.refused(lambda: self.repo.add_reviews(requests), "NOT_FOUND", "RUN_NOT_FOUND")
            return
        before = self.keys()
        token = self.repo.add_reviews(requests)["confirm_token"]
        assert self.keys() == before
        request = tuple(reqs)
        assert self.review_tokens.setdefault(request, token) == token  # deterministic
        if mode == "preview":
            return
        if mode in ("wrong", "stale"):
            others = [t for q, t in self.review_tokens.items() if t != token]
            bad = "ct-" + wrong.hex() if mode == "wrong" or not others else others[0]
            self.refused(lambda: self.repo.add_reviews(requests, confirm_token=bad),
                         "FAILED_PRECONDITION", "CONFIRM_TOKEN_MISMATCH")
            return
        saved = self.repo.add_reviews(requests, confirm_token=token)
        assert len(saved["annotation_ids"]) == len(requests)
        if token in self.confirmed:  # a repeated confirmation saves nothing new
            assert saved["annotation_ids"] == self.confirmed[token]
            return
        self.confirmed[token] = saved["annotation_ids"]
        for ann, row, (r, m, lab) in zip(saved["annotation_ids"], saved["reviews"], reqs):
            assert ann not in self.review_of
            assert (row["run_id"], row["metric"], row["label"], row["reviewer"]) == (
                r, m, lab, REVIEWER)
            self.review_of[ann] = r
            self.reviewed_at[ann] = row["reviewed_at"]
        for r in {r for r, _, _ in reqs}:
            assert sorted(x.annotation_id for x in self.repo.reviews(r)) == sorted(
                a for a, rr in self.review_of.items() if rr == r)

    @rule(withheld=st.sets(st.sampled_from(CLASSES), max_size=2))
    def set_policy(self, withheld):
        record = self.repo.set_content_policy(sorted(withheld), author="ops")
        assert record.withheld == sorted(withheld)
        self.withheld = frozenset(withheld)

    @precondition(lambda self: self.review_of)
    @rule(data=st.data(), name=st.sampled_from(DATASETS), key=st.sampled_from(KEYS),
          fault=st.sampled_from([None] * 6 + ["no_review", "other_review", "unknown_run",
                                              "bad_kind", "run_id_mismatch", "unknown_review"]),
          native=st.booleans())
    def promote(self, data, name, key, fault, native):
        anns = data.draw(st.lists(st.sampled_from(list(self.review_of)), min_size=1,
                                  max_size=3))
        kind = "SUBJECT_KIND_AGENT_RUN" if native else "agent_run"
        subjects = [{"subject_kind": kind, "subject_ref": self.review_of[a],
                     "review_annotation_id": a} for a in anns]
        if fault is not None:
            s = subjects[-1]
            other = [a for a, r in self.review_of.items() if r != s["subject_ref"]]
            if fault == "no_review":
                del s["review_annotation_id"]
                expect = ("FAILED_PRECONDITION", "REVIEW_REQUIRED")
            elif fault == "other_review" and other:
                s["review_annotation_id"] = other[0]
                expect = ("FAILED_PRECONDITION", "REVIEW_RUN_MISMATCH")
            elif fault == "unknown_run":
                s["subject_ref"] = "ghost"
                expect = ("NOT_FOUND", "RUN_NOT_FOUND")
            elif fault == "bad_kind":
                s["subject_kind"] = "SUBJECT_KIND_DATASET_ITEM"
                expect = ("INVALID_ARGUMENT", "SUBJECT_KIND_INVALID")
            elif fault == "run_id_mismatch":
                s["run_id"] = "ghost"
                expect = ("INVALID_ARGUMENT", "RUN_MISMATCH")
            else:
                s["review_annotation_id"] = "ann-" + "0" * 32
                expect = ("NOT_FOUND", "REVIEW_NOT_FOUND")
            self.refused(lambda: self.repo.promote(name, subjects, key), *expect)
            return
        request = ("promote", tuple(sorted((self.review_of[a], a) for a in anns)), self.withheld)
        self.stage(name, key, request, lambda: self.repo.promote(name, subjects, key),
                   adds=[(self.review_of[a], a) for a in anns])

    @precondition(lambda self: any(self.versions.values()))
    @rule(data=st.data(), key=st.sampled_from(KEYS),
          fault=st.sampled_from([None] * 5 + ["non_member", "empty"]))
    def remove(self, data, key, fault):
        name = data.draw(st.sampled_from([n for n in DATASETS if self.versions[n]]))
        head = sorted(self.head_set(name))
        ids = data.draw(st.lists(st.sampled_from(head), min_size=1, max_size=3)) if head else []
        if fault == "empty" or not ids:
            self.refused(lambda: self.repo.remove(name, [], key), "FAILED_PRECONDITION",
                         "EMPTY_REMOVAL")
            return
        if fault == "non_member":
            ids = ids + [cas.encode_case({"input": "never promoted"}).case_id]
        request = ("remove", tuple(sorted(set(ids))))
        self.stage(name, key, request, lambda: self.repo.remove(name, ids, key),
                   removes=sorted(set(ids)))

    def stage(self, name, key, request, call, adds=(), removes=()):
        claim = self.claims.get((name, key))
        if claim is not None:
            if claim[0] != request:
                self.refused(call, "FAILED_PRECONDITION", "IDEMPOTENCY_KEY_REUSED")
                return
            before = self.keys()
            p = call()  # a replay: the same proposal, nothing stored
            assert p["confirm_token"] == claim[1] and self.keys() == before
            assert p["proposed"]["content_digest"] == self.proposals[claim[1]]["root"]
            return
        base_set = self.head_set(name)
        if any(r not in base_set for r in removes):
            self.refused(call, "NOT_FOUND", "ITEM_NOT_IN_VERSION")
            return
        provenance = {}
        for run_id, ann in adds:
            provenance.setdefault(self.case_id(run_id), (run_id, ann))
        added = sorted(set(provenance) - base_set)
        result = (base_set - set(removes)) | set(provenance)
        p = call()
        token = p["confirm_token"]
        assert token not in self.proposals
        base = self.head(name)
        assert p["base_version"] == (None if base == 0 else {
            "number": base, "item_count": len(base_set),
            "content_digest": self.versions[name][-1][1].content_digest})
        proposed = p["proposed"]
        assert proposed["added"] == added and proposed["removed"] == list(removes)
        assert proposed["item_count"] == len(result)
        assert proposed["carried_count"] == len(base_set) - len(removes)
        assert proposed["carried"] == sorted(base_set - set(removes))
        assert p["withheld"] == {c: sorted(self.withheld) for c in added}
        assert p["changes"] is bool(added or removes)
        self.claims[(name, key)] = (request, token)
        self.proposals[token] = {
            "name": name, "base": base, "result": frozenset(result), "root":
            proposed["content_digest"], "changes": bool(added or removes), "sealed": None,
            "added": len(added), "removed": len(removes),
            "operation": request[0], "provenance": [
                (c, provenance[c][0], provenance[c][1]) for c in added]}

    @precondition(lambda self: any(p["sealed"] is None and p["changes"]
                                   and p["base"] == self.head(p["name"])
                                   for p in self.proposals.values()))
    @rule(data=st.data())
    def seal_fresh(self, data):
        """Seal a proposal made on the current head (the common, successful path)."""
        token = data.draw(st.sampled_from([
            t for t, p in self.proposals.items() if p["sealed"] is None and p["changes"]
            and p["base"] == self.head(p["name"])]))
        self.seal_token(self.proposals[token]["name"], token)

    @precondition(lambda self: self.proposals)
    @rule(data=st.data(), name=st.sampled_from(DATASETS),
          how=st.sampled_from(["known"] * 4 + ["stale", "sealed", "other_dataset", "unknown",
                                                "malformed"]),
          unknown=st.binary(min_size=16, max_size=16))
    def seal(self, data, name, how, unknown):
        mine = [t for t, p in self.proposals.items() if p["name"] == name]
        if how == "malformed":
            self.refused(lambda: self.repo.seal(name, "ct-" + unknown.hex()[:10]),
                         "INVALID_ARGUMENT")
            return
        theirs = [t for t in self.proposals if t not in mine]
        if how == "unknown" or not mine and not theirs:
            self.refused(lambda: self.repo.seal(name, "ct-" + unknown.hex()), "NOT_FOUND",
                         "PROPOSAL_NOT_FOUND")
            return
        if how == "other_dataset" and theirs or not mine:
            token = data.draw(st.sampled_from(theirs))
            self.refused(lambda: self.repo.seal(name, token), "NOT_FOUND",
                         "PROPOSAL_NOT_FOUND")
            return
        # prefer a stale or an already sealed token when asked for one and there is one
        wanted = {"stale": lambda p: p["sealed"] is None and p["changes"]
                  and p["base"] != self.head(name),
                  "sealed": lambda p: p["sealed"] is not None}.get(how, lambda p: True)
        pick = [t for t in mine if wanted(self.proposals[t])] or mine
        self.seal_token(name, data.draw(st.sampled_from(pick)))

    def seal_token(self, name, token):
        p = self.proposals[token]
        before = self.keys()
        if not p["changes"]:
            assert self.repo.seal(name, token) == (None, False)
            assert self.keys() == before
            return
        if p["sealed"] is not None:
            result = self.repo.seal(name, token)
            assert result == (self.versions[name][p["sealed"] - 1][1], True)
            assert self.keys() == before
            return
        if self.head(name) != p["base"]:
            err = self.refused(lambda: self.repo.seal(name, token), "FAILED_PRECONDITION",
                               "PROPOSAL_STALE")
            assert err.fields == {"base": p["base"], "head": self.head(name)}
            return
        v = self.repo.seal(name, token, author="sealer", message="m")
        assert v.already_sealed is False
        v = v.version
        assert (v.dataset, v.number, v.parent) == (name, p["base"] + 1, p["base"] or None)
        assert (v.item_count, v.content_digest, v.operation) == (
            len(p["result"]), p["root"], p["operation"])
        assert (v.added, v.removed, v.proposal, v.author) == (
            p["added"], p["removed"], token, "sealer")
        provenance = [(c, r, a, REVIEWER, self.reviewed_at[a]) for c, r, a in p["provenance"]]
        got = [(e.case_id, e.run_id, e.annotation_id, e.reviewer, e.reviewed_at)
               for e in self.repo.provenance(name, v.number)]
        assert got == provenance
        p["sealed"] = v.number
        self.versions[name].append((p["result"], v, got))

    # -- invariants ----------------------------------------------------------------------
    @invariant()
    def sealed_versions_never_change(self):
        for name, versions in self.versions.items():
            assert self.repo.head(name) == len(versions)  # numbers 1..n, no gaps
            for n, (ids, record, provenance) in enumerate(versions, 1):
                assert self.repo.version(name, n) == record
                page = self.repo.items(name, n, limit=500)
                assert page.items == sorted(ids) and not page.has_more
                assert [(e.case_id, e.run_id, e.annotation_id, e.reviewer, e.reviewed_at)
                        for e in self.repo.provenance(name, n)] == provenance
            if versions:  # every case of the head is readable, and is what its run froze to
                ids = versions[-1][0]
                cases = {c: self.repo.case(name, len(versions), c) for c in ids}
                for (run_id, withheld), cid in self.case_of.items():
                    if cid in cases:
                        got = msgspec.to_builtins(cases[cid])
                        want = expected_case(self.runs[run_id][1], withheld)
                        assert {k: got[k] for k in want} == want

    def teardown(self):
        report = cas.Repository(self.backend).fsck()
        assert report.ok, report.problems


TestLifecycle = LifecycleMachine.TestCase
TestLifecycle.settings = settings(max_examples=30, stateful_step_count=25, deadline=None,
                                  suppress_health_check=[HealthCheck.too_slow])
