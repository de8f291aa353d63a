"""Job configuration: frozen, closed pydantic models and the one precedence merge.

Precedence, lowest first: model defaults < the YAML file < environment (``JUDGE_ENGINE_OUTPUT_DIR``,
``JUDGE_ENGINE_CACHE_DIR``) < command-line overrides (``--model``, ``--demo``...). Relative paths
in a config file are relative to that file. Errors name the key and the file, never echo values
(a mistyped key could hold a secret).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from judge_engine.errors import ConfigError
from judge_engine.inputs.config_file import (
    read_config_file,
    read_scalar as read_scalar,  # re-exported: rescore reads --option values here
)
from judge_engine.util.naming import config_key, describe_error, did_you_mean
from judge_engine.util.redaction import recorded_url, redact_params, redact_url

_FROZEN = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
"""Every config model: immutable, closed, and numbers finite (``.nan`` passes every ``ge``/``le``
check as false, and a limit of ``.inf`` is no limit: leave the key out)."""


MAX_TOKENS = 1_000_000
"""The largest ``max_tokens``: no model writes more in one answer (the largest write ~128k)."""
MAX_MODEL_CHARS = 200
"""The longest model string: litellm's are under 100 (a Bedrock ARN with its route ~120). A
longer one is a mistake, and every message and table that names the model would print it."""


def _bounded_model(model: str) -> str:
    if len(model) > MAX_MODEL_CHARS:
        raise ValueError(f"at most {MAX_MODEL_CHARS} characters (a litellm model string such as "
                         f"openai/gpt-4o-mini); this one has {len(model):,}")
    return model


ModelString = Annotated[str, AfterValidator(_bounded_model)]


class Limits(BaseModel):
    """What the provider allows this judge's deployment (the lane's limits)."""

    model_config = _FROZEN

    rpm: StrictFloat | None = Field(default=None, ge=0.001)  # below, a pace that never sends
    """Requests per minute; None for no request-rate limit."""
    tpm: StrictFloat | None = Field(default=None, ge=1)
    """Tokens per minute (prompt + completion); None for no token-rate limit."""
    concurrency: StrictInt = Field(default=16, ge=1, le=4096)
    """Most requests in flight at once (also the number of lane workers)."""
    headroom: StrictFloat = Field(default=0.01, ge=0.0, lt=0.5)
    """Share of each limit kept free so clock skew between us and the provider causes no 429s."""
    burst: StrictInt = Field(default=2, ge=1, le=64)
    """Most requests a paced lane releases at one wake-up: when a slot comes due, waiters whose
    slots follow within 100 ms (past the pacer's 20 ms tolerance) go with it. A wake-up from idle
    costs a small VM more CPU than the request it sends, so pairs cut the client's CPU per
    request by ~0.3 ms at 30-50 requests/s; any window sees at most ``burst - 1`` requests above
    the even pace. 1: strictly even pacing (for a provider that enforces its limit over
    sub-second quanta)."""


class Retries(BaseModel):
    """The two separate budgets: transport retries and re-asks (never multiplied together)."""

    model_config = _FROZEN

    transport: StrictInt = Field(default=6, ge=0, le=100)
    """Retries after a 5xx, timeout, reset or truncated body (429s are waited out, not counted)."""
    reasks: StrictInt = Field(default=2, ge=0, le=10)
    """Times an unreadable answer is sent back with the problems stated before it is unscored."""
    backoff_max_s: StrictFloat = Field(default=30.0, ge=0.0)
    """Cap of the exponential backoff with jitter between transport retries."""
    rate_limit_max: StrictInt = Field(default=1000, ge=1)
    """Most 429s one task may receive before it is recorded as unscored."""
    stop_after_exhausted: StrictInt = Field(default=10, ge=1)
    """Tasks in a row that use up their transport retries, with no answer in between, before
    the judge stops (exit 1) instead of recording more of them: the endpoint is failing, which
    says nothing about the items. (A task whose every attempt failed to connect stops the judge
    at once.) With 5% 500s and 6 retries a task is exhausted once in ~10^9."""


class Budget(BaseModel):
    """A limit on what a run (or one judge) may spend: dispatching stops before it is passed."""

    model_config = _FROZEN

    max_cost_usd: StrictFloat | None = Field(default=None, gt=0)
    """Spend (every session, at the provider's prices) plus the estimated cost of the calls in
    flight never passes this; the run stops ``stopped: budget`` and can be resumed with more."""
    max_hours: StrictFloat | None = Field(default=None, gt=0)
    """Wall-clock hours of judging, summed over the run's sessions."""


def checked_api_base(value: str | None) -> str | None:
    """``value`` if it can be a base URL: http(s) (no litellm route takes another scheme), a host,
    no query (the request's path is appended). User-info is sent as basic auth, and redacted
    wherever the URL is recorded or shown. Messages never echo the value: it may hold a secret."""
    try:
        parts = urlsplit(value or "http://h")
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        raise ValueError("not a URL (expected http(s)://host[:port][/path])") from None
    if parts.scheme.lower() not in ("http", "https", "demo"):  # demo: --demo's marker, never sent
        raise ValueError("must start with http:// or https:// (no other scheme reaches a model)")
    if not parts.hostname:
        raise ValueError("names no host (expected http(s)://host[:port][/path])")
    if parts.query or parts.fragment:
        raise ValueError("a base URL cannot carry a query or fragment (?... or #...): the request's path is "
                         "appended to it. Put a key in an environment variable and name it with api_key_env")
    return value


ApiBase = Annotated[str | None, AfterValidator(checked_api_base)]


def checked_proxy(value: str | None) -> str | None:
    """``value`` if it can be a forward proxy: ``direct``, or ``http(s)://[user:password@]host:port``
    (a URL without a scheme is an http proxy, as curl reads it). Never echoed: it may hold a password."""
    if value is None or value == "direct":
        return value
    value = value if "://" in value else f"http://{value}"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        raise ValueError("not a proxy URL (expected http://host:port, or direct)") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError("a proxy is http(s)://[user:password@]host:port (or direct: no proxy for this judge)")
    return value


Proxy = Annotated[str | None, AfterValidator(checked_proxy)]


class DeploymentConfig(BaseModel):
    """One deployment of a judge's model: a replica, a region or another key, with its own limits
    (its own lane). Unset fields take the judge's."""

    model_config = _FROZEN

    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.\-]+$")
    """For messages and the display (default: ``d1``, ``d2``...)."""
    model: ModelString | None = None
    """The model string this deployment is called with (e.g. ``azure/gpt-4o`` for the judge's
    ``openai/gpt-4o``); cache keys keep the judge's ``model``: an answer is an answer."""
    api_base: ApiBase = None
    api_key_env: str | None = None
    api_key: SecretStr | None = None
    limits: Limits | None = None
    """This deployment's rate limits and concurrency (default: the judge's ``limits``)."""
    proxy: Proxy = None
    """This deployment's proxy (default: the judge's)."""
    ca_bundle: Path | None = None
    """Certificates this deployment's endpoint is trusted by, beside the system's (default: the judge's)."""
    verify: StrictBool | None = None
    """Whether this deployment's certificates are checked (default: the judge's)."""


class BatchConfig(BaseModel):
    """How a judge in ``mode: batch`` uses its provider's batch API (OpenAI Batch API, or any
    OpenAI-compatible server that implements it; Anthropic Message Batches)."""

    model_config = _FROZEN

    poll_interval_s: StrictFloat = Field(default=60.0, gt=0)
    """Seconds between polls of the judge's open batches. After a poll that finds nothing new
    the wait grows by half, up to ten times this, and drops back at the next change (real
    providers take minutes to hours; a test or demo against the fake server polls every fraction
    of a second)."""
    fallback: Literal["online", "batch"] = "online"
    """Where a task goes that needs another request after a batch round: a result that failed,
    expired or was cancelled (the same request again), or an answer to re-ask (the re-ask).
    ``online``: at once, through the judge's lane at online prices (the run finishes tonight).
    ``batch``: into the next batch round, up to :attr:`max_rounds`; what still needs a request
    after the last round ends unscored (``transport_exhausted``, or the answer's own reason)."""
    max_rounds: StrictInt = Field(default=3, ge=1, le=20)
    """Batch rounds per task with ``fallback: batch`` (round 1 is the first ask)."""
    completion_window: str = "24h"
    """The window the provider is asked to finish a batch in (OpenAI: ``24h``; Anthropic's
    batches always have 24 h and take no such setting)."""
    max_requests_per_file: StrictInt | None = Field(default=None, ge=1)
    """Requests per batch (default: the provider's limit, OpenAI 50,000, Anthropic 100,000)."""
    max_bytes_per_file: StrictInt | None = Field(default=None, ge=1024)
    """Bytes per batch file (default: the provider's limit, OpenAI 200 MB, Anthropic 256 MB)."""
    max_enqueued_tokens: StrictInt | None = Field(default=None, ge=1)
    """Prompt tokens this judge keeps in unfinished batches at once (the provider's enqueued
    token quota for the model; None: unknown, and a quota refusal from the provider is waited
    out instead). Estimated without a tokenizer (UTF-8 bytes / 4)."""


class ConfidenceConfig(BaseModel):
    """How sure a judge is of each verdict (``confidence: logprobs``, or the mapping):
    :mod:`judge_engine.protocols.confidence` reads it per answer, :mod:`judge_engine.trust.decisions`
    per item."""

    model_config = _FROZEN

    method: Literal["logprobs", "agreement"]
    """``logprobs``: the provider's token probabilities at the position the parser reads the
    verdict (OpenAI chat models, Gemini, vLLM and OpenAI-compatible servers; not Anthropic's
    models nor OpenAI's reasoning models: refused before anything is sent where litellm's
    catalog knows it, else the judge stops at the first answer without them). ``agreement``:
    per item, how far the judge's answers agree (its ``repeats``, or the simulated annotators
    of ``pairwise-annotators``): for any provider, at the price of several requests per item."""
    top_logprobs: StrictInt = Field(default=10, ge=1, le=20)
    """``logprobs``: alternatives asked for at each position (OpenAI allows up to 20); a value
    absent from them counts as probability 0."""
    score: Literal["raw", "weighted"] = "raw"
    """``raw``: the score is the judge's own, and the probability-weighted score (G-Eval) of a
    closed integer scale is kept beside it (``scores.weighted``). ``weighted``: the weighted
    score is the score, the judge's own kept as ``scores.raw``."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"method": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _weighted_needs_logprobs(self) -> ConfidenceConfig:
        if self.score == "weighted" and self.method != "logprobs":
            raise ValueError("score: weighted weighs scores by their token probabilities: it needs method: logprobs")
        return self

    def request_params(self) -> dict[str, Any]:
        """What it adds to every request (and so to the cache key)."""
        if self.method != "logprobs":
            return {}
        return {"logprobs": True, "top_logprobs": self.top_logprobs}


class JudgeConfig(BaseModel):
    """One judge: a model, a protocol and how to call it."""

    model_config = _FROZEN

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    """Unique name of the judge in this job (used in outcomes and the display)."""
    model: ModelString = Field(min_length=1)
    """Any litellm model string, e.g. ``openai/gpt-4o-mini`` or ``anthropic/claude-3-5-haiku-latest``
    (at most 200 characters)."""
    protocol: str
    """A registered protocol name (``judge-engine protocols`` lists them)."""
    protocol_options: dict[str, Any] = Field(default_factory=dict)
    """Protocol-specific options (validated by the protocol)."""
    api_base: ApiBase = None
    """Base URL of an OpenAI-compatible server (vLLM, Ollama, the fake server, a proxy), or None;
    no query; ``https://user:password@host/v1`` is sent as basic auth (:func:`checked_api_base`)."""
    api_key_env: str | None = None
    """Name of the environment variable holding the key (default: the provider's usual one)."""
    api_key: SecretStr | None = None
    """A key written in the config (discouraged); never written anywhere by judge-engine."""
    proxy: Proxy = None
    """The forward proxy this judge's requests leave through, ``http(s)://[user:password@]host:port``
    (the password never recorded), or ``direct``; None: the environment's (``HTTPS_PROXY``,
    ``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``). The direct transport and the batch APIs take it;
    under litellm the environment's is used (a judge's own is refused)."""
    ca_bundle: Path | None = None
    """A certificate file (or folder) trusted beside the system's store, ``SSL_CERT_FILE`` and
    ``REQUESTS_CA_BUNDLE``, for an endpoint behind a private certificate authority (relative to
    the config file)."""
    verify: StrictBool = True
    """Check the endpoint's TLS certificate. ``false`` checks nothing, for a test server only: a
    warning is printed at the start of every run that uses it."""
    transport: Literal["auto", "direct", "litellm"] = "auto"
    """How requests travel. ``direct``: OpenAI's chat-completions API over a pooled HTTP client,
    with the body and prices litellm would use (a tenth of litellm's CPU per call); only for
    models litellm resolves to the ``openai`` provider (OpenAI and OpenAI-compatible servers
    given as ``api_base``). ``litellm``: ``litellm.acompletion`` for everything. ``auto``:
    direct where it applies, litellm elsewhere. Answers and cache keys are the same either way."""
    temperatures: list[float] = Field(default_factory=lambda: [0.0], min_length=1)
    """Sampling temperatures; every item is judged at each."""
    repeats: StrictInt = Field(default=1, ge=1, le=1000)
    """Independent draws per item and temperature (each a distinct, separately cached call)."""
    max_tokens: StrictInt | None = Field(default=500, ge=1, le=MAX_TOKENS)
    """Completion token cap sent with every request."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Other sampling parameters passed through (``top_p``, ``seed``...)."""
    timeout_s: StrictFloat = Field(default=120.0, ge=0.1, le=86_400, allow_inf_nan=False)
    """Per-attempt timeout; a hanging request is cut and retried (finite, at most a day, at least
    0.1 s: below, every request is cut before any answer and recorded as the provider's failure)."""
    limits: Limits = Field(default_factory=Limits)
    retries: Retries = Field(default_factory=Retries)
    deployments: list[DeploymentConfig] = Field(default_factory=list)
    """Several deployments of the model (keys, regions, replicas), each a lane of its own; a
    request goes to the one that can send it soonest, and a failing one cools down while the
    others take its work. Empty: one deployment, the judge's own ``api_base`` and ``limits``."""
    budget: Budget = Field(default_factory=Budget)
    """This judge's own spending limit (the run's is ``budget`` at the top level)."""
    self_preference: Literal["allow", "warn", "forbid"] = "warn"
    """When the judge's model family (:func:`judge_engine.util.families.model_family`) is the
    family of a system behind an item (the item's ``system`` field): ``warn`` says so in
    ``plan``; ``forbid`` does not judge those items (their tasks are recorded unscored,
    ``self_preference``, with no call); ``allow`` says nothing."""
    mode: Literal["online", "batch"] = "online"
    """``online``: one request at a time through the judge's lane. ``batch``: the provider's
    batch API (half the price, a separate quota, results within the completion window); see
    :class:`BatchConfig`. Neither the run id nor the cache key depends on it: an answer is an
    answer, and a run may change mode when it is resumed."""
    batch: BatchConfig = Field(default_factory=BatchConfig)
    confidence: ConfidenceConfig | None = None
    """How sure the judge is of each verdict (:class:`ConfidenceConfig`); None: not measured
    (a protocol may default it: ``pairwise-annotators`` reads log-probs)."""

    @field_validator("temperatures")
    @classmethod
    def _temperatures_in_range(cls, value: list[float]) -> list[float]:
        if not all(0 <= t <= 2 for t in value):  # so NaN is refused too
            raise ValueError("temperatures must be between 0 and 2")
        if len(set(value)) != len(value):
            raise ValueError("temperatures must not repeat (use repeats for repeated draws)")
        return value

    @field_validator("params")
    @classmethod
    def _no_reserved_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        reserved = {"model", "messages", "temperature", "max_tokens", "api_key", "api_base", "stream"}
        clash = sorted(reserved & set(value))
        if clash:
            raise ValueError(f"set {', '.join(clash)} with its own key, not in params")
        if logprobs := sorted({"logprobs", "top_logprobs"} & set(value)):
            raise ValueError(f"{', '.join(logprobs)}: ask for token probabilities with confidence: logprobs "
                             "(confidence.top_logprobs), which reads them at the verdict")
        if bad := [k for k in ("extra_body", "extra_headers") if k in value and not isinstance(value[k], dict)]:
            raise ValueError(f"{bad[0]}: must be a mapping (its keys are merged into the request)")
        return value


class DatasetConfig(BaseModel):
    """Where the items are and how their columns map to the protocol's fields."""

    model_config = _FROZEN

    path: Path
    """JSONL, CSV (TSV) or Parquet file (relative to the config file)."""
    format: Literal["auto", "jsonl", "csv", "parquet"] = "auto"
    """``auto``: by the suffix (``.jsonl``/``.ndjson``/``.json``, ``.csv``/``.tsv``, ``.parquet``)."""
    fields: dict[str, str] = Field(default_factory=dict)
    """Canonical field name -> column name; unmapped canonical names are read from a column of
    the same name. ``id`` is required (mapped or as a column)."""
    limit: StrictInt | None = Field(default=None, ge=1)
    """Judge only the first N items."""


TIE_RULES = ("first", "abstain", "mean")
TIE_CHOICES = "tie: first, abstain, mean, or the verdict to give (a mean cannot tie)"
EVEN_TOO = f"can vote as an even panel, whose ties are common: it needs a tie rule: {TIE_CHOICES}"


class JuryConfig(BaseModel):
    """A panel of judges whose verdicts on each item are aggregated into one
    (:mod:`judge_engine.trust.jury`): an outcome of its own, ``judge: <name>``, ``protocol: jury``."""

    model_config = _FROZEN

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    """Unique among judges and juries: the ``judge`` of the jury's outcome lines."""
    judges: list[str] = Field(min_length=2)
    """The jurors: judges of this config, all with the same protocol."""
    aggregate: Literal["majority", "mean", "median", "weighted"] = "majority"
    """``majority``: the vote most jurors gave; ``mean``/``median``: of their scores;
    ``weighted``: each juror's vote counts its weight (a weighted vote for labels, a weighted
    mean for numbers)."""
    weights: dict[str, float] = Field(default_factory=dict)
    """Juror -> weight (> 0), for ``weighted`` (every juror needs one)."""
    tie: str | float | None = None
    """When votes tie (a majority or weighted vote; the two middle values of a median):
    ``first`` takes the vote of the juror listed first among the tied, ``abstain`` records the
    jury unscored (``jury_tie``), ``mean`` averages the tied values (numbers only), and any
    other value (a label such as ``fail``, or a number) is the verdict. Required for an
    even-sized panel, whose ties are common, and for one that can vote with a juror missing (a
    juror with ``self_preference: forbid``, a ``quorum`` below its size); otherwise an odd
    panel abstains on its rare ties (three or more values)."""
    quorum: StrictInt | None = Field(default=None, ge=1)
    """How many jurors must have scored an item for the jury to give a verdict (default: every
    juror not kept off the item by ``self_preference: forbid``); fewer is ``jury_incomplete``.
    Below the panel's size, the others decide without an unreadable or failed juror."""

    @model_validator(mode="after")
    def _a_panel(self) -> JuryConfig:
        where = f"juries[{self.name}]"
        if len(set(self.judges)) != len(self.judges):
            raise ValueError(f"{where}.judges: a judge sits on a panel once")
        if self.aggregate == "weighted":
            missing = [j for j in self.judges if j not in self.weights]
            if missing:
                raise ValueError(f"{where}.weights: aggregate weighted needs a weight for every juror "
                                 f"(missing: {', '.join(missing)})")
        elif self.weights:
            raise ValueError(f"{where}.weights: only aggregate weighted uses weights")
        if unknown := sorted(set(self.weights) - set(self.judges)):
            raise ValueError(f"{where}.weights: not on the panel: " + ", ".join(
                f"{j} ({hint})" if (hint := did_you_mean(j, self.judges)) else j for j in unknown))
        if any(w <= 0 for w in self.weights.values()):
            raise ValueError(f"{where}.weights: weights must be greater than 0")
        size = len(self.judges)
        if self.needs_tie_rule and size % 2 == 0:
            raise ValueError(f"{where}.tie: an even-sized panel ({size} judges) needs a tie rule: {TIE_CHOICES}")
        if self.quorum is not None and self.quorum > size:
            raise ValueError(f"{where}.quorum: {self.quorum} is more than the {size} jurors")
        if self.needs_tie_rule and self.quorum is not None and self.quorum < size:
            raise ValueError(f"{where}.tie: quorum {self.quorum} lets the panel of {size} decide without a juror "
                             f"that gave no vote (unreadable, failed), so it {EVEN_TOO}")
        return self

    @property
    def needs_tie_rule(self) -> bool:
        """No ``tie`` given, and the aggregate can tie (a mean cannot)."""
        return self.tie is None and self.aggregate != "mean"


def _a_path(value: Any) -> Any:
    if isinstance(value, str) and not value.strip():
        raise ValueError("an empty path (leave the key out for the default)")
    return value


class CascadeConfig(BaseModel):
    """A cascade of judges with a guarantee of agreement with humans ("Trust or Escalate",
    :mod:`judge_engine.trust.cascade`): each item goes to the first stage; a stage's verdict stands
    when its confidence reaches the stage's calibrated threshold, otherwise the item goes on to
    the next stage, and after the last it is abstained. One outcome line per item, judge
    ``<name>``, protocol ``cascade``."""

    model_config = _FROZEN

    name: str = Field(default="cascade", min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    """The ``judge`` of the cascade's outcome lines (unique among judges and juries)."""
    stages: list[str] = Field(min_length=1)
    """Judges or juries of this config, one protocol, cheapest first."""
    thresholds: Path
    """The thresholds file ``judge-engine calibrate --output`` wrote (relative to the config
    file); its stages must be these. Its content is part of the run id."""
    enabled: bool = True
    """False (or ``run --no-cascade``): every judge judges every item, as in a run without a
    cascade: the run that judges the calibration items with every stage."""
    guarantee: Literal["stage", "cascade"] | None = None
    """The guarantee the thresholds file must have been calibrated under (``judge-engine
    calibrate --guarantee``): ``stage`` (each stage tested on its own) or ``cascade`` (the
    thresholds tested together: one guarantee for everything the cascade answers). A file
    calibrated under the other is refused; unset, the file's own is used. ``plan``, ``stats``,
    ``show`` and the viewer name it either way."""

    @field_validator("stages")
    @classmethod
    def _stages_once(cls, value: list[str]) -> list[str]:
        if twice := sorted({s for s in value if value.count(s) > 1}):
            raise ValueError(f"a stage is named once (twice: {', '.join(twice)})")
        return value


class OutputConfig(BaseModel):
    model_config = _FROZEN

    dir: Path = Path("runs")
    """Where run directories are created."""
    _dir = field_validator("dir", mode="before")(_a_path)


class CacheConfig(BaseModel):
    model_config = _FROZEN

    dir: Path = Path(".judge_cache")
    enabled: bool = True
    _dir = field_validator("dir", mode="before")(_a_path)


class JobConfig(BaseModel):
    """A whole job: a dataset, one or more judges, where results and the cache go."""

    model_config = _FROZEN

    dataset: DatasetConfig
    judges: list[JudgeConfig] = Field(min_length=1)
    output: OutputConfig = Field(default_factory=OutputConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    budget: Budget = Field(default_factory=Budget)
    """The whole run's spending limit (each judge may have one of its own too)."""
    juries: list[JuryConfig] = Field(default_factory=list)
    """Panels of this config's judges, each aggregated into an outcome of its own per item."""
    cascade: CascadeConfig | None = None
    """Judges (or juries) asked in turn, each only about the items the ones before it were not
    sure enough of (:class:`CascadeConfig`)."""

    @field_validator("judges", mode="before")
    @classmethod
    def _some_judge(cls, value: Any) -> Any:
        # Before pydantic's own check, whose words ("List should have at least 1 item after
        # validation") say nothing of what a judge is; ``judges:`` left empty reads as None.
        if value is None or (isinstance(value, list | dict) and not value):
            raise ValueError("no judge: a config needs at least one (each with a name, a model and a protocol)")
        if isinstance(value, dict):  # one judge written without its "- "
            raise ValueError("a list of judges, each beginning with '- name: ...' (this is one mapping)")
        return value

    @model_validator(mode="after")
    def _unique_judge_names(self) -> JobConfig:
        names = [j.name for j in self.judges]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"judge names must be unique: {', '.join(duplicates)}")
        return self

    @model_validator(mode="after")
    def _juries_of_known_judges(self) -> JobConfig:
        protocols = {j.name: j.protocol for j in self.judges}
        forbidding = {j.name for j in self.judges if j.self_preference == "forbid"}
        taken = set(protocols)
        for jury in self.juries:
            where = f"juries[{jury.name}]"
            if jury.name in taken:
                raise ValueError(f"{where}.name: already the name of a judge or jury")
            taken.add(jury.name)
            if unknown := [j for j in jury.judges if j not in protocols]:
                raise ValueError(f"{where}.judges: no judge named " + ", ".join(
                    f"{j} ({hint})" if (hint := did_you_mean(j, protocols)) else j for j in unknown))
            if len({protocols[j] for j in jury.judges}) > 1:
                raise ValueError(f"{where}.judges: a panel's judges share one protocol (here: "
                                 + ", ".join(f"{j} {protocols[j]}" for j in jury.judges) + ")")
            if jury.needs_tie_rule and (recused := [j for j in jury.judges if j in forbidding]):
                raise ValueError(f"{where}.tie: self_preference: forbid keeps {', '.join(recused)} off the items of "
                                 f"the same model family, where the panel of {len(jury.judges)} {EVEN_TOO}")
        return self

    @model_validator(mode="after")
    def _cascade_of_known_stages(self) -> JobConfig:
        cascade = self.cascade
        if cascade is None:
            return self
        judges, juries = {j.name for j in self.judges}, {j.name for j in self.juries}
        if cascade.name in judges | juries:
            raise ValueError(f"cascade.name: {cascade.name} is already the name of a judge or jury")
        if unknown := [s for s in cascade.stages if s not in judges | juries]:
            raise ValueError(f"cascade.stages: no judge or jury named {', '.join(unknown)}")
        return self

    def manifest_view(self) -> dict[str, Any]:
        """The resolved config as recorded in ``run.json``: no secrets, paths as strings."""
        data = self.model_dump(mode="json", exclude={"judges": {"__all__": {"api_key": True, "deployments": {
            "__all__": {"api_key"}}}}})
        for where in (w for judge in data["judges"] for w in (judge, *judge["deployments"])):
            where["api_base"] = redact_url(where["api_base"])  # a URL's credentials are never recorded
            where["proxy"] = redact_url(where["proxy"])  # nor a proxy's
        for judge in data["judges"]:
            judge["params"] = dict(redact_params(judge["params"]))  # nor a gateway key in extra_headers
        return data


def load_config(path: str | Path, *, overrides: Mapping[str, Any] | None = None) -> JobConfig:
    """Read, merge and validate a job config.

    Args:
        path: the YAML file.
        overrides: command-line overrides: ``model`` (every judge), ``api_base`` (every judge),
            ``output_dir``, ``cache_dir``, ``limit``, ``batch`` (every judge in batch mode),
            ``batch_poll_s`` (every judge's batch poll interval: a demo's), ``dataset`` (another
            dataset file: ``--dataset``), ``cascade`` (False: ``--no-cascade``).

    Raises:
        ConfigError: unreadable file, YAML syntax, unknown keys, wrong types; the message names
            the file and the key.
    """
    file = Path(path)
    raw = read_config_file(file)
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: the config must be a mapping with dataset and judges")
    merged = _apply_overrides(_apply_env(raw), dict(overrides or {}))
    try:
        config = JobConfig.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, file, _cli_flags(overrides or {}), merged)) from None
    return _resolve_paths(config, file.resolve().parent)


