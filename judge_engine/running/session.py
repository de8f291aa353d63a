"""A session: one ``run`` or ``resume``, from a config file (or a run directory) to a finished run.

```
run(config) / resume(run_dir)
  1. prepare: load the config with its overrides -> build the protocols -> scan the dataset once
     (every row checked, variants counted) -> find or create the run directory (a config's run id
     is a content hash: running it again resumes it) -> check API keys before anything is sent
  2. endpoints: where each judge's requests go, resolved once (--demo: the built-in fake server)
  3. execute: open the run store and the answer cache -> build each judge's runtime (lane,
     provider, endpoint) -> the engine judges every task not yet done -> the manifest records
     counts, spend and this session (checkpointed every 30 s while it runs)
```

Nothing here prints. What a person watches (the live display, progress lines) reads a
:class:`~judge_engine.running.runtime.RunProgress` that the session fills in; the session never calls
back into the command line. Signals (:mod:`judge_engine.running.interrupts`): the first Ctrl-C (or
SIGTERM) stops dispatching at once and gives the calls in flight 10 s; a second one cancels them.
Either way the manifest says ``cancelled`` and :func:`resume` finishes the job, unless every task
had finished by then: that run completed, whenever the Ctrl-C came. Once the engine is done the
run is being recorded, and a Ctrl-C changes nothing until the session returns: what ``run.json``
says is what the command reports. A disk that refuses the run's writes (full, read-only, over
quota) stops it like a budget: ``stopped``, with the reason in the manifest when it can still be
written (the store holds room for that), and ``resume`` finishes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import platform
import time
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from judge_engine._moved import moved_names
from judge_engine._version import __version__
from judge_engine.errors import ConfigError, DiskError, RunDirError, TemplateError
from judge_engine.inputs.config import JobConfig, JudgeConfig, check_directories, load_config
from judge_engine.inputs.dataset import DatasetSummary, fingerprint
from judge_engine.lanes import Lane
from judge_engine.planning.plan import (
    build_protocol,
    check_first_render,
    claim_new_run,
    run_id,
    scan_for,
    template_hashes,
    with_protocol_defaults,
)
from judge_engine.protocols import Protocol
from judge_engine.providers import (
    Endpoint,
    check_batch_routes,
    check_credentials,
    check_logprobs,
    check_models,
    check_network,
    deployment_names,
    endpoints_for,
    for_judge,
    insecure_endpoints,
)
from judge_engine.providers.base import Provider
from judge_engine.rundir.records import (
    MANIFEST,
    Counts,
    JudgeEntry,
    Manifest,
    Spend,
    spend_section,
    total_spend,
)
from judge_engine.rundir.store import RunStore, read_manifest, utc_now
from judge_engine.running.batch.board import BatchBoard, provider_ids
from judge_engine.running.budget import BudgetStop, Guard, guard_for, record_budgets
from judge_engine.running.cache import AnswerCache
from judge_engine.running.cascade import cascade_run
from judge_engine.running.demo import demo_endpoints
from judge_engine.running.engine import Engine, EngineResult
from judge_engine.running.interrupts import Interrupts
from judge_engine.running.resumption import resumptions, retry_codes
from judge_engine.running.routing import Deployment, Router
from judge_engine.running.runtime import JudgeCounters, JudgeRuntime, RunProgress
from judge_engine.trust.cascade.stages import CascadePlan, cascade_plan, check_stages
from judge_engine.trust.decisions import (
    ItemCollector,
    check_confidence,
    decides_items,
    item_judge,
    write_item_outcomes,
)
from judge_engine.trust.jury import check_juries, settle_juries, write_jury_outcomes
from judge_engine.util.redaction import url_secrets

CHECKPOINT_S = 30.0
"""How often a running run's manifest is rewritten with its counts and spend."""
LATEST = "latest"
"""A symlink in the runs directory to the run started or resumed last."""
DEMO_API_BASE = "demo://fake-server"
"""The ``api_base`` a demo run's config gets: demo answers get cache keys of their own, so they
never mix with a real model's and stay cached across demo runs."""
DEMO_BATCH_POLL_S = 0.2
"""A demo's batch poll interval: the fake server's batches end within seconds."""
_IMPLIED = ("api_base", "batch_poll_s")
"""Overrides a demo implies, so they are not recorded as the user's."""


