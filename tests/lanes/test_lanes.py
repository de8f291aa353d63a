"""Lane admission and adaptive control: pacing, 429 pauses and slow-downs, declared limits."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from judge_engine.inputs.config import Limits
from judge_engine.lanes import Admission, Lane, Pacer, rough_prompt_tokens


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_pacer_spaces_admissions_and_reconciles() -> None:
    clock = FakeClock()
    pacer = Pacer(per_minute=60_000, clock=clock, tolerance_s=0.0)  # 1,000 units per second
    assert pacer.wait_time() == 0.0
    pacer.admit(800)
    assert pacer.wait_time() == pytest.approx(0.8)  # 800 units take 0.8 s of the schedule
    pacer.reconcile(-500)  # the provider reported 300, not 800
    assert pacer.wait_time() == pytest.approx(0.3)
    clock.now += 0.3
    assert pacer.wait_time() == 0.0
    clock.now += 10.0  # idle time earns no burst credit
    pacer.admit(100)
    assert pacer.wait_time() == pytest.approx(0.1)


def test_pacer_tolerance_catches_up_late_wake_ups() -> None:
    clock = FakeClock()
    pacer = Pacer(per_minute=3000, clock=clock, tolerance_s=0.02)  # one every 20 ms
    started = clock.now
    for _ in range(100):
        clock.now += pacer.wait_time()
        clock.now += 0.005  # every wake-up 5 ms late
        pacer.admit()
    # Waiters aim at TAT - tolerance while the schedule stays anchored on TAT, so lateness
    # below the tolerance costs nothing: 100 admissions take 99 slots (+ the last wake-up).
    assert clock.now - started == pytest.approx(99 * 0.02 - 0.02 + 0.005 * 2, abs=0.006)


def test_paced_lane_never_exceeds_a_provider_window() -> None:
    """The burst-per-window design let an extra burst into windows that are not a whole number
    of its own; a paced lane sends at most the window's share plus the tolerance (requests here
    arrive on their slots; the lane's own small bursts are tested below)."""
    clock = FakeClock()
    lane = Lane("t", Limits(rpm=3000, headroom=0.0), clock=clock)
    request_pacer = lane.pacing.requests
    assert request_pacer is not None
    sent: list[float] = []

    async def scenario() -> None:
        for _ in range(600):
            while (wait := max(request_pacer.wait_time(), 0.0)) > 0:
                clock.now += wait
            await lane.admit(1)
            sent.append(clock.now)

    asyncio.run(scenario())
    window = 5.0
    most = max(sum(1 for t in sent if start <= t < start + window) for start in sent)
    assert most <= 3000 * window / 60 + 2


def _virtual_lane_admissions(limits: Limits, count: int) -> list[float]:
    """Times at which ``count`` back-to-back requests are admitted, in virtual time."""
    clock = FakeClock()

    async def sleep(seconds: float) -> None:
        clock.now += seconds

    lane = Lane("t", limits, clock=clock, sleep=sleep)

    async def scenario() -> list[float]:
        sent = []
        for _ in range(count):
            await lane.admit(1)
            sent.append(clock.now)
        return sent

    return asyncio.run(scenario())


@pytest.mark.parametrize("burst", [1, 2, 3])
def test_paced_lane_releases_small_bursts_at_an_unchanged_pace(burst: int) -> None:
    """When a slot comes due, the next ``burst - 1`` waiters within 100 ms go with it (one
    wake-up, several sends); the long-run pace and every window's share stay the limit's."""
    from collections import Counter

    sent = _virtual_lane_admissions(Limits(rpm=3000, headroom=0.0, burst=burst), 600)  # one per 20 ms
    groups = Counter(sent)
    steady = [size for at, size in groups.items() if at > sent[0]]  # the first also catches up
    assert max(steady) == burst and Counter(steady).most_common(1)[0][0] == burst
    assert len(groups) == pytest.approx(600 / burst, abs=2)
    # the pace is unchanged: 600 requests take 600 slots, less the last group's and the
    # first one's catch-up (the tolerance)
    assert (600 - burst - 1.5) * 0.02 <= sent[-1] - sent[0] <= 600 * 0.02
    window = 5.0 - 1e-6  # a provider's 5 s window, clear of float noise at its edge

    def most_in_a_window(starts: list[float]) -> int:
        return max(sum(1 for t in sent if start <= t < start + window) for start in starts)

    assert most_in_a_window(sent) <= 250 + burst  # the start's catch-up (tolerance) adds one
    assert 250 <= most_in_a_window([t for t in sent if t > sent[0]]) <= 250 + burst - 1


