"""The one home of tenacity: the transport retry policy (exponential backoff with full jitter).

Only transient transport failures (5xx, timeouts, resets, truncated bodies) are retried here.
429s are not: they belong to the lane, which slows the whole lane and waits out Retry-After.
Re-asks for unreadable answers are a separate budget in the engine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from judge_engine.errors import TransientError

T = TypeVar("T")


async def with_transport_retries(
    call: Callable[[], Awaitable[T]],
    *,
    retries: int,
    backoff_max_s: float,
    on_retry: Callable[[BaseException, int], None] | None = None,
) -> T:
    """Run ``call`` until it succeeds, retrying :class:`TransientError` up to ``retries`` times.

    The last TransientError is re-raised when the budget is spent; anything else propagates at once.
    """
    # Fast path: most calls succeed at once, and tenacity's machinery around one attempt
    # (state objects, statistics, an inspect-based coroutine check) cost ~0.1 ms per request,
    # 5% of the engine's CPU. Only a first failure enters tenacity, which sees it as its own
    # attempt 1, so the retry schedule and the before_sleep report are exactly as without it.
    try:
        return await call()
    except TransientError as error:
        if retries <= 0:
            raise
        first_failure: TransientError | None = error

    async def replay_then_call() -> T:
        nonlocal first_failure
        if first_failure is not None:
            failure, first_failure = first_failure, None
            raise failure
        return await call()

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            error = state.outcome.exception()
            if error is not None:
                on_retry(error, state.attempt_number)

    retrying = AsyncRetrying(
        retry=retry_if_exception_type(TransientError),
        stop=stop_after_attempt(retries + 1),
        wait=wait_random_exponential(multiplier=0.25, max=backoff_max_s),
        before_sleep=before_sleep,
        reraise=True,
    )
    result: T = await retrying(replay_then_call)
    return result
