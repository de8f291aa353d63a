"""The provider seam: one async method and one classifier. The adapter classifies; the engine decides."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from judge_engine.errors import MalformedResponseError, ReasonCode
from judge_engine.util.logprobs import TokenLogprob
from judge_engine.util.redaction import kept_headers, redact_params, redact_url


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """Everything sent for one attempt (the API key travels separately and is never recorded)."""

    model: str
    messages: Sequence[Mapping[str, str]]
    temperature: float
    max_tokens: int | None
    response_format: Mapping[str, Any] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    api_base: str | None = None
    timeout_s: float = 120.0
    task_ref: str = ""
    """Which task asks (:attr:`judge_engine.planning.plan.Task.ref`): never sent, never recorded, not in
    the cache key; a replay provider answers by it."""
    sample: int = 0
    """Which sample of this request the task asks for (what the answer cache key holds beside
    the request: the repeat, and the item for a protocol whose items are draws). Never recorded;
    sent only to the project's fake server (:data:`SAMPLE_HEADER`), whose answers it makes a
    function of the request, however the identical requests of a run arrive."""

    def as_sent(self) -> dict[str, Any]:
        """The request as recorded in transcripts (no key, no transport settings, the
        ``api_base`` without its credentials)."""
        sent: dict[str, Any] = {
            "model": self.model,
            "messages": list(self.messages),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.response_format is not None:
            sent["response_format"] = self.response_format
        sent.update(redact_params(self.params))  # a gateway key in extra_headers is never recorded
        if self.api_base:
            sent["api_base"] = redact_url(self.api_base)
        return sent


SAMPLE_HEADER = "X-Fake-Sample"
"""The header that carries :attr:`ProviderRequest.sample` to the fake server (``--demo``); the
fake, which imports nothing of the providers, reads the same name
(:data:`judge_engine.fake.config.SAMPLE_HEADER`, a test holds them equal)."""
MAX_USAGE_TOKENS = 10**9
"""Most tokens an answer's usage may report (prompt or completion): past any context window."""
MAX_RETRY_AFTER_S = 86_400.0
"""The longest Retry-After waited out: a provider asking for more than a day (or forever) is
not pacing us, it has stopped serving; the judge stops with what it asked, for ``resume``."""


def rate_limited(message: str, retry_after_s: float | None, status: int | None = 429) -> ErrorClass:
    """A 429's class: the lane waits out ``retry_after_s``; one asking for more than
    :data:`MAX_RETRY_AFTER_S` (an absurd or infinite Retry-After) stops the judge instead of
    waiting for years."""
    if retry_after_s is not None and retry_after_s > MAX_RETRY_AFTER_S:
        wait = "forever" if math.isinf(retry_after_s) else f"{retry_after_s:,.0f} s"
        return ErrorClass(ErrorKind.FATAL, f"{message} (the provider asks to wait {wait} before the next request, "
                                            f"more than a day: resume the run once it serves again)", status)
    return ErrorClass(ErrorKind.RATE_LIMITED, message, status, retry_after_s)


@dataclass(frozen=True, slots=True)
class ProviderResponse:
    """One answer, reduced to what the engine, the cache and the transcript need."""

    content: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cost: float
    headers: Mapping[str, str] = field(default_factory=dict)
    model: str = ""
    replayed: bool = False
    """Taken from a recorded run (the replay provider), not from a call."""
    priced: bool = True
    """False when no price is known for the model: ``cost`` is then 0 but not a price, and the
    attempt is recorded ``unpriced`` (never a silent $0)."""
    logprobs: tuple[TokenLogprob, ...] | None = None
    """The answer's token log-probs, when the request asked for them and the provider gave
    them (None: none given). Once the answer is read, only the tokens at the verdict are kept
    (:func:`kept_tokens`): an empty tuple is "given, none kept", never "none given"."""

    def __post_init__(self) -> None:
        bad = [f"{name} {value!r}" for name, value in (("prompt_tokens", self.prompt_tokens),
                                                       ("completion_tokens", self.completion_tokens))
               if not 0 <= value <= MAX_USAGE_TOKENS]
        if not (math.isfinite(self.cost) and self.cost >= 0):
            bad.append(f"cost {self.cost!r}")
        if bad:  # spend summed from such an answer would be negative, NaN or past any budget
            raise MalformedResponseError(f"the answer's usage is not a count of tokens ({', '.join(bad)})")

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "content": self.content,
            "finish_reason": self.finish_reason,
            "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens},
            "cost": self.cost,
            "headers": dict(self.headers),
            "model": self.model,
        }
        if self.logprobs is not None:
            record["logprobs"] = [token.to_list() for token in self.logprobs]
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ProviderResponse:
        usage = record.get("usage") or {}
        logprobs = record.get("logprobs")
        return cls(
            content=record.get("content"),
            finish_reason=record.get("finish_reason"),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cost=float(record.get("cost") or 0.0),
            headers=kept_headers(record.get("headers")),  # a cache entry or run of an older version
            model=str(record.get("model") or ""),
            logprobs=None if logprobs is None else tuple(TokenLogprob.from_list(t) for t in logprobs),
        )


