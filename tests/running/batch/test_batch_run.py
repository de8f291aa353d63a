"""Batch-mode runs end to end against the fake server's batch APIs (OpenAI's and Anthropic's)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from judge_engine.fake import FakeServer
from judge_engine.fake.batches import request_draws
from judge_engine.providers.catalog import batch_cost_per_token
from judge_engine.rundir.store import iter_batch_lines
from judge_engine.running import session
from tests.harness import TEST_KEY, expected_gemba_score, read_lines, read_transcripts
from tests.running.batch.conftest import ANTHROPIC_MODEL, batch_job, rounds_needed


def _items(job_dir: Path) -> dict[str, dict[str, object]]:
    return {row["id"]: row for row in map(json.loads, (job_dir / "items.jsonl").read_text().splitlines())}


def _answers_by_task(run: Path) -> dict[str, list[dict[str, object]]]:
    found: dict[str, list[dict[str, object]]] = {}
    for line in read_transcripts(run):
        found.setdefault(str(line["task_id"]), []).append(line)
    return found


def test_a_batch_run_scores_every_task_once_as_the_fake_answers_and_records_each_batch_result(
        tmp_path: Path, batch_server: FakeServer) -> None:
    job = batch_job(tmp_path, batch_server, items=30, batch={"max_requests_per_file": 12})
    result = session.run(job.config)
    run = job.only_run()
    assert result.status == "completed" and result.counts.scored == 30
    outcomes = read_lines(run / "outcomes.jsonl")
    assert Counter(o["task_id"] for o in outcomes).most_common(1)[0][1] == 1 and len(outcomes) == 30
    items = _items(job.dir)
    for o in outcomes:  # what the fake's well-formed answer implies, as online
        assert o["score"] == expected_gemba_score(items[o["item_id"]], 0.0)
    # Three chunks of at most 12 requests; one submission per task; no chat call at all.
    stats = batch_server.stats()
    assert stats["batches"] == 3 and stats["requests_total"] == 0
    assert set(stats["batch_submissions"].values()) == {1} and len(stats["batch_submissions"]) == 30
    # Each result is one transcript line: the request as sent, the batch and custom ids, and its
    # cost at the batch price (litellm's table for gpt-4o-mini: half the online price).
    prices = batch_cost_per_token("openai/gpt-4o-mini")
    assert prices is not None and prices[2]
    for lines in _answers_by_task(run).values():
        (line,) = lines
        batch = line["batch"]
        assert batch["id"].startswith("batch_") and batch["custom_id"] == f"{line['task_id'][3:]}-1"
        usage = line["usage"]
        assert line["cost"] == pytest.approx(usage["prompt_tokens"] * prices[0] + usage["completion_tokens"] * prices[1])
        assert line["request"]["messages"][0]["role"] == "system"
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["spend"]["total"]["calls"] == 30
    # The request files and downloaded results are gone once collected; the ledger says so.
    assert not list((run / "batches").iterdir())
    events = Counter(line.to_dict()["event"] for line in iter_batch_lines(run))
    assert events["intent"] == events["submitted"] == events["collected"] == 3
    assert not any(TEST_KEY.encode() in path.read_bytes() for path in run.rglob("*") if path.is_file())


def test_batch_answers_are_cached_like_online_ones_so_the_same_job_online_sends_nothing(
        tmp_path: Path, batch_server: FakeServer) -> None:
    job = batch_job(tmp_path, batch_server, items=12)
    session.run(job.config)
    online = session.run(job.config, overrides={}, new_run=True)  # same cache keys: every answer is there
    assert online.counts.scored == 12
    assert batch_server.stats()["requests_total"] == 0  # mode: batch is still in the config, and nothing is sent
    text = job.config.read_text().replace("mode: batch", "mode: online")
    job.config.write_text(text)
    again = session.run(job.config, new_run=True)
    assert again.counts.scored == 12 and batch_server.stats()["requests_total"] == 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ten_thousand_tasks_with_failed_and_expired_requests_end_once_each_resent_once(
        tmp_path: Path, batch_server: FakeServer) -> None:
    """The acceptance run: 2% of requests fail and 1% expire (their batches end ``expired`` with
    the others' results); each of them goes into the next round once, and only they do."""
    batch_server.update(batch={"processing_s": 0.5, "failure_rate": 0.02, "expire_rate": 0.01})
    job = batch_job(tmp_path, batch_server, items=10_000, batch={"max_requests_per_file": 2_500},
                    judge={"limits": {"concurrency": 4}})
    result = session.run(job.config)
    run = job.only_run()
    assert result.status == "completed" and result.counts.tasks == 10_000
    outcomes = read_lines(run / "outcomes.jsonl")
    assert len(outcomes) == 10_000 == len({o["task_id"] for o in outcomes})
    config = batch_server.config.batch
    submitted = batch_server.stats()["batch_submissions"]
    expected = {o["task_id"]: rounds_needed(o["task_id"], config, max_rounds=3) for o in outcomes}
    resent = sum(1 for n in expected.values() if n > 1)
    assert 200 <= resent <= 400  # ~3% of 10,000
    assert {f"b2:{task}": n for task, n in submitted.items()} == expected
    statuses = {s for s in (line.to_dict().get("status") for line in iter_batch_lines(run)) if s}
    assert "expired" in statuses  # a batch ended expired, with partial results
    # Nothing without an answer was judged: every scored task's last attempt has an answer.
    by_task = _answers_by_task(run)
    for o in outcomes:
        last = by_task[o["task_id"]][-1]
        if o["status"] == "scored":
            assert last["response"]["content"]
    assert all(o["status"] == "scored" or o["reason_code"] == "transport_exhausted" for o in outcomes)


@pytest.mark.slow
def test_empty_results_are_sent_again_never_read_nor_re_asked(tmp_path: Path, batch_server: FakeServer) -> None:
    """An empty result is not an answer (flexeval judged failed requests' empty strings): the
    same request goes into the next round, like a failed one; it is never scored, re-asked
    (which would hand the model an empty turn of its own) or cached."""
    batch_server.update(batch={"empty_rate": 0.25})
    job = batch_job(tmp_path, batch_server, items=40, batch={"max_rounds": 4})
    result = session.run(job.config)
    run = job.only_run()
    items = _items(job.dir)
    empties = 0
    for lines in _answers_by_task(run).values():
        answered = [line for line in lines if line.get("response")]
        for before, after in zip(answered, answered[1:], strict=False):
            if not before["response"]["content"]:
                assert before["error"]["message"].startswith("empty")
                assert after["reask"] == before["reask"]  # the same request again, not a re-ask
        empties += sum(1 for line in answered if not line["response"]["content"])
    assert empties >= 5
    for o in read_lines(run / "outcomes.jsonl"):
        if o["status"] == "scored":
            assert o["score"] == expected_gemba_score(items[o["item_id"]], 0.0) and o["reasks"] == 0
        else:
            assert o["reason_code"] == "transport_exhausted" and "came back empty" in o["reason"]
    assert result.counts.tasks == 40 and result.counts.scored >= 38


def test_fallback_online_sends_failed_and_expired_requests_through_the_lane(
        tmp_path: Path, batch_server: FakeServer) -> None:
    batch_server.update(batch={"failure_rate": 0.1, "expire_rate": 0.1})
    job = batch_job(tmp_path, batch_server, items=60, batch={"fallback": "online"})
    result = session.run(job.config)
    run = job.only_run()
    assert result.counts.scored == 60
    stats = batch_server.stats()
    assert set(stats["batch_submissions"].values()) == {1}  # one batch round, the rest online
    carried = [line for line in iter_batch_lines(run) if line.to_dict()["event"] == "carry"]
    assert carried and stats["requests_total"] == len(carried)
    assert {line.to_dict()["to"] for line in carried} == {"online"}
    online = [line for lines in _answers_by_task(run).values() for line in lines if line.get("response")
              and not line.get("batch")]
    assert len(online) == len(carried)
    outcomes = read_lines(run / "outcomes.jsonl")
    assert len({o["task_id"] for o in outcomes}) == 60
    # The outcome counts the whole task: its batch attempt and its online one.
    moved = {line.to_dict()["task_id"] for line in carried}
    assert all(o["attempts"] == 2 for o in outcomes if o["task_id"] in moved)


def test_after_the_last_round_a_request_that_keeps_failing_ends_transport_exhausted(
        tmp_path: Path, batch_server: FakeServer) -> None:
    batch_server.update(batch={"failure_rate": 1.0})
    job = batch_job(tmp_path, batch_server, items=6, batch={"max_rounds": 2})
    result = session.run(job.config)
    assert result.counts.unscored_by_code == {"transport_exhausted": 6}
    assert set(batch_server.stats()["batch_submissions"].values()) == {2}


def test_malformed_answers_are_re_asked_in_the_next_round_with_the_conversation(
        tmp_path: Path, batch_server: FakeServer) -> None:
    batch_server.update(malformed_rate=0.3, seed=3)
    job = batch_job(tmp_path, batch_server, items=30)
    result = session.run(job.config)
    run = job.only_run()
    reasked = [line for lines in _answers_by_task(run).values() for line in lines if line["reask"] > 0]
    assert reasked
    for line in reasked:
        messages = line["request"]["messages"]
        assert messages[-2]["role"] == "assistant" and messages[-1]["role"] == "user"
        assert line["batch"]["custom_id"].endswith(f"-{line['reask'] + 1}")
    items = _items(job.dir)
    for o in read_lines(run / "outcomes.jsonl"):
        if o["status"] == "scored":
            assert o["score"] == expected_gemba_score(items[o["item_id"]], 0.0)
    assert result.counts.tasks == 30


def test_an_anthropic_batch_run(tmp_path: Path, batch_server: FakeServer) -> None:
    """Anthropic's Message Batches: the requests in Anthropic's own format (system apart, content
    blocks), results read from the results URL, costs at Anthropic's batch prices."""
    batch_server.update(batch={"failure_rate": 0.1, "expire_rate": 0.05})
    job = batch_job(tmp_path, batch_server, items=40, anthropic=True, batch={"max_requests_per_file": 15})
    result = session.run(job.config)
    run = job.only_run()
    assert result.status == "completed"
    outcomes = read_lines(run / "outcomes.jsonl")
    assert len(outcomes) == 40 == len({o["task_id"] for o in outcomes})
    items = _items(job.dir)
    for o in outcomes:
        if o["status"] == "scored":
            assert o["score"] == expected_gemba_score(items[o["item_id"]], 0.0, ANTHROPIC_MODEL)
    assert {line.to_dict().get("api") for line in iter_batch_lines(run)} >= {"anthropic"}
    config = batch_server.config.batch
    expected = {o["task_id"]: rounds_needed(o["task_id"], config, max_rounds=3) for o in outcomes}
    assert {f"b2:{t}": n for t, n in batch_server.stats()["batch_submissions"].items()} == expected
    prices = batch_cost_per_token("anthropic/claude-haiku-4-5")
    assert prices is not None
    line = next(line for lines in _answers_by_task(run).values() for line in lines if line.get("response"))
    assert line["batch"]["id"].startswith("msgbatch_")
    assert line["cost"] == pytest.approx(line["usage"]["prompt_tokens"] * prices[0]
                                         + line["usage"]["completion_tokens"] * prices[1])


@pytest.mark.slow
def test_the_providers_quota_is_waited_out_and_refused_batches_are_not_submissions(
        tmp_path: Path, batch_server: FakeServer) -> None:
    """A quota of about two chunks: the third is refused until one ends; nothing is lost or
    sent twice (a refused batch processed nothing)."""
    batch_server.update(batch={"processing_s": 0.4, "max_enqueued_tokens": 30_000})
    job = batch_job(tmp_path, batch_server, items=40, batch={"max_requests_per_file": 8})
    result = session.run(job.config)
    stats = batch_server.stats()
    assert result.counts.scored == 40
    assert stats["batches_refused"] > 0
    assert set(stats["batch_submissions"].values()) == {1} and len(stats["batch_submissions"]) == 40


@pytest.mark.slow
def test_a_judge_that_knows_its_quota_is_never_refused(tmp_path: Path, batch_server: FakeServer) -> None:
    batch_server.update(batch={"processing_s": 0.4, "max_enqueued_tokens": 30_000})
    job = batch_job(tmp_path, batch_server, items=40, batch={"max_requests_per_file": 8,
                                                             "max_enqueued_tokens": 28_000})
    result = session.run(job.config)
    assert result.counts.scored == 40 and batch_server.stats()["batches_refused"] == 0


def test_a_quota_below_one_chunk_stops_the_judge_with_what_to_do(tmp_path: Path, batch_server: FakeServer) -> None:
    batch_server.update(batch={"max_enqueued_tokens": 1_000})
    job = batch_job(tmp_path, batch_server, items=4, batch={"poll_interval_s": 0.01})
    result = session.run(job.config)
    assert result.status == "failed"
    assert "max_enqueued_tokens" in result.failures["mqm"]
    assert batch_server.stats()["batch_submissions"] == {}


def test_a_wrong_key_or_an_unreachable_endpoint_stops_the_judge_and_records_no_outcome(
        tmp_path: Path, batch_server: FakeServer) -> None:
    batch_server.update(require_api_key="the-right-key")
    (tmp_path / "key").mkdir()
    (tmp_path / "port").mkdir()
    job = batch_job(tmp_path / "key", batch_server, items=5)
    result = session.run(job.config)
    assert result.status == "failed" and "401" in result.failures["mqm"]
    assert not read_lines(job.only_run() / "outcomes.jsonl")
    batch_server.update(require_api_key=None)
    unreachable = batch_job(tmp_path / "port", batch_server, items=5, judge={"api_base": "http://127.0.0.1:9/v1"})
    result = session.run(unreachable.config)
    assert result.status == "failed" and "cannot reach" in result.failures["mqm"]
    assert batch_server.stats()["batch_submissions"] == {}


def test_resume_retry_judges_a_batch_runs_unscored_tasks_again_once(tmp_path: Path, batch_server: FakeServer) -> None:
    """Tasks that went on online and ended unscored are judged again by ``--retry`` from the
    start, once: their old online carries are not sent again beside them."""
    batch_server.update(malformed_rate=1.0)
    job = batch_job(tmp_path, batch_server, items=6, batch={"fallback": "online"}, judge={"retries": {"reasks": 1}})
    first = session.run(job.config)
    assert first.counts.unscored_by_code == {"unreadable": 6}
    batch_server.update(malformed_rate=0.0)
    document = yaml.safe_load(job.config.read_text())
    document["cache"]["enabled"] = False  # the cache would hand back the same unreadable answers
    job.config.write_text(yaml.safe_dump(document))
    again = session.resume(job.only_run(), retry="unreadable")
    assert again.counts.scored == 6
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert Counter(o["task_id"] for o in outcomes) == Counter({o["task_id"]: 2 for o in outcomes})
    # from the start, in a batch: a fresh first attempt, not the old conversation carried on online
    assert all(o["attempts"] == 1 and o["reasks"] == 0 for o in outcomes[6:])
    assert set(batch_server.stats()["batch_submissions"].values()) == {2}


@pytest.mark.slow
def test_resume_retry_carries_a_retried_tasks_failed_request_into_the_next_round(
        tmp_path: Path, batch_server: FakeServer) -> None:
    """A task judged again by ``--retry`` whose fresh request fails in its batch goes on to the
    next round like any other (the old carries of retried tasks are moot, not the new ones)."""
    batch_server.update(malformed_rate=1.0, batch={"failure_rate": 0.4})
    job = batch_job(tmp_path, batch_server, items=10, batch={"max_rounds": 3}, judge={"retries": {"reasks": 0}})
    assert session.run(job.config).counts.scored == 0
    batch_server.update(malformed_rate=0.0)
    document = yaml.safe_load(job.config.read_text())
    document["cache"]["enabled"] = False  # the cache would hand back the same unreadable answers
    job.config.write_text(yaml.safe_dump(document))
    tasks = [o["task_id"] for o in read_lines(job.only_run() / "outcomes.jsonl")]
    failing = {t: sum(request_draws(f"{t[3:]}-{r}")[0] < 0.4 for r in (1, 2, 3)) for t in tasks}
    assert any(0 < n < 3 for n in failing.values())  # the same draws fail their first rounds again
    again = session.resume(job.only_run(), retry="unscored")
    assert again.counts.scored == sum(n < 3 for n in failing.values())
    assert again.counts.unscored_by_code == ({"transport_exhausted": 10 - again.counts.scored} if again.counts.unscored
                                             else {})
    outcomes = read_lines(job.only_run() / "outcomes.jsonl")
    assert Counter(o["task_id"] for o in outcomes) == Counter({o["task_id"]: 2 for o in outcomes})


def test_a_batch_run_is_rescored_from_its_transcripts_without_a_batch_or_a_call(
        tmp_path: Path, batch_server: FakeServer) -> None:
    batch_server.update(batch={"failure_rate": 0.2})
    job = batch_job(tmp_path, batch_server, items=20)
    session.run(job.config)
    submitted = dict(batch_server.stats()["batch_submissions"])
    from judge_engine.cli import main

    assert main(["rescore", str(job.only_run()), "--output", str(tmp_path / "rescored")]) in (0, 3)
    stats = batch_server.stats()
    assert stats["batch_submissions"] == submitted and stats["requests_total"] == 0
    rescored = read_lines(tmp_path / "rescored" / "outcomes.jsonl")
    original = {o["task_id"]: o["score"] for o in read_lines(job.only_run() / "outcomes.jsonl")}
    assert {o["task_id"]: o["score"] for o in rescored} == original  # the failed attempts skipped, answers replayed


def test_a_budget_in_batch_mode_sends_no_chunk_past_the_limit_collects_what_was_sent_and_resume_continues(
        tmp_path: Path, batch_server: FakeServer) -> None:
    from judge_engine.cli import main

    (tmp_path / "free").mkdir()
    (tmp_path / "capped").mkdir()
    free = batch_job(tmp_path / "free", batch_server, items=60, batch={"max_requests_per_file": 10})
    assert session.run(free.config).status == "completed"
    whole = json.loads((free.only_run() / "run.json").read_text())["spend"]["total"]["cost"]
    chunk = whole / 6  # six chunks of ten requests, about alike
    batch_server.reset()

    job = batch_job(tmp_path / "capped", batch_server, items=60, batch={"max_requests_per_file": 10})
    budget = round(whole / 2, 8)
    assert main(["run", str(job.config), "--no-live", "--budget", str(budget)]) == 4
    run = job.only_run()
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "stopped" and manifest["stopped"]["reason"] == "budget"
    spent = manifest["spend"]["total"]["cost"]
    # Each chunk is committed at its estimate before it is sent, so the spend stays under the
    # limit, within a chunk or two (the estimate counts a typical answer and bytes / 4 tokens);
    # the chunks sent were collected (paid for), none was left at the provider.
    assert budget - 2 * chunk <= spent <= budget + chunk * 0.01, (spent, budget, chunk)
    events = Counter(line.to_dict()["event"] for line in iter_batch_lines(run))
    assert 0 < events["intent"] == events["submitted"] == events["collected"] < 6
    done = read_lines(run / "outcomes.jsonl")
    assert len(done) == 10 * events["collected"]
    assert main(["resume", str(run), "--no-live", "--budget", "5"]) == 0
    outcomes = read_lines(run / "outcomes.jsonl")
    assert len(outcomes) == 60 == len({o["task_id"] for o in outcomes})  # every task once, none paid twice
    assert set(batch_server.stats()["batch_submissions"].values()) == {1}
