"""The `inspect` importer: Inspect AI eval logs (JSON and the .eval zip) to runs."""

import io
import json
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cas.errors import InvalidArgument
from cas.interop.importers import convert, inspect_log
from cas.interop.importers.common import Options
from support.lifecycle import import_checked

OPTS = Options(tenant="t")


def _log(*samples, **eval_fields):
    return {"version": 2, "status": "success",
            "eval": {"eval_id": "E1", "task": "t1", "model": "m/x", **eval_fields},
            "stats": {"started_at": "2025-01-01T00:00:00+00:00"}, "samples": list(samples)}


def _sample(messages, **fields):
    return {"id": 1, "epoch": 1, "input": "q", "target": "a", "messages": messages, **fields}


def _tool_steps(run):
    return [s for s in run["steps"] if s["type"] == "tool_call"]


# -- the real samples --------------------------------------------------------------------------
def test_browser_log_imports(traces):
    data = (traces / "inspect-ai/inspect_ai__2025-05-12T20-27-36-04-00_browser.json").read_bytes()
    runs = convert(data, "inspect", source="browser.json", tenant="t")
    assert [r["run_id"] for r in runs] == ["inspect:ZB2vu5GNujYaBdPSReCeop:1:1"]
    run = runs[0]
    assert [s["type"] for s in run["steps"]] == ["message"] + ["message", "tool_call"] * 4 \
        + ["message"]
    calls = _tool_steps(run)
    assert [c["tool_name"] for c in calls] == ["web_browser_go"] + ["web_browser_click"] * 3
    assert calls[0]["arguments"] == {"url": "https://www.aisi.gov.uk/"}
    assert all("result" in c and "error" not in c for c in calls)
    assert run["input"].startswith("Use the web browser tool")
    assert run["output"].startswith("The AI Security Institute (AISI)")
    assert run["outcome"]["scores"]["includes"]["value"] == "C"
    assert run["started_at"] == "2025-05-12T20:27:36.997226-04:00"
    meta = run["metadata"]
    assert meta["model"] == "openai/gpt-4o-mini"
    assert meta["inspect.log"]["eval"]["task"] == "browser"
    assert meta["inspect.sample"]["uuid"] == "ATYFNjyWUz4mZ5Dgj6yd4f"
    assert meta["inspect.reductions"][0]["scorer"] == "includes"
    assert "attachment://" not in json.dumps([run["steps"], run["input"], run["output"]])
    assert "inspect.unresolved_attachments" not in meta
    _, result = import_checked(runs)
    assert result.new == ["inspect:ZB2vu5GNujYaBdPSReCeop:1:1"]


def test_eval_archive_imports_through_convert_bytes(traces):
    data = (traces / "inspect-ai/inspect_ai__log_message_deduplication.eval").read_bytes()
    assert inspect_log.detect_bytes(data)
    runs = inspect_log.convert_bytes(data, OPTS, "dedup.eval")
    assert [r["run_id"] for r in runs] == ["inspect:gsM63GyMBKgA3p4sHAMAfG:0:1"]
    run = runs[0]
    calls = _tool_steps(run)
    assert len(run["steps"]) == 12 and len(calls) == 5
    assert [c["call_id"] for c in calls] == [f"hardcoded_{i}" for i in range(5)]
    assert all(c["arguments"] == {"cmd": "ls"} and c["result"].startswith("bin\n")
               for c in calls)
    assert run["output"] == "done" and run["input"] == "Guess the number"
    assert run["outcome"] == {"scores": {"closeness_log": {"value": 0.0, "history": []}},
                              "target": "42.7"}
    assert run["metadata"]["model"] == "hardcoded/hardcoded"
    assert run["metadata"]["inspect.reductions"][0]["sample_id"] == "0"
    # Events keep their attachment references, and the table that resolves them is kept.
    assert "ddc588d90e1c276163c3a0eec966c6af" in run["metadata"]["inspect.sample"]["attachments"]
    import_checked(runs)


