"""The pieces kappa, alpha and the ICC are made of (private): the scales' names, the count table,
the ANOVA's mean squares and the ICC forms built from them. The point estimates
(:mod:`judge_engine.stats.agreement`) and their bootstrap (:mod:`judge_engine.stats.bootstrap`)
both build on them, so neither imports the other's internals.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any, Literal

import numpy as np

from judge_engine.stats._arrays import FloatArray, as_float_array, is_missing, ratings_matrix

Weights = Literal["linear", "quadratic"] | None
AlphaLevel = Literal["nominal", "ordinal", "interval", "ratio"]
IccForm = Literal["ICC(1,1)", "ICC(2,1)", "ICC(3,1)", "ICC(1,k)", "ICC(2,k)", "ICC(3,k)"]


def category_counts(
    ratings: Sequence[Sequence[Hashable]], categories: Sequence[Hashable] | None = None
) -> tuple[FloatArray, list[Hashable]]:
    """Turn an items x raters label matrix into the items x categories count table.

    Returns:
        ``(table, categories)``; missing ratings are not counted.
    """
    rows = ratings_matrix(ratings)
    cats = (
        list(categories)
        if categories is not None
        else sorted({v for row in rows for v in row if not is_missing(v)}, key=repr)
    )
    index = {c: i for i, c in enumerate(cats)}
    table = np.zeros((len(rows), len(cats)))
    for i, row in enumerate(rows):
        for v in row:
            if not is_missing(v):
                if v not in index:
                    raise ValueError(f"label {v!r} is not in categories")
                table[i, index[v]] += 1
    return table, cats


ICC_FORMS: tuple[IccForm, ...] = (
    "ICC(1,1)", "ICC(2,1)", "ICC(3,1)", "ICC(1,k)", "ICC(2,k)", "ICC(3,k)",
)  # fmt: skip
"""Shrout & Fleiss' six forms, in their order."""


def mean_squares(
    ss_total: Any, ss_rows: Any, ss_cols: Any, n: int, k: int
) -> tuple[Any, Any, Any, Any]:
    """(BMS, WMS, JMS, EMS) of the two-way ANOVA from its sums of squares (scalars or arrays)."""
    bms = ss_rows / (n - 1)
    wms = (ss_total - ss_rows) / (n * (k - 1))
    jms = ss_cols / (k - 1)
    ems = (ss_total - ss_rows - ss_cols) / ((n - 1) * (k - 1))
    return bms, wms, jms, ems


def icc_from_mean_squares(
    bms: Any, wms: Any, jms: Any, ems: Any, n: int, k: int, form: IccForm, *, floor: float = 0.0
) -> FloatArray:
    """One ICC form from the ANOVA mean squares (arrays: one value per resample).

    A denominator that is zero up to rounding (mean squares cancelling) gives NaN: dividing by its
    1e-16 residue would report an ICC of -1e16 for one rater order and NaN for another. ``floor``
    is a variance the rounding is measured against when the mean squares are all rounding
    residue themselves (a bootstrap resample of constant rows).
    """
    bms, wms, jms, ems = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (bms, wms, jms, ems))
    num, den = {
        "ICC(1,1)": (bms - wms, bms + (k - 1) * wms),
        "ICC(2,1)": (bms - ems, bms + (k - 1) * ems + k * (jms - ems) / n),
        "ICC(3,1)": (bms - ems, bms + (k - 1) * ems),
        "ICC(1,k)": (bms - wms, bms),
        "ICC(2,k)": (bms - ems, bms + (jms - ems) / n),
        "ICC(3,k)": (bms - ems, bms),
    }[form]
    scale = np.abs(bms) + np.abs(wms) + np.abs(jms) + np.abs(ems)
    ok = den > 1e-12 * np.maximum(scale, floor)
    out: FloatArray = np.full(num.shape, math.nan)
    np.divide(num, den, out=out, where=ok)
    return out


def check_icc_form(form: str) -> None:
    """Raise ``ValueError`` unless ``form`` is one of :data:`ICC_FORMS`."""
    if form not in ICC_FORMS:
        raise ValueError(f"form must be one of {', '.join(ICC_FORMS)}, not {form!r}")


def complete_rows(ratings: Any) -> FloatArray:
    """The items x raters matrix as floats, items with a missing rating dropped.

    Raises:
        ValueError: a matrix that is not 2-D, or non-numeric ratings.
    """
    x = as_float_array(ratings, name="ratings")
    if x.size == 0:
        return np.zeros((0, 0))
    if x.ndim != 2:
        raise ValueError("ratings must be an items x raters matrix")
    return x[np.isfinite(x).all(axis=1)]
