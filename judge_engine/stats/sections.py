"""Report sections for ``judge-engine stats RUN_DIR``: plain tables computed from a run.

A :class:`Section` is a titled list of row dicts: the command line renders it with rich, or
writes it as JSON or CSV; the plots read the same rows. A measurement that does not apply to a
run (consistency with one repeat, agreement with one judge, a distribution of protocols that
score candidates rather than items) is a section with no rows and an ``absent`` reason, never an
empty table; rows left out of a section are named in its ``notes``.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from judge_engine.stats.agreement import icc, krippendorff_alpha, percent_agreement
from judge_engine.stats.consistency import flip_rate, repeat_consistency, run_spread
from judge_engine.stats.correlation import correlation, wilson_interval
from judge_engine.stats.runs import Outcome, Run, score_matrices
from judge_engine.stats.tables import parse_list, to_float


@dataclass
class Section:
    """A titled table: ``rows`` are dicts keyed by ``columns``."""

    name: str
    """Short machine name (JSON key, CSV ``section`` value)."""
    title: str
    columns: list[str]
    rows: list[dict[str, Any]]
    absent: str = ""
    """Why the section has no rows (e.g. "needs 2+ repeats"), shown instead of an empty table;
    empty when it has rows."""
    notes: list[str] = field(default_factory=list)
    """Rows the section leaves out, and why, and what a figure is where its name cannot say
    (printed under the table)."""
    small_values: tuple[str, ...] = ()
    """Columns whose small values matter (p-values): shown with significant digits, not rounded
    to three decimals."""
    dollar_values: tuple[str, ...] = ()
    """Columns of dollars: shown as :func:`judge_engine.util.money.dollars` writes them ($0.0002),
    numbers still in JSON and CSV."""
    formats: Mapping[str, Callable[[float], str]] = field(default_factory=dict)
    """Columns whose numbers are written by a rule of their own (a cascade's thresholds with 4
    decimals, its shares as percentages), numbers still in JSON and CSV."""


def left_out(
    skipped: dict[str, list[str]], rows: list[dict[str, Any]], absent_prefix: str
) -> tuple[str, list[str]]:
    """``(absent, notes)`` from ``{reason: [where, ...]}``: with no rows every reason becomes the
    section's ``absent`` text; otherwise one note per reason names the rows left out."""
    if not rows:
        return absent_prefix + "; ".join(skipped) if skipped else absent_prefix.rstrip(": "), []
    return "", [f"not shown: {', '.join(where)} ({reason})" for reason, where in skipped.items()]


def where(judge: str, temperature: float, variant: str = "") -> str:
    return f"{judge} T={temperature:g}" + (f" [{variant}]" if variant else "")


def _no_score_reason(group: list[Outcome]) -> str:
    """Why a group of outcomes has no finite score: nothing scored, or a protocol whose verdicts
    score something other than the item (BWS scores candidates)."""
    if not any(o.status == "scored" for o in group):
        return "nothing scored"
    protocols = ", ".join(sorted({o.protocol for o in group if o.status == "scored"}))
    return f"{protocols} outcomes carry no per-item score"


def _by(outcomes: list[Outcome], *keys: str) -> dict[tuple[Any, ...], list[Outcome]]:
    groups: dict[tuple[Any, ...], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[tuple(getattr(o, k) for k in keys)].append(o)
    return dict(sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))))


CASCADE_PROTOCOL = "cascade"
"""The protocol of a cascade's outcome lines (one per item: its answering stage's verdict)."""


def cascades(run: Run) -> set[str]:
    """The run's cascades: judges whose lines are a cascade's. A line holds the verdict of the
    stage that answered, at that stage's temperature: a cascade has none of its own (its
    line's ``temperature`` field is a placeholder), so tables show it ``-``."""
    return {o.judge for o in run.outcomes if o.protocol == CASCADE_PROTOCOL}


def _temperature(judge: str, temperature: float, cascaded: set[str]) -> float | None:
    return None if judge in cascaded else temperature


def cascade_temperature_note(run: Run) -> list[str]:
    """What a cascade's ``-`` temperature means, with its asked stages' temperatures."""
    if not cascades(run):
        return []
    section = (run.manifest.cascade if run.manifest is not None else None) or {}
    stages = [s for s in section.get("stages") or [] if s.get("asked")]
    temperatures = []
    for stage in stages:
        judges = set(stage.get("judges") or [])
        found = sorted({o.temperature for o in run.outcomes if o.judge in judges})
        if found:
            temperatures.append(f"{stage.get('stage')} {', '.join(f'{t:g}' for t in found)}")
    name = str(section.get("name") or "cascade")
    at = f" ({', '.join(temperatures)})" if temperatures else ""
    return [f"{name}: temperature -: each item's verdict is at the temperature of the stage that answered it{at}"]


