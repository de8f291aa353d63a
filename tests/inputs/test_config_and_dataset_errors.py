"""Bad input gets a clear error naming the key or line, exit code 2, and no run directory."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from judge_engine.cli import main
from judge_engine.errors import ConfigError
from judge_engine.inputs.config import load_config
from judge_engine.inputs.dataset import language_name
from tests.harness import make_job


def _edit(config: Path, change) -> None:
    data = yaml.safe_load(config.read_text())
    change(data)
    config.write_text(yaml.safe_dump(data))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["judges"][0].update(temprature=[0.0]), "judges[mqm].temprature: unknown key; did you mean `temperatures`?"),
        (lambda d: d["judges"][0]["limits"].update(rpm="fast"), "judges[mqm].limits.rpm"),
        (lambda d: d["judges"][0].update(repeats=0), "judges[mqm].repeats"),
        (lambda d: d.pop("dataset"), "dataset: required key is missing"),
        (lambda d: d["judges"][0].update(protocol="gemba-xyz"), "config.yaml: judges[mqm].protocol: unknown protocol 'gemba-xyz'"),
        (lambda d: d["judges"][0].update(protocol_options={"parsr": "strict"}), "protocol_options.parsr"),
        (lambda d: d["judges"].append(dict(d["judges"][0])), "judge names must be unique"),
        (lambda d: d["judges"][0].update(temperatures=[0.0, 0.0]), "temperatures must not repeat"),
    ],
)
def test_bad_config_exits_2_naming_key_and_file(tmp_path: Path, capsys, change, expected: str) -> None:
    job = make_job(tmp_path, None, items=3)
    _edit(job.config, change)
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert "Traceback" not in err
    assert not job.runs.exists()


@pytest.mark.parametrize("judges", [[], None, {}], ids=["empty list", "key with no value", "empty mapping"])
def test_a_config_without_judges_says_so_in_the_house_words(tmp_path: Path, capsys, judges: object) -> None:
    """``judges: []`` (or ``judges:`` left empty) names the key and says what a judge needs, not
    pydantic's "List should have at least 1 item after validation"."""
    job = make_job(tmp_path, None, items=3)
    _edit(job.config, lambda d: d.update(judges=judges))
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert f"{job.config}: judges: no judge: a config needs at least one (each with a name, a model and a " \
           "protocol)" in err
    assert "List should" not in err and "valid list" not in err and "Traceback" not in err
    assert not job.runs.exists()


def test_one_judge_written_without_its_dash_is_named_as_such(tmp_path: Path, capsys) -> None:
    """``judges:`` holding one mapping (the ``- `` forgotten): pydantic said "Input should be a
    valid list", which does not say what to write."""
    job = make_job(tmp_path, None, items=3)
    _edit(job.config, lambda d: d.update(judges=d["judges"][0]))
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert f"{job.config}: judges: a list of judges, each beginning with '- name: ...' (this is one mapping)" in err
    assert "valid list" not in err and "Traceback" not in err


def test_config_error_names_the_file(tmp_path: Path) -> None:
    job = make_job(tmp_path, None, items=3)
    _edit(job.config, lambda d: d.update(extra_section=1))
    with pytest.raises(ConfigError, match=rf"{job.config}: extra_section: unknown key"):
        load_config(job.config)


def test_invalid_yaml_names_the_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("dataset:\n  path: items.jsonl\njudges: [\n  - name: x\n")
    assert main(["plan", str(path)]) == 2
    assert "invalid YAML" in capsys.readouterr().err


