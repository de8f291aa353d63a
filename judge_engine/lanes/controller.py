"""A lane's adaptive control: pauses on 429s, slowdowns, probes back up, declared limits.

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

The token margin, for long prompts. A paced lane's requests land in any provider window as its
share of the limit plus one request: the request that opens the window was paid for before it.
When one request is more than the headroom of the provider's window (1,800 tokens against 1% of a
5-second window of 1.5M TPM: 1,250), that last request is refused about once per window
(benchmarks/, tpm-long: a 429 every ~5 s, 1.2% of requests). The provider's window is not known,
so the lane learns what it needs: an isolated 429 while the lane runs at its token pace widens a
margin of the token pace by half a percent (once per :data:`MEASURE_S`, at most 5%), and a minute
without a 429 narrows it again. It settles at 0.5-1% there, and the 429s stop for the same share
of the limit (a refused request's slot was lost anyway). This is not the slowdown above: the pace
(``scale``) is kept.

The controller reads no clock: the lane tells it the time of each event.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import NamedTuple

from judge_engine.inputs.config import Limits
from judge_engine.lanes.pacer import Pacing

MEASURE_WINDOW_S = 1.0
"""Shortest cool-down between two slowdowns, and half the unpaused time a measure needs."""
MEASURE_S = 5.0
"""How far back the recent answers, 429s and pauses are kept and measured."""
MIN_SCALE = 0.02
"""The slowest pace, as a share of the limits in force."""
PROBE_AFTER_S = 4.0
"""Seconds without a slowdown or a 429 before the pace probes back up."""
PROBE_EVERY_S = 2.0
"""Seconds between two probes."""
PROBE_FACTOR = 1.02
"""Each probe's step up (2%), until the limits in force."""
DEEPEST_CUT = 0.7
"""A slowdown keeps at least this share of the pace (at most a 30% cut per episode)."""
DEFAULT_PAUSE_S = 1.0
"""Pause for a 429 without Retry-After, doubled for each one in a row (at most 60 s)."""
SLOWDOWN_429_SHARE = 0.02
"""429s below this share of the last :data:`MEASURE_S` seconds' requests only pause the lane."""
MARGIN_STEP = 0.005
"""Each step of the token margin, as a share of the token pace."""
MARGIN_MAX = 0.05
"""The widest token margin."""
MARGIN_RELAX_S = 60.0
"""Seconds without a 429 before the token margin steps back down."""
AT_PACE = 0.9
"""Share of the token pace the provider accepted lately above which a lane is running at it."""

_DECLARED_REQUESTS = ("x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit")
_DECLARED_TOKENS = ("x-ratelimit-limit-tokens", "anthropic-ratelimit-tokens-limit")


class Reaction(NamedTuple):
    """What the controller did about one 429."""

    paused: bool
    """The lane's pause was started or made longer."""
    slowed: bool
    """A slowdown was decided (its cut is none for a storm we did not cause)."""


