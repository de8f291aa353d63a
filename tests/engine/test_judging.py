"""One task through judging.py without a network: prepared ahead (prompt, key, cache lookup),
answered from the cache, or unscored when its prompt cannot be rendered."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cache import AnswerCache
from judge_engine.config import JudgeConfig
from judge_engine.errors import TemplateError
from judge_engine.judging import judge_task, prepare_task
from judge_engine.lanes import Lane
from judge_engine.plan import Task, build_protocol
from judge_engine.providers.base import ProviderResponse
from judge_engine.runtime import JudgeRuntime

ITEM = {"id": "s1", "source": "Der Hund schläft.", "target": "The dog sleeps.", "source_lang": "de", "target_lang": "en"}
ANSWER = 'Critical:\nno-error\nMajor:\naccuracy/mistranslation - "dog"\nMinor:\nno-error'


class NoProvider:
    """Any call is a failure of the test: these tasks must not reach a provider."""

    async def complete(self, request: Any) -> ProviderResponse:
        raise AssertionError("the provider was called")


def _runtime() -> JudgeRuntime:
    config = JudgeConfig.model_validate({"name": "j", "model": "openai/gpt-4o-mini", "protocol": "gemba-mqm"})
    protocol = build_protocol(config)
    return JudgeRuntime(config, protocol, Lane("j", config.limits), provider=NoProvider(),  # type: ignore[arg-type]
                        template_hashes=["b2:t"])


def _task(item: dict[str, Any] = ITEM) -> Task:
    return Task(task_id="t1", judge="j", item=item, variant="", temperature=0.0, repeat=0)


def test_a_prepared_task_is_answered_from_the_cache_it_looked_up(tmp_path: Path) -> None:
    runtime, cache = _runtime(), AnswerCache(tmp_path / "cache")
    first = prepare_task(runtime, _task(), cache)
    assert first.cached is None and first.request is not None and first.key
    assert first.messages == runtime.protocol.render(ITEM) and list(first.request.messages) == first.messages
    cache.set(first.key, ProviderResponse(content=ANSWER, finish_reason="stop", prompt_tokens=10,
                                          completion_tokens=5, cost=0.001, headers={}, model="m").to_record())
    prepared = prepare_task(runtime, _task(), cache)
    assert prepared.key == first.key and prepared.cached is not None

    transcript: list[dict[str, Any]] = []
    record = asyncio.run(judge_task(runtime, prepared, cache=cache, transcript=transcript.append))
    assert record["status"] == "scored" and record["score"] == -5.0 and record["cache_hits"] == 1
    assert [line["cache_hit"] for line in transcript] == [True]
    cache.close()


def test_a_prompt_that_cannot_be_rendered_is_unscored_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime, cache = _runtime(), AnswerCache(tmp_path / "cache")

    def broken(item: Any, variant: str = "") -> Any:
        raise TemplateError("user.j2: 'source_seg' is undefined")

    monkeypatch.setattr(runtime.protocol, "render", broken)
    prepared = prepare_task(runtime, _task(), cache)
    assert prepared.request is None
    record = asyncio.run(judge_task(runtime, prepared, cache=cache, transcript=lambda line: None))
    assert record["status"] == "unscored" and record["score"] is None
    assert record["reason"] == "could not render the prompt: user.j2: 'source_seg' is undefined"
    cache.close()
