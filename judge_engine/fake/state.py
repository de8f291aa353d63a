"""The fake server's mutable state: sliding-window limits, fault draws and counters.

Everything here is touched from the server's event loop only, so nothing needs a lock.
"""

from __future__ import annotations

import hashlib
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

from judge_engine.fake.config import FakeConfig

FAULT_KINDS = ("reset", "error_500", "error_503", "truncate", "hang", "malformed", "cut_off", "stop_early")
_UNIT = float(1 << 64)


@dataclass(frozen=True, slots=True)
class Draw:
    """One request's fault draws: a uniform in [0, 1) per fault kind, one for jitter (draw 7)
    and spares (the uniform of a fired fault also picks among its variants, e.g. which prose)."""

    uniforms: tuple[float, ...]

    @classmethod
    def of(cls, digest: bytes, seen_before: int, seed: int) -> Draw:
        material = digest + f":{seen_before}:{seed}".encode()
        raw = hashlib.blake2b(material, digest_size=64).digest()
        # Faults added later draw from a second hash, so the first eight draws (and every
        # seeded test's traffic) stay what they were.
        raw += hashlib.blake2b(material, digest_size=64, person=b"more-faults").digest()
        return cls(tuple(int.from_bytes(raw[i : i + 8], "big") / _UNIT for i in range(0, len(raw), 8)))

    def fired(self, config: FakeConfig) -> dict[str, float]:
        """The fault kinds whose independent draw fell under their rate, with their draws."""
        rates = (
            config.reset_rate,
            config.error_500_rate,
            config.error_503_rate,
            config.truncate_rate,
            config.hang_rate,
            config.malformed_rate,
            config.cut_off_rate,
            config.stop_early_rate,
        )
        # Draw 7 is the jitter; the fault after it takes draw 8.
        uniforms = (*self.uniforms[:7], self.uniforms[8])
        return {k: u for k, u, r in zip(FAULT_KINDS, uniforms, rates, strict=True) if u < r}

    @property
    def jitter(self) -> float:
        """Uniform in [-1, 1)."""
        return self.uniforms[7] * 2 - 1


class SlidingWindow:
    """Admission over a sliding window: a log of (time, tokens) for admitted requests."""

    def __init__(self) -> None:
        self._log: deque[tuple[float, int]] = deque()
        self._tokens = 0

    def clear(self) -> None:
        self._log.clear()
        self._tokens = 0

    def _evict(self, now: float, window: float) -> None:
        log = self._log
        horizon = now - window
        while log and log[0][0] <= horizon:
            self._tokens -= log.popleft()[1]

    def admit(self, now: float, tokens: int, config: FakeConfig) -> tuple[float, str] | None:
        """Record the request and return None, or return ``(seconds until it would fit, which
        limit: "requests" | "tokens")`` without recording it. ``inf`` seconds: it never fits."""
        if config.rpm is None and config.tpm is None:
            return None
        window = config.window_s
        self._evict(now, window)
        log = self._log
        wait, kind = 0.0, "requests"
        if config.rpm is not None:
            capacity = int(config.rpm * window / 60 + 1e-9)
            if len(log) + 1 > capacity:
                wait = log[len(log) - capacity][0] + window - now
        if config.tpm is not None:
            capacity_tokens = config.tpm * window / 60
            if tokens > capacity_tokens:
                return float("inf"), "tokens"
            excess = self._tokens + tokens - capacity_tokens
            if excess > 0:
                freed, index = 0, -1
                while freed < excess:  # the oldest entries whose expiry frees enough tokens
                    index += 1
                    freed += log[index][1]
                token_wait = log[index][0] + window - now
                if token_wait > wait:
                    wait, kind = token_wait, "tokens"
        if wait > 0:
            return wait, kind
        log.append((now, tokens))
        self._tokens += tokens
        return None

    def remaining(self, config: FakeConfig) -> tuple[int | None, int | None]:
        """Requests and tokens left in the window (None: unlimited), as of the last admission."""
        requests = tokens = None
        if config.rpm is not None:
            requests = max(0, int(config.rpm * config.window_s / 60 + 1e-9) - len(self._log))
        if config.tpm is not None:
            tokens = max(0, int(config.tpm * config.window_s / 60) - self._tokens)
        return requests, tokens


class Stats:
    """Counters, O(1) memory per request except one 8-byte digest per distinct body."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.requests_total = 0
        self.by_status: Counter[int] = Counter()
        self.by_fault: Counter[str] = Counter()
        self.by_model: Counter[str] = Counter()
        self.by_protocol: Counter[str] = Counter()
        self.by_prompt: Counter[str] = Counter()
        """Requests per :func:`~judge_engine.fake.answers.prompt_key` (every one that was read)."""
        self.accepted_requests = 0
        self.accepted_tokens = 0
        self.first_accepted_s: float | None = None
        self.last_accepted_s: float | None = None
        self.seen: dict[bytes, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0

    def arrived(self, digest: bytes) -> int:
        """Count a body; return how many times it was seen before."""
        before = self.seen.get(digest, 0)
        self.seen[digest] = before + 1
        return before

    def accepted(self, now: float, tokens: int) -> None:
        self.accepted_requests += 1
        self.accepted_tokens += tokens
        if self.first_accepted_s is None:
            self.first_accepted_s = now
        self.last_accepted_s = now

    def snapshot(self, uptime_s: float) -> dict[str, Any]:
        return {
            "uptime_s": uptime_s,
            "requests_total": self.requests_total,
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "by_fault": dict(sorted(self.by_fault.items())),
            "by_model": dict(sorted(self.by_model.items())),
            "by_protocol": dict(sorted(self.by_protocol.items())),
            "by_prompt": dict(self.by_prompt),
            "rate_limited": self.by_status.get(429, 0),
            "accepted_requests": self.accepted_requests,
            "accepted_tokens": self.accepted_tokens,
            "first_accepted_s": self.first_accepted_s,
            "last_accepted_s": self.last_accepted_s,
            "distinct_bodies": len(self.seen),
            # a body received more than once: a request sent again (a retry after a fault, a call
            # in flight at a kill), never a repeat, whose bodies differ
            "bodies_seen_again": sum(1 for n in self.seen.values() if n > 1),
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
        }
