"""``judge-engine status RUN_DIR``'s findings: how far a run is, read from its files alone.

No process needs to be running: the manifest says what the run is, the index which tasks are
done, and ``batches.jsonl`` where every batch-mode judge's chunks are (as last polled). With
``poll``, the provider is asked for each open batch's state now (read-only: nothing is written
into the run, which another process may hold).

What the run has spent is the manifest's spend brought up to the transcript's last line (as a
resume counts it), against its budgets as run.json records them: the run's (``--budget``
included) and each judge's, in dollars and in hours of judging. Under a cost budget, the open
batches are committed at the estimate the batch driver holds them at (their prompt tokens and a
typical answer per request, at the batch price), so what is left is what a resume may still send;
a batch that has ended (completed, expired, cancelled) but is not collected yet is held only for
the requests it answered (:attr:`Chunk.charged <judge_engine.running.batch.ledger.Chunk.charged>`),
which the provider charges, and its tasks are counted apart from those in open batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge_engine.errors import ConfigError
from judge_engine.protocols import Protocol, get_protocol
from judge_engine.providers import batch_api_for, endpoint_for
from judge_engine.providers.catalog import batch_cost_per_token
from judge_engine.rundir.records import Manifest, Spend, total_spend
from judge_engine.rundir.store import iter_transcript, open_index, read_manifest, writer_active
from judge_engine.running.batch.board import ChunkView, chunk_views
from judge_engine.running.batch.ledger import Chunk, Ledger, read_ledgers
from judge_engine.running.budget import hours_judged
from judge_engine.running.demo import demo_endpoint, demo_server, demo_servers
from judge_engine.trust.cascade.report import refreshed
from judge_engine.util.money import dollars, dollars_left

if TYPE_CHECKING:
    from judge_engine.inputs.config import JudgeConfig
    from judge_engine.providers import Endpoint
    from judge_engine.providers.batch import BatchAPI
    from judge_engine.running.session import PreparedRun


@dataclass(frozen=True, slots=True)
class Money:
    """What the run (or one judge) has spent, against its budget."""

    spend: Spend
    """Every session's calls, tokens and dollars, up to the transcript's last line."""
    committed: float | None = None
    """Dollars of its open batches, at the estimate they are held at (None: none, or no
    cost budget to hold them against)."""
    max_cost_usd: float | None = None
    max_hours: float | None = None
    hours: float = 0.0
    """Hours judged, summed over sessions (a session killed before it ended counts none, as for
    the budget)."""
    owed: float | None = None
    """Dollars of the answers in its ended batches not collected yet (a cancelled batch's
    answered requests): charged, not in the transcript yet (None: none, or no cost budget)."""

    @property
    def cost_left(self) -> float | None:
        """Dollars a resume may still commit (None: no cost budget)."""
        if self.max_cost_usd is None:
            return None
        return self.max_cost_usd - self.used

    @property
    def used(self) -> float:
        """Spent, held for open batches, and owed for ended batches' answers."""
        return self.spend.cost + (self.committed or 0.0) + (self.owed or 0.0)

    @property
    def hours_left(self) -> float | None:
        return None if self.max_hours is None else self.max_hours - self.hours

    def parts(self) -> list[str]:
        """What ``status`` says of it: spent (the calls at no known price apart, never a silent
        $0; the estimate for answers billed but not read named), held for open batches, and what each budget leaves."""
        spend = self.spend
        parts = [f"{dollars(spend.cost)} spent" + (f" + {spend.unpriced:,} unpriced calls" if spend.unpriced else "")]
        if spend.estimated_calls:  # in the spend, and in what the budget counts
            parts.append(f"~{dollars(spend.estimated_cost)} of it estimated for {spend.estimated_calls:,} answers "
                         "billed but not read")
        if self.committed is not None:
            parts.append(f"~{dollars(self.committed)} held for open batches")
        if self.owed is not None:
            parts.append(f"~{dollars(self.owed)} for answers in ended batches, not collected yet")
        if (left := self.cost_left) is not None:
            parts.append(f"budget ${self.max_cost_usd:g}: " + (f"{dollars_left(left, self.used)} left" if left >= 0
                                                                else f"passed by {dollars(-left)}"))
        if (hours := self.hours_left) is not None:
            parts.append(f"{self.hours:.2f} of {self.max_hours:g} h judged: {max(hours, 0.0):.2f} h left")
        return parts


@dataclass(frozen=True, slots=True)
class JudgeStatus:
    """One judge's progress."""

    name: str
    model: str
    mode: str
    """``online`` or ``batch`` (as the run's config and overrides say)."""
    tasks: int
    scored: int
    unscored: int
    in_batches: int
    """Tasks in open batches (the provider may still answer them)."""
    waiting: int
    """Tasks waiting for their next request (a later batch round, or online)."""
    chunks: list[ChunkView] = field(default_factory=list)
    unscored_by_code: dict[str, int] = field(default_factory=dict)
    """Why those tasks are unscored: reason code -> tasks."""
    money: Money = field(default_factory=lambda: Money(Spend()))
    to_collect: int = 0
    """Tasks in batches that have ended (completed, expired, cancelled) but are not collected
    yet: a resume keeps what they answered and sends the rest again."""

    @property
    def done(self) -> int:
        return self.scored + self.unscored

    @property
    def not_sent(self) -> int:
        """Tasks neither done nor held by a batch or a carry: sent when the run goes on."""
        return max(0, self.tasks - self.done - self.in_batches - self.to_collect - self.waiting)