@dataclass(slots=True)
class PreparedRun:
    """Everything known before anything is sent: validated config, protocols, the dataset's
    summary, the run directory and its manifest (new, or as recorded)."""

    config: JobConfig
    run_dir: Path
    protocols: dict[str, Protocol]
    dataset: DatasetSummary
    manifest: Manifest
    resumed: bool
    demo: bool
    cascade: CascadePlan | None = None
    """The config's cascade with its thresholds (None: none, or switched off)."""

    def tasks_of(self, judge: JudgeConfig) -> int:
        """How many tasks ``judge`` has over the whole dataset (from the scan)."""
        index = [j.name for j in self.config.judges].index(judge.name)
        variants = self.dataset.variants[index] if self.dataset.variants else self.dataset.items
        return variants * len(judge.temperatures) * judge.repeats


@dataclass(frozen=True, slots=True)
class JudgeTotals:
    """One judge's share of this session, beyond what the manifest records."""

    name: str
    model: str
    protocol: str
    retries: int = 0
    reasks: int = 0
    rate_limited: int = 0
    deployments: dict[str, str] = field(default_factory=dict)
    """Deployment -> what it did this session (``1,234 calls``, ``left out: ...``), when the
    judge has several."""
    abandoned: int = 0
    """Calls cut off in flight by a stop: sent, so possibly charged, but never answered."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a session ended. Nothing was printed; the command line decides what to say."""

    run_dir: Path
    status: Literal["completed", "cancelled", "failed", "stopped"]
    """``stopped``: a budget was reached (:attr:`budget`), or the disk refused (:attr:`disk`);
    ``failed``: a judge stopped."""
    manifest: Manifest
    """The manifest as written at the end (counts, spend, sessions)."""
    judges: list[JudgeTotals] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    """Judge -> why it stopped (``status == "failed"``)."""
    elapsed_s: float = 0.0
    already_complete: bool = False
    """Nothing was judged: the run had finished before (and no ``--retry`` was asked)."""
    started_by: Literal["run", "resume"] = "run"
    budget: BudgetStop | None = None
    """The budget reached, when the session stopped for one."""
    disk: DiskError | None = None
    """The write the run's disk refused, when the session stopped for one."""
    recorded: bool = True
    """Whether ``run.json`` says how the session ended (False: the disk refused it too; it
    still says ``running``, and ``resume`` finishes the run all the same)."""
    cache_problem: str | None = None
    """Why the answer cache stopped being written during the session (the run went on)."""

    @property
    def counts(self) -> Counts:
        """The whole run's tasks, scored and unscored by reason code."""
        return self.manifest.total_counts

    @property
    def demo(self) -> bool:
        return self.manifest.demo


# --- 1. prepare -------------------------------------------------------------------------------


