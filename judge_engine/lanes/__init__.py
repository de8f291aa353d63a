"""Per-deployment lanes: request-rate and token-rate pacing with adaptive control.

One lane per judge deployment. A request is admitted when (1) the lane is not paused by a 429's
Retry-After, (2) the request pacer allows it and (3) the token pacer allows its estimated tokens.
After the call the token estimate is reconciled with the usage the provider reported.

Token estimates without a tokenizer: see :mod:`judge_engine.lanes.tokens`.

Pacing, not windows. Both pacers are GCRA ("virtual scheduling"): admissions are spaced
``cost * 60 / per_minute`` seconds apart, with a few milliseconds of tolerance so that a late
wake-up is caught up instead of lost. An earlier design admitted ``rpm/60`` requests per
one-second window; a provider window that is not a whole number of ours (say 5 s against 0.995 s)
then lets one extra burst in, and every such burst is a wave of 429s (benchmark: 0.969 of the
limit; paced: 0.98). Pacing keeps any provider window to its share, give or take a burst.

Small bursts, on purpose. A paced client wakes from idle for every request, and on a small VM a
wake-up costs more CPU than the request it sends (a bare aiohttp loop at 50 requests/s: ~1.0 ms
per request one by one, ~0.7 in pairs, ~0.6 in fours). So when a slot comes due, the waiters
whose slots follow within :data:`BURST_WINDOW_S` (past the tolerance) go out with it,
``Limits.burst`` at most (2: pairs): the long-run pace is unchanged, and a window sees at most
``burst - 1`` requests above it.
Measured (benchmarks/, TPM-bound): one by one 1.70-1.97 ms of CPU per request, 0.45% 429s; pairs
1.47-1.56 ms, 0.65%; threes 1.52 ms, 0.84% (a burst spends part of the 1% headroom).
asyncio-throttle, named in the first design, polls a sliding log: it can only pace exactly by
polling fast (CPU) and otherwise loses the polling interval on every request, so it went.

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
from judge_engine.lanes.tokens import TokenEstimate, rough_prompt_tokens

__all__ = ["BURST_WINDOW_S", "PACE_TOLERANCE_S", "Admission", "Lane", "LaneStats", "Pacer", "rough_prompt_tokens"]

PACE_TOLERANCE_S = 0.02
"""Slack of the pacers: a wake-up this late is caught up."""
BURST_WINDOW_S = 0.05
"""How far ahead of its slot (beyond the tolerance: 70 ms in all) a request may go out with the
on-time one before it (``Limits.burst``)."""
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


class Pacer:
    """GCRA: admissions of ``cost`` units spaced ``cost * 60 / per_minute`` seconds apart.

    ``per_minute`` may change at any time (adaptive control); ``reconcile`` moves the schedule by
    the difference between an estimated and an actual cost.
    """

    def __init__(self, per_minute: float, clock: Callable[[], float], tolerance_s: float = PACE_TOLERANCE_S) -> None:
        self.per_minute = per_minute
        self.tolerance_s = tolerance_s
        self._clock = clock
        self._tat = -math.inf  # theoretical arrival time of the next conforming admission

    def wait_time(self, early_s: float = 0.0) -> float:
        """Seconds until the next admission conforms (0 when it does now), or would conform if
        it may go ``early_s`` ahead of its slot."""
        return max(0.0, self._tat - self.tolerance_s - early_s - self._clock())

    def admit(self, cost: float = 1.0) -> None:
        self._tat = max(self._clock(), self._tat) + cost * 60.0 / self.per_minute

    def reconcile(self, delta_cost: float) -> None:
        self._tat += delta_cost * 60.0 / self.per_minute


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
        self._released_early = 0  # requests sent ahead of their slot since the last on-time one
        self._started = clock()
        self._scale = 1.0
        self._paused_until = 0.0
        self._last_slowdown = -math.inf
        self._last_probe = clock()
        self._consecutive_429 = 0
        self._accepted: deque[tuple[float, float]] = deque()  # (time, tokens) of answered requests
        self._pauses: deque[tuple[float, float]] = deque()  # (from, until) of recent lane pauses
        self._recent_429: deque[float] = deque()
        self._lock = asyncio.Lock()  # one coroutine polls the windows; the rest queue fairly
        self._requests: Pacer | None = None
        self._tokens: Pacer | None = None
        self._rpm: float | None = None
        self._tpm: float | None = None
        self.declared: dict[str, float] = {}
        """Limits the provider declared in its headers (``rpm``, ``tpm``), once seen."""
        self._set_limits(limits.rpm, limits.tpm)
        self.estimate = TokenEstimate()
        """What a request will cost in tokens, learnt from the answers' usage."""

    def _set_limits(self, rpm: float | None, tpm: float | None) -> None:
        margin = 1.0 - self.limits.headroom
        self._rpm = rpm * margin if rpm else None
        self._tpm = tpm * margin if tpm else None
        if self._rpm is None:
            self._requests = None
        elif self._requests is None:
            self._requests = Pacer(self._rpm, self._clock)
        if self._tpm is None:
            self._tokens = None
        elif self._tokens is None:
            self._tokens = Pacer(self._tpm, self._clock)
        self._apply_scale(self._scale)

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
            self._set_limits(_lower(self.limits.rpm, self.declared.get("rpm")),
                             _lower(self.limits.tpm, self.declared.get("tpm")))

    # --- pace -------------------------------------------------------------------------------

    @property
    def scale(self) -> float:
        """Current pace as a share of the configured limits (1.0 = full configured rate)."""
        return self._scale

    def _apply_scale(self, scale: float) -> None:
        self._scale = min(1.0, max(MIN_SCALE, scale))
        if self._requests is not None and self._rpm is not None:
            self._requests.per_minute = self._rpm * self._scale
        if self._tokens is not None and self._tpm is not None:
            self._tokens.per_minute = self._tpm * self._scale

    def _maybe_probe(self, now: float) -> None:
        if self._scale >= 1.0:
            return
        # Not while 429s keep coming, even too few to cut the pace: probing past them would
        # climb above the provider's limit, one pause at a time.
        quiet_since = max(self._last_slowdown, self._recent_429[-1] if self._recent_429 else -math.inf)
        if now - quiet_since >= PROBE_AFTER_S and now - self._last_probe >= PROBE_EVERY_S:
            self._last_probe = now
            self._apply_scale(self._scale * PROBE_FACTOR)

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
                wait = self._wait_time()
                if wait > 0:
                    if self._released_early < self.limits.burst - 1 and self._wait_time(BURST_WINDOW_S) == 0:
                        # Goes out with the on-time request before it: one wake-up, several sends.
                        self._released_early += 1
                    else:
                        await self._sleep(wait)
                        continue  # re-check: a 429 may have paused the lane meanwhile
                else:
                    self._released_early = 0
                estimated = 0.0
                if self._requests is not None:
                    self._requests.admit()
                if self._tokens is not None:
                    estimated = self.estimate.tokens(rough_prompt, max_tokens)
                    self._tokens.admit(estimated)
                self.stats.requests += 1
                return Admission(estimated, rough_prompt)

    def _wait_time(self, early_s: float = 0.0) -> float:
        return max(
            self._requests.wait_time(early_s) if self._requests is not None else 0.0,
            self._tokens.wait_time(early_s) if self._tokens is not None else 0.0,
        )

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
        if self._tokens is not None and actual > 0:
            self._tokens.reconcile(actual - admission.estimated_tokens)
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
            if self._rpm:
                observed.append(count / active * 60.0 / self._rpm)
            if self._tpm:
                observed.append(tokens / active * 60.0 / self._tpm)
        measured = max(observed) if observed else 0.0
        if measured >= 0.3 * self._scale:
            # We were really pushing: the accepted pace is the provider's real limit. Cut to just
            # under it, but never by more than 30% at once (the measure is noisy after a burst).
            return max(self._scale * DEEPEST_CUT, min(self._scale * 0.97, measured * 0.98))
        if measured > 0:
            return self._scale  # a storm we did not cause: pause, but keep the pace
        return self._scale * 0.85

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
