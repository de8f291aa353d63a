"""The protocol registry: name -> protocol class, imported lazily so start-up stays fast.

Built-in protocols are listed by module path; ``register`` adds a third-party protocol class
(and :func:`judge_engine.fake.writers.register_writer` the fake server's answers to its prompt).
"""

from __future__ import annotations

import importlib

from judge_engine.errors import ConfigError
from judge_engine.protocols.base import Item, Message, Protocol, ProtocolOptions, Score, VoteScale
from judge_engine.util.naming import did_you_mean

_BUILTIN: dict[str, str] = {
    "gemba-mqm": "judge_engine.protocols.gemba_mqm:GembaMQM",
    "gemba-mqm-literary": "judge_engine.protocols.gemba_mqm_literary:GembaMQMLiterary",
    "prometheus-absolute": "judge_engine.protocols.prometheus:PrometheusAbsolute",
    "prometheus-relative": "judge_engine.protocols.prometheus:PrometheusRelative",
    "ttct": "judge_engine.protocols.ttct:TTCT",
    "novel-spans": "judge_engine.protocols.close_reading:NovelSpans",
    "nonpragmatic-spans": "judge_engine.protocols.close_reading:NonPragmaticSpans",
    "bws": "judge_engine.protocols.bws:BestWorstScaling",
    "custom": "judge_engine.protocols.custom:CustomJudge",
    "pairwise-annotators": "judge_engine.protocols.annotators:PairwiseAnnotators",
    "cdat": "judge_engine.protocols.cdat:CDAT",
    "dat": "judge_engine.protocols.cdat:DAT",
}
_REGISTERED: dict[str, type[Protocol]] = {}


def register(cls: type[Protocol]) -> type[Protocol]:
    """Register a protocol class under ``cls.name`` (usable as a decorator)."""
    _REGISTERED[cls.name] = cls
    return cls


def available() -> list[str]:
    """Names of every protocol whose module can be imported, sorted."""
    names = []
    for name in sorted(set(_BUILTIN) | set(_REGISTERED)):
        try:
            get_protocol(name)
        except ConfigError:
            continue
        names.append(name)
    return names


def get_protocol(name: str) -> type[Protocol]:
    """The protocol class registered as ``name``.

    Raises:
        ConfigError: no such protocol (the message lists the known ones).
    """
    if name in _REGISTERED:
        return _REGISTERED[name]
    target = _BUILTIN.get(name)
    if target is not None:
        module_name, _, attr = target.partition(":")
        try:
            cls: type[Protocol] = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError):
            cls = None  # type: ignore[assignment]
        if cls is not None:
            _REGISTERED[name] = cls
            return cls
    known = sorted(set(_BUILTIN) | set(_REGISTERED))
    hint = did_you_mean(name, known)
    raise ConfigError(f"unknown protocol {name!r}" + (f"; {hint}" if hint else "") + f" (known: {', '.join(known)})")


__all__ = ["Item", "Message", "Protocol", "ProtocolOptions", "Score", "VoteScale", "available", "get_protocol",
           "register"]
