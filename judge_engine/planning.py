"""``judge-engine plan``: a dry run that renders every prompt and says what the job will cost.

Per judge: tasks, tasks already in the cache (free), prompt tokens counted with litellm's tokenizer
for the judge's model, an estimate of completion tokens, the cost from litellm's bundled price
table, and the wall time under the configured limits (whichever of RPM, TPM or
latency x concurrency binds). Nothing is sent; a template or dataset problem fails here.
"""

from __future__ import annotations

from typing import Any

from judge_engine.cache import AnswerCache
from judge_engine.config import JudgeConfig
from judge_engine.judging import prepare_task
from judge_engine.lanes import Lane
from judge_engine.plan import iter_tasks
from judge_engine.runner import PreparedRun, template_hashes
from judge_engine.runtime import JudgeRuntime

TYPICAL_COMPLETION_TOKENS = 200
"""Completion estimate when nothing better is known (capped at the judge's max_tokens)."""


def plan_rows(prepared: PreparedRun, *, latency_s: float = 2.0) -> list[dict[str, Any]]:
    """One row per judge with counts, tokens, cost and wall-time estimates."""
    from judge_engine.providers.litellm import cost_per_token, count_prompt_tokens

    cache = AnswerCache(prepared.config.cache.dir, enabled=prepared.config.cache.enabled and prepared.config.cache.dir.exists())
    rows = []
    try:
        for judge in prepared.config.judges:
            protocol = prepared.protocols[judge.name]
            runtime = JudgeRuntime(judge, protocol, Lane(judge.name, judge.limits), provider=None,  # type: ignore[arg-type]
                                   template_hashes=template_hashes(protocol))
            tasks = cached = prompt_tokens = 0
            for task in iter_tasks(judge, protocol, prepared.config.dataset):
                ready = prepare_task(runtime, task, cache)
                if ready.render_error is not None:
                    raise ready.render_error
                tasks += 1
                if ready.cached is not None:
                    cached += 1
                    continue
                prompt_tokens += count_prompt_tokens(judge.model, ready.messages)
            completion = min(judge.max_tokens or TYPICAL_COMPLETION_TOKENS, TYPICAL_COMPLETION_TOKENS)
            completion_tokens = (tasks - cached) * completion
            prices = cost_per_token(judge.model)
            cost = None if prices is None else prompt_tokens * prices[0] + completion_tokens * prices[1]
            wall, bound = wall_time(judge, tasks - cached, prompt_tokens + completion_tokens, latency_s)
            rows.append({
                "judge": judge.name, "model": judge.model, "protocol": protocol.name, "tasks": tasks,
                "cached": cached, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                "cost": cost, "wall_s": wall, "bound_by": bound,
            })
    finally:
        cache.close()
    return rows


def wall_time(judge: JudgeConfig, requests: int, tokens: int, latency_s: float) -> tuple[float, str]:
    """Lower bound on the wall time: the slowest of the three ceilings."""
    limits = judge.limits
    options = {"latency x concurrency": requests * latency_s / limits.concurrency}
    if limits.rpm:
        options["RPM"] = requests / limits.rpm * 60
    if limits.tpm:
        options["TPM"] = tokens / limits.tpm * 60
    bound = max(options, key=lambda k: options[k])
    return options[bound], bound