def prepare(config_path: Path, *, overrides: Mapping[str, Any] | None = None, demo: bool = False,
            new_run: bool = False, run_dir: Path | None = None, check_keys: bool = True,
            dataset: DatasetSummary | None = None) -> PreparedRun:
    """Validate everything that can be validated offline and find or create the run directory.

    Args:
        overrides: command-line overrides (see :func:`~judge_engine.inputs.config.load_config`); they
            are recorded in the manifest, so ``resume`` applies them again.
        demo: answer with the built-in fake server (the run's name and manifest say so).
        run_dir: resume this run directory (its name must still match the config and data:
            the run id, plus the suffix of a ``--new-run``).
        check_keys: fail when a judge's provider needs an API key that is not set (not for a
            demo, nor for ``plan``, which sends nothing).
        dataset: the dataset's summary when it is already known (a scan of the same file for
            the same protocols); otherwise the dataset is scanned, unless it is the one a
            resumed run recorded (same bytes: every row was checked when the run started).

    Raises:
        ConfigError, DatasetError, TemplateError, RunDirError: bad input, named.
    """
    overrides = dict(overrides or {})
    if isinstance(base := overrides.get("api_base"), str) and url_secrets(base):  # run.json records overrides
        raise ConfigError("the api_base override: a URL with credentials (user:password@) cannot be an override: "
                          "run.json, which never holds a secret, could not give it back to resume; write it as "
                          "the judges' api_base in the config file")
    if demo:
        overrides["api_base"] = DEMO_API_BASE
        overrides.setdefault("batch_poll_s", DEMO_BATCH_POLL_S)
    config = load_config(config_path, overrides=overrides)
    check_directories(config, config_path, output=run_dir is None)
    try:
        protocols = {judge.name: build_protocol(judge) for judge in config.judges}
    except ConfigError as exc:  # name the file, as every other config error does
        raise ConfigError(f"{config_path.name}: {exc}") from None
    config = with_protocol_defaults(config, protocols)
    check_juries(config, protocols)
    check_confidence(config, protocols)
    check_logprobs(config)
    check_stages(config, protocols)
    cascade = cascade_plan(config, protocols)
    if dataset is None and run_dir is not None:
        dataset = _recorded_dataset(run_dir, config)
    if dataset is None:
        dataset = scan_for(config, protocols)
    try:
        check_first_render(config, protocols, sorted({f for p in protocols.values() for f in p.required_fields}))
    except TemplateError as exc:
        raise TemplateError(f"{config_path.name}: {exc}") from None
    stem = config_path.stem if config_path.stem != "config" else config_path.resolve().parent.name or "run"
    # A demo's run says so in its name: its answers are synthetic, never to be mistaken for a model's.
    identity = run_id(config, protocols, dataset, stem=f"{stem}-demo" if demo else stem,
                      cascade=cascade.identity() if cascade is not None else None)
    if run_dir is not None:
        run_dir = run_dir.resolve()  # runs/latest is a symlink: name the run itself
        # The run's identity is the one its manifest recorded (a moved or renamed directory is
        # the same run); the directory's name stands in only before a manifest exists.
        recorded = _recorded_run_id(run_dir)
        if recorded != identity and not recorded.startswith(f"{identity}-"):
            raise RunDirError(f"{run_dir}: its config or dataset changed since the run started (the run is "
                              f"{recorded}; they now make run {identity}); run the config to start a new run")
    else:
        run_dir = config.output.dir / identity
    if check_keys and not demo:
        check_models(config)
        check_credentials(config)
        check_batch_routes(config)
    check_network(config, demo=demo)
    if new_run and run_dir == config.output.dir / identity:  # last: a refused run leaves no directory
        run_dir = claim_new_run(config.output.dir, identity)
    resumed = (run_dir / MANIFEST).exists()
    manifest = read_manifest(run_dir) if resumed else new_manifest(
        config, protocols, dataset, run_dir.name, config_path=config_path, run_dir=run_dir, demo=demo,
        overrides=overrides)
    return PreparedRun(config, run_dir, protocols, dataset, manifest, resumed, demo, cascade)


def _recorded_run_id(run_dir: Path) -> str:
    """The run id ``run_dir``'s manifest recorded, or the directory's name when it has none."""
    if not (run_dir / MANIFEST).exists():
        return run_dir.name
    return read_manifest(run_dir).run_id


def _recorded_dataset(run_dir: Path, config: JobConfig) -> DatasetSummary | None:
    """The dataset summary a run recorded, if its file still has the same bytes: a resumed run of
    a million items then hashes the file (~1 s) instead of checking every row again (~4 s)."""
    try:
        recorded = read_manifest(run_dir.resolve()).dataset
    except RunDirError:
        return None
    variants = recorded.get("variants")
    if not isinstance(variants, list) or len(variants) != len(config.judges) or not config.dataset.path.is_file():
        return None
    if recorded.get("limit") != config.dataset.limit or fingerprint(config.dataset.path) != recorded.get("fingerprint"):
        return None
    return DatasetSummary(items=int(recorded["items"]), fingerprint=str(recorded["fingerprint"]),
                          variants=tuple(int(v) for v in variants))


