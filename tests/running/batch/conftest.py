"""Batch-mode harness: the fake server's batch APIs on 127.0.0.1 (real HTTP, nothing patched)
and GEMBA-MQM jobs whose judge runs in batch mode, polling every fraction of a second."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.batches import request_draws
from judge_engine.fake.config import FakeBatchConfig
from tests.harness import Job, _merge, make_job

ANTHROPIC_MODEL = "anthropic/claude-haiku-4-5"


@pytest.fixture
def batch_server() -> Iterator[FakeServer]:
    with FakeServer(FakeConfig(batch=FakeBatchConfig(processing_s=0.3))) as server:
        yield server


def batch_job(tmp_path: Path, server: FakeServer, *, items: int = 20, batch: dict[str, Any] | None = None,
              judge: dict[str, Any] | None = None, anthropic: bool = False) -> Job:
    """A GEMBA-MQM job whose judge runs in batch mode against ``server`` (``anthropic``: an
    Anthropic model, so Anthropic's Message Batches)."""
    settings = _merge({"poll_interval_s": 0.05, "fallback": "batch"}, batch or {})
    extra: dict[str, Any] = {"mode": "batch", "batch": settings}
    if anthropic:
        extra.update(model=ANTHROPIC_MODEL, api_base=server.url)
    return make_job(tmp_path, server, items=items, judge=_merge(extra, judge or {}))


def rounds_needed(task_id: str, config: FakeBatchConfig, *, max_rounds: int, seed: int = 0) -> int:
    """How many batch rounds the fake server makes a task take: each round's request draws, from
    its custom id, whether it fails, expires or answers empty; the first one that does none of
    these ends it (no content faults are configured where this is used)."""
    for round_ in range(1, max_rounds + 1):
        fail, expire, empty = request_draws(f"{task_id.removeprefix('b2:')}-{round_}", seed)
        if not (fail < config.failure_rate or expire < config.expire_rate or empty < config.empty_rate):
            return round_
    return max_rounds
