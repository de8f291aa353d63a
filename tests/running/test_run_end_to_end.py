"""The engine end to end through litellm's real HTTP path to the fake server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeServer
from tests.harness import (
    TRANSPORTS,
    expected_gemba_score,
    make_job,
    read_lines,
    read_transcripts,
)


def _items(job_dir: Path) -> dict[str, dict]:
    return {row["id"]: row for row in read_lines(job_dir / "items.jsonl")}


def test_end_to_end_job_scores_every_item_correctly(tmp_path: Path, fake_server: FakeServer) -> None:
    job = make_job(tmp_path, fake_server, items=30)
    assert main(["run", str(job.config), "--no-live"]) == 0
    run = job.only_run()
    outcomes = read_lines(run / "outcomes.jsonl")
    transcripts = read_transcripts(run)
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["counts"]["total"] == {"tasks": 30, "scored": 30, "unscored": 0, "unscored_by_code": {}, "planned": 30}
    assert len(outcomes) == 30 and len({o["task_id"] for o in outcomes}) == 30
    assert len(transcripts) == 30 == fake_server.stats()["requests_total"]
    items = _items(tmp_path)
    for outcome in outcomes:
        assert outcome["status"] == "scored"
        assert outcome["score"] == expected_gemba_score(items[outcome["item_id"]], 0.0)
        for key in ("task_id", "item_id", "judge", "protocol", "model", "temperature", "repeat", "verdict"):
            assert key in outcome
    first = transcripts[0]
    assert first["request"]["messages"][0]["role"] == "system"
    assert first["response"]["content"] and first["usage"]["prompt_tokens"] > 0
    assert first["cost"] > 0 and first["cache_hit"] is False


def test_rerun_makes_zero_http_calls(tmp_path: Path, fake_server: FakeServer) -> None:
    job = make_job(tmp_path, fake_server, items=12)
    assert main(["run", str(job.config), "--no-live"]) == 0
    calls = fake_server.stats()["requests_total"]
    assert calls == 12
    assert main(["run", str(job.config), "--no-live"]) == 0  # same config: already complete
    assert main(["run", str(job.config), "--no-live", "--new-run"]) == 0  # fresh run dir: all cache hits
    assert fake_server.stats()["requests_total"] == calls
    fresh = [d for d in job.run_dirs() if d != job.run_dirs()[0]][0]
    hits = read_transcripts(fresh)
    assert len(hits) == 12 and all(t["cache_hit"] for t in hits)
    assert all(o["status"] == "scored" for o in read_lines(fresh / "outcomes.jsonl"))


def test_three_repeats_are_three_distinct_calls(tmp_path: Path, fake_server: FakeServer) -> None:
    job = make_job(tmp_path, fake_server, items=5, judge={"repeats": 3, "temperatures": [0.0, 0.7]})
    assert main(["run", str(job.config), "--no-live"]) == 0
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert len(outcomes) == 5 * 3 * 2
    assert fake_server.stats()["requests_total"] == 30
    per_item = {(o["item_id"], o["temperature"]) for o in outcomes}
    assert len(per_item) == 10
    assert sorted({o["repeat"] for o in outcomes}) == [0, 1, 2]
    transcripts = read_transcripts(job.only_run())
    assert not any(t["cache_hit"] for t in transcripts)
    at_zero: dict[str, set[float]] = {}
    for o in outcomes:
        if o["temperature"] == 0.0:
            at_zero.setdefault(o["item_id"], set()).add(o["score"])
    assert all(len(scores) == 1 for scores in at_zero.values())  # greedy decoding: identical draws


def test_repeats_disagree_more_as_temperature_rises(tmp_path: Path, fake_server: FakeServer) -> None:
    from judge_engine.stats import repeat_consistency

    job = make_job(tmp_path, fake_server, items=40, judge={"repeats": 3, "temperatures": [0.0, 1.5]})
    assert main(["run", str(job.config), "--no-live"]) == 0
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    by_temperature = {}
    for temperature in (0.0, 1.5):
        rows: dict[str, list[float]] = {}
        for o in sorted(outcomes, key=lambda o: o["repeat"]):
            if o["temperature"] == temperature:
                rows.setdefault(o["item_id"], []).append(o["score"])
        by_temperature[temperature] = repeat_consistency(list(rows.values()))
    assert by_temperature[0.0].mean_spearman == 1.0
    assert by_temperature[1.5].mean_spearman < 0.95


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_faults_500s_and_malformed_answers_end_scored_and_correct(transport: str, tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.update(error_500_rate=0.05, malformed_rate=0.02, seed=7)
    job = make_job(tmp_path, fake_server, items=200, judge={"transport": transport, "limits": {"concurrency": 32}})
    assert main(["run", str(job.config), "--no-live"]) == 0
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    stats = fake_server.stats()
    assert stats["by_status"].get("500", 0) > 0, stats  # the faults really happened
    assert len(outcomes) == 200 and {o["status"] for o in outcomes} == {"scored"}
    items = _items(tmp_path)
    wrong = [o for o in outcomes if o["score"] != expected_gemba_score(items[o["item_id"]], 0.0)]
    assert wrong == []
    reasked = [o for o in outcomes if o["reasks"] > 0]
    assert reasked, "2% malformed answers over 200 items should have caused a re-ask"
    transcripts = read_transcripts(job.only_run())
    assert any(t.get("error", {}).get("status") == 500 for t in transcripts)


def test_unreadable_answers_are_reasked_then_unscored_never_scored(tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.update(malformed_rate=1.0)
    job = make_job(tmp_path, fake_server, items=3, judge={"retries": {"reasks": 2}})
    assert main(["run", str(job.config), "--no-live"]) == 3  # completed, with unscored tasks
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert [o["status"] for o in outcomes] == ["unscored"] * 3
    for outcome in outcomes:
        assert outcome["score"] is None and outcome["reasks"] == 2
        assert "no 'Critical:'" in outcome["reason"]
        assert outcome["reason_code"] == "unreadable"
    assert fake_server.stats()["requests_total"] == 9  # 1 + 2 re-asks each
    transcripts = read_transcripts(job.only_run())
    last_request = transcripts[-1]["request"]["messages"]
    assert last_request[-1]["content"].startswith("Your previous answer could not be used")


def test_cut_off_answer_is_reasked(tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.update(cut_off_rate=0.5, seed=3)
    job = make_job(tmp_path, fake_server, items=20)
    code = main(["run", str(job.config), "--no-live"])
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert code == (3 if any(o["status"] == "unscored" for o in outcomes) else 0)
    items = _items(tmp_path)
    for outcome in outcomes:
        if outcome["status"] == "scored":
            assert outcome["score"] == expected_gemba_score(items[outcome["item_id"]], 0.0)
        else:
            assert "cut off" in outcome["reason"] and outcome["reason_code"] == "incomplete"
    assert any(o["reasks"] > 0 for o in outcomes)


def test_several_judges_run_side_by_side(tmp_path: Path, fake_server: FakeServer) -> None:
    base = {"model": "openai/gpt-4o-mini", "api_base": fake_server.base_url, "api_key_env": "JUDGE_ENGINE_TEST_KEY",
            "protocol": "gemba-mqm", "retries": {"backoff_max_s": 0.05}}
    job = make_job(tmp_path, None, items=6, judges=[
        {**base, "name": "a", "temperatures": [0.0]},
        {**base, "name": "b", "temperatures": [0.0, 1.0], "protocol_options": {"output": "json"}},
    ])
    assert main(["run", str(job.config), "--no-live"]) == 0
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert sorted((o["judge"], o["status"]) for o in outcomes).count(("b", "scored")) == 12
    assert sum(o["judge"] == "a" for o in outcomes) == 6
    json_requests = [t for t in read_transcripts(job.only_run()) if t["judge"] == "b"]
    assert all(t["request"]["response_format"]["type"] == "json_schema" for t in json_requests)
