"""Run, resume: the steps between a config file and a finished run directory.

``prepare`` = load config -> scan dataset -> find or create the run directory (a config's run id
is a content hash, so running the same config again resumes it); ``check_credentials`` before
anything is sent; ``execute`` = build judges -> engine -> manifest (with the run's counts and
spend, checkpointed while it runs). Signals: the first Ctrl-C (or SIGTERM) stops dispatching at
once and gives in-flight calls a grace period; a second one cancels them. Either way the manifest
says ``cancelled`` and ``judge-engine resume RUN_DIR`` finishes the job.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from judge_engine import __version__
from judge_engine.cache import AnswerCache
from judge_engine.config import JobConfig, JudgeConfig, load_config
from judge_engine.dataset import DatasetSummary, scan
from judge_engine.engine import Engine, EngineResult
from judge_engine.errors import ConfigError, ReasonCode, RunDirError
from judge_engine.jsonio import content_hash
from judge_engine.lanes import Lane
from judge_engine.plan import build_protocol, judge_identity
from judge_engine.protocols import Protocol
from judge_engine.providers import for_judge
from judge_engine.runtime import JudgeRuntime
from judge_engine.store import (
    MANIFEST,
    RunStore,
    Spend,
    count_outcomes,
    latest_outcomes,
    read_manifest,
    utc_now,
)
from judge_engine.templating import template_hash

GRACE_S = 10.0
"""How long in-flight calls may finish after the first Ctrl-C."""
SWITCH_INTERVAL_S = 0.001
CHECKPOINT_S = 30.0
"""How often a running run's manifest is rewritten with its counts and spend."""
LATEST = "latest"
"""A symlink in the runs directory to the run started or resumed last."""
RETRY_ALL = "unscored"
"""``--retry`` value that selects every unscored task, whatever its reason code."""


@dataclass(slots=True)
class PreparedRun:
    config: JobConfig
    run_dir: Path
    protocols: dict[str, Protocol]
    dataset: DatasetSummary
    manifest: dict[str, Any]
    resumed: bool


def protocols_for(config: JobConfig) -> dict[str, Protocol]:
    return {judge.name: build_protocol(judge) for judge in config.judges}


def template_hashes(protocol: Protocol) -> list[str]:
    return [template_hash(t) for t in protocol.templates()]


def run_id_for(config: JobConfig, protocols: Mapping[str, Protocol], dataset: DatasetSummary, *, stem: str) -> str:
    """Same config + same data = same run id (so running it again resumes)."""
    identity = {
        "judges": [
            {
                **judge_identity(j, protocols[j.name]),
                "temperatures": j.temperatures,
                "repeats": j.repeats,
                "api_base": j.api_base,
                "templates": template_hashes(protocols[j.name]),
            }
            for j in config.judges
        ],
        "dataset": dataset.fingerprint,
        "fields": config.dataset.fields,
        "limit": config.dataset.limit,
    }
    return f"{stem}-{content_hash(identity)[3:13]}"


