"""Reading a config file: UTF-8 text, then YAML (PyYAML's one home), its shape checked before
anything is built from it.

A config is small, but a YAML file can describe a huge value in a few lines: aliases repeat a
node without copying it (nine lines of nested aliases are 10^9 strings once encoded as JSON), and
nesting has no limit of its own (PyYAML builds nodes recursively and fails with a traceback past
a few hundred levels). So the file's events are walked first, without building anything, and a
node nested past :data:`MAX_DEPTH`, a document whose aliases expand past :data:`MAX_VALUES`
values, an alias inside its own anchor, or a key given twice in one mapping (PyYAML keeps the
last silently) is refused, naming the key and the line. The values built are then checked for
what no field can use: ``.nan`` and ``.inf``, and integers past 64 bits (JSON, the run's
records and the hashes cannot hold them).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from judge_engine.errors import ConfigError
from judge_engine.util.naming import config_key

MAX_DEPTH = 64
"""How deeply a config's values may nest (the deepest option a config needs is under 10 levels;
a JSON schema in ``params.extra_body`` a few more)."""
MAX_VALUES = 1_000_000
"""How many values (scalars, lists, mappings) a config may hold once its aliases are expanded."""
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it: a long value reads in milliseconds, not
seconds (a 500 kB score expression: 20 ms against 1.8 s)."""
_SHOWN = 20
"""Problems one error names (it counts the rest)."""
_INT_RANGE = (-(2**63), 2**64 - 1)
"""Integers JSON encoding (orjson) can write: the run's records and hashes hold every value."""


def read_config_file(file: Path) -> Any:
    """The YAML value in ``file``, checked (see the module docstring).

    Raises:
        ConfigError: unreadable, not UTF-8, invalid YAML, or a value no config can hold; the
            message names the file, the line and the key.
    """
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{file}: config file not found") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the config file ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{file}: line {line}: not UTF-8 text (byte {exc.start + 1} is {data[exc.start]:#04x}); "
                          "save the config as UTF-8") from None
    try:
        _check_shape(yaml.parse(text, Loader=_LOADER), file)
        raw = yaml.load(text, Loader=_LOADER)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        # libyaml stops at its own nesting limit before any event past ours: PyYAML's own parser
        # reads lazily, so walking its events names the key that nests too deeply.
        with contextlib.suppress(yaml.YAMLError):
            _check_shape(yaml.parse(text, Loader=yaml.SafeLoader), file)
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{file}:{where} invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    _check_values(raw, file)
    return raw


def read_scalar(text: str) -> Any:
    """A value typed on the command line, read as the config file would read it (YAML:
    ``true``, ``3``, ``0.5``, ``legacy-gemba``)."""
    return yaml.safe_load(text) if text else ""


@dataclass(slots=True)
class _Open:
    """A mapping or sequence whose end event has not come yet."""

    path: str
    mapping: bool
    line: int
    anchor: str | None
    size: int = 1
    height: int = 1
    index: int = 0
    key: str = "?"
    expect_key: bool = True
    keys: dict[str, int] = field(default_factory=dict)

    def child(self) -> str:
        if not self.mapping:
            return f"{self.path}[{self.index}]"
        return f"{self.path}.{self.key}" if self.path else self.key


def _check_shape(events: Iterable[yaml.Event], file: Path) -> None:
    """Walk the parser's events (no node is built) and refuse the shapes of the module docstring."""
    stack: list[_Open] = []
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (values, height) of its finished node

    def fail(path: str, line: int, problem: str) -> ConfigError:
        return ConfigError(f"{file}: line {line}: {path or '(top level)'}: {problem}")

    def finished(path: str, line: int, size: int, height: int, anchor: str | None) -> None:
        if anchor is not None:
            anchors[anchor] = (size, height)
        if not stack:
            return
        parent = stack[-1]
        parent.size += size
        parent.height = max(parent.height, height + 1)
        if parent.size > MAX_VALUES:
            raise fail(path, line, f"the config holds more than {MAX_VALUES:,} values once its aliases are expanded "
                                   "(a YAML alias bomb?)")
        if len(stack) + height > MAX_DEPTH:
            raise fail(path, line, f"nested more than {MAX_DEPTH} levels deep")
        if parent.mapping:
            parent.expect_key = not parent.expect_key
        else:
            parent.index += 1

    for event in events:
        if isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            node = stack.pop()
            finished(node.path, node.line, node.size, node.height, node.anchor)
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue
        line = event.start_mark.line + 1 if event.start_mark is not None else 0
        parent = stack[-1] if stack else None
        is_key = parent is not None and parent.mapping and parent.expect_key
        if is_key and parent is not None and isinstance(event, yaml.ScalarEvent):
            key = str(event.value)
            parent.key = key
            if key in parent.keys and key != "<<":
                raise fail(parent.child(), line, f"the key is given twice in one mapping (first on line "
                                                 f"{parent.keys[key]}); YAML would keep the last silently")
            parent.keys[key] = line
        path = parent.child() if parent is not None and not is_key else (parent.path if parent else "")
        if isinstance(event, yaml.AliasEvent):
            if event.anchor not in anchors:
                raise fail(path, line, f"the alias *{event.anchor} refers to no finished anchor (a node inside itself?)")
            size, height = anchors[event.anchor]
            finished(path, line, size, height, None)
        elif isinstance(event, yaml.ScalarEvent):
            finished(path, line, 1, 0, event.anchor)
        else:
            if len(stack) >= MAX_DEPTH:
                raise fail(path, line, f"nested more than {MAX_DEPTH} levels deep")
            stack.append(_Open(path, isinstance(event, yaml.MappingStartEvent), line, event.anchor))


def _check_values(raw: Any, file: Path) -> None:
    """Refuse ``.nan``, ``.inf`` and integers past 64 bits anywhere in the config (each shared
    node is checked once), every one in one error, in the file's order."""
    seen: set[int] = set()
    problems: list[str] = []
    todo: list[tuple[tuple[int | str, ...], Any]] = [((), raw)]
    while todo:
        loc, value = todo.pop()
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{file}: {config_key(loc, raw)}: {value} is not a number a config can use "
                            "(leave the key out for no limit)")
        elif isinstance(value, int) and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            problems.append(f"{file}: {config_key(loc, raw)}: a number of {value.bit_length()} bits is too large "
                            "(at most 64 bits)")
        elif isinstance(value, dict | list) and id(value) not in seen:
            seen.add(id(value))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            todo.extend(reversed([((*loc, k if isinstance(value, list) else str(k)), v) for k, v in items]))
    if problems:
        more = [f"... and {len(problems) - _SHOWN:,} more"] if len(problems) > _SHOWN else []
        raise ConfigError("\n".join(problems[:_SHOWN] + more))
