"""Per-deployment lanes: request-rate and token-rate pacing with adaptive control.

One lane per judge deployment. A request is admitted when (1) the lane is not paused by a 429's
Retry-After, (2) the request pacer allows it and (3) the token pacer allows its estimated tokens.
After the call the token estimate is reconciled with the usage the provider reported.

Token estimates without a tokenizer: see :mod:`judge_engine.lanes.tokens`.

GCRA pacing and small bursts: see :mod:`judge_engine.lanes.pacer`.

Declared limits. Providers state their real per-minute limits in response headers
(``x-ratelimit-limit-requests`` / ``-tokens``; Anthropic's ``anthropic-ratelimit-*-limit``). A
declared limit lower than the configured one replaces it at the first answer, so a config that
promises too much costs no 429 storm; a higher one is ignored (the config may ration a shared key).

Adaptive control, for providers that declare nothing. Every 429 pauses the *whole* lane until its
Retry-After (no upper cap). When 429s are repeated and at least 2% of the lane's recent requests
(fewer are the cost of running at the limit), it also lowers the pace, at most once per
cool-down: to just under
the rate the provider actually accepted over the last few seconds of unpaused time (when we were
pushing), by 15% when that cannot be measured, and not at all for a storm we did not cause. After
a quiet spell the pace creeps back up by 2% steps toward the limits, so a misconfigured limit
converges to the provider's real one and a transient storm costs no lasting throughput.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from judge_engine.config import Limits
from judge_engine.lanes.pacer import BURST_WINDOW_S, PACE_TOLERANCE_S, Pacer, Pacing
from judge_engine.lanes.tokens import TokenEstimate, rough_prompt_tokens

__all__ = ["BURST_WINDOW_S", "PACE_TOLERANCE_S", "Admission", "Lane", "LaneStats", "Pacer", "rough_prompt_tokens"]

MEASURE_WINDOW_S = 1.0
MEASURE_S = 5.0
MIN_SCALE = 0.02
PROBE_AFTER_S = 4.0
PROBE_EVERY_S = 2.0
PROBE_FACTOR = 1.02
DEEPEST_CUT = 0.7
DEFAULT_PAUSE_S = 1.0
SLOWDOWN_429_SHARE = 0.02
"""429s below this share of the last :data:`MEASURE_S` seconds' requests only pause the lane."""

_DECLARED_REQUESTS = ("x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit")
_DECLARED_TOKENS = ("x-ratelimit-limit-tokens", "anthropic-ratelimit-tokens-limit")


@dataclass(slots=True)
class Admission:
    """A ticket for one admitted request: what was estimated, for reconciling and learning."""

    estimated_tokens: float
    """Prompt and completion tokens charged to the token pacer."""
    rough_prompt: int = 0
    """The prompt's :func:`rough_prompt_tokens`, which the reported usage calibrates."""