class ErrorKind(Enum):
    RETRY = "retry"
    """Transient: 5xx, timeout, reset, truncated body. Retried with backoff."""
    RATE_LIMITED = "rate_limited"
    """429: the lane slows down and waits out ``retry_after``."""
    ITEM = "item"
    """This request cannot succeed (context too long, content filter); the task is unscored."""
    FATAL = "fatal"
    """Auth, bad request, unknown model: the judge stops."""
    LOCAL = "local"
    """Our own side failed before the request left (the client refused a setting, or our code
    raised building the request): nothing reached the provider, so it is neither a call nor an
    answer. The judge stops with the cause: it would fail the same way for every task."""


@dataclass(frozen=True, slots=True)
class ErrorClass:
    """What a failed attempt means, as the adapter reads it."""

    kind: ErrorKind
    message: str
    status: int | None = None
    retry_after_s: float | None = None
    code: ReasonCode | None = None
    """For ``ITEM``: why this request cannot succeed (``content_filter``, ``context_too_long``,
    else ``provider_rejected``)."""
    unreachable: bool = False
    """For ``RETRY``: no connection could be made (DNS failure, connection refused, unreachable
    host), so nothing reached the provider. A task whose every attempt was unreachable stops
    the judge instead of being recorded: an outage is not a verdict about an item."""
    billed: bool = False
    """For ``RETRY``: the request reached the provider and may have been charged, though no
    answer could be read (a 2xx whose body did not decode or was cut, a timeout or a dropped
    connection after sending: :func:`fate_unknown`). The attempt is booked at an estimate."""


class Provider(Protocol):
    """What the engine needs from a model provider."""

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        """Send one request; raise the provider's own exception on failure."""
        ...

    def classify(self, error: BaseException) -> ErrorClass:
        """Say what a failure means (retry / rate-limited / item / fatal / local); redact secrets."""
        ...

    async def aclose(self) -> None:
        """Release connections (called once when the session ends; may do nothing)."""
        ...


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, ``retry-after`` (seconds or an HTTP date).

    No upper cap: a provider asking for five minutes gets five minutes. Returns None when no
    usable header is present.
    """
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    for prefix in ("", "llm_provider-"):
        if (value := lowered.get(prefix + "retry-after-ms")) is not None:
            try:
                return _wait(float(value) / 1000.0)
            except ValueError:
                pass
        if (value := lowered.get(prefix + "retry-after")) is not None:
            try:
                return _wait(float(value))
            except ValueError:
                pass
            import time
            from email.utils import parsedate_to_datetime

            try:
                when = parsedate_to_datetime(value).timestamp()
            except (TypeError, ValueError, IndexError, OverflowError):
                continue
            return max(0.0, when - (time.time() if now is None else now))
    return None


def _wait(seconds: float) -> float:
    """A Retry-After as seconds to wait: NaN and negative ones are no wait; an infinite or huge
    one is kept (so :func:`rate_limited` sees it), a time far past any clock included."""
    return 0.0 if math.isnan(seconds) else max(0.0, seconds)


def item_code(text: str) -> ReasonCode:
    """The reason code of a per-request rejection, from the provider's error text."""
    lowered = text.lower()
    if any(marker in lowered for marker in _CONTEXT_MARKERS):
        return ReasonCode.CONTEXT_TOO_LONG
    if any(marker in lowered for marker in _FILTER_MARKERS):
        return ReasonCode.CONTENT_FILTER
    return ReasonCode.PROVIDER_REJECTED


_CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "context window",
                    "context length", "too many tokens", "prompt is too long")
_FILTER_MARKERS = ("content_filter", "content_policy", "content management policy", "safety",
                   "responsible ai policy")
