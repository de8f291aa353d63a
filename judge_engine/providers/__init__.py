"""Providers: the seam (:mod:`.base`), the model catalogue (:mod:`.catalog`: routes, parameters,
prices, tokens), the litellm adapter, the direct OpenAI-compatible transport, and the choice
between them for a judge (:func:`for_judge`), with its endpoint and credentials.

A new provider goes behind :class:`~judge_engine.providers.base.Provider` in a module of its own
here, and :func:`provider_for_endpoint` learns when to choose it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from judge_engine.config import JobConfig, JudgeConfig
from judge_engine.errors import ConfigError
from judge_engine.providers.base import Provider


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
        """Where the requests go, for messages."""
        return self.api_base or "the provider's default endpoint"


def endpoint_for(judge: JudgeConfig) -> Endpoint:
    """The endpoint the config names for ``judge``.

    Raises:
        ConfigError: ``api_key_env`` names a variable that is not set.
    """
    return Endpoint(judge.model, judge.api_base, api_key_for(judge))


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
    from judge_engine.providers.catalog import missing_key_variables

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


def for_judge(judge: JudgeConfig, endpoint: Endpoint) -> Provider:
    """The provider ``judge.transport`` names for ``endpoint`` (``auto``: direct when the model
    speaks OpenAI's API as is, litellm otherwise).

    Raises:
        ConfigError: ``transport: direct`` for a model that does not speak OpenAI's API.
    """
    from judge_engine.providers.litellm import LiteLLMProvider
    from judge_engine.providers.openai_http import OpenAIHTTPProvider

    if judge.transport == "litellm":
        return LiteLLMProvider(api_key=endpoint.api_key)
    if OpenAIHTTPProvider.supports(endpoint.model, endpoint.api_base):
        return OpenAIHTTPProvider(api_key=endpoint.api_key)
    if judge.transport == "direct":
        raise ConfigError(f"judges[{judge.name}].transport: direct needs a model litellm resolves to an "
                          f"OpenAI-compatible API; {endpoint.model!r} is not (use auto or litellm)")
    return LiteLLMProvider(api_key=endpoint.api_key)
