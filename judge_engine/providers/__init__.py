"""Providers: the seam (:mod:`.base`), the model catalogue (:mod:`.catalog`: routes, parameters,
prices, tokens), the litellm adapter, the direct OpenAI-compatible transport, and the choice
between them for a judge (:func:`for_judge`), with its endpoint and credentials; the batch seam
(:mod:`.batch`) and the choice of a batch API for a judge's model (:func:`batch_api_for`).

A new provider goes behind :class:`~judge_engine.providers.base.Provider` in a module of its own
here, and :func:`for_judge` learns when to choose it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from judge_engine.errors import ConfigError
from judge_engine.inputs.config import JobConfig, JudgeConfig
from judge_engine.providers.base import Provider
from judge_engine.providers.batch import BatchAPI
from judge_engine.providers.catalog import (
    batch_route,
    litellm_route,
    logprobs_support,
    missing_key_variables,
    provider_key,
)
from judge_engine.providers.litellm import LiteLLMProvider
from judge_engine.providers.openai_http import OpenAIHTTPProvider
from judge_engine.util.redaction import redact_url, url_credentials


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where one judge's requests go, resolved once per session (a demo points every judge at
    the fake server here; cache keys keep the config's model and ``api_base``)."""

    model: str
    """The model string sent (litellm's form, e.g. ``openai/gpt-4o-mini``)."""
    api_base: str | None
    api_key: str | None = field(default=None, repr=False)
    """Never recorded, never printed."""

    @property
    def label(self) -> str:
        """Where the requests go, for messages (without the URL's credentials)."""
        return redact_url(self.api_base) or "the provider's default endpoint"


def endpoint_for(judge: JudgeConfig) -> Endpoint:
    """The endpoint the config names for ``judge`` (its first deployment, when it has several).

    Raises:
        ConfigError: ``api_key_env`` names a variable that is not set.
    """
    return endpoints_for(judge)[0]


def endpoints_for(judge: JudgeConfig) -> list[Endpoint]:
    """One endpoint per deployment of ``judge`` (one, when it names none).

    Raises:
        ConfigError: an ``api_key_env`` names a variable that is not set.
    """
    if not judge.deployments:
        return [Endpoint(judge.model, judge.api_base, api_key_for(judge))]
    return [Endpoint(d.model or judge.model, d.api_base or judge.api_base, _key(judge, index))
            for index, d in enumerate(judge.deployments)]


def deployment_names(judge: JudgeConfig) -> list[str]:
    """The names of ``judge``'s deployments (``d1``, ``d2``... where none is given)."""
    if not judge.deployments:
        return [judge.name]
    return [d.name or f"d{index + 1}" for index, d in enumerate(judge.deployments)]


NO_KEY_HINT = "Nothing was sent; `judge-engine run CONFIG --demo` runs without a key (synthetic answers)."
"""What a message about a missing key ends with: the demo needs none."""


def api_key_for(judge: JudgeConfig) -> str | None:
    """The key for ``judge``: ``api_key``, else the value of ``api_key_env``, else None (the
    provider's own variable, read by the transport).

    Raises:
        ConfigError: ``api_key_env`` names a variable that is not set.
    """
    if judge.api_key is not None:
        return judge.api_key.get_secret_value()
    if judge.api_key_env:
        value = os.environ.get(judge.api_key_env)
        if value is None:
            raise ConfigError(f"judges[{judge.name}].api_key_env: environment variable {judge.api_key_env} is not set. "
                              f"{NO_KEY_HINT}")
        return value
    return None


def _key(judge: JudgeConfig, index: int) -> str | None:
    """The key of deployment ``index``: its own ``api_key``/``api_key_env``, else the judge's."""
    deployment = judge.deployments[index]
    if deployment.api_key is not None:
        return deployment.api_key.get_secret_value()
    if deployment.api_key_env:
        value = os.environ.get(deployment.api_key_env)
        if value is None:
            raise ConfigError(f"judges[{judge.name}].deployments[{index}].api_key_env: environment variable "
                              f"{deployment.api_key_env} is not set. {NO_KEY_HINT}")
        return value
    return api_key_for(judge)


