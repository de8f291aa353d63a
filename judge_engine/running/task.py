"""One task, start to finish: cache -> lane -> provider -> parse -> re-ask -> outcome record.

Two budgets, never mixed: transport retries (tenacity, in
:func:`~judge_engine.running.attempt.call_provider`) and re-asks for unusable answers (:func:`judge_task`). 429s belong to neither: the lane waits them out.
Everything that happens is data: one transcript line per attempt, one outcome line per task, and
an unscored outcome says why in a :class:`~judge_engine.errors.ReasonCode`.

What is *not* a verdict about an item is not recorded as one: a task whose every attempt failed to
connect stops its judge (:class:`EndpointUnreachable`), and so do ``retries.stop_after_exhausted``
tasks in a row that used up their transport retries; their tasks stay undone for ``resume``. A
stop request (Ctrl-C) abandons every task that is not in a provider call at that moment
(:class:`~judge_engine.running.runtime.Abandoned`): no new first attempt, retry or re-ask goes out after it.

Protocol code is a plug-in: an exception it raises (render, parse, score, re-ask) is recorded as
``protocol_error`` with the traceback in the transcript, and the run goes on.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from judge_engine.errors import (
    DatasetError,
    EndpointUnreachable,
    FatalProviderError,
    ItemFailure,
    ReasonCode,
    TemplateError,
    TransientError,
    VerdictError,
)
from judge_engine.planning.plan import Task
from judge_engine.planning.self_preference import recusal
from judge_engine.protocols import Message, Protocol, Score
from judge_engine.protocols.confidence import read_task_confidence
from judge_engine.providers.base import ProviderRequest, ProviderResponse
from judge_engine.rundir.records import OutcomeRecord, ProtocolErrorRecord
from judge_engine.rundir.store import utc_now
from judge_engine.running.attempt import TaskLog, Writer, attempt_record, call_provider
from judge_engine.running.cache import AnswerCache
from judge_engine.running.runtime import JudgeRuntime, JudgeSetup
from judge_engine.util.naming import judge_stopped


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
    render_error: Exception | None = None
    """Why the prompt could not be rendered: a dataset or template problem the scan should have
    caught, or any other exception from the protocol's ``render`` (a protocol bug)."""
    recused: str | None = None
    """Why the judge must not judge this item (``self_preference: forbid``): nothing is sent."""
    log: TaskLog = field(default_factory=TaskLog)
    """What the task did before (a batch-mode task that goes on online: its batch attempts and
    re-asks so far, so both budgets and the outcome's counts cover the whole task)."""


@dataclass(frozen=True, slots=True)
class Reask:
    """The next request of a task whose answer must be asked again (see :func:`decide`)."""

    messages: list[Message]
    """The conversation so far, ending with the answer and the re-ask."""
    request: ProviderRequest
    key: str
    error: VerdictError
    """Why the answer could not be used."""


def prepare_task(judge: JudgeSetup, task: Task, cache: AnswerCache) -> PreparedTask:
    """Render a task's prompt and look its first request up in the answer cache (unless the
    judge is kept off the item: :func:`~judge_engine.planning.self_preference.recusal`)."""
    recused = recusal(judge.config.model, judge.config.self_preference, task.item)
    if recused is not None:
        return PreparedTask(task, recused=recused)
    try:
        messages: list[Message] = judge.protocol.render(task.item, task.variant)
    except Exception as exc:  # never crash a run: the task is unscored with the reason
        return PreparedTask(task, render_error=exc)
    request = judge.task_request(messages, task)
    key = judge.key(request, task)
    return PreparedTask(task, messages, request, key, cache.get(key))


async def judge_task(
    judge: JudgeRuntime, prepared: PreparedTask, *, cache: AnswerCache, transcript: Writer
) -> OutcomeRecord:
    """Judge one task prepared by :func:`prepare_task` and return its outcome record (never
    raises for per-item failures).

    Raises:
        FatalProviderError: the judge must stop (auth, bad request, unreachable endpoint); no
            outcome is recorded.
        Abandoned: the run is stopping; no outcome is recorded.
    """
    task = prepared.task
    log = prepared.log
    if prepared.recused is not None:
        return outcome(judge, task, log, reason=prepared.recused, code=ReasonCode.SELF_PREFERENCE)
    if prepared.render_error is not None:
        return _render_failure(judge, task, log, prepared.render_error, transcript)
    request = prepared.request
    assert request is not None, "a prepared task has a request or a render error"
    messages = prepared.messages
    key, cached = prepared.key, prepared.cached
    while True:
        try:
            response = await _answer(judge, task, request, key, cached, cache=cache, transcript=transcript, log=log)
        except ItemFailure as exc:
            return outcome(judge, task, log, reason=f"provider error: {exc}", code=exc.code)
        except TransientError as exc:
            return _exhausted(judge, task, log, exc)
        decision = decide(judge, task, log, messages, response, transcript=transcript)
        if isinstance(decision, OutcomeRecord):
            return decision
        messages, request, key = decision.messages, decision.request, decision.key
        cached = cache.get(key)


