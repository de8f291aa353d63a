"""MQM span agreement as ``meta --spans-mqm`` reports it: error annotations read from a run's
verdicts or from table columns, compared with :func:`~judge_engine.stats.spans.mqm_span_agreement`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from judge_engine.stats.meta import POOLED
from judge_engine.stats.runs import Outcome, Run
from judge_engine.stats.sections import Section
from judge_engine.stats.spans import mqm_span_agreement
from judge_engine.stats.tables import Table, TableError, parse_list

MqmErrors = dict[tuple[str, ...], list[dict[str, Any]]]
"""MQM annotations by segment key: each error ``{"span", "severity", "category"}``."""


def mqm_errors(cell: Any) -> list[dict[str, Any]]:
    """The MQM errors of one cell: a list of error objects (``span``, ``severity``,
    ``category``, as a GEMBA-MQM verdict holds them), or a verdict ``{"errors": [...]}``, as a
    real list or JSON text; an empty list for "no error"."""
    if isinstance(cell, str) and cell.strip().startswith("{"):
        try:
            cell = json.loads(cell)
        except json.JSONDecodeError:
            raise TableError(
                f"not an MQM annotation (JSON object expected): {cell[:60]!r}"
            ) from None
    if isinstance(cell, dict):
        cell = cell.get("errors", [])
    return [e for e in parse_list(cell) if isinstance(e, dict)]


def _label(error: dict[str, Any], field: str) -> str:
    value = str(error.get(field) or "").strip().lower()
    return value.split("/")[0].strip() if field == "category" else value


def mqm_span_section(
    reference: MqmErrors,
    judge: MqmErrors,
    *,
    names: tuple[str, str],
    groups: dict[tuple[str, ...], str] | None = None,
) -> Section:
    """MQM span agreement between two annotations of the same segments, per group and pooled.

    Segments annotated on both sides are compared (an empty list is an annotation with no
    error); errors are paired one-to-one by span text (:func:`~.spans.mqm_span_agreement`, the
    close-reading matcher). Precision is the share of the judge's spans the reference also
    marked, recall the share of the reference's spans the judge found, F1 = span match =
    2 matched / (n_reference + n_judge); label match is the share of matched pairs with the same
    severity, and with the same top-level category (``accuracy/mistranslation`` -> accuracy).
    """
    keys = [k for k in reference if k in judge]
    no_span = sum(
        1 for k in keys for e in [*reference[k], *judge[k]] if not str(e.get("span") or "").strip()
    )

    def spans(errors: MqmErrors, key: tuple[str, ...], field: str) -> list[tuple[Any, Any]]:
        return [
            (str(e["span"]), _label(e, field))
            for e in errors[key]
            if str(e.get("span") or "").strip()
        ]

    labels = [groups.get(k, "") for k in keys] if groups else []
    rows = []
    for g in [*dict.fromkeys(labels), POOLED] if groups else [POOLED]:
        chosen = [k for k, lab in zip(keys, labels or [POOLED] * len(keys), strict=True)
                  if g in (lab, POOLED)]  # fmt: skip
        by = {f: mqm_span_agreement({k: spans(reference, k, f) for k in chosen},
                                    {k: spans(judge, k, f) for k in chosen})
              for f in ("severity", "category")}  # fmt: skip
        r = by["severity"]
        rows.append({
            "group": g, "reference": names[0], "judge": names[1], "segments": len(chosen),
            "n_reference": r.n_a, "n_judge": r.n_b, "matched": r.matched, "precision": r.precision,
            "recall": r.recall, "f1": r.f1, "severity_match": r.label_match,
            "category_match": by["category"].label_match,
        })  # fmt: skip
    cols = ["group", "reference", "judge", "segments", "n_reference", "n_judge", "matched",
            "precision", "recall", "f1", "severity_match", "category_match"]  # fmt: skip
    section = Section(
        "mqm_spans", "MQM span agreement (span match = F1; label match among matched)", cols, rows
    )
    if not keys:
        section.rows, section.absent = [], f"no segment annotated in both {names[0]} and {names[1]}"
    elif no_span:
        section.notes.append(
            f"{no_span} errors without a span text are left out (nothing to match)"
        )
    return section


def run_mqm_errors(run: Run, judge: str, *, temperature: float | None = None) -> MqmErrors:
    """A judge's MQM errors per item from a run's verdicts (``verdict["errors"]``): for each item
    its first scored answer (lowest temperature, then repeat), at ``temperature`` if given."""
    chosen: dict[str, Outcome] = {}
    for o in run.outcomes:
        if o.judge != judge or o.status != "scored" or not isinstance(o.verdict, dict):
            continue
        if temperature is not None and o.temperature != temperature:
            continue
        best = chosen.get(o.item_id)
        if best is None or (o.temperature, o.repeat) < (best.temperature, best.repeat):
            chosen[o.item_id] = o
    return {(item,): mqm_errors(o.verdict) for item, o in chosen.items()}


def table_mqm_errors(table: Table, column: str, key: Sequence[str]) -> MqmErrors:
    """MQM errors per key from a table column (rows with the same key are pooled)."""
    table.require(column, *key)
    out: MqmErrors = {}
    for row in table.rows:
        out.setdefault(tuple(str(row.get(k)) for k in key), []).extend(mqm_errors(row.get(column)))
    return out