def test_a_slow_lane_does_not_burst() -> None:
    """A waiter wakes 20 ms (the tolerance) before its slot, so at one slot per 150 ms the next
    slot is 170 ms away, beyond the 100 ms burst window past the tolerance: no pairs."""
    sent = _virtual_lane_admissions(Limits(rpm=400, headroom=0.0, burst=3), 20)
    gaps = [b - a for a, b in zip(sent[2:], sent[3:], strict=False)]  # the start catches up
    assert gaps == pytest.approx([0.15] * 17, abs=0.001)


def test_a_few_shot_tpm_pace_goes_out_in_pairs() -> None:
    """~1,800-token requests at 1.5M TPM come due every ~73 ms: within the burst window, so
    they go out in pairs (a 70 ms window sent them one by one, each on a wake-up of its own)."""
    sent = _virtual_lane_admissions(Limits(rpm=820, headroom=0.0, burst=2), 200)  # a slot per 73 ms
    steady = [round(b - a, 3) for a, b in zip(sent[2:], sent[3:], strict=False)]
    assert steady.count(0.0) >= 95


def test_rough_prompt_size_follows_utf8_bytes_and_framing() -> None:
    english = [{"role": "user", "content": "a" * 400}]
    chinese = [{"role": "user", "content": "文" * 400}]  # 3 UTF-8 bytes each, ~1 token each
    assert rough_prompt_tokens(english) == 3 + 4 + 100
    assert rough_prompt_tokens(chinese) == 3 + 4 + 300
    assert rough_prompt_tokens([*english, {"role": "assistant", "content": ""}]) == 3 + 4 + 100 + 4


def _simulate_tpm_lane(provider_tokens_per_estimated: float, *, seconds: float = 30.0) -> list[tuple[float, int]]:
    """A lane paced at 60,000 TPM against a provider whose tokenizer counts ``ratio`` times the
    rough estimate, answering 0.5 s after each admission. Returns (sent at, actual tokens)."""
    import heapq

    clock = FakeClock()
    start = clock.now
    lane = Lane("t", Limits(tpm=60_000, headroom=0.0), clock=clock)
    token_pacer = lane.pacing.tokens
    assert token_pacer is not None
    estimated_prompt = 500
    prompt = round(estimated_prompt * provider_tokens_per_estimated)
    completion = 100
    sent: list[tuple[float, int]] = []
    answers: list[tuple[float, int, Admission]] = []

    async def scenario() -> None:
        while clock.now - start < seconds:
            wait = token_pacer.wait_time()
            if answers and answers[0][0] <= clock.now + wait:
                at, _, admission = heapq.heappop(answers)
                clock.now = max(clock.now, at)
                lane.on_success(admission, prompt, completion)
                continue
            clock.now += wait
            admission = await lane.admit(estimated_prompt, 300)
            sent.append((clock.now - start, prompt + completion))
            heapq.heappush(answers, (clock.now + 0.5, len(sent), admission))

    asyncio.run(scenario())
    return sent


