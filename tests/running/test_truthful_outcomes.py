"""Nothing silently wrong, nothing silently lost (issue 13): what a run records and says when it
could not do all of its work.

Every test drives real HTTP against the fake server (or a closed port) through the CLI.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeServer
from judge_engine.protocols.gemba_mqm import GembaMQM
from tests.harness import TRANSPORTS, make_job, read_lines, read_transcripts


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _manifest(run: Path) -> dict:
    return json.loads((run / "run.json").read_text())


# --- an unreachable endpoint stops the judge; it is not a verdict about the items ------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_unreachable_endpoint_stops_the_judge_records_nothing_and_resume_finishes(
        transport: str, tmp_path: Path, fake_server: FakeServer, capsys) -> None:
    port = _closed_port()
    job = make_job(tmp_path, None, items=12, judge={
        "api_base": f"http://127.0.0.1:{port}/v1", "transport": transport,
        "retries": {"transport": 2, "backoff_max_s": 0.01}})
    assert main(["run", str(job.config), "--no-live"]) == 1
    err = capsys.readouterr().err
    assert "judges[mqm] (openai/gpt-4o-mini) stopped" in err and f"127.0.0.1:{port}" in err and "cannot reach" in err
    run = job.only_run()
    assert read_lines(run / "outcomes.jsonl") == []  # no task was turned into an "unscored" verdict
    assert _manifest(run)["status"] == "failed"
    capsys.readouterr()
    assert main(["show", str(run), "--item", "item-00000"]) == 0  # its attempts are there to read
    shown = capsys.readouterr().out
    assert "no outcome" in shown and "resume finishes it" in shown and "retry:" in shown

    # The endpoint comes back (the config now points at the fake server): resume finishes it.
    config = job.config.read_text().replace(f"http://127.0.0.1:{port}/v1", fake_server.base_url)
    job.config.write_text(config)
    assert main(["run", str(job.config), "--no-live"]) == 0  # a new endpoint is a new run id
    assert all(o["status"] == "scored" for o in read_lines(job.run_dirs()[-1] / "outcomes.jsonl"))


def test_resume_of_a_run_stopped_by_an_outage_judges_its_tasks(tmp_path: Path, fake_server: FakeServer) -> None:
    """The same run directory: the server is down (503 for everything), then back."""
    fake_server.update(error_503_rate=1.0)
    job = make_job(tmp_path, fake_server, items=30, judge={
        "limits": {"concurrency": 2}, "retries": {"transport": 1, "backoff_max_s": 0.01, "stop_after_exhausted": 3}})
    assert main(["run", str(job.config), "--no-live"]) == 1  # three tasks in a row exhausted: stopped
    run = job.only_run()
    recorded = read_lines(run / "outcomes.jsonl")
    assert 3 <= len(recorded) < 30  # the outage did not sweep through the whole dataset
    assert {o["reason_code"] for o in recorded} == {"transport_exhausted"}
    fake_server.update(error_503_rate=0.0)
    assert main(["resume", str(run), "--no-live", "--retry", "transport_exhausted"]) == 0
    assert _manifest(run)["counts"]["total"] == {"tasks": 30, "scored": 30, "unscored": 0, "unscored_by_code": {}, "planned": 30}


# --- reason codes, --retry, the unscored exit code ---------------------------------------------


def test_transport_exhausted_tasks_are_coded_counted_and_retried_exactly(
        tmp_path: Path, fake_server: FakeServer, capsys) -> None:
    fake_server.update(error_500_rate=1.0)
    job = make_job(tmp_path, fake_server, items=5, judge={"retries": {"transport": 1, "backoff_max_s": 0.01}})
    assert main(["run", str(job.config), "--no-live"]) == 3
    err = capsys.readouterr().err
    assert "unscored (transport_exhausted 5)" in err and "--retry transport_exhausted" in err
    run = job.only_run()
    first = read_lines(run / "outcomes.jsonl")
    assert [o["reason_code"] for o in first] == ["transport_exhausted"] * 5
    counts = _manifest(run)["counts"]["total"]
    assert counts["unscored_by_code"] == {"transport_exhausted": 5}

    # The same config again: complete, but not every task is scored.
    assert main(["run", str(job.config), "--no-live"]) == 3
    assert main(["run", str(job.config), "--no-live", "--allow-unscored"]) == 0

    fake_server.update(error_500_rate=0.0)
    sent = fake_server.stats()["requests_total"]
    assert main(["resume", str(run), "--no-live", "--retry", "unreadable"]) == 3  # no such task: nothing sent
    assert fake_server.stats()["requests_total"] == sent
    assert main(["resume", str(run), "--no-live", "--retry", "transport_exhausted"]) == 0
    assert fake_server.stats()["requests_total"] == sent + 5  # exactly those tasks
    lines = read_lines(run / "outcomes.jsonl")
    assert len(lines) == 10  # the old lines stay; the new ones supersede them
    assert _manifest(run)["counts"]["total"]["scored"] == 5
    capsys.readouterr()
    assert main(["show", str(run), "--item", first[0]["item_id"]]) == 0
    shown = capsys.readouterr().out
    assert "score:" in shown and "unscored" not in shown  # show reads the latest line
    assert main(["resume", str(run), "--retry", "no_such_code"]) == 2


def test_retry_selection_takes_the_latest_line_per_task(tmp_path: Path) -> None:
    from judge_engine.rundir.index import RunIndex
    from judge_engine.running.resumption import resumptions, retry_codes

    run = tmp_path / "run"
    run.mkdir()
    lines = [
        {"task_id": "a", "item_id": "1", "judge": "j", "status": "unscored", "reason_code": "transport_exhausted"},
        {"task_id": "b", "item_id": "1", "judge": "j", "status": "unscored", "reason_code": "unreadable"},
        {"task_id": "c", "item_id": "1", "judge": "j", "status": "scored", "reason_code": None},
        {"task_id": "d", "item_id": "1", "judge": "j", "status": "unscored", "reason_code": "transport_exhausted"},
        {"task_id": "d", "item_id": "1", "judge": "j", "status": "scored", "reason_code": None},  # retried since
        {"task_id": "e", "item_id": "1", "judge": "j", "status": "unscored"},  # written before reason codes
    ]
    (run / "outcomes.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    def selection(codes: str | None) -> tuple[set[str], set[str]]:
        with RunIndex.open(run) as index:
            chosen = resumptions(index, ["j"], retry_codes(codes))["j"]
        return set(chosen.done), set(chosen.again)

    assert selection(None) == ({"a", "b", "c", "d", "e"}, set())
    assert selection("transport_exhausted")[1] == {"a"}
    assert selection("unreadable, transport_exhausted")[1] == {"a", "b"}
    assert selection("unscored") == ({"c", "d"}, {"a", "b", "e"})
    assert selection("unrecorded")[1] == {"e"}


def test_a_missing_api_key_stops_before_anything_is_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    job = make_job(tmp_path, None, items=3, judge={"api_key_env": None})  # no api_base, no key: the real API
    assert main(["run", str(job.config), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY" in err and "judges[mqm]" in err and "Nothing was sent" in err
    assert not job.runs.exists()


@pytest.mark.parametrize("variable", ["TOGETHER_API_KEY", "TOGETHERAI_API_KEY", "TOGETHER_AI_TOKEN"])
def test_the_key_check_accepts_every_variable_the_call_reads(variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm's validate_environment lists only TOGETHERAI_API_KEY for Together, while its call
    reads TOGETHER_API_KEY first: a key set under any name the call reads passes the check."""
    from judge_engine.providers.catalog import missing_key_variables

    for name in ("TOGETHER_API_KEY", "TOGETHERAI_API_KEY", "TOGETHER_AI_API_KEY", "TOGETHER_AI_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    model = "together_ai/meta-llama/Llama-3-70b-chat-hf"
    assert missing_key_variables(model) == ["TOGETHERAI_API_KEY"]
    monkeypatch.setenv(variable, "k")
    assert missing_key_variables(model) == []


def test_api_key_env_naming_an_unset_variable_is_caught_before_the_run(tmp_path: Path, capsys) -> None:
    job = make_job(tmp_path, None, items=3, judge={"api_key_env": "NO_SUCH_KEY_VARIABLE"})
    assert main(["run", str(job.config), "--no-live"]) == 2
    assert "NO_SUCH_KEY_VARIABLE" in capsys.readouterr().err
    assert not job.runs.exists()


# --- a protocol's own bug is one task's problem, not the run's ----------------------------------


@pytest.mark.parametrize("stage", ["parse", "score"])
def test_an_exception_in_protocol_code_is_a_protocol_error_and_the_run_goes_on(
        stage: str, tmp_path: Path, fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    original = getattr(GembaMQM, stage)

    def buggy(self, verdict_or_answer, item, variant=""):  # type: ignore[no-untyped-def]
        if str(item["id"]).endswith("3"):
            raise KeyError("a bug in the protocol")
        return original(self, verdict_or_answer, item, variant)

    monkeypatch.setattr(GembaMQM, stage, buggy)
    job = make_job(tmp_path, fake_server, items=20)
    assert main(["run", str(job.config), "--no-live"]) == 3
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert len(outcomes) == 20  # every task recorded: the bug did not cancel the run
    broken = [o for o in outcomes if o["status"] == "unscored"]
    assert [o["item_id"] for o in broken] == ["item-00003", "item-00013"]
    assert {o["reason_code"] for o in broken} == {"protocol_error"}
    assert all(f"the protocol's {stage} raised KeyError" in o["reason"] for o in broken)
    events = [t for t in read_transcripts(job.only_run()) if t.get("event") == "protocol_error"]
    assert len(events) == 2 and "Traceback" in events[0]["traceback"] and events[0]["stage"] == stage


# --- after a resume: this session and the whole run ---------------------------------------------


@pytest.mark.slow
def test_resume_reports_this_session_and_the_whole_run(tmp_path: Path, fake_server: FakeServer, capsys) -> None:
    from tests.running.test_crash_and_limits import _spawn_run, _wait_for_outcomes

    fake_server.update(latency_s=0.1)
    job = make_job(tmp_path, fake_server, items=60, judge={"limits": {"concurrency": 4}})
    process = _spawn_run(job.config)
    _wait_for_outcomes(job.runs, at_least=10)
    process.kill()
    process.wait(timeout=10)
    run = job.only_run()
    done_before = len(read_lines(run / "outcomes.jsonl"))
    capsys.readouterr()
    assert main(["resume", str(run), "--no-live"]) == 0
    err = capsys.readouterr().err
    assert f"Resuming: {done_before} of 60 tasks already done; judging the other {60 - done_before}" in err
    manifest = _manifest(run)
    sent = fake_server.stats()["requests_total"]
    # The run's spend holds every call of the killed session too (its transcript was summed on
    # resume), except the calls in flight at the kill (at most concurrency = 4): they were sent
    # but their answers never reached the process, so nothing could record them.
    assert sent - 4 <= manifest["spend"]["total"]["calls"] <= sent
    transcripts = read_transcripts(run)
    assert manifest["spend"]["total"]["cost"] == pytest.approx(sum(t.get("cost", 0) for t in transcripts))
    session = manifest["sessions"][-1]
    assert session["judged"] == 60 - done_before
    assert session["spend"]["total"]["calls"] < sent
    assert len(manifest["sessions"]) == 2
    assert f"this session: {60 - done_before} tasks judged" in err
    assert f"whole run (2 sessions): 60 tasks · 60 scored · 0 unscored · {manifest['spend']['total']['calls']} calls" in err


@pytest.mark.slow
def test_after_a_ctrl_c_the_runs_spend_is_every_call_the_server_saw(tmp_path: Path, fake_server: FakeServer) -> None:
    from tests.running.test_crash_and_limits import _spawn_run, _wait_for_outcomes

    fake_server.update(latency_s=0.1)
    job = make_job(tmp_path, fake_server, items=60, judge={"limits": {"concurrency": 4}})
    process = _spawn_run(job.config)
    run = _wait_for_outcomes(job.runs, at_least=10)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 130
    assert main(["resume", str(run), "--no-live"]) == 0
    assert _manifest(run)["spend"]["total"]["calls"] == fake_server.stats()["requests_total"] == 60


# --- paths a user types -----------------------------------------------------------------------------


def test_resume_works_from_any_directory_when_the_config_path_was_relative(
        tmp_path: Path, fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "project").mkdir()
    job = make_job(tmp_path / "project", fake_server, items=4)
    monkeypatch.chdir(job.dir)
    assert main(["run", "config.yaml", "--no-live", "--limit", "2"]) == 0
    run = job.only_run()
    manifest = _manifest(run)
    assert Path(manifest["config_path"]).is_absolute()
    # Mark it unfinished, then resume from elsewhere, by a relative run path.
    manifest["status"] = "cancelled"
    (run / "run.json").write_text(json.dumps(manifest))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["resume", os.path.relpath(run), "--no-live"]) == 0


def test_a_run_recorded_with_a_relative_config_path_still_resumes_from_elsewhere(
        tmp_path: Path, fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs written before the path was stored absolute."""
    (tmp_path / "project").mkdir()
    job = make_job(tmp_path / "project", fake_server, items=2)
    assert main(["run", str(job.config), "--no-live"]) == 0
    run = job.only_run()
    manifest = _manifest(run)
    manifest.update(status="cancelled", config_path="config.yaml")
    manifest.pop("config_path_from_run")
    (run / "run.json").write_text(json.dumps(manifest))
    monkeypatch.chdir(tmp_path)
    assert main(["resume", str(run), "--no-live"]) == 0


def test_every_run_prints_its_directory_first_and_points_latest_at_it(
        tmp_path: Path, fake_server: FakeServer, capsys) -> None:
    job = make_job(tmp_path, fake_server, items=2)
    assert main(["run", str(job.config), "--no-live"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"Run directory: {job.only_run()}"
    assert (job.runs / "latest").resolve() == job.only_run().resolve()


def test_demo_runs_are_marked_synthetic_in_name_manifest_show_stats_and_meta(tmp_path: Path, capsys) -> None:
    config = Path(__file__).resolve().parents[2] / "examples" / "literary_mt" / "config.yaml"
    assert main(["run", str(config), "--demo", "--no-live", "--limit", "2",
                 "--output", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache")]) == 0
    run = next(p for p in (tmp_path / "runs").iterdir() if not p.is_symlink())
    assert "-demo-" in run.name
    manifest = _manifest(run)
    assert manifest["demo"] is True and "synthetic" in manifest["synthetic"]
    capsys.readouterr()
    assert main(["show", str(run)]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("DEMO RUN: answers come from")
    humans = tmp_path / "humans.csv"
    humans.write_text("id,mqm\nlit-001,-1\nlit-002,0\n", encoding="utf-8")
    for command in (["stats", str(run)], ["meta", str(run), "--human-table", str(humans), "--key", "id",
                                           "--human", "mqm"]):
        assert main(command) == 0
        first = capsys.readouterr().out.strip().splitlines()[0]
        assert "DEMO RUN: answers come from" in first, (command, first)


def test_resume_keeps_the_command_line_overrides_and_the_new_run_suffix(
        tmp_path: Path, fake_server: FakeServer) -> None:
    job = make_job(tmp_path, fake_server, items=6)
    assert main(["run", str(job.config), "--no-live", "--new-run", "--limit", "3", "--cache-dir",
                 str(tmp_path / "other-cache")]) == 0
    run = job.only_run()
    manifest = _manifest(run)
    assert manifest["overrides"] == {"limit": 3, "cache_dir": str(tmp_path / "other-cache")}
    manifest["status"] = "cancelled"
    (run / "run.json").write_text(json.dumps(manifest))
    sent = fake_server.stats()["requests_total"]
    assert main(["resume", str(run), "--no-live"]) == 0  # same limit, same run: nothing to judge
    assert fake_server.stats()["requests_total"] == sent
    assert len(read_lines(run / "outcomes.jsonl")) == 3


# --- a cost is a price, or it says it is not -----------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_calls_to_a_model_with_no_known_price_are_counted_unpriced_never_a_silent_zero(
        transport: str, tmp_path: Path, fake_server: FakeServer, capsys) -> None:
    job = make_job(tmp_path, fake_server, items=6, judge={"model": "openai/my-local-model", "transport": transport})
    assert main(["run", str(job.config), "--no-live"]) == 0
    spend = _manifest(job.only_run())["spend"]
    assert spend["total"]["calls"] == 6 and spend["total"]["unpriced"] == 6 and spend["total"]["cost"] == 0
    assert all(t.get("unpriced") for t in read_transcripts(job.only_run()) if "response" in t)
    out = capsys.readouterr()
    assert "+ 6 unpriced" in out.out + out.err
    item = read_lines(job.only_run() / "outcomes.jsonl")[0]["item_id"]
    assert main(["show", str(job.only_run()), "--item", item]) == 0
    assert "cost $0 + 1 unpriced call" in " ".join(capsys.readouterr().out.split())  # show too: no bare $0


def test_a_price_litellm_makes_up_is_no_price(tmp_path: Path, capsys) -> None:
    """litellm answers an Anthropic name it does not list with an entry priced 0: plan warns
    (--strict exits 2) and a demo of it counts every call unpriced, as for any unknown model;
    a price listed as 0 (a local model) is a price."""
    from judge_engine.providers.catalog import cost_per_token

    assert cost_per_token("anthropic/claude-nonexistent-9") is None
    assert cost_per_token("anthropic/claude-sonnet-4-5") is not None and cost_per_token("ollama/llama3") == (0.0, 0.0)
    job = make_job(tmp_path, None, items=4, judge={"model": "anthropic/claude-nonexistent-9"})
    assert main(["plan", str(job.config), "--strict"]) == 2
    assert main(["run", str(job.config), "--demo", "--no-live"]) == 0
    total = _manifest(job.only_run())["spend"]["total"]
    assert total["cost"] == 0 and total["unpriced"] == total["calls"] == 4


def test_a_demo_of_a_model_another_provider_prices_costs_that_providers_price(tmp_path: Path) -> None:
    """A demo sends Claude's requests to the fake server as openai/<name>: they are priced as
    the judge's model, as plan estimates them, not as an unknown OpenAI model's $0."""
    job = make_job(tmp_path, None, items=4, judge={"model": "anthropic/claude-sonnet-4-5"})
    assert main(["run", str(job.config), "--demo", "--no-live"]) == 0
    total = _manifest(job.only_run())["spend"]["total"]
    assert total["cost"] > 0 and "unpriced" not in total
