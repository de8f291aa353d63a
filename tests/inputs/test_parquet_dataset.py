"""Parquet datasets (issue 15, item 5): read in batches with the same field mapping as JSONL and
CSV, errors naming the row, and the same data judged the same way whatever the file."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from judge_engine.cli import main
from judge_engine.errors import ConfigError, DatasetError
from judge_engine.fake import FakeServer
from judge_engine.inputs.config import DatasetConfig
from judge_engine.inputs.dataset import iter_items, scan
from tests.harness import make_job, read_lines

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

FIELDS = {"id": "id", "source": "src", "target": "tgt", "source_lang": "src_lang", "target_lang": "tgt_lang"}


def to_parquet(jsonl: Path, path: Path, *, row_group_size: int | None = None) -> Path:
    rows = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines() if line.strip()]
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path


def use_dataset(config: Path, dataset: str, **extra: object) -> None:
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["dataset"].update(path=dataset, **extra)
    config.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")


def latest(run_dir: Path) -> dict[str, tuple[str, float | None, object]]:
    return {o["task_id"]: (o["status"], o["score"], o["verdict"]) for o in read_lines(run_dir / "outcomes.jsonl")}


def test_a_parquet_dataset_gives_the_same_items_as_its_jsonl(tmp_path: Path) -> None:
    job = make_job(tmp_path, None, items=7)
    parquet = to_parquet(tmp_path / "items.jsonl", tmp_path / "items.parquet", row_group_size=3)
    from_jsonl = list(iter_items(DatasetConfig(path=tmp_path / "items.jsonl", fields=FIELDS)))
    from_parquet = list(iter_items(DatasetConfig(path=parquet, fields=FIELDS)))
    assert from_parquet == from_jsonl
    assert from_parquet[0]["source_lang"] == "English"  # the field mapping and language names applied
    assert job.config.exists()


def test_the_same_data_in_parquet_makes_the_same_tasks_and_results(tmp_path: Path, fake_server: FakeServer) -> None:
    (tmp_path / "jsonl").mkdir()
    (tmp_path / "parquet").mkdir()
    jsonl_job = make_job(tmp_path / "jsonl", fake_server, items=12)
    parquet_job = make_job(tmp_path / "parquet", fake_server, items=12)
    to_parquet(parquet_job.dir / "items.jsonl", parquet_job.dir / "items.parquet", row_group_size=5)
    (parquet_job.dir / "items.jsonl").unlink()
    use_dataset(parquet_job.config, "items.parquet")
    assert main(["run", str(jsonl_job.config), "--no-live"]) == 0
    assert main(["run", str(parquet_job.config), "--no-live"]) == 0
    from_jsonl, from_parquet = latest(jsonl_job.only_run()), latest(parquet_job.only_run())
    assert len(from_parquet) == 12
    assert from_parquet == from_jsonl  # same task ids (content hashes of the items), same verdicts and scores


def test_format_parquet_reads_a_file_of_any_suffix(tmp_path: Path) -> None:
    make_job(tmp_path, None, items=3)
    odd = to_parquet(tmp_path / "items.jsonl", tmp_path / "items.data")
    with pytest.raises(DatasetError, match="cannot tell the format"):
        scan(DatasetConfig(path=odd, fields=FIELDS))
    assert scan(DatasetConfig(path=odd, format="parquet", fields=FIELDS)).items == 3


def test_a_null_cell_is_an_absent_field_and_values_are_json_ones(tmp_path: Path) -> None:
    table = pa.table({"id": ["a", "b"], "note": ["kept", None],
                      "when": pa.array([0, 86_400_000_000], type=pa.timestamp("us")),
                      "tags": pa.array([[("x", 1)], [("y", 2), ("z", 3)]], type=pa.map_(pa.string(), pa.int64())),
                      "words": [["a", "b"], []]})
    pq.write_table(table, tmp_path / "items.parquet")
    items = list(iter_items(DatasetConfig(path=tmp_path / "items.parquet")))
    assert items == [{"id": "a", "note": "kept", "when": "1970-01-01T00:00:00", "tags": {"x": 1}, "words": ["a", "b"]},
                     {"id": "b", "when": "1970-01-02T00:00:00", "tags": {"y": 2, "z": 3}, "words": []}]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda rows: rows[2].update(src=""), r"items.parquet:row 3: required field 'source' \(column 'src'\)"),
        (lambda rows: rows[3].update(id=rows[0]["id"]), r"items.parquet:row 4: duplicate id 'item-00000' \(first on row 1\)"),
        (lambda rows: rows[2].update(id=None), r"items.parquet:row 3: column 'id' \(mapped to 'id'\) is missing"),
    ],
)
def test_a_bad_parquet_row_exits_2_naming_the_row(tmp_path: Path, capsys, change, expected: str) -> None:
    job = make_job(tmp_path, None, items=5)
    rows = read_lines(tmp_path / "items.jsonl")
    change(rows)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "items.parquet")
    use_dataset(job.config, "items.parquet")
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert re.search(expected, err), err
    assert "Traceback" not in err
    assert not job.runs.exists()


def test_row_numbers_count_across_batches(tmp_path: Path) -> None:
    rows = [{"id": f"i{n}", "src": "a", "tgt": "b", "src_lang": "en", "tgt_lang": "de"} for n in range(1, 5001)]
    rows[4499]["tgt"] = " "
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "items.parquet", row_group_size=1000)
    with pytest.raises(DatasetError, match=r"items.parquet:row 4500: required field 'target'"):
        scan(DatasetConfig(path=tmp_path / "items.parquet", fields=FIELDS), required=["target"])


def test_a_file_that_is_not_parquet_is_a_dataset_error(tmp_path: Path) -> None:
    (tmp_path / "items.parquet").write_bytes(b"id,src\n1,a\n")
    with pytest.raises(DatasetError, match="items.parquet: not a readable Parquet file"):
        scan(DatasetConfig(path=tmp_path / "items.parquet"))


def test_without_pyarrow_a_parquet_dataset_says_which_extra(tmp_path: Path, monkeypatch, capsys) -> None:
    job = make_job(tmp_path, None, items=3)
    to_parquet(tmp_path / "items.jsonl", tmp_path / "items.parquet")
    use_dataset(job.config, "items.parquet")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ConfigError, match=r"reading a Parquet dataset needs pyarrow.*pip install 'judge-engine\[data\]'"):
        scan(DatasetConfig(path=tmp_path / "items.parquet"))
    assert main(["run", str(job.config), "--no-live"]) == 2
    assert "pip install 'judge-engine[data]'" in capsys.readouterr().err
