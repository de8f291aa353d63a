"""The dry-run estimate behind ``judge-engine plan``: renders every prompt, sends nothing, and
says what the job will cost.

Per judge: tasks, tasks already in the cache (free), prompt tokens counted with the tokenizer
litellm selects for the judge's model (exact for OpenAI models, an estimate marked as such for
providers with no offline tokenizer), completion tokens from the protocol's typical answer
(capped at ``max_tokens``), the cost from litellm's bundled price table, and the wall time under
the configured limits (whichever of RPM, TPM or latency x concurrency binds). Calls, tokens, cost
and time are ranges: from no re-ask to every task using its whole ``retries.reasks`` budget.
An unknown model or price is a warning (``plan --strict`` exits 2), never a silent $0.
Nothing is sent; a template or dataset problem fails here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from judge_engine.errors import DatasetError, TemplateError, VerdictError
from judge_engine.inputs.config import JobConfig, JudgeConfig
from judge_engine.planning.plan import iter_tasks, render_problem, template_hashes
from judge_engine.planning.self_preference import model_family, own_systems
from judge_engine.protocols import Protocol
from judge_engine.providers import Endpoint
from judge_engine.providers.catalog import (
    batch_cost_per_token,
    batch_route,
    cost_per_token,
    count_prompt_tokens,
    prompt_counter,
)
from judge_engine.running.cache import AnswerCache
from judge_engine.running.runtime import JudgeSetup
from judge_engine.running.session import PreparedRun
from judge_engine.running.task import prepare_task
from judge_engine.util.money import dollars
from judge_engine.util.naming import judge_ref

if TYPE_CHECKING:
    from judge_engine.trust.cascade.stages import CascadePlan

N = TypeVar("N", int, float)

WINDOW_S = {"24h": 86400.0}
"""Completion windows in seconds (OpenAI's only one; Anthropic's batches always have 24 h)."""


class Span(NamedTuple, Generic[N]):
    """An estimate from no re-ask (``low``) to every task re-asked its whole budget (``high``)."""

    low: N
    high: N


@dataclass(frozen=True, slots=True)
class JudgePlan:
    """What one judge of the job will send, cost and take."""

    judge: str
    model: str
    protocol: str
    tasks: int
    cached: int
    """Tasks whose answer is in the cache: no call, no cost."""
    reasks: int
    """The judge's re-ask budget per task (``retries.reasks``)."""
    completion_per_call: int
    """The protocol's typical answer, capped at ``max_tokens``."""
    calls: Span[int]
    prompt_tokens: Span[int]
    completion_tokens: Span[int]
    cost: Span[float] | None
    """None when litellm has no price for the model."""
    wall_s: Span[float]
    bound_by: str
    """The ceiling that sets the wall time, in words (:func:`wall_time`): ``RPM-bound``,
    ``TPM-bound``, ``concurrency-bound``, ``latency-bound``; ``batch window`` in batch mode."""
    tokens_exact: bool
    """False when the prompt tokens are an estimate (``token_note`` says why)."""
    token_note: str
    warnings: tuple[str, ...]
    """An unknown model or price: ``plan --strict`` fails on these."""
    notes: tuple[str, ...]
    """Estimates and assumptions worth knowing."""
    self_preference: str = "warn"
    """The judge's ``self_preference`` rule."""
    self_judged: int = 0
    """Items whose systems are of the judge's model family (none counted with ``allow``); with
    ``forbid`` their tasks are not sent (not in calls, tokens or cost)."""
    self_systems: tuple[str, ...] = ()
    """Those systems (the first few)."""
    batch: BatchPlan | None = None
    """The same work through the provider's batch API (None: it has none judge-engine speaks)."""


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """What a judge's tasks cost through its provider's batch API."""

    in_use: bool
    """The judge runs in batch mode (``mode: batch`` or ``--batch``): ``cost`` is what it pays."""
    api: str
    cost: Span[float] | None
    """At batch prices (None: no price known)."""
    listed: bool
    """The batch price is litellm's (``*_cost_per_token_batches``); False: half the online price."""
    window: str
    batches: int
    """Batches of the first round (the provider's limit of requests per batch)."""


