"""Column mappings: parsing `FIELD=COLUMN[,COLUMN...]`, the defaults, and their refusals."""

import pytest

import cas
from cas.interop.datasets.mapping import item, parse, resolve


def test_parse_takes_cli_strings_and_python_dicts():
    assert parse(["input=question,context", "output=answer"]) == {
        "input": ("question", "context"), "output": ("answer",)}
    assert parse({"input": "q", "id": "qid"}) == {"input": ("q",), "id": ("qid",)}
    assert parse(None) == {}


@pytest.mark.parametrize("specs, says", [
    (["question"], "no FIELD=COLUMN"), (["answer=a"], "'answer' is no field"),
    (["input="], "names no column"), (["id=a,b"], "id= names one column"),
    (["input=a", "input=b"], "mapped twice"), (7, "a dict or FIELD=COLUMN strings"),
])
def test_parse_refuses_naming_the_problem(specs, says):
    with pytest.raises(cas.InvalidArgument) as exc:
        parse(specs)
    assert exc.value.reason == "INVALID_MAPPING" and says in exc.value.message


def test_resolve_fills_in_the_defaults_and_checks_the_columns():
    assert resolve({}, ["input", "expected", "id", "x"], "t") == {
        "input": ("input",), "output": ("expected",), "id": ("id",)}
    assert resolve({}, ["input", "output", "expected"], "t")["output"] == ("output",)
    with pytest.raises(cas.InvalidArgument) as exc:
        resolve({"input": ("q",)}, ["question"], "t.parquet")
    assert exc.value.reason == "NO_SUCH_COLUMN" and exc.value.message == (
        "t.parquet: no column 'q' (mapped to input); its columns: question")
    with pytest.raises(cas.InvalidArgument) as exc:
        resolve({}, ["question", "answer"], "t")
    assert exc.value.reason == "NO_INPUT_COLUMN" and "--map input=COLUMN" in exc.value.message


def test_item_makes_an_object_of_several_columns_and_keeps_the_rest_as_extra():
    resolved = resolve({"input": ("q", "ctx"), "output": ("a",), "id": ("qid",)},
                       ["q", "ctx", "a", "qid", "title"], "t")
    it = item({"q": "who?", "ctx": "text", "a": ["x"], "qid": "5", "title": "T"}, resolved,
              "t row 0")
    assert (it.input, it.output, it.metadata, it.record, it.extra) == (
        {"q": "who?", "ctx": "text"}, ["x"], None, {"id": "5"}, {"title": "T"})
    with pytest.raises(cas.InvalidArgument) as exc:
        item({"a": 1}, resolve({}, ["input", "a"], "t"), "t line 4")
    assert exc.value.message == "t line 4: no 'input' (the input)"
