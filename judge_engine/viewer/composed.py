"""Outcomes made of other tasks' outcomes: a jury's (``protocol: jury``), from its jurors'.

Such an outcome sent no request of its own, so it has no transcript: its card names its
**parts**, ``[{"judge", "task_id"}]``, the tasks of the same run whose transcripts stand for
it (the page links each, and no transcript of its own). An item's decision over its
judge's requests (protocol ``item``) is one too. Another kind of composed outcome adds its
card here, with its parts, under its outcome ``protocol`` in :data:`COMPOSED`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from judge_engine.rundir.records import OutcomeRecord
from judge_engine.trust.decisions import ITEM_PROTOCOL, ITEM_SUFFIX
from judge_engine.trust.jury import JURY_PROTOCOL


def jury(outcome: OutcomeRecord) -> dict[str, Any]:
    """A jury's decision and each juror's vote (``jurors``: juror, vote, score, status, reason
    code, weight, task), in the panel's order."""
    verdict = outcome.verdict or {}
    weights: Mapping[str, Any] = verdict.get("weights") or {}
    recorded: Mapping[str, Any] = verdict.get("jurors") or {}
    jurors = [{"judge": str(name), "vote": vote.get("vote"), "score": vote.get("score"),
               "status": str(vote.get("status") or "undone"), "reason_code": vote.get("reason_code"),
               "weight": weights.get(name), "task_id": str(vote.get("task_id") or "")}
              for name, vote in recorded.items() if isinstance(vote, Mapping)]
    return {"kind": "jury", "aggregate": str(verdict.get("aggregate") or ""), "scale": str(verdict.get("scale") or ""),
            "value": verdict.get("value"), "tie": verdict.get("tie"), "voted": verdict.get("voted"),
            "agreement": verdict.get("agreement"), "spread": verdict.get("spread"), "weighted": bool(weights),
            "jurors": jurors, "parts": [{"judge": j["judge"], "task_id": j["task_id"]} for j in jurors if j["task_id"]]}


def item(outcome: OutcomeRecord) -> dict[str, Any]:
    """An item's decision over its judge's requests (:mod:`judge_engine.trust.decisions`): the
    prediction, how it was reached, its confidence, and each request's vote (``requests``:
    variant, repeat, vote, status, reason code, confidence, task), in the line's order."""
    verdict = outcome.verdict or {}
    judge = outcome.judge.removesuffix(ITEM_SUFFIX)
    requests = []
    for key, part in (verdict.get("parts") or {}).items():
        if not isinstance(part, Mapping):
            continue
        variant, _, repeat = str(key).partition("|")
        requests.append({"variant": "" if variant == "-" else variant, "repeat": repeat, "vote": part.get("vote"),
                         "status": str(part.get("status") or "undone"), "reason_code": part.get("reason_code"),
                         "confidence": part.get("confidence"), "task_id": str(part.get("task_id") or "")})
    return {"kind": "item", "judge": judge, "prediction": verdict.get("prediction"),
            "method": str(verdict.get("method") or ""), "used": verdict.get("used"),
            "left_out": dict(verdict.get("left_out") or {}), "confidence": (outcome.confidence or {}).get("value"),
            "score": outcome.score, "reason_code": outcome.reason_code, "requests": requests,
            "parts": [{"judge": judge, "task_id": r["task_id"]} for r in requests if r["task_id"]]}


COMPOSED: dict[str, Callable[[OutcomeRecord], dict[str, Any]]] = {JURY_PROTOCOL: jury, ITEM_PROTOCOL: item}
"""Outcome ``protocol`` -> its card, for the outcomes made of other tasks' outcomes."""


def parts(outcome: OutcomeRecord) -> list[dict[str, Any]] | None:
    """The tasks whose transcripts stand for a composed outcome's (None: it has its own)."""
    build = COMPOSED.get(outcome.protocol)
    return None if build is None or not outcome.verdict else list(build(outcome)["parts"])