def test_secret_in_an_unknown_key_is_not_echoed(tmp_path: Path, capsys) -> None:
    job = make_job(tmp_path, None, items=3)
    _edit(job.config, lambda d: d["judges"][0].update(apikey="sk-" + "leakyLEAKY0123456789"))
    assert main(["run", str(job.config), "--no-live"]) == 2
    assert "sk-leaky" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"id": "x", "src": "a", "tgt": "b", "src_lang": "en"',
         "items.jsonl:3: not valid JSON: unexpected end of data at the end of the line (is it cut off?)"),
        ('["not", "an", "object"]', "items.jsonl:3: each line must be a JSON object"),
        ('{"id": "y", "src": "a", "src_lang": "en", "tgt_lang": "de"}', "items.jsonl:3: column 'tgt' (mapped to 'target') is missing"),
        ('{"id": "", "src": "a", "tgt": "b", "src_lang": "en", "tgt_lang": "de"}', "items.jsonl:3: required field 'id'"),
        ('{"id": "item-00000", "src": "a", "tgt": "b", "src_lang": "en", "tgt_lang": "de"}', "items.jsonl:3: duplicate id 'item-00000' (first on line 1)"),
    ],
)
def test_bad_dataset_line_exits_2_naming_the_line(tmp_path: Path, capsys, line: str, expected: str) -> None:
    job = make_job(tmp_path, None, items=4)
    lines = (tmp_path / "items.jsonl").read_text().splitlines()
    lines[2] = line
    (tmp_path / "items.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["run", str(job.config), "--no-live"]) == 2
    assert expected in capsys.readouterr().err
    assert not job.runs.exists()


def test_a_value_given_on_the_command_line_is_blamed_on_its_flag_not_the_file(tmp_path: Path, capsys) -> None:
    job = make_job(tmp_path, None, items=3)
    assert main(["plan", str(job.config), "--limit", "-3"]) == 2
    err = capsys.readouterr().err
    assert "--limit (dataset.limit)" in err and "config.yaml" not in err


@pytest.mark.parametrize("bad_row", ['b,"unterminated,hallo,en,de', 'b,hallo,hallo,en,"de'],
                         ids=["middle column", "last column"])
def test_a_csv_quote_left_open_names_the_line_it_opened_on(tmp_path: Path, capsys, bad_row: str) -> None:
    """An unclosed quote swallows the lines after it (in the last column, silently: the row is
    not even short of values): the error names where the row began and what probably happened."""
    job = make_job(tmp_path, None, items=3)
    (tmp_path / "items.csv").write_text(f'id,src,tgt,src_lang,tgt_lang\na,hello,hallo,en,de\n{bad_row}\n'
                                        'c,x,y,en,de\nd,x,y,en,de\n', encoding="utf-8")
    _edit(job.config, lambda d: d["dataset"].update(path="items.csv"))
    assert main(["plan", str(job.config)]) == 2
    err = capsys.readouterr().err
    assert "items.csv:3: " in err and "closing quote missing?" in err


def test_a_quoted_value_over_several_lines_is_one_value(tmp_path: Path) -> None:
    from judge_engine.inputs.config import DatasetConfig
    from judge_engine.inputs.dataset import iter_items

    path = tmp_path / "items.csv"
    path.write_text('id,src,tgt,sl,tl\n1,"two\nlines",b,en,de\n2,a,b,en,de\n', encoding="utf-8")
    config = DatasetConfig(path=path, fields={"source": "src", "target": "tgt", "source_lang": "sl", "target_lang": "tl"})
    assert [i["source"] for i in iter_items(config, ("source", "target"))] == ["two\nlines", "a"]


def test_csv_dataset_and_language_codes(tmp_path: Path) -> None:
    from judge_engine.inputs.config import DatasetConfig
    from judge_engine.inputs.dataset import iter_items

    path = tmp_path / "items.csv"
    path.write_text('id,src,tgt,sl,tl\n1,"Hello, world",Hallo Welt,en,de\n2,你好,Hi,zh,en\n', encoding="utf-8")
    config = DatasetConfig(path=path, fields={"source": "src", "target": "tgt", "source_lang": "sl", "target_lang": "tl"})
    items = list(iter_items(config, ("source", "target")))
    assert [i["source_lang"] for i in items] == ["English", "Chinese"]
    assert [i["target_lang"] for i in items] == ["German", "English"]
    assert items[0]["source"] == "Hello, world"


def test_language_names() -> None:
    assert language_name("de") == "German"
    assert language_name("zh") == "Chinese"
    assert language_name("fa") == "Persian"
    assert language_name("German") == "German"
    assert language_name("Klingon") == "Klingon"


def test_paths_are_relative_to_the_config_file(tmp_path: Path) -> None:
    job = make_job(tmp_path, None, items=2)
    config = load_config(job.config)
    assert config.dataset.path == tmp_path / "items.jsonl"
    assert config.output.dir == tmp_path / "runs"
    assert config.cache.dir == tmp_path / "cache"


def test_model_override_applies_to_every_judge(tmp_path: Path) -> None:
    job = make_job(tmp_path, None, items=2)
    config = load_config(job.config, overrides={"model": "anthropic/claude-sonnet-4-5"})
    assert {j.model for j in config.judges} == {"anthropic/claude-sonnet-4-5"}
    assert all("api_key" not in judge for judge in config.manifest_view()["judges"])
