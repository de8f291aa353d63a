"""The model catalogue: what litellm knows about models, asked without sending anything.

The one place that asks litellm how a model is routed (:func:`openai_route`), which sampling
parameters it takes (:func:`openai_body_params`), what it costs (:func:`cost_per_token`), how its
prompts are counted (:func:`prompt_counter`) and which API key variables it needs
(:func:`missing_key_variables`). litellm is imported lazily, once (:func:`load_litellm`: ~3 s),
with the bundled price table (``LITELLM_LOCAL_MODEL_COST_MAP=True``), so no network is touched.
The engine outside ``providers/`` asks these questions through this module only; the litellm
*adapter* (sending requests) is :mod:`judge_engine.providers.litellm`.
"""

from __future__ import annotations

import copy
import gc
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from judge_engine.util import jsonio

if TYPE_CHECKING:
    from judge_engine.providers.base import ProviderResponse

FREEZE_AFTER_IMPORT = False
"""Set by the command line's process tuning: collect and freeze litellm's import-time objects.
A library user's process keeps its own collector settings."""


@lru_cache(maxsize=1)
def load_litellm() -> ModuleType:
    """Import and configure litellm once: offline price table, quiet, no telemetry, no retries."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    litellm.num_retries = 0
    litellm.drop_params = True  # unsupported sampling params are dropped per provider, not fatal
    if (bundle := os.environ.get("REQUESTS_CA_BUNDLE")) and not os.environ.get("SSL_CERT_FILE"):
        # litellm's clients read SSL_CERT_FILE, not requests' variable: they are given it (as a
        # file, in place of certifi's store, as requests reads it), once, as litellm loads.
        litellm.ssl_verify = bundle
    if FREEZE_AFTER_IMPORT:
        # Importing litellm leaves ~1.5 million long-lived objects; collected once and frozen,
        # later collections skip them (see judge_engine/cli/process.py, which sets this).
        gc.collect()
        gc.freeze()
    return litellm


@dataclass(frozen=True, slots=True)
class PromptCounter:
    """How ``plan`` counts one model's prompt tokens, and whether that is the model's own count."""

    provider: str
    """The provider litellm routes the model to ("" when it cannot route it)."""
    tokenizer: str
    """What the tokens are counted with, e.g. ``o200k_base``."""
    exact: bool
    """True when that is the model's own tokenizer; False for an estimate (see :attr:`note`)."""
    note: str
    """Why the count is an estimate (empty when exact)."""
    count: Callable[[str], int] = field(repr=False, compare=False)


def count_prompt_tokens(model: str, messages: Sequence[Mapping[str, str]]) -> int:
    """Prompt tokens of ``messages`` with :func:`prompt_counter`'s tokenizer for ``model``, for
    ``plan``'s estimates (a running lane sizes prompts without a tokenizer: see ``lanes.tokens``). Cached
    per text, so the few-shot turns every item shares are counted once; a small cache, because
    item texts never repeat and 65,536 of them held ~240 MB at 10^5 items."""
    total = 3
    for message in messages:
        total += 4 + _count_text(model, message.get("content") or "")
    return total


@lru_cache(maxsize=1024)
def _count_text(model: str, text: str) -> int:
    return prompt_counter(model).count(text)


_OPENAI_PROVIDERS = ("openai", "azure")
"""Providers whose models tiktoken can name an encoding for."""


