"""One task through judging.py without a network: prepared ahead (prompt, key, cache lookup),
answered from the cache, or unscored when its prompt cannot be rendered."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from judge_engine.errors import TemplateError
from judge_engine.inputs.config import JudgeConfig
from judge_engine.lanes import Lane
from judge_engine.planning.plan import Task, build_protocol
from judge_engine.providers import Endpoint
from judge_engine.providers.base import ProviderResponse
from judge_engine.rundir.records import TranscriptRecord
from judge_engine.running.cache import AnswerCache
from judge_engine.running.runtime import JudgeRuntime
from judge_engine.running.task import judge_task, prepare_task

ITEM = {"id": "s1", "source": "Der Hund schläft.", "target": "The dog sleeps.", "source_lang": "de", "target_lang": "en"}
ANSWER = 'Critical:\nno-error\nMajor:\naccuracy/mistranslation - "dog"\nMinor:\nno-error'


class NoProvider:
    """Any call is a failure of the test: these tasks must not reach a provider."""

    async def complete(self, request: Any) -> ProviderResponse:
        raise AssertionError("the provider was called")


def _runtime(provider: Any = None) -> JudgeRuntime:
    config = JudgeConfig.model_validate({"name": "j", "model": "openai/gpt-4o-mini", "protocol": "gemba-mqm"})
    protocol = build_protocol(config)
    return JudgeRuntime(config, protocol, Endpoint(config.model, config.api_base), ["b2:t"],
                        lane=Lane("j", config.limits), provider=provider or NoProvider())


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

    transcript: list[TranscriptRecord] = []
    record = asyncio.run(judge_task(runtime, prepared, cache=cache, transcript=transcript.append))
    assert record.status == "scored" and record.score == -5.0 and record.cache_hits == 1
    assert [line.to_dict()["cache_hit"] for line in transcript] == [True]
    cache.close()


def test_a_prompt_that_cannot_be_rendered_is_unscored_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime, cache = _runtime(), AnswerCache(tmp_path / "cache")

    def broken(item: Any, variant: str = "") -> Any:
        raise TemplateError("user.j2: 'source_seg' is undefined")

    monkeypatch.setattr(runtime.protocol, "render", broken)
    prepared = prepare_task(runtime, _task(), cache)
    assert prepared.request is None
    record = asyncio.run(judge_task(runtime, prepared, cache=cache, transcript=lambda line: None))
    assert record.status == "unscored" and record.score is None
    assert record.reason == "could not render the prompt: user.j2: 'source_seg' is undefined"
    assert record.reason_code == "render_error"
    cache.close()


def test_a_bug_in_render_is_a_protocol_error_with_its_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime, cache = _runtime(), AnswerCache(tmp_path / "cache")

    def broken(item: Any, variant: str = "") -> Any:
        return item["no such field"]

    monkeypatch.setattr(runtime.protocol, "render", broken)
    transcript: list[TranscriptRecord] = []
    record = asyncio.run(judge_task(runtime, prepare_task(runtime, _task(), cache), cache=cache,
                                    transcript=transcript.append))
    assert record.status == "unscored" and record.reason_code == "protocol_error"
    line = transcript[0].to_dict()
    assert line["event"] == "protocol_error" and "KeyError" in line["traceback"]
    cache.close()


class FilteredProvider:
    """A provider whose content filter blocks every answer (a 200 with finish_reason content_filter)."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: Any) -> ProviderResponse:
        self.calls += 1
        return ProviderResponse(content=None, finish_reason="content_filter", prompt_tokens=10, completion_tokens=0,
                                cost=0.0, headers={}, model="m")


def test_an_answer_blocked_by_the_content_filter_is_unscored_without_a_reask(tmp_path: Path) -> None:
    provider = FilteredProvider()
    runtime, cache = _runtime(provider), AnswerCache(tmp_path / "cache")
    record = asyncio.run(judge_task(runtime, prepare_task(runtime, _task(), cache), cache=cache,
                                    transcript=lambda line: None))
    assert record.status == "unscored" and record.reason_code == "content_filter"
    assert provider.calls == 1 and record.reasks == 0  # re-asking a filtered request cannot help
    cache.close()


def test_a_computed_score_outside_the_protocols_range_is_never_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from judge_engine.protocols.base import Score

    runtime, cache = _runtime(), AnswerCache(tmp_path / "cache")
    prepared = prepare_task(runtime, _task(), cache)
    cache.set(prepared.key, ProviderResponse(content=ANSWER, finish_reason="stop", prompt_tokens=10,
                                             completion_tokens=5, cost=0.0, headers={}, model="m").to_record())
    monkeypatch.setattr(runtime.protocol, "score", lambda verdict, item, variant="": Score(-30.0))
    record = asyncio.run(judge_task(runtime, prepare_task(runtime, _task(), cache), cache=cache,
                                    transcript=lambda line: None))
    assert record.status == "unscored" and record.reason_code == "protocol_error"
    assert "outside its range -25..0" in record.reason
    cache.close()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_score_breakdown_is_never_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        value: float) -> None:
    """JSON has no NaN: a breakdown holding one was stored as null in a line that said scored."""
    from judge_engine.protocols.base import Score

    runtime, cache = _runtime(), AnswerCache(tmp_path / "cache")
    prepared = prepare_task(runtime, _task(), cache)
    cache.set(prepared.key, ProviderResponse(content=ANSWER, finish_reason="stop", prompt_tokens=10,
                                             completion_tokens=5, cost=0.0, headers={}, model="m").to_record())
    monkeypatch.setattr(runtime.protocol, "score", lambda verdict, item, variant="": Score(-1.0, {"x": value}))
    record = asyncio.run(judge_task(runtime, prepare_task(runtime, _task(), cache), cache=cache,
                                    transcript=lambda line: None))
    assert record.status == "unscored" and record.reason_code == "protocol_error"
    assert "breakdown" in str(record.reason) and record.score is None
    cache.close()
