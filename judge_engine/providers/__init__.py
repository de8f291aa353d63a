"""Providers: the seam (:mod:`.base`), the litellm adapter, the direct OpenAI-compatible transport,
and the choice between them for a judge (:func:`for_judge`), with its credentials."""

from __future__ import annotations

import os

from judge_engine.config import JobConfig, JudgeConfig
from judge_engine.errors import ConfigError
from judge_engine.providers.base import Provider


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
            raise ConfigError(f"judges[{judge.name}].api_key_env: environment variable {judge.api_key_env} is not set")
        return value
    return None


def check_credentials(config: JobConfig) -> None:
    """Fail before anything is sent when a judge's provider needs a key that is not there.

    A judge with ``api_key``, or with an ``api_base`` (a local server or a proxy may need no key)
    and no ``api_key_env``, is not checked; ``api_key_env`` must name a set variable; otherwise
    the provider's own variables, as litellm knows them, must be set.

    Raises:
        ConfigError: names the judge, the model and the variable(s) to set.
    """
    from judge_engine.providers.litellm import missing_key_variables

    for judge in config.judges:
        if judge.api_key is not None:
            continue
        if judge.api_key_env:
            api_key_for(judge)
            continue
        if judge.api_base:
            continue
        missing = missing_key_variables(judge.model)
        if missing:
            raise ConfigError(
                f"judges[{judge.name}]: {judge.model} needs an API key in the environment, and "
                f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set: export it (or "
                "name your variable with api_key_env). Nothing was sent."
            )


def for_judge(judge: JudgeConfig) -> Provider:
    """The provider that serves ``judge`` at its configured model and endpoint."""
    return provider_for_endpoint(judge, judge.model, judge.api_base, api_key=api_key_for(judge))


def provider_for_endpoint(judge: JudgeConfig, model: str, api_base: str | None, *, api_key: str | None) -> Provider:
    """The provider ``judge.transport`` names for this endpoint (``auto``: direct when the model
    speaks OpenAI's API as is, litellm otherwise)."""
    from judge_engine.providers.litellm import LiteLLMProvider
    from judge_engine.providers.openai_http import OpenAIHTTPProvider

    if judge.transport == "litellm":
        return LiteLLMProvider(api_key=api_key)
    if OpenAIHTTPProvider.supports(model, api_base):
        return OpenAIHTTPProvider(api_key=api_key)
    if judge.transport == "direct":
        raise ConfigError(f"judges[{judge.name}].transport: direct needs a model litellm resolves to an "
                          f"OpenAI-compatible API; {model!r} is not (use auto or litellm)")
    return LiteLLMProvider(api_key=api_key)
