"""The litellm adapter: any provider through one async call, with litellm's own retries off.

Every provider quirk the engine must know about is translated here into a
:class:`ProviderResponse` or an :class:`ErrorClass`. Questions about models (routes, parameters,
prices, tokens) are :mod:`judge_engine.providers.catalog`'s. This module is also the one home of
the OpenAI SDK (litellm sends OpenAI-style requests through it): :func:`_skip_identity_transform`
patches one of the SDK's functions, process-wide, and only when a litellm provider is built.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

from judge_engine.errors import LocalRequestError, MalformedResponseError, ReasonCode
from judge_engine.providers.base import (
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
    refused_before_sending,
)
from judge_engine.providers.catalog import cost_per_token, load_litellm, passed_through
from judge_engine.providers.network import Network, network_problem
from judge_engine.util.logprobs import token_logprobs
from judge_engine.util.redaction import kept_headers, redact, redact_known, redact_url


@lru_cache(maxsize=1)  # once per process, however many providers
def _skip_identity_transform() -> None:
    """Skip the OpenAI SDK's request transform where it provably changes nothing.

    ``AsyncCompletions.create`` passes its body through ``async_maybe_transform``, which walks the
    params against their TypedDicts (alias renames, date/base64 formats) and drops unset values.
    No type under ``CompletionCreateParams`` has an alias or a format, so for a body of plain JSON
    values (what litellm sends for our str-content messages) the walk only drops the unset
    sentinels, yet it costs ~1.6 ms of CPU per call at 8 messages (a third of litellm's overhead
    measured by ``benchmarks/provider_overhead.py``). Anything else (pydantic models, files,
    tuples, other endpoints) still goes through the SDK's own transform.
    """
    try:
        from openai import _types
        from openai.resources.chat.completions import completions as module
    except ImportError:  # a layout this shortcut does not know: keep the SDK's behaviour
        return
    original = getattr(module, "async_maybe_transform", None)
    if original is None:
        return
    unset = tuple(t for t in (getattr(_types, "NotGiven", None), getattr(_types, "Omit", None)) if isinstance(t, type))
    params_module = "openai.types.chat.completion_create_params"

    async def async_maybe_transform(data: Any, expected_type: Any) -> Any:
        if type(data) is dict and getattr(expected_type, "__module__", None) == params_module:
            body = {k: v for k, v in data.items() if not isinstance(v, unset)}
            if all(_plain_json(v) for v in body.values()):
                return body
        return await original(data, expected_type)

    async_maybe_transform._judge_engine_original = original  # type: ignore[attr-defined]
    module.async_maybe_transform = async_maybe_transform  # type: ignore[attr-defined]


def _logprob_entries(choice: Any) -> Any:
    """The token entries of litellm's ``choices[0].logprobs`` (an object or a dict; Gemini's
    ``logprobsResult`` arrives in this shape too), or None when the answer has none."""
    logprobs = getattr(choice, "logprobs", None)
    if logprobs is None:
        return None
    return logprobs.get("content") if isinstance(logprobs, dict) else getattr(logprobs, "content", None)


def _plain_json(value: Any) -> bool:
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return True
    if kind is list:
        return all(_plain_json(v) for v in value)
    if kind is dict:
        return all(type(k) is str and _plain_json(v) for k, v in value.items())
    return False


class LiteLLMProvider:
    """:class:`~judge_engine.providers.base.Provider` backed by ``litellm.acompletion``.

    Args:
        api_key: the key for this judge (None: litellm reads the provider's usual env var).
        names_sample: send each request's :attr:`~judge_engine.providers.base.ProviderRequest.sample`
            (the project's fake server, ``--demo``).
    """

    def __init__(self, *, api_key: str | None = None, names_sample: bool = False) -> None:
        self._api_key = api_key
        self._names_sample = names_sample
        self._endpoint = "the provider's endpoint"
        self._proxy: str | None = None
        """Where the last request went and through which proxy (the environment's, as litellm's
        clients read it), for the message of a failure no retry mends."""
        self._litellm = load_litellm()
        _skip_identity_transform()  # imports the OpenAI SDK's chat module (~0.15 s): only here

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        try:
            kwargs: dict[str, Any] = dict(request.params)
            if request.response_format is not None:
                # A private deep copy: protocols share one schema dict across requests (and cache
                # keys), and provider transforms may adjust a schema in place.
                kwargs["response_format"] = copy.deepcopy(dict(request.response_format))
            if request.max_tokens is not None:
                kwargs["max_tokens"] = request.max_tokens
            if allowed := passed_through(request.model, request.api_base, tuple(kwargs)):
                kwargs["allowed_openai_params"] = list(allowed)
            if self._names_sample:
                kwargs["extra_headers"] = {**kwargs.get("extra_headers", {}), SAMPLE_HEADER: str(request.sample)}
        except Exception as exc:  # our side, before litellm: nothing was sent
            raise LocalRequestError(f"the request could not be built: {type(exc).__name__}: {exc}",
                                    model=request.model) from exc
        if request.api_base:
            self._endpoint = redact_url(request.api_base) or request.api_base
            self._proxy = Network().proxy_label(request.api_base)
        # litellm wraps its clients' refusals to send as server errors: classify reads the cause.
        response = await self._litellm.acompletion(
            model=request.model,
            messages=[dict(m) for m in request.messages],
            temperature=request.temperature,
            api_base=request.api_base,
            api_key=self._api_key,
            timeout=request.timeout_s,
            num_retries=0,
            max_retries=0,  # the OpenAI SDK's own retries: off, tenacity is the one policy
            **kwargs,
        )
        try:  # a gateway's usage or log-probs that are not what they say: malformed, like a cut body
            choice = response.choices[0]
            usage = getattr(response, "usage", None)
            hidden = getattr(response, "_hidden_params", {}) or {}
            content = choice.message.content
            if isinstance(content, str):
                content.encode("utf-8")  # a lone surrogate ("\ud800" in the JSON) can never be written: malformed
                content = redact_known(content, [self._api_key or ""])
            return ProviderResponse(
                content=content,
                finish_reason=choice.finish_reason,
                prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                cost=float(hidden.get("response_cost") or 0.0),
                # litellm prices a model it does not list at 0 (a made-up entry): not a price.
                priced=hidden.get("response_cost") is not None and cost_per_token(request.model) is not None,
                headers=kept_headers(hidden.get("headers"), [self._api_key or ""]),
                model=str(getattr(response, "model", "") or ""),
                logprobs=token_logprobs(content, _logprob_entries(choice)),
            )
        except (AttributeError, IndexError, TypeError, ValueError, OverflowError) as exc:
            raise MalformedResponseError(f"the answer is not a chat completion ({type(exc).__name__}: {exc})") from exc

    async def aclose(self) -> None:
        """Nothing to release: litellm owns its clients for the process."""

    def classify(self, error: BaseException) -> ErrorClass:
        lit = self._litellm
        status = getattr(error, "status_code", None)
        message = redact(f"{type(error).__name__}: {error}", [self._api_key or ""])
        if isinstance(error, LocalRequestError):
            return ErrorClass(ErrorKind.LOCAL, redact(str(error), [self._api_key or ""]))
        if isinstance(error, MalformedResponseError):  # ours, reading the answer: as a cut body, retried
            return ErrorClass(ErrorKind.RETRY, message)
        if refused_before_sending(error):
            return ErrorClass(ErrorKind.LOCAL, message)
        if isinstance(error, lit.RateLimitError) or status == 429:
            headers = getattr(error, "litellm_response_headers", None)
            if headers is None:
                headers = getattr(getattr(error, "response", None), "headers", None)
            retry_after = parse_retry_after(dict(headers) if headers is not None else None)
            return rate_limited(message, retry_after)
        if isinstance(error, lit.ContextWindowExceededError):
            return ErrorClass(ErrorKind.ITEM, message, status, code=ReasonCode.CONTEXT_TOO_LONG)
        if isinstance(error, lit.ContentPolicyViolationError):
            return ErrorClass(ErrorKind.ITEM, message, status, code=ReasonCode.CONTENT_FILTER)
        if isinstance(
            error,
            (lit.AuthenticationError, lit.PermissionDeniedError, lit.NotFoundError, lit.BadRequestError),
        ):
            return ErrorClass(ErrorKind.FATAL, message, status)
        if status == 405:  # no chat endpoint refuses a POST for a while: a redirect httpx followed as a GET
            return ErrorClass(ErrorKind.FATAL, f"{message} (the endpoint refuses the method: a 301/302/303 redirect "
                                               "turns the POST into a GET; check api_base)", status)
        problem = network_problem(error, endpoint=self._endpoint, proxy=self._proxy)
        if problem is not None:  # a certificate or a proxy that refuses us: every request would fail so
            return ErrorClass(ErrorKind.FATAL, redact(problem, [self._api_key or ""]))
        if isinstance(error, (lit.Timeout, lit.APIConnectionError, lit.InternalServerError, lit.ServiceUnavailableError,
                              lit.BadGatewayError, lit.APIError, TimeoutError, ConnectionError, OSError)):
            # litellm wraps a timeout or a cut answer as a "500" no server sent: the chain says
            # whether the request was sent and its answer never read (billed, booked at an estimate).
            return ErrorClass(ErrorKind.RETRY, message, status, unreachable=is_unreachable(error),
                              billed=fate_unknown(error) or _undecoded(error))
        if isinstance(status, int) and status >= 500:
            return ErrorClass(ErrorKind.RETRY, message, status)
        # Anything else is a bug or an unknown provider failure: retrying blindly could spend
        # money in a loop, so it fails the task (recorded) but not the judge.
        return ErrorClass(ErrorKind.ITEM, message, status, code=item_code(message))


def _undecoded(error: BaseException) -> bool:
    """True when the OpenAI SDK failed to decode an answer's body as text (its chain holds a
    ``UnicodeDecodeError``): a 2xx in an encoding the client did not decode, billed unread."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not known for known in seen):
        if isinstance(current, UnicodeDecodeError):
            return True
        seen.append(current)
        current = current.__cause__ or current.__context__
    return False
