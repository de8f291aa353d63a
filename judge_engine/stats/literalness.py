"""Literalness: how much systems' outputs for the same source overlap (LitEval's analysis).

Literal translations of one source resemble each other; free, literary ones diverge. LitEval
compares the systems' outputs with each other: high overlap between machine systems and low
overlap with the human translations is the sign of literal machine output. For each ordered
pair of systems (A, B), A's outputs are scored against B's outputs of the same sources as
references, at corpus level, with sacreBLEU's chrF (character n-grams, language-agnostic: the
default) or BLEU (word n-grams; pick the tokenizer for the target language, e.g. ``zh``). Where
a system has several outputs for a source (several human translators), every pair of outputs is
compared, so the diagonal is the overlap between a system's own outputs.

:func:`literalness_section` is the table ``meta --literalness`` prints. The one home of
``sacrebleu`` (the ``stats`` extra): chrF and BLEU are computed offline, with
sacreBLEU's own tokenizers, nothing downloaded.

References: Popović (2015), "chrF: character n-gram F-score for automatic MT evaluation";
Post (2018), "A Call for Clarity in Reporting BLEU Scores" (sacreBLEU).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from judge_engine.stats.meta import POOLED
from judge_engine.stats.sections import Section
from judge_engine.stats.tables import Table

OverlapMetric = Literal["chrf", "bleu"]
INSTALL_HINT = "pip install 'judge-engine[stats]'"


def available() -> bool:
    """Whether sacreBLEU is installed (the command line names :data:`INSTALL_HINT` if not)."""
    import importlib.util

    return importlib.util.find_spec("sacrebleu") is not None


@dataclass(frozen=True)
class Overlap:
    """One cell of the overlap matrix: ``system``'s outputs against ``other``'s as references."""

    system: str
    other: str
    n_pairs: int
    """Pairs of outputs compared (one per source when each system has one output)."""
    score: float
    """Corpus chrF or BLEU, 0-100; NaN with no pair."""


def corpus_overlap(
    hypotheses: Sequence[str],
    references: Sequence[str],
    *,
    metric: OverlapMetric = "chrf",
    tokenize: str | None = None,
) -> float:
    """Corpus chrF (sacreBLEU defaults: character 6-grams, beta 2) or BLEU of ``hypotheses``
    against one reference each; NaN when empty.

    Raises:
        ValueError: unequal lengths or an unknown metric.
    """
    if len(hypotheses) != len(references):
        raise ValueError("hypotheses and references must have the same length")
    if metric not in ("chrf", "bleu"):
        raise ValueError(f"metric must be chrf or bleu, not {metric!r}")
    if not hypotheses:
        return math.nan
    from sacrebleu.metrics.bleu import BLEU
    from sacrebleu.metrics.chrf import CHRF

    scorer = CHRF() if metric == "chrf" else BLEU(tokenize=tokenize)
    return float(scorer.corpus_score(list(hypotheses), [list(references)]).score)


def _pairs(
    outputs: Mapping[Any, Mapping[str, Sequence[str]]], a: str, b: str
) -> Iterable[tuple[str, str]]:
    for by_system in outputs.values():
        left, right = by_system.get(a, ()), by_system.get(b, ())
        if a == b:
            yield from ((x, y) for i, x in enumerate(left) for j, y in enumerate(right) if i != j)
        else:
            yield from itertools.product(left, right)


def overlap_matrix(
    outputs: Mapping[Any, Mapping[str, Sequence[str]]],
    *,
    metric: OverlapMetric = "chrf",
    tokenize: str | None = None,
) -> list[Overlap]:
    """Every ordered pair of systems (the diagonal included), in first-seen system order.

    Args:
        outputs: ``{source item: {system: [its outputs for that source]}}``.

    Example: one source, A "the cat sat", B "the cat sat": chrF(A, B) = 100; A's diagonal has
    no pair (one output), so NaN.
    """
    systems = list(dict.fromkeys(s for by_system in outputs.values() for s in by_system))
    out = []
    for a, b in itertools.product(systems, repeat=2):
        pairs = list(_pairs(outputs, a, b))
        hyps, refs = [p[0] for p in pairs], [p[1] for p in pairs]
        out.append(
            Overlap(a, b, len(pairs), corpus_overlap(hyps, refs, metric=metric, tokenize=tokenize))
        )
    return out


def literalness_rows(
    outputs: Mapping[Any, Mapping[str, Sequence[str]]],
    *,
    human: Collection[str],
    metric: OverlapMetric = "chrf",
    tokenize: str | None = None,
) -> tuple[list[str], list[dict[str, Any]]]:
    """The overlap matrix as report rows: one row per system with its score against each system
    (columns named after them), its mean against the other machine systems and against the
    human ones (``human``: the human systems' names), and the sources it has outputs for.

    Returns:
        ``(systems, rows)``.
    """
    cells = overlap_matrix(outputs, metric=metric, tokenize=tokenize)
    systems = list(dict.fromkeys(c.system for c in cells))
    rows = []
    for s in systems:
        mine = {c.other: c.score for c in cells if c.system == s}
        machine = [v for o, v in mine.items() if o != s and o not in human and not math.isnan(v)]
        humans = [v for o, v in mine.items() if o != s and o in human and not math.isnan(v)]
        rows.append({
            "system": s, "sources": sum(1 for by in outputs.values() if by.get(s)), **mine,
            "vs_machine": sum(machine) / len(machine) if machine else math.nan,
            "vs_human": sum(humans) / len(humans) if humans else math.nan,
        })  # fmt: skip
    return systems, rows


def literalness_section(
    table: Table,
    *,
    item: str,
    system: str,
    text: str,
    human: Collection[str],
    group: str | None = None,
    metric: OverlapMetric = "chrf",
    tokenize: str | None = None,
) -> Section:
    """LitEval's literalness table (:mod:`~judge_engine.stats.literalness`) per group: each
    system's outputs against each system's outputs for the same source (``item``).

    Without ``group`` the rows are pooled; with it, per group only (pooling target languages
    would compare character n-grams across languages).
    """
    table.require(item, system, text)
    values = [str(v) for v in table.values(group)] if group else [POOLED] * len(table.rows)
    rows: list[dict[str, Any]] = []
    columns: dict[str, None] = {}
    for g in dict.fromkeys(values):
        outputs: dict[str, dict[str, list[str]]] = {}
        for row, v in zip(table.rows, values, strict=True):
            out = row.get(text)
            if v == g and isinstance(out, str) and out.strip():
                by_system = outputs.setdefault(str(row.get(item)), {})
                by_system.setdefault(str(row.get(system)), []).append(out)
        systems, found = literalness_rows(
            outputs, human=set(human), metric=metric, tokenize=tokenize
        )
        columns.update(dict.fromkeys(systems))
        rows += [{"group": g, **r} for r in found]
    name = "chrF" if metric == "chrf" else "BLEU"
    title = (f"Literalness: {name} of each system's outputs (row) against each system's (column) "
             "for the same source")  # fmt: skip
    cols = ["group", "system", "sources", *columns, "vs_machine", "vs_human"]
    section = Section("literalness", title, cols, rows)
    if not rows:
        section.absent = f"no text in column {text!r}"
    return section