def new_manifest(config: JobConfig, protocols: Mapping[str, Protocol], dataset: DatasetSummary, identity: str, *,
                 config_path: Path, run_dir: Path, demo: bool, overrides: Mapping[str, Any]) -> Manifest:
    """The manifest of a run about to start."""
    judges = []
    for judge in config.judges:
        protocol = protocols[judge.name]
        judges.append(JudgeEntry(
            name=judge.name, model=judge.model, protocol=protocol.name, protocol_version=protocol.version,
            protocol_options=protocol.options.model_dump(mode="json"),
            templates=dict(zip(protocol.templates(), template_hashes(protocol), strict=True)),
            temperatures=list(judge.temperatures), repeats=judge.repeats,
            score_range=list(r) if (r := protocol.score_range()) else None,
            tasks_per_item_variant=len(judge.temperatures) * judge.repeats,
            item_outcomes=decides_items(judge, protocol) is not None,
        ))  # fmt: skip
    now = utc_now()
    return Manifest(
        run_id=identity, status="running", created_at=now, updated_at=now, package_version=__version__,
        versions={"python": platform.python_version(), "litellm": _version("litellm")}, demo=demo,
        config_path=str(config_path.resolve()),
        config_path_from_run=os.path.relpath(config_path.resolve(), run_dir.resolve()),
        config=config.manifest_view(),
        # The demo endpoint is implied by "demo"; paths as strings so the manifest stays JSON.
        overrides={key: str(value) if isinstance(value, Path) else value
                   for key, value in overrides.items() if value is not None and key not in _IMPLIED},
        dataset={"path": str(config.dataset.path), "fingerprint": dataset.fingerprint, "items": dataset.items,
                 "variants": list(dataset.variants), "limit": config.dataset.limit},
        judges=judges,
    )  # fmt: skip


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def recorded_config_path(run_dir: Path, manifest: Manifest) -> Path:
    """The config a run was started from: the absolute path recorded, else the path relative to
    the run directory (the project moved), else, for runs recorded before absolute paths, the
    path as given relative to the current directory or to the config's folder (the runs
    directory's parent, where ``output.dir`` is relative to)."""
    recorded = Path(manifest.config_path)
    candidates = [recorded]
    if manifest.config_path_from_run:
        candidates.append(run_dir / manifest.config_path_from_run)
    if not recorded.is_absolute():
        candidates += [parent / recorded.name for parent in run_dir.resolve().parents[:3]]
    for candidate in candidates:
        if str(candidate) and candidate.is_file():
            return candidate
    raise RunDirError(f"{run_dir}: its config {recorded} is gone; run the config again instead")


def prepare_resume(run_dir: Path, *, overrides: Mapping[str, Any] | None = None) -> PreparedRun:
    """Rebuild a prepared run from a run directory's manifest, from any working directory: the
    config as recorded, with the command-line overrides it was started with (``--model``,
    ``--limit``, ``--cache-dir``...) and then ``overrides``."""
    manifest = read_manifest(run_dir)
    config_path = recorded_config_path(run_dir, manifest)
    merged = {**manifest.overrides, **(overrides or {})}
    prepared = prepare(config_path, overrides=merged, demo=manifest.demo, run_dir=run_dir)
    # Kept for the sessions after this one too (``resume --batch``).
    prepared.manifest.overrides.update({k: v for k, v in (overrides or {}).items() if v is not None and k not in _IMPLIED})
    return prepared


# --- 2. endpoints -----------------------------------------------------------------------------


@contextlib.contextmanager
def endpoints(prepared: PreparedRun, *, demo_batch_s: float | None = None) -> Iterator[dict[str, list[Endpoint]]]:
    """Judge name -> where its requests go (one endpoint per deployment), for as long as the
    session runs. A demo's go to the project's fake servers (:mod:`judge_engine.running.demo`), which
    keep its batches in the run's demo folder; ``demo_batch_s``: how long a batch they are sent
    takes to complete."""
    if not prepared.demo:
        yield {judge.name: endpoints_for(judge) for judge in prepared.config.judges}
        return
    with demo_endpoints(prepared, batch_s=demo_batch_s) as where:
        yield where


# --- 3. execute -------------------------------------------------------------------------------


