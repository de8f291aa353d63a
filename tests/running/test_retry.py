"""Transport retries: a first success never enters tenacity; a first failure is its attempt 1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from judge_engine.running.retry import TransientError, with_transport_retries


def test_transport_retries_replay_the_first_failure_into_tenacitys_schedule() -> None:
    calls: list[int] = []
    retried: list[int] = []
    errors = [TransientError(f"boom {n}") for n in range(5)]

    def failing(times: int) -> Callable[[], Awaitable[str]]:
        async def call() -> str:
            calls.append(1)
            if len(calls) <= times:
                raise errors[len(calls) - 1]
            return "ok"
        return call

    def run(times: int, retries: int) -> str:
        calls.clear()
        retried.clear()
        return asyncio.run(with_transport_retries(failing(times), retries=retries, backoff_max_s=0.001,
                                                  on_retry=lambda error, n: retried.append(n)))

    assert run(0, 3) == "ok" and len(calls) == 1 and retried == []
    assert run(2, 3) == "ok" and len(calls) == 3 and retried == [1, 2]
    with pytest.raises(TransientError) as raised:
        run(5, 2)
    assert raised.value is errors[2] and len(calls) == 3 and retried == [1, 2]
    with pytest.raises(TransientError) as raised:
        run(1, 0)
    assert raised.value is errors[0] and len(calls) == 1

    async def not_transient() -> str:
        calls.append(1)
        raise ValueError("a bug")

    calls.clear()
    with pytest.raises(ValueError):
        asyncio.run(with_transport_retries(not_transient, retries=3, backoff_max_s=0.001))
    assert len(calls) == 1
