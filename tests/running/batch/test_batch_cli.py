"""What a person reads of batch mode: plan's two costs, the live view's batches at 80 columns,
and a config error before anything is sent."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from rich.console import Console

from judge_engine.cli import main
from judge_engine.cli.display import LiveDisplay, RateMeter, batch_lines, progress_lines
from judge_engine.fake import FakeServer
from judge_engine.running.batch.board import BatchBoard, ChunkView
from tests.cli.test_display import _judges, _render
from tests.running.batch.conftest import batch_job


def _board() -> BatchBoard:
    board = BatchBoard(api="openai", waiting=1_234, online=56, note="mqm-gpt-4o-mini-r1-00007: refused by the "
                       "provider's quota; sent again later, once a batch of this judge has ended")
    now = time.time()
    for number in range(9):
        board.chunks.append(ChunkView(f"mqm-gpt-4o-mini-r1-{number:05d}", 1, 50_000, "in_progress",
                                      f"batch_{number}", completed=12_345, failed=678, expired=9,
                                      submitted_at=now - 3 * 3600))
    board.chunks.append(ChunkView("mqm-gpt-4o-mini-r1-00099", 1, 50_000, "collected", "batch_x"))
    return board


@pytest.mark.parametrize("width", [80, 120])
def test_the_live_view_shows_each_open_batch_whole_at_any_width(width: int) -> None:
    judges = _judges()
    judges[0].batch = _board()
    text = _render(LiveDisplay(judges, console=Console(width=width, force_terminal=True)), width)
    assert all(len(line) <= width for line in text.splitlines())
    assert "…" not in text
    assert "9 open batches (openai)" in text and "1,234 waiting for the next round" in text
    assert text.count("in_progress") == 6 and "... 3 more" in text  # six shown, the rest counted
    assert "12,345/50,000" in text and "678 failed" in text and "age 3h00m" in text
    assert all(f"batch_{n}" in text for n in range(6))  # the provider's id beside each
    assert "r1-00099" not in text  # collected: not open
    lines = batch_lines(judges, width=width)
    assert lines and all(len(line) < width for line in lines)


def test_progress_lines_without_a_terminal_carry_the_batches_too() -> None:
    judges = _judges()
    judges[1].batch = _board()
    lines = progress_lines(judges, {j.config.name: RateMeter() for j in judges}, 60.0)
    assert any("open batches" in line for line in lines)


def test_plan_shows_batch_against_online_cost_and_the_window(tmp_path: Path, batch_server: FakeServer,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    job = batch_job(tmp_path, batch_server, items=10)
    assert main(["plan", str(job.config)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines at its width
    assert "runs in batch mode (openai, 1 batch)" in out and "litellm's batch prices" in out
    assert "results within 24h" in out and "batch window" in out
    job.config.write_text(job.config.read_text().replace("mode: batch", "mode: online"))
    assert main(["plan", str(job.config)]) == 0
    online = " ".join(capsys.readouterr().out.split())
    assert "would cost" in online and "(--batch;" in online
    assert main(["plan", str(job.config), "--batch"]) == 0
    assert "runs in batch mode" in capsys.readouterr().out


def test_batch_mode_for_a_model_without_a_batch_api_is_refused_before_anything_is_sent(
        tmp_path: Path, batch_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    job = batch_job(tmp_path, batch_server, items=3, judge={"model": "gemini/gemini-2.0-flash", "api_base": None,
                                                            "api_key_env": None, "api_key": "x"})
    assert main(["plan", str(job.config), "--strict"]) == 2  # plan says so first
    assert "has no batch API" in capsys.readouterr().out
    assert main(["run", str(job.config), "--no-live"]) == 2
    assert "has no batch API" in capsys.readouterr().err
    assert batch_server.stats()["batch_submissions"] == {} and not job.run_dirs()
