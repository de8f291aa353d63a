"""Each protocol's verdict, laid out the way its users read it: the data of a task's card in
the item view (the page draws it, :file:`static/cards.js`; nothing here is HTML).

Texts with marked spans travel as segments, their quotes found server-side
(:mod:`judge_engine.viewer.marks`), so the page never searches text.

======================================  ======================================================
protocol                                card (``kind``)
======================================  ======================================================
``gemba-mqm``, ``gemba-mqm-literary``   ``mqm``: source and target with the error spans (target
                                        first, as the protocol looks), by severity; quoted spans
                                        found in neither listed apart; literary: the penalty per
                                        aspect and the sentence count
``novel-spans``, ``nonpragmatic-spans`` ``spans``: the passage with each expression (exact /
                                        normalised / not found) and its justification
``prometheus-absolute``                 ``rubric``: feedback and score against the rubric
``prometheus-relative``                 ``pair``: both responses, the winner in this order
``ttct``                                ``ttct``: the twelve questions in their dimensions
``bws``                                 ``bws``: candidates as shown, best and worst, the seed
``cdat``, ``dat``                       ``words``: the cue, each word valid or dropped and why
``custom``                              ``custom``: the declared fields, quotes highlighted in
                                        the text they quote (:mod:`.custom_card`)
``jury`` (an outcome of outcomes)       ``jury``: the decision, each juror's vote and its task
                                        (:mod:`.composed`: such cards name their ``parts``)
anything else                           ``verdict``: the verdict as JSON text
======================================  ======================================================
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from judge_engine.errors import DatasetError
from judge_engine.protocols.bws import LABELS, candidates_of
from judge_engine.protocols.prometheus_rubrics import coerce_rubric
from judge_engine.protocols.ttct import DIMENSIONS, REVERSED, TTCTVerdict
from judge_engine.rundir.records import JudgeEntry, OutcomeRecord
from judge_engine.util import cascade_words
from judge_engine.util.jsonio import pretty
from judge_engine.viewer.composed import COMPOSED
from judge_engine.viewer.custom_card import custom
from judge_engine.viewer.marks import Segments, find, segments

__all__ = ["Segments", "card", "segments"]

Card = Callable[[OutcomeRecord, Mapping[str, Any], JudgeEntry | None], dict[str, Any] | None]
"""How a protocol's card is made: from the outcome, its item and the manifest's entry of its judge."""


def card(outcome: OutcomeRecord, item: Mapping[str, Any], entry: JudgeEntry | None) -> dict[str, Any]:
    """The card of one task: what its verdict says, on its item's text."""
    if not outcome.verdict:
        return {"kind": "none"}
    composed = COMPOSED.get(outcome.protocol)
    if composed is not None:
        return composed(outcome)
    build = PROTOCOLS.get(outcome.protocol)
    shown = build(outcome, item, entry) if build is not None else None
    return shown if shown is not None else {"kind": "verdict", "json": pretty(outcome.verdict)}


def cascade(verdict: Mapping[str, Any], code: str | None) -> dict[str, Any]:
    """A cascade's line: the stage that answered (or why none did), and every stage asked, its
    confidence against its threshold (:mod:`judge_engine.trust.cascade.outcome`), with what
    happened there (``then``) and the numbers as the command line writes them (``*_text``), in
    the cascade's words (:mod:`judge_engine.util.cascade_words`)."""
    steps = [a for a in verdict.get("asked") or [] if isinstance(a, Mapping)]
    asked = [_asked(a, last_of_abstained=code == "abstained" and i == len(steps) - 1) for i, a in enumerate(steps)]
    confidence, threshold = cascade_words.compared(_number(verdict.get("confidence")), _number(verdict.get("threshold")))
    return {"kind": "cascade", "stage": verdict.get("stage"), "prediction": verdict.get("prediction"),
            "confidence": verdict.get("confidence"), "threshold": verdict.get("threshold"),
            "confidence_text": confidence, "threshold_text": threshold,
            "held_at": verdict.get("held_at"), "code": code, "asked": asked,
            "not_asked": [str(s) for s in verdict.get("not_asked") or []], "not_asked_word": cascade_words.NOT_ASKED}