def run(config_path: Path, *, overrides: Mapping[str, Any] | None = None, demo: bool = False,
        new_run: bool = False, progress: RunProgress | None = None, demo_batch_s: float | None = None) -> RunResult:
    """Judge a config's dataset, or resume its run if it ran before (see the module docstring).
    ``demo_batch_s``: how long a demo's batches take to complete (:func:`endpoints`).

    Raises:
        ConfigError, DatasetError, TemplateError, RunDirError: bad input, before anything is sent.
    """
    prepared = prepare(config_path, overrides=overrides, demo=demo, new_run=new_run)
    return _session(prepared, None, progress, "run", demo_batch_s)


def resume(run_dir: Path, *, retry: str | None = None, progress: RunProgress | None = None,
           overrides: Mapping[str, Any] | None = None, batch: bool = False,
           demo_batch_s: float | None = None, demo: bool = False) -> RunResult:
    """Finish a killed, cancelled or stopped run, or judge its unscored tasks again (``retry``:
    ``unscored`` or reason codes separated by commas). ``overrides``: new budgets
    (``max_cost_usd``, ``max_hours``); ``batch``: every judge in batch mode from now on (both
    recorded for later resumes, as ``run --batch`` is); ``demo_batch_s``: how long the demo
    batches this session creates take (those submitted before keep their own time); ``demo``:
    the run must be a demo run (a resume keeps the mode its run started in either way)."""
    codes = retry_codes(retry)
    merged = {**(overrides or {}), **({"batch": True} if batch else {})}
    prepared = prepare_resume(run_dir, overrides=merged or None)
    for flag, given in (("--demo-batch-s", demo_batch_s is not None), ("--demo", demo)):
        if given and not prepared.demo:
            raise ConfigError(f"{flag}: {run_dir} is not a demo run (a resume keeps the mode its run started in)")
    return _session(prepared, codes, progress, "resume", demo_batch_s)


def _session(prepared: PreparedRun, retry: frozenset[str] | None, progress: RunProgress | None,
             started_by: Literal["run", "resume"], demo_batch_s: float | None = None) -> RunResult:
    progress = progress if progress is not None else RunProgress()
    progress.run_dir, progress.demo, progress.retry = prepared.run_dir, prepared.demo, retry
    progress.warnings = [] if prepared.demo else insecure_endpoints(prepared.config)
    if prepared.resumed and prepared.manifest.status == "completed" and retry is None:
        progress.finished = True
        point_latest(prepared.run_dir)  # the run just named is the one `latest` shows, complete or not
        manifest = prepared.manifest if not prepared.config.juries else settle_juries(
            prepared.run_dir, prepared.config, prepared.protocols, prepared.manifest)
        return RunResult(prepared.run_dir, "completed", manifest, already_complete=True, started_by=started_by)
    if prepared.resumed:
        record_budgets(prepared.manifest.config, prepared.config)
    recorded: list[RunResult] = []
    try:
        with endpoints(prepared, demo_batch_s=demo_batch_s) as where:
            asyncio.run(_kept(execute(prepared, where, progress=progress, retry=retry), recorded))
    except KeyboardInterrupt:
        if not recorded:
            raise
        # The run was recorded before this Ctrl-C: run.json says how it ended, and so does the result.
    finally:
        progress.finished = True
    return dataclasses.replace(recorded[0], started_by=started_by)


async def _kept(session: Coroutine[Any, Any, RunResult], into: list[RunResult]) -> None:
    """Await ``session`` and keep its result in ``into`` (so a Ctrl-C during the event loop's
    shutdown does not lose a run that was recorded)."""
    into.append(await session)