@lru_cache(maxsize=64)
def prompt_counter(model: str) -> PromptCounter:
    """The tokenizer litellm selects for ``model``, chosen offline, and whether it is exact.

    litellm alone counts ``openai/gpt-4o-mini`` with cl100k_base, not its o200k_base: its model
    tables hold bare names, so a route prefix makes ``token_counter`` fall back to gpt-3.5-turbo's
    encoding (and ``_select_tokenizer`` names cl100k_base for every OpenAI model: the per-model
    encoding is picked later, inside ``token_counter``). Llama and Command-R names make it
    download a tokenizer from Hugging Face (~20 s of retries per model when offline). So the
    prefix is removed with ``get_llm_provider``, the tokenizer kind is chosen here without a
    download, and the text is counted with the encoding litellm picks for the bare name. Exact
    only for OpenAI models whose encoding tiktoken names and litellm uses; Claude 3 and later have
    no public tokenizer (litellm's packaged Anthropic one is Claude 2's) and open models need a
    download: those counts are estimates, and say so in ``note``.
    """
    litellm = load_litellm()
    # litellm cannot route it: the run would fail too (planning warns)
    bare, provider, _key, _base = litellm_route(model) or (model, "", None, None)
    from litellm.litellm_core_utils.token_counter import (
        _encoding_count,
        openai_tokenizer_encoding,
        openai_tokenizer_encoding_name,
    )
    from litellm.utils import _select_tokenizer, huggingface_tokenizer_kind

    kind = huggingface_tokenizer_kind(bare)
    if kind == "anthropic":  # packaged with litellm: no download
        tokenizer = _select_tokenizer(bare)
        note = f"estimated: no offline tokenizer for {model} (litellm's Anthropic one is Claude 2's)"
        return PromptCounter(provider, "Claude 2", False, note,
                             lambda text: int(litellm.token_counter(model=bare, text=text, custom_tokenizer=tokenizer)))
    # Any other kind would be downloaded: count with the OpenAI encoding litellm names instead,
    # over the whole text (token_counter encodes 1,024-character chunks: ~1 token of drift each).
    name = str(openai_tokenizer_encoding_name(bare))
    encoding = openai_tokenizer_encoding(bare)

    def count(text: str) -> int:
        return int(_encoding_count(encoding, text))

    if kind is not None:
        note = f"estimated: {model}'s tokenizer is a Hugging Face download; counted with {name}"
        return PromptCounter(provider, name, False, note, count)
    exact = provider in _OPENAI_PROVIDERS and name == _tiktoken_encoding(bare)
    note = "" if exact else f"estimated: no offline tokenizer for {model}; counted with {name}"
    return PromptCounter(provider, name, exact, note, count)


def _tiktoken_encoding(model: str) -> str | None:
    """The encoding tiktoken names for an OpenAI model (None: a model it does not know)."""
    import tiktoken.model

    try:
        return str(tiktoken.model.encoding_name_for_model(model))
    except KeyError:
        return None


@dataclass(frozen=True, slots=True)
class OpenAIRoute:
    """Where a model is reached when its provider speaks OpenAI's chat-completions API as is."""

    wire_model: str
    """The model name in the request body (``openai/gpt-4o-mini`` -> ``gpt-4o-mini``)."""
    url: str
    """The full chat-completions URL."""


DEFAULT_OPENAI_BASE = "https://api.openai.com/v1"


@lru_cache(maxsize=256)
def openai_route(model: str, api_base: str | None) -> OpenAIRoute | None:
    """The OpenAI-compatible route litellm itself would take for ``model``, or None when litellm
    would change the request on the way.

    Only models litellm sends through its plain OpenAI chat config qualify (GPT-4-class models,
    and any model name on an ``api_base`` server); those leave string messages as they are. Other
    providers (Anthropic, Gemini, Bedrock...) and OpenAI models with their own config (o-series
    turn system messages into user ones, gpt-5 maps parameters) keep litellm's translation.
    """
    route = litellm_route(model, api_base)
    if route is None:  # litellm does not know the model: let litellm raise its own error later
        return None
    wire_model, provider, _key, resolved_base = route
    if provider != "openai":
        return None
    from litellm.llms.openai.chat.gpt_transformation import (
        OpenAIGPTConfig,
        OpenAIUnknownModelConfig,
    )
    from litellm.types.utils import LlmProviders
    from litellm.utils import ProviderConfigManager

    config = ProviderConfigManager.get_provider_chat_config(model=wire_model, provider=LlmProviders.OPENAI)
    if type(config) not in (OpenAIGPTConfig, OpenAIUnknownModelConfig):
        return None
    base = (api_base or resolved_base or os.environ.get("OPENAI_BASE_URL")
            or os.environ.get("OPENAI_API_BASE") or DEFAULT_OPENAI_BASE)
    return OpenAIRoute(wire_model=str(wire_model), url=str(base).rstrip("/") + "/chat/completions")


def _optional_kwargs(params: Mapping[str, Any], max_tokens: int | None,
                     response_format: Mapping[str, Any] | None) -> dict[str, Any]:
    """What litellm's ``get_optional_params`` is given beside the model and temperature (the
    response format copied: litellm may change it in place)."""
    kwargs: dict[str, Any] = dict(params)
    if response_format is not None:
        kwargs["response_format"] = copy.deepcopy(dict(response_format))
    if max_tokens is not None:
        kwargs["max_tokens"] = max_tokens
    return kwargs


