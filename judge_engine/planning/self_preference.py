"""Self-preference: a judge grading the output of its own model family.

Judges rate their own family's text higher (Panickssery et al. 2024, "LLM Evaluators Recognize
and Favor Their Own Generations"; Zheng et al. 2023 on GPT-4 and Claude as judges). An item's
``system`` field names the system(s) behind it: a string, or a list (one per candidate);
candidates given as ``{id, text, system}`` name theirs too. A judge whose model family is one of
those systems' families is flagged by ``plan`` (``self_preference: warn``, the default) and, with
``self_preference: forbid``, does not judge those items: each such task is recorded unscored,
reason code ``self_preference``, without a call, so every task still ends in ``outcomes.jsonl``
once, the counts say how many were held back, and ``resume --retry self_preference`` after
switching to ``allow`` judges them.

**The family of a model** is :func:`judge_engine.util.families.model_family`, the one definition
the statistics use too: the vendor's model line, read from the model's own name (route,
organisation and Bedrock prefixes dropped, a fine-tune read as its base model), so
``openai/gpt-4o-mini``, ``gpt-4o-2024-08-06``, ``gpt-4-turbo``, ``chatgpt-4o-latest`` and
``openai/ft:gpt-4o-mini-2024-07-18:org::abc123`` are all ``openai``, ``claude-haiku-4-5`` and
``bedrock/us.anthropic.claude-3-5-sonnet-20240620-v1:0`` are ``anthropic``. Coarse on purpose:
siblings of one vendor share training data and house style, which is where the preference comes
from. A model no pattern knows is a family of its own name (``hosted_vllm/vicuna-13b`` judging
``vicuna-13b`` is flagged).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from judge_engine.util.families import family_or_name


@lru_cache(maxsize=4096)  # asked per task of a forbidding judge, of a few distinct strings
def model_family(model: str) -> str:
    """The family a judge or a system is compared by: :func:`judge_engine.util.families.family_or_name`."""
    return family_or_name(model)


def item_systems(item: Mapping[str, Any]) -> list[str]:
    """The systems behind an item: its ``system`` field (a string or a list of them) and the
    ``system`` of any candidate given as ``{id, text, system}``."""
    return [str(system) for system in _systems(item) if str(system).strip()]


def _systems(item: Mapping[str, Any]) -> Iterator[Any]:
    value = item.get("system")
    if isinstance(value, list):
        yield from (v for v in value if v is not None)
    elif value is not None:
        yield value
    for other in item.values():
        if isinstance(other, list):
            yield from (entry["system"] for entry in other if isinstance(entry, dict) and entry.get("system"))


def own_systems(model: str, item: Mapping[str, Any]) -> list[str]:
    """The item's systems of ``model``'s family (empty when none)."""
    family = model_family(model)
    return [system for system in item_systems(item) if model_family(system) == family]


def recusal(model: str, rule: str, item: Mapping[str, Any]) -> str | None:
    """Why a judge (``model``, its ``self_preference`` rule) must not judge ``item``, or None."""
    if rule != "forbid":
        return None
    own = own_systems(model, item)
    if not own:
        return None
    return (f"not judged: self_preference is forbid and {model} is of the family ({model_family(model)}) "
            f"of the item's system {', '.join(sorted(set(own)))}")
