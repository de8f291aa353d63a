"""Config x dataset -> a lazy stream of tasks, and the content hashes that name tasks and runs.

A task is one (judge, item, variant, temperature, repeat). The stream is a generator: a million
tasks are never a million objects. A task id hashes everything that defines the task's question,
so it is stable across runs and processes and a resumed run recognises finished work; a run id
hashes the judges and the dataset, so running the same config again finds its run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from judge_engine.errors import ConfigError, DatasetError, TemplateError
from judge_engine.inputs.config import DatasetConfig, JobConfig, JudgeConfig
from judge_engine.inputs.dataset import DatasetSummary, Reader, iter_items, scan
from judge_engine.protocols import Protocol, get_protocol
from judge_engine.util.jsonio import content_hash
from judge_engine.util.redaction import redact_url


@dataclass(frozen=True, slots=True)
class Task:
    """One question to one judge."""

    task_id: str
    judge: str
    item: Mapping[str, Any]
    variant: str
    temperature: float
    repeat: int
    row: int = -1
    """The item's position in the dataset (0-based; -1: unknown)."""
    row_tasks: int = 0
    """How many tasks this judge has for the item (variants x temperatures x repeats): with
    ``row``, what lets a resumed run skip the items it finished without reading them."""

    @property
    def item_id(self) -> str:
        return str(self.item["id"])

    @property
    def ref(self) -> str:
        """Where the task sits in the plan: judge, item, variant, temperature, repeat. Unlike the
        task id it survives a change of protocol options, so a replay can find what a task's
        counterpart in another run was answered (:mod:`judge_engine.providers.replay`)."""
        return task_ref(self.judge, self.item_id, self.variant, self.temperature, self.repeat)


def task_ref(judge: str, item_id: str, variant: str, temperature: float, repeat: int) -> str:
    """The :attr:`Task.ref` of a task's coordinates."""
    return f"{judge}\x1f{item_id}\x1f{variant}\x1f{float(temperature)!r}\x1f{repeat}"


def build_protocol(judge: JudgeConfig) -> Protocol:
    """Instantiate the judge's protocol with its validated options.

    Raises:
        ConfigError: an unknown protocol or bad options, naming the judge's key.
    """
    try:
        cls = get_protocol(judge.protocol)
    except ConfigError as exc:
        raise ConfigError(f"judges[{judge.name}].protocol: {exc}") from None
    return cls.from_options(judge.protocol_options, where=f"judges[{judge.name}].protocol_options")


def scan_for(config: JobConfig, protocols: Mapping[str, Protocol]) -> DatasetSummary:
    """:func:`~judge_engine.inputs.dataset.scan` of the config's dataset for its judges' protocols: every
    row has the fields they require and passes their checks; variants counted per judge.

    Raises:
        ConfigError: a field a judge reads (or a column ``dataset.fields`` maps) that no row has,
            named once by the judge's option that reads it (a custom template's line).
        DatasetError: the bad rows, naming the file and line.
    """
    required = sorted({f for p in protocols.values() for f in p.required_fields})
    ordered = [protocols[j.name] for j in config.judges]
    return scan(config.dataset, required, [p.check_item for p in ordered],
                [lambda item, p=p: len(p.variants(item)) for p in ordered],  # type: ignore[misc]
                readers=field_readers(config, protocols))


def field_readers(config: JobConfig, protocols: Mapping[str, Protocol]) -> dict[str, list[Reader]]:
    """Per item field the judges require, what reads it in the config's words
    (``judges[mine].protocol_options.template, line 3, reads the variable 'mesage'``): how a
    message about a field no row has names the place to fix."""
    readers: dict[str, list[Reader]] = {}
    for judge in config.judges:
        protocol = protocols[judge.name]
        for field in protocol.required_fields:
            option = protocol.field_reader(field)
            readers.setdefault(field, []).append(
                Reader(f"judges[{judge.name}].{option}") if option is not None else
                Reader(f"judges[{judge.name}]: protocol {protocol.name} reads the item field {field!r}", fixed=True))
    return readers


def render_problem(judge: str, item_id: str, error: Exception) -> str:
    """A prompt that could not be rendered, named by its judge (and the option holding a
    config template: ``judges[mine].protocol_options.template: ...``) and its item."""
    text = str(error)
    where = f"judges[{judge}]" + ("." if text.startswith("protocol_options.") else ": ")
    return f"{where}{text} (item {item_id!r})"