@pytest.mark.parametrize("ratio", [0.6, 1.0, 1.7])
def test_token_pacing_learns_the_providers_count_from_reported_usage(ratio: float) -> None:
    """The lane sizes prompts without a tokenizer; whatever the provider's tokenizer counts, its
    reported usage calibrates the pace to the limit (1,000 tokens per second here)."""
    sent = _simulate_tpm_lane(ratio)
    request = sent[0][1]
    # Every 10-second window, from the first one (sent before any usage came back), holds the
    # limit's 10,000 tokens to within one request: the mis-estimate of the first in-flight
    # requests is paid back by the reconciled schedule, and the learnt ratio keeps it exact.
    for window_start in range(0, 20):
        tokens = sum(n for t, n in sent if window_start <= t < window_start + 10)
        assert abs(tokens - 10_000) <= request, (window_start, tokens)


@pytest.mark.slow
def test_lane_paces_requests_at_the_configured_rate() -> None:
    async def scenario() -> float:
        lane = Lane("t", Limits(rpm=1200, headroom=0.0))  # 20 per second
        started = time.monotonic()
        for _ in range(50):
            await lane.admit(10)
        return time.monotonic() - started

    elapsed = asyncio.run(scenario())
    assert 1.9 <= elapsed <= 3.0  # 20 now, 20 after ~1 s, 10 after ~2 s


def test_lane_pauses_whole_lane_for_retry_after_and_slows_down() -> None:
    async def scenario() -> tuple[float, float]:
        lane = Lane("t", Limits(rpm=60000))
        await lane.admit(1)
        lane.on_rate_limited(0.4)
        lane.on_rate_limited(0.4)  # a second 429: the pace, not jitter, is the problem
        started = time.monotonic()
        await lane.admit(1)
        return time.monotonic() - started, lane.scale

    waited, scale = asyncio.run(scenario())
    assert waited >= 0.39
    assert scale < 1.0


def test_misconfigured_limit_converges_to_accepted_rate() -> None:
    clock = FakeClock()
    lane = Lane("t", Limits(rpm=6000, headroom=0.0), clock=clock)

    def accept_for(seconds: float) -> None:  # the provider accepts 50 requests per second (3,000 RPM)
        for _ in range(int(seconds * 50)):
            clock.now += 0.02
            lane.on_success(Admission(1), 1, 1)

    def refused(count: int) -> None:  # what we send above 3,000 RPM is refused
        for _ in range(count):
            lane.on_rate_limited(0.1)

    accept_for(5)
    refused(10)
    assert lane.scale == 0.7  # at most a 30% cut per episode, however low the measure
    accept_for(5)
    refused(10)
    assert 0.47 <= lane.scale <= 0.51  # just under 3000/6000 after the second episode


def test_an_isolated_429_pauses_but_keeps_the_pace() -> None:
    clock = FakeClock()
    lane = Lane("t", Limits(rpm=6000, headroom=0.0), clock=clock)

    for _ in range(250):
        clock.now += 0.02
        lane.on_success(Admission(1), 1, 1)
    lane.on_rate_limited(0.5)
    assert lane.scale == 1.0 and lane.paused_for == pytest.approx(0.5)
    clock.now += 6.0  # long after: still isolated
    lane.on_rate_limited(0.5)
    assert lane.scale == 1.0


def test_a_few_429s_at_the_limit_pause_but_keep_the_pace() -> None:
    """Two 429s seconds apart among 250 requests (0.8%) are the spread of running at the limit;
    a cut would cost more than they do. Ten (4%) cut the pace."""
    clock = FakeClock()
    lane = Lane("t", Limits(rpm=3000, headroom=0.0), clock=clock)

    for second in range(5):
        for _ in range(50):
            clock.now += 0.02
            lane.on_success(Admission(1), 1, 1)
        if second in (2, 4):
            lane.on_rate_limited(0.01)
    assert lane.scale == 1.0 and lane.stats.rate_limited == 2
    for _ in range(3):
        lane.on_rate_limited(0.01)
    assert lane.scale == 1.0  # 5 of ~255 requests: under 2%
    lane.on_rate_limited(0.01)
    assert lane.scale < 1.0  # 6: over 2%