def openai_body_params(
    wire_model: str,
    *,
    temperature: float,
    max_tokens: int | None,
    response_format: Mapping[str, Any] | None,
    params: Mapping[str, Any],
) -> dict[str, Any]:
    """The sampling parameters litellm would put in the body for an OpenAI model.

    litellm knows each model's quirks (o-series and gpt-5 take ``max_completion_tokens`` and
    only the default temperature; unsupported parameters are dropped), so the direct transport
    asks it once per parameter set instead of re-implementing that table.
    """
    load_litellm()
    from litellm.utils import get_optional_params

    kwargs = _optional_kwargs(params, max_tokens, response_format)
    mapped = dict(get_optional_params(model=wire_model, custom_llm_provider="openai",
                                      temperature=temperature, drop_params=True, **kwargs))
    mapped.pop("stream", None)  # a non-streamed call sends no stream key at all
    extra = mapped.pop("extra_body", None) or {}
    mapped.update(extra)  # the OpenAI SDK merges extra_body into the JSON body
    return mapped


_KEY_WORDS = ("KEY", "TOKEN", "SECRET")


def missing_key_variables(model: str) -> list[str]:
    """Environment variables holding credentials that ``model``'s provider needs and that are
    not set, as litellm's ``validate_environment`` lists them (variables that are not
    credentials, such as ``OLLAMA_API_BASE``, are left out: they have defaults)."""
    litellm = load_litellm()
    try:
        report = litellm.validate_environment(model=model)
    except Exception:  # a model litellm does not know: its own error comes at the first call
        return []
    missing = [str(name) for name in report.get("missing_keys") or []]
    missing = [name for name in missing if any(word in name.upper() for word in _KEY_WORDS)]
    if missing and (route := litellm_route(model)) is not None and route[2]:
        return []  # set under another name the call reads (Together: TOGETHER_API_KEY)
    return missing


def litellm_route(model: str, api_base: str | None = None) -> tuple[str, str, str | None, str | None] | None:
    """litellm's ``get_llm_provider`` for ``model`` (at ``api_base``): (the model as sent, the
    provider, the key it found, the api_base), or None when litellm names no provider for it
    (``☃``, ``gpt4o`` without a prefix it knows): every call of such a model fails with "LLM
    Provider NOT provided". Read afresh each time: the key comes from the environment."""
    try:
        return load_litellm().get_llm_provider(model=model, api_base=api_base)  # type: ignore[no-any-return]
    except Exception:
        return None


def provider_key(model: str) -> str | None:
    """The key litellm's call for ``model`` would send from the provider's own variable
    (``<PROVIDER>_API_KEY``, or one litellm resolves itself); None: none set, or a model litellm
    does not route."""
    route = litellm_route(model)
    if route is None:
        return None
    _model, provider, key, _base = route
    key = key or os.environ.get(f"{str(provider).upper()}_API_KEY")
    return str(key) if key else None


@lru_cache(maxsize=256)
def cost_per_token(model: str) -> tuple[float, float] | None:
    """(input, output) price per token from litellm's bundled table, or None when unknown."""
    litellm = load_litellm()
    try:
        info = litellm.get_model_info(model)
    except Exception:
        return None
    if info.get("key") not in litellm.model_cost:
        # litellm makes up an entry, priced 0, for a name it does not list under some providers
        # (anthropic/claude-<anything>): a made-up price is no price (ollama's listed 0 is one).
        return None
    prompt = info.get("input_cost_per_token")
    completion = info.get("output_cost_per_token")
    if prompt is None or completion is None:
        return None
    return float(prompt), float(completion)


def priced_as(response: ProviderResponse, model: str, *, batch: bool = False) -> ProviderResponse:
    """``response`` priced at the configured ``model``'s price when the provider knew none for
    the model it was sent as (a demo's fake server is addressed as ``openai/<model>``; a proxy's
    route may be unknown to litellm while the judge's model is known). Unchanged otherwise: still
    unpriced when no price is known for ``model`` either."""
    if response.priced or response.replayed:
        return response
    found = batch_cost_per_token(model) if batch else cost_per_token(model)
    if found is None:
        return response
    prices = found[:2]
    cost = response.prompt_tokens * prices[0] + response.completion_tokens * prices[1]
    return replace(response, cost=cost, priced=True)


