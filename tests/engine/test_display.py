"""What a person watching a run reads (issue 13, item 12): the live display at 80 columns, the
summary, and progress lines when there is no live display."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from judge_engine.cli import main
from judge_engine.cli.display import LiveDisplay, packed, summary
from judge_engine.config import JudgeConfig
from judge_engine.fake import FakeServer
from judge_engine.lanes import Lane
from judge_engine.plan import build_protocol
from judge_engine.providers import Endpoint
from judge_engine.records import Manifest
from judge_engine.runtime import JudgeRuntime
from judge_engine.session import JudgeTotals, RunResult
from tests.engine.conftest import make_job

NAMES = ("mqm-gpt-4o-mini", "prometheus-literary-sqm", "bws")


def _judges() -> list[JudgeRuntime]:
    judges = []
    for name in NAMES:
        config = JudgeConfig.model_validate({"name": name, "model": "openai/gpt-4o-mini", "protocol": "gemba-mqm"})
        judge = JudgeRuntime(config, build_protocol(config), Endpoint(config.model, None), [],
                             lane=Lane(name, config.limits), provider=None)  # type: ignore[arg-type]
        c = judge.counters
        c.total, c.done, c.in_flight, c.cost, c.unscored, c.retries, c.reasks = 1_000_000, 123_456, 64, 123.4567, 12, 345, 7
        judges.append(judge)
    return judges


def _render(renderable: object, width: int) -> str:
    console = Console(width=width, record=True, force_terminal=True, color_system=None)
    console.print(renderable)
    return console.export_text()


@pytest.mark.parametrize("width", [80, 100, 200])
def test_live_display_shows_every_figure_whole_at_any_width(width: int) -> None:
    text = _render(LiveDisplay(_judges(), console=Console(width=width, force_terminal=True)), width)
    assert "…" not in text
    assert all(len(line) <= width for line in text.splitlines())
    for name in NAMES:
        assert name in text
    assert text.count("123,456/1,000,000") == 3 and text.count("123.4567") == 3
    for figure in ("345", "64", "12"):
        assert figure in text


def test_packed_breaks_only_between_figures() -> None:
    parts = ["12,345 req/min", "1.23M tok/min", "0 429s", "345 retries", "7 re-asks", "0 cached", "12 unscored"]
    text = packed(parts, 40)
    assert all(len(line) <= 40 for line in text.splitlines())
    assert [p for line in text.splitlines() for p in line.strip().split(" · ")] == parts


def test_summary_at_80_columns_cuts_nothing() -> None:
    manifest = {
        "format": "judge-engine-run", "version": 1,
        "run_id": "literary_mt-demo-1a2b3c4d5e", "status": "completed",
        "counts": {"total": {"tasks": 1000, "scored": 990, "unscored": 10,
                             "unscored_by_code": {"transport_exhausted": 7, "unreadable": 3}},
                   "judges": {NAMES[0]: {"scored": 990, "unscored": 10}}},
        "spend": {"total": {"calls": 1000, "prompt_tokens": 1_234_567, "completion_tokens": 45_678, "cost": 0.22},
                  "judges": {NAMES[0]: {"calls": 1000, "prompt_tokens": 1_234_567, "completion_tokens": 45_678,
                                        "cost": 0.22}}},
        "sessions": [{}, {"judged": 899, "spend": {"total": {"calls": 853, "cost": 0.19}}}],
    }
    result = RunResult(Path("runs/x"), "completed", Manifest.from_dict(manifest),
                       [JudgeTotals(NAMES[0], "openai/gpt-4o-mini", "gemba-mqm", retries=345, reasks=7)],
                       elapsed_s=1234.0)
    text = _render(summary(result, width=80), 80)
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines())
    assert "transport_exhausted 7, unreadable 3" in text
    assert "this session: 899 tasks judged" in text and "whole run (2 sessions): 1,000 tasks" in text
    assert "$0.1900" in text and "$0.2200" in text


def test_without_a_live_display_progress_lines_are_printed_periodically(
        tmp_path: Path, fake_server: FakeServer, capsys) -> None:
    fake_server.update(latency_s=0.2)
    job = make_job(tmp_path, fake_server, items=30, judge={"limits": {"concurrency": 2}})
    assert main(["run", str(job.config), "--no-live", "--progress-every", "0.5"]) == 0
    err = capsys.readouterr().err
    progress = [line for line in err.splitlines() if line.startswith("[") and "] mqm: " in line]
    assert len(progress) >= 3  # ~3 s of work at one line per 0.5 s
    assert "/30 (" in progress[-1] and "req/min" in progress[-1] and "ETA" in progress[-1]
