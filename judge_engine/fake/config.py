"""The fake server's configuration: one frozen model, patched live through ``POST /_fake/config``."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

RetryAfterMode = Literal["seconds", "ms", "date", "none"]


class Storm(BaseModel):
    """A rate-limit storm: every request arriving in ``[start_s, start_s + duration_s)`` seconds
    after server start is answered 429, whatever the limits say."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start_s: float = Field(default=0.0, ge=0)
    """When the storm begins, in seconds after the server started."""
    duration_s: float = Field(gt=0)
    """How long it lasts."""
    retry_after_s: float = Field(default=1.0, ge=0)
    """The wait every 429 of the storm asks for (formatted per :attr:`FakeConfig.retry_after`)."""


class FakeBatchConfig(BaseModel):
    """How the fake server's batch APIs (OpenAI's files + batches, Anthropic's Message Batches)
    behave. Draws are per request, from a hash of its custom id and :attr:`FakeConfig.seed`, so
    the same request in a later round (another custom id) gets a fresh draw."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    validating_s: float = Field(default=0.0, ge=0)
    """Seconds a new batch is ``validating`` before its requests start."""
    processing_s: float = Field(default=1.0, ge=0)
    """Seconds from the end of validation to the last request processed; requests are
    processed evenly over it, so the counts grow while the batch is in progress."""
    failure_rate: float = Field(default=0.0, ge=0, le=1)
    """Probability that a request fails inside the batch (a 500 in the error file; Anthropic:
    ``errored`` with ``api_error``)."""
    expire_rate: float = Field(default=0.0, ge=0, le=1)
    """Probability that a request is never processed: its batch then ends ``expired`` (OpenAI)
    with the other requests' results, and these marked ``batch_expired`` (Anthropic:
    ``expired``)."""
    empty_rate: float = Field(default=0.0, ge=0, le=1)
    """Probability that a request's result is a 200 whose answer is empty (as failed requests of
    some batch APIs come back): a client must not judge it as an answer."""
    create_delay_s: float = Field(default=0.0, ge=0)
    """The create call is answered this late: the batch exists, and is counted, from the
    moment the call arrives (a client killed meanwhile never learns its id)."""
    max_enqueued_tokens: int | None = Field(default=None, ge=1)
    """Prompt tokens (UTF-8 bytes / :attr:`FakeConfig.chars_per_token`) a model may have in
    unfinished batches; a batch beyond it is refused: OpenAI's ``failed`` with
    ``token_limit_exceeded``, Anthropic's 429. None: no quota."""


SAMPLE_HEADER = "X-Fake-Sample"
"""A request header naming which sample of its request it is (a whole number: the engine sends
its repeat, and its item for a protocol whose items are draws, to a ``--demo`` server). A request
that names one is answered as a function of its body and that sample, whatever order identical
bodies arrive in; one that names none is told apart by how many times its body came before."""