ITEM_MARKERS = _CONTEXT_MARKERS + _FILTER_MARKERS
"""Words in a 400/403/422 error body that make it a per-request rejection, not a fatal one."""


def is_unreachable(error: BaseException) -> bool:
    """True when ``error`` (or an exception it was raised from) says no connection could be
    made: DNS failure, connection refused, network or host unreachable. Works across the
    direct transport (aiohttp) and litellm (httpx) by walking the cause chain."""
    import socket

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (socket.gaierror, ConnectionRefusedError)):
            return True
        if isinstance(current, OSError) and current.errno in _UNREACHABLE_ERRNOS:
            return True
        if type(current).__name__ in _UNREACHABLE_TYPES:
            return True
        current = current.__cause__ or current.__context__
    return False


_UNREACHABLE_TYPES = frozenset({"ClientConnectorDNSError", "ConnectionTimeoutError", "ConnectError"})
"""aiohttp's DNS failure and connection that timed out; httpx's connect failure (under litellm and
the OpenAI SDK)."""
_UNREACHABLE_ERRNOS = frozenset({101, 111, 113, -2, -3, -5})
"""ENETUNREACH, ECONNREFUSED, EHOSTUNREACH and getaddrinfo's EAI_NONAME, EAI_AGAIN, EAI_NODATA."""


def refused_before_sending(error: BaseException) -> bool:
    """True when ``error`` was raised from the HTTP client refusing to send: a URL it cannot send
    to, a header with a line break, a timeout it cannot schedule. litellm wraps these as server
    errors (an ``InternalServerError`` with a status 500 no server sent), but the chain it was
    raised from still ends in the client's own exception. Strict on purpose: the chain's first
    exception must be one of the exact types clients raise before using a socket (never a
    subclass, such as a ``JSONDecodeError`` or pydantic's errors about an answer), and nothing
    in the chain may be a network or HTTP failure."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    first = chain[-1]
    if not (type(first) in (ValueError, OverflowError) or type(first).__name__ in _REFUSED_TYPES):
        return False
    return not any(isinstance(e, (OSError, TimeoutError)) or type(e).__name__ in _NETWORK_TYPES for e in chain)


_REFUSED_TYPES = frozenset({"InvalidURL", "InvalidUrlClientError", "NonHttpUrlClientError", "UnsupportedProtocol",
                            "LocalProtocolError"})
"""aiohttp's and httpx's refusals of a URL; h11's of a header value (httpx under litellm)."""
_NETWORK_TYPES = frozenset({"ConnectError", "ReadError", "WriteError", "ReadTimeout", "ConnectTimeout", "RemoteProtocolError",
                            "ServerDisconnectedError", "ClientPayloadError", "ClientResponseError", "HTTPStatusError"})
"""httpx's and aiohttp's failures on the wire or of an answer (a request that did leave)."""


def fate_unknown(error: BaseException) -> bool:
    """True when ``error`` (or one it was raised from) says the request was sent but no answer
    could be read: a payload cut short, a timeout or a connection dropped after the connection
    was made (the direct transport says itself which 2xx answers went unread). False when no
    connection was made (a connect timeout, a refused or unreachable host, a failed TLS or
    proxy handshake): nothing reached the provider. Works across aiohttp and httpx (under
    litellm) by walking the cause chain; a failure it does not know is not billed."""
    if is_unreachable(error):
        return False
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    names = {type(e).__name__ for e in chain}
    if names & _NOT_CONNECTED_TYPES:
        return False
    return bool(names & _SENT_TYPES) or any(isinstance(e, TimeoutError) for e in chain)


_NOT_CONNECTED_TYPES = frozenset({"ConnectionTimeoutError", "ClientConnectorError", "ClientProxyConnectionError",
                                  "ClientConnectorCertificateError", "ClientConnectorSSLError",
                                  "ClientConnectorDNSError", "ClientHttpProxyError", "ConnectError", "ConnectTimeout",
                                  "ProxyError", "PoolTimeout"})
"""aiohttp's and httpx's failures to connect (to the host, or through the proxy): nothing sent."""
_SENT_TYPES = frozenset({"ServerDisconnectedError", "ClientPayloadError", "ServerTimeoutError",
                         "SocketTimeoutError", "ReadTimeout", "WriteTimeout", "ReadError", "RemoteProtocolError",
                         "DecodingError"})
"""aiohttp's and httpx's failures once connected: the request (or part of it) may be at the provider
(httpx's ``DecodingError``: an answer came whose body does not decode)."""