def unscored_section(run: Run) -> Section:
    """Unscored rate per judge and temperature, with a Wilson interval, the count per reason code
    (the machine-readable why; ``unrecorded`` for lines written before codes existed) and the
    commonest human reason. A cascade's temperature is ``None`` (:func:`cascades`)."""
    rows = []
    cascaded = cascades(run)
    for (judge, temp), group in _by(run.outcomes, "judge", "temperature").items():
        bad = [o for o in group if o.status != "scored"]
        low, high = wilson_interval(len(bad), len(group))
        codes = Counter(o.reason_code or "unrecorded" for o in bad)
        reasons = Counter(o.reason for o in bad if o.reason).most_common(1)
        rows.append({
            "judge": judge, "temperature": _temperature(judge, temp, cascaded), "n": len(group), "unscored": len(bad),
            "rate": len(bad) / len(group), "ci_low": low, "ci_high": high,
            # code=n, no space: a narrow table wraps between codes, never between a code and its count
            "by_code": ", ".join(f"{code}={n}" for code, n in sorted(codes.items(), key=lambda c: (-c[1], c[0]))),
            "top_reason": reasons[0][0] if reasons else "",
        })  # fmt: skip
    cols = ["judge", "temperature", "n", "unscored", "rate", "ci_low", "ci_high", "by_code", "top_reason"]
    return Section("unscored", "Unscored rate", cols, rows)


SAMPLE_SD_NOTE = "sd: the sample standard deviation (n - 1 in the denominator), as pandas' std() and R's sd() give it"


def distribution_section(run: Run) -> Section:
    """Score distribution (count, mean, SD, quartiles) per judge and temperature. The SD is the
    sample SD (ddof = 1), as ``frame.groupby(...)["score"].std()`` gives it (NaN for one score).
    A cascade's temperature is ``None``, and a note gives its stages' (:func:`cascades`)."""
    rows = []
    cascaded = cascades(run)
    skipped: dict[str, list[str]] = defaultdict(list)
    for (judge, temp), group in _by(run.outcomes, "judge", "temperature").items():
        v = np.array([o.score for o in group if o.status == "scored" and math.isfinite(o.score)])
        if not v.size:
            skipped[_no_score_reason(group)].append(where(judge, temp))
            continue
        q = np.percentile(v, [0, 25, 50, 75, 100])
        stats = dict(zip(["min", "q25", "median", "q75", "max"], map(float, q), strict=True))
        stats |= {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else math.nan}
        rows.append({"judge": judge, "temperature": _temperature(judge, temp, cascaded), "n": int(v.size), **stats})
    cols = ["judge", "temperature", "n", "mean", "sd", "min", "q25", "median", "q75", "max"]
    absent, notes = left_out(skipped, rows, "")
    if rows:
        notes = [*notes, SAMPLE_SD_NOTE, *cascade_temperature_note(run)]
    return Section("distribution", "Score distribution", cols, rows, absent, notes)


def _labels(run: Run, verdict_field: str | None) -> dict[tuple[str, float, str], list[list[Any]]]:
    """Items x repeats categorical labels: ``verdict[field]`` if given, else the score."""
    cells: dict[tuple[str, float, str], dict[str, dict[int, Any]]] = defaultdict(dict)
    for o in run.outcomes:
        if o.status != "scored":
            label = None
        elif verdict_field:
            label = o.verdict.get(verdict_field) if isinstance(o.verdict, dict) else None
        else:
            label = o.score
        cells[(o.judge, o.temperature, o.variant)].setdefault(o.item_id, {})[o.repeat] = label
    out = {}
    for key, items in cells.items():
        reps = sorted({r for d in items.values() for r in d})
        out[key] = [[d.get(r) for r in reps] for d in items.values()]
    return out


