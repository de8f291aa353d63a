"""Judge biases that a run can show: verbosity (does the score follow the answer's length?) and
self-preference (does a judge score its own model family's outputs higher than others do?).

Verbosity (Zheng et al. 2023, "Judging LLM-as-a-Judge", verbosity bias): per judge, the rank and
linear correlation between the item's score and the length in characters of the judged text
(the *answer*: a response, a translation), of the text it is judged against (the *reference*: a
reference answer, or for translation the source) and of their ratio. A correlation with the
answer's length that the reference's length does not explain is the warning sign.

Self-preference (Panickssery et al. 2024, "LLM Evaluators Recognize and Favor Their Own
Generations"): the items carry the system that produced the judged text; a judge whose model
family (:func:`judge_engine.util.families.model_family`) equals a system's is compared on those
items (*own*) and on the rest (*other*). The gap in its mean score is put in units of its score
SD, so that judges on different scales compare, and read against the same gap in the other
raters' scores (other judges, or humans), which carries the outputs' real quality difference:
``excess = gap_sd - mean of the others' gap_sd``. Positive excess: the judge favours its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from judge_engine.stats._arrays import as_float_array
from judge_engine.stats.correlation import correlation
from judge_engine.stats.runs import Run
from judge_engine.stats.sections import Section, judge_means, left_out
from judge_engine.stats.tables import Table
from judge_engine.util.families import model_family


@dataclass(frozen=True)
class PreferenceGap:
    """A rater's scores on own-family items against the other items."""

    n_own: int
    n_other: int
    mean_own: float
    mean_other: float
    gap: float
    """mean_own - mean_other, in the rater's score units."""
    gap_sd: float
    """gap / the SD (ddof=1) of all the rater's scores compared: a standardised difference."""

    def as_dict(self) -> dict[str, Any]:
        """Plain dict, for tables and JSON."""
        return asdict(self)


def preference_gap(scores: Any, own: Sequence[bool]) -> PreferenceGap:
    """Mean score on ``own`` items minus the mean on the others (missing scores left out).

    Example: scores [4, 5, 2, 3] with own [T, T, F, F]: means 4.5 and 2.5, gap 2; the SD of
    (4, 5, 2, 3) is sqrt(5/3) = 1.291, so gap_sd = 1.549.

    Raises:
        ValueError: unequal lengths.
    """
    x = as_float_array(scores, name="scores").ravel()
    mask = np.asarray(own, dtype=bool)
    if x.shape != mask.shape:
        raise ValueError(f"scores and own must have the same length, got {x.size} and {mask.size}")
    keep = np.isfinite(x)
    mine, rest = x[keep & mask], x[keep & ~mask]
    mean_own = float(mine.mean()) if mine.size else math.nan
    mean_other = float(rest.mean()) if rest.size else math.nan
    gap = mean_own - mean_other
    sd = float(x[keep].std(ddof=1)) if keep.sum() > 1 else math.nan
    gap_sd = gap / sd if sd > 0 else math.nan
    return PreferenceGap(int(mine.size), int(rest.size), mean_own, mean_other, gap, gap_sd)


def excess_preference(judge: PreferenceGap, others: Sequence[PreferenceGap]) -> tuple[float, float]:
    """``(the others' mean gap_sd, judge.gap_sd - that mean)``; NaNs without another rater."""
    finite = [o.gap_sd for o in others if not math.isnan(o.gap_sd)]
    control = float(np.mean(finite)) if finite else math.nan
    return control, judge.gap_sd - control


def length_correlations(scores: Any, lengths: Any) -> dict[str, float]:
    """``{"n", "mean_length", "spearman", "kendall", "pearson"}`` between scores and lengths
    (pairs with a missing side left out)."""
    x = as_float_array(scores, name="scores").ravel()
    y = as_float_array(lengths, name="lengths").ravel()
    keep = np.isfinite(x) & np.isfinite(y)
    return {
        "n": int(keep.sum()),
        "mean_length": float(y[keep].mean()) if keep.any() else math.nan,
        **{m: correlation(x, y, method=m) for m in ("spearman", "kendall", "pearson")},
    }


