"""Model families: which vendor's line a model or a system name belongs to.

One definition for everything that asks "is this judge grading its own family's output?": the
self-preference figure of ``stats``, ``plan``'s warning and the ``self_preference: forbid`` rule
(:mod:`judge_engine.self_preference`). A name
is read as a litellm model string or a system label: the provider route and any organisation
prefix are dropped (``openai/gpt-4o-mini`` -> ``gpt-4o-mini``, ``together_ai/meta-llama/
Llama-3-70b`` -> ``llama-3-70b``), then the first pattern that matches the start of the rest
names the family. Families are vendors' model lines, coarse on purpose: ``gpt-4o-mini`` judging
``gpt-4o-2024-08-06`` (or LitEval's system label ``gpt4o``) is one family, ``openai``; Gemini
and Gemma are both ``google``. Fine-tunes named after themselves (TowerInstruct, Prometheus) are
not traced to their base model: name their family explicitly where it matters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

FAMILIES: tuple[tuple[str, str], ...] = (
    ("openai", r"(gpt|chat[-_]?gpt|o[1-9](-|$)|text-davinci|davinci)"),
    ("anthropic", r"claude"),
    ("google", r"(gemini|gemma|palm|chat-bison|text-bison)"),
    ("meta", r"(meta-llama|llama|codellama)"),
    ("alibaba", r"(qwen|qwq)"),
    ("mistral", r"(mistral|mixtral|codestral|ministral|magistral|pixtral)"),
    ("deepseek", r"deepseek"),
    ("cohere", r"(command|c4ai|aya)"),
    ("microsoft", r"phi-?\d"),
    ("xai", r"grok"),
)
"""(family, pattern matched at the start of the model's own name), first match wins."""


_BEDROCK_VENDORS = ("anthropic.", "meta.", "amazon.", "mistral.", "cohere.", "ai21.", "us.", "eu.")


def model_name(name: str) -> str:
    """The model's own name: lower case, without provider route or organisation prefix, a
    Bedrock vendor prefix (``anthropic.claude-...``) or a tag (``llama3.1:8b``, ``...-v1:0``)."""
    own = name.strip().lower().rsplit("/", 1)[-1]
    while own.startswith(_BEDROCK_VENDORS):
        own = own.split(".", 1)[1]
    return own.split(":", 1)[0]


def model_family(name: str, *, overrides: Mapping[str, str] | None = None) -> str | None:
    """The family of a model string or system label, or None when no pattern knows it.

    Args:
        overrides: ``{name: family}`` checked first, on the full name and on the model's own
            name (e.g. ``{"towerinstruct-7b-v0.2": "meta"}``).

    Example: ``model_family("openai/gpt-4o-mini") == model_family("gpt4o") == "openai"``.
    """
    own = model_name(name)
    for key in (name, name.strip().lower(), own):
        if overrides and key in overrides:
            return overrides[key]
    for family, pattern in FAMILIES:
        if re.match(pattern, own):
            return family
    return None


def family_or_name(name: str) -> str:
    """The family of a model string, or for one no pattern knows its own name (so that
    ``hosted_vllm/vicuna-13b`` is of the family of the system ``vicuna-13b``, and of no other)."""
    return model_family(name) or model_name(name)
