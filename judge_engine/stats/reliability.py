"""Reliability of ratings: every agreement coefficient of an items x raters matrix by name, with
percentile bootstrap intervals over items.

The raters are whatever the columns are: a judge's repeats (test-retest reliability, as in
Prometheus 2's alpha across three runs and CPers' ICC), or a human and a judge (``meta
--agreement``). Names are the report's column names:

==================  ===============================================================
``cohen_kappa``     Cohen's kappa, two raters (plain; ``kappa_quadratic`` weighted)
``alpha_ordinal``   Krippendorff's alpha, ordinal (``alpha_interval``, ``alpha_nominal``)
``icc_1_1`` ...     Shrout & Fleiss' ICC(1,1), (2,1), (3,1), (1,k), (2,k), (3,k)
``fleiss_kappa``    Fleiss' kappa over complete items, the distinct scores as categories
``randolph_kappa``  Randolph's free-marginal kappa, k = ``n_categories`` (default: the
                    distinct scores seen)
==================  ===============================================================
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from judge_engine.stats._arrays import FloatArray, as_float_array
from judge_engine.stats._coefficients import ICC_FORMS, IccForm
from judge_engine.stats.bootstrap import (
    Alpha,
    Fleiss,
    Icc,
    ItemStatistic,
    Kappa,
    Randolph,
    bootstrap_interval,
    point,
)
from judge_engine.stats.runs import Run, score_matrices
from judge_engine.stats.sections import Section, left_out, where

ICC_COLUMNS: dict[str, IccForm] = {
    f"icc_{form[4]}_{form[6]}": form for form in ICC_FORMS
}  # icc_1_1 -> "ICC(1,1)", ..., icc_3_k -> "ICC(3,k)"
MULTIRATER = ("fleiss_kappa", "randolph_kappa")
REPEATS = ("alpha_ordinal", "alpha_interval", *ICC_COLUMNS, *MULTIRATER)
"""What ``stats --reliability`` reports for a judge's repeats."""
PAIRWISE = ("cohen_kappa", "kappa_quadratic")
"""Coefficients defined for two raters only."""


def _matrix(ratings: Any) -> FloatArray:
    x = as_float_array(ratings, name="ratings")
    return x if x.ndim == 2 else np.zeros((0, 2))


def count_table(ratings: Any) -> tuple[FloatArray, int]:
    """Fleiss' items x categories counts over the complete rows (the distinct scores are the
    categories), and how many distinct scores occur."""
    x = _matrix(ratings)
    x = x[np.isfinite(x).all(axis=1)] if x.size else x
    values = np.unique(x)
    table = (x[:, :, None] == values[None, None, :]).sum(axis=1).astype(float)
    return table, len(values)


def statistic(name: str, ratings: Any, *, n_categories: int | None = None) -> ItemStatistic:
    """The named coefficient of an items x raters numeric matrix (NaN = missing), ready for
    :func:`~judge_engine.stats.bootstrap.point` and
    :func:`~judge_engine.stats.bootstrap.bootstrap_interval`.

    Raises:
        ValueError: an unknown name, or a two-rater coefficient for another number of raters.
    """
    x = _matrix(ratings)
    if name in PAIRWISE:
        if x.shape[1] != 2:
            raise ValueError(f"{name} needs exactly two raters, got {x.shape[1]}")
        a, b = ([None if math.isnan(v) else v for v in col] for col in x.T)
        return Kappa(a, b, weights="quadratic" if name == "kappa_quadratic" else None)
    if name.startswith("alpha_"):
        level = name.removeprefix("alpha_")
        if level not in ("nominal", "ordinal", "interval"):
            raise ValueError(f"unknown coefficient {name!r}")
        rows = [[None if math.isnan(v) else v for v in r] for r in x.tolist()]
        return Alpha(rows, level=level)  # type: ignore[arg-type]
    if name in ICC_COLUMNS:
        return Icc(x, form=ICC_COLUMNS[name])
    if name in MULTIRATER:
        table, seen = count_table(x)
        if name == "fleiss_kappa":
            return Fleiss(table)
        return Randolph(table, n_categories=n_categories if n_categories is not None else seen)
    raise ValueError(f"unknown coefficient {name!r}")