class FakeConfig(BaseModel):
    """How the fake OpenAI-compatible server behaves. Every fault is off by default.

    Fault rates are independent probabilities, drawn deterministically per request from a hash of
    (request body, how many times that body was seen before, :attr:`seed`), so an identical retry
    gets a fresh draw and a rerun of the same traffic gets the same faults; a request that names
    its sample (:data:`SAMPLE_HEADER`, a demo's) draws from (body, sample, how many times that
    sample was sent before), so its faults too are a function of the request, not of the order
    identical bodies arrive in. When several faults
    are drawn for one request, the first of ``reset, error_500, error_503, truncate`` applies;
    ``malformed`` beats ``cut_off``, which beats ``stop_early``; ``hang`` delays whatever answer
    the request gets.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    latency_s: float = Field(default=0.0, ge=0)
    """Mean latency added before answering an admitted request (asyncio.sleep, no busy CPU)."""
    latency_jitter_s: float = Field(default=0.0, ge=0)
    """Uniform jitter of +/- this many seconds around :attr:`latency_s` (floored at 0)."""
    rpm: float | None = Field(default=None, gt=0)
    """Requests per minute; None is unlimited."""
    tpm: float | None = Field(default=None, gt=0)
    """Tokens (prompt + completion) per minute; None is unlimited."""
    window_s: float = Field(default=60.0, gt=0)
    """Sliding-window length. The window holds ``rpm * window_s / 60`` requests and
    ``tpm * window_s / 60`` tokens (a short window makes tests fast)."""
    chars_per_token: float = Field(default=4.0, gt=0)
    """Characters per token of the fake tokenizer (see ``answers``). A client that sizes prompts
    by another rule must learn this one from ``usage``."""
    retry_after: RetryAfterMode = "seconds"
    """Header a 429 carries: ``seconds`` -> ``Retry-After: <float seconds>``, ``ms`` ->
    ``retry-after-ms: <int>``, ``date`` -> ``Retry-After: <HTTP date>``, ``none`` -> no header."""
    error_500_rate: float = Field(default=0.0, ge=0, le=1)
    """Probability of a 500 with an OpenAI-style error body."""
    error_503_rate: float = Field(default=0.0, ge=0, le=1)
    """Probability of a 503 with an OpenAI-style error body."""
    reset_rate: float = Field(default=0.0, ge=0, le=1)
    """Probability of dropping the TCP connection (RST) without any response."""
    truncate_rate: float = Field(default=0.0, ge=0, le=1)
    """Probability of sending 200 headers with the full Content-Length, half the body, then closing."""
    hang_rate: float = Field(default=0.0, ge=0, le=1)
    """Probability of waiting :attr:`hang_s` before answering (a client timeout should fire)."""
    hang_s: float = Field(default=3600.0, ge=0)
    """How long a hanging request waits."""
    malformed_rate: float = Field(default=0.0, ge=0, le=1)
    """Probability of a 200 whose content is prose no protocol can read."""
    cut_off_rate: float = Field(default=0.0, ge=0, le=1)
    """Probability of ``finish_reason: "length"`` with the content cut in half."""
    stop_early_rate: float = Field(default=0.0, ge=0, le=1)
    """Probability of an answer that stops cleanly before its last part, with ``finish_reason:
    "stop"``: before a later ``Label:`` line (a GEMBA section, a TTCT question, the BWS worst
    pick), or, in a one-line answer, before its last word (a Prometheus result, a JSON value's
    end). Only the protocol's own checks can catch it."""
    storm: Storm | None = None
    """An optional window of forced 429s, timed from server start."""
    require_api_key: str | None = None
    """When set, requests without ``Authorization: Bearer <this key>`` (or basic auth whose
    password is this key) get 401."""
    echo_credentials: bool = False
    """A hostile gateway: every answer echoes the credentials its request carried (the
    ``Authorization`` and ``x-api-key`` headers) back under their own names and in
    ``x-request-id`` (a header clients keep), and every error body's message quotes them, as
    some proxies do. A client must keep none of it in what it records or shows."""
    seed: int = 0
    """Seed of the fault draws (answers depend on the request only)."""
    batch: FakeBatchConfig = Field(default_factory=FakeBatchConfig)
    """The batch APIs' processing delay, failures, expiry and quota."""

    @model_validator(mode="after")
    def _window_holds_one_request(self) -> Self:
        if self.rpm is not None and self.rpm * self.window_s / 60 < 1:
            raise ValueError(
                f"rpm={self.rpm} with window_s={self.window_s} admits less than one request per "
                "window; raise window_s to at least 60/rpm"
            )
        return self

    def patched(self, patch: dict[str, Any]) -> FakeConfig:
        """A new config with ``patch`` merged in (JSON Merge Patch, RFC 7396: nested objects
        merge, ``null`` restores a field's default). Raises pydantic's ValidationError."""
        merged = merge_patch(self.model_dump(exclude_unset=True), patch)
        return FakeConfig.model_validate(merged)

    def public(self) -> dict[str, Any]:
        """The config as JSON-able data, with the API key redacted."""
        data = self.model_dump(mode="json")
        if data["require_api_key"] is not None:
            data["require_api_key"] = "***"
        return data


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON Merge Patch of ``patch`` onto ``target`` (neither is modified)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
