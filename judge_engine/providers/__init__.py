"""Providers: the seam (:mod:`.base`), the model catalogue (:mod:`.catalog`: routes, parameters,
prices, tokens), the litellm adapter, the direct OpenAI-compatible transport, and the choice
between them for a judge (:func:`for_judge`), with its endpoint and credentials; the batch seam
(:mod:`.batch`) and the choice of a batch API for a judge's model (:func:`batch_api_for`).

A new provider goes behind :class:`~judge_engine.providers.base.Provider` in a module of its own
here, and :func:`for_judge` learns when to choose it.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field

from judge_engine.errors import ConfigError
from judge_engine.inputs.config import DeploymentConfig, JobConfig, JudgeConfig
from judge_engine.providers.base import Provider
from judge_engine.providers.batch import BatchAPI
from judge_engine.providers.catalog import (
    batch_route,
    litellm_route,
    logprobs_support,
    missing_key_variables,
    probe_url,
    provider_key,
)
from judge_engine.providers.http import probe
from judge_engine.providers.litellm import LiteLLMProvider
from judge_engine.providers.network import Network, network_problem
from judge_engine.providers.openai_http import OpenAIHTTPProvider
from judge_engine.util.redaction import redact, redact_url, url_credentials, url_secrets


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where one judge's requests go, resolved once per session (a demo points every judge at
    the fake server here; cache keys keep the config's model and ``api_base``)."""

    model: str
    """The model string sent (litellm's form, e.g. ``openai/gpt-4o-mini``)."""
    api_base: str | None
    api_key: str | None = field(default=None, repr=False)
    """Never recorded, never printed."""
    network: Network = field(default_factory=Network)
    """How its connections leave (proxy, TLS): the judge's (or deployment's) settings, else the
    environment's."""
    fake: bool = False
    """The project's fake server (``--demo``): each request names its sample
    (:data:`~judge_engine.providers.base.SAMPLE_HEADER`), so the answers are a function of the
    request, not of the order identical requests arrive in."""

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
        return [Endpoint(judge.model, judge.api_base, api_key_for(judge), network_of(judge))]
    return [Endpoint(d.model or judge.model, d.api_base or judge.api_base, _key(judge, index), network_of(judge, d))
            for index, d in enumerate(judge.deployments)]


def network_of(judge: JudgeConfig, deployment: DeploymentConfig | None = None) -> Network:
    """How ``judge``'s (or one of its deployments') connections leave: the deployment's proxy,
    certificates and check where it sets them, else the judge's, else the environment's."""
    if deployment is None:
        return Network(judge.proxy, judge.ca_bundle, judge.verify)
    return Network(deployment.proxy or judge.proxy, deployment.ca_bundle or judge.ca_bundle,
                   judge.verify if deployment.verify is None else deployment.verify)


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


def check_network(config: JobConfig, *, demo: bool = False) -> None:
    """Each endpoint's network settings can be used, before anything is sent: its certificates
    (``ca_bundle``, ``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE``, ``SSL_CERT_DIR``) read, and a
    judge's own ``proxy``, ``ca_bundle`` or ``verify: false`` only where judge-engine's own
    client sends (the direct transport): litellm's clients take the environment's settings for
    every judge alike. A demo (``demo``) sends to its own fake servers, through the
    environment's settings only.

    Raises:
        ConfigError: naming the judge (or deployment), the key or variable, and what to do.
    """
    Network().ssl_context()  # the environment's certificates, which every endpoint reads
    for judge in [] if demo else config.judges:
        for where, endpoint in _placed(judge):
            network = endpoint.network
            try:
                network.ssl_context()
            except ConfigError as exc:
                raise ConfigError(f"{where}: {exc}") from None
            own = [key for key, set_ in (("proxy", network.proxy is not None), ("ca_bundle", network.ca_bundle),
                                         ("verify", not network.verify)) if set_]
            if own and not _direct(judge, endpoint) and judge.mode == "online":
                raise ConfigError(
                    f"{where}.{own[0]}: {endpoint.model} goes through litellm, whose clients take their proxy and "
                    "certificates from the environment for every judge alike (HTTPS_PROXY, NO_PROXY, SSL_CERT_FILE, "
                    "SSL_CERT_DIR): set those instead; a judge's own proxy, ca_bundle and verify apply to the direct "
                    "transport (an openai/ model, or any model on an OpenAI-compatible api_base) and the batch APIs")


