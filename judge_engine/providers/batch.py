"""The batch seam: what a batch-mode judge needs from a provider's batch API.

One module per API behind it, each the one home of that API's quirks:
:mod:`.batch_openai` (OpenAI's files + batches, and any OpenAI-compatible server that implements
them) and :mod:`.batch_anthropic` (Message Batches); both speak HTTP through
:mod:`.batch_http`. :func:`judge_engine.providers.batch_api_for` picks one from litellm's route for
the judge's model (:func:`~judge_engine.providers.catalog.batch_route`).

Why not litellm's batch functions: litellm creates, lists and reads batches for OpenAI but only
retrieves Anthropic ones (no create, list or results), and its OpenAI functions run the OpenAI
SDK on a thread-pool hop and return a whole output file in memory (a 50,000-request file is
~100 MB); here results stream to disk and are read line by line. litellm stays the authority on
what a request's body is (:func:`~judge_engine.providers.catalog.batch_body`) and what it costs.

The engine decides; the adapters read. A batch's status becomes a :class:`BatchInfo` (ended or
not, counts, refused for the provider's quota), a result line a :class:`BatchResult` (an answer,
or why there is none), an HTTP failure an :class:`~judge_engine.providers.base.ErrorClass`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from judge_engine._moved import moved_names
from judge_engine.errors import ReasonCode
from judge_engine.providers.base import ErrorClass, ProviderRequest, ProviderResponse


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """A batch as the provider reports it, in terms both APIs share."""

    batch_id: str
    status: str
    """The provider's own word (``validating``, ``in_progress``, ``ended``, ``expired``...)."""
    ended: bool
    """Processing is over and the results can be read (completed, expired or cancelled)."""
    total: int = 0
    completed: int = 0
    """Requests answered so far."""
    failed: int = 0
    expired: int = 0
    cancelled: int = 0
    created_at: float | None = None
    """Unix time the provider created the batch."""
    ended_at: float | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    refused: str | None = None
    """The provider refused the batch for its quota (enqueued tokens, queued batches): why. No
    request was processed; the same requests can be sent again later."""
    error: str | None = None
    """The batch failed for another reason (its file was invalid...): the judge stops."""
    outputs: tuple[str, ...] = ()
    """Where the results are (OpenAI: the output and error file ids; Anthropic: the results URL)."""


class ResultKind(Enum):
    ANSWER = "answer"
    """The provider answered: :attr:`BatchResult.response` is the answer, to be read and judged
    like an online one (an empty one is not an answer: the driver sends the request again, like
    a failed one)."""
    FAILED = "failed"
    """The request failed (5xx, overloaded, a malformed body): send it again."""
    EXPIRED = "expired"
    """The batch's window closed before the request was processed: send it again."""
    CANCELLED = "cancelled"
    """The batch was cancelled before the request was processed: send it again."""
    REJECTED = "rejected"
    """The provider refused this one request (context too long, content filter, invalid): it
    cannot succeed, and the task ends unscored with :attr:`BatchResult.code`."""
    MISSING = "missing"
    """The batch ended without a result line for the request: send it again (read by the
    driver; no adapter returns it)."""


@dataclass(frozen=True, slots=True)
class BatchResult:
    """One line of a batch's results, read."""

    custom_id: str
    kind: ResultKind
    response: ProviderResponse | None = None
    """For :attr:`ResultKind.ANSWER`, with its cost at the batch price."""
    status: int | None = None
    """The HTTP status the request got inside the batch, when the API says."""
    message: str = ""
    """Why there is no answer, for the transcript."""
    code: ReasonCode | None = None
    """For :attr:`ResultKind.REJECTED`: the reason code of the unscored outcome."""


class BatchAPI(Protocol):
    """A provider's batch API, as a batch-mode judge uses it."""

    name: str
    """``openai`` or ``anthropic`` (recorded with each chunk)."""
    max_requests: int
    """The API's limit of requests per batch."""
    max_bytes: int
    """The API's limit of bytes per batch (its file, or its request body)."""

    def request_line(self, custom_id: str, request: ProviderRequest) -> bytes:
        """One line of a chunk's request file: the request's body, as the online path would
        send it, with its custom id."""
        ...

    async def upload(self, path: Path, name: str) -> str | None:
        """Upload a chunk's request file; its file id (None: this API takes the requests with
        the create call, and :meth:`create` reads the file)."""
        ...

    async def create(self, path: Path, file_id: str | None, *, metadata: Mapping[str, str],
                     window: str) -> BatchInfo:
        """Create the batch (``metadata`` is kept by the provider where the API has it)."""
        ...

    async def retrieve(self, batch_id: str) -> BatchInfo:
        ...

    async def find(self, metadata: Mapping[str, str], *, since: float, requests: int,
                   known: frozenset[str]) -> tuple[BatchInfo, bool] | None:
        """A batch created at or after ``since`` (Unix time) for a chunk whose create call was
        never answered, and whether the match is only tentative (by its size and time, to be
        confirmed by its results' custom ids); None when there is none. ``known``: batch ids
        the run already has, never a match."""
        ...

    async def download(self, info: BatchInfo, dest: Path) -> None:
        """Write every result line of an ended batch to ``dest`` (streamed)."""
        ...

    def read_result(self, line: bytes) -> BatchResult:
        """One result line, read (its answer priced at the batch price)."""
        ...

    async def cancel(self, batch_id: str) -> BatchInfo:
        ...

    def classify(self, error: BaseException) -> ErrorClass:
        """What a failed call to the batch API means (retry, rate-limited, fatal)."""
        ...

    async def aclose(self) -> None:
        ...


if not TYPE_CHECKING:  # names of 0.1 that moved (a type checker reads the new homes)
    __getattr__ = moved_names(__name__, {
        "batch_api_for": "judge_engine.providers",
        "check_batch_routes": "judge_engine.providers",
    })
