"""One task, start to finish: cache -> lane -> provider -> parse -> re-ask -> outcome record.

Two budgets, never mixed: transport retries (tenacity, in :func:`call_provider`) and re-asks for
unusable answers (:func:`judge_task`). 429s belong to neither: the lane waits them out.
Everything that happens is data: one transcript line per attempt, one outcome line per task.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge_engine.cache import AnswerCache, cache_key
from judge_engine.config import JudgeConfig
from judge_engine.errors import (
    DatasetError,
    FatalProviderError,
    ProviderError,
    TemplateError,
    VerdictError,
)
from judge_engine.lanes import Lane, rough_prompt_tokens
from judge_engine.plan import Task
from judge_engine.protocols import Message, Protocol
from judge_engine.providers.base import (
    ErrorClass,
    ErrorKind,
    Provider,
    ProviderRequest,
    ProviderResponse,
)
from judge_engine.retry import TransientError, with_transport_retries
from judge_engine.store import utc_now


class ItemFailure(ProviderError):
    """This request cannot succeed (context too long, content filter, too many 429s)."""


@dataclass(slots=True)
class JudgeCounters:
    """Live counters of one judge, read by the progress display."""

    total: int = 0
    done: int = 0
    resumed: int = 0
    scored: int = 0
    unscored: int = 0
    cache_hits: int = 0
    calls: int = 0
    retries: int = 0
    reasks: int = 0
    in_flight: int = 0
    cost: float = 0.0


@dataclass(slots=True)
class JudgeRuntime:
    """Everything the engine holds for one judge while it runs."""

    config: JudgeConfig
    protocol: Protocol
    lane: Lane
    provider: Provider
    template_hashes: list[str]
    counters: JudgeCounters = field(default_factory=JudgeCounters)
    stopped: str | None = None
    """Set when a fatal provider error stopped this judge (the message says why)."""
    endpoint: tuple[str, str | None] | None = None
    """(model, api_base) actually called when they differ from the config's (``--demo`` points
    every judge at the fake server); cache keys keep the config's, so they stay stable."""

    def request(self, messages: Sequence[Message], temperature: float) -> ProviderRequest:
        model, api_base = self.endpoint or (self.config.model, self.config.api_base)
        return ProviderRequest(
            model=model,
            messages=messages,
            temperature=temperature,
            max_tokens=self.config.max_tokens,
            response_format=self.protocol.response_format(),
            params=self.config.params,
            api_base=api_base,
            timeout_s=self.config.timeout_s,
        )

    def key(self, request: ProviderRequest, repeat: int) -> str:
        sampling = {"temperature": request.temperature, "max_tokens": request.max_tokens, **request.params}
        if self.config.api_base:
            sampling["api_base"] = self.config.api_base  # another server is another model
        return cache_key(
            model=self.config.model,
            messages=request.messages,
            sampling=sampling,
            response_format=request.response_format,
            protocol=self.protocol.name,
            protocol_version=self.protocol.version,
            template_hashes=self.template_hashes,
            repeat=repeat,
        )


@dataclass(slots=True)
class TaskLog:
    """What one task did, accumulated for its outcome line."""

    attempts: int = 0
    reasks: int = 0
    cache_hits: int = 0
    cost: float = 0.0
    latency_s: float = 0.0


Writer = Callable[[Mapping[str, Any]], None]


@dataclass(slots=True)
class PreparedTask:
    """A task's first request, built ahead of time: its prompt, cache key and cached answer.

    The engine's feeder prepares tasks in batches (:func:`prepare_task`), so this work runs warm,
    many tasks per wake-up, instead of cold on the wake-up of each answer (measured: ~0.2 ms of
    CPU per task cold, ~0.05 warm).
    """

    task: Task
    messages: list[Message] = field(default_factory=list)
    request: ProviderRequest | None = None
    key: str = ""
    cached: dict[str, Any] | None = None
    render_error: DatasetError | TemplateError | None = None
    """Why the prompt could not be rendered (the scan should have caught it)."""


