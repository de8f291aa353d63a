"""Several deployments per judge: which one sends a request, and what happens to one that fails.

A judge's deployments (keys, regions, vLLM replicas of one model) each have an endpoint, a
provider and a lane of their own (own limits, own adaptive control). A request goes to the
deployment that can send it soonest: the one with room under its concurrency whose lane has the
shortest backlog (pause, pacer wait, and a slot for each request already queued there), so
requests split in proportion to what each deployment accepts. A deployment that fails cools down
while the others take its work: one that cannot be reached, or answers with 5xx
:data:`FAILURES_TO_COOL` times in a row, is skipped for a cool-down that doubles while it goes on
failing (:data:`COOL_DOWN_S` up to :data:`MAX_COOL_DOWN_S`); one that refuses the judge's key or
requests (auth, bad request, not found) is left out for the rest of the session. With a single
deployment nothing of this applies: the judge behaves as it always did (its failures are the
judge's, see :mod:`judge_engine.running.task`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from judge_engine.errors import FatalProviderError
from judge_engine.lanes import Lane
from judge_engine.providers import Endpoint
from judge_engine.providers.base import ErrorClass, ErrorKind, Provider, ProviderRequest

FAILURES_TO_COOL = 3
COOL_DOWN_S = 5.0
MAX_COOL_DOWN_S = 120.0


@dataclass(eq=False, slots=True)
class Deployment:
    """One deployment of a judge's model while the session runs."""

    name: str
    endpoint: Endpoint
    provider: Provider
    lane: Lane
    concurrency: int
    in_flight: int = 0
    """Requests holding a place here (waiting for the lane or on the wire)."""
    cooling_until: float = 0.0
    cool_down_s: float = COOL_DOWN_S
    failures_in_row: int = 0
    dead: str | None = None
    """Why the session stopped using this deployment (auth, bad request, not found)."""
    sent: int = 0
    """Calls sent here this session, each one a transcript line (as the run's spend counts calls)."""
    batched: int = 0
    """Batch results recorded this session (a batch-mode judge's batches go to its first deployment)."""
    provider_enforces_timeout: bool = field(init=False, default=False)
    """The provider's own timeout covers a whole call, the answer's body included
    (:attr:`judge_engine.providers.openai_http.OpenAIHTTPProvider.enforces_timeout`): the
    attempt then schedules no guard timer of its own."""

    def __post_init__(self) -> None:
        self.provider_enforces_timeout = bool(getattr(self.provider, "enforces_timeout", False))

    def aim(self, request: ProviderRequest) -> ProviderRequest:
        """``request`` as this deployment sends it (its model string and base URL)."""
        if (request.model, request.api_base) == (self.endpoint.model, self.endpoint.api_base):
            return request
        return dataclasses.replace(request, model=self.endpoint.model, api_base=self.endpoint.api_base)


class Router:
    """Chooses a judge's deployment for each request; one per judge."""

    def __init__(self, deployments: Sequence[Deployment], *, clock: Callable[[], float] = time.monotonic) -> None:
        self.deployments = list(deployments)
        self._clock = clock
        self._changed = asyncio.Event()
        """Set when a deployment frees a place: wakes the requests waiting for one."""

    @property
    def several(self) -> bool:
        return len(self.deployments) > 1

    async def acquire(self, rough_prompt: int, max_tokens: int | None) -> Deployment:
        """A deployment with room, the one whose lane would admit the request soonest (waits
        while every live one is full or cooling down).

        Raises:
            FatalProviderError: every deployment was left out (the messages say why).
        """
        if not self.several:
            chosen = self.deployments[0]
            chosen.in_flight += 1
            return chosen
        while True:
            now = self._clock()
            live = [d for d in self.deployments if d.dead is None]
            if not live:
                reasons = "; ".join(f"{d.name}: {d.dead}" for d in self.deployments)
                raise FatalProviderError(f"every deployment failed ({reasons})")
            ready = [d for d in live if d.in_flight < d.concurrency and d.cooling_until <= now]
            if ready:
                chosen = min(ready, key=lambda d: (d.lane.backlog_s(rough_prompt, max_tokens),
                                                   d.in_flight / d.concurrency))
                chosen.in_flight += 1
                return chosen
            cooling = [d.cooling_until - now for d in live if d.cooling_until > now]
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=min(cooling) if cooling else None)
            except TimeoutError:
                pass

    def release(self, deployment: Deployment) -> None:
        """Give back the place :meth:`acquire` took."""
        deployment.in_flight -= 1
        if self.several:
            self._changed.set()

    def succeeded(self, deployment: Deployment) -> None:
        deployment.failures_in_row = 0
        deployment.cool_down_s = COOL_DOWN_S

    def failed(self, deployment: Deployment, failure: ErrorClass) -> bool:
        """Account a failed attempt; True when another deployment may take the request over
        (this one is cooling down or left out, and some other one is live)."""
        if not self.several:
            return False
        if failure.kind is ErrorKind.FATAL:
            deployment.dead = failure.message
        elif failure.kind is ErrorKind.RETRY:
            deployment.failures_in_row += 1
            if not (failure.unreachable or deployment.failures_in_row >= FAILURES_TO_COOL):
                return False  # one 5xx: the task's own retry budget handles it
            deployment.cooling_until = self._clock() + deployment.cool_down_s
            deployment.cool_down_s = min(MAX_COOL_DOWN_S, deployment.cool_down_s * 2)
            deployment.failures_in_row = 0
        else:
            return False
        return any(d.dead is None for d in self.deployments if d is not deployment)
