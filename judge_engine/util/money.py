"""How an amount of dollars is written, wherever one is printed (``plan``, the run's summary and
progress, ``show``, ``status``, budget messages, ``calibrate`` and the ``stats`` of a cascade).

A call costs fractions of a cent and a run can cost hundreds of dollars, so a fixed number of
decimals is wrong at one end or the other (``$0.0000`` for a call, ``$2.955e-05`` from ``str``).
Under a dollar an amount keeps three significant digits, written out in full; from a dollar
on, cents. What a budget leaves is written to the precision of what was used
(:func:`dollars_left`). The viewer's ``money`` (``viewer/static/dom.js``) follows the same rule.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

SIGNIFICANT = 3
"""Significant digits kept below a dollar: enough to compare two judges' calls, no false precision."""


def dollars(amount: float) -> str:
    """``amount`` as dollars: ``$0``, ``$0.0000296``, ``$0.0123``, ``$0.50``, ``$12.35``, ``$1,234.50``.

    Below $1, three significant digits, never in exponent notation, with no trailing zero past
    the cents; from $1 on, two decimals with thousands separators. A negative amount keeps its sign
    (``-$0.01``); NaN and infinities are written as Python writes them.
    """
    if not math.isfinite(amount):
        return f"${amount}"
    if amount < 0:
        return "-" + dollars(-amount)
    if amount == 0:
        return "$0"
    if round(amount, 2) >= 1:
        return f"${amount:,.2f}"
    decimals = SIGNIFICANT - 1 - math.floor(math.log10(amount))
    # Rounded as the amount is written (2.955e-05 -> 0.0000296), not as its binary value is.
    rounded = Decimal(repr(amount)).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    whole, _, fraction = f"{rounded:f}".partition(".")
    return f"${whole}.{fraction.rstrip('0').ljust(2, '0')}"  # at least cents: $0.50, not $0.5


def dollars_left(left: float, used: float) -> str:
    """What a budget leaves once ``used`` dollars are spent or held, written to the precision
    ``used`` is written with (:func:`dollars`), so that a use shows: ``$4.9954`` left of $5 after
    $0.0046, where cents would say ``$5.00``. Trailing zeros past the cents are dropped."""
    if used <= 0 or not math.isfinite(used) or not math.isfinite(left) or left < 1:
        return dollars(left)
    decimals = max(2, SIGNIFICANT - 1 - math.floor(math.log10(used)))
    rounded = Decimal(repr(left)).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    whole, _, fraction = f"{rounded:,f}".partition(".")
    return f"${whole}.{fraction.rstrip('0').ljust(2, '0')}"
