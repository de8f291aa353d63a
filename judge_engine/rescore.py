"""Re-scoring a run from its transcripts: the current parser and scoring over every recorded answer.

``rescore(run_dir)`` judges the run's tasks again with the engine's own task loop, but every
judge talks to a :class:`~judge_engine.providers.replay.ReplayProvider` over the recorded run:
no connection, no spend, no cache (the answers come from the transcripts, whatever the cache
holds or lost). Protocol options can change on the way (``--protocol-option parser=legacy-gemba``);
the result is a new run directory, an ordinary one (``show``, ``stats``, ``export`` work on it),
whose manifest names the run it was re-scored from, and a comparison with the original: tasks
whose score or status changed, and the counts per reason code before and after.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_engine.config import Budget, JobConfig, JudgeConfig, read_scalar
from judge_engine.errors import ConfigError, RunDirError
from judge_engine.index import Query, RunIndex
from judge_engine.plan import build_protocol
from judge_engine.providers import Endpoint, for_judge
from judge_engine.session import (
    PreparedRun,
    RunResult,
    execute,
    new_manifest,
    prepare,
    recorded_config_path,
)
from judge_engine.store import open_index, read_manifest, utc_now

RESCORE_CONCURRENCY = 64


@dataclass(frozen=True, slots=True)
class Change:
    """One task whose status or score differs after re-scoring."""

    task: str
    """``judge · item · T=… · repeat … [· variant]``."""
    before: str
    after: str


@dataclass(frozen=True, slots=True)
class RescoreResult:
    """A re-scored run and how it differs from the original."""

    run: RunResult
    original: Path
    tasks: int
    """Tasks of the original with an outcome (each re-scored)."""
    changed: list[Change] = field(default_factory=list)
    before: dict[str, int] = field(default_factory=dict)
    """``scored`` and each reason code -> tasks, in the original."""
    after: dict[str, int] = field(default_factory=dict)
    replayed: int = 0
    """Answers served from the recording."""
    asked_online: int = 0


def parse_options(pairs: Sequence[str], config: JobConfig) -> dict[str, dict[str, Any]]:
    """``[JUDGE.]KEY=VALUE`` pairs -> judge name -> protocol options. Without a judge, a key goes
    to every judge whose protocol has that option; values read as YAML scalars (``true``, ``3``).

    Raises:
        ConfigError: a malformed pair, an unknown judge, or a key no judge's protocol has.
    """
    by_judge: dict[str, dict[str, Any]] = {}
    names = {j.name: j for j in config.judges}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--protocol-option {pair!r}: expected [JUDGE.]KEY=VALUE")
        judge_name, dot, option = key.rpartition(".")
        if dot and judge_name not in names:
            raise ConfigError(f"--protocol-option {pair!r}: no judge {judge_name!r} (judges: {', '.join(names)})")
        targets = [names[judge_name]] if dot else [
            j for j in config.judges if option in build_protocol(j).options_model.model_fields]
        if not targets:
            raise ConfigError(f"--protocol-option {pair!r}: no judge's protocol has an option {option!r}")
        value = read_scalar(raw)
        for judge in targets:
            by_judge.setdefault(judge.name, {})[option] = value
    return by_judge


def rescore(run_dir: Path, *, options: Sequence[str] = (), output: Path | None = None,
            reask_online: bool = False) -> RescoreResult:
    """Re-score ``run_dir`` into a new run directory (see the module docstring).

    Args:
        options: ``[JUDGE.]KEY=VALUE`` protocol options to change (:func:`parse_options`).
        output: the new run directory (default: beside the original, ``<run>-rescored-<time>``).
        reask_online: ask the judge's provider for answers the run never recorded (re-asks the
            new rules make); without it they end ``not_recorded``.

    Raises:
        ConfigError, DatasetError, RunDirError: bad options, a dataset that changed or is gone,
            an existing output directory.
    """
    run_dir = run_dir.resolve()
    manifest = read_manifest(run_dir)
    config_path = recorded_config_path(run_dir, manifest)
    base = prepare(config_path, overrides=manifest.overrides, demo=manifest.demo, run_dir=run_dir, check_keys=False)
    changes = parse_options(options, base.config)
    target = (output or run_dir.parent / f"{run_dir.name}-rescored-{utc_now().replace(':', '').replace('-', '')[:15]}")
    target = target.resolve()
    if target.exists():
        raise RunDirError(f"{target}: already exists; choose another --output")
    overrides = {**manifest.overrides, "protocol_options": changes, "output_dir": target.parent}
    prepared = prepare(config_path, overrides=overrides, demo=manifest.demo, check_keys=reask_online and not manifest.demo,
                       dataset=base.dataset)
    judges = {j.name: j for j in prepared.config.judges}  # as configured: endpoints, limits, retries
    online = {name: _online(j, prepared) for name, j in judges.items()} if reask_online else {}
    prepared = _for_replay(prepared, target, original=run_dir, online=reask_online)
    where = {j.name: online.get(j.name) or Endpoint(j.model, None) for j in prepared.config.judges}
    run = asyncio.run(_replayed(prepared, where, run_dir, judges if reask_online else {}))
    return _compare(run_dir, run)


def _for_replay(prepared: PreparedRun, target: Path, *, original: Path, online: bool) -> PreparedRun:
    """The prepared run, aimed at ``target``: no cache, no rate limits on the replay (a judge
    asked online is paced by its own lane inside the replay provider), no transport retries
    unless answers are asked online (a replay has no network to wait for), online (a batch run's
    answers are replayed one by one, never sent as a batch), its manifest naming the original."""
    judges = [j.model_copy(update={"limits": j.limits.model_copy(update={"rpm": None, "tpm": None,
                                                                          "concurrency": RESCORE_CONCURRENCY}),
                                   "retries": j.retries if online else j.retries.model_copy(update={"transport": 0}),
                                   "budget": Budget(), "deployments": [], "mode": "online"})
              for j in prepared.config.judges]
    config = prepared.config.model_copy(update={"judges": judges, "budget": Budget(),
                                                "cache": prepared.config.cache.model_copy(update={"enabled": False})})
    manifest = new_manifest(config, prepared.protocols, prepared.dataset, target.name,
                            config_path=Path(prepared.manifest.config_path), run_dir=target, demo=prepared.demo,
                            overrides=prepared.manifest.overrides)
    manifest.rescored_from = str(original)
    return PreparedRun(config, target, prepared.protocols, prepared.dataset, manifest, False, prepared.demo)


async def _replayed(prepared: PreparedRun, where: Mapping[str, Endpoint], original: Path,
                    online: Mapping[str, JudgeConfig]) -> RunResult:
    """The replay, each judge answered from ``original``; a judge in ``online`` (as configured)
    asks its own endpoint, paced by a lane with its own limits, for answers never recorded."""
    from judge_engine.lanes import Lane
    from judge_engine.providers.replay import ReplayProvider

    providers = {}
    for j in prepared.config.judges:
        configured = online.get(j.name)
        providers[j.name] = ReplayProvider(original) if configured is None else ReplayProvider(
            original, fallback=for_judge(configured, where[j.name]), fallback_lane=Lane(j.name, configured.limits))
    return await execute(prepared, where, providers=providers, install_signals=False, latest=False)


def _online(judge: Any, prepared: PreparedRun) -> Endpoint:
    from judge_engine.providers import endpoint_for

    if prepared.demo:
        raise ConfigError("--reask-online on a demo run: the fake server is not kept; re-run the demo instead")
    return endpoint_for(judge)


def _compare(original: Path, run: RunResult) -> RescoreResult:
    """What changed, task by task, read from the two runs' indexes (a million tasks compare in
    SQLite, not in memory). A task compares by its status, score and reason code."""
    with open_index(original) as before, open_index(run.run_dir) as after:
        changed = [Change(_where(coords), _label(old), _label(new)) for coords, old, new in after.differences(original)]
        return RescoreResult(run, original, before.count(Query(status="scored")) + before.count(Query(status="unscored")),
                             changed, _tally(before), _tally(after))


def _where(coords: tuple[Any, ...]) -> str:
    judge, item, variant, temperature, repeat = coords
    return f"{judge} · {item} · T={temperature} · repeat {repeat}" + (f" · {variant}" if variant else "")


def _label(outcome: tuple[Any, ...] | None) -> str:
    if outcome is None:
        return "no outcome"
    status, score, code = outcome
    if status == "scored":
        return "scored " + ("-" if score is None else f"{score:g}")
    return f"unscored ({code})"


def _tally(index: RunIndex) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for (_judge, status, code), n in index.counts().items():
        if status != "undone":
            counts["scored" if status == "scored" else str(code)] += n
    return dict(sorted(counts.items()))