@dataclass(frozen=True, slots=True)
class RunStatusReport:
    run_dir: Path
    manifest: Manifest
    writing: bool
    """A process holds the run now (its lock)."""
    judges: list[JudgeStatus]
    notes: list[str] = field(default_factory=list)
    money: Money = field(default_factory=lambda: Money(Spend()))
    """The whole run's, against the run's own budget."""


def run_status(run_dir: Path, *, poll: bool = False) -> RunStatusReport:
    """What the run's files say (``poll``: and what the provider says of its open batches).

    Raises:
        RunDirError: not a run directory, or an unreadable one.
    """
    run_dir = run_dir.resolve()
    manifest = refreshed(run_dir, read_manifest(run_dir))  # a cascade's stages: what reached them
    ledgers = read_ledgers(run_dir)
    with open_index(run_dir) as index:
        counts = index.counts()
        finished = {name: index.finished_tasks(name) for name in ledgers}
    notes: list[str] = []
    if poll:
        notes += _poll(run_dir, manifest, ledgers)
    judges = []
    modes = _modes(manifest)
    writing = writer_active(run_dir)
    money = _money(run_dir, manifest, ledgers, writing)
    for entry in manifest.judges:
        ledger = ledgers.get(entry.name, Ledger())
        done = finished.get(entry.name, set())
        held = {t for c in ledger.open_chunks() if not c.ended for t in c.tasks if "b2:" + t not in done}
        ended = {t for c in ledger.open_chunks() if c.ended for t in c.tasks if "b2:" + t not in done}
        waiting = [c for c in ledger.pending.values() if c.task_id not in done]
        judges.append(JudgeStatus(
            name=entry.name, model=entry.model, mode=modes.get(entry.name, "online"),
            tasks=manifest.planned_tasks(entry.name) or 0, scored=counts.get((entry.name, "scored", None), 0),
            unscored=sum(n for (judge, status, _code), n in counts.items() if judge == entry.name and status == "unscored"),
            in_batches=len(held), to_collect=len(ended), waiting=len(waiting), chunks=chunk_views(ledger),
            unscored_by_code={str(code): n for (judge, status, code), n in sorted(counts.items(), key=str)
                              if judge == entry.name and status == "unscored"}, money=money[entry.name]))
    return RunStatusReport(run_dir, manifest, writing, judges, notes, money[None])


def _money(run_dir: Path, manifest: Manifest, ledgers: dict[str, Ledger], writing: bool) -> dict[str | None, Money]:
    """Judge (None: the run) -> its spend against its budget."""
    recorded = manifest.spend
    spend = {judge: Spend.from_dict(r) for judge, r in (recorded.get("judges") or {}).items()}
    for record in iter_transcript(run_dir, offset=int(recorded.get("covers_bytes") or 0), requests=False):
        spend.setdefault(record.judge, Spend()).add(record)
    hours = hours_judged(manifest.sessions)
    last = manifest.sessions[-1] if manifest.sessions else {}
    if writing and last.get("started_at") and not last.get("ended_at"):  # the session going on now
        hours += (time.time() - datetime.fromisoformat(last["started_at"]).timestamp()) / 3600
    budgets = _budgets(manifest)
    held = any(b[0] is not None for b in budgets.values())
    committed = {name: _committed(manifest, name, [c for c in ledger.open_chunks() if not c.ended])
                 for name, ledger in ledgers.items() if held and any(not c.ended for c in ledger.open_chunks())}
    owed = {name: _committed(manifest, name, [c for c in ledger.open_chunks() if c.ended])
            for name, ledger in ledgers.items() if held and any(c.ended for c in ledger.open_chunks())}
    money: dict[str | None, Money] = {}
    for name in [None, *(entry.name for entry in manifest.judges)]:
        known = [c for judge, c in committed.items() if name in (None, judge) and c is not None]
        answered = [c for judge, c in owed.items() if name in (None, judge) and c is not None]
        money[name] = Money(total_spend(spend) if name is None else spend.get(name, Spend()),
                            sum(known) if known else None, *budgets.get(name, (None, None)), hours=hours,
                            owed=sum(answered) if answered else None)
    return money