BATCH_HALF_PRICE = 0.5
"""The share of the online price assumed for a batch where litellm's table has no batch price
(OpenAI's and Anthropic's batch prices are half their online ones)."""


@lru_cache(maxsize=256)
def batch_cost_per_token(model: str) -> tuple[float, float, bool] | None:
    """(input, output) price per token of a batch request, and whether litellm's table has the
    batch price (``*_cost_per_token_batches``); without it, :data:`BATCH_HALF_PRICE` of the
    online price. None when the model has no price at all."""
    online = cost_per_token(model)
    if online is None:
        return None
    litellm = load_litellm()
    try:
        info = litellm.get_model_info(model)
    except Exception:
        info = {}
    prompt, completion = info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches")
    if prompt is not None and completion is not None:
        return float(prompt), float(completion), True
    return online[0] * BATCH_HALF_PRICE, online[1] * BATCH_HALF_PRICE, False


_OPENAI_BATCH_PROVIDERS = ("openai", "hosted_vllm", "custom_openai", "openai_like")
"""litellm providers whose servers speak OpenAI's API, and so its Batch API where they have one
(OpenAI; vLLM and other OpenAI-compatible servers given as ``api_base``)."""
DEFAULT_ANTHROPIC_BASE = "https://api.anthropic.com"


def probe_url(model: str, api_base: str | None) -> str | None:
    """A URL whose GET shows that ``model``'s endpoint answers, sending no prompt: its API's model
    list (``.../models``, OpenAI's and Anthropic's alike); None when no endpoint URL is known (a
    provider litellm reaches through an SDK of its own)."""
    if api_base:
        return f"{api_base.rstrip('/')}/models"
    if (route := openai_route(model, None)) is not None:
        return route.url.removesuffix("/chat/completions") + "/models"
    if (batch := batch_route(model, None)) is not None:
        return f"{batch.base_url}/v1/models" if batch.api == "anthropic" else f"{batch.base_url}/models"
    return None


@dataclass(frozen=True, slots=True)
class BatchRoute:
    """Which batch API serves a model, and where."""

    api: str
    """``openai`` (files + batches) or ``anthropic`` (Message Batches)."""
    provider: str
    """litellm's provider for the model (its chat config builds the request bodies)."""
    wire_model: str
    """The model name in the request bodies."""
    base_url: str
    """OpenAI: the API base (``.../v1``); Anthropic: the host, without ``/v1``."""


@lru_cache(maxsize=256)
def batch_route(model: str, api_base: str | None) -> BatchRoute | None:
    """The batch API litellm's route for ``model`` leads to, or None when judge-engine speaks
    none for it (Gemini, Bedrock, Azure and others: use ``mode: online``)."""
    route = litellm_route(model, api_base)
    if route is None:
        return None
    wire_model, provider, _key, resolved_base = route
    if provider == "anthropic":
        base = str(api_base or os.environ.get("ANTHROPIC_API_BASE") or os.environ.get("ANTHROPIC_BASE_URL")
                   or DEFAULT_ANTHROPIC_BASE).rstrip("/").removesuffix("/v1")
        return BatchRoute("anthropic", provider, str(wire_model), base)
    if provider in _OPENAI_BATCH_PROVIDERS:
        base = (api_base or resolved_base or os.environ.get("OPENAI_BASE_URL")
                or os.environ.get("OPENAI_API_BASE") or DEFAULT_OPENAI_BASE)
        return BatchRoute("openai", provider, str(wire_model), str(base).rstrip("/"))
    return None