def decide(judge: JudgeRuntime, task: Task, log: TaskLog, messages: list[Message],
           response: ProviderResponse, *, transcript: Writer, can_reask: bool = True) -> OutcomeRecord | Reask:
    """Read one answer to a task's request (``messages``): the task's outcome, or the re-ask to
    send (counted in ``log`` and the judge's counters). The one place an answer is judged, for
    online calls, cache hits and batch results alike, and so where its confidence is read.

    Args:
        can_reask: False when no further request can be sent (a batch run's last round): an
            answer that would be re-asked ends unscored, as if the re-ask budget were spent.

    Raises:
        FatalProviderError: the judge reads log-probs and the answer has none (the provider
            gives none for this model): the judge stops, with what to change.
    """
    protocol = judge.protocol
    if response.finish_reason == "content_filter":
        return outcome(judge, task, log, reason="the provider's content filter blocked the answer",
                       code=ReasonCode.CONTENT_FILTER)
    if judge.reads_logprobs and response.logprobs is None and (response.content or "").strip():
        raise FatalProviderError(_NO_LOGPROBS.format(model=judge.config.model), model=judge.config.model)
    try:
        verdict = _read(protocol, response, task)
    except VerdictError as error:
        if log.reasks >= judge.config.retries.reasks or not protocol.reasks or not can_reask:
            return outcome(judge, task, log, reason=f"unusable answer after {log.reasks} re-asks: {error}",
                           code=error.code, verdict=error.verdict)
        try:
            text = protocol.reask(error)
        except Exception as exc:
            return _protocol_failure(judge, task, log, "reask", exc, transcript)
        log.reasks += 1
        judge.counters.reasks += 1
        messages = [*messages, {"role": "assistant", "content": response.content or ""},
                    {"role": "user", "content": text}]
        request = judge.task_request(messages, task)
        return Reask(messages, request, judge.key(request, task), error)
    except Exception as exc:
        return _protocol_failure(judge, task, log, "parse", exc, transcript)
    try:
        score = protocol.score(verdict, task.item, task.variant)
        _check_score(protocol, score)
    except VerdictError as error:  # read and checked, but not scorable here (no embedder)
        return outcome(judge, task, log, verdict=verdict.model_dump(mode="json"), reason=str(error),
                       code=error.code)
    except Exception as exc:
        return _protocol_failure(judge, task, log, "score", exc, transcript)
    confidence = None
    if judge.reads_logprobs:
        try:
            confidence, score = _with_confidence(judge, task, verdict, response, score)
        except Exception as exc:
            return _protocol_failure(judge, task, log, "confidence", exc, transcript)
    return outcome(judge, task, log, verdict=verdict.model_dump(mode="json"), score=score.score,
                   scores=dict(score.scores), confidence=confidence)


_NO_LOGPROBS = (
    "the provider answered {model} without token log-probs, which confidence: logprobs reads (OpenAI's reasoning "
    "models and every Anthropic model give none). Use a model that gives them (OpenAI chat models, Gemini, vLLM or "
    "another OpenAI-compatible server), or confidence: agreement with repeats: 3 or more; the undone tasks wait for "
    "resume")


def _with_confidence(judge: JudgeSetup, task: Task, verdict: Any, response: ProviderResponse,
                     score: Score) -> tuple[dict[str, Any], Score]:
    """The answer's confidence, and its score with the probability-weighted one beside it (or
    in its place, ``confidence.score: weighted``)."""
    read = read_task_confidence(judge.protocol, verdict, response.content or "", response.logprobs or (),
                                task.item, task.variant)
    weighted = read.weighted
    if weighted is None or score.score is None:
        return dict(read.record), score
    config = judge.config.confidence
    if config is not None and config.score == "weighted":
        weighted_score = Score(weighted, {**score.scores, "raw": score.score})
    else:
        weighted_score = Score(score.score, {**score.scores, "weighted": weighted})
    _check_score(judge.protocol, weighted_score)
    return dict(read.record), weighted_score


def _read(protocol: Protocol, response: ProviderResponse, task: Task) -> Any:
    if response.finish_reason == "length" and not protocol.reads_truncated:
        raise VerdictError("the answer was cut off at max_tokens; answer more briefly", raw=response.content or "",
                           code=ReasonCode.INCOMPLETE)
    if not response.content or not response.content.strip():
        raise VerdictError("the answer was empty", raw="")
    return protocol.parse(response.content, task.item, task.variant)


