"""Small array helpers shared by the statistics modules (private)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


def is_missing(value: Any) -> bool:
    """True for ``None`` and float NaN: the two spellings of "no rating"."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def as_float_array(values: Any, *, name: str = "values") -> FloatArray:
    """Convert to a float array; ``None`` becomes NaN. Raises ``ValueError`` on non-numbers."""
    try:
        return np.array(
            [math.nan if v is None else v for v in np.asarray(values, dtype=object).ravel()],
            dtype=float,
        ).reshape(np.shape(values))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric (None or NaN for missing): {exc}") from exc


def paired_finite(x: Any, y: Any) -> tuple[FloatArray, FloatArray]:
    """Two equal-length numeric vectors with every pair holding a missing value dropped."""
    xa = as_float_array(x, name="x").ravel()
    ya = as_float_array(y, name="y").ravel()
    if xa.shape != ya.shape:
        raise ValueError(f"x and y must have the same length, got {xa.size} and {ya.size}")
    keep = np.isfinite(xa) & np.isfinite(ya)
    return xa[keep], ya[keep]


def paired_labels(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[Hashable, Hashable]]:
    """Pairs of labels from two raters, dropping pairs where either label is missing."""
    if len(a) != len(b):
        raise ValueError(f"the two raters must rate the same items, got {len(a)} and {len(b)}")
    return [(x, y) for x, y in zip(a, b, strict=True) if not (is_missing(x) or is_missing(y))]


def ratings_matrix(ratings: Any) -> list[list[Hashable]]:
    """Validate an items x raters matrix of labels (rows may hold ``None``/NaN for missing)."""
    rows = [list(row) for row in ratings]
    if rows and len({len(row) for row in rows}) != 1:
        raise ValueError(
            "ratings must be a rectangular items x raters matrix (use None for missing)"
        )
    return rows
