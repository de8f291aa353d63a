"""Issue 17, items 2 and 3: several deployments per judge, and budgets that stop a run before it
overspends. Every deployment is its own fake server, over real HTTP."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.providers.catalog import cost_per_token
from tests.harness import TEST_KEY_ENV, make_job, read_lines, read_transcripts


@pytest.fixture
def two_servers() -> Iterator[tuple[FakeServer, FakeServer]]:
    """A 3,000 and a 1,000 RPM deployment (2-second windows, so the limits bite at once)."""
    with FakeServer(FakeConfig(rpm=3000, window_s=2, latency_s=0.1, latency_jitter_s=0.02)) as fast, \
            FakeServer(FakeConfig(rpm=1000, window_s=2, latency_s=0.1, latency_jitter_s=0.02)) as slow:
        yield fast, slow


def _deployments(fast: FakeServer, slow: FakeServer, **slow_extra: object) -> dict[str, object]:
    return {"api_base": None, "limits": {"concurrency": 32}, "deployments": [
        {"name": "east", "api_base": fast.base_url, "limits": {"rpm": 3000, "concurrency": 32}},
        {"name": "west", "api_base": slow.base_url, "limits": {"rpm": 1000, "concurrency": 32}, **slow_extra},
    ]}


def _rate(server: FakeServer) -> float:
    """Accepted requests per minute between the server's first and last accepted request."""
    stats = server.stats()
    span = stats["last_accepted_s"] - stats["first_accepted_s"]
    return (stats["accepted_requests"] - 1) / span * 60 if span > 0 else 0.0


@pytest.mark.slow
@pytest.mark.slow
def test_two_deployments_serve_their_combined_limit(tmp_path: Path, two_servers: tuple[FakeServer, FakeServer]) -> None:
    fast, slow = two_servers
    job = make_job(tmp_path, None, items=700, judge=_deployments(fast, slow))
    assert main(["run", str(job.config), "--no-live"]) == 0
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert len(outcomes) == 700 and {o["status"] for o in outcomes} == {"scored"}
    combined = _rate(fast) + _rate(slow)
    rate_limited = fast.stats()["rate_limited"] + slow.stats()["rate_limited"]
    requests = fast.stats()["requests_total"] + slow.stats()["requests_total"]
    print(f"combined {combined:.0f} RPM (east {_rate(fast):.0f}, west {_rate(slow):.0f}); 429s {rate_limited}/{requests}")
    assert combined >= 0.95 * 4000, (combined, _rate(fast), _rate(slow))
    assert rate_limited <= 0.01 * requests
    assert fast.stats()["accepted_requests"] > 2 * slow.stats()["accepted_requests"]  # split by what each accepts
    sent_to = Counter(t["request"]["api_base"] for t in read_transcripts(job.only_run()))
    assert set(sent_to) == {fast.base_url, slow.base_url}  # the transcript says which deployment answered


@pytest.mark.slow
def test_a_failing_deployment_cools_down_and_the_other_finishes(tmp_path: Path,
                                                                two_servers: tuple[FakeServer, FakeServer]) -> None:
    fast, slow = two_servers
    slow.update(error_500_rate=1.0)  # west answers nothing but 500s
    job = make_job(tmp_path, None, items=120, judge=_deployments(fast, slow))
    assert main(["run", str(job.config), "--no-live"]) == 0
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert len(outcomes) == 120 and {o["status"] for o in outcomes} == {"scored"}
    # Three 500s in a row cool west down; its work went east: far fewer requests than tasks.
    assert slow.stats()["requests_total"] < 40 and fast.stats()["accepted_requests"] >= 120


def test_a_deployment_that_refuses_the_key_is_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeServer(FakeConfig()) as good, FakeServer(FakeConfig(require_api_key="the-right-key")) as locked:
        monkeypatch.setenv("WRONG_KEY", "not-the-key")
        job = make_job(tmp_path, None, items=60, judge={"api_base": None, "deployments": [
            {"name": "locked", "api_base": locked.base_url, "api_key_env": "WRONG_KEY"},
            {"name": "good", "api_base": good.base_url}]})
        assert main(["run", str(job.config), "--no-live"]) == 0
        assert len(read_lines(job.only_run() / "outcomes.jsonl")) == 60
        assert locked.stats()["by_status"].get("401", 0) <= 32  # the requests in flight when it refused


def _request_cost(job_dir: Path) -> float:
    """The largest cost of one call in the run so far."""
    return max(float(t.get("cost") or 0.0) for t in read_transcripts(job_dir))


