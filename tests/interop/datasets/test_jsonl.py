"""Plain JSON Lines through a mapping, and cas's own JSON Lines export read back."""

import io
import json

import pytest

import cas
from cas.interop import exports
from cas.interop.datasets import jsonl as reader
from support.dataset_exports import NATIVE, jsonl


def test_plain_lines_use_the_default_columns():
    items = reader.read(jsonl([{"input": "q", "expected": "a", "id": 7, "note": "n"},
                               {"input": "q2"}]), "f.jsonl")
    assert [(i.where, i.input, i.output, i.record, i.extra) for i in items] == [
        ("f.jsonl line 1", "q", "a", {"id": 7}, {"note": "n"}),
        ("f.jsonl line 2", "q2", None, {}, {})]


def test_a_mapping_names_other_columns_and_a_missing_input_is_refused():
    data = jsonl([{"prompt": "p", "completion": "c"}, {"completion": "c2"}])
    with pytest.raises(cas.InvalidArgument) as exc:
        reader.read(data, "f.jsonl", ["input=prompt", "output=completion"])
    assert exc.value.message == "f.jsonl line 2: no 'prompt' (the input)"
    with pytest.raises(cas.InvalidArgument) as exc:
        reader.read(data, "f.jsonl")
    assert exc.value.reason == "NO_INPUT_COLUMN"
    assert reader.read(jsonl([{"prompt": "p"}]), "f", ["input=prompt"])[0].input == "p"


def test_a_cas_export_is_read_as_its_cases(mem):
    mem.create_dataset("native", admission="direct")
    mem.commit("native", base=None, add=NATIVE)
    out = io.BytesIO()
    exports.export(mem, ("native", 1), "jsonl", out)
    items = reader.read(out.getvalue(), "v.jsonl")
    assert [cas.encode_case(i.case).case_id for i in items] == \
        [i for i, _ in exports.cases(mem, ("native", 1))]
    with pytest.raises(cas.InvalidArgument) as exc:
        reader.read(out.getvalue(), "v.jsonl", ["input=x"])
    assert exc.value.reason == "INVALID_MAPPING"
    newer = out.getvalue().replace(b'{"format":1,', b'{"format":2,', 1)
    with pytest.raises(cas.InvalidArgument) as exc:
        reader.read(newer, "v.jsonl")
    assert exc.value.reason == "UNSUPPORTED_FORMAT"
    broken = out.getvalue() + json.dumps({"case": 1, "case_id": "x"}).encode() + b"\n"
    with pytest.raises(cas.InvalidArgument) as exc:
        reader.read(broken, "v.jsonl")
    assert exc.value.message.startswith(f"v.jsonl line {len(NATIVE) + 2}: ")


def test_one_json_value_for_the_whole_file_is_refused():
    with pytest.raises(cas.InvalidArgument) as exc:
        reader.read(b'[{"input": 1}]', "f.json")
    assert exc.value.reason == "NOT_THIS_FORMAT"
