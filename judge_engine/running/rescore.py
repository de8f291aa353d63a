"""Re-scoring a run from its transcripts: the current parser and scoring over every recorded answer.

``rescore(run_dir)`` judges the run's tasks again with the engine's own task loop, but every
judge talks to a :class:`~judge_engine.providers.replay.ReplayProvider` over the recorded run:
no connection, no spend, no cache (the answers come from the transcripts, whatever the cache
holds or lost). Protocol options can change on the way (``--protocol-option parser=legacy-gemba``);
the result is a new run directory, an ordinary one (``show``, ``stats``, ``export`` work on it),
whose manifest names the run it was re-scored from, and a comparison with the original: tasks
whose score or status changed, and the counts per reason code before and after.

The judges are the ones the run recorded (``run.json``), not what its config file says now: a run
written by an earlier version (an earlier protocol version is part of its run id) re-scores at
today's protocol versions, and the report and the new manifest say each judge's move
(``gemba-mqm 1 -> 2``). The dataset must be the run's own, checked by fingerprint.
"""

from __future__ import annotations

import asyncio
import copy
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_engine.errors import ConfigError, DatasetError, RunDirError
from judge_engine.inputs.config import Budget, JobConfig, JudgeConfig, read_scalar, recorded_config
from judge_engine.inputs.dataset import DatasetSummary, fingerprint
from judge_engine.lanes import Lane
from judge_engine.planning.plan import build_protocol, scan_for
from judge_engine.protocols import Protocol
from judge_engine.providers import Endpoint, check_credentials, endpoint_for, for_judge
from judge_engine.providers.replay import ReplayProvider
from judge_engine.rundir.index import Query, RunIndex
from judge_engine.rundir.records import MANIFEST, Manifest
from judge_engine.rundir.store import open_index, read_manifest, utc_now
from judge_engine.running.session import (
    PreparedRun,
    RunResult,
    execute,
    new_manifest,
    recorded_config_path,
)
from judge_engine.trust.jury import check_juries
from judge_engine.util.naming import did_you_mean, judge_ref

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

    @property
    def versions(self) -> dict[str, dict[str, str]]:
        """Judge -> ``{"protocol", "from", "to"}``: its protocol version in the original run
        and today's, which re-scored it (the new run's ``rescored_versions``)."""
        return self.run.manifest.rescored_versions


def parse_options(pairs: Sequence[str], config: JobConfig) -> dict[str, dict[str, Any]]:
    """``[JUDGE.]KEY=VALUE`` pairs -> judge name -> protocol options. Without a judge, a key goes
    to every judge whose protocol has that option; values read as YAML scalars (``true``, ``3``).

    Raises:
        ConfigError: a malformed pair, an unknown judge, or a key no judge's protocol (or not the
            judge's named) has.
    """
    by_judge: dict[str, dict[str, Any]] = {}
    names = {j.name: j for j in config.judges}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--protocol-option {pair!r}: expected [JUDGE.]KEY=VALUE")
        judge_name, dot, option = key.rpartition(".")
        if dot and judge_name not in names:
            hint = did_you_mean(judge_name, names)
            raise ConfigError(f"--protocol-option {pair!r}: the run has no {judge_ref(judge_name)}"
                              + (f"; {hint}" if hint else "") + f" (judges: {', '.join(names)})")
        asked = [names[judge_name]] if dot else config.judges
        known = {j.name: list(build_protocol(j).options_model.model_fields) for j in asked}
        targets = [j for j in asked if option in known[j.name]]
        if not targets:
            hint = did_you_mean(option, [o for options in known.values() for o in options])
            problem = (f"{judge_ref(judge_name, 'protocol_options')}: {names[judge_name].protocol} has no option {option!r}"
                       if dot else f"no judge's protocol has an option {option!r}")
            raise ConfigError(f"--protocol-option {pair!r}: {problem}" + (f"; {hint}" if hint else ""))
        value = read_scalar(raw)
        for judge in targets:
            by_judge.setdefault(judge.name, {})[option] = value
    return by_judge


