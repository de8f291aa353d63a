"""Jury sections for ``judge-engine stats RUN_DIR``: how far a jury's jurors agree, and how often
the jury's verdict differs from each juror's.

Read from the jury's own outcome lines (``protocol: jury``), whose verdicts hold every juror's
vote, so the figures need nothing else from the run. The agreement coefficient follows the
votes' scale, recorded in each verdict (``scale``):

* **categorical** (labels): Cohen's kappa for two jurors, Fleiss' kappa for more, over the items
  every juror voted on (chance-corrected agreement on a nominal scale);
* **ordinal** (a short integer scale, or labels worth numbers): Krippendorff's alpha, ordinal
  level, over every item with two votes or more (it takes missing votes and the order of the
  values into account, where kappa would count 4 vs 5 as far apart as 1 vs 5);
* **interval** (continuous numbers): ICC(2,1), two-way random effects, absolute agreement, over
  the items every juror voted on (the jurors are a sample of the judges one could have asked).

Next to it, the raw share of juror pairs that voted alike (exact agreement), which the
coefficient corrects for chance, and on a numeric scale the share that voted within one point of
each other (on a 1-10 grade, 8 and 9 are apart for exact agreement, together within one).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from judge_engine.stats._coefficients import category_counts
from judge_engine.stats.agreement import (
    agreement_within,
    cohen_kappa,
    fleiss_kappa,
    icc,
    krippendorff_alpha,
    percent_agreement,
)
from judge_engine.stats.runs import Outcome, Run
from judge_engine.stats.sections import Section

JURY_PROTOCOL = "jury"

COEFFICIENT = {"categorical": "kappa", "ordinal": "alpha_ordinal", "interval": "icc_2_1"}
"""The coefficient reported for each scale (see the module docstring)."""


def jury_sections(run: Run) -> list[Section]:
    """The jury sections, when the run has jury outcomes (none otherwise)."""
    juries = [o for o in run.outcomes if o.protocol == JURY_PROTOCOL and isinstance(o.verdict, dict)]
    if not juries:
        return []
    return [agreement_section(juries), differs_section(juries)]


def _panels(juries: Sequence[Outcome]) -> dict[tuple[str, float], list[Outcome]]:
    groups: dict[tuple[str, float], list[Outcome]] = defaultdict(list)
    for o in juries:
        groups[(o.judge, o.temperature)].append(o)
    return dict(sorted(groups.items()))


def _jurors(group: Sequence[Outcome]) -> list[str]:
    return list(dict.fromkeys(name for o in group for name in (o.verdict.get("jurors") or {})))


def _votes(outcome: Outcome, jurors: Sequence[str]) -> list[Any]:
    given = outcome.verdict.get("jurors") or {}
    return [(given.get(name) or {}).get("vote") for name in jurors]


def agreement_section(juries: Sequence[Outcome]) -> Section:
    """Per jury and temperature: the scale, the coefficient that fits it, and exact agreement."""
    rows = []
    for (jury, temperature), group in _panels(juries).items():
        jurors = _jurors(group)
        scale = str(group[0].verdict.get("scale") or "interval")
        matrix = [_votes(o, jurors) for o in group]
        complete = [row for row in matrix if all(v is not None for v in row)]
        numeric = scale != "categorical"
        rows.append({"jury": jury, "temperature": temperature, "jurors": ", ".join(jurors), "scale": scale,
                     "n_items": len(complete), "coefficient": COEFFICIENT.get(scale, "icc_2_1"),
                     "value": coefficient(scale, matrix), "exact_agreement": percent_agreement(matrix),
                     "within_one": agreement_within(matrix, 1.0) if numeric else math.nan})
    columns = ["jury", "temperature", "jurors", "scale", "n_items", "coefficient", "value", "exact_agreement"]
    notes = ["value: the coefficient named, corrected for chance; exact_agreement: the share of juror pairs that "
             "voted the same, per item, averaged"]
    if any(r["scale"] != "categorical" for r in rows):
        columns.append("within_one")
        notes.append("within_one: the share of juror pairs whose votes are at most 1 apart (8 and 9 agree here, "
                     "not in exact_agreement)")
    return Section("jury_agreement", "Agreement among each jury's jurors (kappa for labels, alpha for ordinal "
                   "scores, ICC for continuous ones)", columns, rows, notes=notes)


def coefficient(scale: str, matrix: Sequence[Sequence[Any]]) -> float:
    """The agreement coefficient of an items x jurors vote matrix (None = no vote) on ``scale``."""
    complete = [list(row) for row in matrix if all(v is not None for v in row)]
    if scale == "categorical":
        if complete and len(complete[0]) == 2:
            return cohen_kappa([r[0] for r in complete], [r[1] for r in complete])
        return fleiss_kappa(category_counts(complete)[0]) if complete else math.nan
    if scale == "ordinal":
        return krippendorff_alpha([list(row) for row in matrix], level="ordinal")
    return icc([[float(v) for v in row] for row in complete], form="ICC(2,1)") if len(complete) >= 2 else math.nan


def differs_section(juries: Sequence[Outcome]) -> Section:
    """Per jury, temperature and juror: how often the jury's verdict differs from the juror's
    vote (over the items where both exist), and by how much on average for numbers."""
    rows = []
    for (jury, temperature), group in _panels(juries).items():
        for juror in _jurors(group):
            pairs = [(o.verdict.get("value"), vote) for o in group
                     if o.status == "scored" and (vote := _votes(o, [juror])[0]) is not None]
            differs = sum(1 for value, vote in pairs if value != vote)
            numeric = pairs and all(isinstance(x, int | float) for pair in pairs for x in pair)
            rows.append({"jury": jury, "temperature": temperature, "juror": juror, "n_items": len(pairs),
                         "differs": differs, "rate": differs / len(pairs) if pairs else math.nan,
                         "mean_abs_diff": (sum(abs(float(a) - float(b)) for a, b in pairs) / len(pairs))
                         if numeric else math.nan})
    columns = ["jury", "temperature", "juror", "n_items", "differs", "rate", "mean_abs_diff"]
    return Section("jury_differs", "How often each jury's verdict differs from each juror's", columns, rows)