def text_length(value: Any) -> float:
    """Characters of a text field (language-neutral, unlike words for Chinese); NaN if absent."""
    return float(len(value)) if isinstance(value, str) and value else math.nan


def lengths(
    items: Mapping[str, Mapping[str, Any]], ids: Sequence[str], answer: str, reference: str | None
) -> dict[str, list[float]]:
    """``{role: lengths in ids' order}`` for the answer, the reference and their ratio."""
    out = {"answer": [text_length(items.get(i, {}).get(answer)) for i in ids]}
    if reference is not None:
        ref = [text_length(items.get(i, {}).get(reference)) for i in ids]
        out["reference"] = ref
        out["ratio"] = [a / r if r else math.nan for a, r in zip(out["answer"], ref, strict=True)]
    return out


Items = Mapping[str, Mapping[str, Any]]
"""The run's items by id, each with the fields a section reads (None: not readable, see why)."""


def _judge_protocols(run: Run) -> dict[str, tuple[str, str]]:
    """``{judge: (protocol, model)}`` from the outcomes."""
    return {o.judge: (o.protocol, o.model) for o in run.outcomes}


def verbosity_section(
    run: Run,
    items: Items | None,
    fields: Mapping[str, tuple[str, str | None]],
    *,
    why_no_items: str = "",
) -> Section:
    """Score against answer length (and reference length, and their ratio) per judge and
    temperature, on each item's mean score over repeats.

    Args:
        fields: ``{protocol: (answer field, reference field or None)}``; judges of other
            protocols are named under the table.
    """
    cols = ["judge", "temperature", "length_of", "field", "n", "mean_length", "spearman",
            "kendall", "pearson"]  # fmt: skip
    title = "Verbosity: score against length in characters (item means)"
    if items is None:
        return Section(
            "verbosity", title, cols, [], absent=f"needs the run's items: {why_no_items}"
        )
    rows: list[dict[str, Any]] = []
    skipped: dict[str, list[str]] = {}
    judges = _judge_protocols(run)
    for temperature in sorted({o.temperature for o in run.outcomes}):
        for judge, by_item in sorted(judge_means(run, temperature).items()):
            protocol = judges[judge][0]
            if protocol not in fields:
                hint = " (--length-of FIELD names it)" if protocol in ("custom", "jury") else ""
                skipped.setdefault(f"{protocol}: no judged text to measure{hint}", []).append(judge)
                continue
            answer, reference = fields[protocol]
            ids = list(by_item)
            scores = [by_item[i] for i in ids]
            names = {"answer": answer, "reference": reference, "ratio": f"{answer}/{reference}"}
            for role, values in lengths(items, ids, answer, reference).items():
                stats = length_correlations(scores, values)
                if stats["n"]:
                    rows.append({"judge": judge, "temperature": temperature, "length_of": role,
                                 "field": names[role], **stats})  # fmt: skip
    absent, notes = left_out({k: sorted(set(v)) for k, v in skipped.items()}, rows,
                             "no judge with a length to measure: ")  # fmt: skip
    return Section("verbosity", title, cols, rows, absent, notes)