def coefficients(
    ratings: Any,
    names: Sequence[str],
    *,
    bootstrap: int = 0,
    seed: int = 0,
    confidence: float = 0.95,
    n_categories: int | None = None,
) -> dict[str, dict[str, float]]:
    """``{name: {"value", "n", "ci_low", "ci_high"}}`` for each named coefficient.

    ``n`` is the number of items the coefficient counts (complete rows for ICC and the kappas
    of many raters, rows with two ratings for alpha); the interval is a percentile bootstrap over
    those items with ``bootstrap`` resamples (NaN when 0).
    """
    out: dict[str, dict[str, float]] = {}
    for name in names:
        stat = statistic(name, ratings, n_categories=n_categories)
        low, high = (
            bootstrap_interval(stat, n_resamples=bootstrap, confidence=confidence, seed=seed)
            if bootstrap
            else (math.nan, math.nan)
        )
        out[name] = {"value": point(stat), "n": stat.n_items, "ci_low": low, "ci_high": high}
    return out


def long_rows(
    where: Mapping[str, Any], results: Mapping[str, Mapping[str, float]]
) -> list[dict[str, Any]]:
    """One report row per coefficient: the ``where`` columns, then statistic, n, value, CI."""
    return [
        {**where, "statistic": name, "n": int(r["n"]), "value": r["value"],
         "ci_low": r["ci_low"], "ci_high": r["ci_high"]}
        for name, r in results.items()
    ]  # fmt: skip


COLUMNS = ["statistic", "n", "value", "ci_low", "ci_high"]


def reliability_section(
    run: Run, *, bootstrap: int = 0, seed: int = 0, n_categories: int | None = None
) -> Section:
    """Test-retest reliability per judge, temperature and variant: the repeats as raters.

    Krippendorff's alpha (ordinal, interval), the six ICC forms, Fleiss' and Randolph's kappa,
    each with a bootstrap interval over items when ``bootstrap`` > 0.
    """
    rows: list[dict[str, Any]] = []
    skipped: dict[str, list[str]] = {}
    for key, (_, matrix) in sorted(score_matrices(run.outcomes).items(), key=lambda kv: kv[0]):
        judge, temperature, variant = key
        if len(matrix[0]) < 2:
            skipped.setdefault("1 repeat per item", []).append(where(*key))
        elif not np.isfinite(np.array(matrix, dtype=float)).any():
            skipped.setdefault("no score to compare", []).append(where(*key))
        else:
            results = coefficients(matrix, REPEATS, bootstrap=bootstrap, seed=seed,
                                   n_categories=n_categories)  # fmt: skip
            at = {"judge": judge, "temperature": temperature, "variant": variant}
            rows += long_rows(at, results)
    absent, notes = left_out(skipped, rows, "needs 2+ repeats of each item: ")
    return Section("reliability", _title(bootstrap),
                   ["judge", "temperature", "variant", *COLUMNS], rows, absent, notes)  # fmt: skip


def table_reliability_section(
    matrix: Sequence[Sequence[float]],
    groups: Sequence[str] | None = None,
    *,
    bootstrap: int = 0,
    seed: int = 0,
    n_categories: int | None = None,
) -> Section:
    """:func:`reliability_section` for repeats stored in a table: per group and pooled."""
    labels = list(groups) if groups else ["all"] * len(matrix)
    rows: list[dict[str, Any]] = []
    for g in [*dict.fromkeys(labels), "all"] if groups else ["all"]:
        sub = [m for m, lab in zip(matrix, labels, strict=True) if g in (lab, "all")]
        results = coefficients(sub, REPEATS, bootstrap=bootstrap, seed=seed,
                               n_categories=n_categories)  # fmt: skip
        rows += long_rows({"group": g}, results)
    return Section("reliability", _title(bootstrap), ["group", *COLUMNS], rows)


def _title(bootstrap: int) -> str:
    interval = f", 95% bootstrap interval over items ({bootstrap} resamples)" if bootstrap else ""
    return f"Reliability across repeats (repeats as raters{interval})"