def check_first_render(config: JobConfig, protocols: Mapping[str, Protocol], required: Sequence[str]) -> None:
    """Render every judge's prompt for the dataset's first item, so that a template that cannot
    render (one that tries to change its item, passes a render bound, or reads what the item
    lacks) stops the run before anything is sent, not as one unscored task after another.

    Raises:
        TemplateError: the prompt of a judge cannot be rendered (naming the judge, the template
            and the item).
    """
    item = next(iter_items(config.dataset, required), None)
    if item is None:
        return
    for judge in config.judges:
        protocol = protocols[judge.name]
        try:
            protocol.render(item, protocol.variants(item)[0])
        except (TemplateError, DatasetError) as exc:
            raise TemplateError(render_problem(judge.name, item["id"], exc)) from None


def judge_identity(judge: JudgeConfig, protocol: Protocol) -> dict[str, Any]:
    """What defines a judge's answers (not its limits or timeouts). ``confidence`` only when
    set, so the ids of every run before it stay as they were."""
    identity = {
        "name": judge.name,
        "model": judge.model,
        "protocol": protocol.name,
        "protocol_version": protocol.version,
        "options": protocol.options.model_dump(mode="json"),
        "max_tokens": judge.max_tokens,
        "params": judge.params,
    }
    if judge.confidence is not None:
        identity["confidence"] = judge.confidence.model_dump(mode="json")
    return identity


def with_protocol_defaults(config: JobConfig, protocols: Mapping[str, Protocol]) -> JobConfig:
    """The config with each protocol's request defaults (:attr:`Protocol.request_defaults`:
    ``pairwise-annotators`` asks for 10 tokens and log-probs) where the judge does not set them."""
    judges = []
    for judge in config.judges:
        defaults = {key: value for key, value in protocols[judge.name].request_defaults.items()
                    if key not in judge.model_fields_set}
        judges.append(JudgeConfig.model_validate({**judge.model_dump(), **defaults}) if defaults else judge)
    return config.model_copy(update={"judges": judges}) if judges != list(config.judges) else config


def template_hashes(protocol: Protocol) -> list[str]:
    """Content hashes of the templates the protocol renders (in cache keys and the manifest)."""
    return protocol.template_hashes()


def run_id(config: JobConfig, protocols: Mapping[str, Protocol], dataset: DatasetSummary, *, stem: str,
           cascade: Mapping[str, Any] | None = None) -> str:
    """``<stem>-<hash>``: the same judges on the same data make the same run id, so running a
    config again resumes its run. ``cascade``: a cascaded run's stages and thresholds
    (:meth:`judge_engine.trust.cascade.CascadePlan.identity`), absent when the cascade is off."""
    identity = {
        "judges": [
            {
                **judge_identity(j, protocols[j.name]),
                "temperatures": j.temperatures,
                "repeats": j.repeats,
                "api_base": redact_url(j.api_base),  # the server, not its credentials
                "templates": template_hashes(protocols[j.name]),
            }
            for j in config.judges
        ],
        "dataset": dataset.fingerprint,
        "fields": config.dataset.fields,
        "limit": config.dataset.limit,
    }
    if cascade is not None:
        identity["cascade"] = dict(cascade)
    return f"{stem}-{content_hash(identity)[3:13]}"


def claim_new_run(runs: Path, identity: str) -> Path:
    """The directory of a ``--new-run``, made here: ``<run id>-<UTC time to the microsecond>``,
    so the names sort by time, and made exclusively, so two runs started in the same instant
    (in two processes) never share one: the second takes the next free time."""
    runs.mkdir(parents=True, exist_ok=True)
    while True:
        run_dir = runs / f"{identity}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%f')}"
        try:
            run_dir.mkdir()
            return run_dir
        except FileExistsError:
            continue  # the same microsecond as another run: the clock has moved on by the next try


def task_id(identity: Mapping[str, Any], item: Mapping[str, Any], variant: str, temperature: float, repeat: int) -> str:
    """The content hash naming one task."""
    return content_hash(
        {"judge": identity, "item": item, "variant": variant, "temperature": temperature, "repeat": repeat}
    )


def iter_tasks(judge: JudgeConfig, protocol: Protocol, dataset: DatasetConfig, *, skip_rows: int = 0) -> Iterator[Task]:
    """Every task of one judge, item by item (variants, temperatures, repeats innermost), from
    the item at position ``skip_rows`` on (the rows before it are not read)."""
    identity = judge_identity(judge, protocol)
    for row, item in enumerate(iter_items(dataset, protocol.required_fields, skip=skip_rows), start=skip_rows):
        variants = protocol.variants(item)
        row_tasks = len(variants) * len(judge.temperatures) * judge.repeats
        for variant in variants:
            for temperature in judge.temperatures:
                for repeat in range(judge.repeats):
                    yield Task(
                        task_id=task_id(identity, item, variant, temperature, repeat),
                        judge=judge.name,
                        item=item,
                        variant=variant,
                        temperature=temperature,
                        repeat=repeat,
                        row=row,
                        row_tasks=row_tasks,
                    )