def recorded_config(raw: Mapping[str, Any], *, where: Path, overrides: Mapping[str, Any] | None = None) -> JobConfig:
    """A config as a run recorded it (``run.json``: resolved, no secrets), validated by today's
    rules with ``overrides`` applied as :func:`load_config` applies them; a ConfigError names
    ``where`` and the key."""
    try:
        return JobConfig.model_validate(_apply_overrides(_usable_urls(raw), dict(overrides or {})))
    except ValidationError as exc:
        raise ConfigError(_describe(exc, where, raw=raw)) from None


def _usable_urls(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded config's ``api_base`` and ``proxy`` values with their redacted credentials dropped
    (:func:`~judge_engine.util.redaction.recorded_url`): ``[REDACTED]@`` is no URL a client can use."""
    def judge(entry: Any) -> Any:
        if not isinstance(entry, Mapping):
            return entry
        fixed = {**entry, **{key: recorded_url(entry[key]) for key in ("api_base", "proxy") if entry.get(key)}}
        if isinstance(entry.get("deployments"), list):
            fixed["deployments"] = [judge(d) for d in entry["deployments"]]
        return fixed

    judges = raw.get("judges")
    return {**raw, "judges": [judge(j) for j in judges]} if isinstance(judges, list) else dict(raw)


def check_directories(config: JobConfig, file: Path, *, output: bool = True) -> None:
    """Check, before anything is sent, that the run directory (``output``) and the answer cache
    can be made where the config puts them: the nearest existing folder on each path is a
    folder this process may write in.

    Raises:
        ConfigError: naming the key, the path and why.
    """
    keys = ([("output.dir", config.output.dir)] if output else []) + (
        [("cache.dir", config.cache.dir)] if config.cache.enabled else [])
    for key, path in keys:
        found = path
        try:
            while not found.exists() and found.parent != found:
                found = found.parent
            problem = ("is not a folder" if not found.is_dir()
                       else None if os.access(found, os.W_OK | os.X_OK) else "is not writable")
        except OSError as exc:
            problem = f"cannot be read ({exc.strerror or exc})"
        if problem is not None:
            where = f"{path} {problem}" if found == path else f"cannot make {path}: {found} {problem}"
            raise ConfigError(f"{file}: {key}: {where}")


def _apply_env(raw: dict[str, Any]) -> dict[str, Any]:
    merged = dict(raw)
    if value := os.environ.get("JUDGE_ENGINE_OUTPUT_DIR"):
        merged["output"] = {**(merged.get("output") or {}), "dir": value}
    if value := os.environ.get("JUDGE_ENGINE_CACHE_DIR"):
        merged["cache"] = {**(merged.get("cache") or {}), "dir": value}
    return merged


def _apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    merged = dict(raw)
    judge_keys = {k: overrides[k] for k in ("model", "api_base") if overrides.get(k) is not None}
    if overrides.get("batch"):  # --batch: every judge in batch mode
        judge_keys["mode"] = "batch"
    if judge_keys and isinstance(merged.get("judges"), list):
        merged["judges"] = [
            {**j, **judge_keys} if isinstance(j, dict) else j for j in merged["judges"]
        ]
    if overrides.get("output_dir") is not None:
        merged["output"] = {**(merged.get("output") or {}), "dir": str(overrides["output_dir"])}
    if overrides.get("cache_dir") is not None:
        merged["cache"] = {**(merged.get("cache") or {}), "dir": str(overrides["cache_dir"])}
    if overrides.get("dataset") is not None and isinstance(merged.get("dataset"), dict):  # --dataset
        merged["dataset"] = {**merged["dataset"], "path": str(overrides["dataset"])}
    if overrides.get("cascade") is False and isinstance(merged.get("cascade"), dict):  # --no-cascade
        merged["cascade"] = {**merged["cascade"], "enabled": False}
    if overrides.get("limit") is not None and isinstance(merged.get("dataset"), dict):
        merged["dataset"] = {**merged["dataset"], "limit": overrides["limit"]}
    budget = {key: overrides[key] for key in ("max_cost_usd", "max_hours") if overrides.get(key) is not None}
    if budget:
        merged["budget"] = {**(merged.get("budget") or {}), **budget}
    if overrides.get("batch_poll_s") is not None and isinstance(merged.get("judges"), list):  # a demo's fake server
        merged["judges"] = [
            {**j, "batch": {**(j.get("batch") or {}), "poll_interval_s": overrides["batch_poll_s"]}}
            if isinstance(j, dict) else j for j in merged["judges"]
        ]
    options = overrides.get("protocol_options") or {}
    if options and isinstance(merged.get("judges"), list):  # judge name -> options to merge (rescore)
        merged["judges"] = [
            {**j, "protocol_options": {**(j.get("protocol_options") or {}), **options.get(j.get("name"), {})}}
            if isinstance(j, dict) else j for j in merged["judges"]
        ]
    return merged


def _resolve_paths(config: JobConfig, base: Path) -> JobConfig:
    def absolute(p: Path) -> Path:
        return p if p.is_absolute() else (base / p)

    def option_paths(judge: JudgeConfig) -> JudgeConfig:
        """Protocol options named ``*_file`` are paths, relative to the config file too, and so
        are the certificates a judge or deployment trusts."""
        options = {key: str(absolute(Path(value))) if key.endswith("_file") and isinstance(value, str) else value
                   for key, value in judge.protocol_options.items()}
        deployments = [d.model_copy(update={"ca_bundle": absolute(d.ca_bundle)}) if d.ca_bundle else d
                       for d in judge.deployments]
        return judge.model_copy(update={"protocol_options": options, "deployments": deployments,
                                        "ca_bundle": absolute(judge.ca_bundle) if judge.ca_bundle else None})

    return config.model_copy(
        update={
            "dataset": config.dataset.model_copy(update={"path": absolute(config.dataset.path)}),
            "output": config.output.model_copy(update={"dir": absolute(config.output.dir)}),
            "cache": config.cache.model_copy(update={"dir": absolute(config.cache.dir)}),
            "judges": [option_paths(judge) for judge in config.judges],
            "cascade": config.cascade.model_copy(update={"thresholds": absolute(config.cascade.thresholds)})
            if config.cascade is not None else None,
        }
    )


_OVERRIDE_FLAGS = {"limit": ("--limit", "dataset.limit"), "dataset": ("--dataset", "dataset.path"), "max_cost_usd": ("--budget", "budget.max_cost_usd"),
                   "max_hours": ("--budget-hours", "budget.max_hours"), "model": ("--model", "model"),
                   "api_base": ("--api-base", "api_base")}
"""Override -> (its command-line flag, the key it sets; a judge's key for model and api_base)."""


def _cli_flags(overrides: Mapping[str, Any]) -> dict[str, str]:
    """Dotted key (or a judge's key) -> the flag that set it, for the overrides given."""
    return {key: flag for name, (flag, key) in _OVERRIDE_FLAGS.items() if overrides.get(name) is not None}


def _describe(exc: ValidationError, file: Path, flags: Mapping[str, str] | None = None, raw: Any = None) -> str:
    """Each problem on a line, naming the key (a judge by its name: ``judges[mqm].limits``) and
    the file, or the flag the value came from; an unknown key with the nearest known one."""
    lines = []
    for error in exc.errors():
        key = config_key(error["loc"], raw)
        flag = (flags or {}).get(key) or (flags or {}).get(str(error["loc"][-1]) if error["loc"] and key.startswith("judges[") else "")
        if flag:  # the value came from the command line, not the file
            lines.append(f"{flag} ({key}): {error['msg'].removeprefix('Value error, ')}")
            continue
        message = describe_error(JobConfig, error)
        if error["type"] == "missing":
            message = "required key is missing"
        elif message.startswith(f"{error['loc'][0]}[" if error["loc"] else "juries["):  # it names its own key (juries[panel].tie)
            lines.append(f"{file}: {message}")
            continue
        lines.append(f"{file}: {key}: {message}")
    return "\n".join(lines)

