"""Hugging Face datasets saved to disk and Parquet files: through a column mapping, or, in the
layout of cas's own exports, back as exactly those cases."""

import sys

import pytest

import cas
from cas.interop import exports
from cas.interop.datasets import hf, import_dataset
from support.dataset_exports import NATIVE

datasets = pytest.importorskip("datasets")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

QA = {"question": ["Who wrote Dune?", "Boiling point of water?"],
      "answers": [{"text": ["Frank Herbert"]}, {"text": ["100 C"]}],
      "qid": ["q1", "q2"], "title": ["Dune", "Water"]}


def test_a_dataset_saved_to_disk_is_read_through_a_mapping(tmp_path):
    datasets.Dataset.from_dict(QA).save_to_disk(str(tmp_path / "qa"))
    items = hf.read_path(str(tmp_path / "qa"), "qa",
                         ["input=question", "output=answers", "id=qid"])
    assert [(i.where, i.input, i.output, i.record, i.extra) for i in items] == [
        ("qa row 0", "Who wrote Dune?", {"text": ["Frank Herbert"]}, {"id": "q1"},
         {"title": "Dune"}),
        ("qa row 1", "Boiling point of water?", {"text": ["100 C"]}, {"id": "q2"},
         {"title": "Water"})]


def test_a_parquet_file_is_read_and_several_columns_make_one_input(tmp_path):
    pq.write_table(pa.table(QA), str(tmp_path / "qa.parquet"))
    items = hf.read_path(str(tmp_path / "qa.parquet"), "qa.parquet",
                         {"input": ["question", "title"], "output": "answers"})
    assert items[0].input == {"question": "Who wrote Dune?", "title": "Dune"}
    assert items[0].extra == {"qid": "q1"}


def test_a_dataset_dict_is_refused_naming_its_splits(tmp_path):
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(QA),
                          "test": datasets.Dataset.from_dict(QA)}).save_to_disk(
        str(tmp_path / "dd"))
    with pytest.raises(cas.InvalidArgument) as exc:
        hf.read_path(str(tmp_path / "dd"), "dd", None)
    assert exc.value.reason == "DATASET_DICT" and exc.value.fields["splits"] == ["test", "train"]
    assert "dd/test, dd/train" in exc.value.message
    assert len(hf.read_path(str(tmp_path / "dd" / "train"), "train",
                            ["input=question"])) == 2


def test_times_become_text_and_binary_is_refused(tmp_path):
    import datetime
    t = pa.table({"input": ["a"], "at": [datetime.datetime(2026, 1, 2, 3, 4, 5)]})
    pq.write_table(t, str(tmp_path / "t.parquet"))
    [item] = hf.read_path(str(tmp_path / "t.parquet"), "t", None)
    assert item.extra == {"at": "2026-01-02T03:04:05"}
    pq.write_table(pa.table({"input": ["a"], "image": [b"\x89PNG"]}), str(tmp_path / "b.parquet"))
    with pytest.raises(cas.InvalidArgument) as exc:
        hf.read_path(str(tmp_path / "b.parquet"), "b.parquet", None)
    assert exc.value.reason == "BINARY_COLUMN" and exc.value.message.startswith("b.parquet row 0")


def test_what_is_neither_parquet_nor_saved_to_disk_is_refused(tmp_path):
    (tmp_path / "x.parquet").write_bytes(b"not parquet")
    with pytest.raises(cas.InvalidArgument) as exc:
        hf.read_path(str(tmp_path / "x.parquet"), "x.parquet", None)
    assert exc.value.reason == "NOT_THIS_FORMAT"
    (tmp_path / "empty").mkdir()
    with pytest.raises(cas.InvalidArgument) as exc:
        hf.read_path(str(tmp_path / "empty"), "empty", None)
    assert exc.value.reason == "NOT_THIS_FORMAT"


@pytest.mark.parametrize("to", ["hf", "parquet"])
def test_cas_own_exports_come_back_as_the_same_cases(mem, tmp_path, to):
    mem.create_dataset("native", admission="direct")
    mem.commit("native", base=None, add=NATIVE + [{**NATIVE[1], "person": "p-1"}])
    exports.export(mem, ("native", 1), to, str(tmp_path / "out"))
    r = import_dataset(mem, "hf", tmp_path / "out", "back")
    assert r.case_ids == sorted(i for i, _ in exports.cases(mem, ("native", 1)))
    assert mem.version("back", 1).content_digest == mem.version("native", 1).content_digest
    with pytest.raises(cas.InvalidArgument) as exc:
        import_dataset(mem, "hf", tmp_path / "out", "other", mapping=["input=input"])
    assert exc.value.reason == "INVALID_MAPPING"


def test_reading_needs_the_parquet_extra(tmp_path, monkeypatch):
    pq.write_table(pa.table(QA), str(tmp_path / "qa.parquet"))
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(cas.FailedPrecondition) as exc:
        hf.read_path(str(tmp_path / "qa.parquet"), "qa.parquet", None)
    assert exc.value.reason == "EXTRA_REQUIRED" and "pip install '.[parquet]'" in \
        exc.value.message


def test_an_import_from_a_plain_table_keeps_the_rest_and_reimports_as_unchanged(mem, tmp_path):
    datasets.Dataset.from_dict(QA).save_to_disk(str(tmp_path / "qa"))
    mapping = ["input=question", "output=answers", "id=qid"]
    r = import_dataset(mem, "hf", tmp_path / "qa", "qa", tenant="acme", mapping=mapping)
    assert r.unplaced == {"title": {"count": 2, "first": f"{tmp_path / 'qa'} row 0"}}
    case = mem.case("qa", 1, r.case_ids[0])
    assert case.metadata["from"]["hf"] == {"id": case.metadata["from"]["hf"]["id"],
                                           "extra": {"title": case.metadata["from"]["hf"][
                                               "extra"]["title"]}}
    again = import_dataset(mem, "hf", tmp_path / "qa", "qa", tenant="acme", mapping=mapping)
    assert again.status == "unchanged"
