"""CDAT and DAT figures for ``judge-engine stats RUN_DIR [--baselines RANDOM.json [COMMON.json]]``.

Per judge (the model under test) and temperature, from the run's outcomes and the pure functions
of :mod:`judge_engine.stats.creativity`:

* **valid responses**: answers with at least seven valid nouns over all answers, with a Wilson
  interval. A ``too_few_valid`` list counts as invalid; a ``not_embedded`` one (valid, but the
  judge had ``embedder: none``) as valid, in its own column and in no mean; a task with no answer
  to read (a transport failure, a protocol error) is no answer and is named under the table;
* **novelty** (the DAT score) and, for CDAT, **appropriateness**: means with 95% intervals;
* CDAT with the Random baseline: the **gate** (Welch t-test of per-cue appropriateness against
  Random, Benjamini-Hochberg at alpha 0.001 within each temperature, 3-SD outliers out) and the
  **CDAT score** of the models that pass;
* CDAT with both baselines: the **elbow distance** from the Common-Random line;
* CDAT: the **Pareto front** per temperature over the models (the baselines given are listed
  beside it, and a model a baseline beats on both axes says so);
* ``--plots``: the appropriateness-novelty plane (:mod:`judge_engine.stats.creativity_plots`).

A section that needs a baseline that was not given says so in one line. The baselines are files
in the paper's format (:mod:`judge_engine.protocols.cdat_baselines`): the Random one first.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge_engine.errors import ReasonCode, TableError
from judge_engine.protocols.cdat_baselines import BaselineList, read_baseline
from judge_engine.stats.creativity import (
    GATE_ALPHA,
    ListScore,
    ModelSummary,
    Point,
    baseline_mean,
    mean_ci,
    summarize,
    valid_response_rate,
)
from judge_engine.stats.creativity_plots import creativity_plane
from judge_engine.stats.plots import Chart
from judge_engine.stats.runs import Outcome, Run
from judge_engine.stats.sections import Section

if TYPE_CHECKING:
    from judge_engine.stats.plots import Chart

GENERATION = ("cdat", "dat")
"""The protocols whose outcomes are word lists."""
READ = {ReasonCode.TOO_FEW_VALID.value: False, ReasonCode.NOT_EMBEDDED.value: True}
"""Unscored outcomes that are answers read by the method, and whether the list was valid."""
NO_RANDOM = "needs the Random baseline: --baselines RANDOM.json (judge-engine cdat-baselines writes one)"
NO_BOTH = "needs both baselines: --baselines RANDOM.json COMMON.json"


@dataclass(frozen=True)
class Baseline:
    """A baseline file as read: its role (``Random`` or ``Common``), where it came from, its lists."""

    role: str
    path: Path
    lists: list[BaselineList]

    @property
    def points(self) -> list[Point]:
        return [p for bl in self.lists if (p := bl.point) is not None]

    def describe(self) -> str:
        labels = ", ".join(sorted({f'"{bl.model}"' for bl in self.lists}))
        x, y = baseline_mean(self.points)
        return (f"{self.role}: {self.path} (Model {labels}), {len(self.points)} of {len(self.lists)} lists "
                f"scored; mean appropriateness {x:.2f}, novelty {y:.2f}")


def read_baselines(paths: Sequence[Path]) -> tuple[Baseline | None, Baseline | None]:
    """(Random, Common) from ``--baselines RANDOM.json [COMMON.json]``.

    Raises:
        TableError: more than two files, a file that cannot be read or has fewer than two scored lists, or
            files given in the wrong order (the Random file's lists say ``Common`` or the other
            way round).
    """
    if len(paths) > 2:
        raise TableError(f"--baselines takes RANDOM.json and optionally COMMON.json, not {len(paths)} files")
    read = [Baseline(role, path, read_baseline(path)) for role, path in zip(("Random", "Common"), paths, strict=False)]
    for baseline in read:
        if len(baseline.points) < 2:  # the gate's t-test and the interval need two
            raise TableError(f"{baseline.path}: {len(baseline.points)} scored lists; a baseline needs at least 2 "
                             "with sbert_appropriateness and sbert_novelty")
        other = "Common" if baseline.role == "Random" else "Random"
        if all(bl.model.startswith(other) for bl in baseline.lists):
            raise TableError(f"{baseline.path}: its lists are the {other} baseline's, given as {baseline.role}: "
                             "--baselines takes RANDOM.json first, then COMMON.json")
    return (read[0] if read else None), (read[1] if len(read) > 1 else None)


def has_generation(run: Run) -> bool:
    return any(o.protocol in GENERATION for o in run.outcomes)


@dataclass
class GenerationReport:
    """The sections of a run's word lists, and what the plane is drawn from."""

    sections: list[Section]
    summaries: list[ModelSummary] = field(default_factory=list)
    """CDAT judges per temperature (empty for a DAT-only run)."""
    random: Baseline | None = None
    common: Baseline | None = None

    def charts(self, plot_dir: Path) -> list[Chart]:
        """The appropriateness-novelty plane (CDAT runs only)."""
        if not self.summaries:
            return []
        path = plot_dir / "cdat_plane.png"
        if not any(math.isfinite(s.novelty.mean) and math.isfinite(s.appropriateness.mean) for s in self.summaries):
            return [Chart(path, False, "no CDAT list was scored")]
        creativity_plane(self.summaries, random=self.random.points if self.random else None,
                         common=self.common.points if self.common else None, path=path)
        return [Chart(path, True)]


