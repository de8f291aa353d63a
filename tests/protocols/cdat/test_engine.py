"""CDAT through the engine against the fake server: the first answer is the data (no re-asks),
truncated answers are read, unscorable lists keep their words, scores are what the answers imply."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from judge_engine.cli import main
from judge_engine.errors import VerdictError
from judge_engine.fake import FakeServer
from judge_engine.fake.answers import AnswerBook
from judge_engine.fake.writers.words import REFUSALS
from judge_engine.protocols.cdat import CDAT
from judge_engine.protocols.embeddings import Vectors, register_embedder
from judge_engine.protocols.lexicon import Lexicon
from tests.harness import TEST_KEY_ENV, read_lines, read_transcripts

CUES = ["release", "outset", "newspaper", "occupant", "fidelity", "beam", "operand", "dividend",
        "mess", "gossip", "station", "ladder", "fever", "arrow", "cup", "heel", "norm", "phase",
        "summary", "viola", "saloon", "dust", "scholar", "lecture"]


class HashEmbedder:
    """Deterministic vectors from a word's hash: a stand-in model with no download."""

    name = "test-hash"

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = [np.random.default_rng(int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "big"))
                .normal(size=16).astype(np.float32) for t in texts]
        return np.stack(rows)


register_embedder("test-hash", HashEmbedder)


