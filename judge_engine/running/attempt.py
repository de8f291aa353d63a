"""One provider attempt, and the transport retry budget around it.

A request waits for its lane, goes to the provider, and becomes a transcript line whatever
happens; the adapter's :class:`~judge_engine.providers.base.ErrorClass` decides what follows: a
429 goes back to the lane, a transient failure to tenacity's backoff (``retries.transport``), a
per-request rejection ends the task (:class:`ItemFailure`), anything else stops the judge. A
failure on our own side before the request left (:class:`LocalRequestError`) is not a call: it
writes no transcript line and stops the judge with its cause.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from judge_engine.errors import (
    Abandoned,
    FatalProviderError,
    ItemFailure,
    LocalRequestError,
    ReasonCode,
    TransientError,
)
from judge_engine.lanes import Lane, rough_prompt_tokens
from judge_engine.planning.plan import Task
from judge_engine.providers.base import ErrorClass, ErrorKind, ProviderRequest, ProviderResponse
from judge_engine.providers.catalog import cost_per_token, priced_as
from judge_engine.rundir.blocks import item_values
from judge_engine.rundir.records import AttemptRecord, TranscriptRecord
from judge_engine.rundir.store import utc_now
from judge_engine.running.retry import with_transport_retries
from judge_engine.running.runtime import JudgeRuntime


@dataclass(slots=True)
class TaskLog:
    """What one task did, accumulated for its outcome line."""

    attempts: int = 0
    reasks: int = 0
    cache_hits: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    reached: bool = False
    """Some attempt got an answer from the provider (any HTTP status, or a cached answer)."""


Writer = Callable[[TranscriptRecord], None]
"""Where transcript lines go (the run store's ``write_transcript``)."""


async def call_provider(
    judge: JudgeRuntime, task: Task, request: ProviderRequest, *, transcript: Writer, log: TaskLog
) -> ProviderResponse:
    """One request through a deployment's lane and provider, with the transport retry budget.

    With several deployments, each attempt goes where it can be sent soonest, and a deployment
    that fails (cooling down, or left out) hands the request to another at once, outside the
    transport budget (:mod:`judge_engine.running.routing`)."""
    assert judge.router is not None
    router = judge.router
    counters = judge.counters
    # ~1 us; a lane may start pacing tokens at any answer (a declared limit), so always sized.
    rough_prompt = rough_prompt_tokens(request.messages)
    limit_429 = judge.config.retries.rate_limit_max
    last: list[Lane] = [judge.lane]
    name, guard = judge.config.name, judge.guard if judge.guard is not None and judge.guard.active else None

    def booked(lane: Lane) -> BilledEstimate:
        """What an attempt billed but not read costs (:func:`billed_estimate`), counted as spent."""
        estimate = billed_estimate(judge.config.model, rough_prompt * lane.estimate.prompt_ratio, request.max_tokens,
                                   lane.estimate.completion)
        log.cost += estimate.cost
        counters.cost += estimate.cost
        return estimate

    async def attempt() -> ProviderResponse:
        rate_limited = 0
        while True:
            if judge.stopped:
                raise FatalProviderError(judge.stopped, model=request.model)
            if judge.stopping or (guard is not None and guard.stopped_for(name)):
                raise Abandoned()
            judge.interruptible(True)  # waiting for a deployment and its lane: a stop cancels this task
            deployment = await router.acquire(rough_prompt, request.max_tokens)
            committed = 0.0
            try:
                lane = last[0] = deployment.lane
                admission = await lane.admit(rough_prompt, request.max_tokens)
                judge.interruptible(False)
                if guard is not None:  # the request's estimated cost, committed before it is sent
                    completion = lane.estimate.completion or float(min(request.max_tokens or 256, 256))
                    committed = guard.estimate(name, rough_prompt * lane.estimate.prompt_ratio, completion)
                    if guard.admit(name, committed) is not None:
                        committed = 0.0
                        raise Abandoned()  # a budget is reached: left undone, resume continues it
                sent = deployment.aim(request)
                started = time.perf_counter()
                counters.in_flight += 1
                counters.calls += 1
                deployment.sent += 1  # every call that leaves has its transcript line (429s included)
                try:
                    if deployment.provider_enforces_timeout:
                        response = await deployment.provider.complete(sent)
                    else:
                        # litellm's timeout covers connect and read; this guard also covers a
                        # stalled body or a provider SDK that ignores the timeout.
                        async with asyncio.timeout(request.timeout_s * 1.5 + 1.0):
                            response = await deployment.provider.complete(sent)
                except asyncio.CancelledError:
                    # Abandoned in flight (a second Ctrl-C, or the first one's grace period ran
                    # out): the request went out and may be charged, so the run records it as a
                    # call with no answer rather than forgetting it.
                    transcript(attempt_record(task, log, sent, latency=time.perf_counter() - started, estimate=booked(lane),
                                              error={"kind": "abandoned", "status": None, "message": "abandoned in "
                                                     "flight at a stop: the provider may have answered (and charged)"}))
                    counters.abandoned += 1
                    raise
                except Exception as exc:  # classified below; CancelledError is not an Exception
                    latency = time.perf_counter() - started
                    failure = deployment.provider.classify(exc)
                    if isinstance(exc, TimeoutError) and failure.kind is not ErrorKind.FATAL:
                        # our own guard fired, or the client's timeout (a connection to a proxy that
                        # drops what it is sent is the adapter's to call fatal): sent, its fate unknown
                        # unless no connection was made (the adapter's classification says which)
                        failure = ErrorClass(ErrorKind.RETRY, f"timed out after {request.timeout_s:g}s",
                                             unreachable=failure.unreachable, billed=failure.billed)
                    if failure.kind is ErrorKind.LOCAL:  # nothing left: no call, no transcript line
                        counters.calls -= 1
                        deployment.sent -= 1
                        lane.stats.requests -= 1
                        raise LocalRequestError(
                            f"{failure.message.rstrip('. ')}. Our side failed before the request left, so nothing was sent; "
                            "check the judge's settings (timeout_s, api_base, its key, params), then resume the run",
                            model=request.model) from None
                    log.reached = log.reached or not failure.unreachable
                    estimate = booked(lane) if failure.billed else None  # the provider may have charged it
                    transcript(attempt_record(task, log, sent, latency=latency, estimate=estimate, error={
                        "kind": failure.kind.value, "status": failure.status, "message": failure.message,
                        **({"code": str(failure.code)} if failure.code else {})}))
                    if failure.kind is ErrorKind.RATE_LIMITED:
                        lane.on_rate_limited(failure.retry_after_s)
                        rate_limited += 1
                        if rate_limited >= limit_429:
                            raise ItemFailure(f"{rate_limited} rate-limit answers in a row", model=request.model,
                                              code=ReasonCode.RATE_LIMITED) from None
                        continue
                    if router.failed(deployment, failure):
                        continue  # this deployment cools down or is left out: another one takes over
                    if failure.kind is ErrorKind.RETRY:
                        judge.interruptible(True)  # the backoff before the retry: a stop cancels it
                        raise TransientError(failure.message, model=request.model, status=failure.status) from None
                    if failure.kind is ErrorKind.ITEM:
                        raise ItemFailure(failure.message, model=request.model, status=failure.status,
                                          code=failure.code or ReasonCode.PROVIDER_REJECTED) from None
                    raise FatalProviderError(failure.message, model=request.model, status=failure.status) from None
                finally:
                    counters.in_flight -= 1
            finally:
                router.release(deployment)
                if committed:
                    guard.settle(name, committed)  # type: ignore[union-attr]
            router.succeeded(deployment)
            log.reached = True
            judge.exhausted_in_row = 0
            latency = time.perf_counter() - started
            response = judge.kept(priced_as(response, judge.config.model), task)
            lane.on_success(admission, response.prompt_tokens, response.completion_tokens, response.headers)
            log.cost += response.cost
            counters.cost += response.cost
            log.latency_s += latency
            transcript(attempt_record(task, log, sent, response=response, latency=latency))
            return response

    def on_retry(error: BaseException, attempt_number: int) -> None:
        counters.retries += 1
        last[0].stats.retries += 1

    return await with_transport_retries(
        attempt,
        retries=judge.config.retries.transport,
        backoff_max_s=judge.config.retries.backoff_max_s,
        on_retry=on_retry,
    )


def attempt_record(
    task: Task,
    log: TaskLog,
    request: ProviderRequest,
    *,
    response: ProviderResponse | None = None,
    error: Mapping[str, Any] | None = None,
    latency: float = 0.0,
    cache_hit: bool = False,
    estimate: BilledEstimate | None = None,
) -> AttemptRecord:
    """The transcript line of the task's next attempt (counted in ``log``); ``estimate``: what a
    failed attempt the provider may have billed is booked at."""
    log.attempts += 1
    if estimate is not None:
        return AttemptRecord(
            task_id=task.task_id, judge=task.judge, item_id=task.item_id, attempt=log.attempts, reask=log.reasks,
            at=utc_now(), request=request.as_sent(), latency_s=round(latency, 4), error=None if error is None else dict(error),
            usage={"prompt_tokens": estimate.prompt_tokens, "completion_tokens": estimate.completion_tokens},
            cost=estimate.cost, unpriced=not estimate.priced, estimated=True, split_at=_item_text(task))
    return AttemptRecord(
        task_id=task.task_id,
        judge=task.judge,
        item_id=task.item_id,
        attempt=log.attempts,
        reask=log.reasks,
        at=utc_now(),
        request=request.as_sent(),
        cache_hit=cache_hit,
        latency_s=round(latency, 4),
        response=None if response is None else response.to_record(),
        usage=None if response is None else {"prompt_tokens": response.prompt_tokens,
                                             "completion_tokens": response.completion_tokens},
        cost=None if response is None else (0.0 if cache_hit else response.cost),
        unpriced=response is not None and not (cache_hit or response.replayed or response.priced),
        error=None if error is None else dict(error),
        replayed=response is not None and response.replayed,
        split_at=_item_text(task),
    )


@dataclass(frozen=True, slots=True)
class BilledEstimate:
    """What an attempt the provider may have billed, with no answer read, is booked at."""

    prompt_tokens: int
    completion_tokens: int
    cost: float
    priced: bool


def billed_estimate(model: str, prompt_tokens: float, max_tokens: int | None,
                    typical_answer: float | None) -> BilledEstimate:
    """The prompt as the lane sizes it (counted locally, scaled by what the provider has reported
    so far) and the request's ``max_tokens`` (the most it could have answered; without one, the
    lane's mean answer, at least 256 tokens), at ``model``'s price."""
    prompt = max(1, round(prompt_tokens))
    completion = max_tokens if max_tokens is not None else max(256, round(typical_answer or 0))
    prices = cost_per_token(model)
    cost = prompt * prices[0] + completion * prices[1] if prices else 0.0
    return BilledEstimate(prompt, completion, cost, prices is not None)


def _item_text(task: Task) -> tuple[str, ...]:
    """The item's text values, where the transcript splits the request (cached per item: every
    attempt of every judge, temperature and repeat of an item shares them)."""
    cached = _ITEM_TEXT.get(id(task.item))
    if cached is None or cached[0] is not task.item:
        if len(_ITEM_TEXT) >= 1024:
            _ITEM_TEXT.clear()
        cached = _ITEM_TEXT[id(task.item)] = (task.item, tuple(item_values(task.item)))
    return cached[1]


_ITEM_TEXT: dict[int, tuple[Any, tuple[str, ...]]] = {}