def _budgets(manifest: Manifest) -> dict[str | None, tuple[float | None, float | None]]:
    """Judge (None: the run) -> its (max_cost_usd, max_hours), as run.json records them (the
    run's ``--budget`` and ``--budget-hours`` as its overrides)."""
    def pair(raw: Any, overrides: dict[str, Any]) -> tuple[float | None, float | None]:
        raw = {**(raw if isinstance(raw, dict) else {}), **overrides}
        cost, hours = raw.get("max_cost_usd"), raw.get("max_hours")
        return None if cost is None else float(cost), None if hours is None else float(hours)

    run = {k: v for k, v in manifest.overrides.items() if k in ("max_cost_usd", "max_hours")}
    budgets: dict[str | None, tuple[float | None, float | None]] = {None: pair(manifest.config.get("budget"), run)}
    for judge in manifest.config.get("judges") or []:
        if isinstance(judge, dict):
            budgets[str(judge.get("name"))] = pair(judge.get("budget"), {})
    return budgets


def _committed(manifest: Manifest, name: str, chunks: list[Chunk]) -> float | None:
    """Dollars ``name``'s ``chunks`` (not collected yet) are held at, as
    :meth:`BatchDriver._commit` holds them: each for the share of its requests the provider
    charges (:attr:`Chunk.charged`); None when its model has no known price."""
    entry = manifest.judge(name)
    config = next((j for j in manifest.config.get("judges") or [] if isinstance(j, dict) and j.get("name") == name), {})
    price = batch_cost_per_token(entry.model) if entry is not None else None
    if entry is None or price is None:
        return None
    try:
        typical = get_protocol(entry.protocol).typical_completion_tokens
    except ConfigError:  # a custom judge: the base protocol's typical answer
        typical = Protocol.typical_completion_tokens
    answer = min(typical, int(config.get("max_tokens") or typical))
    return sum(round(c.tokens * c.charged) * price[0] + round(c.requests * c.charged) * answer * price[1]
               for c in chunks)


def _modes(manifest: Manifest) -> dict[str, str]:
    batch_all = bool(manifest.overrides.get("batch"))
    return {str(j.get("name")): "batch" if batch_all else str(j.get("mode") or "online")
            for j in manifest.config.get("judges") or []}


def _poll(run_dir: Path, manifest: Manifest, ledgers: dict[str, Ledger]) -> list[str]:
    """Each open batch's state as the provider reports it now, into the ledgers' chunks."""
    if not any(ledger.open_chunks() for ledger in ledgers.values()):
        return []
    # The session's machinery (engine, cache, retries) loads only to ask the provider: the
    # status of a run read from its files alone stays a quick command.
    from judge_engine.running.session import prepare_resume

    prepared = prepare_resume(run_dir)
    notes: list[str] = []
    with batch_apis(prepared, read_only=True) as api_of:
        asyncio.run(_poll_all(prepared.config.judges, ledgers, api_of, notes))
    return notes


async def _poll_all(judges: list[JudgeConfig], ledgers: dict[str, Ledger], api_of: Callable[[JudgeConfig], BatchAPI],
                    notes: list[str]) -> None:
    for judge in judges:
        ledger = ledgers.get(judge.name)
        if ledger is None or not ledger.open_chunks():
            continue
        api = api_of(judge)
        try:
            for chunk in ledger.open_chunks():
                if chunk.batch_id is None:
                    continue
                try:
                    info = await api.retrieve(chunk.batch_id)
                except Exception as exc:
                    notes.append(f"--poll: {chunk.chunk_id}: {api.classify(exc).message}")
                    continue
                chunk.status = info.status
                chunk.counts = {"total": info.total, "completed": info.completed, "failed": info.failed,
                                "expired": info.expired}
        finally:
            await api.aclose()


@contextlib.contextmanager
def batch_apis(prepared: PreparedRun, *, read_only: bool) -> Iterator[Callable[[JudgeConfig], BatchAPI]]:
    """Judge -> its batch API, for a command that works on a run without its process. A demo
    run's batches are at its fake servers: the one each judge sends its batches to is started
    again, for as long as this lasts, on the state the run's sessions left in its ``demo/``
    folder (``read_only``: it writes nothing)."""
    if not prepared.demo:
        yield open_batch_api
        return
    with contextlib.ExitStack() as stack:
        started: dict[str, str] = {}

        def api_of(judge: JudgeConfig) -> BatchAPI:
            name = demo_servers(judge)[0]
            if name not in started:
                started[name] = stack.enter_context(demo_server(prepared, name, read_only=read_only)).base_url
            return open_batch_api(judge, demo_endpoint(judge, started[name]))

        yield api_of


def open_batch_api(judge: JudgeConfig, endpoint: Endpoint | None = None) -> BatchAPI:
    """The batch API of ``judge``'s endpoint (default: its first deployment's, where the driver
    sends its batches), for a command that works on a run without its process.

    Raises:
        ConfigError: the judge's API key is not set, or its model has no batch API.
    """
    endpoint = endpoint if endpoint is not None else endpoint_for(judge)
    return batch_api_for(endpoint.model, endpoint.api_base, api_key=endpoint.api_key, judge=judge.name,
                         network=endpoint.network)
