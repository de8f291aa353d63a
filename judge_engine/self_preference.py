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

**The family of a model string** (:func:`model_family`) is the model line with everything that
names a size, a release or a route taken off, so that ``openai/gpt-4o-mini`` and
``gpt-4o-2024-08-06`` are both ``gpt-4o``:

1. lower-cased; the route dropped (everything up to the last ``/``: ``openai/``, ``azure/``,
   ``openrouter/anthropic/``, ``together_ai/meta-llama/``), then a Bedrock vendor prefix
   (``anthropic.``, ``meta.``...) and a tag after ``:`` (``llama3.1:8b``, ``...-v1:0``);
2. split into words at ``-``, ``_``, ``.``, spaces, and between a leading name and its version
   (``llama3`` -> ``llama 3``, ``qwen2.5`` -> ``qwen 2 5``); ``chatgpt`` is ``gpt``;
3. a date stamp (``2024-08-06``, ``20241022``, ``0613``), or a ``v0.1`` after the first two
   words, ends the name: it and what follows are a release;
4. size and variant words are dropped: ``mini``, ``nano``, ``turbo``, ``haiku``, ``sonnet``,
   ``opus``, ``flash``, ``pro``, ``lite``, ``small``, ``medium``, ``large``, ``instruct``,
   ``chat``, ``latest``, ``preview``, ``exp``, ``it``, parameter counts (``8b``, ``70b``,
   ``8x7b``, ``a3b``) and 3-digit revisions (``gemini-1.5-flash-002``).

So ``claude-3-5-haiku-latest`` and ``anthropic/claude-3-5-sonnet-20241022`` are ``claude-3-5``,
``gemini/gemini-2.0-flash`` and ``gemini-2.0-pro-exp`` are ``gemini-2-0``, ``Llama-3.1-8B-Instruct``
and ``ollama_chat/llama3.1`` are ``llama-3-1``, ``gpt-4-turbo`` and ``gpt-4-0613`` are ``gpt-4``
(not ``gpt-4o``). What is compared is the family; sizes within it share their training data and
style, which is where the preference comes from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

_SIZE_WORDS = frozenset({
    "mini", "nano", "micro", "turbo", "haiku", "sonnet", "opus", "flash", "pro", "ultra", "lite", "small",
    "medium", "large", "tiny", "base", "instruct", "chat", "latest", "preview", "exp", "experimental", "it", "hf",
})
_DATE = re.compile(r"^(?:\d{8}|\d{4})$")
_PARAMETERS = re.compile(r"^(?:\d+(?:x\d+)?[bm]|a\d+b|\d{3})$")
_BEDROCK_VENDORS = ("anthropic.", "meta.", "amazon.", "mistral.", "cohere.", "ai21.", "us.", "eu.")


@lru_cache(maxsize=4096)  # asked per task of a forbidding judge, of a few distinct strings
def model_family(model: str) -> str:
    """The family of a model string (see the module docstring), e.g. ``gpt-4o``."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    while name.startswith(_BEDROCK_VENDORS):
        name = name.split(".", 1)[1]
    name = name.split(":", 1)[0]
    name = re.sub(r"(\d{4})-(\d{2})-(\d{2})", r"\1\2\3", name)  # one word for an ISO date
    words = [w for w in re.split(r"[-_.\s]+", name) if w]
    if words and (glued := re.match(r"^([a-z]+)(\d.*)$", words[0])):  # llama3 -> llama 3
        words[:1] = [glued.group(1), glued.group(2)]
    words = ["gpt" if w == "chatgpt" else w for w in words]
    family: list[str] = []
    for index, word in enumerate(words):
        if (_DATE.match(word) and family) or (index >= 2 and re.fullmatch(r"v\d+", word)):
            break  # a release: 2024-08-06, -v0.1
        if word in _SIZE_WORDS or _PARAMETERS.match(word):
            continue
        family.append(word)
    return "-".join(family) or name


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
