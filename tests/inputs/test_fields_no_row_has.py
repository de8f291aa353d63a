"""A field the config reads that no row has is the config's mistake, said once (issue 34, point 1):
a custom template's typo names the template and its line and the nearest column, a column spelt
wrong in ``dataset.fields`` names the mapping, and neither is repeated for every row."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_engine.cli import main
from judge_engine.errors import ConfigError, DatasetError
from judge_engine.inputs.config import DatasetConfig
from judge_engine.inputs.dataset import Reader, scan
from tests.harness import example_copy, make_job


def _example(tmp_path: Path, change: Callable[[dict[str, Any]], Any] | None = None) -> Path:
    """A copy of the custom_rubric example, its config edited by ``change``."""
    return example_copy(tmp_path, "custom_rubric", change)


def _error(capsys: pytest.CaptureFixture[str], args: list[str]) -> list[str]:
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.splitlines()


def test_a_typo_in_a_template_file_names_the_file_and_line_once_with_the_nearest_column(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _example(tmp_path)
    rubric = config.parent / "rubric.j2"
    rubric.write_text(rubric.read_text(encoding="utf-8").replace("{{ question }}", "{{ questoin }}"), encoding="utf-8")
    items = config.parent / "items.jsonl"
    expected = [f"judge-engine: error: judges[helpful-json].protocol_options.template_file: {rubric}:12 reads the "
                f"variable 'questoin', but 'questoin' is not a field of any row of {items}; did you mean `question`?"]
    assert _error(capsys, ["run", str(config), "--demo", "--no-live"]) == expected
    assert _error(capsys, ["plan", str(config)]) == expected
    assert not (config.parent / "runs").exists()


def test_a_typo_in_an_inline_template_names_the_option_and_the_line_in_the_template(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def typo(data: dict[str, Any]) -> None:
        options = data["judges"][1]["protocol_options"]
        options["template"] = options["template"].replace("{{ response }}", "{{ respnse }}")

    config = _example(tmp_path, typo)
    assert _error(capsys, ["run", str(config), "--demo", "--no-live"]) == [
        "judge-engine: error: judges[helpful-regex].protocol_options.template, line 11, reads the variable "
        f"'respnse', but 'respnse' is not a field of any row of {config.parent / 'items.jsonl'}; "
        "did you mean `response`?"]


def test_protocols_check_names_the_template_once_not_the_first_row(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def typo(data: dict[str, Any]) -> None:
        for judge in data["judges"][1:]:
            judge["protocol_options"]["template"] = judge["protocol_options"]["template"].replace(
                "{{ reference }}", "{{ referenc }}")

    config = _example(tmp_path, typo)
    lines = _error(capsys, ["protocols", "--check", str(config)])
    first_row = f"the first row of {config.parent / 'items.jsonl'}; did you mean `reference`?"
    assert lines == [
        "judge-engine protocols --check: the dataset lacks what the config reads in 2 places:",
        f"  judges[helpful-regex].protocol_options.template, line 8, reads the variable 'referenc', but "
        f"'referenc' is not a field of {first_row}",
        f"  judges[helpful-marker].protocol_options.template, line 8, reads the variable 'referenc', but "
        f"'referenc' is not a field of {first_row}",
    ]


def test_a_column_spelt_wrong_in_the_field_mapping_is_named_once_with_the_nearest_column(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, None, items=10)
    data = yaml.safe_load(job.config.read_text())
    data["dataset"]["fields"]["source"] = "scr"
    job.config.write_text(yaml.safe_dump(data))
    assert _error(capsys, ["plan", str(job.config)]) == [
        "judge-engine: error: dataset.fields maps 'source' to the column 'scr', but 'scr' is not a column of any "
        f"row of {tmp_path / 'items.jsonl'}; did you mean `src`?"]


def test_a_protocols_field_no_row_has_is_said_once_with_the_rows_fields(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, None, items=30, judge={"protocol": "prometheus-absolute"})
    lines = _error(capsys, ["plan", str(job.config)])
    items = tmp_path / "items.jsonl"
    fields = "(the rows' fields: id, source, source_lang, target, target_lang)"  # the mapping's order
    assert lines == [
        "judge-engine: error: the dataset lacks what the config reads in 2 places:",
        f"  judges[mqm]: protocol prometheus-absolute reads the item field 'instruction', but 'instruction' is not "
        f"a field of any row of {items} {fields}; map a column to it: dataset.fields: {{instruction: <column>}}",
        f"  judges[mqm]: protocol prometheus-absolute reads the item field 'response', but 'response' is not "
        f"a field of any row of {items} {fields}; map a column to it: dataset.fields: {{response: <column>}}",
    ]


def test_a_protocols_field_left_out_of_the_mapping_is_offered_the_nearest_unmapped_column(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, None, items=30)
    data = yaml.safe_load(job.config.read_text())
    del data["dataset"]["fields"]["source"]
    job.config.write_text(yaml.safe_dump(data))
    assert _error(capsys, ["plan", str(job.config)]) == [
        "judge-engine: error: judges[mqm]: protocol gemba-mqm reads the item field 'source', but 'source' is not a "
        f"field of any row of {tmp_path / 'items.jsonl'}; to read the column 'src' as 'source', map it: "
        "dataset.fields: {source: src}"]


def test_a_field_some_rows_have_is_still_each_rows_problem(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_text('{"id": "a", "text": "one"}\n{"id": "b"}\n{"id": "c", "text": ""}\n', encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        scan(DatasetConfig(path=path), ["text"])
    assert str(caught.value).splitlines() == [
        f"{path}: 2 lines cannot be used:",
        f"  {path}:2: required field 'text' is missing or empty",
        f"  {path}:3: required field 'text' is missing or empty",
    ]


def test_a_limit_says_which_rows_were_read(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_text("".join(f'{{"id": "{n}", "txet": "x"}}\n' for n in range(5)), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        scan(DatasetConfig(path=path, limit=3), ["text"], readers={"text": [Reader("judges[j].x reads it")]})
    assert str(caught.value) == (f"judges[j].x reads it, but 'text' is not a field of any of the first 3 "
                                 f"rows of {path}; did you mean `txet`?")
