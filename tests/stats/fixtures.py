"""Hand-written run directories for the stats tests (no engine needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def outcome(
    item: str, judge: str, temperature: float, repeat: int, score: float | None, **extra: Any
) -> dict[str, Any]:
    """One outcomes.jsonl record."""
    status = "scored" if score is not None else "unscored"
    return {
        "task_id": f"{judge}-{item}-{temperature}-{repeat}-{extra.get('variant', '')}",
        "item_id": item, "judge": judge, "protocol": "gemba-mqm", "model": f"m/{judge}",
        "temperature": temperature, "repeat": repeat, "variant": "", "status": status,
        "score": score, "scores": {}, "verdict": None,
        **({"reason": "unparseable", "reason_code": "unreadable"} if score is None else {}), **extra,
    }  # fmt: skip


def write_run(root: Path, records: list[dict[str, Any]], *, torn: bool = False) -> Path:
    """A run directory with run.json and outcomes.jsonl (optionally a torn last line)."""
    root.mkdir(parents=True, exist_ok=True)
    judges = sorted({r["judge"] for r in records})
    manifest = {
        "format": "judge-engine-run", "version": 1, "run_id": "r1", "status": "completed", "config": {},
        "judges": [{"name": j, "model": f"m/{j}", "protocol": "gemba-mqm", "protocol_version": "1",
                    "temperatures": [0.0, 1.0], "repeats": 3, "score_range": None}
                   for j in judges],
        "counts": {"outcomes": len(records)},
    }  # fmt: skip
    (root / "run.json").write_text(json.dumps(manifest), encoding="utf-8")
    lines = [json.dumps(r) for r in records]
    text = "\n".join(lines) + "\n" + ('{"task_id": "torn", "item' if torn else "")
    (root / "outcomes.jsonl").write_text(text, encoding="utf-8")
    return root


# judge "a": 4 items x 3 repeats at T=0 (stable) and T=1 (noisy); judge "b" once at T=0.
A_T0 = {"i1": [-1, -1, -1], "i2": [-5, -5, -6], "i3": [0, 0, 0], "i4": [-10, -10, -10]}
A_T1 = {"i1": [-1, -6, -1], "i2": [-5, -5, None], "i3": [0, -25, 0], "i4": [-10, -11, -10]}
B_T0 = {"i1": -2, "i2": -5, "i3": 0, "i4": -12}


def sample_records() -> list[dict[str, Any]]:
    """Records of a small two-judge run with repeats, temperatures and one unscored task."""
    records = []
    for temp, table in ((0.0, A_T0), (1.0, A_T1)):
        for item, scores in table.items():
            for rep, score in enumerate(scores):
                records.append(outcome(item, "a", temp, rep, score))
    records += [outcome(item, "b", 0.0, 0, score) for item, score in B_T0.items()]
    return records