def _job(tmp_path: Path, server: FakeServer, **judge: Any) -> Path:
    with (tmp_path / "cues.jsonl").open("w", encoding="utf-8") as handle:
        for number, cue in enumerate(CUES):
            handle.write(json.dumps({"id": f"cue-{number:03d}", "cue": cue}) + "\n")
    config = {
        "dataset": {"path": "cues.jsonl"},
        "judges": [{
            "name": "model-under-test", "model": "openai/gpt-4o-mini", "api_base": server.base_url,
            "api_key_env": TEST_KEY_ENV, "protocol": "cdat", "temperatures": [0.5, 1.0],
            "max_tokens": 110, "timeout_s": 10, "retries": {"transport": 2, "reasks": 2, "backoff_max_s": 0.05},
            **judge,
        }],
        "output": {"dir": "runs"},
        "cache": {"dir": "cache"},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return path


def _run(config: Path) -> tuple[int, list[dict[str, Any]]]:
    code = main(["run", str(config), "--no-live"])
    run = next(p for p in (config.parent / "runs").iterdir() if p.is_dir() and not p.is_symlink())
    return code, read_lines(run / "outcomes.jsonl")


def test_lists_are_scored_as_their_answers_imply_and_never_re_asked(
    tmp_path: Path, fake_server: FakeServer, packaged_lexicon: Lexicon
) -> None:
    code, outcomes = _run(_job(tmp_path, fake_server, protocol_options={"embedder": "test-hash"}))
    assert len(outcomes) == len(CUES) * 2
    assert all(o["attempts"] == 1 and o["reasks"] == 0 for o in outcomes)
    protocol = CDAT(lexicon=packaged_lexicon, embedder=HashEmbedder())
    book = AnswerBook()
    codes = set()
    for o in outcomes:
        item = {"id": o["item_id"], "cue": CUES[int(o["item_id"][-3:])]}
        answer, _ = book.answer(protocol.render(item), model="gpt-4o-mini", temperature=o["temperature"], json_mode=False)
        try:
            verdict = protocol.parse(answer, item)
        except VerdictError as error:
            assert (o["status"], o["reason_code"]) == ("unscored", error.code)
            assert o["verdict"] == error.verdict and o["verdict"]["words"] is not None
            codes.add(o["reason_code"])
            continue
        expected = protocol.score(verdict, item)
        assert o["status"] == "scored" and o["verdict"] == verdict.model_dump(mode="json")
        assert o["scores"] == pytest.approx(dict(expected.scores)) and o["score"] == pytest.approx(expected.score)
    assert codes == {"too_few_valid"}, "the fake server sends some lists with too few nouns"
    assert code == 3  # unscored tasks make the run exit 3, so CI notices


def test_an_answer_cut_off_at_max_tokens_is_read_as_it_is(
    tmp_path: Path, fake_server: FakeServer, packaged_lexicon: Lexicon
) -> None:
    # 12 fake tokens are 48 characters: every list stops after four to eight words, the last
    # one often cut mid-word ("velv"), and the method reads it all the same (a short refusal ends).
    config = _job(tmp_path, fake_server, max_tokens=12, protocol_options={"embedder": "test-hash"})
    _, outcomes = _run(config)
    transcript = read_transcripts(config.parent / "runs" / "latest")
    lists = [t for t in transcript if t["response"]["content"] not in REFUSALS]
    assert lists and {t["response"]["finish_reason"] for t in lists} == {"length"}
    assert {o["reason_code"] for o in outcomes} == {"too_few_valid", None}  # never "incomplete"
    assert all(o["attempts"] == 1 and o["reasks"] == 0 for o in outcomes)
    assert all(1 <= len(o["verdict"]["words"]) < 10 for o in outcomes)


def test_without_an_embedder_the_words_are_kept_and_the_task_says_why(
    tmp_path: Path, fake_server: FakeServer, packaged_lexicon: Lexicon
) -> None:
    _, outcomes = _run(_job(tmp_path, fake_server, protocol_options={"embedder": "none"}))
    assert {o["reason_code"] for o in outcomes} == {"too_few_valid", "not_embedded"}
    for o in outcomes:
        assert o["status"] == "unscored" and o["score"] is None and o["verdict"]["valid_words"] is not None
        if o["reason_code"] == "not_embedded":
            assert len(o["verdict"]["valid_words"]) >= 7


def test_scoring_later_costs_no_call_the_answers_come_from_the_cache(
    tmp_path: Path, fake_server: FakeServer, packaged_lexicon: Lexicon
) -> None:
    """embedder: none first, then the same judge with an embedder: a new run (the options are
    part of the judge's identity) whose every answer is a cache hit, now scored."""
    first = _job(tmp_path, fake_server, protocol_options={"embedder": "none"})
    _, before = _run(first)
    calls = fake_server.stats()["requests_total"]
    assert calls == len(CUES) * 2 and fake_server.stats()["by_protocol"] == {"cdat": calls}
    config = yaml.safe_load(first.read_text(encoding="utf-8"))
    config["judges"][0]["protocol_options"] = {"embedder": "test-hash"}
    first.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    assert main(["run", str(first), "--no-live"]) == 3
    after = read_lines(first.parent / "runs" / "latest" / "outcomes.jsonl")
    assert all(o["cache_hits"] == 1 for o in after)
    assert {o["reason_code"] for o in after} == {"too_few_valid", None}
    assert [o["verdict"] for o in after] == [o["verdict"] for o in before]
    assert fake_server.stats()["requests_total"] == calls


def test_dat_items_are_draws_of_their_own_never_another_items_cached_answer(
    tmp_path: Path, fake_server: FakeServer, packaged_lexicon: Lexicon
) -> None:
    """DAT's prompt is the same for every item, so a key of the request alone would serve the
    first item's answer to every later one (within a run, past the feeder's first batch of 32,
    and in every later run scored from the cache). The item's id is in the key."""
    (tmp_path / "samples.jsonl").write_text(
        "".join(json.dumps({"id": f"s{number:03d}"}) + "\n" for number in range(80)), encoding="utf-8")
    config = _job(tmp_path, fake_server, protocol="dat", temperatures=[1.0],
                  protocol_options={"embedder": "none"})
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["dataset"]["path"] = "samples.jsonl"
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    _, before = _run(config)
    assert fake_server.stats()["requests_total"] == 80
    assert all(o["cache_hits"] == 0 for o in before)
    raw["judges"][0]["protocol_options"] = {"embedder": "test-hash"}
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    main(["run", str(config), "--no-live"])
    after = read_lines(config.parent / "runs" / "latest" / "outcomes.jsonl")
    assert fake_server.stats()["requests_total"] == 80 and all(o["cache_hits"] == 1 for o in after)
    words = {o["item_id"]: o["verdict"]["words"] for o in before}
    assert {o["item_id"]: o["verdict"]["words"] for o in after} == words
    assert len({tuple(w) for w in words.values()}) > 40