async def execute(prepared: PreparedRun, where: Mapping[str, Endpoint | Sequence[Endpoint]], *, progress: RunProgress | None = None,
                  retry: frozenset[str] | None = None, install_signals: bool = True,
                  providers: Mapping[str, Provider] | None = None, latest: bool = True) -> RunResult:
    """Run (or resume) a prepared run to the end, a failure, or a stop request.

    Args:
        where: each judge's endpoint, or one per deployment (:func:`endpoints`).
        providers: a provider per judge instead of the one its endpoint calls for (``rescore``'s
            replay).
        latest: point ``<runs>/latest`` at this run (not for a re-scored copy).
        progress: filled in as the session goes, for whoever watches it.
        retry: ``resume --retry``: ``unscored`` or reason codes (checked by :func:`retry_codes`);
            their tasks are judged again and their new outcome lines supersede the old ones.
    """
    progress = progress if progress is not None else RunProgress()
    started = time.monotonic()
    run_dir = prepared.run_dir
    store = RunStore.open(run_dir) if prepared.resumed else RunStore.create(run_dir, prepared.manifest)
    if latest:
        point_latest(run_dir)
    cache = AnswerCache(prepared.config.cache.dir, enabled=prepared.config.cache.enabled)
    runtimes: list[JudgeRuntime] = []
    disk: DiskError | None = None
    interrupts: Interrupts | None = None
    try:
        resumed = resumptions(store.index, [j.name for j in prepared.config.judges], retry)
        cascade = cascade_run(prepared)
        if cascade is not None:  # its state rebuilt, --retry kept to the items it holds
            resumed = cascade.start(store, resumed)
        guard = guard_for(prepared.config, prepared.manifest.sessions,
                          lambda judge: (store.total_spend() if judge is None else store.spend.get(judge, Spend())).cost)
        runtimes = [build_runtime(judge, prepared.protocols[judge.name], _listed(where[judge.name]),
                                  total=prepared.tasks_of(judge), provider=(providers or {}).get(judge.name), guard=guard)
                    for judge in prepared.config.judges]
        if cascade is not None:
            cascade.attach(runtimes)
            progress.stages = tuple(cascade.plan.stages[i].name for i in cascade.plan.asked)
        engine = Engine(runtimes, dataset=prepared.config.dataset, store=store, cache=cache, resumptions=resumed,
                        sources=cascade.sources() if cascade is not None else None,
                        finished=cascade.finished if cascade is not None else None)
        spent_before = {judge: Spend().plus(spend) for judge, spend in store.spend.items()}
        session: dict[str, Any] = {"started_at": utc_now(), "status": "running",
                                   "retry": sorted(retry) if retry is not None else None}
        # max_hours counts from here, as the session's recorded time does (building the judges
        # above can take a second of imports; later sessions add up the recorded times).
        guard.started = time.monotonic()
        manifest = prepared.manifest
        manifest.sessions = [*manifest.sessions, session]
        manifest.status, manifest.updated_at, manifest.spend = "running", utc_now(), store.spend_record()
        store.write_manifest(manifest)
        items = ItemCollector(prepared.config, prepared.protocols)
        if cascade is not None:  # items decided and routed between stages as their lines are written
            store.watch(cascade.offer)
        elif items.active:  # an item's outcome as soon as its last request's is written
            store.watch(items.offer)
        progress.start(engine)
        main = asyncio.current_task()
        if install_signals:
            interrupts = Interrupts(engine, main, progress)
        checkpoints = asyncio.create_task(_checkpoint(store, manifest, engine, runtimes))
        try:
            outcome = await engine.run()
        except asyncio.CancelledError:
            outcome = EngineResult("cancelled", {})
            if main is not None:
                main.uncancel()
        finally:
            if interrupts is not None:
                interrupts.recording()
            checkpoints.cancel()
        outcome = _settled(outcome, runtimes)
        if outcome.status != "cancelled" and outcome.disk is None:  # a Ctrl-C wants out; resume writes them
            store.watch(cascade.settle if cascade is not None else None)
            try:
                write_item_outcomes(store, prepared.config, prepared.protocols)
                write_jury_outcomes(store, prepared.config, prepared.protocols)
            except DiskError as exc:
                outcome = EngineResult("stopped", outcome.failures, disk=exc)
        store.watch(None)
        if cascade is not None and cascade.unfinished and outcome.status == "completed":
            outcome = EngineResult("cancelled", outcome.failures)  # items wait at a stage: resume asks them
        cache.flush()  # before the reserve is given back: on a full disk it must not take that room
        session.update(ended_at=utc_now(), status=outcome.status,
                       judged=sum(j.counters.done - j.counters.resumed for j in runtimes),
                       spend=_session_spend(store, spent_before))
        if cache.problem:
            session["cache_problem"] = cache.problem
        if split := {j.config.name: {d.name: d.sent + d.batched for d in j.deployments} for j in runtimes
                     if len(j.deployments) > 1}:
            session["deployments"] = split  # each judge's calls in the spend above, per deployment
        manifest.status, manifest.updated_at = outcome.status, utc_now()
        manifest.spend, manifest.failures = store.spend_record(), dict(outcome.failures)
        manifest.stopped = outcome.budget.to_dict() if outcome.budget is not None else None
        manifest.batches = _batch_ids(runtimes, manifest)
        disk, recorded = _record_end(store, manifest, outcome.disk)
        totals = [JudgeTotals(j.config.name, j.config.model, j.protocol.name, j.counters.retries, j.counters.reasks,
                              j.rate_limited, _deployment_totals(j), j.counters.abandoned) for j in runtimes]
        return RunResult(run_dir, "stopped" if disk is not None else outcome.status, manifest, totals, dict(outcome.failures),
                         time.monotonic() - started, budget=outcome.budget, disk=disk, recorded=recorded,
                         cache_problem=cache.problem)
    finally:
        await _close_providers(runtimes)
        try:
            cache.close()  # writes the last batch of answers, if its disk lets it (else it says so)
        finally:
            # After a disk stop, a file that cannot be synced is the same news, already told.
            with contextlib.suppress(DiskError) if disk is not None else contextlib.nullcontext():
                store.close()
            if interrupts is not None:
                interrupts.restore()


