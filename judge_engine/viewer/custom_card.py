"""A custom judge's verdict (``protocol: custom``) laid out from its declared fields: the data of
its card (``kind: custom``; :file:`static/custom.js` draws it).

The declarations are the run's own (``protocol_options.fields`` in ``run.json``: each field's
type, range, choices, ``score_map``, the item field its quotes come from); the fields are shown
in the order the verdict holds them, which is the order the config declared them. A verdict
whose judge the manifest does not know is laid out from its values alone (a number, a boolean,
a list of quotes, else text).

Quotes (``spans`` fields) are located again here with :func:`judge_engine.util.text.locate` in the
item field they quote, as the protocol located them, and the quoted texts travel as segments
(:mod:`judge_engine.viewer.marks`) whose marks index the card's ``spans``; a
quote found in no text is listed apart. When the dataset is gone, the prompt as sent stands in
for the quoted field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from judge_engine.errors import DatasetError
from judge_engine.protocols.custom import candidates_of
from judge_engine.protocols.custom_fields import LABELS
from judge_engine.rundir.records import JudgeEntry
from judge_engine.viewer.marks import find, segments


def custom(verdict: Mapping[str, Any], item: Mapping[str, Any], entry: JudgeEntry | None) -> dict[str, Any]:
    """The card of one custom verdict: ``fields`` (in order, each with its type and value),
    ``spans`` (every quote: its field, where it was found and how), ``texts`` (each quoted item
    field as segments), ``candidates`` (in the order shown, each with the fields that picked it),
    ``score`` (the ``score`` option: a field's name or an expression)."""
    options = entry.protocol_options if entry is not None else {}
    declared: Mapping[str, Any] = options.get("fields") or {}
    rule = options.get("score")
    fields: list[dict[str, Any]] = []
    spans: list[dict[str, Any]] = []
    texts: dict[str, tuple[str, list[tuple[int, int, int]]]] = {}
    for name in _names(verdict, declared):
        found = declared.get(name)
        spec: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        kind = str(spec.get("type") or _inferred(verdict.get(name)))
        row: dict[str, Any] = {"name": name, "type": kind, "description": spec.get("description"),
                               "headline": name == rule}
        value = verdict.get(name)
        if kind == "spans":
            row.update(of=spec.get("of"), spans=_place(name, spec.get("of"), value, item, spans, texts))
        elif kind == "candidate":
            picked = verdict.get(f"{name}_id")
            row.update(value=value, id=picked, number=(spec.get("score_map") or {}).get(picked))
        elif kind == "label":
            score_map = spec.get("score_map") or {}
            row.update(value=value, choices=list(spec.get("choices") or score_map), number=score_map.get(value))
        elif kind in ("integer", "number"):
            row.update(value=value, low=spec.get("min"), high=spec.get("max"))
        else:
            row.update(value=value)
        fields.append(row)
    return {"kind": "custom", "fields": fields, "spans": spans,
            "texts": [{"field": name, "segments": segments(text, marks)} for name, (text, marks) in texts.items()],
            "candidates": _candidates(verdict, item, options, fields),
            "score": {"rule": rule, "expression": bool(rule) and rule not in declared}}


def _names(verdict: Mapping[str, Any], declared: Mapping[str, Any]) -> list[str]:
    """The fields, in the verdict's order; the keys it holds for candidates (``<name>_id``, the
    ``order`` shown) are shown with them, not as fields."""
    candidates = {name for name, spec in declared.items() if isinstance(spec, Mapping) and spec.get("type") == "candidate"}
    helpers = {"order", *(f"{name}_id" for name in candidates)}
    if not declared:
        helpers = {"order"} | {k for k in verdict if k.endswith("_id") and k.removesuffix("_id") in verdict}
    found = [name for name in verdict if name not in helpers]
    return found + [name for name in declared if name not in verdict]


def _inferred(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list) and all(isinstance(v, Mapping) and "text" in v for v in value):
        return "spans"
    return "text"


def _place(name: str, of: Any, value: Any, item: Mapping[str, Any], spans: list[dict[str, Any]],
           texts: dict[str, tuple[str, list[tuple[int, int, int]]]]) -> list[int]:
    """Locate each quote of spans field ``name`` in the item field it quotes (``of``; the prompt
    when the dataset is gone; every text field in turn when the judge is not in the manifest);
    the indices of its quotes in ``spans``."""
    sources = _sources(of, item)
    if of and sources:  # the quoted text is shown even when the judge quoted nothing from it
        texts.setdefault(sources[0], (str(item[sources[0]]), []))
    indices = []
    for quote in value if isinstance(value, list) else []:
        text = str(quote.get("text") or "") if isinstance(quote, Mapping) else str(quote)
        where, how = "none", "none"
        for field in sources:
            body = str(item[field])
            how, found = find(text, body)
            if found is not None:
                where = field
                texts.setdefault(field, (body, []))[1].append((found[0], found[1], len(spans)))
                break
        indices.append(len(spans))
        spans.append({"field": name, "text": text, "where": where, "match": how})
    return indices


def _sources(of: Any, item: Mapping[str, Any]) -> list[str]:
    """The item fields a spans field's quotes are looked for in, in turn."""
    if of:
        if isinstance(item.get(of), str):
            return [str(of)]
        return ["prompt"] if isinstance(item.get("prompt"), str) else []
    return [name for name, value in item.items() if isinstance(value, str) and name != "id"]


def _candidates(verdict: Mapping[str, Any], item: Mapping[str, Any], options: Mapping[str, Any],
                fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The candidates in the order shown (labels ``A``, ``B``...), each with the candidate fields
    that picked it."""
    order = verdict.get("order")
    if not isinstance(order, list):
        return []
    texts: dict[str, str] = {}
    if options.get("candidates"):
        try:
            texts = dict(candidates_of(item, str(options["candidates"])))
        except DatasetError:
            pass
    return [{"label": LABELS[i] if i < len(LABELS) else str(i), "id": str(cid), "text": texts.get(str(cid), ""),
             "picked_by": [f["name"] for f in fields if f["type"] == "candidate" and f.get("id") == cid]}
            for i, cid in enumerate(order)]