def consistency_section(
    run: Run, *, small: float = 1.0, large: float = 5.0, verdict_field: str | None = None
) -> Section:
    """LitEval's consistency table per judge, temperature and variant, plus alpha and flips."""
    labels = _labels(run, verdict_field)
    groups = _by(run.outcomes, "judge", "temperature", "variant")
    rows = []
    skipped: dict[str, list[str]] = defaultdict(list)
    for key, (_, matrix) in sorted(score_matrices(run.outcomes).items(), key=lambda kv: kv[0]):
        judge, temp, variant = key
        if len(matrix[0]) < 2:
            skipped["needs 2+ repeats: 1 repeat per item"].append(where(*key))
            continue
        if verdict_field is None and not any(math.isfinite(v) for r in matrix for v in r):
            reason = _no_score_reason(groups[key]) + "; --verdict-field NAME compares verdicts"
            skipped[reason].append(where(*key))
            continue
        rc = repeat_consistency(matrix, small=small, large=large).as_dict()
        rows.append({
            "judge": judge, "temperature": temp, "variant": variant, **rc,
            "flip_rate": flip_rate(labels[key]),
        })  # fmt: skip
    cols = ["judge", "temperature", "variant", "n_items", "n_repeats", "mean_spearman",
            "share_small", "share_medium", "share_large", "alpha_ordinal", "alpha_interval",
            "mean_sd", "flip_rate"]  # fmt: skip
    title = f"Consistency across repeats (|delta| <= {small:g}, <= {large:g}, > {large:g})"
    absent, notes = left_out(skipped, rows, "")
    if not rows and set(skipped) == {"needs 2+ repeats: 1 repeat per item"}:
        absent = "needs 2+ repeats of each item (every judge ran 1; set repeats: 2 or more)"
    return Section("consistency", title, cols, rows, absent, notes)


def dimension_section(
    run: Run, dimensions: Mapping[str, Sequence[str]], *, only: Sequence[str] | None = None
) -> Section:
    """The score and its dimensions across repeats, as CPers reports each TTCT dimension over
    three runs: the mean of the run means and their standard deviation, per judge, temperature
    and variant (judges with 2+ repeats; each run's mean over the items scored in every run).

    Args:
        dimensions: ``{protocol: sub-score names}`` shown after the overall score.
        only: sub-score names for every protocol instead (``stats --dimensions``).
    """
    groups = _by(run.outcomes, "judge", "temperature", "variant")
    rows: list[dict[str, Any]] = []
    skipped: dict[str, list[str]] = defaultdict(list)
    for key, group in groups.items():
        protocol = group[0].protocol
        names = ["score", *(only if only is not None else dimensions.get(protocol, ()))]
        if len({o.repeat for o in group}) < 2:
            skipped["1 repeat per item"].append(where(*key))
            continue
        for name in names:
            _, matrix = score_matrices(group, field_name=name)[key]
            spread = run_spread(matrix)
            if spread.n_items:
                rows.append({"judge": key[0], "temperature": key[1], "variant": key[2],
                             "dimension": name, **spread.as_dict()})  # fmt: skip
            elif name == "score":
                skipped[_no_score_reason(group)].append(where(*key))
    cols = ["judge", "temperature", "variant", "dimension", "n_items", "n_repeats", "mean",
            "sd_runs", "min_run", "max_run", "mean_item_sd"]  # fmt: skip
    title = "Across repeats: mean of the run means and their SD (CPers), per dimension"
    absent, notes = left_out(skipped, rows, "needs 2+ repeats of each item: ")
    return Section("dimensions", title, cols, rows, absent, notes)


def judge_means(run: Run, temperature: float) -> dict[str, dict[str, float]]:
    """``{judge: {item: mean score over repeats and variants}}`` at one temperature."""
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for o in run.outcomes:
        if o.temperature == temperature and o.status == "scored" and math.isfinite(o.score):
            acc[o.judge][o.item_id].append(o.score)
    return {j: {i: float(np.mean(v)) for i, v in items.items()} for j, items in acc.items()}