def test_eval_archive_through_the_registry(traces):
    """The registry hands the zip's raw bytes to the format (convert_bytes), named or detected:
    the same runs, marked with the format they came from."""
    data = (traces / "inspect-ai/inspect_ai__log_message_deduplication.eval").read_bytes()
    direct = inspect_log.convert_bytes(data, OPTS, "dedup.eval")
    for fmt in ("inspect", "auto"):
        runs = convert(data, fmt, source="dedup.eval", tenant="t")
        for run in runs:
            assert run["metadata"].pop("import") == {"format": "inspect", "container": None}
        assert runs == direct


def test_tool_call_error_log_imports_replies_without_calls(traces):
    data = (traces / "inspect-ai/inspect_ai__log_tool_call_error.json").read_bytes()
    runs = convert(data, "inspect", source="errors.json", tenant="t")
    assert [r["run_id"] for r in runs] == ["inspect:...:1:4"]
    steps = runs[0]["steps"]
    assert len(steps) == 11 and all(s["type"] == "tool_call" for s in steps)
    assert all(s["call_recorded"] is False and "arguments" not in s for s in steps)
    assert [s["error"]["type"] for s in steps] == [
        "parsing", "timeout", "parsing", "unicode_decode", "permission", "file_not_found",
        "is_a_directory", "limit", "approval", "unknown", "output_limit"]
    assert runs[0]["metadata"]["inspect.sample"] == {"files": [], "setup": "..."}
    import_checked(runs)


# -- the mapping -------------------------------------------------------------------------------
def test_replies_join_the_nearest_unanswered_call_and_unanswered_calls_stay_unrecorded():
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "function": "f", "arguments": {"n": 1}}]}
    again = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "function": "f", "arguments": {"n": 2}},
        {"id": "d", "function": "g", "arguments": "not json"}]}
    reply = {"role": "tool", "tool_call_id": "c", "function": "f", "content": "two",
             "error": {"type": "timeout", "message": "slow"}}
    run = inspect_log.convert([_log(_sample([call, again, reply]))], OPTS, "x")[0]
    first, second, third = _tool_steps(run)
    assert "result" not in first and "error" not in first
    assert second["result"] == "two" and second["error"] == {"type": "timeout",
                                                             "message": "slow"}
    assert "result" not in third
    assert third["arguments_raw"] == "not json" and "arguments" not in third
    import_checked([run])


def test_attachments_are_resolved_and_unknown_ones_named():
    sample = _sample([{"role": "user", "content": [
        {"type": "text", "text": "attachment://aa"},
        {"type": "image", "image": "attachment://bb"}]}],
        input="attachment://aa", attachments={"aa": "hello"})
    run = inspect_log.convert([_log(sample)], OPTS, "x")[0]
    assert run["input"] == "hello"
    assert run["steps"][0]["content"] == [{"type": "text", "text": "hello"},
                                          {"type": "image", "image": "attachment://bb"}]
    assert run["metadata"]["inspect.unresolved_attachments"] == ["bb"]


def test_output_completion_scores_and_error():
    sample = _sample([], output={"choices": [{"message": {"role": "assistant", "content": [
        {"type": "reasoning", "reasoning": "hm"}, {"type": "text", "text": "42"}]}}]},
        scores={"s": {"value": 1, "answer": "42", "explanation": "ok"}},
        error={"message": "boom", "traceback": "..."})
    run = inspect_log.convert([_log(sample)], OPTS, "x")[0]
    assert run["output"] == "42"
    assert run["outcome"]["scores"]["s"] == {"value": 1, "answer": "42", "explanation": "ok"}
    assert run["outcome"]["error"]["message"] == "boom"
    assert run["started_at"] == "2025-01-01T00:00:00+00:00"


def test_tenant_and_person_from_fields():
    sample = _sample([], metadata={"user": "u-1"})
    log = _log(sample, metadata={"team": "acme"})
    run = inspect_log.convert([log], Options(tenant_from="eval.metadata.team",
                                             person_from="metadata.user"), "x")[0]
    assert (run["tenant"], run["person"]) == ("acme", "u-1")


