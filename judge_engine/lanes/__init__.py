"""Per-deployment lanes: request-rate and token-rate pacing with adaptive control.

One lane per judge deployment. A request is admitted when (1) the lane is not paused by a 429's
Retry-After, (2) the request pacer allows it and (3) the token pacer allows its estimated tokens.
After the call the token estimate is reconciled with the usage the provider reported.

A :class:`Lane` composes three parts, each with its reasons and measured figures:

* :mod:`~judge_engine.lanes.pacer`: GCRA pacers for requests and tokens, released in small
  bursts, at a scale of the limits in force (:class:`~judge_engine.lanes.pacer.Pacing`);
* :mod:`~judge_engine.lanes.tokens`: a request's tokens without a tokenizer, learnt from the
  usage the provider reports (:class:`~judge_engine.lanes.tokens.TokenEstimate`);
* :mod:`~judge_engine.lanes.controller`: pauses on 429s, slowdowns, probes back up, and limits
  the provider declares (:class:`~judge_engine.lanes.controller.Controller`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from judge_engine.inputs.config import Limits
from judge_engine.lanes.controller import Controller
from judge_engine.lanes.pacer import BURST_WINDOW_S, PACE_TOLERANCE_S, Pacer, Pacing
from judge_engine.lanes.tokens import TokenEstimate, rough_prompt_tokens

__all__ = ["BURST_WINDOW_S", "PACE_TOLERANCE_S", "Admission", "Lane", "LaneStats", "Pacer", "rough_prompt_tokens"]


@dataclass(slots=True)
class Admission:
    """A ticket for one admitted request: what was estimated, for reconciling and learning."""

    estimated_tokens: float
    """Prompt and completion tokens charged to the token pacer."""
    rough_prompt: int = 0
    """The prompt's :func:`rough_prompt_tokens`, which the reported usage calibrates."""


@dataclass(slots=True)
class LaneStats:
    """Counters of one lane, for the live display and the run's summary."""

    requests: int = 0
    rate_limited: int = 0
    retries: int = 0
    pauses: int = 0
    slowdowns: int = 0
    in_flight: int = 0
    tokens: int = 0


class Lane:
    """Admission control for one deployment. All methods run on the event loop's thread."""

    def __init__(
        self,
        name: str,
        limits: Limits,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.name = name
        self.limits = limits
        self.stats = LaneStats()
        self.pacing = Pacing(limits, clock)
        """The request and token pacers, at the pace the controller sets."""
        self.controller = Controller(self.pacing, limits, clock())
        """Pauses, slows down and probes back up; adopts the limits the provider declares."""
        self.estimate = TokenEstimate()
        """What a request will cost in tokens, learnt from the answers' usage."""
        self._clock = clock
        self._sleep = sleep  # with ``clock``, lets tests run the lane in virtual time
        self._lock = asyncio.Lock()  # one coroutine waits for the pacers; the rest queue fairly
        self.waiting = 0
        """Requests queued in :meth:`admit` now."""

    @property
    def scale(self) -> float:
        """Current pace as a share of the limits in force (1.0 = their full rate)."""
        return self.pacing.scale

    @property
    def declared(self) -> dict[str, float]:
        """Limits the provider declared in its headers (``rpm``, ``tpm``), once seen."""
        return self.controller.declared

    @property
    def paused_for(self) -> float:
        """Seconds until the lane's pause for a 429 ends (0 when it is not paused)."""
        return max(0.0, self.controller.paused_until - self._clock())

    def backlog_s(self, rough_prompt: int = 0, max_tokens: int | None = None) -> float:
        """Roughly how long a request asking now would wait for admission: the pause, the
        pacers' own wait, and a slot for each request already queued. What a judge with several
        deployments compares to send a request where it goes out soonest."""
        slot = 0.0
        if self.pacing.rpm:
            slot = 60.0 / (self.pacing.rpm * self.pacing.scale)
        if self.pacing.tpm:
            tokens = self.estimate.tokens(rough_prompt, max_tokens)
            slot = max(slot, tokens * 60.0 / (self.pacing.tpm * self.pacing.scale))
        wait = max(self.paused_for, self.pacing.wait_now())
        return wait + self.waiting * slot

    async def admit(self, rough_prompt: int = 0, max_tokens: int | None = None) -> Admission:
        """Wait until this lane may send one request whose prompt has ``rough_prompt`` tokens by
        :func:`rough_prompt_tokens` (read only when the lane paces tokens).

        The token estimate is made at the moment of admission, not when the caller starts
        waiting: a run's first ``concurrency`` requests all queue at once, and an estimate made
        then would ignore every answer that came back while they waited.
        """
        self.waiting += 1
        try:
            return await self._admit(rough_prompt, max_tokens)
        finally:
            self.waiting -= 1

    async def _admit(self, rough_prompt: int, max_tokens: int | None) -> Admission:
        async with self._lock:
            while True:
                now = self._clock()
                if now < self.controller.paused_until:
                    await self._sleep(self.controller.paused_until - now)
                    continue
                self.controller.probe(now)
                wait = self.pacing.wait_to_release()
                if wait > 0:
                    await self._sleep(wait)
                    continue  # re-check: a 429 may have paused the lane meanwhile
                estimated = 0.0
                if self.pacing.tokens is not None:
                    estimated = self.estimate.tokens(rough_prompt, max_tokens)
                self.pacing.admit(estimated)
                self.stats.requests += 1
                return Admission(estimated, rough_prompt)

    def on_success(
        self,
        admission: Admission,
        prompt_tokens: int,
        completion_tokens: int,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Reconcile the token window with reported usage, learn better estimates, and adopt
        limits the provider declares."""
        now = self._clock()
        if headers:
            self.observe_headers(headers)
        actual = float(prompt_tokens + completion_tokens)
        if actual > 0:
            self.pacing.reconcile_tokens(actual - admission.estimated_tokens)
        self.estimate.learn(admission.rough_prompt, prompt_tokens, completion_tokens)
        self.controller.on_success(now, actual)
        self.stats.tokens += int(actual)

    def on_rate_limited(self, retry_after_s: float | None) -> None:
        """A 429: pause the whole lane for Retry-After and, once per cool-down, slow down."""
        now = self._clock()
        self.stats.rate_limited += 1
        reaction = self.controller.on_rate_limited(now, retry_after_s)
        self.stats.pauses += reaction.paused
        self.stats.slowdowns += reaction.slowed

    def observe_headers(self, headers: Mapping[str, str]) -> None:
        """Adopt limits the provider declares when they are lower than the configured ones."""
        self.controller.observe_headers(headers)
