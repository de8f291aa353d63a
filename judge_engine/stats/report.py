"""What ``judge-engine stats`` shows, in display order: the sections of a run directory, or of
repeat columns in a table, assembled from the modules that compute them.

Each measurement lives with its meaning (:mod:`.sections` for consistency, distributions, the
unscored rate and agreement between judges; :mod:`.reliability`; ...); this module only decides
which apply and in what order, from :class:`ReportOptions`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge_engine.stats.reliability import reliability_section, table_reliability_section
from judge_engine.stats.runs import Run
from judge_engine.stats.sections import (
    Section,
    consistency_section,
    dimension_section,
    distribution_section,
    judge_agreement_section,
    table_consistency_section,
    table_repeat_matrix,
    unscored_section,
)
from judge_engine.stats.temperature import temperature_section


@dataclass(frozen=True, kw_only=True)
class ReportOptions:
    """The choices ``stats`` takes from its command line."""

    small: float = 1.0
    """|delta| bound of the first consistency bucket, in the protocol's score units."""
    large: float = 5.0
    """|delta| bound between the second and third buckets."""
    verdict_field: str | None = None
    """Flip rates on ``verdict[NAME]`` instead of the score."""
    reliability: bool = False
    """Add alpha, the six ICC forms, Fleiss' and Randolph's kappa across repeats."""
    bootstrap: int = 0
    """Resamples for the bootstrap intervals over items (0: none)."""
    seed: int = 0
    n_categories: int | None = None
    """Randolph's k (default: the distinct scores seen)."""
    dimensions: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Sub-scores shown across repeats, by protocol (e.g. TTCT's four dimensions)."""
    only_dimensions: Sequence[str] | None = None
    """Sub-scores shown for every protocol instead (``--dimensions``)."""
    generation: frozenset[str] = frozenset()
    """Protocols whose "judge" is the model under test writing its own answer (CDAT, DAT): left
    out of the agreement between judges and the consistency across temperatures."""


NOT_FOR_GENERATION = {
    "judge_agreement": "each model is scored on lists it wrote, so there is no shared answer to agree on",
    "temperatures": "a list at another temperature is a new answer, not the same one judged again",
}
"""Why a section is left out for generation judges (CDAT, DAT), by section name."""


def run_report(run: Run, options: ReportOptions) -> list[Section]:
    """Everything ``judge-engine stats RUN_DIR`` shows from the run's outcomes, in display
    order (protocol-specific and item-based sections are added by the command)."""
    o = options
    sections = [
        consistency_section(run, small=o.small, large=o.large, verdict_field=o.verdict_field),
        _judging(lambda r: temperature_section(r, small=o.small, large=o.large, verdict_field=o.verdict_field),
                 run, o.generation),
        dimension_section(run, o.dimensions, only=o.only_dimensions),
    ]
    if o.reliability:
        sections.append(reliability_section(run, bootstrap=o.bootstrap, seed=o.seed,
                                            n_categories=o.n_categories))  # fmt: skip
    return [
        *sections,
        distribution_section(run),
        unscored_section(run),
        _judging(judge_agreement_section, run, o.generation),
    ]


def _judging(section: Callable[[Run], Section], run: Run, generation: frozenset[str]) -> Section:
    """``section`` over the judges that judge, with the generation judges (``generation``'s
    protocols) left out and named: the section's one line when no other judge is left, a note
    under it otherwise."""
    made = sorted({o.judge for o in run.outcomes if o.protocol in generation})
    if not made:
        return section(run)
    kept = [o for o in run.outcomes if o.judge not in made]
    shown = section(dataclasses.replace(run, outcomes=kept))
    protocols = ", ".join(sorted({o.protocol for o in run.outcomes if o.protocol in generation}))
    why = f"generation run ({protocols}): {NOT_FOR_GENERATION[shown.name]}"
    if not kept:
        return dataclasses.replace(shown, rows=[], absent=why, notes=[])
    left = f"{', '.join(made)} left out ({why})"
    if shown.rows:
        return dataclasses.replace(shown, notes=[*shown.notes, f"not shown: {left}"])
    return dataclasses.replace(shown, absent=f"{shown.absent}; {left}")


def table_report(
    rows: Sequence[dict[str, Any]],
    repeat_columns: Sequence[str],
    options: ReportOptions,
    *,
    group: str | None = None,
) -> list[Section]:
    """``judge-engine stats TABLE --repeats COL..``: consistency (and reliability) of repeats
    stored in a table, per group and pooled."""
    o = options
    matrix = table_repeat_matrix(rows, repeat_columns)
    groups = [str(r.get(group)) for r in rows] if group else None
    sections = [table_consistency_section(matrix, groups, small=o.small, large=o.large)]
    if o.reliability:
        sections.append(table_reliability_section(matrix, groups, bootstrap=o.bootstrap, seed=o.seed,
                                                  n_categories=o.n_categories))  # fmt: skip
    return sections
