"""Per-deployment lanes: request-rate and token-rate limits with adaptive control (asyncio-throttle lives here).

One lane per judge deployment. A request is admitted when (1) the lane is not paused by a 429's
Retry-After, (2) the request-rate window has room (asyncio-throttle's sliding log), and (3) the
token window has room for its estimated tokens. After the call the estimate is reconciled with the
usage the provider reported.

Windows are one second long (``rpm/60`` requests, ``tpm/60`` tokens): providers enforce per-minute
limits at that granularity, so a one-second window never bursts past them, and it reacts fast.

Declared limits. Providers state their real per-minute limits in response headers
(``x-ratelimit-limit-requests`` / ``-tokens``; Anthropic's ``anthropic-ratelimit-*-limit``). A
declared limit lower than the configured one replaces it at the first answer, so a config that
promises too much costs no 429 storm; a higher one is ignored (the config may ration a shared key).

Adaptive control, for providers that declare nothing. Every 429 pauses the *whole* lane until its
Retry-After (no upper cap) and, at most once per cool-down, lowers the lane's pace: to just under
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from asyncio_throttle.throttler import Throttler

from judge_engine.config import Limits

WINDOW_S = 1.0
MEASURE_S = 5.0
MIN_SCALE = 0.02
PROBE_AFTER_S = 4.0
PROBE_EVERY_S = 2.0
PROBE_FACTOR = 1.02
DEEPEST_CUT = 0.7
DEFAULT_PAUSE_S = 1.0

_DECLARED_REQUESTS = ("x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit")
_DECLARED_TOKENS = ("x-ratelimit-limit-tokens", "anthropic-ratelimit-tokens-limit")


@dataclass(slots=True)
class Admission:
    """A ticket for one admitted request: its place in the token window, for reconciling."""

    entry: list[float] | None
    estimated_tokens: float


class TokenWindow:
    """A weighted sliding log: at most ``capacity`` tokens admitted in any ``period`` seconds."""

    def __init__(self, capacity: float, period: float, clock: Callable[[], float]) -> None:
        self.capacity = capacity
        self.period = period
        self._clock = clock
        self._log: deque[list[float]] = deque()  # [admitted_at, tokens]
        self._used = 0.0

    def _expire(self, now: float) -> None:
        while self._log and now - self._log[0][0] > self.period:
            self._used -= self._log.popleft()[1]
        if not self._log:
            self._used = 0.0  # no float drift across long runs

    def wait_time(self, tokens: float) -> float:
        """Seconds until ``tokens`` fit (0 when they fit now). An oversized request fits an empty window."""
        now = self._clock()
        self._expire(now)
        if self._used + tokens <= self.capacity or not self._log:
            return 0.0
        needed = self._used + tokens - self.capacity
        freed = 0.0
        for admitted_at, amount in self._log:
            freed += amount
            if freed >= needed:
                return max(0.0, admitted_at + self.period - now) + 1e-3
        return max(0.0, self._log[-1][0] + self.period - now) + 1e-3

    def admit(self, tokens: float) -> list[float]:
        entry = [self._clock(), tokens]
        self._log.append(entry)
        self._used += tokens
        return entry

    def reconcile(self, entry: list[float], actual: float) -> None:
        """Replace an estimate with the reported usage (if the entry is still in the window)."""
        if self._log and entry[0] >= self._log[0][0]:
            self._used += actual - entry[1]
        entry[1] = actual


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

    def __init__(self, name: str, limits: Limits, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.limits = limits
        self.stats = LaneStats()
        self._clock = clock
        self._started = clock()
        self._scale = 1.0
        self._paused_until = 0.0
        self._last_slowdown = -math.inf
        self._last_probe = clock()
        self._consecutive_429 = 0
        self._accepted: deque[tuple[float, float]] = deque()  # (time, tokens) of answered requests
        self._pauses: deque[tuple[float, float]] = deque()  # (from, until) of recent lane pauses
        self._lock = asyncio.Lock()  # one coroutine polls the windows; the rest queue fairly
        self._throttler: Throttler | None = None
        self._tokens: TokenWindow | None = None
        self._burst = 0
        self._rpm: float | None = None
        self._tpm: float | None = None
        self.declared: dict[str, float] = {}
        """Limits the provider declared in its headers (``rpm``, ``tpm``), once seen."""
        self._set_limits(limits.rpm, limits.tpm)
        self._completion_estimate: float | None = None
        self._prompt_ratio = 1.0

    def _set_limits(self, rpm: float | None, tpm: float | None) -> None:
        margin = 1.0 - self.limits.headroom
        self._rpm = rpm * margin if rpm else None
        self._tpm = tpm * margin if tpm else None
        if self._rpm:
            # Keep an integer burst per window and stretch the window to hit the exact rate.
            self._burst = max(1, int(self._rpm * WINDOW_S / 60.0))
            if self._throttler is None:
                self._throttler = Throttler(rate_limit=self._burst, period=1.0, retry_interval=0.002)
            self._throttler.rate_limit = self._burst
        else:
            self._throttler = None
        if self._tpm:
            if self._tokens is None:
                self._tokens = TokenWindow(0.0, WINDOW_S, self._clock)
        else:
            self._tokens = None
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

    def _period(self) -> float:
        assert self._rpm is not None
        return self._burst * 60.0 / (self._rpm * self._scale)

    def _apply_scale(self, scale: float) -> None:
        self._scale = min(1.0, max(MIN_SCALE, scale))
        if self._throttler is not None:
            self._throttler.period = self._period()
        if self._tokens is not None and self._tpm is not None:
            self._tokens.capacity = self._tpm * self._scale * WINDOW_S / 60.0

    def _maybe_probe(self, now: float) -> None:
        if self._scale >= 1.0:
            return
        if now - self._last_slowdown >= PROBE_AFTER_S and now - self._last_probe >= PROBE_EVERY_S:
            self._last_probe = now
            self._apply_scale(self._scale * PROBE_FACTOR)

    # --- admission --------------------------------------------------------------------------

    def estimate_tokens(self, prompt_tokens: int, max_tokens: int | None) -> float:
        """Prompt tokens corrected by what the provider reports, plus the completions seen so far."""
        completion = self._completion_estimate
        if completion is None:
            completion = float(min(max_tokens or 256, 256))
        return prompt_tokens * self._prompt_ratio + completion

    async def admit(self, estimated_tokens: float) -> Admission:
        """Wait until this lane may send one request of about ``estimated_tokens`` tokens."""
        async with self._lock:
            while True:
                now = self._clock()
                if now < self._paused_until:
                    await asyncio.sleep(self._paused_until - now)
                    continue
                self._maybe_probe(now)
                if self._tokens is not None:
                    wait = self._tokens.wait_time(estimated_tokens)
                    if wait > 0:
                        await asyncio.sleep(wait)
                        continue
                if self._throttler is not None:
                    await self._throttler.acquire()  # type: ignore[no-untyped-call]
                    if self._clock() < self._paused_until:
                        continue  # a 429 arrived while we waited: honour the pause first
                entry = self._tokens.admit(estimated_tokens) if self._tokens is not None else None
                self.stats.requests += 1
                return Admission(entry, estimated_tokens)

    def on_success(
        self,
        admission: Admission,
        prompt_tokens: int,
        completion_tokens: int,
        estimated_prompt: int,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Reconcile the token window with reported usage, learn better estimates, and adopt
        limits the provider declares."""
        now = self._clock()
        if headers:
            self.observe_headers(headers)
        actual = float(prompt_tokens + completion_tokens)
        if admission.entry is not None and actual > 0:
            assert self._tokens is not None
            self._tokens.reconcile(admission.entry, actual)
        if completion_tokens > 0:
            prev = self._completion_estimate
            self._completion_estimate = completion_tokens if prev is None else 0.9 * prev + 0.1 * completion_tokens
        if prompt_tokens > 0 and estimated_prompt > 0:
            self._prompt_ratio = 0.9 * self._prompt_ratio + 0.1 * (prompt_tokens / estimated_prompt)
        self._accepted.append((now, actual))
        while self._accepted and now - self._accepted[0][0] > MEASURE_S:
            self._accepted.popleft()
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
        if now - self._last_slowdown >= max(WINDOW_S, min(pause, 10.0)):
            self._last_slowdown = now
            self.stats.slowdowns += 1
            self._apply_scale(self._slower_scale(now))

    def _slower_scale(self, now: float) -> float:
        """Just under the pace the provider accepted lately, or 15% slower when unmeasurable."""
        span = min(MEASURE_S, now - self._started)
        active = span - sum(max(0.0, min(end, now) - max(start, now - span)) for start, end in self._pauses)
        observed: list[float] = []
        if active >= 2 * WINDOW_S and self._accepted:
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