@pytest.mark.parametrize("value, message", [
    ({**_log(), "samples": []}, "holds no samples"),
    ({"version": 2, "status": "success", "eval": {"task": "t"}}, "holds no samples"),
    (_log({"id": 1, "messages": [{"content": "no role"}]}), "has no role"),
    (_log(_sample([{"role": "assistant", "tool_calls": [{"id": "x"}]}])), "`function`"),
    ({"messages": []}, "not an Inspect eval log"),
])
def test_refusals(value, message):
    with pytest.raises(InvalidArgument, match=message) as info:
        inspect_log.convert([value], OPTS, "x")
    assert info.value.reason == "NOT_THIS_FORMAT"


def _zip(members):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, value in members.items():
            archive.writestr(name, json.dumps(value))
    return out.getvalue()


def test_archive_refusals_and_unread_members():
    assert not inspect_log.detect_bytes(b"{}")
    with pytest.raises(InvalidArgument, match="without header.json"):
        inspect_log.convert_bytes(_zip({"x.json": {}}), OPTS, "a.eval")
    with pytest.raises(InvalidArgument, match="not a readable"):
        inspect_log.convert_bytes(b"PK\x03\x04garbage", OPTS, "a.eval")
    header = {k: v for k, v in _log().items() if k != "samples"}
    data = _zip({"header.json": header, "samples/1_epoch_1.json": _sample([]),
                 "summaries.json": [], "extra/notes.json": {}})
    run, = inspect_log.convert_bytes(data, OPTS, "a.eval")
    assert run["metadata"]["inspect.log"]["cas_unread_members"] == ["extra/notes.json"]
    with pytest.raises(InvalidArgument, match="holds no samples"):
        inspect_log.convert_bytes(_zip({"header.json": header}), OPTS, "a.eval")


# -- properties --------------------------------------------------------------------------------
ids = st.one_of(st.integers(0, 10**6), st.text("abcdefXYZ019-_", min_size=1, max_size=8))
text = st.text(max_size=20)
args = st.one_of(st.dictionaries(st.text("abc", min_size=1, max_size=3), st.integers(),
                                 max_size=3), text)


@st.composite
def conversations(draw):
    messages = [{"role": "user", "content": draw(text)}]
    for _ in range(draw(st.integers(0, 4))):
        calls = [{"id": draw(st.sampled_from(["a", "b", "c"])),
                  "function": draw(st.sampled_from(["bash", "python"])),
                  "arguments": draw(args)} for _ in range(draw(st.integers(0, 2)))]
        messages.append({"role": "assistant", "content": draw(text), "tool_calls": calls})
        for call in calls:
            if draw(st.booleans()):
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "function": call["function"], "content": draw(text),
                                 "error": draw(st.one_of(st.none(), st.just(
                                     {"type": "timeout", "message": "t"})))})
    return messages


@st.composite
def logs(draw):
    keys = draw(st.lists(st.tuples(ids, st.integers(1, 3)), min_size=1, max_size=3,
                         unique_by=lambda k: (str(k[0]), k[1])))
    samples = [_sample(draw(conversations()), id=i, epoch=e,
                       scores={"s": {"value": draw(st.integers(0, 1))}}) for i, e in keys]
    return _log(*samples)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(logs())
def test_every_generated_log_converts_deterministically_and_imports_once(log):
    data = json.dumps(log).encode()
    runs = convert(data, "inspect", source="gen.json", tenant="t")
    assert runs == convert(data, "inspect", source="gen.json", tenant="t")
    assert len(runs) == len(log["samples"])
    calls = sum(len(m.get("tool_calls") or []) for s in log["samples"] for m in s["messages"])
    assert sum(len(_tool_steps(r)) for r in runs) >= calls
    repo, first = import_checked(runs)
    assert len(first.new) == len(runs)
    again = repo.import_runs(convert(data, "inspect", source="gen.json", tenant="t"))
    assert again.new == [] and again.unchanged == len(runs)