def test_a_budget_stops_the_run_at_its_limit_and_resume_with_more_continues(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert cost_per_token("openai/gpt-4o-mini") is not None
    fake_server.update(latency_s=0.05)
    job = make_job(tmp_path, fake_server, items=150, judge={"limits": {"concurrency": 8}})
    assert main(["run", str(job.config), "--no-live", "--budget", "0.01"]) == 4
    run = job.only_run()
    manifest = json.loads((run / "run.json").read_text())
    spent, one = manifest["spend"]["total"]["cost"], _request_cost(run)
    assert manifest["status"] == "stopped" and manifest["stopped"]["reason"] == "budget"
    assert 0.01 - 2 * one <= spent <= 0.01 + one, (spent, one)  # within about one call of the limit
    done = len(read_lines(run / "outcomes.jsonl"))
    assert 10 < done < 150
    err = capsys.readouterr().err
    assert "Stopped at the run's budget of $0.01 (" in err and f"  judge-engine resume {run} --budget USD" in err.splitlines()
    assert manifest["overrides"]["max_cost_usd"] == 0.01  # kept for later resumes
    assert main(["resume", str(run), "--no-live", "--budget", "0.02"]) == 4  # more, but still not enough
    again = json.loads((run / "run.json").read_text())
    assert 0.02 - 2 * one <= again["spend"]["total"]["cost"] <= 0.02 + one
    assert main(["resume", str(run), "--no-live", "--budget", "5"]) == 0
    outcomes = read_lines(run / "outcomes.jsonl")
    assert len(outcomes) == 150 == len({o["task_id"] for o in outcomes})  # every task once, nothing paid twice
    assert fake_server.stats()["requests_total"] <= 150 + 2 * 8


@pytest.mark.slow
def test_a_time_budget_stops_the_run_and_resume_with_more_hours_finishes(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    """max_hours bounds the time spent judging, summed over sessions: 2 s of 0.2 s calls, 4 at
    a time, stop well short of 200 tasks; what was in flight is recorded; resume goes on."""
    fake_server.update(latency_s=0.2)
    job = make_job(tmp_path, fake_server, items=200, judge={"limits": {"concurrency": 4}})
    started = time.monotonic()
    assert main(["run", str(job.config), "--no-live", "--budget-hours", str(2 / 3600)]) == 4
    assert time.monotonic() - started < 15
    run = job.only_run()
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "stopped" and manifest["stopped"]["reason"] == "budget"
    assert manifest["stopped"]["kind"] == "hours" and manifest["stopped"]["spent"] >= 2 / 3600
    done = len(read_lines(run / "outcomes.jsonl"))
    assert 4 <= done < 100
    assert f"judge-engine resume {run} --budget-hours" in capsys.readouterr().err
    # The hours already judged count: the same limit stops the next session at once.
    assert main(["resume", str(run), "--no-live"]) == 4
    assert len(read_lines(run / "outcomes.jsonl")) <= done + 4
    fake_server.update(latency_s=0.0)
    assert main(["resume", str(run), "--no-live", "--budget-hours", "1"]) == 0
    outcomes = read_lines(run / "outcomes.jsonl")
    assert len(outcomes) == 200 == len({o["task_id"] for o in outcomes})


def test_a_judge_budget_stops_only_that_judge(tmp_path: Path, fake_server: FakeServer) -> None:
    base = {"model": "openai/gpt-4o-mini", "api_base": fake_server.base_url, "api_key_env": TEST_KEY_ENV,
            "protocol": "gemba-mqm", "limits": {"concurrency": 4}, "retries": {"backoff_max_s": 0.05}}
    job = make_job(tmp_path, fake_server, items=40, judges=[
        {**base, "name": "thrifty", "budget": {"max_cost_usd": 0.002}}, {**base, "name": "free", "params": {"seed": 1}}])
    assert main(["run", str(job.config), "--no-live"]) == 4
    per_judge = Counter(o["judge"] for o in read_lines(job.only_run() / "outcomes.jsonl"))
    assert per_judge["free"] == 40 and per_judge["thrifty"] < 40
    manifest = json.loads((job.only_run() / "run.json").read_text())
    assert manifest["stopped"]["scope"] == "thrifty"


def test_plan_warns_when_the_estimate_passes_a_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, None, items=50, judge={"budget": {"max_cost_usd": 0.001}})
    assert main(["plan", str(job.config)]) == 0
    assert "over its budget of $0.001" in capsys.readouterr().out


def test_a_cost_budget_over_an_unpriced_model_is_bad_input(tmp_path: Path, fake_server: FakeServer,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, fake_server, items=3, judge={"model": "openai/no-such-model-xyz"})
    assert main(["run", str(job.config), "--no-live", "--budget", "1"]) == 2
    err = capsys.readouterr().err
    assert "price" in err and "--budget" in err  # names where the budget came from
    assert fake_server.stats()["requests_total"] == 0