def _record_end(store: RunStore, manifest: Manifest, disk: DiskError | None) -> tuple[DiskError | None, bool]:
    """Write the session's end (counts, status) into ``run.json``: ``(the write the disk
    refused, if any; whether run.json says how the session ended)``. A disk that refused, during
    the session or now, makes the run ``stopped`` with the reason, written in the room the store
    held for it (given back here)."""
    if disk is None:
        try:
            manifest.counts = _with_planned(store.counts(), manifest)
            store.write_manifest(manifest)
            return None, True
        except DiskError as exc:  # the disk refused at the very end: a stop like any other
            disk = exc
    store.release_reserve()
    manifest.status, manifest.stopped = "stopped", disk_stop(disk)
    manifest.sessions[-1]["status"] = "stopped"
    manifest.counts = _with_planned(store.counts(), manifest)
    try:
        store.write_manifest(manifest)
    except DiskError:
        return disk, False
    return disk, True


def disk_stop(error: DiskError) -> dict[str, Any]:
    """``run.json``'s ``stopped`` for a run its disk stopped (:attr:`Manifest.stopped`)."""
    return {"reason": "disk", "kind": error.kind, "path": error.path, "error": error.detail, "message": str(error)}


def _settled(outcome: EngineResult, runtimes: Sequence[JudgeRuntime]) -> EngineResult:
    """A stop that came when every judge had finished every task changes nothing: the run
    completed (``run.json`` and the exit code say so), however close the Ctrl-C came."""
    if outcome.status == "cancelled" and runtimes and all(j.counters.done >= j.counters.total for j in runtimes):
        return dataclasses.replace(outcome, status="completed")
    return outcome


def build_runtime(judge: JudgeConfig, protocol: Protocol, endpoints: Sequence[Endpoint], *, total: int,
                  provider: Provider | None = None, guard: Guard | None = None) -> JudgeRuntime:
    """A judge's runtime, whole at construction: nothing is changed on it afterwards. One
    deployment per endpoint (a single endpoint serves every deployment), each with its own lane
    and provider; ``provider`` replaces what the endpoints call for (``rescore``'s replay)."""
    names = deployment_names(judge)
    limits = [d.limits or judge.limits for d in judge.deployments] or [judge.limits]
    if provider is not None:
        names, limits = names[:1], limits[:1]
    if len(endpoints) == 1:
        endpoints = list(endpoints) * len(names)
    deployments = [
        Deployment(name, endpoint, provider if provider is not None else for_judge(judge, endpoint),
                   Lane(name if name == judge.name else f"{judge.name}/{name}", lane_limits), lane_limits.concurrency)
        for name, endpoint, lane_limits in zip(names, endpoints, limits, strict=True)
    ]
    first = deployments[0]
    board = None
    if judge.mode == "batch":
        board = BatchBoard()
    return JudgeRuntime(
        config=judge,
        protocol=protocol,
        endpoint=first.endpoint,
        template_hashes=template_hashes(protocol),
        lane=first.lane,
        provider=first.provider,
        counters=JudgeCounters(total=total),
        router=Router(deployments),
        guard=guard,
        batch=board,
    )