@dataclass(slots=True)
class LaneStats:
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
        self._clock = clock
        self._sleep = sleep  # with ``clock``, lets tests run the lane in virtual time
        self._started = clock()
        self._paused_until = 0.0
        self._last_slowdown = -math.inf
        self._last_probe = clock()
        self._consecutive_429 = 0
        self._accepted: deque[tuple[float, float]] = deque()  # (time, tokens) of answered requests
        self._pauses: deque[tuple[float, float]] = deque()  # (from, until) of recent lane pauses
        self._recent_429: deque[float] = deque()
        self._lock = asyncio.Lock()  # one coroutine polls the windows; the rest queue fairly
        self.pacing = Pacing(limits, clock)
        """The request and token pacers, at the pace the adaptive control sets."""
        self.declared: dict[str, float] = {}
        """Limits the provider declared in its headers (``rpm``, ``tpm``), once seen."""
        self.estimate = TokenEstimate()
        """What a request will cost in tokens, learnt from the answers' usage."""

    def observe_headers(self, headers: Mapping[str, str]) -> None:
        """Adopt limits the provider declares when they are lower than the configured ones."""
        if not headers:
            return
        rpm = _declared(headers, _DECLARED_REQUESTS)
        tpm = _declared(headers, _DECLARED_TOKENS)
        changed = False
        if rpm is not None and self.declared.get("rpm") != rpm:
            self.declared["rpm"] = rpm
            changed = True
        if tpm is not None and self.declared.get("tpm") != tpm:
            self.declared["tpm"] = tpm
            changed = True
        if changed:
            self.pacing.set_limits(_lower(self.limits.rpm, self.declared.get("rpm")),
                             _lower(self.limits.tpm, self.declared.get("tpm")))

    # --- pace -------------------------------------------------------------------------------

    @property
    def scale(self) -> float:
        """Current pace as a share of the configured limits (1.0 = full configured rate)."""
        return self.pacing.scale

    def _apply_scale(self, scale: float) -> None:
        self.pacing.scale = min(1.0, max(MIN_SCALE, scale))

    def _maybe_probe(self, now: float) -> None:
        if self.pacing.scale >= 1.0:
            return
        # Not while 429s keep coming, even too few to cut the pace: probing past them would
        # climb above the provider's limit, one pause at a time.
        quiet_since = max(self._last_slowdown, self._recent_429[-1] if self._recent_429 else -math.inf)
        if now - quiet_since >= PROBE_AFTER_S and now - self._last_probe >= PROBE_EVERY_S:
            self._last_probe = now
            self._apply_scale(self.pacing.scale * PROBE_FACTOR)

    # --- admission --------------------------------------------------------------------------

    async def admit(self, rough_prompt: int = 0, max_tokens: int | None = None) -> Admission:
        """Wait until this lane may send one request whose prompt has ``rough_prompt`` tokens by
        :func:`rough_prompt_tokens` (read only when the lane paces tokens).

        The token estimate is made at the moment of admission, not when the caller starts
        waiting: a run's first ``concurrency`` requests all queue at once, and an estimate made
        then would ignore every answer that came back while they waited.
        """
        async with self._lock:
            while True:
                now = self._clock()
                if now < self._paused_until:
                    await self._sleep(self._paused_until - now)
                    continue
                self._maybe_probe(now)
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
        self._accepted.append((now, actual))
        self._forget_before(now - MEASURE_S)
        self._consecutive_429 = 0
        self.stats.tokens += int(actual)

    def on_rate_limited(self, retry_after_s: float | None) -> None:
        """A 429: pause the whole lane for Retry-After and, once per cool-down, slow down."""
        now = self._clock()
        self.stats.rate_limited += 1
        self._consecutive_429 += 1
        pause = retry_after_s
        if pause is None:
            pause = min(60.0, DEFAULT_PAUSE_S * 2 ** min(self._consecutive_429 - 1, 6))
        if now + pause > self._paused_until:
            start = max(now, self._paused_until)
            self._paused_until = now + pause
            self._pauses.append((start, self._paused_until))
            self.stats.pauses += 1
            while self._pauses and now - self._pauses[0][1] > MEASURE_S:
                self._pauses.popleft()
        self._recent_429.append(now)
        self._forget_before(now - MEASURE_S)
        # A few 429s are what running at the limit costs (arrival jitter, the spread of token
        # counts around their estimate), and pausing absorbs them; cutting the pace for them
        # costs far more (~1.5% of a TPM-bound run's throughput). Only 429s that are both
        # repeated and a noticeable share of the lane's recent requests say the pace is too high.
        recent = len(self._recent_429)
        too_many = recent >= 2 and recent >= SLOWDOWN_429_SHARE * (recent + len(self._accepted))
        if too_many and now - self._last_slowdown >= max(MEASURE_WINDOW_S, min(pause, 10.0)):
            self._last_slowdown = now
            self.stats.slowdowns += 1
            self._apply_scale(self._slower_scale(now))

    def _forget_before(self, horizon: float) -> None:
        """Drop answers and 429s older than ``horizon`` from the recent-history measures."""
        while self._accepted and self._accepted[0][0] < horizon:
            self._accepted.popleft()
        while self._recent_429 and self._recent_429[0] < horizon:
            self._recent_429.popleft()

    def _slower_scale(self, now: float) -> float:
        """Just under the pace the provider accepted lately, or 15% slower when unmeasurable."""
        span = min(MEASURE_S, now - self._started)
        active = span - sum(max(0.0, min(end, now) - max(start, now - span)) for start, end in self._pauses)
        observed: list[float] = []
        if active >= 2 * MEASURE_WINDOW_S and self._accepted:
            count = sum(1 for t, _ in self._accepted if now - t <= span)
            tokens = sum(n for t, n in self._accepted if now - t <= span)
            if self.pacing.rpm:
                observed.append(count / active * 60.0 / self.pacing.rpm)
            if self.pacing.tpm:
                observed.append(tokens / active * 60.0 / self.pacing.tpm)
        measured = max(observed) if observed else 0.0
        if measured >= 0.3 * self.pacing.scale:
            # We were really pushing: the accepted pace is the provider's real limit. Cut to just
            # under it, but never by more than 30% at once (the measure is noisy after a burst).
            return max(self.pacing.scale * DEEPEST_CUT, min(self.pacing.scale * 0.97, measured * 0.98))
        if measured > 0:
            return self.pacing.scale  # a storm we did not cause: pause, but keep the pace
        return self.pacing.scale * 0.85

    @property
    def paused_for(self) -> float:
        return max(0.0, self._paused_until - self._clock())


def _declared(headers: Mapping[str, str], names: tuple[str, ...]) -> float | None:
    for name in names:
        value = headers.get(name)
        if value is not None:
            try:
                number = float(value)
            except ValueError:
                continue
            return number if number > 0 else None
    return None


def _lower(configured: float | None, declared: float | None) -> float | None:
    if configured is None:
        return declared
    if declared is None:
        return configured
    return min(configured, declared)
