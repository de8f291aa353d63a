"""Run, resume: the steps between a config file and a finished run directory.

``start_run`` = load config -> scan dataset -> build judges -> find or create the run directory
(a config's run id is a content hash, so running the same config again resumes it) -> engine ->
manifest. Signals: the first Ctrl-C (or SIGTERM) stops dispatching and gives in-flight calls a
grace period; a second one cancels them. Either way the manifest says ``cancelled`` and
``judge-engine resume RUN_DIR`` finishes the job.
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
from judge_engine.errors import ConfigError, RunDirError
from judge_engine.jsonio import content_hash
from judge_engine.judging import JudgeRuntime
from judge_engine.lanes import Lane
from judge_engine.plan import build_protocol, judge_identity
from judge_engine.protocols import Protocol
from judge_engine.store import MANIFEST, RunStore, read_manifest, utc_now
from judge_engine.templating import template_hash

GRACE_S = 10.0
"""How long in-flight calls may finish after the first Ctrl-C."""
SWITCH_INTERVAL_S = 0.001


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
                   run_id: str, *, config_path: Path, demo: bool) -> dict[str, Any]:
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
        "config_path": str(config_path),
        "config": prepared_config.manifest_view(),
        "dataset": {"path": str(prepared_config.dataset.path), "fingerprint": dataset.fingerprint, "items": dataset.items},
        "judges": judges,
        "counts": {},
    }


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def prepare(config_path: Path, *, overrides: Mapping[str, Any], demo: bool, new_run: bool) -> PreparedRun:
    """Validate everything that can be validated offline and find or create the run directory."""
    config = load_config(config_path, overrides=overrides)
    protocols = protocols_for(config)
    required = sorted({f for p in protocols.values() for f in p.required_fields})
    dataset = scan(config.dataset, required, [p.check_item for p in protocols.values()])
    run_id = run_id_for(config, protocols, dataset, stem=config_path.stem if config_path.stem != "config" else config_path.parent.name or "run")
    if new_run:
        run_id = f"{run_id}-{utc_now().replace(':', '').replace('-', '')[:15]}"
    run_dir = config.output.dir / run_id
    resumed = (run_dir / MANIFEST).exists()
    manifest = read_manifest(run_dir) if resumed else build_manifest(config, protocols, dataset, run_id, config_path=config_path, demo=demo)
    return PreparedRun(config, run_dir, protocols, dataset, manifest, resumed)


def prepare_resume(run_dir: Path, *, overrides: Mapping[str, Any]) -> PreparedRun:
    """Rebuild a prepared run from a run directory's manifest (config path as recorded)."""
    manifest = read_manifest(run_dir)
    config_path = Path(manifest.get("config_path", ""))
    if not config_path.is_file():
        raise RunDirError(f"{run_dir}: its config {config_path} is gone; run the config again instead")
    merged = dict(overrides)
    prepared = prepare(config_path, overrides=merged, demo=bool(manifest.get("demo")), new_run=False)
    if prepared.run_dir.resolve() != run_dir.resolve():
        raise RunDirError(
            f"{run_dir}: its config or dataset changed since the run started "
            f"(it now maps to {prepared.run_dir.name}); run the config to start a new run"
        )
    return prepared


def api_key_for(judge: JudgeConfig) -> str | None:
    if judge.api_key is not None:
        return judge.api_key.get_secret_value()
    if judge.api_key_env:
        value = os.environ.get(judge.api_key_env)
        if value is None:
            raise ConfigError(f"judges[{judge.name}].api_key_env: environment variable {judge.api_key_env} is not set")
        return value
    return None


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


def default_provider(judge: JudgeConfig) -> Any:
    return provider_for_endpoint(judge, judge.model, judge.api_base, api_key=api_key_for(judge))


