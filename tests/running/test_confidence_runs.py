"""Confidence through whole runs against the fake server: refused before anything is sent where
litellm's catalog knows the model gives no log-probs, stopped at the first answer without them
otherwise, and the same confidence after a cache hit, a resume, a rescore, in batch mode and
over litellm's transport. Item outcomes of ``pairwise-annotators`` are counted as planned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_engine.cli import main
from judge_engine.fake import FakeServer
from judge_engine.rundir.store import latest_outcome_records, read_manifest
from tests.harness import TEST_KEY_ENV

PAIRS = [("Name a prime.", "Seven.", "Nine."), ("Greet in French.", "Bonjour.", "Hola."),
         ("2 + 2?", "4.", "Five."), ("Capital of Italy?", "Rome.", "Milan."), ("A colour?", "Blue.", "Loud.")]


def job(tmp_path: Path, server: FakeServer | None, judges: list[dict[str, Any]], *, items: int = 5) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    with (tmp_path / "items.jsonl").open("w", encoding="utf-8") as handle:
        for n in range(items):
            q, a, b = PAIRS[n % len(PAIRS)]
            handle.write(json.dumps({"id": f"p{n}", "instruction": f"{q} ({n})", "response_a": a, "response_b": b}) + "\n")
    (tmp_path / "pool.jsonl").write_text("".join(json.dumps(
        {"instruction": f"q{n}", "outputs": ["yes", "no"], "preferences": {"human": 1 + n % 2}}) + "\n"
        for n in range(9)), encoding="utf-8")
    base = {"api_base": server.base_url if server else None, "api_key_env": TEST_KEY_ENV, "timeout_s": 10,
            "retries": {"backoff_max_s": 0.01}, "limits": {"concurrency": 4}, "batch": {"poll_interval_s": 0.05}}
    config = {"dataset": {"path": "items.jsonl"}, "judges": [{**base, **j} for j in judges],
              "output": {"dir": "runs"}, "cache": {"dir": "cache"}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


RELATIVE = {"name": "rel", "model": "openai/gpt-4o-mini", "protocol": "prometheus-relative",
            "protocol_options": {"rubric": "helpfulness", "both_orders": True}, "confidence": "logprobs"}
ANNOTATORS = {"name": "ann", "model": "openai/gpt-4o", "protocol": "pairwise-annotators",
              "protocol_options": {"examples_file": "pool.jsonl"}}


def confidences(run: Path) -> dict[tuple[str, str, str, int], Any]:
    return {(o.judge, o.item_id, o.variant, o.repeat): o.confidence for o in latest_outcome_records(run).values()}


def test_a_model_the_catalog_knows_has_no_logprobs_is_refused_before_anything_is_sent(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    config = job(tmp_path, fake_server, [{**RELATIVE, "name": "claude", "model": "anthropic/claude-3-5-haiku-latest"}])
    assert main(["plan", str(config)]) == 2
    assert main(["run", str(config), "--no-live"]) == 2
    said = capsys.readouterr().err
    assert "judges[claude].confidence: logprobs: anthropic/claude-3-5-haiku-latest gives no token log-probs" in said
    assert "confidence: agreement with repeats" in said
    assert fake_server.stats()["requests_total"] == 0
    o1 = job(tmp_path, fake_server, [{**RELATIVE, "name": "o1", "model": "openai/o3-mini"}])
    assert main(["run", str(o1), "--no-live"]) == 2
    assert "judges[o1].confidence" in capsys.readouterr().err


def test_the_first_answer_without_logprobs_stops_the_judge_with_what_to_change(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    # A proxy's name the catalog cannot judge: sent, and the fake answers a claude name as
    # Anthropic does, without log-probs.
    config = job(tmp_path, fake_server, [{**RELATIVE, "name": "proxy", "model": "openai/claude-via-proxy"}])
    assert main(["run", str(config), "--no-live"]) == 1
    said = capsys.readouterr()
    assert "judges[proxy] (openai/claude-via-proxy) stopped: the provider answered openai/claude-via-proxy without token " \
           "log-probs" in said.out + said.err
    run = next(p for p in (tmp_path / "runs").iterdir() if not p.is_symlink())
    assert list(latest_outcome_records(run).values()) == []  # nothing recorded: resume judges them once fixed
    assert fake_server.stats()["requests_total"] <= 4  # the judge's concurrency, no more


def test_confidence_is_the_same_after_a_cache_hit(tmp_path: Path, fake_server: FakeServer) -> None:
    config = job(tmp_path, fake_server, [RELATIVE])
    assert main(["run", str(config), "--no-live"]) == 0
    first = max((p for p in (tmp_path / "runs").iterdir() if not p.is_symlink()), key=lambda p: p.stat().st_mtime)
    calls = fake_server.stats()["requests_total"]
    assert main(["run", str(config), "--no-live", "--new-run"]) == 0
    second = (tmp_path / "runs" / "latest").resolve()
    assert second != first and fake_server.stats()["requests_total"] == calls  # every answer from the cache
    before, after = confidences(first), confidences(second)
    assert before == after and all(c and c["value"] is not None for c in after.values())
    assert len([k for k in after if k[0] == "rel:item"]) == 5  # both orders averaged per item


def test_confidence_is_kept_across_a_resume_and_the_items_span_both_sessions(
        tmp_path: Path, fake_server: FakeServer) -> None:
    config = job(tmp_path, fake_server, [ANNOTATORS])
    assert main(["run", str(config), "--no-live", "--budget", "0.01"]) != 0  # stopped by its budget
    run = (tmp_path / "runs" / "latest").resolve()
    done = [o for o in latest_outcome_records(run).values() if o.judge == "ann"]
    assert 0 < len(done) < 30
    assert main(["resume", str(run), "--no-live", "--budget", "10"]) == 0
    outcomes = list(latest_outcome_records(run).values())
    requests = [o for o in outcomes if o.judge == "ann"]
    items = [o for o in outcomes if o.judge == "ann:item"]
    assert len(requests) == 30 and all(o.confidence and o.confidence["method"] == "logprobs" for o in requests)
    assert len(items) == 5 and all(o.confidence and o.confidence["value"] is not None for o in items)
    counts = read_manifest(run).counts["judges"]
    assert counts["ann"]["planned"] == counts["ann"]["tasks"] == 30
    assert counts["ann:item"]["planned"] == counts["ann:item"]["tasks"] == 5


def test_confidence_is_the_same_after_a_rescore(tmp_path: Path, fake_server: FakeServer) -> None:
    config = job(tmp_path, fake_server, [RELATIVE, ANNOTATORS])
    assert main(["run", str(config), "--no-live"]) == 0
    run = (tmp_path / "runs" / "latest").resolve()
    assert main(["rescore", str(run), "--output", str(tmp_path / "rescored")]) == 0
    original, rescored = confidences(run), confidences(tmp_path / "rescored")
    assert rescored == original and len(original) == 10 + 5 + 30 + 5


@pytest.mark.slow
def test_confidence_is_the_same_in_batch_mode_and_over_litellm(tmp_path: Path, fake_server: FakeServer) -> None:
    online = job(tmp_path / "online", fake_server, [RELATIVE])
    batch = job(tmp_path / "batch", fake_server, [RELATIVE])
    via_litellm = job(tmp_path / "litellm", fake_server, [{**RELATIVE, "transport": "litellm"}])
    assert main(["run", str(online), "--no-live"]) == 0
    assert main(["run", str(batch), "--no-live", "--batch"]) == 0
    assert main(["run", str(via_litellm), "--no-live"]) == 0
    expected = confidences((tmp_path / "online" / "runs" / "latest").resolve())
    assert all(c is not None and c["value"] is not None for c in expected.values())
    assert confidences((tmp_path / "batch" / "runs" / "latest").resolve()) == expected
    assert confidences((tmp_path / "litellm" / "runs" / "latest").resolve()) == expected
    lines = ((tmp_path / "batch" / "runs" / "latest") / "transcripts.jsonl").read_text(encoding="utf-8").splitlines()
    assert all("batch" in json.loads(line) for line in lines)  # every answer a batch result


def test_a_transcript_keeps_only_the_logprobs_at_the_verdict(tmp_path: Path, fake_server: FakeServer) -> None:
    config = job(tmp_path, fake_server, [RELATIVE])
    assert main(["run", str(config), "--no-live"]) == 0
    run = (tmp_path / "runs" / "latest").resolve()
    for line in (run / "transcripts.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        kept = record["response"]["logprobs"]
        assert len(kept) == 2 and kept[-1][1] in (" A", " B")  # "]" before the verdict, and the verdict


def test_the_weighted_score_is_beside_the_judges_own_unless_asked_in_its_place(
        tmp_path: Path, fake_server: FakeServer) -> None:
    absolute = {"model": "openai/gpt-4o", "protocol": "prometheus-absolute", "protocol_options": {"rubric": "helpfulness"}}
    config = job(tmp_path, fake_server, [{**absolute, "name": "beside", "confidence": "logprobs"},
                                         {**absolute, "name": "instead",
                                          "confidence": {"method": "logprobs", "score": "weighted"}}], items=4)
    (tmp_path / "items.jsonl").write_text("".join(json.dumps({"id": f"i{n}", "instruction": f"Explain {n}.",
                                                              "response": f"Because {n}."}) + "\n" for n in range(4)))
    assert main(["run", str(config), "--no-live"]) == 0
    outcomes = latest_outcome_records((tmp_path / "runs" / "latest").resolve()).values()
    beside = {o.item_id: o for o in outcomes if o.judge == "beside"}
    instead = {o.item_id: o for o in outcomes if o.judge == "instead"}
    assert len(beside) == len(instead) == 4
    for item_id, own in beside.items():
        assert own.confidence is not None and own.score == own.verdict["score"]  # type: ignore[index]
        assert own.scores["weighted"] == own.confidence["weighted"] and own.scores["weighted"] != own.score
        other = instead[item_id]
        assert other.score == own.scores["weighted"] and other.scores["raw"] == own.score