def rescore(run_dir: Path, *, options: Sequence[str] = (), output: Path | None = None,
            reask_online: bool = False, dataset: Path | None = None) -> RescoreResult:
    """Re-score ``run_dir`` into a new run directory (see the module docstring).

    The judges are the ones the run recorded in its manifest (``run.json``), whatever its config
    file says now or wherever it went, and today's protocol code reads their answers: a run made
    at an earlier protocol version is re-scored at today's (:attr:`RescoreResult.versions`).

    Args:
        options: ``[JUDGE.]KEY=VALUE`` protocol options to change (:func:`parse_options`).
        output: the new run directory (default: beside the original, ``<run>-rescored-<time>``).
        reask_online: ask the judge's provider for answers the run never recorded (re-asks the
            new rules make); without it they end ``not_recorded``.
        dataset: the run's dataset, when it is no longer where the manifest recorded it (nor
            there relative to the run directory, when the project moved); the same bytes.

    Raises:
        ConfigError, DatasetError, RunDirError: bad options, a dataset that is gone or changed,
            an existing output directory.
    """
    run_dir = run_dir.resolve()
    manifest = read_manifest(run_dir)
    raw = _recorded_raw(run_dir, manifest, dataset)
    where = run_dir / MANIFEST
    changes = parse_options(options, recorded_config(raw, where=where))
    target = (output or run_dir.parent / f"{run_dir.name}-rescored-{utc_now().replace(':', '').replace('-', '')[:15]}")
    target = target.resolve()
    if target.exists():
        raise RunDirError(f"{target}: already exists; choose another --output")
    overrides = {**manifest.overrides, "protocol_options": changes, "output_dir": target.parent}
    config = recorded_config(raw, where=where, overrides=overrides)
    protocols = _protocols(config, changed=set(changes), where=where)
    if reask_online and manifest.demo:
        raise ConfigError("--reask-online on a demo run: the fake server is not kept; re-run the demo instead")
    if reask_online:
        check_credentials(config)
    online = {j.name: endpoint_for(j) for j in config.judges} if reask_online else {}
    judges = {j.name: j for j in config.judges}  # as recorded: endpoints, limits, retries
    prepared = _for_replay(config, protocols, scan_for(config, protocols), target, original=run_dir,
                           recorded=manifest, online=reask_online, overrides=overrides)
    endpoints = {j.name: online.get(j.name) or Endpoint(j.model, None) for j in prepared.config.judges}
    run = asyncio.run(_replayed(prepared, endpoints, run_dir, judges if reask_online else {}))
    return _compare(run_dir, run)


def _protocols(config: JobConfig, *, changed: set[str], where: Path) -> dict[str, Protocol]:
    """Each judge's protocol, today's code with the recorded options (and the changed ones).

    Raises:
        ConfigError: an option today's protocol refuses, named after where it came from.
    """
    protocols = {}
    for judge in config.judges:
        try:
            protocols[judge.name] = build_protocol(judge)
        except ConfigError as exc:
            raise ConfigError(f"{'--protocol-option' if judge.name in changed else where}: {exc}") from None
    check_juries(config, protocols)
    return protocols


def _recorded_raw(run_dir: Path, manifest: Manifest, dataset: Path | None) -> dict[str, Any]:
    """The config ``run_dir`` recorded (``run.json``), its files found: the dataset (``dataset``
    if given, else where it was, else at the same place relative to the run directory: the
    project moved) and the same bytes as when the run judged it, and ``*_file`` options.

    Raises:
        RunDirError: a manifest without a config (written before runs recorded theirs).
        DatasetError: the dataset is gone, or not the file the run judged.
    """
    raw = copy.deepcopy(manifest.config)
    if not isinstance(raw.get("dataset"), dict) or not raw.get("judges"):
        raise RunDirError(f"{run_dir / MANIFEST}: records no config (dataset and judges) to re-score with")
    recorded = Path(str(raw["dataset"].get("path") or manifest.dataset.get("path") or ""))
    path = dataset.resolve() if dataset is not None else _moved(recorded, run_dir, manifest)
    if not path.is_file():
        raise DatasetError(f"{path}: the dataset of run {manifest.run_id} is not there (rescore re-renders each "
                           "item's prompt); give the same file with --dataset PATH")
    expected = manifest.dataset.get("fingerprint")
    if expected and fingerprint(path) != expected:
        raise DatasetError(f"{path}: not the dataset run {manifest.run_id} judged (the run recorded {expected}, "
                           f"this file is {fingerprint(path)}); its answers are to that file's items: give it with "
                           "--dataset PATH")
    raw["dataset"] = {**raw["dataset"], "path": str(path)}
    for judge in raw["judges"]:
        options = judge.get("protocol_options") if isinstance(judge, dict) else None
        if isinstance(options, dict):
            options.update({key: str(_moved(Path(value), run_dir, manifest)) for key, value in options.items()
                            if key.endswith("_file") and isinstance(value, str)})
    return raw