def _asked(step: Mapping[str, Any], *, last_of_abstained: bool) -> dict[str, Any]:
    confidence, threshold = cascade_words.compared(_number(step.get("confidence")), _number(step.get("threshold")))
    route = str(step.get("route"))
    return {"stage": str(step.get("stage")), "route": route, "then": cascade_words.then_word(route, last_of_abstained=last_of_abstained),
            "prediction": step.get("prediction"), "confidence": step.get("confidence"),
            "threshold": step.get("threshold"), "confidence_text": confidence, "threshold_text": threshold,
            "code": step.get("code")}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(item: Mapping[str, Any], name: str) -> str:
    value = item.get(name)
    return "" if value is None else str(value)


def mqm(verdict: Mapping[str, Any], item: Mapping[str, Any], literary: Mapping[str, float] | None) -> dict[str, Any]:
    """Error spans in the target (else the source) by severity; spans found in neither apart."""
    source, target = _text(item, "source"), _text(item, "target")
    if not source and not target:  # the dataset is gone: the prompt as sent stands in for the target
        target = _text(item, "prompt")
    errors: list[dict[str, Any]] = []
    in_target: list[tuple[int, int, int]] = []
    in_source: list[tuple[int, int, int]] = []
    for index, error in enumerate(verdict.get("errors") or []):
        span = str(error.get("span") or "")
        where, how, found = "none", "none", None
        for name, text, marks in (("target", target, in_target), ("source", source, in_source)):
            how, found = find(span, text)
            if found is not None:
                where = name
                marks.append((found[0], found[1], index))
                break
        errors.append({"severity": str(error.get("severity") or ""), "category": str(error.get("category") or ""),
                       "span": span, "where": where, "match": how})
    view: dict[str, Any] = {"kind": "mqm", "source": segments(source, in_source), "target": segments(target, in_target),
                            "errors": errors, "source_lang": _text(item, "source_lang"),
                            "target_lang": _text(item, "target_lang")}
    if literary:
        sentences = literary.get("sentences") or 1.0
        view["literary"] = {"sentences": sentences, "aspects": [
            {"aspect": name, "per_sentence": value, "penalty": round(-value * sentences, 6)}
            for name, value in literary.items() if name != "sentences"]}
    return view


def close_reading(verdict: Mapping[str, Any], item: Mapping[str, Any]) -> dict[str, Any]:
    passage = _text(item, "passage") or _text(item, "prompt")
    expressions, spans = [], []
    for index, expression in enumerate(verdict.get("expressions") or []):
        text = str(expression.get("expression") or "")
        how, found = find(text, passage)
        if found is not None:
            spans.append((found[0], found[1], index))
        expressions.append({"expression": text, "justification": str(expression.get("justification") or ""),
                            "match": how})
    return {"kind": "spans", "passage": segments(passage, spans), "expressions": expressions}


def rubric(verdict: Mapping[str, Any], item: Mapping[str, Any], entry: JudgeEntry | None) -> dict[str, Any]:
    """Feedback and score against the rubric's score descriptions (the item's rubric, else the
    judge's)."""
    view: dict[str, Any] = {"kind": "rubric", "score": verdict.get("score"), "feedback": str(verdict.get("feedback") or ""),
                            "instruction": _text(item, "instruction"), "response": _text(item, "response"),
                            "reference": _text(item, "reference_answer"), "criteria": "", "descriptions": []}
    source = item.get("rubric") or (entry.protocol_options.get("rubric") if entry is not None else None)
    if source:
        try:
            found = coerce_rubric(source)
        except ValueError:
            return view
        low, high = found.bounds
        view.update(criteria=found.criteria, low=low, high=high,
                    descriptions=[{"score": s, "text": t} for s, t in sorted(found.descriptions.items())])
    return view


REVERSED_NOTE = "(reverse-scored)"
"""How Q2's docstring ends; the card says it from the question's ``reversed`` flag instead."""


@cache
def _questions() -> dict[str, str]:
    """TTCT's question texts, from the docstrings under :class:`TTCTVerdict`'s fields (their one
    definition), or the ids alone if the source cannot be read."""
    try:
        tree = ast.parse(inspect.getsource(TTCTVerdict))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    found: dict[str, str] = {}
    for node, after in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            text = " ".join(after.value.value.split())
            found[node.target.id] = text.removesuffix(REVERSED_NOTE).rstrip()  # the card marks reversed ones itself
    return found


