"""Budgets: a run (or a judge) stops dispatching before it would spend more than it may.

Before each request goes out, the guard adds up the run's committed cost: what it has spent over
every session (summed from the transcripts as they are written: the run store's spend), plus the
estimated cost of every call now in flight, plus this request's own estimate. If that would pass
``budget.max_cost_usd`` (the run's, or the judge's own), the request is not sent: the judge (or,
for the run's budget, every judge) stops dispatching, lets the calls in flight finish, and the
run is recorded ``stopped`` with the figures; ``judge-engine resume RUN_DIR --budget USD``
continues it. ``max_hours`` bounds the wall-clock time of judging, summed over sessions, the
same way. A request's estimate is its prompt size (the lane's learnt token estimate) at the
model's input price, and the lane's running mean answer length at the output price; so the run
ends within about one request's cost of its limit, above or below.

A judge in batch mode commits a whole chunk before it is sent (its prompt tokens and a typical
answer per request, at the batch price), and settles it when the chunk's results are collected;
chunks already at the provider when a session starts are held as committed from the start. A
chunk that would pass the limit is not sent: the batches already submitted are still collected
(they are paid for), unless the limit reached is ``max_hours``, when the session ends and
``resume`` collects them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from judge_engine.errors import ConfigError
from judge_engine.inputs.config import Budget, JobConfig
from judge_engine.providers.catalog import batch_cost_per_token, cost_per_token
from judge_engine.util.money import dollars
from judge_engine.util.naming import judge_ref


@dataclass(frozen=True, slots=True)
class BudgetStop:
    """Why dispatching stopped: which budget, its limit, and what had been spent and committed."""

    scope: str
    """``run``, or the judge whose own budget it was."""
    kind: str
    """``cost`` or ``hours``."""
    limit: float
    spent: float
    """Dollars spent (cost) or hours judged (hours) when the next request would have passed it."""
    committed: float = 0.0
    """Dollars of the calls in flight at that moment (their estimates)."""

    def to_dict(self) -> dict[str, Any]:
        return {"reason": "budget", "scope": self.scope, "kind": self.kind, "limit": self.limit,
                "spent": round(self.spent, 6), "committed": round(self.committed, 6)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> BudgetStop | None:
        """The stop ``run.json`` records (:meth:`to_dict`), or None for another reason or none."""
        if raw.get("reason") != "budget":
            return None
        return cls(str(raw.get("scope") or "run"), str(raw.get("kind") or "cost"), float(raw.get("limit") or 0.0),
                   float(raw.get("spent") or 0.0), float(raw.get("committed") or 0.0))

    @property
    def message(self) -> str:
        what = dollars(self.limit) if self.kind == "cost" else f"{self.limit:g} h"
        used = f"{dollars(self.spent)} spent, {dollars(self.committed)} in flight" if self.kind == "cost" \
            else f"{self.spent:.2f} h judged"
        owner = "the run's budget" if self.scope == "run" else judge_ref(self.scope, "budget")
        return f"stopped at {owner} of {what} ({used})"


@dataclass(slots=True)
class Guard:
    """The run's budgets while a session runs (one per session; shared by every judge)."""

    run: Budget
    judges: Mapping[str, Budget]
    prices: Mapping[str, tuple[float, float]]
    """Judge -> (input, output) dollars per token, for judges under a cost budget."""
    spent: Callable[[str | None], float]
    """Dollars spent by a judge (None: the whole run), every session included."""
    batch_prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """The same as ``prices`` at batch prices, for batch-mode judges under a cost budget."""
    hours_before: float = 0.0
    """Hours judged by earlier sessions."""
    started: float = field(default_factory=time.monotonic)
    committed: dict[str, float] = field(default_factory=dict)
    stop: BudgetStop | None = None
    """The first budget reached, when one was."""

    @property
    def active(self) -> bool:
        return self.run.max_cost_usd is not None or self.run.max_hours is not None or any(
            b.max_cost_usd is not None or b.max_hours is not None for b in self.judges.values())

    def estimate(self, judge: str, prompt_tokens: float, completion_tokens: float, *, batch: bool = False) -> float:
        """Dollars of ``judge``'s request(s) of these sizes (``batch``: at its batch price)."""
        price_in, price_out = (self.batch_prices if batch else self.prices).get(judge, (0.0, 0.0))
        return prompt_tokens * price_in + completion_tokens * price_out

    def stopped_for(self, judge: str) -> bool:
        """Whether a budget already reached stops ``judge`` (the run's stops every judge)."""
        return self.stop is not None and self.stop.scope in ("run", judge)

    def hours_passed(self, judge: str) -> BudgetStop | None:
        """The ``max_hours`` limit (the run's or ``judge``'s) the session has reached, if any
        (recorded as the stop): asked by a batch-mode judge between polls, since it may wait for
        hours without sending anything."""
        hours = self.hours_before + (time.monotonic() - self.started) / 3600
        for scope, budget in (("run", self.run), (judge, self.judges.get(judge, Budget()))):
            if budget.max_hours is not None and hours >= budget.max_hours:
                return self._stopped(BudgetStop(scope, "hours", budget.max_hours, hours))
        return None

    def admit(self, judge: str, cost: float) -> BudgetStop | None:
        """Commit ``cost`` for a request of ``judge`` about to be sent, or say which budget it
        would pass (then nothing is committed)."""
        hours = self.hours_before + (time.monotonic() - self.started) / 3600
        committed_run = sum(self.committed.values())
        for scope, budget, spent, committed in (
            ("run", self.run, self.spent(None), committed_run),
            (judge, self.judges.get(judge, Budget()), self.spent(judge), self.committed.get(judge, 0.0)),
        ):
            if budget.max_hours is not None and hours >= budget.max_hours:
                return self._stopped(BudgetStop(scope, "hours", budget.max_hours, hours))
            if budget.max_cost_usd is not None and spent + committed + cost > budget.max_cost_usd:
                return self._stopped(BudgetStop(scope, "cost", budget.max_cost_usd, spent, committed))
        self.committed[judge] = self.committed.get(judge, 0.0) + cost
        return None

    def hold(self, judge: str, cost: float) -> None:
        """Count ``cost`` as committed without a check: requests already at the provider (a batch
        an earlier session submitted), which the run pays for whatever the limit says."""
        self.committed[judge] = self.committed.get(judge, 0.0) + cost

    def settle(self, judge: str, cost: float) -> None:
        """The request committed with ``cost`` is over (its real cost is in the spend now)."""
        left = self.committed.get(judge, 0.0) - cost
        self.committed[judge] = left if left > 1e-12 else 0.0  # no float residue shown as "in flight"

    def _stopped(self, stop: BudgetStop) -> BudgetStop:
        if self.stop is None or stop.scope == "run":
            self.stop = stop
        return stop