def self_preference_section(
    run: Run,
    items: Items | None,
    *,
    system_field: str = "system",
    overrides: Mapping[str, str] | None = None,
    why_no_items: str = "",
) -> Section:
    """Self-preference per judge and temperature whose model family is a system's family.

    Each judge's own-family items and the others, its standardised gap, and the same split in
    every other judge's scores at that temperature (whose family is not the judge's) as the
    control (see the module docstring).
    """
    cols = ["judge", "temperature", "family", "own_systems", "n_own", "n_other", "mean_own",
            "mean_other", "gap", "gap_sd", "others_gap_sd", "excess"]  # fmt: skip
    title = "Self-preference: a judge on its own model family's outputs (gap in SD units)"
    section = Section("self_preference", title, cols, [])
    if items is None:
        section.absent = f"needs the run's items: {why_no_items}"
        return section
    systems = {i: str(v) for i, f in items.items() if (v := f.get(system_field)) not in (None, "")}
    if not systems:
        section.absent = f"the items have no {system_field!r} field naming the system judged"
        return section
    family_of = {s: model_family(s, overrides=overrides) for s in set(systems.values())}
    judge_family = {
        j: model_family(m, overrides=overrides) for j, (_, m) in _judge_protocols(run).items()
    }
    for temperature in sorted({o.temperature for o in run.outcomes}):
        means = judge_means(run, temperature)
        for judge, by_item in sorted(means.items()):
            family = judge_family[judge]
            own_systems = sorted(s for s, f in family_of.items() if f is not None and f == family)
            if not own_systems:
                continue
            ids = [i for i in by_item if i in systems]
            own = [family_of[systems[i]] == family for i in ids]
            gap = preference_gap([by_item[i] for i in ids], own)
            others = [preference_gap([means[o].get(i, math.nan) for i in ids], own)
                      for o in means if o != judge and judge_family[o] != family]  # fmt: skip
            control, excess = excess_preference(gap, others)
            section.rows.append({
                "judge": judge, "temperature": temperature, "family": family,
                "own_systems": ", ".join(own_systems), **gap.as_dict(),
                "others_gap_sd": control, "excess": excess,
            })  # fmt: skip
    if not section.rows:
        known = sorted({f for f in judge_family.values() if f})
        section.absent = (f"no judge's model family ({', '.join(known) or 'none known'}) is the "
                          f"family of a system in {system_field!r}")  # fmt: skip
    unknown = sorted(j for j, f in judge_family.items() if f is None)
    if unknown:
        section.notes.append(
            f"model family unknown for: {', '.join(unknown)} (--family NAME=FAMILY)"
        )
    return section


def table_self_preference_section(
    table: Table,
    judges: Mapping[str, str],
    *,
    system: str,
    controls: Sequence[str],
    group: str | None = None,
    overrides: Mapping[str, str] | None = None,
) -> Section:
    """Self-preference in a table of scores (``meta --self-preference COL=MODEL``), per group
    and pooled: each judge column's own-family rows against the rest, read against the same
    split in the ``controls`` columns (humans, e.g. MQM), which carry the real difference.

    Args:
        judges: ``{score column: the judge's model}``, e.g. ``{"gemba_all_orig": "gpt-4o-mini"}``.
        system: the column naming the system of each row.
    """
    table.require(system, *judges, *controls)
    systems = [str(s) for s in table.values(system)]
    groups = [str(v) for v in table.values(group)] if group else ["all"] * len(systems)
    cols = ["group", "judge", "family", "own_systems", "n_own", "n_other", "mean_own",
            "mean_other", "gap", "gap_sd", "others_gap_sd", "excess"]  # fmt: skip
    title = "Self-preference: a judge on its own model family's outputs (gap in SD units)"
    section = Section("self_preference", title, cols, [])
    families = {s: model_family(s, overrides=overrides) for s in set(systems)}
    for column, model in judges.items():
        family = model_family(model, overrides=overrides)
        own_systems = sorted(s for s, f in families.items() if f is not None and f == family)
        if not own_systems:
            section.notes.append(f"not shown: {column} ({model}: family {family}, no system of it)")
            continue
        own = np.array([families[s] == family for s in systems])
        for g in [*dict.fromkeys(groups), "all"] if group else ["all"]:
            mask = np.array([g in (v, "all") for v in groups])
            gap = preference_gap(table.floats(column)[mask], own[mask])
            others = [preference_gap(table.floats(c)[mask], own[mask]) for c in controls]
            control, excess = excess_preference(gap, others)
            section.rows.append({
                "group": g, "judge": column, "family": family, "own_systems": ", ".join(own_systems),
                **gap.as_dict(), "others_gap_sd": control, "excess": excess,
            })  # fmt: skip
    if not section.rows:
        section.absent = f"no judge's model family is the family of a system in {system!r}"
        section.notes = []
    return section
