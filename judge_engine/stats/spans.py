"""Span agreement: close-reading expression F1 and MQM error-span agreement.

The close-reading matcher (Death of the Novel(ty)): transliterate both strings to ASCII with
unidecode (:func:`judge_engine.util.text.transliterate`, nothing else folded); they match when one is
a case-sensitive substring of the other, or when their normalised indel similarity
(``rapidfuzz.fuzz.ratio / 100``) is at least 0.9. This is the authors' rule and reproduces their
published F1: do not swap in :func:`judge_engine.util.text.fold`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge_engine.stats.agreement import cohen_kappa
from judge_engine.stats.correlation import wilson_interval
from judge_engine.util.text import transliterate


def expressions_match(a: str, b: str, *, threshold: float = 0.9) -> bool:
    """The close-reading matcher between two expressions (see the module docstring).

    An empty string is a substring of everything; empty expressions therefore always match,
    as in the authors' code. Filter them out beforehand if that is not wanted.
    """
    from rapidfuzz import fuzz

    x, y = transliterate(a), transliterate(b)
    return x in y or y in x or fuzz.ratio(x, y) / 100 >= threshold


@dataclass(frozen=True)
class SpanScores:
    """Pooled precision, recall and F1, with the counts and Wilson intervals for P and R."""

    tp: int
    """Predicted expressions that match some human expression of their passage."""
    fp: int
    """Predicted expressions that match none."""
    fn: int
    """Human expressions that match no predicted expression of their passage."""
    precision: float
    recall: float
    f1: float
    precision_ci: tuple[float, float]
    recall_ci: tuple[float, float]


def span_prf(
    predicted: Mapping[Any, Sequence[str]],
    reference: Mapping[Any, Sequence[str]],
    *,
    threshold: float = 0.9,
) -> SpanScores:
    """Close-reading F1, pooled over passages, counted exactly as the authors do.

    The evaluated passages are the keys of ``predicted`` (give a passage where the judge found
    nothing an empty list); reference expressions of other passages are ignored. Per passage,
    each predicted expression is a TP if it matches any reference expression, else an FP; each
    reference expression (not de-duplicated across annotators) matching no prediction is an FN.
    Recall is therefore (matched predictions) / (matched predictions + unmatched references).

    Example: predicted {p: ["a red sky", "zzz"]}, reference {p: ["red sky", "blue sea"]}:
    TP 1 ("a red sky" contains "red sky"), FP 1, FN 1 ("blue sea") -> P = R = F1 = 0.5.

    Returns:
        :class:`SpanScores`; P, R, F1 are NaN when their denominators are 0.
    """
    tp = fp = fn = 0
    for key, preds in predicted.items():
        refs = list(reference.get(key, ()))
        for p in preds:
            if any(expressions_match(p, r, threshold=threshold) for r in refs):
                tp += 1
            else:
                fp += 1
        fn += sum(
            1 for r in refs if not any(expressions_match(p, r, threshold=threshold) for p in preds)
        )
    precision = tp / (tp + fp) if tp + fp else math.nan
    recall = tp / (tp + fn) if tp + fn else math.nan
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else math.nan
    return SpanScores(
        tp,
        fp,
        fn,
        precision,
        recall,
        f1,
        wilson_interval(tp, tp + fp),
        wilson_interval(tp, tp + fn),
    )


@dataclass(frozen=True)
class MqmSpanAgreement:
    """Span match and label match between two MQM annotations of the same segments."""

    n_a: int
    """Error spans in annotation A."""
    n_b: int
    """Error spans in annotation B."""
    matched: int
    """One-to-one matched span pairs (greedy, in order)."""
    span_match: float
    """2 * matched / (n_a + n_b): the share of spans that found a partner (Dice)."""
    label_match: float
    """Among matched pairs, the share with the same label (e.g. category or severity)."""

    @property
    def precision(self) -> float:
        """With A the reference: matched / n_b, the share of B's spans that A also marked."""
        return self.matched / self.n_b if self.n_b else math.nan

    @property
    def recall(self) -> float:
        """With A the reference: matched / n_a, the share of A's spans that B found."""
        return self.matched / self.n_a if self.n_a else math.nan

    @property
    def f1(self) -> float:
        """Harmonic mean of precision and recall: 2m / (n_a + n_b), the span match itself."""
        return self.span_match


def _overlap(x: Any, y: Any) -> bool:
    if isinstance(x, str) and isinstance(y, str):
        return expressions_match(x, y)
    (s1, e1), (s2, e2) = x, y
    return bool(max(s1, s2) < min(e1, e2))


def mqm_span_agreement(
    a: Mapping[Any, Sequence[tuple[Any, Hashable]]],
    b: Mapping[Any, Sequence[tuple[Any, Hashable]]],
) -> MqmSpanAgreement:
    """Span match and label match between two MQM annotations.

    Each annotation maps a segment key to its errors, each error ``(span, label)`` where span is
    either the error text (matched with :func:`expressions_match`) or a ``(start, end)``
    character range (matched when the ranges overlap). Errors are paired one-to-one, greedily in
    order. Segments present in only one annotation count with no partner.

    Example: A {s: [("dog", "major"), ("cat", "minor")]}, B {s: [("the dog", "minor")]}:
    1 match of 3 spans -> span match 2*1/3 = 0.667; labels differ -> label match 0.

    Returns:
        :class:`MqmSpanAgreement`; rates are NaN when undefined (no spans, no matches).
    """
    n_a = sum(len(v) for v in a.values())
    n_b = sum(len(v) for v in b.values())
    matched = same = 0
    for key, errors_a in a.items():
        free = list(b.get(key, ()))
        for span_a, label_a in errors_a:
            hit = next((e for e in free if _overlap(span_a, e[0])), None)
            if hit is not None:
                free.remove(hit)
                matched += 1
                same += hit[1] == label_a
    span_match = 2 * matched / (n_a + n_b) if n_a + n_b else math.nan
    label_match = same / matched if matched else math.nan
    return MqmSpanAgreement(n_a, n_b, matched, span_match, label_match)


def span_char_kappa(
    length: int, spans_a: Sequence[tuple[int, int]], spans_b: Sequence[tuple[int, int]]
) -> float:
    """Character-level Cohen's kappa between two span annotations of one text (LitEval).

    Every character is labelled 1 if inside any ``[start, end)`` span, else 0. As in LitEval's
    script, two annotations that are each constant (e.g. both empty) count as full agreement, 1.
    """
    if length <= 0:
        return math.nan

    def labels(spans: Sequence[tuple[int, int]]) -> list[int]:
        return [int(any(s <= i < e for s, e in spans)) for i in range(length)]

    la, lb = labels(spans_a), labels(spans_b)
    if len(set(la)) == 1 and len(set(lb)) == 1:
        return 1.0
    return cohen_kappa(la, lb)