def _check_score(protocol: Protocol, score: Score) -> None:
    """A score the protocol computed must be a number within its own range, and every value of
    its breakdown a number (a bug otherwise: JSON has no NaN, so one would be stored as null in a
    line that says scored)."""
    odd = {name: value for name, value in score.scores.items() if not math.isfinite(value)}
    if odd:
        raise ValueError(f"the protocol computed a breakdown of {odd}")
    if score.score is None:
        return
    if not math.isfinite(score.score):
        raise ValueError(f"the protocol computed a score of {score.score}")
    bounds = protocol.score_range()
    if bounds is not None and not bounds[0] <= score.score <= bounds[1]:
        raise ValueError(f"the protocol computed {score.score}, outside its range {bounds[0]:g}..{bounds[1]:g}")


def _exhausted(judge: JudgeRuntime, task: Task, log: TaskLog, error: TransientError) -> OutcomeRecord:
    """A task whose transport retries ran out: recorded ``transport_exhausted``, unless nothing
    ever reached the endpoint (the judge stops instead), or this is the
    ``retries.stop_after_exhausted``-th such task in a row (recorded, and the judge stops)."""
    name, model = judge.config.name, judge.config.model
    if not log.reached:
        raise EndpointUnreachable(
            f"cannot reach {judge.endpoint_label}: all {log.attempts} attempts of a "
            f"task failed to connect (last: {error}). Nothing was recorded for the tasks in progress; "
            "check the endpoint, network or api_base, then resume the run", model=model)
    judge.exhausted_in_row += 1
    record = outcome(judge, task, log, reason=f"transport retries exhausted: {error}",
                     code=ReasonCode.TRANSPORT_EXHAUSTED)
    limit = judge.config.retries.stop_after_exhausted
    if judge.exhausted_in_row >= limit and judge.stopped is None:
        judge.stopped = judge_stopped(
            name, model, f"{judge.exhausted_in_row} tasks in a row used up their transport "
            f"retries at {judge.endpoint_label} (last: {error}); the endpoint is failing. Its tasks are recorded "
            "transport_exhausted, to be judged again once it is back")
    return record


def _render_failure(judge: JudgeRuntime, task: Task, log: TaskLog, error: Exception,
                    transcript: Writer) -> OutcomeRecord:
    if isinstance(error, (DatasetError, TemplateError)):
        return outcome(judge, task, log, reason=f"could not render the prompt: {error}", code=ReasonCode.RENDER_ERROR)
    return _protocol_failure(judge, task, log, "render", error, transcript)


def _protocol_failure(judge: JudgeRuntime, task: Task, log: TaskLog, stage: str, error: Exception,
                      transcript: Writer) -> OutcomeRecord:
    """An exception from the protocol's own code: recorded with its traceback, never raised."""
    transcript(ProtocolErrorRecord(
        task_id=task.task_id, judge=task.judge, item_id=task.item_id, at=utc_now(), stage=stage,
        error=f"{type(error).__name__}: {error}", traceback="".join(traceback.format_exception(error)),
    ))  # fmt: skip
    return outcome(judge, task, log, reason=f"the protocol's {stage} raised {type(error).__name__}: {error}",
                   code=ReasonCode.PROTOCOL_ERROR)


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
        log.reached = True
        judge.counters.cache_hits += 1
        response = ProviderResponse.from_record(cached)
        transcript(attempt_record(task, log, request, response=response, cache_hit=True))
        return response
    response = await call_provider(judge, task, request, transcript=transcript, log=log)
    cache.set(key, response.to_record())
    return response


def outcome(
    judge: JudgeRuntime,
    task: Task,
    log: TaskLog,
    *,
    verdict: Mapping[str, Any] | None = None,
    score: float | None = None,
    scores: Mapping[str, float] | None = None,
    reason: str | None = None,
    code: ReasonCode | None = None,
    confidence: Mapping[str, Any] | None = None,
) -> OutcomeRecord:
    """The outcome line of one task: scored with its verdict (and its confidence, when
    measured), or unscored with the reason and its code."""
    scored = reason is None
    counters = judge.counters
    counters.done += 1
    if scored:
        counters.scored += 1
    else:
        counters.unscored += 1
    return OutcomeRecord(
        task_id=task.task_id,
        item_id=task.item_id,
        judge=task.judge,
        protocol=judge.protocol.name,
        protocol_version=judge.protocol.version,
        model=judge.config.model,
        temperature=task.temperature,
        repeat=task.repeat,
        variant=task.variant,
        status="scored" if scored else "unscored",
        score=score,
        scores=dict(scores or {}),
        verdict=None if verdict is None else dict(verdict),
        reason=reason,
        reason_code=None if scored else str(code or ReasonCode.UNREADABLE),
        attempts=log.attempts,
        reasks=log.reasks,
        cache_hits=log.cache_hits,
        cost=round(log.cost, 8),
        latency_s=round(log.latency_s, 4),
        at=utc_now(),
        row=task.row if task.row >= 0 else None,
        row_tasks=task.row_tasks or None,
        confidence=None if confidence is None else dict(confidence),
    )