def prepare_task(judge: JudgeRuntime, task: Task, cache: AnswerCache) -> PreparedTask:
    """Render a task's prompt and look its first request up in the answer cache."""
    try:
        messages: list[Message] = judge.protocol.render(task.item, task.variant)
    except (DatasetError, TemplateError) as exc:  # the scan should have caught it; never crash a run
        return PreparedTask(task, render_error=exc)
    request = judge.request(messages, task.temperature)
    key = judge.key(request, task.repeat)
    return PreparedTask(task, messages, request, key, cache.get(key))


async def judge_task(
    judge: JudgeRuntime, prepared: PreparedTask, *, cache: AnswerCache, transcript: Writer
) -> dict[str, Any]:
    """Judge one task prepared by :func:`prepare_task` and return its outcome record (never
    raises for per-item failures).

    Raises:
        FatalProviderError: the judge must stop (auth, bad request); no outcome is recorded.
    """
    task = prepared.task
    protocol = judge.protocol
    log = TaskLog()
    if prepared.render_error is not None:
        return outcome(judge, task, log, reason=f"could not render the prompt: {prepared.render_error}")
    request = prepared.request
    assert request is not None, "a prepared task has a request or a render error"
    messages = prepared.messages
    key, cached = prepared.key, prepared.cached
    budget = judge.config.retries.reasks
    while True:
        try:
            response = await _answer(judge, task, request, key, cached, cache=cache, transcript=transcript, log=log)
        except (ItemFailure, TransientError) as exc:
            return outcome(judge, task, log, reason=f"provider error: {exc}")
        try:
            verdict = _read(protocol, response, task)
        except VerdictError as error:
            if log.reasks >= budget:
                return outcome(judge, task, log, reason=f"unusable answer after {log.reasks} re-asks: {error}")
            log.reasks += 1
            judge.counters.reasks += 1
            messages = [
                *messages,
                {"role": "assistant", "content": response.content or ""},
                {"role": "user", "content": protocol.reask(error)},
            ]
            request = judge.request(messages, task.temperature)
            key = judge.key(request, task.repeat)
            cached = cache.get(key)
            continue
        score = protocol.score(verdict, task.item, task.variant)
        return outcome(judge, task, log, verdict=verdict.model_dump(mode="json"), score=score.score, scores=dict(score.scores))


def _read(protocol: Protocol, response: ProviderResponse, task: Task) -> Any:
    if response.finish_reason == "length":
        raise VerdictError("the answer was cut off at max_tokens; answer more briefly", raw=response.content or "")
    if not response.content or not response.content.strip():
        raise VerdictError("the answer was empty", raw="")
    return protocol.parse(response.content, task.item, task.variant)


async def _answer(
    judge: JudgeRuntime,
    task: Task,
    request: ProviderRequest,
    key: str,
    cached: dict[str, Any] | None,
    *,
    cache: AnswerCache,
    transcript: Writer,
    log: TaskLog,
) -> ProviderResponse:
    if cached is not None:
        log.cache_hits += 1
        judge.counters.cache_hits += 1
        response = ProviderResponse.from_record(cached)
        transcript(_attempt_record(task, log, request, response=response, cache_hit=True))
        return response
    response = await call_provider(judge, task, request, transcript=transcript, log=log)
    cache.set(key, response.to_record())
    return response