def generation_report(run: Run, *, random: Baseline | None = None, common: Baseline | None = None) -> GenerationReport:
    """Every generation section of ``run`` (see the module docstring)."""
    lists, skipped = _lists(run.outcomes)
    cdat = [row for (protocol, row) in lists if protocol == "cdat"]
    summaries = summarize(cdat, random=random.points if random else None,
                          common=common.points if common else None) if cdat else []
    sections = [_valid_section(lists, skipped), _score_section(lists, "novelty"),
                *([_score_section(lists, "appropriateness")] if cdat else [])]
    if cdat:
        sections += [_gate_section(summaries, random), _cdat_section(summaries, random),
                     _elbow_section(summaries, random, common), _pareto_section(summaries, random, common)]
    return GenerationReport(sections, summaries, random, common)


def _lists(outcomes: Sequence[Outcome]) -> tuple[list[tuple[str, ListScore]], dict[tuple[str, float], Counter[str]]]:
    """The answers read as lists, and per (judge, temperature) the tasks with no answer by code."""
    lists: list[tuple[str, ListScore]] = []
    skipped: dict[tuple[str, float], Counter[str]] = defaultdict(Counter)
    for o in sorted((o for o in outcomes if o.protocol in GENERATION), key=lambda o: (o.judge, o.temperature)):
        if o.status == "scored":
            row = ListScore(o.judge, o.temperature, o.scores.get("novelty", o.score), o.scores.get("appropriateness"),
                            cue=o.item_id)
        elif o.reason_code in READ:
            row = ListScore(o.judge, o.temperature, None, None, valid=READ[o.reason_code], cue=o.item_id)
        else:
            skipped[(o.judge, o.temperature)][o.reason_code or "unscored"] += 1
            continue
        lists.append((o.protocol, row))
    return lists, skipped


def _groups(lists: Sequence[tuple[str, ListScore]]) -> dict[tuple[str, float], list[ListScore]]:
    groups: dict[tuple[str, float], list[ListScore]] = defaultdict(list)
    for _, row in lists:
        groups[(row.model, row.temperature)].append(row)
    return dict(sorted(groups.items()))


def _valid_section(lists: Sequence[tuple[str, ListScore]], skipped: dict[tuple[str, float], Counter[str]]) -> Section:
    rows = []
    for (judge, temperature), group in _groups(lists).items():
        valid = sum(r.is_valid for r in group)
        rate = valid_response_rate(valid, len(group))
        unembedded = sum(r.is_valid and r.novelty is None for r in group)
        rows.append({"judge": judge, "temperature": temperature, "answers": len(group), "valid": valid,
                     "rate": rate.rate, "ci_low": rate.low, "ci_high": rate.high, "not_embedded": unembedded})
    notes = [f"not counted: {judge} T={temperature:g}, {sum(codes.values())} tasks with no answer to read "
             f"({', '.join(f'{code} {n}' for code, n in codes.most_common())})"
             for (judge, temperature), codes in sorted(skipped.items())]
    if any(r["not_embedded"] for r in rows):
        notes.append("not_embedded: valid lists of a judge with embedder: none; valid here, in no mean below")
    columns = ["judge", "temperature", "answers", "valid", "rate", "ci_low", "ci_high"]
    if any(r["not_embedded"] for r in rows):  # a column of zeros otherwise (the JSON has it anyway)
        columns.append("not_embedded")
    absent = "" if rows else "no answer was read: " + "; ".join(notes)
    return Section("valid_responses", "Valid responses: 7+ valid nouns (Wilson 95% CI)",
                   columns, rows, absent, notes if rows else [])


SCORE_TITLES = {"novelty": "Novelty, the DAT score (mean, 95% CI: +- 1.96 SEM)",
                "appropriateness": "Appropriateness to the cue (mean, 95% CI: +- 1.96 SEM)"}


def _score_section(lists: Sequence[tuple[str, ListScore]], name: str) -> Section:
    rows: list[dict[str, Any]] = []
    for (judge, temperature), group in _groups(lists).items():
        ci = mean_ci([v for r in group if (v := getattr(r, name)) is not None])
        if ci.n:
            rows.append({"judge": judge, "temperature": temperature, "n": ci.n, "mean": ci.mean,
                         "ci_low": ci.low, "ci_high": ci.high})
    return Section(name, SCORE_TITLES[name], ["judge", "temperature", "n", "mean", "ci_low", "ci_high"], rows,
                   "" if rows else "no list was scored (see valid responses)")


