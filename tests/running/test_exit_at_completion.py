"""A Ctrl-C that lands as the run completes (issue 26, item 9): the exit code and ``run.json``
agree. Every task finished means the run completed, whenever the Ctrl-C came: as the last
outcome is written, while the run is recorded, or while its summary is printed.

Each test raises a real SIGINT in this process at one of those moments, from a seam in the
run's own writer or display (deterministic: the signal is raised at that line, not timed)."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import EXIT_CANCELLED, EXIT_OK, main
from judge_engine.fake import FakeServer
from judge_engine.rundir.store import RunStore
from tests.harness import make_job

ITEMS = 6


def _interrupt_after(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str,
                     when: Callable[..., bool]) -> list[int]:
    """Raise SIGINT once, right after ``owner.name`` returns for a call ``when`` accepts."""
    original = getattr(owner, name)
    raised: list[int] = []

    def seam(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if not raised and when(*args, **kwargs):
            raised.append(1)
            signal.raise_signal(signal.SIGINT)
        return result

    monkeypatch.setattr(owner, name, seam)
    return raised


def _status(run: Path) -> str:
    return str(json.loads((run / "run.json").read_text(encoding="utf-8"))["status"])


def _outcomes(run: Path) -> int:
    return len((run / "outcomes.jsonl").read_text(encoding="utf-8").splitlines())


def test_ctrl_c_as_the_last_outcome_is_written_completes_the_run(
        tmp_path: Path, fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    job = make_job(tmp_path, fake_server, items=ITEMS)
    written: list[object] = []

    def last(store: RunStore, record: object) -> bool:
        written.append(record)
        return len(written) == ITEMS

    raised = _interrupt_after(monkeypatch, RunStore, "write_outcome", last)
    code = main(["run", str(job.config), "--no-live"])
    run = job.only_run()
    assert raised and _outcomes(run) == ITEMS
    # The stop came with nothing left to stop: the run completed, and says so twice.
    assert (code, _status(run)) == (EXIT_OK, "completed")


def test_ctrl_c_while_the_run_is_recorded_changes_nothing(
        tmp_path: Path, fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    job = make_job(tmp_path, fake_server, items=ITEMS)
    raised = _interrupt_after(monkeypatch, RunStore, "write_manifest",
                              lambda store, manifest: manifest.status == "completed")
    code = main(["run", str(job.config), "--no-live"])
    run = job.only_run()
    assert raised and (code, _status(run)) == (EXIT_OK, "completed")


def test_ctrl_c_while_the_summary_is_printed_exits_as_run_json_says(
        tmp_path: Path, fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from judge_engine.cli import display

    job = make_job(tmp_path, fake_server, items=ITEMS)
    raised = _interrupt_after(monkeypatch, display, "summary", lambda *args, **kwargs: True)
    code = main(["run", str(job.config), "--no-live"])
    run = job.only_run()
    assert raised and (code, _status(run)) == (EXIT_OK, "completed")


def test_ctrl_c_with_tasks_left_still_cancels(
        tmp_path: Path, fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # The other side of the line: a stop with tasks not judged yet is a cancelled run, exit 130.
    fake_server.update(latency_s=0.05)
    job = make_job(tmp_path, fake_server, items=200, judge={"limits": {"concurrency": 2}})
    raised = _interrupt_after(monkeypatch, RunStore, "write_outcome", lambda store, record: True)
    code = main(["run", str(job.config), "--no-live"])
    run = job.only_run()
    assert raised and _outcomes(run) < 200
    assert (code, _status(run)) == (EXIT_CANCELLED, "cancelled")
