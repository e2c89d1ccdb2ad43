"""Recorded runs (cas/repo/runs.py): validated JSON Lines import, all or nothing, and lookup by
run id.

Every refusal is checked to leave the repository's key listing unchanged: an import refuses
before it stores anything. Tests that touch storage run on both backends (`location`).
"""

from __future__ import annotations

import io
import json
import os
import re

import pytest

import cas
from cas.repo import runs as runs_mod
from cas.storage.backends.memory import MemoryBackend
from support.lifecycle import jsonl, keys, promote_and_seal, review, run_obj

pytestmark = pytest.mark.usefixtures("as_reviewer")


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
    assert repo.import_runs(io.BytesIO(jsonl(run_obj("r-9"), run_obj("r-9")))) == \
        (["r-9"], 0)


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
    from cas.format.records import RunImport, parse_record_file
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
                            r"indexes/(runs|reviews)/\d{10}-\d{10}\.[0-9a-f]{64}|"
                        r"persons/packs/[0-9a-f]{64}\.[0-9a-f]{64}|"
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


@pytest.mark.parametrize("step, fmt", [
    ({"type": "message", "role": "assistant", "content": None,
      "tool_calls": [{"id": "c1", "type": "function",
                      "function": {"name": "ls", "arguments": "{}"}}]}, "openai-chat"),
    ({"type": "message", "role": "tool", "tool_call_id": "c1", "content": "a b"}, "openai-chat"),
    ({"type": "message", "role": "assistant",
      "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]}, "anthropic"),
    ({"type": "message", "role": "user",
      "content": [{"type": "function_call_output", "call_id": "c1", "output": "x"}]},
     "openai-responses"),
])
def test_tool_calls_hidden_in_messages_are_imported_with_a_warning(repo, step, fmt):
    """A run in cas's schema whose message steps carry another format's tool calls imports as
    given (the schema is open), with a warning naming the format that reads them as steps."""
    result = repo.import_runs([run_obj("hidden", steps=[step])])
    assert result.new == ["hidden"]
    assert result.warnings == [f"run 'hidden': its message steps hold tool calls that are not "
                               f"tool_call steps; import the original with --format {fmt}"]
    assert repo.import_runs([run_obj("plain")]).warnings == []


# -- since: times compared as times ---------------------------------------------------------
def _since_scene(mem) -> None:
    """ny: 00:27 UTC on the 13th written in New York; utc: 22:00 UTC on the 12th; odd: a
    started_at that is not a time; none: no started_at; late: the 14th."""
    mem.import_runs([run_obj("ny", 1, started_at="2025-05-12T20:27:36-04:00")])
    mem.import_runs([run_obj("utc", 2, started_at="2025-05-12T22:00:00Z")])
    mem.import_runs([run_obj("odd", 3, started_at="last Tuesday")])
    mem.import_runs([run_obj("none", 4, started_at=None)])
    mem.import_runs([run_obj("late", 5, started_at="2025-05-14")])


def test_since_compares_started_at_as_a_time_whatever_its_offset(mem, as_reviewer):
    _since_scene(mem)
    page = mem.list_runs(since="2025-05-12T23:00:00Z")
    assert [s["run_id"] for s in page.runs] == ["ny", "late"]  # ny is 00:27 UTC on the 13th
    assert page.runs[0]["started_at"] == "2025-05-12T20:27:36-04:00"  # shown as stored
    assert [s["run_id"] for s in mem.list_runs(since="2025-05-12T19:00-04:00").runs] == [
        "ny", "late"]                                                  # 23:00 UTC again
    # a date alone is its midnight UTC; a time without an offset is UTC
    assert [s["run_id"] for s in mem.list_runs(since="2025-05-13").runs] == ["ny", "late"]
    assert [s["run_id"] for s in mem.list_runs(since="2025-05-12").runs] == [
        "ny", "utc", "late"]
    assert [s["run_id"] for s in mem.list_runs(since="2025-05-12T22:00:00.000001").runs] == [
        "ny", "late"]
    assert [s["run_id"] for s in mem.review_queue(since="2025-05-12T23:00:00Z").runs] == [
        "ny", "late"]


def test_a_run_whose_started_at_is_not_a_time_never_matches_since_and_is_named(mem,
                                                                              as_reviewer):
    _since_scene(mem)
    page = mem.list_runs(since="2025-05-01")
    assert ([s["run_id"] for s in page.runs], page.undated) == (["ny", "utc", "late"],
                                                                 ("odd", "none"))
    assert mem.list_runs().undated == ()  # without since, nothing is left out
    # paged: each undated run is named on exactly one page, the one whose stretch holds it
    first = mem.list_runs(since="2025-05-01", limit=2)
    assert ([s["run_id"] for s in first.runs], first.next_cursor, first.undated) == (
        ["ny", "utc"], "utc", ())
    second = mem.list_runs(since="2025-05-01", limit=2, cursor=first.next_cursor)
    assert ([s["run_id"] for s in second.runs], second.next_cursor, second.undated) == (
        ["late"], None, ("odd", "none"))


@pytest.mark.parametrize("since", ["yesterday", "5/1/2025", "2025-05-12T23", "2025-13-01"])
def test_since_that_is_not_a_time_is_refused_naming_the_accepted_forms(mem, since):
    for call in (mem.list_runs, mem.review_queue):
        with pytest.raises(cas.InvalidArgument) as info:
            call(since=since)
        assert info.value.reason == "INVALID_TIME"
        assert info.value.message.startswith(f"since: {since!r} is not a time; accepted: ")


# -- a file read as it is imported ----------------------------------------------------------
def test_a_file_larger_than_a_pack_streams_and_a_bad_last_line_makes_no_run_visible(
        repo, monkeypatch):
    import cas.storage.pack
    monkeypatch.setattr(cas.storage.pack, "PACK_MAX_BYTES", 32 << 10)  # packs flush mid-file
    monkeypatch.setattr(runs_mod, "BATCH", 16)  # (runs checked and packed 16 at a time)
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-old"))))
    packs = len([k for k in keys(repo) if k.startswith("packs/")])
    lines = [dict(run_obj(f"r-{i}", i), input=f"{i}:" + os.urandom(1500).hex())
             for i in range(300)]  # ~1 MB: over 30 packs' worth
    bad = b'{"run_id": "r-last", "tenant": "acme"}\n'
    with pytest.raises(cas.InvalidArgument) as info:
        repo.import_runs(io.BytesIO(jsonl(*lines) + bad))
    assert info.value.message == "input line 301: $.steps: required field is missing"
    assert info.value.fields == {"line": 301}
    assert repo.runs() == ["r-old"]  # nothing visible: no import record was written
    assert not [k for k in keys(repo) if k.startswith("runs/imports/0000000002")]
    written = len([k for k in keys(repo) if k.startswith("packs/")]) - packs
    report = repo.fsck()
    assert report.ok
    if getattr(type(repo.backend), "ROUND_TRIPS", False):
        # spooled to local files (S3): the batch's packs are written at its end, so a refusal
        # leaves none behind
        assert (written, report.unreferenced) == (0, 0)
    else:  # the packs filled before the last line stay, unreferenced: a notice, not damage
        assert written > 2 and report.unreferenced > 0
    # the same file without its bad line: every run, one import record, fsck clean
    result = repo.import_runs(io.BytesIO(jsonl(*lines)))
    assert result == (sorted(r["run_id"] for r in lines), 0)
    assert repo.run("r-299").input == lines[299]["input"]
    assert repo.fsck().ok


def test_runs_from_any_iterable_of_dicts_are_imported_as_they_come(mem):
    seen = []

    def runs():
        for i in range(3):
            seen.append(i)
            yield run_obj(f"g-{i}", i)

    heard = []
    result = mem.import_runs(runs(), progress=lambda *a: heard.append(a))
    assert result == (["g-0", "g-1", "g-2"], 0) and seen == [0, 1, 2]
    assert heard == [("encoding runs", 0, 0)]  # (how many is not known ahead)
    # a refusal in the middle of the iterable stores none of them
    bad = (dict(run_obj(f"h-{i}", i), steps=None if i == 2 else []) for i in range(4))
    with pytest.raises(cas.InvalidArgument) as info:
        mem.import_runs(bad)
    assert info.value.message == "$[2].steps: must be a list of steps"
    assert mem.runs() == ["g-0", "g-1", "g-2"]
    # lines as bytes from an iterable are JSON Lines, as before
    assert mem.import_runs(iter(jsonl(run_obj("l-1")).splitlines(True))) == (["l-1"], 0)


def test_a_run_conflicting_in_a_later_batch_is_refused_before_the_record(mem):
    mem.import_runs([run_obj("c-700")])
    runs = [run_obj(f"c-{i}") for i in range(runs_mod.BATCH + 300)]
    runs[700] = dict(runs[700], input="other")
    with pytest.raises(cas.FailedPrecondition) as info:
        mem.import_runs(iter(runs))
    assert info.value.reason == "RUN_ID_CONFLICT"
    assert mem.runs() == ["c-700"]
    runs[1] = dict(runs[1], input="twice")
    with pytest.raises(cas.InvalidArgument, match="'c-3' appears twice"):
        mem.import_runs(iter(runs[:5] + [dict(runs[3], input="again")]))
