"""Agreement within a panel: Fleiss' and Randolph's kappa across three or more judges that write
one label from a closed set, with percentile bootstrap intervals over items.

**What is shared.** A *categorical field* is a verdict field whose value is one label out of a
set fixed before judging (:class:`CategoricalField`): Prometheus relative grading's ``winner``
(A or B), a custom judge's ``label`` field (its ``choices``) or ``boolean`` field (true or
false), and a pick among the candidates shown (a custom ``candidate`` field, BWS's ``best`` and
``worst``: the candidate's id, k the number shown). Which fields a judge writes is the
protocol's knowledge, so the command passes them in
(:func:`judge_engine.protocols.reports.categorical_fields`). Judges *share* a field when they
write it with the same name and the same set of labels; numbers and grades are not labels here
(alpha and ICC measure them, in the agreement between judges and the jury sections).

**Units.** A unit is one item, variant and repeat at one temperature: the judges are the raters
of each unit. Fleiss' kappa needs the same raters on every unit, so a unit some judge of the
panel left without a label (unscored, or not judged) is left out and counted (``incomplete``).

**Panels.** Per field and temperature: every judge that writes the field (when 3 or more), and
each jury whose 3+ jurors all write it, when its jurors are not that whole set.

**Figures.** ``agreement``: P-bar, the share of agreeing judge pairs averaged over units;
``fleiss_kappa`` (Fleiss 1971): (P-bar - P_e) / (1 - P_e), P_e the sum of the squared shares of
the labels over all ratings; ``randolph_kappa`` (Randolph 2005): (P-bar - 1/k) / (1 - 1/k), k
the labels a judge could choose (the field's set; for picks, the candidates shown, 1/k averaged
over units when it varies). Intervals resample items, an item's variants and repeats together
(:mod:`judge_engine.stats.bootstrap`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from judge_engine.stats._coefficients import category_counts
from judge_engine.stats.bootstrap import (
    Fleiss,
    ItemStatistic,
    Observed,
    Randolph,
    bootstrap_interval,
    point,
)
from judge_engine.stats.runs import Run
from judge_engine.stats.sections import Section

STATISTICS = ("agreement", "fleiss_kappa", "randolph_kappa")
"""The figures of each panel, in the order shown."""
MIN_JUDGES = 3
"""A panel has at least this many judges (two judges: Cohen's kappa, ``meta --compare``)."""
COLUMNS = ["field", "temperature", "judges", "statistic", "value", "ci_low", "ci_high", "units", "incomplete", "k"]
"""The section's columns; each row also names its ``jury`` (empty for the panel of every judge
writing the field), which ``judges`` ends with in brackets."""

Unit = tuple[str, str, int]
"""(item id, variant, repeat): what the judges of a panel each label once."""


@dataclass(frozen=True, slots=True)
class CategoricalField:
    """A verdict field holding one label from a closed set.

    Attributes:
        name: the field as a user knows it (``winner``, ``best``, a custom field's name).
        key: the verdict key holding the label (a pick's candidate id: ``best_id``).
        categories: the labels a judge may write, sorted; empty for a pick among the candidates
            shown, whose number is read from the verdict's ``order``.
    """

    name: str
    key: str
    categories: tuple[str, ...] = ()

    def label(self, verdict: Any) -> str | None:
        """This field's label in a stored verdict (booleans as ``true``/``false``), or None."""
        value = verdict.get(self.key) if isinstance(verdict, Mapping) else None
        if isinstance(value, bool):
            return "true" if value else "false"
        return None if value is None else str(value)

    def choices(self, verdict: Any) -> int | None:
        """k: how many labels the judge could choose from for this verdict."""
        if self.categories:
            return len(self.categories)
        order = verdict.get("order") if isinstance(verdict, Mapping) else None
        return len(order) if isinstance(order, list) and order else None


def panel_coefficients(
    labels: Sequence[Sequence[Hashable]],
    *,
    k: int | Sequence[int] | None = None,
    groups: Sequence[Hashable] | None = None,
    bootstrap: int = 0,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, dict[str, float]]:
    """P-bar, Fleiss' and Randolph's kappa of a units x judges label matrix, with intervals.

    Args:
        labels: one row per unit, one label per judge (every row complete: the caller leaves out
            incomplete units, which Fleiss' design cannot hold).
        k: Randolph's k, one number or one per unit (default: the distinct labels seen).
        groups: each unit's item, resampled together (default: each unit its own item).
        bootstrap: percentile bootstrap resamples (0: no interval).

    Returns:
        ``{name: {"value", "n", "ci_low", "ci_high"}}`` for :data:`STATISTICS`, ``n`` the items
        resampled.

    Raises:
        ValueError: a row with a missing label, ragged rows, or ``k``/``groups`` of another length.
    """
    rows = [list(r) for r in labels]
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for r in rows for v in r):
        raise ValueError("labels: every unit needs a label from every judge (leave out incomplete units)")
    table = category_counts(rows)[0] if rows else np.zeros((0, 0))
    statistics: dict[str, ItemStatistic] = {
        "agreement": Observed(table, groups=groups),
        "fleiss_kappa": Fleiss(table, groups=groups),
        "randolph_kappa": Randolph(table, n_categories=k, groups=groups),
    }
    out = {}
    for name, stat in statistics.items():
        low, high = (bootstrap_interval(stat, n_resamples=bootstrap, confidence=confidence, seed=seed)
                     if bootstrap else (math.nan, math.nan))  # fmt: skip
        out[name] = {"value": point(stat), "n": stat.n_items, "ci_low": low, "ci_high": high}
    return out