def test_the_pace_is_not_probed_upward_while_429s_keep_coming() -> None:
    """After a cut, a lane probes back up only once 429s have stopped: probing past 429s too few
    to cut the pace again would climb above the provider's limit, one pause at a time."""
    clock = FakeClock()

    async def sleep(seconds: float) -> None:
        clock.now += seconds

    lane = Lane("t", Limits(rpm=6000, headroom=0.0), clock=clock, sleep=sleep)

    async def run_for(seconds: float, *, refuse_every_s: float | None) -> None:
        end, next_429 = clock.now + seconds, clock.now + (refuse_every_s or math.inf)
        while clock.now < end:
            clock.now += 0.02  # the provider accepts 50 per second
            lane.on_success(Admission(1), 1, 1)
            if clock.now >= next_429:
                lane.on_rate_limited(0.01)
                next_429 += refuse_every_s or math.inf
            await lane.admit(1)  # where the lane probes

    async def scenario() -> tuple[float, float, float]:
        await run_for(5.0, refuse_every_s=None)
        for _ in range(10):
            lane.on_rate_limited(0.01)  # a flood: cut (and the next 429 within 5 s cuts once more)
        await run_for(3.0, refuse_every_s=2.0)
        settled = lane.scale
        await run_for(20.0, refuse_every_s=2.0)  # one 429 per 100 requests: too few to cut again
        held = lane.scale
        await run_for(20.0, refuse_every_s=None)
        return settled, held, lane.scale

    settled, held, probed = asyncio.run(scenario())
    assert settled < 1.0 and held == settled and probed > held


def test_storm_we_did_not_cause_does_not_cut_the_pace() -> None:
    clock = FakeClock()
    lane = Lane("t", Limits(rpm=6000, headroom=0.0), clock=clock)

    for _ in range(20):  # a trickle: 4 per second, far below 100 per second
        clock.now += 0.25
        lane.on_success(Admission(1), 1, 1)
    lane.on_rate_limited(30.0)
    assert lane.scale == 1.0
    assert lane.paused_for == pytest.approx(30.0)


def test_declared_lower_limits_replace_the_configured_ones() -> None:
    lane = Lane("t", Limits(rpm=6000, tpm=2_000_000, headroom=0.0))
    lane.observe_headers({"x-ratelimit-limit-requests": "3000", "x-ratelimit-limit-tokens": "5000000"})
    assert lane.declared == {"rpm": 3000.0, "tpm": 5_000_000.0}
    assert lane.pacing.rpm == 3000.0  # lower: adopted
    assert lane.pacing.tpm == 2_000_000.0  # higher than configured: the config may ration a shared key
    lane.observe_headers({"anthropic-ratelimit-requests-limit": "50"})
    assert lane.pacing.rpm == 50.0


@pytest.mark.slow
def test_declared_limit_paces_a_lane_configured_without_one() -> None:
    async def scenario() -> float:
        lane = Lane("t", Limits(headroom=0.0))
        lane.observe_headers({"x-ratelimit-limit-requests": "1200"})  # 20 per second
        started = time.monotonic()
        for _ in range(41):
            await lane.admit(1)
        return time.monotonic() - started

    assert 1.9 <= asyncio.run(scenario()) <= 3.0


def test_pauses_do_not_count_as_time_the_provider_refused_us() -> None:
    clock = FakeClock()
    lane = Lane("t", Limits(rpm=6000, headroom=0.0), clock=clock)

    for _ in range(125):  # 2.5 seconds at 50/s (3,000 RPM) ...
        clock.now += 0.02
        lane.on_success(Admission(1), 1, 1)
    assert lane.controller.pause(clock.now, 2.5)  # ... then 2.5 seconds paused (no 429 counted)
    clock.now += 2.5
    for _ in range(5):  # 4% of the lane's recent requests: the pace is too high
        lane.on_rate_limited(0.1)
    # Over the 2.5 active seconds the provider took 3,000 RPM, half the config: a real limit, so
    # the lane slows (by the deepest cut). Counted over all five seconds it would look like a
    # trickle (1,500 RPM), i.e. a storm we did not cause, and the pace would stay at 1.0.
    assert lane.scale == 0.7
