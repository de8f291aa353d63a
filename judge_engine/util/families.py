"""Model families: which vendor's line a model or a system name belongs to.

One definition for everything that asks "is this judge grading its own family's output?": the
self-preference figure of ``stats``, ``plan``'s warning and the ``self_preference: forbid`` rule
(:mod:`judge_engine.planning.self_preference`). A name
is read as a litellm model string or a system label: the provider route and any organisation
prefix are dropped (``openai/gpt-4o-mini`` -> ``gpt-4o-mini``, ``together_ai/meta-llama/
Llama-3-70b`` -> ``llama-3-70b``), then the first pattern that matches the start of the rest
names the family. Families are vendors' model lines, coarse on purpose: ``gpt-4o-mini`` judging
``gpt-4o-2024-08-06`` (or LitEval's system label ``gpt4o``) is one family, ``openai``; Gemini
and Gemma are both ``google``.

Ids that wrap a base model are read down to it:

* a fine-tune id of OpenAI's or Mistral's API, ``ft:<base>:<org>:<suffix>:<id>``
  (``openai/ft:gpt-4o-mini-2024-07-18:org::abc123`` is ``openai``), or OpenAI's legacy
  ``davinci:ft-...``, is its base model's family;
* a Bedrock id: its cross-region inference prefix (``us.``, ``eu.``, ``apac.``, ``jp.``, ``au.``,
  ``us-gov.``, ``global.``) and its vendor (``anthropic.``, ``meta.``, ``amazon.``...) are
  dropped, and the vendor names the family when the model's own name does not
  (``us.deepseek.r1-v1:0``); a Bedrock ARN is read by its resource (``inference-profile/us.
  anthropic.claude-...``, ``foundation-model/meta.llama3-...``, ``custom-model/<base model>/
  <id>``), or, for an imported model whose ARN is opaque, by the model format litellm's route
  names before it (``bedrock/llama/arn:...:imported-model/...`` is ``meta``).

What a name does not say, no rule can read: an Azure OpenAI deployment named ``azure/prod-judge``,
a provisioned or imported Bedrock model (``...:provisioned-model/abc123``), a Vertex endpoint id,
a Gemini ``tunedModels/...`` name, and fine-tunes named after themselves (TowerInstruct,
Prometheus) have no family (each is a family of its own name). Give the base model where it
matters: a judge's ``model`` names the base (``openai/gpt-4o-mini``) and its
``deployments[].model`` the deployment it is called through (``azure/prod-judge``), since
``plan`` and ``forbid`` read the judge's ``model``; ``stats --family NAME=FAMILY`` names a
judge's or a system's family for the statistics.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

FAMILIES: tuple[tuple[str, str], ...] = (
    ("openai", r"(gpt|chat[-_]?gpt|o[1-9](-|$)|text-davinci|davinci|curie|babbage)"),
    ("anthropic", r"claude"),
    ("google", r"(gemini|gemma|palm(-|\d|$)|chat-bison|text-bison)"),
    ("meta", r"(meta-llama|llama|codellama)"),
    ("alibaba", r"(qwen|qwq)"),
    ("mistral", r"(open-)?(mistral|mixtral|codestral|ministral|magistral|pixtral)"),
    ("deepseek", r"deepseek"),
    ("cohere", r"(command|c4ai|aya)"),
    ("microsoft", r"phi-?\d"),
    ("xai", r"grok"),
    ("amazon", r"(nova|titan)-"),
    ("ai21", r"(jamba|j2-)"),
    ("writer", r"palmyra"),
)
"""(family, pattern matched at the start of the model's own name), first match wins."""

_BEDROCK_REGIONS = ("global.", "us.", "eu.", "apac.", "jp.", "au.", "us-gov.")
"""Cross-region inference profile prefixes of Bedrock ids (``us.anthropic.claude-...``)."""
_BEDROCK_VENDORS = {"anthropic": "anthropic", "meta": "meta", "amazon": "amazon", "mistral": "mistral",
                    "cohere": "cohere", "ai21": "ai21", "deepseek": "deepseek", "openai": "openai",
                    "qwen": "alibaba", "writer": "writer"}
"""A Bedrock id's vendor prefix and its family: the family when the model's own name names no
line (``deepseek.r1-v1:0``)."""
_BEDROCK_FORMATS = {"llama": "meta", "deepseek_r1": "deepseek", "qwen2": "alibaba", "qwen3": "alibaba",
                    "nova": "amazon", "nova-2": "amazon"}
"""litellm's ``bedrock/<format>/arn:...`` for an imported or custom model whose ARN is opaque:
the model format litellm is told, read as the family of the base model."""


def model_name(name: str) -> str:
    """The model's own name: lower case, without provider route or organisation prefix, a
    fine-tune's ``ft:`` wrapping, Bedrock region and vendor prefixes (``us.anthropic.claude-...``)
    or a tag (``llama3.1:8b``, ``...-v1:0``, a fine-tune's ``:org:suffix:id``)."""
    return _read(name)[1]


def _read(name: str) -> tuple[str | None, str]:
    """(Bedrock vendor or None, the model's own name) of a model string."""
    lowered = name.strip().lower()
    _, arn, resource = lowered.partition("arn:aws")
    if arn:  # arn:aws[-partition]:bedrock:<region>:<account>:<type>/<id>, custom-model/<base model>/<id>
        parts = resource.split(":", 4)[-1].split("/")[1:]
        own = parts[0] if parts else ""
    else:
        own = lowered.rsplit("/", 1)[-1]
    own = own.removeprefix("ft:")
    for region in _BEDROCK_REGIONS:
        if own.startswith(region) and own.removeprefix(region).partition(".")[0] in _BEDROCK_VENDORS:
            own = own.removeprefix(region)
            break
    vendor, dot, rest = own.partition(".")
    if dot and vendor in _BEDROCK_VENDORS:
        return vendor, rest.split(":", 1)[0]
    return None, own.split(":", 1)[0]


def model_family(name: str, *, overrides: Mapping[str, str] | None = None) -> str | None:
    """The family of a model string or system label, or None when no pattern knows it.

    Args:
        overrides: ``{name: family}`` checked first, on the full name and on the model's own
            name (e.g. ``{"towerinstruct-7b-v0.2": "meta"}``).

    Example: ``model_family("openai/gpt-4o-mini") == model_family("gpt4o") == "openai"``.
    """
    vendor, own = _read(name)
    for key in (name, name.strip().lower(), own):
        if overrides and key in overrides:
            return overrides[key]
    for family, pattern in FAMILIES:
        if re.match(pattern, own):
            return family
    if vendor is not None:
        return _BEDROCK_VENDORS[vendor]
    route, arn, _ = name.strip().lower().partition("arn:aws")
    return _BEDROCK_FORMATS.get(route.rstrip("/").rsplit("/", 1)[-1]) if arn else None


def family_or_name(name: str) -> str:
    """The family of a model string, or for one no pattern knows its own name (so that
    ``hosted_vllm/vicuna-13b`` is of the family of the system ``vicuna-13b``, and of no other)."""
    return model_family(name) or model_name(name)