def ttct(verdict: Mapping[str, Any], item: Mapping[str, Any], scores: Mapping[str, float]) -> dict[str, Any]:

    texts = _questions()
    return {"kind": "ttct", "text": _text(item, "text") or _text(item, "prompt"), "topic": _text(item, "topic"),
            "dimensions": [{"name": name, "mean": scores.get(name), "questions": [
                {"id": q, "text": texts.get(q, ""), "rating": verdict.get(q), "oriented": scores.get(q),
                 "reversed": q in REVERSED} for q in questions]} for name, questions in DIMENSIONS.items()]}


def bws(verdict: Mapping[str, Any], item: Mapping[str, Any], variant: str) -> dict[str, Any]:
    """The candidates in the order shown (labels A, B...), best and worst marked."""
    try:
        texts = dict(candidates_of(item))
    except DatasetError:
        texts = {}
    shown = [{"label": LABELS[i], "id": cid, "text": texts.get(cid, ""), "best": cid == verdict.get("best_id"),
              "worst": cid == verdict.get("worst_id")} for i, cid in enumerate(verdict.get("order") or [])]
    return {"kind": "bws", "source": _text(item, "source"), "shown": shown, "seed": verdict.get("seed"),
            "order": variant}


def words(verdict: Mapping[str, Any], item: Mapping[str, Any], scores: Mapping[str, float]) -> dict[str, Any]:
    """The list as the method read it, in order: each word valid (scored among the first seven)
    or dropped and why (a repeated word is valid once, then a ``duplicate``); tokens dropped
    before they became words (``no_letters``, ``beyond_ten``) after them."""
    valid = list(verdict.get("valid_words") or [])
    dropped = [(str(d.get("word")), str(d.get("reason"))) for d in verdict.get("dropped") or []]
    listed, seen = [], set()
    for word in verdict.get("words") or []:
        if word in valid and word not in seen:
            seen.add(word)
            listed.append({"word": word, "valid": True, "scored": valid.index(word) < 7, "reason": ""})
            continue
        reason = next((r for w, r in dropped if w == word), "")
        if (word, reason) in dropped:
            dropped.remove((word, reason))
        listed.append({"word": word, "valid": False, "scored": False, "reason": reason})
    listed += [{"word": w, "valid": False, "scored": False, "reason": r} for w, r in dropped]
    return {"kind": "words", "cue": _text(item, "cue"), "words": listed, "lexicon": verdict.get("lexicon"),
            "scores": {k: v for k, v in scores.items() if k in ("novelty", "appropriateness")}}


def _pair(verdict: Mapping[str, Any], item: Mapping[str, Any], order: str) -> dict[str, Any]:
    return {"kind": "pair", "instruction": _text(item, "instruction"), "response_a": _text(item, "response_a"),
            "response_b": _text(item, "response_b"), "winner": verdict.get("winner"),
            "feedback": str(verdict.get("feedback") or ""), "order": order or "AB"}


PROTOCOLS: dict[str, Card] = {
    "gemba-mqm": lambda o, item, _: mqm(o.verdict or {}, item, None),
    "gemba-mqm-literary": lambda o, item, _: mqm(o.verdict or {}, item, o.scores),
    "novel-spans": lambda o, item, _: close_reading(o.verdict or {}, item),
    "nonpragmatic-spans": lambda o, item, _: close_reading(o.verdict or {}, item),
    "prometheus-absolute": lambda o, item, entry: rubric(o.verdict or {}, item, entry),
    "prometheus-relative": lambda o, item, _: _pair(o.verdict or {}, item, o.variant),
    "ttct": lambda o, item, _: ttct(o.verdict or {}, item, o.scores),
    "bws": lambda o, item, _: bws(o.verdict or {}, item, o.variant),
    "cdat": lambda o, item, _: words(o.verdict or {}, item, o.scores) if "words" in (o.verdict or {}) else None,
    "dat": lambda o, item, _: words(o.verdict or {}, item, o.scores) if "words" in (o.verdict or {}) else None,
    "custom": lambda o, item, entry: custom(o.verdict or {}, item, entry),
    "cascade": lambda o, _item, _entry: cascade(o.verdict or {}, o.reason_code),
}
"""Protocol -> its card (None: the verdict as JSON text); a protocol's card goes here."""
