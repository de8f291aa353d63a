"""What the engine holds for each judge while it runs: config, protocol, lane, provider, live
counters, and the stop state that lets a Ctrl-C abandon every task that is waiting rather than
calling (see :meth:`JudgeRuntime.abandon_waiting`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from judge_engine.cache import cache_key
from judge_engine.config import JudgeConfig
from judge_engine.lanes import Lane
from judge_engine.protocols import Message, Protocol
from judge_engine.providers.base import Provider, ProviderRequest


@dataclass(slots=True)
class JudgeCounters:
    """Live counters of one judge, read by the progress display."""

    total: int = 0
    done: int = 0
    resumed: int = 0
    scored: int = 0
    unscored: int = 0
    cache_hits: int = 0
    calls: int = 0
    retries: int = 0
    reasks: int = 0
    in_flight: int = 0
    cost: float = 0.0


@dataclass(slots=True)
class JudgeRuntime:
    """Everything the engine holds for one judge while it runs."""

    config: JudgeConfig
    protocol: Protocol
    lane: Lane
    provider: Provider
    template_hashes: list[str]
    counters: JudgeCounters = field(default_factory=JudgeCounters)
    stopped: str | None = None
    """Set when a fatal provider error stopped this judge (the message says why)."""
    endpoint: tuple[str, str | None] | None = None
    """(model, api_base) actually called when they differ from the config's (``--demo`` points
    every judge at the fake server); cache keys keep the config's, so they stay stable."""
    stopping: bool = False
    """Set by a stop request: no new provider call starts (see :meth:`abandon_waiting`)."""
    exhausted_in_row: int = 0
    """Tasks in a row that used up their transport retries with no answer in between."""
    _interruptible: set[asyncio.Task[Any]] = field(default_factory=set)
    _abandoned: set[asyncio.Task[Any]] = field(default_factory=set)

    def interruptible(self, interruptible: bool) -> None:
        """Mark the current task as waiting (lane, backoff: a stop may cancel it) or not (in a
        provider call, or writing its records: a stop lets it finish)."""
        task = asyncio.current_task()
        if task is None:
            return
        if interruptible:
            self._interruptible.add(task)
        else:
            self._interruptible.discard(task)

    def abandon_waiting(self) -> None:
        """Stop: cancel every task of this judge that is waiting rather than calling."""
        self.stopping = True
        for task in self._interruptible:
            if not task.done():
                self._abandoned.add(task)
                task.cancel()
        self._interruptible.clear()

    def was_abandoned(self, task: asyncio.Task[Any] | None) -> bool:
        """True (once) when ``task``'s cancellation is this judge's stop and nothing else's;
        the cancellation is then withdrawn so the worker can go on draining its queue."""
        if task is None or task not in self._abandoned:
            return False
        self._abandoned.discard(task)
        if task.cancelling() != 1:
            return False  # the run is being cancelled as well: let that win
        task.uncancel()
        return True

    @property
    def endpoint_label(self) -> str:
        """Where this judge's requests go, for messages."""
        _, api_base = self.endpoint or (self.config.model, self.config.api_base)
        return api_base or "the provider's default endpoint"

    def request(self, messages: Sequence[Message], temperature: float) -> ProviderRequest:
        model, api_base = self.endpoint or (self.config.model, self.config.api_base)
        return ProviderRequest(
            model=model,
            messages=messages,
            temperature=temperature,
            max_tokens=self.config.max_tokens,
            response_format=self.protocol.response_format(),
            params=self.config.params,
            api_base=api_base,
            timeout_s=self.config.timeout_s,
        )

    def key(self, request: ProviderRequest, repeat: int) -> str:
        sampling = {"temperature": request.temperature, "max_tokens": request.max_tokens, **request.params}
        if self.config.api_base:
            sampling["api_base"] = self.config.api_base  # another server is another model
        return cache_key(
            model=self.config.model,
            messages=request.messages,
            sampling=sampling,
            response_format=request.response_format,
            protocol=self.protocol.name,
            protocol_version=self.protocol.version,
            template_hashes=self.template_hashes,
            repeat=repeat,
        )