@dataclass
class _Labels:
    """One field at one temperature: each unit's label per judge (None: no label) and its k."""

    by_unit: dict[Unit, dict[str, str | None]] = field(default_factory=lambda: defaultdict(dict))
    k: dict[Unit, int] = field(default_factory=dict)


def _collect(run: Run, fields: Mapping[str, Sequence[CategoricalField]]) -> dict[tuple[CategoricalField, float], _Labels]:
    """Every judge's labels, by field and temperature (a unit an outcome exists for but holds no
    label, unscored, is recorded with None so that it counts as incomplete)."""
    out: dict[tuple[CategoricalField, float], _Labels] = defaultdict(_Labels)
    for o in run.outcomes:
        for f in fields.get(o.judge, ()):
            cell = out[(f, o.temperature)]
            unit = (o.item_id, o.variant, o.repeat)
            label = f.label(o.verdict) if o.status == "scored" else None
            cell.by_unit[unit][o.judge] = label
            if label is not None and (k := f.choices(o.verdict)) is not None:
                cell.k[unit] = max(k, cell.k.get(unit, 0))
    return dict(out)


def _panels(judges: Sequence[str], juries: Mapping[str, Sequence[str]]) -> list[tuple[str, tuple[str, ...]]]:
    """(jury, judges) of the panels of one field: all its judges (named after the juries made
    of exactly them, if any), then each jury of 3+ jurors that all write it and are not that
    whole set."""
    everyone = tuple(sorted(judges))
    named = {name: tuple(sorted(jurors)) for name, jurors in sorted(juries.items())
             if len(jurors) >= MIN_JUDGES and set(jurors) <= set(judges)}  # fmt: skip
    same = [name for name, jurors in named.items() if jurors == everyone]
    panels = [(", ".join(same), everyone)] if len(everyone) >= MIN_JUDGES else []
    return panels + [(name, jurors) for name, jurors in named.items() if jurors != everyone]


def _rows(f: CategoricalField, temperature: float, jury: str, judges: tuple[str, ...], cell: _Labels,
          *, bootstrap: int, seed: int) -> tuple[list[dict[str, Any]], str | None]:
    """The panel's rows, and a note when Randolph's k varies from unit to unit."""
    seen = [u for u, given in cell.by_unit.items() if any(j in given for j in judges)]
    complete = sorted(u for u in seen if all(cell.by_unit[u].get(j) is not None for j in judges))
    labels = [[cell.by_unit[u][j] for j in judges] for u in complete]
    if f.categories:
        used = {v for row in labels for v in row}
        k_units: int | list[int] | None = len(set(f.categories) | used)
    else:
        k_units = [cell.k.get(u, 0) for u in complete]
    note = None
    if isinstance(k_units, list) and k_units and min(k_units) != max(k_units):
        note = f"{f.name} T={temperature:g}: k varies with the candidates shown ({min(k_units)}-{max(k_units)})"
    results = panel_coefficients(labels, k=k_units, groups=[u[0] for u in complete], bootstrap=bootstrap, seed=seed)
    k_shown = k_units if isinstance(k_units, int) else (k_units[0] if k_units and note is None else None)
    named = ", ".join(judges) + (f" (jury {jury})" if jury else "")
    at = {"field": f.name, "temperature": temperature, "jury": jury, "judges": named,
          "units": len(complete), "incomplete": len(seen) - len(complete), "k": k_shown}
    rows = [{**at, "statistic": name, "value": r["value"], "ci_low": r["ci_low"], "ci_high": r["ci_high"]}
            for name, r in results.items()]
    return rows, note


def panel_section(
    run: Run, fields: Mapping[str, Sequence[CategoricalField]], *, bootstrap: int = 0, seed: int = 0
) -> Section | None:
    """Fleiss' and Randolph's kappa of every panel of 3+ judges sharing a categorical field.

    Args:
        fields: the categorical fields each judge writes (judges not named write none).
        bootstrap: resamples of the items for each interval (0: none).

    Returns:
        The section; None when no judge of the run writes a categorical field. With fields but
        no panel of three, the section is ``absent`` and says who writes what.
    """
    cells = _collect(run, fields)
    if not cells:
        return None
    juries = _juries(run)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    writers: dict[CategoricalField, set[str]] = defaultdict(set)
    for (f, temperature), cell in sorted(cells.items(), key=lambda kv: (kv[0][0].name, kv[0][0].key, kv[0][1])):
        judges = sorted({j for given in cell.by_unit.values() for j in given})
        writers[f].update(judges)
        for jury, panel in _panels(judges, juries):
            found, note = _rows(f, temperature, jury, panel, cell, bootstrap=bootstrap, seed=seed)
            rows += found
            notes += [note] if note else []
    interval = f", {bootstrap} resamples of the items" if bootstrap else ""
    title = f"Agreement within a panel: 3+ judges on one label (Fleiss' and Randolph's kappa{interval})"
    section = Section("panel_agreement", title, COLUMNS, rows)
    if not rows:
        shared = "; ".join(f"{f.name}: {', '.join(sorted(j))}" for f, j in writers.items())
        section.absent = f"needs {MIN_JUDGES}+ judges writing the same categorical field at one temperature ({shared})"
    elif any(r["incomplete"] for r in rows):
        section.notes.append("incomplete: units (item, variant, repeat) a judge of the panel left without a label, "
                             "left out (Fleiss' kappa needs every judge on every unit)")
    section.notes += notes
    return section


def _juries(run: Run) -> dict[str, list[str]]:
    """Each jury of the run's config and its jurors."""
    config = run.manifest.config if run.manifest is not None else {}
    juries = config.get("juries") or []
    return {str(j["name"]): [str(name) for name in j.get("judges") or []]
            for j in juries if isinstance(j, Mapping) and j.get("name")}
