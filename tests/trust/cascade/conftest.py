"""Cascade test harness: pairwise-annotators judges against the fake server (its judge of the
model's strength gives log-probs that track correctness), a thresholds file written by hand,
and readers of the run's lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from judge_engine.fake import FakeServer
from judge_engine.rundir.store import latest_outcome_records
from judge_engine.trust.calibration import calibrate
from judge_engine.trust.thresholds import write_thresholds
from tests.harness import TEST_KEY_ENV, Job as CascadeJob

WORDS = ("river", "lamp", "garden", "violin", "harbour", "pepper", "meadow", "engine", "lantern", "orchard",
         "copper", "falcon", "marble", "thistle", "canyon", "saffron")
MODELS = {"cheap": "openai/gpt-4o-mini", "mid": "openai/gpt-4.1-mini", "strong": "openai/gpt-4o"}
"""The fake answers each by its name's strength (weak, weak, strong) with its own noise per item."""


def pair(n: int) -> dict[str, str]:
    a, b, c = WORDS[n % 16], WORDS[(3 * n + 5) % 16], WORDS[(7 * n + 2) % 16]
    return {"id": f"p{n:03d}", "instruction": f"Which is the better note on {a}? ({n})",
            "response_a": f"A {b} by the {a}, described plainly ({n}).",
            "response_b": f"The {c} and the {a}: a longer and warmer note, number {n}."}


def cascade_job(tmp_path: Path, server: FakeServer | None, *, items: int = 24, thresholds: dict[str, float | None],
                judge: dict[str, Any] | None = None, judges: dict[str, dict[str, Any]] | None = None,
                juries: list[dict[str, Any]] | None = None, stages: list[str] | None = None,
                cascade: dict[str, Any] | None = None) -> CascadeJob:
    """A job of three pairwise-annotators judges (cheap, mid, strong) as a cascade, with a
    thresholds file of ``thresholds`` (stage -> threshold; None: the stage answers nothing)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    with (tmp_path / "items.jsonl").open("w", encoding="utf-8") as handle:
        for n in range(items):
            handle.write(json.dumps(pair(n)) + "\n")
    (tmp_path / "pool.jsonl").write_text("".join(json.dumps(
        {"instruction": f"q{n}", "outputs": ["yes", "no"], "preferences": {"human": 1 + n % 2}}) + "\n"
        for n in range(9)), encoding="utf-8")
    base = {"api_base": server.base_url if server else None, "api_key_env": TEST_KEY_ENV, "timeout_s": 10,
            "protocol": "pairwise-annotators", "protocol_options": {"examples_file": "pool.jsonl"},
            "retries": {"backoff_max_s": 0.01, "transport": 2}, "limits": {"concurrency": 4},
            "batch": {"poll_interval_s": 0.05}}
    config_judges = [{**base, "name": name, "model": model, **(judge or {}), **(judges or {}).get(name, {})}
                     for name, model in MODELS.items()]
    names = stages or list(thresholds)
    write_thresholds_file(tmp_path / "thresholds.json", names, thresholds)
    config = {"dataset": {"path": "items.jsonl"}, "judges": config_judges, "juries": juries or [],
              "cascade": {"stages": names, "thresholds": "thresholds.json", **(cascade or {})},
              "output": {"dir": "runs"}, "cache": {"dir": "cache"}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return CascadeJob(tmp_path, path)


def write_thresholds_file(path: Path, stages: list[str], thresholds: dict[str, float | None],
                          offered: dict[str, int] | None = None, items: int = 100, guarantee: str = "stage") -> Path:
    """A valid thresholds file with the given thresholds (the rest of the document made up),
    calibrated under the ``stage`` or ``cascade`` guarantee."""
    document = calibrate([{"item": "x", "stage": s, "prediction": "A", "confidence": 0.5, "label": "A"}
                          for s in stages], stages=stages, risk=0.2, delta=0.2, guarantee=guarantee)  # type: ignore[arg-type]
    offered = offered or {}
    for entry in document["stages"]:
        threshold = thresholds.get(entry["stage"])
        reach = offered.get(entry["stage"], items)
        entry.update(threshold=threshold, bound=None if threshold is None or guarantee == "cascade" else 0.1,
                     offered=reach, answered=0 if threshold is None else reach // 2, errors=0)
    if guarantee == "cascade":
        document["bound"] = 0.1
    document["calibration"]["items"] = items
    write_thresholds(document, path)
    return path


def lines(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "outcomes.jsonl").read_text(encoding="utf-8").splitlines() if line]


def latest(run: Path, judge: str) -> dict[str, Any]:
    """Item id -> the judge's latest outcome record there."""
    return {r.item_id: r for r in latest_outcome_records(run).values() if r.judge == judge}


def decisions(run: Path) -> dict[str, dict[str, Any]]:
    """Stage -> item -> (prediction, confidence) from its item lines."""
    return {stage: {item: ((r.verdict or {}).get("prediction") if r.scored else None, (r.confidence or {}).get("value"))
                    for item, r in latest(run, f"{stage}:item").items()} for stage in MODELS}


def expected(full: dict[str, dict[str, Any]], thresholds: dict[str, float | None], items: list[str]
             ) -> dict[str, tuple[str | None, Any, set[str]]]:
    """Item -> (the stage that answers, its prediction, the stages asked), from every stage's
    decision on every item (a run with the cascade off) and the thresholds."""
    out = {}
    for item in items:
        asked: set[str] = set()
        answer: tuple[str | None, Any] = (None, None)
        for stage, threshold in thresholds.items():
            if threshold is None:
                continue
            asked.add(stage)
            prediction, confidence = full[stage][item]
            if prediction is not None and confidence is not None and confidence >= threshold:
                answer = (stage, prediction)
                break
        out[item] = (*answer, asked)
    return out
