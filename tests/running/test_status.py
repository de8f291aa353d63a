"""What a user running overnight asks first (issue 26, point 4): ``status`` says what the run has
spent and what its budgets leave (the run's and each judge's, in dollars and hours; the open
batches committed at their estimate; unpriced calls apart), and every call count agrees with
every other: the summary's per-deployment split, its session and whole-run lines, run.json,
``status``, the transcript and the provider's own count, for an online run with two deployments
and for a batch run. Progress lines say which figures are the whole run's and which the session's."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from judge_engine.cli import main
from judge_engine.cli.display import LiveDisplay, RateMeter, progress_lines
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.config import FakeBatchConfig
from judge_engine.protocols import get_protocol
from judge_engine.providers.catalog import batch_cost_per_token
from judge_engine.running.budget import hours_judged
from judge_engine.util.money import dollars, dollars_left
from tests.cli.test_display import _judges, _render
from tests.harness import TEST_KEY, TEST_KEY_ENV, make_job, read_transcripts
from tests.running.batch.conftest import batch_job
from tests.running.batch.test_batch_cancel import _events, _started

REPO = Path(__file__).resolve().parents[2]


def _at_80(text: str, run: Path) -> None:
    assert all(len(line) <= 80 for line in text.splitlines() if str(run) not in line), text
    assert "…" not in text


def _table_calls(summary: str, judge: str) -> int:
    """The calls column of ``judge``'s row in the summary table."""
    match = re.search(rf"│ {re.escape(judge)}\s+│\s+[\d,]+ │\s+[\d,]+ │\s+([\d,]+) │", summary)
    assert match, summary
    return int(match.group(1).replace(",", ""))


def _calls_everywhere_agree(run: Path, summary: str, status: str, provider_calls: int) -> tuple[int, dict[str, int]]:
    """Every count of the judge ``mqm``'s calls, from every place that shows one, is the same
    number; returns it, with the per-deployment split run.json recorded."""
    manifest = json.loads((run / "run.json").read_text())
    calls = manifest["spend"]["judges"]["mqm"]["calls"]
    session = manifest["sessions"][-1]
    split = session["deployments"]["mqm"]
    lines = [t for t in read_transcripts(run) if not t.get("cache_hit")]
    assert manifest["spend"]["total"]["calls"] == session["spend"]["judges"]["mqm"]["calls"] == calls
    assert sum(split.values()) == len(lines) == provider_calls == calls  # each one paid for, once
    flat = " ".join(summary.split())  # the summary's lines, wherever 80 columns broke them
    assert _table_calls(summary, "mqm") == calls
    assert f"this session: {session['judged']} tasks judged · {calls:,} calls" in flat
    sessions = len(manifest["sessions"])
    assert f"whole run ({sessions} session{'s' * (sessions > 1)}): 20 tasks · 20 scored · 0 unscored · {calls:,} calls" in flat
    said = dict(re.findall(r"(east|west) ([\d,]+) calls", flat.split("mqm this session: ")[1].split("this session")[0]))
    assert {k: int(v.replace(",", "")) for k, v in said.items()} == split
    assert f"whole run: {calls:,} calls" in status and f"· {calls:,} calls" in " ".join(status.split())
    return calls, split


