"""A cascade names the guarantee it runs under (issue 36): ``plan``, the run's summary and
``status``, ``stats`` and the viewer's card say ``stage guarantee`` or ``cascade guarantee`` from
the thresholds file, and a config's ``cascade.guarantee`` refuses a file calibrated under the
other one (exit 2, the key named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeServer
from judge_engine.rundir.store import read_manifest
from judge_engine.viewer.cascade import cascade_card
from tests.trust.cascade.conftest import cascade_job, write_thresholds_file

THRESHOLDS = {"cheap": None, "mid": 0.9, "strong": 0.99}


def test_a_cascade_guarantee_is_named_by_plan_status_stats_and_the_viewer(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "240")
    job = cascade_job(tmp_path, fake_server, thresholds=THRESHOLDS, items=12, cascade={"guarantee": "cascade"})
    write_thresholds_file(tmp_path / "thresholds.json", list(THRESHOLDS), THRESHOLDS, guarantee="cascade")
    assert main(["plan", str(job.config)]) == 0
    plan = capsys.readouterr().out
    assert "cascade: agreement with humans >= 80% on answered items" in " ".join(plan.split())
    assert "(cascade guarantee: its thresholds tested together)" in " ".join(plan.split())
    assert "cheap: not asked (the thresholds that passed the cascade's test give it none)" in plan
    assert main(["run", str(job.config), "--no-live"]) == 0
    assert "cascade (cascade guarantee): 12 items" in " ".join(capsys.readouterr().err.split())
    run = job.only_run()
    assert main(["status", str(run)]) == 0
    assert "cascade (cascade guarantee): 12 items" in " ".join(capsys.readouterr().out.split())
    assert main(["show", str(run), "--judge", "cascade", "--limit", "1"]) == 0
    assert "cascade (cascade guarantee): " in " ".join(capsys.readouterr().out.split())
    assert main(["stats", str(run)]) == 0
    assert "cascade guarantee: its thresholds tested together" in " ".join(capsys.readouterr().out.split())
    section = read_manifest(run).cascade or {}
    assert section["guarantee_kind"] == "cascade"
    card = cascade_card(section, None, lambda judge: None)
    assert "(cascade guarantee: its thresholds tested together)" in card["guarantee"]


def test_a_config_refuses_thresholds_calibrated_under_the_other_guarantee(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = cascade_job(tmp_path, None, thresholds=THRESHOLDS, items=6, cascade={"guarantee": "cascade"})
    assert main(["plan", str(job.config)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "cascade.guarantee: cascade, but" in err and "was calibrated under the stage guarantee" in err
    assert "calibrate again with --guarantee cascade" in err