async def call_provider(
    judge: JudgeRuntime, task: Task, request: ProviderRequest, *, transcript: Writer, log: TaskLog
) -> ProviderResponse:
    """One request through the lane and the provider, with the transport retry budget."""
    lane: Lane = judge.lane
    counters = judge.counters
    # ~1 us; a lane may start pacing tokens at any answer (a declared limit), so always sized.
    rough_prompt = rough_prompt_tokens(request.messages)
    limit_429 = judge.config.retries.rate_limit_max

    async def attempt() -> ProviderResponse:
        rate_limited = 0
        while True:
            if judge.stopped:
                raise FatalProviderError(judge.stopped, model=request.model)
            admission = await lane.admit(rough_prompt, request.max_tokens)
            started = time.perf_counter()
            counters.in_flight += 1
            counters.calls += 1
            try:
                # litellm's timeout covers connect and read; this guard also covers a stalled
                # body or a provider SDK that ignores the timeout.
                async with asyncio.timeout(request.timeout_s * 1.5 + 1.0):
                    response = await judge.provider.complete(request)
            except Exception as exc:  # classified below; CancelledError is not an Exception
                latency = time.perf_counter() - started
                if isinstance(exc, TimeoutError):  # our own guard fired
                    failure = ErrorClass(ErrorKind.RETRY, f"timed out after {request.timeout_s:g}s")
                else:
                    failure = judge.provider.classify(exc)
                transcript(_attempt_record(task, log, request, latency=latency, error={
                    "kind": failure.kind.value, "status": failure.status, "message": failure.message}))
                if failure.kind is ErrorKind.RATE_LIMITED:
                    lane.on_rate_limited(failure.retry_after_s)
                    rate_limited += 1
                    if rate_limited >= limit_429:
                        raise ItemFailure(f"{rate_limited} rate-limit answers in a row", model=request.model) from None
                    continue
                if failure.kind is ErrorKind.RETRY:
                    raise TransientError(failure.message, model=request.model, status=failure.status) from None
                if failure.kind is ErrorKind.ITEM:
                    raise ItemFailure(failure.message, model=request.model, status=failure.status) from None
                raise FatalProviderError(failure.message, model=request.model, status=failure.status) from None
            finally:
                counters.in_flight -= 1
            latency = time.perf_counter() - started
            lane.on_success(admission, response.prompt_tokens, response.completion_tokens, response.headers)
            log.cost += response.cost
            counters.cost += response.cost
            log.latency_s += latency
            transcript(_attempt_record(task, log, request, response=response, latency=latency))
            return response

    def on_retry(error: BaseException, attempt_number: int) -> None:
        counters.retries += 1
        lane.stats.retries += 1

    return await with_transport_retries(
        attempt,
        retries=judge.config.retries.transport,
        backoff_max_s=judge.config.retries.backoff_max_s,
        on_retry=on_retry,
    )


def _attempt_record(
    task: Task,
    log: TaskLog,
    request: ProviderRequest,
    *,
    response: ProviderResponse | None = None,
    error: Mapping[str, Any] | None = None,
    latency: float = 0.0,
    cache_hit: bool = False,
) -> dict[str, Any]:
    log.attempts += 1
    record: dict[str, Any] = {
        "task_id": task.task_id,
        "judge": task.judge,
        "item_id": task.item_id,
        "attempt": log.attempts,
        "reask": log.reasks,
        "at": utc_now(),
        "request": request.as_sent(),
        "cache_hit": cache_hit,
        "latency_s": round(latency, 4),
    }
    if response is not None:
        record["response"] = response.to_record()
        record["usage"] = {"prompt_tokens": response.prompt_tokens, "completion_tokens": response.completion_tokens}
        record["cost"] = 0.0 if cache_hit else response.cost
    if error is not None:
        record["error"] = dict(error)
    return record


def outcome(
    judge: JudgeRuntime,
    task: Task,
    log: TaskLog,
    *,
    verdict: Mapping[str, Any] | None = None,
    score: float | None = None,
    scores: Mapping[str, float] | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """The outcome line of one task: scored with its verdict, or unscored with the reason."""
    scored = reason is None
    counters = judge.counters
    counters.done += 1
    if scored:
        counters.scored += 1
    else:
        counters.unscored += 1
    return {
        "task_id": task.task_id,
        "item_id": task.item_id,
        "judge": task.judge,
        "protocol": judge.protocol.name,
        "protocol_version": judge.protocol.version,
        "model": judge.config.model,
        "temperature": task.temperature,
        "repeat": task.repeat,
        "variant": task.variant,
        "status": "scored" if scored else "unscored",
        "score": score,
        "scores": dict(scores or {}),
        "verdict": dict(verdict) if verdict is not None else None,
        "reason": reason,
        "attempts": log.attempts,
        "reasks": log.reasks,
        "cache_hits": log.cache_hits,
        "cost": round(log.cost, 8),
        "latency_s": round(log.latency_s, 4),
        "at": utc_now(),
    }