def build_manifest(prepared_config: JobConfig, protocols: Mapping[str, Protocol], dataset: DatasetSummary,
                   run_id: str, *, config_path: Path, run_dir: Path, demo: bool,
                   overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    judges = []
    for judge in prepared_config.judges:
        protocol = protocols[judge.name]
        tasks_per_item = len(judge.temperatures) * judge.repeats
        judges.append({
            "name": judge.name,
            "model": judge.model,
            "protocol": protocol.name,
            "protocol_version": protocol.version,
            "protocol_options": protocol.options.model_dump(mode="json"),
            "templates": dict(zip(protocol.templates(), template_hashes(protocol), strict=True)),
            "temperatures": judge.temperatures,
            "repeats": judge.repeats,
            "score_range": list(r) if (r := protocol.score_range()) else None,
            "tasks_per_item_variant": tasks_per_item,
        })
    return {
        "format": "judge-engine-run",
        "version": 1,
        "run_id": run_id,
        "status": "running",
        "created_at": utc_now(),
        "updated_at": utc_now(),
        "package_version": __version__,
        "versions": {"python": platform.python_version(), "litellm": _version("litellm")},
        "demo": demo,
        **({"synthetic": "DEMO RUN: every answer came from judge-engine's built-in fake server; "
                         "they are synthetic, not a model's judgments"} if demo else {}),
        "config_path": str(config_path.resolve()),
        "config_path_from_run": os.path.relpath(config_path.resolve(), run_dir.resolve()),
        "config": prepared_config.manifest_view(),
        "overrides": {key: str(value) if isinstance(value, Path) else value
                      for key, value in (overrides or {}).items() if value is not None and key != "api_base"},
        "dataset": {"path": str(prepared_config.dataset.path), "fingerprint": dataset.fingerprint, "items": dataset.items},
        "judges": judges,
        "counts": {},
        "spend": {},
        "sessions": [],
    }


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def prepare(config_path: Path, *, overrides: Mapping[str, Any], demo: bool, new_run: bool,
            run_dir: Path | None = None) -> PreparedRun:
    """Validate everything that can be validated offline and find or create the run directory.

    Args:
        overrides: command-line overrides (see :func:`~judge_engine.config.load_config`); they
            are recorded in the manifest, so ``resume`` applies them again.
        run_dir: resume this run directory (its name must still match the config and data:
            the run id, plus the suffix of a ``--new-run``).
    """
    config = load_config(config_path, overrides=overrides)
    protocols = protocols_for(config)
    required = sorted({f for p in protocols.values() for f in p.required_fields})
    dataset = scan(config.dataset, required, [p.check_item for p in protocols.values()])
    stem = config_path.stem if config_path.stem != "config" else config_path.resolve().parent.name or "run"
    # A demo's run says so in its name: its answers are synthetic, never to be mistaken for a model's.
    run_id = run_id_for(config, protocols, dataset, stem=f"{stem}-demo" if demo else stem)
    if run_dir is not None:
        run_dir = run_dir.resolve()  # runs/latest is a symlink: name the run itself
        if run_dir.name != run_id and not run_dir.name.startswith(f"{run_id}-"):
            raise RunDirError(f"{run_dir}: its config or dataset changed since the run started (they now make "
                              f"run {run_id}); run the config to start a new run")
    else:
        if new_run:
            run_id = f"{run_id}-{utc_now().replace(':', '').replace('-', '')[:15]}"
        run_dir = config.output.dir / run_id
    resumed = (run_dir / MANIFEST).exists()
    manifest = read_manifest(run_dir) if resumed else build_manifest(
        config, protocols, dataset, run_id, config_path=config_path, run_dir=run_dir, demo=demo,
        overrides=overrides)
    return PreparedRun(config, run_dir, protocols, dataset, manifest, resumed)


def recorded_config_path(run_dir: Path, manifest: Mapping[str, Any]) -> Path:
    """The config a run was started from: the absolute path recorded, else the path relative to
    the run directory (the project moved), else, for runs recorded before absolute paths, the
    path as given relative to the current directory or to the config's folder (the runs
    directory's parent, where ``output.dir`` is relative to)."""
    recorded = Path(str(manifest.get("config_path", "")))
    candidates = [recorded]
    if relative := manifest.get("config_path_from_run"):
        candidates.append(run_dir / str(relative))
    if not recorded.is_absolute():
        candidates += [parent / recorded.name for parent in run_dir.resolve().parents[:3]]
    for candidate in candidates:
        if str(candidate) and candidate.is_file():
            return candidate
    raise RunDirError(f"{run_dir}: its config {recorded} is gone; run the config again instead")


def prepare_resume(run_dir: Path, *, overrides: Mapping[str, Any]) -> PreparedRun:
    """Rebuild a prepared run from a run directory's manifest, from any working directory: the
    config as recorded, with the command-line overrides it was started with (``--model``,
    ``--limit``, ``--cache-dir``...) and then ``overrides``."""
    manifest = read_manifest(run_dir)
    config_path = recorded_config_path(run_dir, manifest)
    merged = {**(manifest.get("overrides") or {}), **overrides}
    return prepare(config_path, overrides=merged, demo=bool(manifest.get("demo")), new_run=False, run_dir=run_dir)


def retry_codes(retry: str | None) -> frozenset[str] | None:
    """The reason codes ``resume --retry`` names (``unscored``: all of them), checked.

    Raises:
        ConfigError: an unknown reason code (the message lists the known ones).
    """
    if retry is None:
        return None
    codes = frozenset(c.strip() for c in retry.split(",") if c.strip())
    known = {str(c) for c in ReasonCode} | {RETRY_ALL, "unrecorded"}
    if not codes or codes - known:
        raise ConfigError(f"--retry {retry}: unknown reason code {', '.join(sorted(codes - known)) or '(none)'} "
                          f"(use {RETRY_ALL} or some of: {', '.join(sorted(str(c) for c in ReasonCode))})")
    return codes


def retry_selection(run_dir: Path, codes: frozenset[str] | None) -> tuple[set[str], set[str]]:
    """(task ids finished and left alone, task ids to judge again) for ``resume --retry``:
    tasks whose last outcome is unscored with one of ``codes`` (see :func:`retry_codes`) are
    judged again; with None, only tasks with no outcome yet are judged."""
    latest = latest_outcomes(run_dir)
    if codes is None:
        return set(latest), set()
    again = {task for task, o in latest.items() if o.status != "scored"
             and (RETRY_ALL in codes or (o.reason_code or "unrecorded") in codes)}
    return set(latest) - again, again


def build_runtimes(prepared: PreparedRun, provider_factory: Callable[[JudgeConfig], Any]) -> list[JudgeRuntime]:
    runtimes = []
    for judge in prepared.config.judges:
        protocol = prepared.protocols[judge.name]
        runtime = JudgeRuntime(
            config=judge,
            protocol=protocol,
            lane=Lane(judge.name, judge.limits),
            provider=provider_factory(judge),
            template_hashes=template_hashes(protocol),
        )
        runtime.counters.total = prepared.dataset.items * _variants_per_item(prepared, protocol) * len(judge.temperatures) * judge.repeats
        runtimes.append(runtime)
    return runtimes


def _variants_per_item(prepared: PreparedRun, protocol: Protocol) -> int:
    """Variants of the first item (both A/B orders, several BWS orders...). Every built-in
    protocol gives each item the same number, so one row is enough for the display's total."""
    from judge_engine.dataset import iter_items

    first = next(iter_items(prepared.config.dataset, protocol.required_fields), None)
    return len(protocol.variants(first)) if first is not None else 1


async def execute(
    prepared: PreparedRun,
    *,
    provider_factory: Callable[[JudgeConfig], Any] = for_judge,
    on_start: Callable[[Engine], Any] | None = None,
    on_stop: Callable[[Engine], Any] | None = None,
    install_signals: bool = True,
    retry: frozenset[str] | None = None,
) -> tuple[EngineResult, dict[str, Any]]:
    """Run (or resume) a prepared run to the end, a failure, or a stop request.

    Args:
        on_start: called with the engine once the judges are built.
        on_stop: called at the first Ctrl-C / SIGTERM, after dispatching has stopped.
        retry: ``resume --retry``: ``unscored`` or reason codes (comma-separated, checked by
            :func:`retry_codes`); their tasks are judged again and their new outcome lines
            supersede the old ones.

    Returns:
        The engine's result and the manifest as written: ``counts`` (tasks, scored, unscored by
        reason code), ``spend`` (the whole run's calls, tokens and cost) and ``sessions`` (this
        session's share last).
    """
    run_dir = prepared.run_dir
    # litellm runs part of every call in executor threads. Each time the event-loop thread
    # releases the GIL (a write, a cache insert) it may wait a whole switch interval (5 ms by
    # default) to get it back, stalling every lane; 1 ms keeps the loop responsive.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    store = RunStore.open(run_dir) if prepared.resumed else RunStore.create(run_dir, prepared.manifest)
    point_latest(run_dir)
    cache = AnswerCache(prepared.config.cache.dir, enabled=prepared.config.cache.enabled)
    runtimes: list[JudgeRuntime] = []
    try:
        done, again = retry_selection(run_dir, retry)
        runtimes = build_runtimes(prepared, provider_factory)
        engine = Engine(runtimes, dataset=prepared.config.dataset, store=store, cache=cache, done=done, again=again)
        spent_before = {judge: Spend().plus(spend) for judge, spend in store.spend.items()}
        session: dict[str, Any] = {"started_at": utc_now(), "status": "running",
                                   "retry": sorted(retry) if retry is not None else None}
        manifest = dict(prepared.manifest)
        manifest["sessions"] = [*manifest.get("sessions", []), session]
        manifest.update(status="running", updated_at=utc_now(), spend=store.spend_record())
        store.write_manifest(manifest)
        if on_start is not None:
            on_start(engine)
        main = asyncio.current_task()
        restore = _install_signals(engine, main, on_stop) if install_signals else (lambda: None)
        checkpoints = asyncio.create_task(_checkpoint(store, manifest))
        try:
            result = await engine.run()
        except asyncio.CancelledError:
            result = EngineResult("cancelled", {})
            if main is not None:
                main.uncancel()
        finally:
            restore()
            checkpoints.cancel()
        session.update(ended_at=utc_now(), status=result.status,
                       judged=sum(j.counters.done - j.counters.resumed for j in runtimes),
                       spend=_session_spend(store, spent_before))
        manifest.update(status=result.status, updated_at=utc_now(), counts=count_outcomes(latest_outcomes(run_dir)),
                        spend=store.spend_record(), failures=result.failures)
        store.write_manifest(manifest)
        return result, manifest
    finally:
        await _close_providers(runtimes)
        try:
            cache.close()  # writes the last batch of answers, which can fail (disk full)
        finally:
            store.close()


def _session_spend(store: RunStore, before: Mapping[str, Spend]) -> dict[str, Any]:
    judges = {judge: spend.minus(before.get(judge, Spend())) for judge, spend in store.spend.items()}
    total = Spend()
    for spend in judges.values():
        total = total.plus(spend)
    return {"total": total.as_record(), "judges": {j: s.as_record() for j, s in sorted(judges.items())}}


async def _checkpoint(store: RunStore, manifest: dict[str, Any]) -> None:
    """Rewrite the manifest's spend every :data:`CHECKPOINT_S` while the run goes on, so a killed
    run's totals need only the transcript written since the last checkpoint summed again."""
    while True:
        await asyncio.sleep(CHECKPOINT_S)
        manifest.update(updated_at=utc_now(), spend=store.spend_record())
        store.write_manifest(manifest)


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
    """Close connection pools (providers that hold one have ``aclose``)."""
    for runtime in runtimes:
        close = getattr(runtime.provider, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()


def _install_signals(engine: Engine, main: asyncio.Task[Any] | None,
                     on_stop: Callable[[Engine], Any] | None) -> Callable[[], None]:
    loop = asyncio.get_running_loop()
    state = {"count": 0}

    def on_signal() -> None:
        state["count"] += 1
        if main is None:
            engine.request_stop()
            return
        if state["count"] >= 2:
            main.cancel()
            return
        engine.request_stop()
        if on_stop is not None:
            on_stop(engine)
        loop.call_later(GRACE_S, lambda: main.cancel() if not main.done() else None)

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):
            pass

    def restore() -> None:
        for sig in installed:
            loop.remove_signal_handler(sig)

    return restore