def _moved(path: Path, run_dir: Path, manifest: Manifest) -> Path:
    """``path`` as recorded, or, when it is gone, the same place relative to the run directory
    (the config's folder then and now: ``config_path`` and ``config_path_from_run``), if there."""
    then = Path(manifest.config_path).parent
    if path.exists() or not manifest.config_path_from_run or not then.is_absolute():
        return path
    try:
        relative = path.relative_to(then)
    except ValueError:
        return path
    moved = Path(os.path.normpath(run_dir / manifest.config_path_from_run)).parent / relative
    return moved if moved.exists() else path


def _for_replay(config: JobConfig, protocols: dict[str, Protocol], dataset: DatasetSummary, target: Path, *,
                original: Path, recorded: Manifest, online: bool, overrides: Mapping[str, Any]) -> PreparedRun:
    """The re-score as a prepared run, aimed at ``target``: no cache, no rate limits on the replay
    (a judge asked online is paced by its own lane inside the replay provider), no transport
    retries unless answers are asked online (a replay has no network to wait for), online (a
    batch run's answers are replayed one by one, never sent as a batch), its manifest naming the
    original and each judge's protocol version there (``recorded``, its manifest) and now."""
    judges = [j.model_copy(update={"limits": j.limits.model_copy(update={"rpm": None, "tpm": None,
                                                                          "concurrency": RESCORE_CONCURRENCY}),
                                   "retries": j.retries if online else j.retries.model_copy(update={"transport": 0}),
                                   "budget": Budget(), "deployments": [], "mode": "online"})
              for j in config.judges]
    config = config.model_copy(update={"judges": judges, "budget": Budget(),
                                       "cache": config.cache.model_copy(update={"enabled": False})})
    try:
        config_path = recorded_config_path(original, recorded)
    except RunDirError:  # gone: the new run names where it was
        config_path = Path(recorded.config_path)
    manifest = new_manifest(config, protocols, dataset, target.name, config_path=config_path, run_dir=target,
                            demo=recorded.demo, overrides=overrides)
    manifest.rescored_from = str(original)
    manifest.rescored_versions = versions_moved(recorded, protocols)
    return PreparedRun(config, target, protocols, dataset, manifest, False, recorded.demo)


def versions_moved(recorded: Manifest, protocols: Mapping[str, Protocol]) -> dict[str, dict[str, str]]:
    """Judge -> ``{"protocol", "from", "to"}``: the protocol version ``recorded`` (the original
    run's manifest) names for the judge (``""``: none recorded), and the one ``protocols`` has."""
    moves = {}
    for name, protocol in protocols.items():
        entry = recorded.judge(name)
        moves[name] = {"protocol": protocol.name, "from": entry.protocol_version if entry else "",
                       "to": protocol.version}
    return moves


async def _replayed(prepared: PreparedRun, where: Mapping[str, Endpoint], original: Path,
                    online: Mapping[str, JudgeConfig]) -> RunResult:
    """The replay, each judge answered from ``original``; a judge in ``online`` (as configured)
    asks its own endpoint, paced by a lane with its own limits, for answers never recorded."""
    providers = {}
    for j in prepared.config.judges:
        configured = online.get(j.name)
        providers[j.name] = ReplayProvider(original) if configured is None else ReplayProvider(
            original, fallback=for_judge(configured, where[j.name]), fallback_lane=Lane(j.name, configured.limits))
    return await execute(prepared, where, providers=providers, install_signals=False, latest=False)


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