@pytest.mark.slow
def test_an_online_run_with_two_deployments_counts_every_call_once_everywhere(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """West is slower to admit than its declared limit: its 429s are calls too (a transcript
    line each, and the provider counted them), so they are in its count as in the run's."""
    monkeypatch.setenv("COLUMNS", "80")
    with FakeServer(FakeConfig(latency_s=0.02)) as east, \
            FakeServer(FakeConfig(rpm=300, window_s=1, latency_s=0.02, retry_after="ms")) as west:
        job = make_job(tmp_path, None, items=20, judge={
            "api_base": None, "limits": {"concurrency": 4}, "budget": {"max_cost_usd": 1.0},
            "deployments": [{"name": "east", "api_base": east.base_url},
                            {"name": "west", "api_base": west.base_url, "limits": {"rpm": 60000, "concurrency": 8}}]})
        assert main(["run", str(job.config), "--no-live", "--budget", "2", "--budget-hours", "1"]) == 0
        summary = capsys.readouterr().err
        run = job.only_run()
        assert main(["status", str(run)]) == 0
        status = capsys.readouterr().out
        _at_80(summary, run)
        _at_80(status, run)
        provider = east.stats()["requests_total"] + west.stats()["requests_total"]
        calls, split = _calls_everywhere_agree(run, summary, status, provider)
        assert west.stats()["rate_limited"] > 0 and split["west"] > 0 and split["east"] > 0
    manifest = json.loads((run / "run.json").read_text())
    spent, hours = manifest["spend"]["total"]["cost"], hours_judged(manifest["sessions"])
    flat = " ".join(status.split())
    assert f"{dollars(spent)} spent" in flat
    assert f"budget $2: {dollars_left(2 - spent, spent)} left" in flat  # the run's (--budget)
    assert f"budget $1: {dollars_left(1 - spent, spent)} left" in flat  # the judge's own
    assert f"{hours:.2f} of 1 h judged: {1 - hours:.2f} h left" in flat  # --budget-hours
    assert "held for open batches" not in flat  # nothing is held by a batch


def test_unpriced_calls_are_counted_apart_in_status(tmp_path: Path, fake_server: FakeServer,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, fake_server, items=4, judge={"model": "openai/my-local-llama"})
    assert main(["run", str(job.config), "--no-live"]) == 0
    capsys.readouterr()
    assert main(["status", str(job.only_run())]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "whole run: 4 calls" in out and "$0 spent + 4 unpriced calls" in out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_batch_runs_status_holds_its_open_batches_against_the_budget_and_its_counts_agree(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped with its batch at the provider: ``status`` holds the batch at the estimate the
    driver commits it at (its prompt tokens and gemba-mqm's typical 50-token answer per request,
    at the batch price) and leaves the rest of the budget; resumed, the batch's results are the
    first deployment's calls (batches go there), and every count agrees."""
    monkeypatch.setenv("COLUMNS", "80")
    with FakeServer(FakeConfig(batch=FakeBatchConfig(processing_s=5.0))) as server:
        job = batch_job(tmp_path, server, items=20, judge={
            "api_base": None, "budget": {"max_cost_usd": 1.0},
            "deployments": [{"name": "east", "api_base": server.base_url}, {"name": "west", "api_base": server.base_url}]})
        env = {**os.environ, TEST_KEY_ENV: TEST_KEY, "PYTHONPATH": str(REPO)}
        process = subprocess.Popen([sys.executable, "-m", "judge_engine.cli", "run", str(job.config), "--no-live"],
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        run = _started(job.run_dirs, submitted=1)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130
        (intent,) = [e for e in _events(run) if e["event"] == "intent"]
        price_in, price_out, _listed = batch_cost_per_token("openai/gpt-4o-mini")  # type: ignore[misc]
        answer = min(get_protocol("gemba-mqm").typical_completion_tokens, 300)  # the judge's max_tokens
        held = int(intent["tokens"]) * price_in + int(intent["requests"]) * answer * price_out  # type: ignore[call-overload]
        assert main(["status", str(run)]) == 0
        status = capsys.readouterr().out
        _at_80(status, run)
        flat = " ".join(status.split())
        assert f"whole run: 0 calls · 0 tokens · $0 spent · ~{dollars(held)} held for open batches" in flat
        assert f"budget $1: {dollars_left(1 - held, held)} left" in flat

        assert main(["resume", str(run), "--no-live"]) == 0  # waits for the batch, collects it
        summary = capsys.readouterr().err
        assert main(["status", str(run)]) == 0
        status = capsys.readouterr().out
        _at_80(summary, run)
        calls, split = _calls_everywhere_agree(run, summary, status, server.stats()["batch_requests"])
        assert split == {"east": 20, "west": 0} and "east 20 calls (20 in batches), west 0 calls" in summary
        assert "held for open batches" not in status  # collected: paid, no longer held


@pytest.mark.parametrize("width", [80, 200])
def test_progress_says_the_tasks_are_the_whole_runs_and_the_rest_this_sessions(width: int) -> None:
    """A resumed run's task count starts at what earlier sessions did; its cost and calls are
    this session's: each progress line, the live view's lines (80 columns) and its table say so."""
    judges = _judges()
    judges[0].counters.calls = 40
    line = progress_lines(judges, {j.config.name: RateMeter() for j in judges}, 65.0)[0]
    assert line.startswith("[1m05s] mqm-gpt-4o-mini: tasks 123,456/1,000,000 (12%, run) · this session: 40 calls, "
                           "$123.46, 12 unscored, 345 retries · ")  # dollars(): cents above a dollar
    text = _render(LiveDisplay(judges, console=Console(width=width, force_terminal=True)), width)
    if width == 80:
        assert "mqm-gpt-4o-mini  tasks 123,456/1,000,000 (12%, run)" in text
        assert "this session: 40 calls · $123.46" in text
    else:
        assert "tasks of the whole run, the rest this session" in text and "tasks (run)" in text
        assert re.search(r"│ mqm-gpt-4o-mini\s+│ 123,456/1,000,000 │.*│\s+40 │ \$123\.46 │", text)


def test_status_counts_the_calls_written_since_the_last_checkpoint(tmp_path: Path, fake_server: FakeServer,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A run killed before its checkpoint has calls run.json does not cover yet: status sums
    them from the transcript, as the next resume will."""
    job = make_job(tmp_path, fake_server, items=6)
    assert main(["run", str(job.config), "--no-live"]) == 0
    run = job.only_run()
    manifest = json.loads((run / "run.json").read_text())
    manifest["spend"] = {}  # as killed before its first checkpoint
    (run / "run.json").write_text(json.dumps(manifest))
    cost = sum(float(t.get("cost") or 0.0) for t in read_transcripts(run))
    capsys.readouterr()
    assert main(["status", str(run)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "whole run: 6 calls" in out and f"{dollars(cost)} spent" in out and fake_server.stats()["requests_total"] == 6
