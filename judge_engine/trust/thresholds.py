"""The thresholds file: what ``calibrate`` found, for a cascade's config to name (``cascade:
{stages: [...], thresholds: FILE}``), its one versioned definition.

It is the document :func:`judge_engine.trust.calibration.calibrate` returns (the risk, delta and
delta rule, the guarantee, coverage, per stage its threshold, bound, answered, errors, offered
items and delta, the calibration set's size and a digest of its rows) with a header:

============  =======  ==================================================================
document      version  what changed
============  =======  ==================================================================
thresholds    1        ``{"format": "judge-engine-thresholds", "version": 1, "created_at",
                       "package_version", ...the document}``; ``guarantee`` is the
                       guarantee in words (every file is a stage guarantee's)
thresholds    2        ``guarantee`` names the guarantee, ``stage`` or ``cascade``, and
                       ``statement`` says it in words; a cascade guarantee's file has the
                       cascade's ``bound`` (its stages have none, and no ``delta_rule``)
============  =======  ==================================================================

:func:`write_thresholds` writes it atomically (and checks that it reads back);
:func:`read_thresholds` reads it with checks, each error naming the file and field; a file from
a newer judge-engine is refused rather than misread.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from judge_engine._version import __version__
from judge_engine.errors import CalibrationError
from judge_engine.stats.risk_control import DELTA_RULES, GUARANTEES, DeltaRule, guarantee
from judge_engine.util import jsonio

THRESHOLDS_FORMAT = "judge-engine-thresholds"
THRESHOLDS_VERSION = 2


@dataclass(frozen=True, slots=True)
class StageThreshold:
    """One stage of a thresholds file."""

    stage: str
    threshold: float | None
    """The stage answers an item whose confidence is >= this; None: it answers nothing (and a
    cascade does not ask it)."""
    bound: float | None
    """The bound of its error rate at its threshold (a stage guarantee's; None under a cascade
    guarantee, whose bound is the cascade's)."""
    answered: int
    errors: int
    offered: int
    """Calibration items that reached the stage: ``offered / items`` is the share a cascade
    sends it, ``(offered - answered) / offered`` its escalation rate."""
    delta: float


@dataclass(frozen=True, slots=True)
class Thresholds:
    """A thresholds file: the one definition of its format (module docstring)."""

    risk: float
    delta: float
    delta_rule: DeltaRule | None
    """How a stage guarantee's delta is shared among the stages (None under a cascade guarantee)."""
    min_items: int
    items: int
    """The calibration set's size (items)."""
    rows: int
    digest: str
    """A hash of the rows the thresholds were calibrated on (``b2:...``)."""
    coverage: float
    stages: tuple[StageThreshold, ...]
    created_at: str
    package_version: str
    document: Mapping[str, Any]
    """The whole document as written (what ``calibrate`` reported)."""
    version: int = THRESHOLDS_VERSION
    kind: str = "stage"
    """The guarantee: ``stage`` or ``cascade`` (:data:`~judge_engine.stats.risk_control.GUARANTEES`)."""
    bound: float | None = None
    """A cascade guarantee's bound of the cascade's error rate (None for a stage guarantee)."""

    def stage(self, name: str) -> StageThreshold:
        """The stage called ``name``; KeyError if the file has none."""
        for entry in self.stages:
            if entry.stage == name:
                return entry
        raise KeyError(name)

    @property
    def statement(self) -> str:
        """The guarantee in words."""
        return guarantee(self.risk, self.delta, self.delta_rule or "bonferroni", len(self.stages), self.kind)


def thresholds_document(document: Mapping[str, Any]) -> dict[str, Any]:
    """The file's content for a :func:`calibrate` document: its header, then the document."""
    return {"format": THRESHOLDS_FORMAT, "version": THRESHOLDS_VERSION,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"), "package_version": __version__,
            **document}


def write_thresholds(document: Mapping[str, Any], path: str | Path) -> Path:
    """Write a :func:`calibrate` document as a thresholds file (atomically); returns the path."""
    target = Path(path)
    content = thresholds_document(document)
    read_document(content, where=str(target))  # what is written reads back
    partial = target.with_name(target.name + ".partial")
    try:
        partial.write_text(jsonio.indented(content), encoding="utf-8")
        os.replace(partial, target)
    except OSError as exc:
        raise CalibrationError(f"{target}: cannot write the thresholds file ({exc.strerror or exc})") from None
    return target


def read_thresholds(path: str | Path) -> Thresholds:
    """Read a thresholds file.

    Raises:
        CalibrationError: the file is missing, not JSON, not a thresholds file, from a newer
            judge-engine, or a field is missing or out of range (the file and field named).
    """
    where = str(path)
    try:
        raw = jsonio.loads(Path(path).read_bytes())
    except OSError as exc:
        raise CalibrationError(f"{where}: cannot read the thresholds file ({exc.strerror or exc})") from None
    except jsonio.JSONDecodeError as exc:
        raise CalibrationError(f"{where}: not JSON ({exc})") from None
    return read_document(raw, where=where)


def read_document(raw: Any, *, where: str) -> Thresholds:
    """A thresholds file's parsed content, checked (:func:`read_thresholds`)."""
    if not isinstance(raw, Mapping) or raw.get("format") != THRESHOLDS_FORMAT:
        raise CalibrationError(f"{where}: not a judge-engine thresholds file (no \"format\": \"{THRESHOLDS_FORMAT}\")")
    version = raw.get("version")
    if not isinstance(version, int) or version < 1:
        raise CalibrationError(f"{where}: version must be a whole number >= 1 (got {version!r})")
    if version > THRESHOLDS_VERSION:
        raise CalibrationError(f"{where}: thresholds format {version} was written by a newer judge-engine "
                               f"(this one reads up to {THRESHOLDS_VERSION}); upgrade judge-engine to read it")
    field = _Fields(raw, where)
    kind = raw.get("guarantee") if version >= 2 else "stage"
    if kind not in GUARANTEES:
        raise CalibrationError(f"{where}: guarantee must be one of {', '.join(GUARANTEES)} (got {kind!r})")
    rule = raw.get("delta_rule") if kind == "cascade" else field.get("delta_rule", str)
    if kind == "stage" and rule not in DELTA_RULES:
        raise CalibrationError(f"{where}: delta_rule must be one of {', '.join(DELTA_RULES)} (got {rule!r})")
    calibration = _Fields(field.get("calibration", Mapping), f"{where}: calibration")
    entries = field.get("stages", list)
    if not entries:
        raise CalibrationError(f"{where}: stages is empty")
    stages = tuple(_stage_entry(entry, f"{where}: stages[{i}]", kind) for i, entry in enumerate(entries))
    names = [s.stage for s in stages]
    if len(set(names)) != len(names):
        raise CalibrationError(f"{where}: stages: a stage named more than once ({', '.join(names)})")
    bound = None
    if kind == "cascade" and any(s.threshold is not None for s in stages):
        bound = field.unit("bound")
    return Thresholds(
        risk=field.share("risk"), delta=field.share("delta"), delta_rule=None if kind == "cascade" else rule,
        min_items=field.count("min_items", least=1), items=calibration.count("items"),
        rows=calibration.count("rows"), digest=calibration.get("digest", str), coverage=field.unit("coverage"),
        stages=stages, created_at=field.get("created_at", str), package_version=field.get("package_version", str),
        document=dict(raw), version=version, kind=kind, bound=bound)


def _stage_entry(raw: Any, where: str, kind: str) -> StageThreshold:
    field = _Fields(raw, where)
    threshold = None if field.raw.get("threshold") is None else field.unit("threshold")
    bound = None if field.raw.get("bound") is None else field.unit("bound")
    entry = StageThreshold(stage=field.get("stage", str), threshold=threshold, bound=bound,
                           answered=field.count("answered"), errors=field.count("errors"),
                           offered=field.count("offered"), delta=field.share("delta"))
    if entry.errors > entry.answered or entry.answered > entry.offered:
        raise CalibrationError(f"{where}: needs errors <= answered <= offered (got {entry.errors}, "
                               f"{entry.answered}, {entry.offered})")
    if threshold is None and (entry.answered or bound is not None):
        raise CalibrationError(f"{where}: a stage with no threshold answers nothing and has no bound")
    if kind == "stage" and threshold is not None and bound is None:
        raise CalibrationError(f"{where}: a stage guarantee's stage with a threshold has the bound it passed with")
    return entry


class _Fields:
    """Typed access to a mapping's fields, each error naming the file and field."""

    def __init__(self, raw: Any, where: str) -> None:
        if not isinstance(raw, Mapping):
            raise CalibrationError(f"{where}: expected an object (got {type(raw).__name__})")
        self.raw, self.where = raw, where

    def get(self, name: str, kind: type[Any]) -> Any:
        value = self.raw.get(name)
        if not isinstance(value, kind):
            raise CalibrationError(f"{self.where}: {name} is missing or not a {getattr(kind, '__name__', kind)} "
                                   f"(got {value!r})")
        return value

    def _number(self, name: str) -> float:
        value = self.raw.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise CalibrationError(f"{self.where}: {name} is missing or not a number (got {value!r})")
        return float(value)

    def share(self, name: str) -> float:
        value = self._number(name)
        if not 0 < value < 1:
            raise CalibrationError(f"{self.where}: {name} {value} is not strictly between 0 and 1")
        return value

    def unit(self, name: str) -> float:
        value = self._number(name)
        if not 0 <= value <= 1:
            raise CalibrationError(f"{self.where}: {name} {value} is outside [0, 1]")
        return value

    def count(self, name: str, *, least: int = 0) -> int:
        value = self.raw.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise CalibrationError(f"{self.where}: {name} must be a whole number >= {least} (got {value!r})")
        return value
