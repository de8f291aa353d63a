"""A judge whose model ``--model`` swapped is shown with that model wherever it is named (issue 34,
point 8c): the run keeps the config's judge name (``mqm-mini``), so a table that says only
``mqm-mini`` for Sonnet's answers misleads. ``stats``, ``estimate`` and the viewer show the model
beside the name and name it whole in a note; the run's summary, ``show`` and ``status`` already
name the model of every judge, and keep doing so. The JSON and CSV keep the recorded names."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import quote

import pytest

from judge_engine.cli import main

REPO = Path(__file__).resolve().parents[2]
SONNET = "anthropic/claude-sonnet-4-5"
NOTE = f"note: --model: mqm-mini ran {SONNET}, not the model the config names; tables show it beside the name"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The literary_mt example run with --demo twice: as configured, and with --model Sonnet."""
    root = tmp_path_factory.mktemp("swapped")
    shutil.copytree(REPO / "examples" / "literary_mt", root / "lit", ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    config = str(root / "lit" / "config.yaml")
    assert main(["run", config, "--demo", "--no-live", "--output", str(root / "plain")]) == 0
    assert main(["run", config, "--demo", "--no-live", "--model", SONNET, "--output", str(root / "swapped")]) == 0
    return {"plain": (root / "plain" / "latest").resolve(), "swapped": (root / "swapped" / "latest").resolve(),
            "humans": root / "lit" / "humans.csv", "config": root / "lit" / "config.yaml"}


def _out(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str]) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    capsys.readouterr()
    main(args)
    captured = capsys.readouterr()
    return " ".join((captured.out + captured.err).split())  # the words, however the lines wrap


@pytest.mark.slow
def test_stats_shows_the_swapped_model_beside_the_judge_and_names_it_in_a_note(
        runs: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    out = _out(capsys, monkeypatch, ["stats", str(runs["swapped"]), "--json", str(tmp_path / "s.json")])
    assert NOTE in out
    assert "judge mqm-mini (claude-sonnet-4-5) temperature 0.000 n 20" in out  # the score distribution
    rows = json.loads((tmp_path / "s.json").read_text())["sections"]["distribution"]["rows"]
    assert [row["judge"] for row in rows] == ["mqm-mini"]  # the files keep the name the run records
    plain = _out(capsys, monkeypatch, ["stats", str(runs["plain"])])
    assert "--model" not in plain and "judge mqm-mini temperature 0.000" in plain


def test_estimate_shows_the_swapped_model_beside_the_judge(runs: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    out = _out(capsys, monkeypatch, ["estimate", str(runs["swapped"]), "--human-table", str(runs["humans"]),
                                     "--key", "id", "--human", "mqm"])
    assert NOTE in out and "group mqm-mini (claude-sonnet-4-5) labelled 20" in out


def test_the_viewer_labels_a_swapped_judge_with_its_model(runs: dict[str, Path]) -> None:
    from tests.viewer.conftest import ServedViewer

    with ServedViewer([runs["plain"], runs["swapped"]]) as viewer:
        overview = viewer.json("api/overview")
        assert [(j["label"], j["model"]) for j in overview["judges"]] == [
            ("mqm-mini", "openai/gpt-4o-mini"), ("mqm-mini (claude-sonnet-4-5)", SONNET)]
        assert overview["facets"]["judges"] == ["mqm-mini", "mqm-mini (claude-sonnet-4-5)"]  # the filter's
        tasks = viewer.json("api/tasks?size=50")["rows"]
        assert {row["judge"] for row in tasks} == {"mqm-mini", "mqm-mini (claude-sonnet-4-5)"}
        only = viewer.json("api/tasks?size=50&judge=" + quote("mqm-mini (claude-sonnet-4-5)"))["rows"]
        assert len(only) == 20 and {row["judge"] for row in only} == {"mqm-mini (claude-sonnet-4-5)"}


def test_show_and_status_name_the_model_that_ran(
        runs: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # These (and the run's summary) named every judge's model before; held here so that they keep doing so.
    show = _out(capsys, monkeypatch, ["show", str(runs["swapped"]), "--item", "lit-003"])
    assert f"judge mqm-mini ({SONNET}, gemba-mqm)" in show
    status = _out(capsys, monkeypatch, ["status", str(runs["swapped"])])
    assert f"mqm-mini (online, {SONNET})" in status
