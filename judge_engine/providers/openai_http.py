"""The direct transport: OpenAI-compatible chat completions over one pooled HTTP client
(:class:`judge_engine.providers.http.ChatClient`: aiohttp, through the endpoint's proxy and TLS
settings).

Why it exists: ``litellm.acompletion`` costs 3-6 ms of CPU per call on this class of machine
(the OpenAI SDK's request building and httpx, response re-validation, cost and logging hooks,
a thread-pool hop), which caps a latency-bound run and is most of the engine's CPU. For models
litellm itself resolves to the ``openai`` provider (OpenAI, and any OpenAI-compatible server
given as ``api_base``: vLLM, Ollama, llama.cpp, LM Studio, the fake server) this transport sends
the same body litellm would send, with the sampling parameters litellm maps for that model
(:func:`~judge_engine.providers.catalog.openai_body_params`) and prices from litellm's table, at
about a tenth of the CPU. Every other provider keeps litellm (``transport: auto``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from judge_engine._version import __version__
from judge_engine.errors import HTTPStatusError, LocalRequestError, MalformedResponseError
from judge_engine.providers.base import (
    ITEM_MARKERS,
    SAMPLE_HEADER,
    ErrorClass,
    ErrorKind,
    ProviderRequest,
    ProviderResponse,
    fate_unknown,
    is_unreachable,
    item_code,
    parse_retry_after,
    rate_limited,
)
from judge_engine.providers.catalog import cost_per_token, openai_body_params, openai_route
from judge_engine.providers.content_encoding import ACCEPT_ENCODING
from judge_engine.providers.http import (
    CLIENT_ERRORS,
    BadHTTPAnswerError,
    ChatClient,
    NotSentError,
    UnreadAnswerError,
    error_message,
    failed_connection,
    proxy_refused,
    redirect_message,
)
from judge_engine.providers.network import Network
from judge_engine.util import jsonio
from judge_engine.util.logprobs import token_logprobs
from judge_engine.util.redaction import (
    kept_headers,
    redact,
    redact_known,
    url_credentials,
    url_secrets,
)

_RETRY_STATUSES = frozenset({408, 409, 425})
_FATAL_STATUSES = frozenset({400, 401, 402, 403, 404, 405, 413, 415, 422})
class OpenAIHTTPProvider:
    """:class:`~judge_engine.providers.base.Provider` speaking OpenAI's chat-completions API directly.

    Args:
        api_key: the key for this judge (None: ``OPENAI_API_KEY``, as litellm would read it).
        network: how its connections leave (proxy, TLS); the environment's by default.
        names_sample: send each request's :attr:`~judge_engine.providers.base.ProviderRequest.sample`
            (the project's fake server, ``--demo``).
    """

    def __init__(self, *, api_key: str | None = None, network: Network | None = None,
                 names_sample: bool = False) -> None:
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._names_sample = names_sample
        # Exactly the encodings this install decodes (bounded): an answer in another is billed unread.
        self._headers = {"Content-Type": "application/json", "Accept": "application/json",
                         "Accept-Encoding": ACCEPT_ENCODING, "User-Agent": f"judge-engine/{__version__}"}
        if self._api_key:
            self._headers["Authorization"] = f"Bearer {self._api_key}"
        if organization := os.environ.get("OPENAI_ORGANIZATION"):
            self._headers["OpenAI-Organization"] = organization
        self._secrets = [self._api_key or ""]
        """What :func:`redact` removes from messages: the key, and the credentials of the URLs used."""
        self._targets: dict[str, tuple[str, dict[str, str]]] = {}
        self._client = ChatClient(network or Network())
        self._url = ""
        """The last URL posted to, for messages about its connection."""
        # Mapped body parameters per (model, sampling settings), keyed by content: a run has a
        # handful (its temperatures x protocols), so the map stays tiny.
        self._bodies: dict[bytes, dict[str, Any]] = {}

    enforces_timeout: ClassVar[bool] = True
    """The client's timeout covers connecting, sending and reading the whole answer (aiohttp's
    ``total``), so a stalled body is cut at ``timeout_s`` already: the attempt adds no guard timer
    (one timer and its cancellation fewer per request, issue 23.6)."""

    @staticmethod
    def supports(model: str, api_base: str | None) -> bool:
        """True when litellm resolves ``model`` to an OpenAI-compatible endpoint."""
        return openai_route(model, api_base) is not None

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        try:
            route = openai_route(request.model, request.api_base)
            if route is None:
                raise ValueError(f"model {request.model!r} is not served by an OpenAI-compatible API; "
                                 "use transport: litellm")
            url, headers = self._target(route.url)
            body = {"model": route.wire_model, "messages": list(request.messages),
                    **self._body_params(route.wire_model, request)}
            data = jsonio.dumps(body)
            if not (0 < request.timeout_s < math.inf):
                raise ValueError(f"timeout_s must be a positive number of seconds, not {request.timeout_s!r}")
        except Exception as exc:
            raise LocalRequestError(f"the request could not be built: {type(exc).__name__}: {exc}",
                                    model=request.model) from exc
        self._url = url
        if self._names_sample:
            headers = {**headers, SAMPLE_HEADER: str(request.sample)}
        try:
            answer = await self._client.post(url, data, headers, request.timeout_s)
        except NotSentError as exc:
            raise LocalRequestError(str(exc), model=request.model) from exc
        if 300 <= answer.status < 400:  # not followed (another origin, a 301/302/303): the judge stops
            raise HTTPStatusError(answer.status, redact(redirect_message(url, answer), self._secrets),
                                  kept_headers(answer.headers, self._secrets))
        if answer.status != 200:
            raise HTTPStatusError(answer.status, redact(error_message(answer.body), self._secrets),
                                  kept_headers(answer.headers, self._secrets))
        return self._response(request.model, answer.body, answer.headers)

    def _target(self, url: str) -> tuple[str, dict[str, str]]:
        """Where to post and with what headers: a URL's ``user:password@`` travels as basic
        auth, in place of the key's bearer token (the config refuses both at once)."""
        found = self._targets.get(url)
        if found is None:
            plain, basic = url_credentials(url)
            headers = self._headers if basic is None else {**self._headers, "Authorization": basic}
            self._secrets.extend(url_secrets(url))
            self._secrets.extend(url_secrets(self._client.network.proxy_for(plain) or ""))
            found = self._targets[url] = (plain, headers)
        return found

    def classify(self, error: BaseException) -> ErrorClass:
        # An HTTPStatusError's text already names the error the way OpenAI's SDK does.
        text = str(error) if isinstance(error, HTTPStatusError) else f"{type(error).__name__}: {error}"
        if isinstance(error, LocalRequestError):
            return ErrorClass(ErrorKind.LOCAL, redact(str(error), self._secrets))
        message = redact(text, self._secrets)
        if isinstance(error, HTTPStatusError):
            status = error.status_code
            if status == 429:
                return rate_limited(message, parse_retry_after(error.headers))
            if status == 407:  # from the proxy, not the provider: our configuration
                return proxy_refused(self._client.network, self._url, self._secrets)
            if 300 <= status < 400:  # the endpoint moved: api_base is to be updated, never an item's verdict
                return ErrorClass(ErrorKind.FATAL, error.provider_message, status)
            if status in _RETRY_STATUSES or status >= 500:
                return ErrorClass(ErrorKind.RETRY, message, status)
            lowered = error.provider_message.lower()
            if status in (400, 403, 422) and any(marker in lowered for marker in ITEM_MARKERS):
                return ErrorClass(ErrorKind.ITEM, message, status, code=item_code(lowered))
            if status in _FATAL_STATUSES:
                return ErrorClass(ErrorKind.FATAL, message, status)
            return ErrorClass(ErrorKind.ITEM, message, status, code=item_code(lowered))
        if (fatal := failed_connection(error, network=self._client.network, url=self._url, secrets=self._secrets)):
            return fatal
        if isinstance(error, (MalformedResponseError, BadHTTPAnswerError, TimeoutError, ConnectionError, OSError,
                              *CLIENT_ERRORS)):
            # An answer that came but could not be read is billed when its status was a 2xx.
            billed = 200 <= error.status < 300 if isinstance(error, UnreadAnswerError) else fate_unknown(error)
            return ErrorClass(ErrorKind.RETRY, message, unreachable=is_unreachable(error), billed=billed)
        # A bug or an unknown failure: retrying blindly could spend money in a loop, so it fails
        # the task (recorded) but not the judge.
        return ErrorClass(ErrorKind.ITEM, message, code=item_code(message))

    async def aclose(self) -> None:
        """Close the kept connections (the runner calls this when the run ends)."""
        await self._client.aclose()

    def _body_params(self, wire_model: str, request: ProviderRequest) -> dict[str, Any]:
        key = jsonio.canonical([wire_model, request.temperature, request.max_tokens,
                                request.response_format, request.params])
        mapped = self._bodies.get(key)
        if mapped is None:
            mapped = self._bodies[key] = openai_body_params(
                wire_model, temperature=request.temperature, max_tokens=request.max_tokens,
                response_format=request.response_format, params=request.params)
        return mapped

    def _response(self, model: str, raw: bytes, headers: Mapping[str, str]) -> ProviderResponse:
        try:
            payload = jsonio.loads(raw)
            choice = payload["choices"][0]
            message = choice["message"]
        except (jsonio.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
            raise MalformedResponseError(
                f"the 200 answer is not a chat completion ({len(raw)} bytes, {type(exc).__name__})") from exc
        try:  # a gateway's usage or log-probs that are not what they say: malformed, like a cut body
            usage = payload.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens") or 0)
            completion_tokens = int(usage.get("completion_tokens") or 0)
            prices = cost_per_token(model)
            cost = prompt_tokens * prices[0] + completion_tokens * prices[1] if prices else 0.0
            content = message.get("content")
            content = content if content is None else redact_known(str(content), self._secrets)
            return ProviderResponse(
                content=content,
                finish_reason=choice.get("finish_reason"),
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost=cost,
                priced=prices is not None,
                headers=kept_headers(headers, self._secrets),
                model=str(payload.get("model") or ""),
                logprobs=token_logprobs(content, choice_logprobs(choice)),
            )
        except (AttributeError, TypeError, ValueError, OverflowError) as exc:
            raise MalformedResponseError(f"the 200 answer is not a chat completion ({type(exc).__name__}: {exc})") from exc


def choice_logprobs(choice: Mapping[str, Any]) -> Any:
    """``choices[0].logprobs.content`` of an OpenAI chat completion (a list of token entries),
    or None when the answer carries no log-probs."""
    logprobs = choice.get("logprobs")
    return logprobs.get("content") if isinstance(logprobs, Mapping) else None
