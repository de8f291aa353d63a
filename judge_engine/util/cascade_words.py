"""The cascade's words: one name for each thing a cascade counts, with its definition, and how its
numbers are written, for every place that talks about a cascade (``calibrate``, ``plan``,
``stats``, ``show``, ``status``, the run's summary and the viewer's data).

The docs' glossary (the Trust page) is generated from :data:`GLOSSARY`, so the words are defined
once. A persisted name keeps its spelling where it differs (a thresholds file's ``offered`` is
:data:`REACHED`; an outcome line's routes are ``answer``, ``escalate`` and ``hold``,
:data:`ROUTE_WORDS`), and the glossary says so.
"""

from __future__ import annotations

import math

STAGE = "stage"
THRESHOLD = "threshold"
REACHED = "reached"
ANSWERED = "answered"
ESCALATED = "escalated"
HELD = "held"
ABSTAINED = "abstained"
NOT_ASKED = "not asked"
ERRORS = "errors"
AGREEMENT = "agreement"
BOUND = "bound"
COVERAGE = "coverage"
SHARE = "share"
STAGE_GUARANTEE = "stage guarantee"
CASCADE_GUARANTEE = "cascade guarantee"

ROUTE_WORDS = {"answer": ANSWERED, "escalate": ESCALATED, "hold": HELD}
"""An outcome line's route at a stage (``asked[].route``), as it is said."""


def then_word(route: str, *, last_of_abstained: bool = False) -> str:
    """What became of an item at a stage asked, as said: its route's word, except at the last
    stage asked of an item the cascade abstained on, where nothing came after the escalation."""
    if last_of_abstained and route == "escalate":
        return ABSTAINED
    return ROUTE_WORDS.get(route, route)

def guarantee_name(kind: str | None) -> str:
    """What a calibration guaranteed, as said: ``stage guarantee`` or ``cascade guarantee``
    (a thresholds file or run from before 0.2 is a stage guarantee's)."""
    return CASCADE_GUARANTEE if kind == "cascade" else STAGE_GUARANTEE


GLOSSARY: dict[str, str] = {
    STAGE_GUARANTEE: "agreement with humans >= 1 - risk on the answered items, with probability >= 1 - delta, from "
                     "each stage's threshold tested on its own, at delta / stages (Bonferroni): so it holds for each "
                     "stage's answers too (`calibrate --guarantee stage`, the default)",
    CASCADE_GUARANTEE: "agreement with humans >= 1 - risk on the items the cascade answers, with probability >= "
                       "1 - delta, from the thresholds tested together at the full delta, along an order of tests "
                       "learned without the labels that test it; one statement about the cascade, which usually "
                       "lets it answer far more (`calibrate --guarantee cascade`)",
    STAGE: "a judge or a jury of the cascade, cheapest first",
    THRESHOLD: "the lowest confidence at which a stage answers an item, written with 4 decimals (as is a "
               "confidence compared with it)",
    NOT_ASKED: "a stage whose calibration found no threshold: it answers nothing, so the cascade never asks it",
    REACHED: "the items that came to a stage: every stage before it escalated them (a thresholds file's "
             "`offered`)",
    ANSWERED: "the items a stage answered: its confidence was at or above its threshold",
    ESCALATED: "the items a stage reached and did not answer, sent on to the next stage (after the last stage, "
               "abstained); a stage with no decision on an item (unreadable, a tie) escalates it too",
    HELD: "an item kept at a stage by an outage there (no decision, not escalated, so the next stage is not paid "
          "for it): `resume --retry` asks that stage again",
    ABSTAINED: "an item no stage was sure enough about: the cascade gives no answer; the method working, not a "
               "failure, counted apart",
    SHARE: "a stage's answered items over all the items (the stages' shares add up to the coverage)",
    COVERAGE: "the cascade's answered items over all the items",
    ERRORS: "answered items whose prediction differs from the human label",
    AGREEMENT: "the share of answered items whose prediction equals the human label (1 - errors / answered)",
    BOUND: "the upper limit of a stage's error rate at its threshold, exact (Clopper-Pearson), at the confidence "
           "level of the stage's test (1 - delta / stages, Bonferroni; 1 - delta with --per-stage-delta); a "
           "threshold passes when its bound is at most the risk. Under the cascade guarantee, the upper limit of "
           "the cascade's error rate among the items it answers, on its test items (at 1 - delta / 3: each of "
           "three folds learns an order of tests once)",
}
"""Each word and what it means (the docs' glossary)."""


def threshold_text(value: float | None) -> str:
    """A threshold (or a confidence shown beside one): 4 decimals, ``-`` for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.4f}"


def compared(confidence: float | None, threshold: float | None) -> tuple[str, str]:
    """A confidence and the threshold it was compared with, each with 4 decimals, or more when 4
    would write two different numbers alike (0.61449 < 0.61450 is not ``0.6145 < 0.6145``)."""
    if confidence is None or threshold is None or confidence == threshold:
        return threshold_text(confidence), threshold_text(threshold)
    for digits in range(4, 13):
        shown = f"{confidence:.{digits}f}", f"{threshold:.{digits}f}"
        if shown[0] != shown[1]:
            return shown
    return f"{confidence!r}", f"{threshold!r}"


def percent(share: float | None) -> str:
    """A share (agreement, coverage, a stage's share) as a percentage with one decimal."""
    if share is None or (isinstance(share, float) and math.isnan(share)):
        return "-"
    return f"{100 * share:.1f}%"


def bound_line(delta: float, stages: int, rule: str) -> str:
    """What ``bound`` means, at this calibration's confidence level: ``bound: the
    96.67%-confidence upper limit of a stage's error rate, Clopper-Pearson (delta 0.1 over 3
    stages, Bonferroni)``."""
    level = delta / stages if rule == "bonferroni" else delta
    how = f"delta {delta:g} over {stages} stages, Bonferroni" if rule == "bonferroni" and stages > 1 else \
        f"delta {delta:g} for each stage"
    return (f"{BOUND}: the {_level(1 - level)}-confidence upper limit of a stage's error rate, Clopper-Pearson "
            f"({how})")


def _level(share: float) -> str:
    return f"{100 * share:.2f}".rstrip("0").rstrip(".") + "%"