class Controller:
    """Sets a lane's pace from what the provider says: its 429s, answers and declared limits."""

    def __init__(self, pacing: Pacing, limits: Limits, now: float) -> None:
        self.pacing = pacing
        self.limits = limits
        self.declared: dict[str, float] = {}
        """Limits the provider declared in its headers (``rpm``, ``tpm``), once seen."""
        self.paused_until = 0.0
        """No request is released before this time (a 429's Retry-After)."""
        self._started = now
        self._last_slowdown = -math.inf
        self._last_probe = now
        self._last_429 = -math.inf
        self._last_margin = -math.inf  # when the token margin last changed
        self._consecutive_429 = 0
        self._accepted: deque[tuple[float, float]] = deque()  # (time, tokens) of answered requests
        self._pauses: deque[tuple[float, float]] = deque()  # (from, until) of recent lane pauses
        self._recent_429: deque[float] = deque()

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

    def probe(self, now: float) -> None:
        """Step the pace back up if it is below the limits and things have been quiet (and the
        token margin down, after a longer quiet spell)."""
        if self.pacing.token_margin > 0 and now - max(self._last_429, self._last_margin) >= MARGIN_RELAX_S:
            self._last_margin = now
            self.pacing.token_margin = max(0.0, self.pacing.token_margin - MARGIN_STEP)
        if self.pacing.scale >= 1.0:
            return
        # Not while 429s keep coming, even too few to cut the pace: probing past them would
        # climb above the provider's limit, one pause at a time.
        quiet_since = max(self._last_slowdown, self._recent_429[-1] if self._recent_429 else -math.inf)
        if now - quiet_since >= PROBE_AFTER_S and now - self._last_probe >= PROBE_EVERY_S:
            self._last_probe = now
            self._set_scale(self.pacing.scale * PROBE_FACTOR)

    def on_success(self, now: float, tokens: float) -> None:
        """Record an answer the provider accepted, with the tokens it reported."""
        self._accepted.append((now, tokens))
        self._forget_before(now - MEASURE_S)
        self._consecutive_429 = 0

    def on_rate_limited(self, now: float, retry_after_s: float | None) -> Reaction:
        """A 429: pause the whole lane for Retry-After and, once per cool-down, slow down."""
        self._consecutive_429 += 1
        pause = retry_after_s
        if pause is None:
            pause = min(60.0, DEFAULT_PAUSE_S * 2 ** min(self._consecutive_429 - 1, 6))
        paused = self.pause(now, pause)
        self._last_429 = now
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
            self._set_scale(self._slower_scale(now))
            return Reaction(paused, slowed=True)
        self._widen_margin(now)
        return Reaction(paused, slowed=False)

    def _widen_margin(self, now: float) -> None:
        """An isolated 429 while the lane sends at its token pace: the provider's window cannot
        take one more request (see the module docstring)."""
        pacing = self.pacing
        if pacing.tokens is None or pacing.tpm is None or pacing.token_margin >= MARGIN_MAX:
            return
        if now - self._last_margin < MEASURE_S:
            return  # the provider's window may still hold the requests the last step was about
        tokens = self._observed(now)[1]
        pace = pacing.tpm * pacing.scale * (1.0 - pacing.token_margin)
        if tokens is None or tokens * pacing.tpm < AT_PACE * pace:
            return  # not at the token pace: a storm, or the request rate binds
        self._last_margin = now
        pacing.token_margin = min(MARGIN_MAX, pacing.token_margin + MARGIN_STEP)

    def pause(self, now: float, seconds: float) -> bool:
        """Pause the lane until ``now + seconds`` unless it is paused longer already; says
        whether it did. Paused time is left out when the accepted pace is measured."""
        if now + seconds > self.paused_until:
            start = max(now, self.paused_until)
            self.paused_until = now + seconds
            self._pauses.append((start, self.paused_until))
            while self._pauses and now - self._pauses[0][1] > MEASURE_S:
                self._pauses.popleft()
            return True
        return False

    def _set_scale(self, scale: float) -> None:
        self.pacing.scale = min(1.0, max(MIN_SCALE, scale))

    def _forget_before(self, horizon: float) -> None:
        """Drop answers and 429s older than ``horizon`` from the recent-history measures."""
        while self._accepted and self._accepted[0][0] < horizon:
            self._accepted.popleft()
        while self._recent_429 and self._recent_429[0] < horizon:
            self._recent_429.popleft()

    def _observed(self, now: float) -> tuple[float | None, float | None]:
        """The request and token rates the provider accepted over the last :data:`MEASURE_S`
        seconds of unpaused time, as shares of the limits in force (None: no such limit, or too
        little unpaused time to measure)."""
        rpm, tpm = self.pacing.rpm, self.pacing.tpm
        span = min(MEASURE_S, now - self._started)
        active = span - sum(max(0.0, min(end, now) - max(start, now - span)) for start, end in self._pauses)
        if active < 2 * MEASURE_WINDOW_S or not self._accepted:
            return None, None
        count = sum(1 for t, _ in self._accepted if now - t <= span)
        tokens = sum(n for t, n in self._accepted if now - t <= span)
        return (count / active * 60.0 / rpm if rpm else None), (tokens / active * 60.0 / tpm if tpm else None)

    def _slower_scale(self, now: float) -> float:
        """Just under the pace the provider accepted lately, or 15% slower when unmeasurable."""
        scale = self.pacing.scale
        observed = [share for share in self._observed(now) if share is not None]
        measured = max(observed) if observed else 0.0
        if measured >= 0.3 * scale:
            # We were really pushing: the accepted pace is the provider's real limit. Cut to just
            # under it, but never by more than 30% at once (the measure is noisy after a burst).
            return max(scale * DEEPEST_CUT, min(scale * 0.97, measured * 0.98))
        if measured > 0:
            return scale  # a storm we did not cause: pause, but keep the pace
        return scale * 0.85


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