def hours_judged(sessions: list[dict[str, Any]]) -> float:
    """Hours of judging recorded by earlier sessions (``started_at`` to ``ended_at``)."""
    from datetime import datetime

    total = 0.0
    for session in sessions:
        start, end = session.get("started_at"), session.get("ended_at")
        if start and end:
            total += (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds() / 3600
    return total


def guard_for(config: JobConfig, sessions: list[dict[str, Any]], spend: Callable[[str | None], float]) -> Guard:
    """The run's budgets for a session, with the prices they are counted at (``spend``: dollars
    spent by a judge, or by the run for None, every session included).

    Raises:
        ConfigError: a cost budget over a judge whose model has no known price.
    """
    prices, batch_prices = {}, {}
    for judge in config.judges:
        if config.budget.max_cost_usd is None and judge.budget.max_cost_usd is None:
            continue
        price = cost_per_token(judge.model)
        if price is None:
            what = ("its budget.max_cost_usd" if judge.budget.max_cost_usd is not None
                    else "the run's budget (budget.max_cost_usd, or --budget)")
            raise ConfigError(f"{judge_ref(judge.name)}: {what} needs {judge.model}'s price, and litellm knows none; "
                              "use a model it prices, or set no cost budget for it")
        prices[judge.name] = price
        if judge.mode == "batch" and (batch := batch_cost_per_token(judge.model)) is not None:
            batch_prices[judge.name] = batch[:2]
    return Guard(config.budget, {j.name: j.budget for j in config.judges}, prices, spend,
                 batch_prices=batch_prices, hours_before=hours_judged(sessions))


def record_budgets(recorded: dict[str, Any], config: JobConfig) -> None:
    """Write the budgets a resumed session applies (a judge's raised in the config file, the
    run's given with ``--budget``) into ``recorded``, run.json's config, where ``status`` reads
    them: what is left is counted against the limits the run goes on under."""
    view = config.manifest_view()
    recorded["budget"] = view["budget"]
    for entry, judge in zip(recorded.get("judges") or [], view["judges"], strict=False):
        if isinstance(entry, dict) and entry.get("name") == judge["name"]:
            entry["budget"] = judge["budget"]
