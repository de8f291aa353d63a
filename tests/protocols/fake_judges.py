"""The judges the fake server answers, for tests over every protocol and output mode: each
example judge of a judging protocol, and each built-in protocol among them in both output modes
(close reading also zero- and few-shot), with the first items of the example's dataset."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from judge_engine.inputs.config import load_config
from judge_engine.inputs.dataset import iter_items
from judge_engine.planning.plan import build_protocol
from judge_engine.protocols import Protocol

REPO = Path(__file__).resolve().parents[2]
ITEMS_PER_JUDGE = 4
DRAWS = [(seed, temperature) for seed in range(3) for temperature in (0.0, 1.0)]
"""(seed, temperature) of the fake answers each test asks for, per item and variant."""


def _judges() -> Iterator[tuple[str, Protocol, list[dict[str, Any]]]]:
    """(name, protocol, items) for every example judge of a judging protocol, and each built-in
    protocol among them also in the other output mode (and close reading in both shot counts)."""
    seen: set[tuple[str, str]] = set()
    for config_path in sorted((REPO / "examples").glob("*/config.yaml")):
        config = load_config(config_path)
        for judge in config.judges:
            if judge.protocol in ("cdat", "dat"):
                continue  # generation protocols read a list cut short as it is, as the method does
            example = build_protocol(judge)
            rows = iter_items(config.dataset, example.required_fields)
            items = [dict(item) for _, item in zip(range(ITEMS_PER_JUDGE), rows, strict=False)]
            for protocol in _modes(example, dict(judge.protocol_options or {})):
                key = (protocol.name, protocol.options.model_dump_json())
                if key not in seen:
                    seen.add(key)
                    yield f"{config_path.parent.name}/{judge.name}/{mode(protocol)}", protocol, items


def _modes(example: Protocol, options: dict[str, Any]) -> Iterator[Protocol]:
    if example.name in ("custom", "pairwise-annotators"):
        yield example  # custom: its output mode is the config's; the annotators' method is text only
        return
    shot_counts = ("zero", "few") if "shots" in type(example.options).model_fields else (None,)
    for output in ("text", "json"):
        for shots in shot_counts:
            chosen = {"output": output, **({"shots": shots} if shots else {})}
            yield type(example).from_options({**options, **chosen})


def mode(protocol: Protocol) -> str:
    """``text`` or ``json``, and for close reading ``-zero-shot`` or ``-few-shot``."""
    shots = getattr(protocol.options, "shots", None)
    return protocol.options.output + (f"-{shots}-shot" if shots else "")


JUDGES = list(_judges())
"""(name, protocol, items), the name ``<example>/<judge>/<mode>``: ``ttct/ttct-mini/json``."""
