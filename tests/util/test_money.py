"""Dollars as every command writes them (:mod:`judge_engine.util.money`), and what a budget
leaves, written so that a use shows (issue 34: ``status`` said ``budget $5: $5.00 left`` after
$0.0046 was spent). The viewer's ``money`` is held to the same rule over :data:`AMOUNTS` in
Chromium (``tests/viewer/test_browser_cascade.py``)."""

from __future__ import annotations

import pytest

from judge_engine.util.money import dollars, dollars_left

AMOUNTS = (0.0, 2.955e-05, 0.00021, 0.00017085, 0.0042857, 0.0123456, 0.0291, 0.5, 0.1, 0.9996, 0.995, 1.0,
           12.345, 1234.5, 1e-9, -0.01, 0.125, 2.125, 0.0000125, 987654.321, 0.00429)
"""Amounts whose writing is easy to get wrong: three significant digits, halves, a round up to
a dollar, thousands, exponents Python and JavaScript write differently."""


@pytest.mark.parametrize(("left", "used", "written"), [
    (4.9954, 0.0046, "$4.9954"),  # cents would hide the use: $5.00
    (4.99771, 0.00229, "$4.99771"),
    (4.994, 0.006, "$4.994"),  # trailing zeros past the cents dropped
    (2.5, 2.5, "$2.50"),  # a use of dollars: cents
    (1234.5, 0.01, "$1,234.50"),
    (0.5, 4.5, "$0.50"),  # under a dollar: dollars() shows it already
    (5.0, 0.0, "$5.00"),  # nothing used
])
def test_what_a_budget_leaves_shows_what_was_used(left: float, used: float, written: str) -> None:
    assert dollars_left(left, used) == written


def test_amounts_are_written_without_an_exponent() -> None:
    assert all("e" not in dollars(a) for a in AMOUNTS)
