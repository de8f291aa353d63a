"""A lane's pace: GCRA pacers for requests and tokens, released in small bursts.

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
"""

from __future__ import annotations

import math
from collections.abc import Callable

from judge_engine.inputs.config import Limits

PACE_TOLERANCE_S = 0.02
"""Slack of the pacers: a wake-up this late is caught up."""
BURST_WINDOW_S = 0.1
"""How far ahead of its slot (beyond the tolerance: 120 ms in all) a request may go out with the
on-time one before it (``Limits.burst``). Wide enough for the few-shot GEMBA prompt's ~1,800-token
requests at 1.5M TPM (a slot every ~75 ms, which a 70 ms window left one by one); small against
any provider window, so going early costs no more than the one request a window may see above
its share anyway."""


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


class Pacing:
    """A lane's request and token pacers, each at ``scale`` times the limit in force for it.

    The limits in force are the configured ones (or lower ones the provider declared: see
    ``set_limits``) less the headroom; the adaptive controller sets ``scale``.
    """

    def __init__(self, limits: Limits, clock: Callable[[], float]) -> None:
        self.headroom = limits.headroom
        self.burst = limits.burst
        self.requests: Pacer | None = None
        """Paces requests; None when no request rate is limited."""
        self.tokens: Pacer | None = None
        """Paces prompt and completion tokens; None when no token rate is limited."""
        self.rpm: float | None = None
        """Requests per minute in force (after the headroom) at scale 1; None for no limit."""
        self.tpm: float | None = None
        """Tokens per minute in force (after the headroom) at scale 1; None for no limit."""
        self._clock = clock
        self._scale = 1.0
        self._token_margin = 0.0
        self._released_early = 0  # requests sent ahead of their slot since the last on-time one
        self.set_limits(limits.rpm, limits.tpm)

    def set_limits(self, rpm: float | None, tpm: float | None) -> None:
        """Pace at these per-minute limits (less the headroom), keeping each pacer's schedule."""
        margin = 1.0 - self.headroom
        self.rpm = rpm * margin if rpm else None
        self.tpm = tpm * margin if tpm else None
        if self.rpm is None:
            self.requests = None
        elif self.requests is None:
            self.requests = Pacer(self.rpm, self._clock)
        if self.tpm is None:
            self.tokens = None
        elif self.tokens is None:
            self.tokens = Pacer(self.tpm, self._clock)
        self.scale = self._scale

    @property
    def scale(self) -> float:
        """Current pace as a share of the limits in force (1.0 = their full rate)."""
        return self._scale

    @scale.setter
    def scale(self, scale: float) -> None:
        self._scale = scale
        if self.requests is not None and self.rpm is not None:
            self.requests.per_minute = self.rpm * scale
        if self.tokens is not None and self.tpm is not None:
            self.tokens.per_minute = self.tpm * scale * (1.0 - self._token_margin)

    @property
    def token_margin(self) -> float:
        """Share of the token pace also kept free because one request is a large part of the
        provider's window (learnt from its 429s: see the controller)."""
        return self._token_margin

    @token_margin.setter
    def token_margin(self, margin: float) -> None:
        self._token_margin = margin
        self.scale = self._scale

    def wait_to_release(self) -> float:
        """Seconds the next request must still wait; 0 releases it now, on its slot or early
        with the on-time one before it (at most ``burst - 1`` early in a row, counted here)."""
        wait = self._wait_time()
        if wait == 0:
            self._released_early = 0
        elif self._released_early < self.burst - 1 and self._wait_time(BURST_WINDOW_S) == 0:
            # Goes out with the on-time request before it: one wake-up, several sends.
            self._released_early += 1
            return 0.0
        return wait

    def wait_now(self) -> float:
        """Seconds until the next request's slot, without releasing anything."""
        return self._wait_time()

    def admit(self, estimated_tokens: float) -> None:
        """Take one released request's slot in the request schedule and its estimated tokens'
        in the token schedule."""
        if self.requests is not None:
            self.requests.admit()
        if self.tokens is not None:
            self.tokens.admit(estimated_tokens)

    def reconcile_tokens(self, delta: float) -> None:
        """Move the token schedule by what an answer used beyond (or below) its estimate."""
        if self.tokens is not None:
            self.tokens.reconcile(delta)

    def _wait_time(self, early_s: float = 0.0) -> float:
        return max(
            self.requests.wait_time(early_s) if self.requests is not None else 0.0,
            self.tokens.wait_time(early_s) if self.tokens is not None else 0.0,
        )
