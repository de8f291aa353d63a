"""A lane paced on tokens against a provider whose window holds few of its long requests."""

from __future__ import annotations

import asyncio
import heapq
import random
from collections import deque

from judge_engine.inputs.config import Limits
from judge_engine.lanes import Admission, Lane


class _Window:
    """A provider's sliding token window (the fake server's rule): a request that does not fit
    is refused with the seconds until it would."""

    def __init__(self, tpm: float, seconds: float) -> None:
        self.capacity, self.seconds = tpm * seconds / 60.0, seconds
        self.log: deque[tuple[float, int]] = deque()
        self.tokens = 0

    def admit(self, now: float, tokens: int) -> float | None:
        while self.log and self.log[0][0] <= now - self.seconds:
            self.tokens -= self.log.popleft()[1]
        if self.tokens + tokens > self.capacity:
            excess, freed, index = self.tokens + tokens - self.capacity, 0, -1
            while freed < excess:
                index += 1
                freed += self.log[index][1]
            return self.log[index][0] + self.seconds - now
        self.log.append((now, tokens))
        self.tokens += tokens
        return None


def _long_prompts_against_a_short_window(seconds: float) -> tuple[int, int, float, Lane]:
    """GEMBA-MQM's few-shot prompt (~1,800 tokens a request) paced at 1.5M TPM against a 5 s
    window (125,000 tokens: 1% headroom is 1,250, less than one request), the wake-ups 0-4 ms
    late, answers 0.4-0.6 s after sending. Returns (requests sent, 429s, share of the limit
    accepted, the lane)."""
    now = [1000.0]
    draw = random.Random(7)
    answers: list[tuple[float, int, Admission, int, int]] = []

    def clock() -> float:
        return now[0]

    def answer_until(moment: float) -> None:
        while answers and answers[0][0] <= moment:
            at, _, admission, prompt, completion = heapq.heappop(answers)
            now[0] = max(now[0], at)
            lane.on_success(admission, prompt, completion)
        now[0] = max(now[0], moment)

    async def sleep(wait: float) -> None:
        answer_until(now[0] + wait + draw.uniform(0.0, 0.004))

    lane = Lane("t", Limits(tpm=1_500_000), clock=clock, sleep=sleep)
    window = _Window(1_500_000, 5.0)
    sent = refused = accepted = 0
    start = now[0]

    async def scenario() -> None:
        nonlocal sent, refused, accepted
        while now[0] - start < seconds:
            prompt, completion = draw.randint(1710, 1885), draw.randint(15, 40)
            rough = round(prompt / 0.982)  # bytes / 4 over-counts the shots' Chinese and German
            while True:
                admission = await lane.admit(rough, 300)
                sent += 1
                wait = window.admit(now[0], prompt + completion)
                if wait is None:
                    break
                refused += 1
                lane.on_rate_limited(wait)
            accepted += prompt + completion
            heapq.heappush(answers, (now[0] + draw.uniform(0.4, 0.6), sent, admission, prompt, completion))

    asyncio.run(scenario())
    return sent, refused, accepted / (now[0] - start) * 60.0 / 1_500_000, lane


def test_a_lane_learns_room_for_one_long_request_in_the_providers_window() -> None:
    """Paced at 99% of the limit, the window holds its share plus the request that opened it,
    and the last request is refused about once per window (17 429s in 150 s before the margin).
    The lane learns a margin from those isolated 429s: a few, then none (3 here), for the same
    share of the limit. The pace itself (``scale``) is not cut."""
    sent, refused, used, lane = _long_prompts_against_a_short_window(150.0)
    assert sent > 1900
    assert refused <= 6, f"{refused} 429s of {sent} requests"
    assert used >= 0.975
    assert lane.scale == 1.0
    assert 0.0 < lane.pacing.token_margin <= 0.02


def test_the_token_margin_narrows_again_once_the_429s_stop() -> None:
    """A margin learnt from a short spell of 429s is given back a step a minute without one."""
    now = 1000.0
    lane = Lane("t", Limits(tpm=1_500_000, headroom=0.0), clock=lambda: 1000.0)  # the controller starts then
    controller = lane.controller
    for _ in range(300):  # 10 s at the token pace: 25,000 tokens a second
        now += 1 / 30
        controller.on_success(now, 25_000 / 30)
    controller.on_rate_limited(now, 0.01)
    assert lane.pacing.token_margin == 0.005 and lane.scale == 1.0
    assert lane.pacing.tokens is not None and lane.pacing.tokens.per_minute == 1_500_000 * 0.995
    controller.on_rate_limited(now + 1.0, 0.01)  # the window still holds what the step was about
    assert lane.pacing.token_margin == 0.005
    controller.probe(now + 30.0)
    assert lane.pacing.token_margin == 0.005
    controller.probe(now + 61.0)
    assert lane.pacing.token_margin == 0.0 and lane.pacing.tokens.per_minute == 1_500_000


def test_a_429_far_below_the_token_pace_widens_no_margin() -> None:
    """A storm while the lane sends a trickle says nothing about the size of its requests."""
    now = 1000.0
    lane = Lane("t", Limits(tpm=1_500_000), clock=lambda: 1000.0)
    for _ in range(20):  # 2,000 tokens a second, against 25,000
        now += 0.5
        lane.controller.on_success(now, 1_000)
    lane.controller.on_rate_limited(now, 2.0)
    assert lane.pacing.token_margin == 0.0