def _listed(where: Endpoint | Sequence[Endpoint]) -> list[Endpoint]:
    return [where] if isinstance(where, Endpoint) else list(where)


def _deployment_totals(judge: JudgeRuntime) -> dict[str, str]:
    """This session's calls per deployment (they add up to the judge's calls in its spend)."""
    if len(judge.deployments) < 2:
        return {}
    return {d.name: f"{d.sent + d.batched:,} calls" + (f" ({d.batched:,} in batches)" if d.batched else "")
            + (f", left out: {d.dead}" if d.dead else "") for d in judge.deployments}


def _session_spend(store: RunStore, before: Mapping[str, Spend]) -> dict[str, Any]:
    mine = {judge: spend.minus(before.get(judge, Spend())) for judge, spend in store.spend.items()}
    return {"total": total_spend(mine).to_dict(), "judges": spend_section(mine)["judges"]}


def _with_planned(counts: dict[str, Any], manifest: Manifest) -> dict[str, Any]:
    """``counts`` (tasks finished) with each judge's and jury's ``planned`` outcomes beside them
    (:meth:`Manifest.planned_tasks`): a stopped or cancelled run's ``tasks`` is what it
    finished, not what it has."""
    judges = counts.setdefault("judges", {})
    names = [entry.name for entry in manifest.judges]
    names += [str(j.get("name")) for j in manifest.config.get("juries") or [] if isinstance(j, dict)]
    names += [item_judge(entry.name) for entry in manifest.judges if entry.item_outcomes]
    names += [str(manifest.cascade["name"])] if manifest.cascade else []
    total = 0
    for name in names:
        planned = manifest.planned_tasks(name) or 0
        judges.setdefault(name, Counts().to_dict())["planned"] = planned
        total += planned
    counts.setdefault("total", Counts().to_dict())["planned"] = total
    return counts


async def _checkpoint(store: RunStore, manifest: Manifest, engine: Engine, runtimes: list[JudgeRuntime]) -> None:
    """Rewrite the manifest's spend (and the provider's batch ids) every :data:`CHECKPOINT_S`
    while the run goes on, so a killed run's totals need only the transcript written since the
    last checkpoint summed again."""
    while True:
        await asyncio.sleep(CHECKPOINT_S)
        manifest.updated_at, manifest.spend = utc_now(), store.spend_record()
        manifest.batches = _batch_ids(runtimes, manifest)
        try:
            store.write_manifest(manifest)
        except DiskError as exc:
            engine.stop_for_disk(exc)
            return


def _batch_ids(runtimes: list[JudgeRuntime], manifest: Manifest) -> dict[str, dict[str, str]]:
    return provider_ids({j.config.name: j.batch for j in runtimes if j.batch is not None}, manifest.batches)


def point_latest(run_dir: Path) -> None:
    """Point ``<runs dir>/latest`` at ``run_dir`` (atomically; skipped where symlinks are not
    possible: the run directory is printed anyway)."""
    run_dir = run_dir.resolve()
    link = run_dir.parent / LATEST
    temporary = run_dir.parent / f".{LATEST}.{os.getpid()}"
    try:
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(run_dir.name, target_is_directory=True)
        os.replace(temporary, link)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


async def _close_providers(runtimes: list[JudgeRuntime]) -> None:
    """Close the providers' connection pools."""
    for runtime in runtimes:
        with contextlib.suppress(Exception):
            for deployment in runtime.deployments:
                await deployment.provider.aclose()


if not TYPE_CHECKING:  # names of 0.1 that moved (a type checker reads the new homes)
    __getattr__ = moved_names(__name__, {
        "demo_endpoint": "judge_engine.running.demo",
    })