def plan_rows(prepared: PreparedRun, *, latency_s: float = 2.0) -> list[JudgePlan]:
    """One plan per judge: counts, tokens, cost and wall time, each with its re-ask range."""
    cache = AnswerCache(prepared.config.cache.dir, enabled=prepared.config.cache.enabled and prepared.config.cache.dir.exists())
    try:
        return [_plan_judge(prepared, judge, cache, latency_s) for judge in prepared.config.judges]
    finally:
        cache.close()


def _plan_judge(prepared: PreparedRun, judge: JudgeConfig, cache: AnswerCache, latency_s: float) -> JudgePlan:

    protocol = prepared.protocols[judge.name]
    # The config's own endpoint, without its key: nothing is sent, so none is needed.
    setup = JudgeSetup(judge, protocol, Endpoint(judge.model, judge.api_base), template_hashes(protocol))
    tasks = cached = prompt = recused = 0
    own: dict[str, list[str]] = {}
    for task in iter_tasks(judge, protocol, prepared.config.dataset):
        if judge.self_preference != "allow" and task.item_id not in own:
            own[task.item_id] = own_systems(judge.model, task.item)
        ready = prepare_task(setup, task, cache)
        if ready.render_error is not None:
            error = ready.render_error
            if isinstance(error, TemplateError | DatasetError):
                raise type(error)(render_problem(judge.name, task.item_id, error)) from None
            raise error
        tasks += 1
        if ready.recused is not None:
            recused += 1
            continue
        if ready.cached is not None:
            cached += 1
            continue
        prompt += count_prompt_tokens(judge.model, ready.messages)
    sent, budget = tasks - cached - recused, judge.retries.reasks if protocol.reasks else 0
    answer = min(protocol.typical_completion_tokens, judge.max_tokens or protocol.typical_completion_tokens)
    # Re-ask k resends the conversation plus k (answer, re-ask) turns: the prompt grows by
    # `growth` per turn, so a task re-asked R times sends (R + 1) P + growth R (R + 1) / 2.
    growth = answer + _reask_tokens(judge.model, protocol)
    calls = Span(sent, sent * (budget + 1))
    prompt_tokens = Span(prompt, prompt * (budget + 1) + sent * growth * budget * (budget + 1) // 2)
    completion_tokens = Span(sent * answer, sent * answer * (budget + 1))
    prices = cost_per_token(judge.model)
    cost = None
    if prices is not None:
        cost = Span(prompt_tokens.low * prices[0] + completion_tokens.low * prices[1],
                    prompt_tokens.high * prices[0] + completion_tokens.high * prices[1])
    wall_low, bound = wall_time(judge, calls.low, prompt_tokens.low + completion_tokens.low, latency_s)
    wall_high, _ = wall_time(judge, calls.high, prompt_tokens.high + completion_tokens.high, latency_s)
    counter = prompt_counter(judge.model)
    batch = _batch_plan(judge, sent, prompt_tokens, completion_tokens)
    if batch is not None and batch.in_use:
        window = WINDOW_S.get(judge.batch.completion_window, WINDOW_S["24h"])
        wall_low, wall_high, bound = window, window, "batch window"
    return JudgePlan(
        judge=judge.name, model=judge.model, protocol=protocol.name, tasks=tasks, cached=cached, reasks=budget,
        completion_per_call=answer, calls=calls, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
        cost=cost, wall_s=Span(wall_low, wall_high), bound_by=bound, tokens_exact=counter.exact,
        token_note=counter.note,
        warnings=_warnings(judge.model, counter.provider, prices is None) + (
            (f"{judge_ref(judge.name, 'mode')}: batch, but {judge.model} has no batch API judge-engine speaks; "
             "the run would refuse it (use mode: online for this judge)",) if judge.mode == "batch" and batch is None else ()),
        notes=_notes(judge, protocol), batch=batch, self_preference=judge.self_preference,
        self_judged=sum(1 for systems in own.values() if systems),
        self_systems=tuple(dict.fromkeys(s for systems in own.values() for s in systems))[:3],
    )


def self_preference_lines(plans: Sequence[JudgePlan], *, items: int) -> list[str]:
    """Where a judge would grade its own family's systems: warned (``warn``), or held back
    (``forbid``: those tasks are recorded unscored ``self_preference`` with no call)."""
    lines = []
    for plan in plans:
        if not plan.self_judged:
            continue
        whose = (f"{judge_ref(plan.judge)} ({plan.model}, family {model_family(plan.model)}) would judge "
                 f"{plan.self_judged:,} of {items:,} items whose system is of its family ({', '.join(plan.self_systems)})")
        if plan.self_preference == "forbid":
            lines.append(f"self-preference: {whose}: forbidden, so those tasks are recorded unscored "
                         "(self_preference) with no call")
        else:
            lines.append(f"self-preference: {whose}; set self_preference: forbid to keep it off them, "
                         "or allow to silence this")
    return lines


def _batch_plan(judge: JudgeConfig, sent: int, prompt: Span[int], completion: Span[int]) -> BatchPlan | None:
    """The judge's tasks at batch prices, when its model has a batch API judge-engine speaks."""
    route = batch_route(judge.model, judge.api_base)
    if route is None:
        return None
    prices = batch_cost_per_token(judge.model)
    cost = None if prices is None else Span(prompt.low * prices[0] + completion.low * prices[1],
                                            prompt.high * prices[0] + completion.high * prices[1])
    per_batch = judge.batch.max_requests_per_file or (100_000 if route.api == "anthropic" else 50_000)
    return BatchPlan(in_use=judge.mode == "batch", api=route.api, cost=cost, listed=bool(prices and prices[2]),
                     window=judge.batch.completion_window, batches=-(-sent // per_batch))


def _reask_tokens(model: str, protocol: Protocol) -> int:
    """Prompt tokens one re-ask turn adds besides the answer: the re-ask message (with one
    problem stated) and the overhead of it and of the answer's message."""
    reask = protocol.reask(VerdictError("the answer does not follow the requested format"))
    return count_prompt_tokens(model, [{"role": "assistant", "content": ""}, {"role": "user", "content": reask}]) - 3


def _warnings(model: str, provider: str, no_price: bool) -> tuple[str, ...]:
    if not provider:
        return (f"unknown model {model}: litellm knows no provider for it (name one, e.g. openai/{model}); "
                "the run would fail and its cost is not counted",)
    if no_price:
        return (f"unknown price for {model}: not in litellm's price table, so its cost is not counted",)
    return ()


def _notes(judge: JudgeConfig, protocol: Protocol) -> tuple[str, ...]:
    if judge.max_tokens is not None and judge.max_tokens < protocol.typical_completion_tokens:
        return (f"{judge_ref(judge.name, 'max_tokens')}: {judge.max_tokens} is below {protocol.name}'s typical "
                f"answer (~{protocol.typical_completion_tokens} tokens): answers may be cut off",)
    return ()


def wall_time(judge: JudgeConfig, requests: int, tokens: int, latency_s: float) -> tuple[float, str]:
    """Lower bound on the wall time, and which limit sets it, in the words ``plan`` prints: the
    slowest of the request rate (``RPM-bound``), the token rate (``TPM-bound``), the calls that
    can be in flight at once (``concurrency-bound``: the assumed latency x ``requests`` /
    concurrency) and, for fewer requests than that, one call's latency (``latency-bound``).
    Several deployments add their limits up."""
    every = [d.limits or judge.limits for d in judge.deployments] or [judge.limits]
    concurrency = sum(limits.concurrency for limits in every)
    options = {"latency-bound": latency_s if requests else 0.0,
               "concurrency-bound": requests * latency_s / concurrency}
    if all(limits.rpm for limits in every):
        options["RPM-bound"] = requests / sum(limits.rpm or 0.0 for limits in every) * 60
    if all(limits.tpm for limits in every):
        options["TPM-bound"] = tokens / sum(limits.tpm or 0.0 for limits in every) * 60
    bound = max(options, key=lambda k: options[k])
    return options[bound], bound


def budget_warnings(plans: Sequence[JudgePlan], config: JobConfig) -> list[str]:
    """Where the estimate passes a budget (each judge's, and the run's): the run would stop there."""
    warnings = []
    budgets = {j.name: j.budget for j in config.judges}
    for plan in plans:
        budget = budgets[plan.judge]
        if budget.max_cost_usd is not None and plan.cost is not None and plan.cost.low > budget.max_cost_usd:
            warnings.append(f"{judge_ref(plan.judge)}: estimated {dollars(plan.cost.low)} is over its budget of "
                            f"{dollars(budget.max_cost_usd)}: it will stop there (resume --budget continues)")
        elif budget.max_cost_usd is not None and plan.cost is not None and plan.cost.high > budget.max_cost_usd:
            warnings.append(f"{judge_ref(plan.judge)}: with re-asks up to {dollars(plan.cost.high)}, over its budget of "
                            f"{dollars(budget.max_cost_usd)}")
        if budget.max_hours is not None and plan.wall_s.low > budget.max_hours * 3600:
            warnings.append(f"{judge_ref(plan.judge)}: estimated {plan.wall_s.low / 3600:.1f} h is over its budget of "
                            f"{budget.max_hours:g} h")
    run = config.budget
    priced = [p.cost for p in plans if p.cost is not None]
    if run.max_cost_usd is not None and priced:
        low, high = sum(c.low for c in priced), sum(c.high for c in priced)
        if low > run.max_cost_usd:
            warnings.append(f"the run: estimated {dollars(low)} is over its budget of {dollars(run.max_cost_usd)}: it will stop "
                            "there (resume --budget continues)")
        elif high > run.max_cost_usd:
            warnings.append(f"the run: with re-asks up to {dollars(high)}, over its budget of {dollars(run.max_cost_usd)}")
    longest = max((p.wall_s.low for p in plans), default=0.0)
    if run.max_hours is not None and longest > run.max_hours * 3600:
        warnings.append(f"the run: estimated {longest / 3600:.1f} h is over its budget of {run.max_hours:g} h")
    return warnings


def stage_costs(plan: CascadePlan, plans: Sequence[JudgePlan]) -> dict[str, tuple[float, float] | None]:
    """Each stage's cost over every item (low, high: no re-ask to every re-ask), from its
    judges' plans (a jury's: its jurors' sum); None when a judge has no price."""
    by_judge = {p.judge: p for p in plans}
    costs: dict[str, tuple[float, float] | None] = {}
    for stage in plan.stages:
        spans = [_paid(by_judge[j]) for j in stage.judges if j in by_judge]
        costs[stage.name] = None if any(s is None for s in spans) or not spans else (
            sum(s[0] for s in spans if s is not None), sum(s[1] for s in spans if s is not None))
    return costs


def _paid(plan: JudgePlan) -> tuple[float, float] | None:
    cost = plan.batch.cost if plan.batch is not None and plan.batch.in_use else plan.cost
    return None if cost is None else (cost.low, cost.high)


def expected_plans(plan: CascadePlan, plans: Sequence[JudgePlan]) -> list[JudgePlan]:
    """The judges' plans with each stage judge's figures (tasks, tokens, calls, cost, time)
    scaled to the share of items the calibration sent its stage: what the cascade is expected
    to ask (a stage that is not asked: nothing)."""

    def scale(span: Any, share: float, kind: Callable[[float], Any]) -> Any:
        return None if span is None else Span(kind(span.low * share), kind(span.high * share))

    shares = {judge: stage.reach for stage in plan.stages for judge in stage.judges}
    out = []
    for judge_plan in plans:
        share = shares.get(judge_plan.judge)
        if share is None or share == 1.0:
            out.append(judge_plan)
            continue
        batch = judge_plan.batch
        if batch is not None:
            batch = dataclasses.replace(batch, cost=scale(batch.cost, share, float))
        out.append(dataclasses.replace(
            judge_plan, tasks=round(judge_plan.tasks * share), cached=round(judge_plan.cached * share),
            calls=scale(judge_plan.calls, share, round), prompt_tokens=scale(judge_plan.prompt_tokens, share, round),
            completion_tokens=scale(judge_plan.completion_tokens, share, round),
            cost=scale(judge_plan.cost, share, float), wall_s=scale(judge_plan.wall_s, share, float), batch=batch))
    return out
