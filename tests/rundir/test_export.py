"""A run as a table (issue 15, item 4): ``judge-engine export`` and ``judge_engine.load_run``.

The expected values are read from ``outcomes.jsonl`` with the standard library's json (the last
line per task), never through the code under test."""

from __future__ import annotations

import csv
import json
import math
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main
from judge_engine.rundir.store import latest_outcome_lines, latest_outcome_records
from judge_engine.util.languages import language_name
from tests.harness import example_copy

REPO = Path(__file__).resolve().parents[2]
RUN_V1 = REPO / "tests" / "fixtures" / "run_v1"
OUTCOME_FIELDS = ["task_id", "item_id", "judge", "protocol", "protocol_version", "model", "temperature", "repeat",
                  "variant", "status", "score", "reason", "reason_code", "attempts", "reasks", "cache_hits", "cost",
                  "latency_s", "at"]


def latest_lines(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Task id -> its last outcome line, in the order of those lines."""
    latest: dict[str, dict[str, Any]] = {}
    for line in (run_dir / "outcomes.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        latest.pop(record["task_id"], None)
        latest[record["task_id"]] = record
    return latest


def in_dataset_order(run_dir: Path, lines: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``lines`` as an export writes them: by the item's row (a line without one, written before
    rows were, after those with one, in the order its item first appears in the file), then the
    judge in the config's order, the temperature, the repeat and the variant."""
    first: dict[str, int] = {}
    for line in (run_dir / "outcomes.jsonl").read_text(encoding="utf-8").splitlines():
        first.setdefault(json.loads(line)["item_id"], len(first))
    judges = [judge["name"] for judge in json.loads((run_dir / "run.json").read_text())["config"]["judges"]]

    def key(line: dict[str, Any]) -> tuple[Any, ...]:
        row = line.get("row")
        return ((0, row) if row is not None else (1, first[line["item_id"]]), judges.index(line["judge"]),
                line["temperature"], line["repeat"], len(line["variant"]), line["variant"])

    return dict(sorted(lines.items(), key=lambda pair: key(pair[1])))


# --- the streaming reader of the latest outcomes -----------------------------------------------


def test_latest_outcome_lines_stream_what_latest_outcome_records_hold() -> None:
    lines = latest_outcome_lines(RUN_V1)
    assert lines.lines == 22 and lines.tasks == 16  # 6 tasks judged again by resume --retry
    assert list(lines) == list(latest_outcome_records(RUN_V1).values())
    assert list(lines) == list(lines)  # iterated again, the same rows
    assert [r.task_id for r in lines] == list(latest_lines(RUN_V1))


def test_lines_appended_after_the_index_are_left_out(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUN_V1, run)
    lines = latest_outcome_lines(run)
    before = list(lines)
    first = (run / "outcomes.jsonl").read_text(encoding="utf-8").splitlines()[0]
    with (run / "outcomes.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(first + "\n")  # a later line for a task that already has its latest
    assert list(lines) == before
    assert latest_outcome_lines(run).tasks == 16


def test_an_empty_run_has_no_latest_outcomes(tmp_path: Path) -> None:
    (tmp_path / "outcomes.jsonl").write_text("", encoding="utf-8")
    assert latest_outcome_lines(tmp_path).tasks == 0 and list(latest_outcome_lines(tmp_path)) == []
    one = (RUN_V1 / "outcomes.jsonl").read_text(encoding="utf-8").splitlines()[0]
    (tmp_path / "outcomes.jsonl").write_text(one + "\n", encoding="utf-8")
    assert [r.task_id for r in latest_outcome_lines(tmp_path)] == [json.loads(one)["task_id"]]



# --- export: one row per task ------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Demo runs of two examples: GEMBA-MQM (one judge) and BWS (two judges, rotations as
    variants, a score per candidate), plus the format-1 fixture (retried tasks, unscored ones)."""
    root = tmp_path_factory.mktemp("examples")
    runs = {"run_v1": RUN_V1}
    for name in ("literary_mt", "bws"):
        assert main(["run", str(example_copy(root, name)), "--demo", "--no-live"]) == 0
        runs[name] = (root / name / "runs" / "latest").resolve()
    return runs


def _same(cell: Any, expected: Any) -> bool:
    """A table cell against the outcome line's value (null, empty text and NaN are one)."""
    empty = cell is None or cell == "" or (isinstance(cell, float) and math.isnan(cell))
    if expected is None or expected == "":
        return empty
    if empty:
        return False
    if isinstance(expected, bool):
        return cell in (True, "True", "true")
    if isinstance(expected, int):
        return int(cell) == expected  # exact, for a 64-bit seed too
    if isinstance(expected, float):
        return float(cell) == expected
    return str(cell) == expected


def read_export(path: Path, fmt: str) -> list[dict[str, Any]]:
    """An export read back with pandas, as a user would (CSV as text: pandas would guess a
    type for "1"; JSONL as its JSON values), one dict per row."""
    pd = pytest.importorskip("pandas")
    if fmt == "csv":
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    elif fmt == "jsonl":
        frame = pd.read_json(path, lines=True, dtype=False, precise_float=True)  # its default parser rounds
    else:
        pytest.importorskip("pyarrow")
        frame = pd.read_parquet(path)
    records: list[dict[str, Any]] = frame.astype(object).to_dict("records")
    return records


def check_rows(rows: list[dict[str, Any]], run_dir: Path) -> None:
    """Every row equals the task's last outcome line, field by field, in dataset order."""
    expected = in_dataset_order(run_dir, latest_lines(run_dir))
    assert [row["task_id"] for row in rows] == list(expected)
    for row, line in zip(rows, expected.values(), strict=True):
        for name in OUTCOME_FIELDS:
            assert _same(row[name], line.get(name)), (name, row[name], line.get(name))
        for column in (c for c in row if c.startswith("scores.")):
            assert _same(row[column], line["scores"].get(column.removeprefix("scores."))), column
        verdict = line["verdict"] or {}
        for column in (c for c in row if c.startswith("verdict.") and c.count(".") == 1):
            value, cell = verdict.get(column.removeprefix("verdict.")), row[column]
            if isinstance(value, list):
                assert json.loads(cell) == value and int(row[f"{column}.count"]) == len(value)
            else:
                assert _same(cell, value), (column, cell, value)
        if "verdict.errors.minor" in row and line["verdict"] is not None:
            severities = [e["severity"] for e in line["verdict"]["errors"]]
            assert [int(row[f"verdict.errors.{s}"]) for s in ("critical", "major", "minor")] == [
                severities.count("critical"), severities.count("major"), severities.count("minor")]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("run", ["literary_mt", "bws", "run_v1"])
def test_export_round_trips_through_pandas(demo_runs: dict[str, Path], tmp_path: Path, run: str, fmt: str) -> None:
    pytest.importorskip("pandas")
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    out = tmp_path / f"outcomes.{fmt}"
    assert main(["export", str(demo_runs[run]), "--format", fmt, "--output", str(out)]) == 0
    check_rows(read_export(out, fmt), demo_runs[run])


def test_the_columns_are_named_as_documented(demo_runs: dict[str, Path], tmp_path: Path) -> None:
    for run, extra in [
        ("literary_mt", ["verdict.errors", "verdict.errors.count", "verdict.errors.critical", "verdict.errors.major",
                         "verdict.errors.minor"]),
        ("bws", ["scores.human", "scores.sysA", "scores.sysB", "scores.sysC", "scores.sysD", "verdict.best",
                 "verdict.worst", "verdict.best_id", "verdict.worst_id", "verdict.order", "verdict.order.count",
                 "verdict.seed"]),
    ]:
        assert main(["export", str(demo_runs[run]), "-o", str(tmp_path / f"{run}.csv")]) == 0
        header = (tmp_path / f"{run}.csv").read_text(encoding="utf-8").splitlines()[0]
        assert header.split(",") == ["synthetic", *OUTCOME_FIELDS, *extra]  # a demo run's rows say so


def test_a_task_judged_again_counts_once_with_its_last_line(demo_runs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(demo_runs["literary_mt"], run, ignore=shutil.ignore_patterns("export"))
    first = json.loads((run / "outcomes.jsonl").read_text(encoding="utf-8").splitlines()[0])
    again = {**first, "score": -7.0, "verdict": {"errors": []}, "at": "2026-12-01T00:00:00.000+00:00"}
    with (run / "outcomes.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(again) + "\n")
    assert main(["export", str(run), "--format", "jsonl", "-o", str(tmp_path / "o.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text(encoding="utf-8").splitlines()]
    again_rows = [r for r in rows if r["task_id"] == first["task_id"]]
    assert len(rows) == 20 and len(again_rows) == 1 and again_rows[0]["score"] == -7.0
    assert again_rows[0]["verdict.errors.count"] == 0
    assert rows.index(again_rows[0]) == first["row"]  # in its item's place, not where its line is


def test_export_goes_to_the_run_directory_by_default_and_to_standard_output(
        demo_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    shutil.copytree(demo_runs["literary_mt"], run, ignore=shutil.ignore_patterns("export"))
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["export", str(run)]) == 0
    out, err = capsys.readouterr()
    # The path in the run directory on a line of its own, whole (display.path_line), whatever the width
    assert out.strip() == f"wrote 20 rows x 25 columns: {run / 'export' / 'outcomes.csv'}"
    assert "DEMO RUN" in err  # a demo run says its answers are synthetic
    assert main(["export", str(run), "--format", "jsonl", "-o", "-"]) == 0
    lines = capsys.readouterr().out.splitlines()
    with (run / "export" / "outcomes.csv").open(encoding="utf-8", newline="") as handle:
        in_csv = [row["task_id"] for row in csv.DictReader(handle)]
    # the same rows in the same order (the outcome lines', which is the order tasks finished in)
    assert len(lines) == 20 and [json.loads(line)["task_id"] for line in lines] == in_csv
    assert all(json.loads(line)["synthetic"] is True for line in lines)  # the file outlives the terminal's note
    assert sorted(p.name for p in (run / "export").iterdir()) == ["outcomes.csv"]  # no partial file left


def test_export_never_overwrites_the_runs_own_record(demo_runs: dict[str, Path], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    shutil.copytree(demo_runs["literary_mt"], run)
    before = (run / "outcomes.jsonl").read_bytes()
    assert main(["export", str(run), "--format", "jsonl", "-o", str(run / "outcomes.jsonl")]) == 2
    assert "the run's own record" in capsys.readouterr().err
    assert (run / "outcomes.jsonl").read_bytes() == before


def test_export_of_a_directory_that_is_no_run_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(tmp_path)]) == 2
    assert "not a judge-engine run directory" in capsys.readouterr().err


def test_without_pyarrow_parquet_says_how_to_install_it_and_csv_still_works(
        demo_runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    assert main(["export", str(demo_runs["literary_mt"]), "--format", "parquet", "-o", str(tmp_path / "o.parquet")]) == 2
    assert "pip install 'judge-engine[data]'" in capsys.readouterr().err
    assert not (tmp_path / "o.parquet").exists()
    assert main(["export", str(demo_runs["literary_mt"]), "-o", str(tmp_path / "o.csv")]) == 0


# --- --wide: one row per item --------------------------------------------------------------------


def test_wide_has_a_column_per_judge_temperature_repeat(demo_runs: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    out = tmp_path / "wide.parquet"
    assert main(["export", str(RUN_V1), "--wide", "--format", "parquet", "-o", str(out)]) == 0
    rows = {row["item_id"]: row for row in read_export(out, "parquet")}
    keys = ["mqm|0.0|0", "mqm|0.0|1", "mqm|1.0|0", "mqm|1.0|1"]  # temperatures [0.0, 1.0], 2 repeats
    assert list(rows["lit-001"]) == ["item_id"] + [c for k in keys for c in (k, f"{k}.status")]
    assert list(rows) == ["lit-001", "lit-002", "lit-003", "lit-004"]
    # From tests/fixtures/run_v1/outcomes.jsonl by hand (the last line of each task):
    assert rows["lit-001"]["mqm|0.0|1"] == -1.0 and rows["lit-001"]["mqm|1.0|1"] == 0.0
    assert math.isnan(rows["lit-001"]["mqm|0.0|0"]) and rows["lit-001"]["mqm|0.0|0.status"] == "unscored"
    assert rows["lit-002"]["mqm|0.0|0"] == -25.0 and rows["lit-002"]["mqm|1.0|0"] == -25.0
    assert rows["lit-002"]["mqm|1.0|1.status"] == "unscored" and rows["lit-004"]["mqm|1.0|1.status"] == "scored"
    assert all(rows["lit-004"][k] == -25.0 for k in keys)


def test_wide_names_variants_and_score_breakdowns(demo_runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "wide.csv"
    assert main(["export", str(demo_runs["bws"]), "--wide", "-o", str(out)]) == 0
    rows = read_export(out, "csv")
    assert len(rows) == 10  # one per item
    keys = [f"bws-mini|0.0|0|order{n}" for n in range(5)] + ["bws-mini-json|0.0|0|order0"]
    systems = ["human", "sysA", "sysB", "sysC", "sysD"]
    assert list(rows[0]) == ["synthetic", "item_id"] + [c for k in keys for c in (k, f"{k}.status", *(f"{k}.scores.{s}" for s in systems))]
    for line in latest_lines(demo_runs["bws"]).values():
        row = next(r for r in rows if r["item_id"] == line["item_id"])
        key = f"{line['judge']}|0.0|0|{line['variant']}"
        assert row[f"{key}.status"] == "scored" and row[key] == ""  # BWS scores candidates, not the item
        assert all(float(row[f"{key}.scores.{s}"]) == v for s, v in line["scores"].items())


# --- --with-items ----------------------------------------------------------------------------------


def items_by_id(path: Path) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def test_with_items_joins_each_rows_item_through_the_field_mapping(demo_runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    assert main(["export", str(demo_runs["literary_mt"]), "--with-items", "--format", "jsonl", "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    items = items_by_id(demo_runs["literary_mt"].parents[1] / "items.jsonl")
    assert [c for c in rows[0] if c.startswith("item.")] == ["item.source", "item.source_lang", "item.target",
                                                             "item.target_lang"]
    for row in rows:
        item = items[row["item_id"]]
        assert (row["item.source"], row["item.target"]) == (item["src"], item["tgt"])  # mapped from src, tgt
        assert row["item.source_lang"] == language_name(item["src_lang"])  # "en" -> "English", as the prompt said


def test_with_items_in_the_wide_form_and_nested_fields_as_json(demo_runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "o.csv"
    assert main(["export", str(demo_runs["bws"]), "--wide", "--with-items", "-o", str(out)]) == 0
    rows = read_export(out, "csv")
    items = items_by_id(demo_runs["bws"].parents[1] / "items.jsonl")
    assert sorted(c for c in rows[0] if c.startswith("item.")) == [
        "item.candidates", "item.source", "item.source_lang", "item.target_lang"]
    for row in rows:
        assert json.loads(row["item.candidates"]) == items[row["item_id"]]["candidates"]
        assert row["item.source"] == items[row["item_id"]]["source"]


def _edit_manifest(run: Path, **changes: Any) -> None:
    manifest = json.loads((run / "run.json").read_text(encoding="utf-8"))
    for key, value in changes.items():
        if key == "dataset_path":
            manifest["config"]["dataset"]["path"] = value
        else:
            manifest[key] = value
    (run / "run.json").write_text(json.dumps(manifest), encoding="utf-8")


def test_with_items_says_when_the_dataset_is_gone(demo_runs: dict[str, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    shutil.copytree(demo_runs["literary_mt"], run, ignore=shutil.ignore_patterns("export"))
    _edit_manifest(run, dataset_path=str(tmp_path / "deleted" / "items.jsonl"), config_path_from_run="")
    assert main(["export", str(run), "--with-items", "-o", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert f"the run's dataset {tmp_path / 'deleted' / 'items.jsonl'} is gone" in err and "--items PATH" in err
    assert not (tmp_path / "o.csv").exists()
    items = demo_runs["literary_mt"].parents[1] / "items.jsonl"
    assert main(["export", str(run), "--items", str(items), "-o", str(tmp_path / "o.csv")]) == 0
    assert "item.source" in (tmp_path / "o.csv").read_text(encoding="utf-8").splitlines()[0]


def test_with_items_finds_the_dataset_of_a_project_that_moved(demo_runs: dict[str, Path], tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(demo_runs["literary_mt"].parents[1], moved, symlinks=True)
    run = moved / "runs" / demo_runs["literary_mt"].name
    _edit_manifest(run, dataset_path="/nowhere/literary_mt/items.jsonl", config_path="/nowhere/literary_mt/config.yaml")
    assert main(["export", str(run), "--with-items", "-o", str(tmp_path / "o.csv")]) == 0
    assert "item.source" in (tmp_path / "o.csv").read_text(encoding="utf-8").splitlines()[0]


def test_the_previous_format_exports_with_its_items(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o.csv"
    assert main(["export", str(RUN_V1), "--items", str(RUN_V1 / "items.jsonl"), "-o", str(out)]) == 0
    rows = read_export(out, "csv")
    check_rows(rows, RUN_V1)
    items = items_by_id(RUN_V1 / "items.jsonl")
    assert all(row["item.target"] == items[row["item_id"]]["tgt"] for row in rows)


# --- load_run ----------------------------------------------------------------------------------------


def test_a_demo_runs_frame_and_parquet_say_they_are_synthetic(demo_runs: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    pq = pytest.importorskip("pyarrow.parquet")
    import judge_engine

    assert "synthetic" in judge_engine.load_run(demo_runs["literary_mt"]).attrs["judge_engine.synthetic"]
    assert "judge_engine.synthetic" not in judge_engine.load_run(RUN_V1).attrs
    assert main(["export", str(demo_runs["literary_mt"]), "--format", "parquet", "-o", str(tmp_path / "o.parquet")]) == 0
    assert b"judge_engine.synthetic" in pq.read_schema(tmp_path / "o.parquet").metadata


def test_load_run_has_the_exports_values_and_proper_dtypes(demo_runs: dict[str, Path], tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    import judge_engine

    frame = judge_engine.load_run(RUN_V1)
    rows = frame.astype(object).to_dict("records")
    for row, at in zip(rows, frame["at"], strict=True):
        row["at"] = at.isoformat(timespec="milliseconds")  # a timestamp now, the line's text before
    check_rows(rows, RUN_V1)
    for name in ("judge", "status", "reason_code", "protocol", "model", "variant"):
        assert isinstance(frame[name].dtype, pd.CategoricalDtype), name
    assert list(frame["status"].cat.categories) == ["scored", "unscored"]
    assert "transport_exhausted" in frame["reason_code"].cat.categories  # every code, so counts line up across runs
    assert frame["score"].dtype == "float64" and frame["score"].isna().sum() == 6  # the 6 tasks still unscored
    assert frame["score"].isna().eq(frame["status"] == "unscored").all()
    assert str(frame["verdict.errors.count"].dtype) == "Int64" and frame["verdict.errors.count"].isna().sum() == 6
    assert frame["repeat"].dtype == "int64" and frame["temperature"].dtype == "float64"
    assert str(frame["at"].dtype).startswith("datetime64") and str(frame["at"].dt.tz) == "UTC"
    assert frame["reason_code"].value_counts()["unreadable"] == 6


def test_load_run_equals_the_parquet_export(demo_runs: dict[str, Path], tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    import judge_engine

    out = tmp_path / "o.parquet"
    assert main(["export", str(demo_runs["bws"]), "--format", "parquet", "-o", str(out)]) == 0
    frame, exported = judge_engine.load_run(demo_runs["bws"]), pd.read_parquet(out)
    assert list(frame.columns) == list(exported.columns) and len(frame) == 60
    assert frame["verdict.seed"].tolist() == exported["verdict.seed"].tolist()  # 64-bit seeds, every digit
    for column in frame.columns.drop("at"):
        assert frame[column].astype(object).fillna("").tolist() == exported[column].astype(object).fillna("").tolist()


def test_load_run_transcripts_has_one_row_per_transcript_line(demo_runs: dict[str, Path]) -> None:
    pytest.importorskip("pandas")
    import judge_engine

    for run in (demo_runs["literary_mt"], RUN_V1):
        lines = [json.loads(line) for line in (run / "transcripts.jsonl").read_text(encoding="utf-8").splitlines()]
        frame = judge_engine.load_run(run, transcripts=True)
        assert len(frame) == len(lines)
        assert list(frame["task_id"]) == [line["task_id"] for line in lines]
        assert list(frame["content"]) == [line["response"]["content"] for line in lines]
        assert list(frame["usage.prompt_tokens"]) == [line["usage"]["prompt_tokens"] for line in lines]
        assert list(frame["attempt"]) == [line["attempt"] for line in lines]
        assert list(frame["cache_hit"]) == [line["cache_hit"] for line in lines]  # run_v1's retries: from the cache
        assert set(frame["event"]) == {"attempt"} and str(frame["event"].dtype) == "category"
        assert "messages" not in " ".join(frame.columns)  # the request is not in it: show or iter_transcript


def test_load_run_with_items_is_the_export_with_items(demo_runs: dict[str, Path], tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    import judge_engine

    run = demo_runs["literary_mt"]
    out = tmp_path / "o.parquet"
    assert main(["export", str(run), "--with-items", "--format", "parquet", "-o", str(out)]) == 0
    frame, exported = judge_engine.load_run(run, with_items=True), pd.read_parquet(out)
    assert list(frame.columns) == list(exported.columns)
    assert [c for c in frame.columns if c.startswith("item.")] == ["item.source", "item.source_lang", "item.target",
                                                                   "item.target_lang"]
    items = items_by_id(run.parents[1] / "items.jsonl")
    for row in frame.to_dict("records"):
        item = items[row["item_id"]]
        assert (row["item.source"], row["item.target"]) == (item["src"], item["tgt"])  # mapped from src, tgt
        assert row["item.source_lang"] == language_name(item["src_lang"])
    assert "item.source" not in judge_engine.load_run(run).columns  # only when asked


def test_load_run_with_items_of_a_moved_dataset_and_what_export_would_say(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    import judge_engine
    from judge_engine.errors import ConfigError, DatasetError

    with pytest.raises(DatasetError, match=r"give its new place with --items PATH"):
        judge_engine.load_run(RUN_V1, with_items=True)  # the fixture's dataset path is another machine's
    frame = judge_engine.load_run(RUN_V1, items=RUN_V1 / "items.jsonl")  # items= implies with_items
    items = items_by_id(RUN_V1 / "items.jsonl")
    assert all(frame["item.target"] == frame["item_id"].map(lambda i: items[i]["tgt"]))
    fewer = tmp_path / "items.jsonl"
    fewer.write_text("".join(json.dumps(row) + "\n" for row in list(items.values())[1:]), encoding="utf-8")
    with pytest.warns(UserWarning) as caught:
        frame = judge_engine.load_run(str(RUN_V1), items=str(fewer))
    missing = int((frame["item_id"] == next(iter(items))).sum())
    assert missing and frame["item.target"].isna().sum() == missing
    said = [str(w.message) for w in caught]
    assert any("changed since the run was made" in m for m in said)
    assert f"{missing} rows name an item that is not in the dataset: their item.* columns are empty" in said
    with pytest.raises(ConfigError, match="not to transcripts=True's attempts"):
        judge_engine.load_run(RUN_V1, transcripts=True, with_items=True)


def test_load_run_without_pandas_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import judge_engine
    from judge_engine.errors import ConfigError

    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ConfigError, match=r"pip install 'judge-engine\[data\]'"):
        judge_engine.load_run(RUN_V1)


def test_load_run_transcripts_keeps_errors_and_protocol_errors(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    import judge_engine
    from judge_engine.rundir.records import AttemptRecord, ProtocolErrorRecord

    run = tmp_path / "run"
    shutil.copytree(RUN_V1, run)
    failed = AttemptRecord(task_id="b2:t", judge="mqm", item_id="lit-001", attempt=1, reask=0,
                           at="2026-01-01T00:00:00+00:00", request={"messages": []}, latency_s=0.5,
                           error={"kind": "transient", "status": 503, "message": "busy"})
    crashed = ProtocolErrorRecord(task_id="b2:t", judge="mqm", item_id="lit-001", at="2026-01-01T00:00:01+00:00",
                                  stage="parse", error="KeyError: 'x'", traceback="Traceback ...")
    (run / "transcripts.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in (failed, crashed)),
                                           encoding="utf-8")
    frame = judge_engine.load_run(run, transcripts=True)
    first, second = frame.to_dict("records")
    assert (first["event"], first["error.kind"], first["error.status"], first["error.message"]) == (
        "attempt", "transient", 503, "busy")
    assert math.isnan(first["cost"]) and frame["usage.prompt_tokens"].isna().all()
    assert (second["event"], second["stage"], second["error.message"], second["traceback"]) == (
        "protocol_error", "parse", "KeyError: 'x'", "Traceback ...")
    assert frame["attempt"].isna().tolist() == [False, True] and frame["cache_hit"].tolist() == [False, False]


# --- dataset order (issue 34, point 8b) ------------------------------------------------------------


def _dataset_order(run_dir: Path, items: Path, lines: dict[str, dict[str, Any]]) -> list[str]:
    """The task ids of ``lines`` in dataset order, worked out here: the item's line in the
    dataset, then the judge in the config's order, the temperature, the repeat, the variant."""
    position = {json.loads(line)["id"]: n for n, line in enumerate(items.read_text(encoding="utf-8").splitlines())}
    judges = [judge["name"] for judge in json.loads((run_dir / "run.json").read_text())["config"]["judges"]]
    return sorted(lines, key=lambda t: (position[lines[t]["item_id"]], judges.index(lines[t]["judge"]),
                                        lines[t]["temperature"], lines[t]["repeat"],
                                        len(lines[t]["variant"]), lines[t]["variant"]))


@pytest.fixture(scope="module")
def finished_backwards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A demo run of two judges (the second first in the alphabet) at two temperatures, twice
    each, whose outcome lines are then put in the opposite order (tasks finishing last-first),
    with one task judged again at the end: the run directory and its dataset."""
    root = tmp_path_factory.mktemp("backwards")
    shutil.copytree(REPO / "examples" / "literary_mt", root / "lit", ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    config = root / "lit" / "config.yaml"
    text = config.read_text(encoding="utf-8")
    judge = text[text.index("  - name: mqm-mini"):text.index("output:")]
    second = judge.replace("name: mqm-mini", "name: alpha").replace("gpt-4o-mini", "gpt-4o")
    text = text.replace(judge, judge + second).replace("temperatures: [0.0]", "temperatures: [0.7, 0.0]")
    config.write_text(text.replace("repeats: 1", "repeats: 2"), encoding="utf-8")
    assert main(["run", str(config), "--demo", "--no-live"]) == 0
    run = (root / "lit" / "runs" / "latest").resolve()
    lines = (run / "outcomes.jsonl").read_text(encoding="utf-8").splitlines()
    again = {**json.loads(lines[3]), "score": -7.0, "at": "2026-12-01T00:00:00.000+00:00"}
    (run / "outcomes.jsonl").write_text("\n".join([*reversed(lines), json.dumps(again)]) + "\n", encoding="utf-8")
    (run / "index.sqlite").unlink(missing_ok=True)
    return run, root / "lit" / "items.jsonl"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_writes_rows_in_dataset_order_whatever_order_tasks_finished(
        finished_backwards: tuple[Path, Path], tmp_path: Path, fmt: str) -> None:
    run, items = finished_backwards
    out = tmp_path / f"o.{fmt}"
    assert main(["export", str(run), "--format", fmt, "-o", str(out)]) == 0
    rows = read_export(out, fmt)
    lines = latest_lines(run)
    assert len(rows) == 20 * 2 * 2 * 2
    assert [row["task_id"] for row in rows] == _dataset_order(run, items, lines)
    assert [(r["item_id"], r["judge"], float(r["temperature"]), int(r["repeat"])) for r in rows[:5]] == [
        ("lit-001", "mqm-mini", 0.0, 0), ("lit-001", "mqm-mini", 0.0, 1), ("lit-001", "mqm-mini", 0.7, 0),
        ("lit-001", "mqm-mini", 0.7, 1), ("lit-001", "alpha", 0.0, 0)]
    retried = json.loads((run / "outcomes.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert [float(r["score"]) for r in rows if r["task_id"] == retried["task_id"]] == [-7.0]  # its last line


@pytest.mark.slow
def test_the_wide_export_and_load_run_follow_the_dataset_too(finished_backwards: tuple[Path, Path],
                                                            tmp_path: Path) -> None:
    import judge_engine

    run, items = finished_backwards
    assert main(["export", str(run), "--wide", "-o", str(tmp_path / "wide.csv")]) == 0
    ids = [json.loads(line)["id"] for line in items.read_text(encoding="utf-8").splitlines()]
    wide = read_export(tmp_path / "wide.csv", "csv")
    assert [row["item_id"] for row in wide] == ids
    assert [c for c in wide[0] if c.endswith(".status")][:3] == [
        "mqm-mini|0.0|0.status", "mqm-mini|0.0|1.status", "mqm-mini|0.7|0.status"]
    pytest.importorskip("pandas")
    frame = judge_engine.load_run(run)
    assert list(frame["task_id"]) == _dataset_order(run, items, latest_lines(run))


def test_variants_come_in_their_order_after_the_repeat(demo_runs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "bws"
    shutil.copytree(demo_runs["bws"], run, ignore=shutil.ignore_patterns("export"))
    lines = (run / "outcomes.jsonl").read_text(encoding="utf-8").splitlines()
    (run / "outcomes.jsonl").write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")
    assert main(["export", str(run), "--format", "jsonl", "-o", str(tmp_path / "o.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text(encoding="utf-8").splitlines()]
    items = REPO / "examples" / "bws" / "items.jsonl"
    assert [row["task_id"] for row in rows] == _dataset_order(run, items, latest_lines(run))
    first = [(r["judge"], r["variant"]) for r in rows if r["item_id"] == rows[0]["item_id"]]
    assert first == [("bws-mini", f"order{n}") for n in range(5)] + [("bws-mini-json", "order0")]