def check_credentials(config: JobConfig) -> None:
    """Fail before anything is sent when a judge's provider needs a key that is not there.

    A judge (or deployment) with ``api_key``, or with an ``api_base`` (a local server or a proxy
    may need no key) and no ``api_key_env``, is not checked; ``api_key_env`` must name a set
    variable; otherwise the provider's own variables, as litellm knows them, must be set. An
    ``api_base`` with credentials must have no key beside it and a direct transport.

    Raises:
        ConfigError: names the judge, the model and the variable(s) to set (or the api_base).
    """
    for judge in config.judges:
        _check_url_credentials(judge, endpoints_for(judge))  # every api_key_env named must be set
        keyless = [(d.model or judge.model) for d in judge.deployments
                   if d.api_key is None and not d.api_key_env and not (d.api_base or judge.api_base)]
        if not judge.deployments and judge.api_key is None and not judge.api_key_env and not judge.api_base:
            keyless = [judge.model]
        if judge.api_key is not None or judge.api_key_env:
            keyless = []
        for model in keyless:
            missing = missing_key_variables(model)
            if missing:
                raise ConfigError(
                    f"judges[{judge.name}]: {model} needs an API key in the environment, and "
                    f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set: export it (or "
                    f"name your variable with api_key_env). {NO_KEY_HINT}"
                )
            _check_placeholder(judge, provider_key(model), f"{model}'s key in the environment")
        if judge.api_key_env and (value := os.environ.get(judge.api_key_env)) is not None:
            _check_placeholder(judge, value, f"api_key_env {judge.api_key_env}")


def check_models(config: JobConfig) -> None:
    """Fail before anything is sent (and before a run directory is made) when litellm names no
    provider for a judge's model: every call would fail with litellm's "LLM Provider NOT
    provided", stopping the judge at its first. A judge whose ``params.custom_llm_provider``
    names the provider is not checked. (``plan`` warns of such a model instead, and ``--strict``
    makes the warning exit 2.)

    Raises:
        ConfigError: names the judge and the model (cut short when long).
    """
    for judge in config.judges:
        if "custom_llm_provider" in judge.params:
            continue
        places = [(f"deployments[{index}].model" if d.model else "model", d.model or judge.model,
                   d.api_base or judge.api_base) for index, d in enumerate(judge.deployments)]
        for key, model, api_base in places or [("model", judge.model, judge.api_base)]:
            if litellm_route(model, api_base) is not None:
                continue
            shown = model if len(model) <= 80 else f"{model[:60]}... ({len(model):,} characters)"
            raise ConfigError(f"judges[{judge.name}].{key}: litellm names no provider for {shown!r}: write it "
                              "as provider/model (openai/gpt-4o-mini, anthropic/claude-haiku-4-5, ...)")


_PLACEHOLDER = re.compile(r"^\s*(?:sk-)?(?:\.{3,}|…|<[^>]*>|x{3,}|your[-_ ]?(?:api[-_ ]?)?key(?:[-_ ]?here)?)\s*$",
                          re.IGNORECASE)
"""A key that is a documentation's stand-in (``...``, ``sk-...``, ``<key>``, ``your-key-here``)."""


def check_logprobs(config: JobConfig) -> None:
    """A judge whose ``confidence`` reads token log-probs has a model that gives them, where
    litellm's catalog knows it does not (OpenAI's reasoning models, every Anthropic model):
    checked before anything is sent, by ``plan`` and ``run``.

    Raises:
        ConfigError: naming the judge, the key and what to change.
    """
    for judge in config.judges:
        if judge.confidence is None or judge.confidence.method != "logprobs":
            continue
        supported, provider = logprobs_support(judge.model, judge.api_base)
        if supported is False:
            raise ConfigError(f"judges[{judge.name}].confidence: logprobs: {judge.model} gives no token log-probs "
                              f"(litellm's catalog: {provider} takes no logprobs parameter for it; OpenAI's reasoning "
                              "models and every Anthropic model give none). Use confidence: agreement with repeats: 3 "
                              "or more, or a model that gives log-probs (OpenAI chat models, Gemini, vLLM)")


def _check_placeholder(judge: JudgeConfig, key: str | None, where: str) -> None:
    """A pasted ``export OPENAI_API_KEY=...`` is no key: refused before a request is refused
    (without this, a run spent its retries on every task before failing)."""
    if key is not None and _PLACEHOLDER.match(key):
        raise ConfigError(f"judges[{judge.name}]: {where} is a placeholder (it reads like '...' or '<key>'), not a "
                          f"key: export your real key. {NO_KEY_HINT}")


def _check_url_credentials(judge: JudgeConfig, endpoints: list[Endpoint]) -> None:
    """An ``api_base`` with ``user:password@`` is sent as basic auth, by the transports that
    judge-engine speaks itself (the direct one, the batch APIs): refused beside a key (both would
    be the Authorization header) and for a model litellm sends (its clients refuse a URL's
    credentials, so every request would fail)."""
    for index, endpoint in enumerate(endpoints):
        if endpoint.api_base is None or url_credentials(endpoint.api_base)[1] is None:
            continue
        where = f"judges[{judge.name}]" + (f".deployments[{index}]" if judge.deployments else "")
        if endpoint.api_key is not None:
            raise ConfigError(f"{where}: its api_base carries credentials (user:password@), sent as basic auth in the "
                              "Authorization header, and it has a key (api_key or api_key_env) for the same header: "
                              "keep one. Nothing was sent.")
        if not _direct(judge, endpoint):
            raise ConfigError(f"{where}.api_base: credentials in the URL (user:password@) are sent as basic auth by "
                              f"the direct transport only, and {endpoint.model} goes through litellm, which cannot "
                              "send them: use an openai/ model name on an OpenAI-compatible server (transport: auto), "
                              "or a key in an environment variable named by api_key_env. Nothing was sent.")


def _direct(judge: JudgeConfig, endpoint: Endpoint) -> bool:

    return judge.transport != "litellm" and OpenAIHTTPProvider.supports(endpoint.model, endpoint.api_base)


def for_judge(judge: JudgeConfig, endpoint: Endpoint) -> Provider:
    """The provider ``judge.transport`` names for ``endpoint`` (``auto``: direct when the model
    speaks OpenAI's API as is, litellm otherwise).

    Raises:
        ConfigError: ``transport: direct`` for a model that does not speak OpenAI's API.
    """
    if judge.transport == "litellm":
        return LiteLLMProvider(api_key=endpoint.api_key)
    if OpenAIHTTPProvider.supports(endpoint.model, endpoint.api_base):
        return OpenAIHTTPProvider(api_key=endpoint.api_key)
    if judge.transport == "direct":
        raise ConfigError(f"judges[{judge.name}].transport: direct needs a model litellm resolves to an "
                          f"OpenAI-compatible API; {endpoint.model!r} is not (use auto or litellm)")
    return LiteLLMProvider(api_key=endpoint.api_key)


def check_batch_routes(config: JobConfig) -> None:
    """Fail before anything is sent when a judge in batch mode has no batch API judge-engine speaks.

    Raises:
        ConfigError: names the judge and the model.
    """
    for judge in config.judges:
        if judge.mode == "batch" and batch_route(judge.model, judge.api_base) is None:
            raise ConfigError(_no_route(judge.name, judge.model))


def _no_route(judge: str, model: str) -> str:
    return (f"judges[{judge}].mode: batch: {model} has no batch API judge-engine speaks (OpenAI's Batch API, or an "
            "OpenAI-compatible server that implements it, and Anthropic's Message Batches); use mode: online "
            "for this judge")


def batch_api_for(model: str, api_base: str | None, *, api_key: str | None, judge: str = "") -> BatchAPI:
    """The batch API litellm's route for ``model`` leads to.

    Raises:
        ConfigError: judge-engine speaks no batch API for the model (use ``mode: online``).
    """
    route = batch_route(model, api_base)
    if route is None:
        raise ConfigError(_no_route(judge, model))
    if route.api == "anthropic":
        from judge_engine.providers.batch_anthropic import (
            AnthropicBatchAPI,  # aiohttp: loaded when used
        )

        return AnthropicBatchAPI(route, model=model, api_base=api_base, api_key=api_key)
    from judge_engine.providers.batch_openai import OpenAIBatchAPI

    return OpenAIBatchAPI(route, model=model, api_base=api_base, api_key=api_key)