def provider_for_endpoint(judge: JudgeConfig, model: str, api_base: str | None, *, api_key: str | None) -> Any:
    """The provider ``judge.transport`` names for this endpoint (``auto``: direct when the model
    speaks OpenAI's API as is, litellm otherwise)."""
    from judge_engine.providers.litellm import LiteLLMProvider
    from judge_engine.providers.openai_http import OpenAIHTTPProvider

    if judge.transport == "litellm":
        return LiteLLMProvider(api_key=api_key)
    if OpenAIHTTPProvider.supports(model, api_base):
        return OpenAIHTTPProvider(api_key=api_key)
    if judge.transport == "direct":
        raise ConfigError(f"judges[{judge.name}].transport: direct needs a model litellm resolves to an "
                          f"OpenAI-compatible API; {model!r} is not (use auto or litellm)")
    return LiteLLMProvider(api_key=api_key)


async def execute(
    prepared: PreparedRun,
    *,
    provider_factory: Callable[[JudgeConfig], Any] = default_provider,
    on_start: Callable[[Engine], Any] | None = None,
    install_signals: bool = True,
) -> tuple[EngineResult, dict[str, Any]]:
    """Run (or resume) a prepared run to the end, a failure, or a stop request."""
    run_dir = prepared.run_dir
    # litellm runs part of every call in executor threads. Each time the event-loop thread
    # releases the GIL (a write, a cache insert) it may wait a whole switch interval (5 ms by
    # default) to get it back, stalling every lane; 1 ms keeps the loop responsive.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    store = RunStore.open(run_dir) if prepared.resumed else RunStore.create(run_dir, prepared.manifest)
    cache = AnswerCache(prepared.config.cache.dir, enabled=prepared.config.cache.enabled)
    runtimes: list[JudgeRuntime] = []
    try:
        runtimes = build_runtimes(prepared, provider_factory)
        engine = Engine(runtimes, dataset=prepared.config.dataset, store=store, cache=cache, done=store.done_task_ids())
        manifest = dict(prepared.manifest)
        manifest.update(status="running", updated_at=utc_now())
        store.write_manifest(manifest)
        if on_start is not None:
            on_start(engine)
        main = asyncio.current_task()
        restore = _install_signals(engine, main) if install_signals else (lambda: None)
        try:
            result = await engine.run()
        except asyncio.CancelledError:
            result = EngineResult("cancelled", {})
            if main is not None:
                main.uncancel()
        finally:
            restore()
        manifest.update(status=result.status, updated_at=utc_now(), counts=count_outcomes(run_dir), failures=result.failures)
        store.write_manifest(manifest)
        return result, manifest
    finally:
        await _close_providers(runtimes)
        try:
            cache.close()  # writes the last batch of answers, which can fail (disk full)
        finally:
            store.close()


async def _close_providers(runtimes: list[JudgeRuntime]) -> None:
    """Close connection pools (providers that hold one have ``aclose``)."""
    for runtime in runtimes:
        close = getattr(runtime.provider, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()


def _install_signals(engine: Engine, main: asyncio.Task[Any] | None) -> Callable[[], None]:
    loop = asyncio.get_running_loop()
    state = {"count": 0}

    def on_signal() -> None:
        state["count"] += 1
        engine.request_stop()
        if main is None:
            return
        if state["count"] >= 2:
            main.cancel()
        else:
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


def count_outcomes(run_dir: Path) -> dict[str, Any]:
    """Counts per judge and overall from ``outcomes.jsonl`` (last line per task wins).

    Streams the file keeping only (judge, status) per task: whole records at 10^5 tasks cost
    ~230 MB, this ~15 MB.
    """
    from judge_engine.store import OUTCOMES, read_jsonl

    latest: dict[str, tuple[str, str]] = {}
    for record in read_jsonl(run_dir / OUTCOMES):
        if "task_id" in record:
            latest[record["task_id"]] = (record.get("judge", "?"), record.get("status", "unscored"))
    per_judge: dict[str, dict[str, int]] = {}
    for judge, status in latest.values():
        counts = per_judge.setdefault(judge, {"scored": 0, "unscored": 0})
        counts[status] = counts.get(status, 0) + 1
    total = {
        "scored": sum(c["scored"] for c in per_judge.values()),
        "unscored": sum(c["unscored"] for c in per_judge.values()),
    }
    return {"total": total, "judges": per_judge}