def batch_body(route: BatchRoute, model: str, api_base: str | None, *, messages: Sequence[Mapping[str, str]],
               temperature: float, max_tokens: int | None, response_format: Mapping[str, Any] | None,
               params: Mapping[str, Any]) -> dict[str, Any]:
    """The body of one batch request: what the online path sends for the same request.

    A model on OpenAI's plain chat config gets the direct transport's body (the model, the
    messages and :func:`openai_body_params`); any other (Anthropic, o-series, a vLLM route) the
    body litellm's own chat config builds for it (``transform_request``: Anthropic's system
    prompt and content blocks, JSON mode as a forced tool), as ``litellm.acompletion`` would.
    """
    if openai_route(model, api_base) is not None:
        _none, mapped = _mapped_params(route.wire_model, "", temperature, max_tokens, response_format, params)
        return {"model": route.wire_model, "messages": [dict(m) for m in messages], **mapped}
    config, optional = _mapped_params(route.wire_model, route.provider, temperature, max_tokens, response_format,
                                      params)
    body = dict(config.transform_request(model=route.wire_model, messages=[dict(m) for m in messages],
                                         optional_params=copy.deepcopy(optional), litellm_params={}, headers={}))
    body.pop("stream", None)
    body.update(body.pop("extra_body", None) or {})
    return body


_MAPPED: dict[bytes, tuple[Any, dict[str, Any]]] = {}


def _mapped_params(wire_model: str, provider: str, temperature: float, max_tokens: int | None,
                   response_format: Mapping[str, Any] | None, params: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """litellm's chat config for the provider and the sampling parameters it maps for the
    model, once per parameter set (a run has a handful); provider "": the direct transport's
    parameters (:func:`openai_body_params`) and no config."""
    key = jsonio.canonical([wire_model, provider, temperature, max_tokens, response_format, params])
    found = _MAPPED.get(key)
    if found is not None:
        return found
    if not provider:
        found = (None, openai_body_params(wire_model, temperature=temperature, max_tokens=max_tokens,
                                          response_format=response_format, params=params))
    else:
        load_litellm()
        from litellm.types.utils import LlmProviders
        from litellm.utils import ProviderConfigManager, get_optional_params

        kwargs = _optional_kwargs(params, max_tokens, response_format)
        optional = dict(get_optional_params(model=wire_model, custom_llm_provider=provider,
                                            temperature=temperature, drop_params=True, **kwargs))
        optional.pop("json_mode", None)  # litellm's handler takes it out before building the body
        config = ProviderConfigManager.get_provider_chat_config(model=wire_model, provider=LlmProviders(provider))
        found = (config, optional)
    _MAPPED[key] = found
    return found


LOGPROB_PARAMS = ("logprobs", "top_logprobs")
"""The request parameters that ask for token log-probs (OpenAI's names; litellm maps them,
e.g. to Gemini's ``responseLogprobs`` and ``logprobs``)."""


@lru_cache(maxsize=256)
def logprobs_support(model: str, api_base: str | None) -> tuple[bool | None, str]:
    """Whether ``model`` answers with token log-probs, as litellm's offline catalog knows it:
    ``(True, provider)`` when its provider config takes ``logprobs`` (OpenAI chat models,
    Gemini, Vertex, vLLM and any OpenAI-compatible ``api_base``, Groq, Together, DeepSeek...),
    ``(False, provider)`` when it does not (every Anthropic and Bedrock model, OpenAI's o-series
    and gpt-5 reasoning models, Ollama, Mistral), ``(None, "")`` when litellm cannot route it."""
    litellm = load_litellm()
    try:
        bare, provider, _key, _base = litellm.get_llm_provider(model=model, api_base=api_base)
        supported = litellm.get_supported_openai_params(model=bare, custom_llm_provider=provider)
    except Exception:
        return None, ""
    if supported is None:
        return None, str(provider)
    return "logprobs" in supported, str(provider)


@lru_cache(maxsize=256)
def passed_through(model: str, api_base: str | None, params: tuple[str, ...]) -> tuple[str, ...]:
    """The log-prob parameters of ``params`` that ``model``'s provider config maps but does not
    list as supported, so that litellm (``drop_params``) would drop them without a word: Gemini's
    config maps ``top_logprobs`` to its ``logprobs`` yet lists only ``logprobs``, so without this
    a Gemini judge would get the chosen tokens' log-probs and no alternatives. The adapter names
    them in ``allowed_openai_params``."""
    asked = [p for p in params if p in LOGPROB_PARAMS]
    if not asked:
        return ()
    supported, provider = logprobs_support(model, api_base)
    if not supported:
        return ()
    litellm = load_litellm()
    try:
        bare, _provider, _key, _base = litellm.get_llm_provider(model=model, api_base=api_base)
        listed = litellm.get_supported_openai_params(model=bare, custom_llm_provider=provider) or []
    except Exception:
        return ()
    return tuple(p for p in asked if p not in listed)
