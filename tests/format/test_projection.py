"""The run-to-case projection (cas/format/projection.py): a run frozen into a case, less the
content classes a policy withholds, each of which the case names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cas.format.cases import encode_case
from cas.format.projection import CONTENT_CLASSES, IMPORT_KEY, freeze, withhold
from cas.format.records import Case, RunRecord

CALL = {"type": "tool_call", "tool_name": "sql", "call_id": "c1", "arguments": {"q": "x"},
        "result": "1 row"}


def a_run(**over) -> RunRecord:
    fields = dict(run_id="r-1", tenant="acme", person="p-1", started_at="2024-01-01T00:00:00Z",
                  input="question", output="answer", outcome={"status": "success"},
                  steps=[{"type": "message", "role": "user", "content": "hi"}, CALL],
                  metadata={"model": "m"})
    return RunRecord(**{**fields, **over})


def test_a_run_frozen_with_nothing_withheld_keeps_its_content():
    run = a_run()
    case = freeze(run, [])
    assert (case.run_id, case.tenant, case.person, case.started_at) == \
        ("r-1", "acme", "p-1", "2024-01-01T00:00:00Z")
    assert (case.input, case.output, case.outcome, case.metadata) == \
        ("question", "answer", {"status": "success"}, {"model": "m"})
    assert case.steps == run.steps and case.withheld == []


def test_the_same_run_is_the_same_case():
    assert encode_case(freeze(a_run(), ["input"])).case_id == \
        encode_case(freeze(a_run(), ["input"])).case_id
    assert encode_case(freeze(a_run(), ["input"])).case_id != \
        encode_case(freeze(a_run(), [])).case_id


@pytest.mark.parametrize("withheld, gone", [
    (["input"], {"input": None}), (["output"], {"output": None}),
    (["metadata"], {"metadata": {}}),
    (["tool_arguments"], {"steps": [{"type": "message", "role": "user", "content": "hi"},
                                    {k: v for k, v in CALL.items() if k != "arguments"}]}),
    (["tool_results"], {"steps": [{"type": "message", "role": "user", "content": "hi"},
                                  {k: v for k, v in CALL.items() if k != "result"}]}),
])
def test_each_content_class_leaves_out_its_fields_and_is_named(withheld, gone):
    case = freeze(a_run(), withheld)
    kept = freeze(a_run(), [])
    for field, value in gone.items():
        assert getattr(case, field) == value
    for field in {"input", "output", "metadata", "steps"} - set(gone):
        assert getattr(case, field) == getattr(kept, field)
    assert case.withheld == withheld


def test_withheld_arguments_and_results_take_what_importers_kept_of_them():
    """Arguments kept verbatim because they were not JSON, and the rest of a recorded reply,
    are the same content classes as `arguments` and `result`: never copied when withheld."""
    step = {"type": "tool_call", "tool_name": "sql", "call_id": "c1",
            "arguments_raw": "SELECT * FROM cards WHERE pan = '4111", "arguments_error": "x",
            "result": "1 row", "error": "none", "reply": {"name": "sql", "content": "1 row"}}
    case = freeze(a_run(steps=[step]), ["tool_arguments", "tool_results"])
    assert case.steps == [{"type": "tool_call", "tool_name": "sql", "call_id": "c1"}]


def test_the_metadata_of_an_imported_run_is_withheld_with_any_of_its_content():
    """A converted run's metadata may repeat its conversation (a format's own records): a
    policy that withholds any content class withholds it too, and says so."""
    imported = a_run(metadata={IMPORT_KEY: {"format": "openai-chat"}, "echo": "question"})
    case = freeze(imported, ["input"])
    assert (case.input, case.metadata, case.withheld) == (None, {}, ["input", "metadata"])
    assert freeze(imported, []).metadata == imported.metadata  # nothing withheld: all kept
    assert freeze(a_run(), ["input"]).metadata == {"model": "m"}  # not imported: kept


@given(st.sets(st.sampled_from(CONTENT_CLASSES)), st.sets(st.sampled_from(CONTENT_CLASSES)))
def test_withholding_twice_withholds_the_union(first, second):
    case = freeze(a_run(), sorted(first))
    again = withhold(case, sorted(second))
    assert again == freeze(a_run(), sorted(first | second))
    assert again.withheld == sorted(first | second)


def test_withhold_never_changes_the_case_it_is_given():
    case = Case(run_id="r", input="x", steps=[dict(CALL)])
    withhold(case, list(CONTENT_CLASSES))
    assert case.input == "x" and case.steps == [CALL]