def _gate_section(summaries: Sequence[ModelSummary], random: Baseline | None) -> Section:
    title = f"Gate: appropriateness above Random (Welch, BH, alpha {GATE_ALPHA:g})"
    columns = ["judge", "temperature", "n", "mean", "p", "p_bh", "passed"]  # rows also hold random, t and df
    if random is None:
        return Section("gate", title, columns, [], NO_RANDOM)
    rows = [{"judge": s.model, "temperature": s.temperature, "n": s.gate.n, "mean": s.gate.mean,
             "random": s.gate.random_mean, "t": s.gate.t, "df": s.gate.df, "p": s.gate.p, "p_bh": s.gate.p_adjusted,
             "passed": s.gate.passed} for s in summaries if s.gate is not None]
    notes = ["two-sided Welch t-test of per-cue appropriateness (a cue's lists averaged; values beyond 3 SD "
             "removed first) against Random's; p_bh: Benjamini-Hochberg within the temperature; passed: "
             "p_bh <= alpha and mean above Random's", random.describe()]
    return Section("gate", title, columns, rows, notes=notes, small_values=("p", "p_bh"))


def _cdat_section(summaries: Sequence[ModelSummary], random: Baseline | None) -> Section:
    title = "CDAT score: mean novelty of models passing the gate"
    columns = ["judge", "temperature", "n", "cdat", "ci_low", "ci_high"]
    if random is None:
        return Section("cdat_score", title, columns, [], "needs the gate, which " + NO_RANDOM)
    rows = [{"judge": s.model, "temperature": s.temperature, "n": s.cdat.n, "cdat": s.cdat.mean,
             "ci_low": s.cdat.low, "ci_high": s.cdat.high} for s in summaries if s.cdat is not None]
    failed = [f"{s.model} T={s.temperature:g}" for s in summaries if s.cdat is None]
    if not rows:
        return Section("cdat_score", title, columns, [], f"no model passed the gate ({', '.join(failed)})")
    return Section("cdat_score", title, columns, rows,
                   notes=[f"not shown: {', '.join(failed)} (failed the gate)"] if failed else [])


def _elbow_section(summaries: Sequence[ModelSummary], random: Baseline | None, common: Baseline | None) -> Section:
    title = "Elbow distance from the Common-Random line"
    columns = ["judge", "temperature", "n", "elbow", "ci_low", "ci_high"]
    if random is None or common is None:
        return Section("elbow", title, columns, [], NO_BOTH)
    rows = [{"judge": s.model, "temperature": s.temperature, "n": s.elbow.n, "elbow": s.elbow.mean,
             "ci_low": s.elbow.low, "ci_high": s.elbow.high} for s in summaries]
    return Section("elbow", title, columns, rows, notes=[
        "mean, with its 95% CI, of each list's signed distance from the line through the Common and Random "
        "means (values beyond 3 SD removed); > 0: beyond the trade-off between the two", common.describe()])


def _pareto_section(summaries: Sequence[ModelSummary], random: Baseline | None, common: Baseline | None) -> Section:
    """The front of the models, per temperature, as :func:`~judge_engine.stats.creativity.summarize`
    draws it; the baselines' means are listed beside it (``front`` empty), not candidates."""
    baselines = {b.role: baseline_mean(b.points) for b in (random, common) if b is not None}
    rows: list[dict[str, Any]] = []
    beaten: list[str] = []
    for temperature in sorted({s.temperature for s in summaries}):
        placed = [s for s in summaries if s.temperature == temperature
                  and math.isfinite(s.appropriateness.mean) and math.isfinite(s.novelty.mean)]
        rows += [{"temperature": temperature, "point": s.model, "appropriateness": s.appropriateness.mean,
                  "novelty": s.novelty.mean, "front": s.pareto, "beaten_by": ", ".join(s.beaten_by)}
                 for s in placed]
        if placed:
            rows += [{"temperature": temperature, "point": name, "appropriateness": x, "novelty": y, "front": None,
                      "beaten_by": None} for name, (x, y) in baselines.items()]
        beaten += [f"{s.model} T={s.temperature:g} (by {', '.join(s.beaten_by)})"
                   for s in placed if s.pareto and s.beaten_by]  # a model on the front: only a baseline beats it
    title = "Pareto front of the models: no other model beats them on both axes"
    columns = ["temperature", "point", "appropriateness", "novelty", "front"]
    if not rows:
        return Section("pareto", title, columns, [], "no CDAT list was scored")
    notes = []
    if baselines or any(s.beaten_by for s in summaries):  # a column of blanks otherwise (the JSON has it anyway)
        columns.append("beaten_by")
        notes.append("beaten_by: the models, then the baselines, whose mean is as high on both axes and higher on one")
    if baselines:
        notes.append("the front is over the models; the baselines' means are listed beside them, not candidates")
    if beaten:
        notes.append(f"on the front, but a baseline beats it on both axes: {'; '.join(beaten)}")
    if missing := [role for role in ("Random", "Common") if role not in baselines]:
        notes.append(f"{', '.join(missing)} not given")
    return Section("pareto", title, columns, rows, notes=notes)
