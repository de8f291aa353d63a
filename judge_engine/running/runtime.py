"""What the engine holds for each judge while it runs (config, protocol, lane, provider, endpoint,
live counters, and the stop state that lets a Ctrl-C abandon every task that is waiting rather
than calling: :meth:`JudgeRuntime.abandon_waiting`), and what a display reads of a whole session
(:class:`RunProgress`)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge_engine._moved import moved_names
from judge_engine.inputs.config import JudgeConfig
from judge_engine.lanes import Lane
from judge_engine.protocols import Message, Protocol
from judge_engine.protocols.base import stable_seed
from judge_engine.providers import Endpoint
from judge_engine.providers.base import Provider, ProviderRequest, ProviderResponse
from judge_engine.running.budget import Guard
from judge_engine.running.cache import cache_key
from judge_engine.running.routing import Deployment, Router
from judge_engine.util.logprobs import kept_tokens
from judge_engine.util.redaction import redact_url

if TYPE_CHECKING:
    from judge_engine.planning.plan import Task
    from judge_engine.running.batch.board import BatchBoard
    from judge_engine.running.engine import Engine


KEEP_WHOLE = 16
"""An answer of this many tokens or fewer keeps all its log-probs (``pairwise-annotators``'
ten: the reference reads them from the start)."""


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
    abandoned: int = 0
    """Calls cut off in flight by a stop (recorded in the transcript, with no answer)."""
    cost: float = 0.0


@dataclass(slots=True)
class JudgeSetup:
    """How one judge asks: its config, protocol and endpoint, and so its requests and their
    cache keys (``plan`` uses this alone: it builds requests but sends nothing)."""

    config: JudgeConfig
    protocol: Protocol
    endpoint: Endpoint
    """Where requests go (resolved once by the session; cache keys keep the config's model)."""
    template_hashes: list[str]

    @property
    def endpoint_label(self) -> str:
        """Where this judge's requests go, for messages."""
        return self.endpoint.label

    def task_request(self, messages: Sequence[Message], task: Task) -> ProviderRequest:
        """The request ``task`` sends with ``messages`` (its temperature, its ref, its sample)."""
        return self.request(messages, task.temperature, task.ref, sample=self.sample(task))

    def sample(self, task: Task) -> int:
        """Which sample of its request ``task`` asks for: what its answer cache key holds beside
        the request (:meth:`key`), the repeat and, for a protocol whose items are draws, the item."""
        if self.protocol.item_in_cache_key:
            return stable_seed(task.item_id, task.repeat)
        return task.repeat

    def request(self, messages: Sequence[Message], temperature: float, task_ref: str = "", *,
                sample: int = 0) -> ProviderRequest:
        """The request for one conversation at one temperature (``task_ref``: the asking task's
        :attr:`~judge_engine.planning.plan.Task.ref`; ``sample``: :meth:`sample`)."""
        return ProviderRequest(
            model=self.endpoint.model,
            messages=messages,
            temperature=temperature,
            max_tokens=self.config.max_tokens,
            response_format=self.protocol.response_format(),
            params=self.params,
            api_base=self.endpoint.api_base,
            timeout_s=self.config.timeout_s,
            task_ref=task_ref,
            sample=sample,
        )

    @property
    def params(self) -> dict[str, Any]:
        """The judge's ``params`` and what its confidence adds (``logprobs``, ``top_logprobs``):
        both go into every request and its cache key."""
        confidence = self.config.confidence
        return {**self.config.params, **confidence.request_params()} if confidence is not None else self.config.params

    @property
    def reads_logprobs(self) -> bool:
        """Whether every answer must carry token log-probs (``confidence: logprobs``)."""
        return self.config.confidence is not None and self.config.confidence.method == "logprobs"

    def kept(self, response: ProviderResponse, task: Task) -> ProviderResponse:
        """``response`` with only its log-probs at the verdict kept (where the protocol's parser
        reads it, :meth:`~judge_engine.protocols.base.Protocol.verdict_spans`), before it goes to
        the transcript and the cache; an answer of :data:`KEEP_WHOLE` tokens or fewer is kept whole."""
        tokens = response.logprobs
        if not tokens or len(tokens) <= KEEP_WHOLE:
            return response
        try:
            spans = self.protocol.verdict_spans(response.content or "", task.item, task.variant)
        except Exception:  # the parse that follows records the protocol's error
            spans = ()
        return dataclasses.replace(response, logprobs=kept_tokens(tokens, [(s.start, s.end) for s in spans]))

    def key(self, request: ProviderRequest, task: Task) -> str:
        """The answer cache key of ``request`` for ``task`` (the config's model and ``api_base``,
        not the endpoint's, so a demo or a replica keeps its keys; the item only for protocols
        whose items are draws, see :attr:`~judge_engine.protocols.base.Protocol.item_in_cache_key`)."""
        sampling = {"temperature": request.temperature, "max_tokens": request.max_tokens, **request.params}
        if self.config.api_base:
            # another server is another model; a URL's credentials are not part of the server
            sampling["api_base"] = redact_url(self.config.api_base)
        return cache_key(
            model=self.config.model,
            messages=request.messages,
            sampling=sampling,
            response_format=request.response_format,
            protocol=self.protocol.name,
            protocol_version=self.protocol.version,
            template_hashes=self.template_hashes,
            repeat=task.repeat,
            item=task.item_id if self.protocol.item_in_cache_key else None,
        )


@dataclass(slots=True)
class JudgeRuntime(JudgeSetup):
    """Everything the engine holds for one judge while it runs: how it asks, plus its lane,
    provider, live counters and stop state."""

    lane: Lane
    """The first deployment's lane (the only one, for most judges)."""
    provider: Provider
    """The first deployment's provider."""
    counters: JudgeCounters = field(default_factory=JudgeCounters)
    router: Router | None = None
    """Which deployment sends each request (made from ``lane`` and ``provider`` when None)."""
    guard: Guard | None = None
    """The run's budgets (None: no budget applies)."""
    stopped: str | None = None
    """Set when a fatal provider error stopped this judge (the message says why)."""
    stopping: bool = False
    """Set by a stop request: no new provider call starts (see :meth:`abandon_waiting`)."""
    exhausted_in_row: int = 0
    """Tasks in a row that used up their transport retries with no answer in between."""
    batch: BatchBoard | None = None
    """A batch-mode judge's batches as they go (``mode: batch``), for the display."""
    _interruptible: set[asyncio.Task[Any]] = field(default_factory=set)
    _abandoned: set[asyncio.Task[Any]] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.router is None:
            self.router = Router([Deployment(self.config.name, self.endpoint, self.provider, self.lane,
                                             self.config.limits.concurrency)])

    @property
    def deployments(self) -> list[Deployment]:
        assert self.router is not None
        return self.router.deployments

    @property
    def concurrency(self) -> int:
        """Requests the judge may have in flight: the sum over its deployments."""
        return sum(d.concurrency for d in self.deployments)

    @property
    def rate_limited(self) -> int:
        """429s over every deployment."""
        return sum(d.lane.stats.rate_limited for d in self.deployments)

    @property
    def paused_for(self) -> float:
        """Seconds until some deployment may send again (0: one may now)."""
        return min(d.lane.paused_for for d in self.deployments)

    @property
    def sent_requests(self) -> int:
        return sum(d.lane.stats.requests for d in self.deployments)

    @property
    def sent_tokens(self) -> int:
        return sum(d.lane.stats.tokens for d in self.deployments)

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


@dataclass(slots=True)
class RunProgress:
    """A session's state as it goes, for a display to read (a live view, progress lines).

    The session fills it in; nothing in it calls out, so whatever watches it (another thread, a
    notebook) can poll it at its own pace without the engine ever waiting for it. A watcher that
    would rather not poll waits on :attr:`changed`, set when the session starts and at a stop.
    """

    run_dir: Path | None = None
    """Set first, once the run directory is known."""
    demo: bool = False
    retry: frozenset[str] | None = None
    """``resume --retry`` codes, when the session judges unscored tasks again."""
    judges: list[JudgeRuntime] = field(default_factory=list)
    """Each judge's runtime (counters, lane), once the session has built them."""
    done_before: int = 0
    """Tasks finished before this session and left as they are."""
    judging_again: int = 0
    """Finished tasks this session judges again (``--retry``)."""
    warnings: list[str] = field(default_factory=list)
    """What the display says before the first task (an endpoint whose certificate is not checked)."""
    stages: tuple[str, ...] = ()
    """A cascaded session's asked stages, in order: :attr:`total` counts the first one's tasks
    and what has escalated so far; the later stages' tasks are added as items escalate."""
    stop_requested_at: float | None = None
    """``time.monotonic()`` of the first Ctrl-C, when there was one."""
    finished: bool = False
    changed: threading.Event = field(default_factory=threading.Event)
    """Set when the session starts and when a stop is requested (a watcher clears it)."""
    _engine: Engine | None = None

    def start(self, engine: Engine) -> None:
        """Called by the session once the judges are built, before the first task."""
        self._engine = engine
        self.done_before, self.judging_again = engine.done_count, engine.retry_count
        self.judges = list(engine.judges)
        self.changed.set()

    def request_stop(self) -> None:
        """Called by the session at the first Ctrl-C."""
        self.stop_requested_at = time.monotonic()
        self.changed.set()

    @property
    def started(self) -> bool:
        return self._engine is not None

    @property
    def in_flight(self) -> int:
        """Provider calls under way, over every judge."""
        return sum(j.counters.in_flight for j in self.judges)

    @property
    def total(self) -> int:
        return sum(j.counters.total for j in self.judges)


if not TYPE_CHECKING:  # names of 0.1 that moved (a type checker reads the new homes)
    __getattr__ = moved_names(__name__, {
        "build_runtime": "judge_engine.running.session",
    })