def _placed(judge: JudgeConfig) -> list[tuple[str, Endpoint]]:
    """Each of ``judge``'s endpoints (no key read: ``plan`` needs none) and where the config sets it."""
    if not judge.deployments:
        return [(f"judges[{judge.name}]", Endpoint(judge.model, judge.api_base, network=network_of(judge)))]
    return [(f"judges[{judge.name}].deployments[{index}]",
             Endpoint(d.model or judge.model, d.api_base or judge.api_base, network=network_of(judge, d)))
            for index, d in enumerate(judge.deployments)]


@dataclass(frozen=True, slots=True)
class EndpointCheck:
    """What ``plan --check-endpoints`` found at one endpoint."""

    where: str
    """``judges[NAME]`` (or one of its deployments)."""
    url: str | None
    """What was asked (credentials redacted); None: no endpoint URL is known for the model."""
    ok: bool
    said: str


async def check_endpoint(judge: JudgeConfig, where: str, endpoint: Endpoint) -> EndpointCheck:
    """Reach ``endpoint`` as a request would (its proxy, its certificates), sending no prompt: a
    GET of its model list. Any HTTP answer means reached and, over https, verified."""
    url = probe_url(endpoint.model, endpoint.api_base)
    if url is None:
        return EndpointCheck(where, None, True, "not checked: litellm reaches this provider through its own SDK")
    plain, basic = url_credentials(url)
    headers = {"Authorization": basic} if basic else (
        {"Authorization": f"Bearer {endpoint.api_key}", "x-api-key": endpoint.api_key} if endpoint.api_key else {})
    shown = redact_url(url) or url
    proxy = endpoint.network.proxy_label(plain)
    through = f" through the proxy {proxy}" if proxy else ""
    try:
        status = await probe(plain, endpoint.network, headers)
    except Exception as error:
        problem = network_problem(error, endpoint=shown, proxy=proxy)
        if problem is None:
            problem = f"cannot reach {shown}{through}: {type(error).__name__}: {error}"
        return EndpointCheck(where, shown, False, redact(problem, [endpoint.api_key or "", *url_secrets(url)]))
    tls = ", certificate verified" if plain.startswith("https://") and endpoint.network.verify else (
        ", certificate NOT checked (verify: false)" if plain.startswith("https://") else "")
    return EndpointCheck(where, shown, True, f"reached{through} ({status}{tls})")


def endpoints_to_check(judge: JudgeConfig) -> list[tuple[str, Endpoint]]:
    """Each of ``judge``'s endpoints with the key it will send (where it can be read), for
    :func:`check_endpoint`."""
    placed = _placed(judge)
    out = []
    for index, (where, endpoint) in enumerate(placed):
        try:
            key = _key(judge, index) if judge.deployments else api_key_for(judge)
        except ConfigError:  # plan needs no key: the check then shows what an unauthenticated GET gets
            key = None
        out.append((where, dataclasses.replace(endpoint, api_key=key)))
    return out


def insecure_endpoints(config: JobConfig) -> list[str]:
    """A warning per judge (or deployment) whose certificates are not checked (``verify: false``):
    said at the start of every run that uses it."""
    lines = []
    for judge in config.judges:
        for where, endpoint in _placed(judge):
            if endpoint.network.insecure:
                lines.append(f"{where}: verify: false: the certificate of {endpoint.label} is not checked, so anyone "
                             "between here and it can read and answer its requests (for a test server only)")
    return lines


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
        return LiteLLMProvider(api_key=endpoint.api_key, names_sample=endpoint.fake)
    if OpenAIHTTPProvider.supports(endpoint.model, endpoint.api_base):
        return OpenAIHTTPProvider(api_key=endpoint.api_key, network=endpoint.network, names_sample=endpoint.fake)
    if judge.transport == "direct":
        raise ConfigError(f"judges[{judge.name}].transport: direct needs a model litellm resolves to an "
                          f"OpenAI-compatible API; {endpoint.model!r} is not (use auto or litellm)")
    return LiteLLMProvider(api_key=endpoint.api_key, names_sample=endpoint.fake)


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


def batch_api_for(model: str, api_base: str | None, *, api_key: str | None, judge: str = "",
                  network: Network | None = None) -> BatchAPI:
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

        return AnthropicBatchAPI(route, model=model, api_base=api_base, api_key=api_key, network=network)
    from judge_engine.providers.batch_openai import OpenAIBatchAPI

    return OpenAIBatchAPI(route, model=model, api_base=api_base, api_key=api_key, network=network)