def judge_agreement_section(run: Run) -> Section:
    """Agreement between judges (item means) per temperature; absent with a single judge, or
    when no two judges scored the same items."""
    cols = ["temperature", "judges", "n_items", "kendall", "spearman", "pearson",
            "exact_agreement", "alpha_interval", "icc_2_1"]  # fmt: skip
    title = "Agreement between judges (item means)"
    # A jury's verdict is made of its jurors' votes: beside them it would only inflate the
    # agreement (the "all judges" row most), so juries are compared with their jurors in
    # their own section (stats/jury.py).
    juries = {o.judge for o in run.outcomes if o.protocol == "jury"}
    # A cascade's verdicts are its stages' own (strong's answers beside strong agree perfectly):
    # it is left out too; its agreement with humans is in its own section.
    cascaded = cascades(run)
    juries |= cascaded
    judged = [j for j in run.judges if j not in juries]
    if len(judged) < 2:
        why = f"needs 2+ judges on the same items (this run has {len(judged)}: {', '.join(judged)})"
        return Section("judge_agreement", title, cols, [], absent=why)
    rows = []
    skipped: dict[str, list[str]] = defaultdict(list)
    for temp in sorted({o.temperature for o in run.outcomes}):
        means = {j: m for j, m in judge_means(run, temp).items() if j not in juries}
        judges = sorted(means)
        items = sorted({i for m in means.values() for i in m})
        matrix = [[means[j].get(i, math.nan) for j in judges] for i in items]
        for a, b in itertools.combinations(range(len(judges)), 2):
            pairs = [[r[a], r[b]] for r in matrix]
            row = _pair_row(temp, f"{judges[a]} ~ {judges[b]}", pairs)
            if row["n_items"] < 2:
                skipped["fewer than 2 items scored by both"].append(f"{row['judges']} T={temp:g}")
            else:
                rows.append(row)
        if len(judges) > 2:
            rows.append(_pair_row(temp, "all judges", matrix))
        if len(judges) == 1:
            skipped[f"only {judges[0]} has per-item scores"].append(f"T={temp:g}")
        elif not judges:
            at_temp = [o for o in run.outcomes if o.temperature == temp]
            skipped[_no_score_reason(at_temp)].append(f"T={temp:g}")
    absent, notes = left_out(skipped, rows, "needs 2+ judges scoring the same items: ")
    notes += [f"not shown: {name} (a cascade: its verdicts are its stages' own; its agreement with humans is in "
              "its own section)" for name in sorted(cascaded)]
    return Section("judge_agreement", title, cols, rows, absent, notes)


def _pair_row(temp: float, label: str, matrix: list[list[float]]) -> dict[str, Any]:
    complete = [r for r in matrix if all(math.isfinite(v) for v in r)]
    two = len(matrix[0]) == 2 if matrix else False
    x = [r[0] for r in complete]
    y = [r[1] for r in complete]
    return {
        "temperature": temp, "judges": label, "n_items": len(complete),
        "kendall": correlation(x, y, method="kendall") if two else math.nan,
        "spearman": correlation(x, y, method="spearman") if two else math.nan,
        "pearson": correlation(x, y, method="pearson") if two else math.nan,
        "exact_agreement": percent_agreement(complete),
        "alpha_interval": krippendorff_alpha(matrix, level="interval"),
        "icc_2_1": icc(complete, form="ICC(2,1)") if complete else math.nan,
    }  # fmt: skip


def table_repeat_matrix(
    rows: Sequence[dict[str, Any]], repeat_columns: Sequence[str]
) -> list[list[float]]:
    """Items x repeats scores from table rows: one column holding a list of repeated scores per
    row (e.g. Prometheus' ``gpt4_score`` "[3, 2, 3]"), or several columns holding one repeat
    each; short rows are padded with NaN."""

    def repeats(row: dict[str, Any]) -> list[float]:
        if len(repeat_columns) == 1:
            cells = parse_list(row.get(repeat_columns[0]))
        else:
            cells = [row.get(c) for c in repeat_columns]
        return [to_float(v, where=f"column {', '.join(repeat_columns)}") for v in cells]

    matrix = [repeats(r) for r in rows]
    width = max((len(m) for m in matrix), default=0)
    return [m + [math.nan] * (width - len(m)) for m in matrix]


def table_consistency_section(
    matrix: Sequence[Sequence[float]],
    groups: Sequence[str] | None = None,
    *,
    small: float = 1.0,
    large: float = 5.0,
) -> Section:
    """Consistency across repeats stored in a plain table (:func:`table_repeat_matrix`), per
    group (``groups``: each row's label) and pooled."""
    labels = list(groups) if groups else []
    out = []
    for g in [*dict.fromkeys(labels), "all"]:
        sub = [list(m) for m, lab in zip(matrix, labels or ["all"] * len(matrix), strict=True)
               if g in (lab, "all")]  # fmt: skip
        rc = repeat_consistency(sub, small=small, large=large).as_dict() if sub else {}
        out.append({"group": g, **rc, "flip_rate": flip_rate(sub) if sub else math.nan})
    cols = ["group", "n_items", "n_repeats", "mean_spearman", "share_small", "share_medium",
            "share_large", "alpha_ordinal", "alpha_interval", "mean_sd", "flip_rate"]  # fmt: skip
    return Section("consistency", "Consistency across repeats", cols, out)
