"""The fake server's answer writers: protocol name -> the function that answers its prompt.

A writer reads a chat conversation and, if it is its protocol's prompt, returns a plausible,
well-formed answer in the format the protocol asked for (its text format, or JSON when
``json_mode``); otherwise None. Answers are a deterministic function of (``messages``, ``seed``,
``temperature``, ``model``): the tests, ``--demo`` and the benchmarks rely on that. The draw
from ``seed`` is the item's truth, and ``model`` reads it through its
:class:`~judge_engine.fake.persona.Persona` (its strength and lean), so that judges disagree as
real ones do; the default, :data:`~judge_engine.fake.persona.TRUTH`, is the truth itself. The
:class:`~judge_engine.fake.answers.AnswerBook` asks every writer in name order and the first
answer wins, so a writer must return None for any prompt that is not its own.

Writers live here, beside the server, never in ``judge_engine/protocols/``: a writer may import
its protocol's product helpers (verdict models, label sets, ``stable_seed``), the protocols import
nothing from the fake. A third-party protocol (registered with
:func:`judge_engine.protocols.register`) plugs its fake answers in with :func:`register_writer`.

Built-in writers, one module per protocol family: :mod:`.mqm` (``gemba-mqm``,
``gemba-mqm-literary``), :mod:`.prometheus` (``prometheus-absolute``, ``prometheus-relative``),
:mod:`.ttct`, :mod:`.bws`, :mod:`.close_reading` (``novel-spans``, ``nonpragmatic-spans``) and
:mod:`.words` (``cdat``, ``dat``: word lists from the model under test), :mod:`.custom`
(``custom``: whatever fields a config declares, read from the answer format in the prompt) and
:mod:`.annotators` (``pairwise-annotators``, answered from the truth: the log-prob judge reads it).
A registered writer may leave ``model`` out of its signature: it then answers every model alike.
They are imported on first use, as the protocols are.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence

from judge_engine.protocols.base import Message

_BUILTIN: dict[str, str] = {
    "bws": "judge_engine.fake.writers.bws:write_bws",
    "cdat": "judge_engine.fake.writers.words:write_cdat",
    "custom": "judge_engine.fake.writers.custom:write_custom",
    "dat": "judge_engine.fake.writers.words:write_dat",
    "gemba-mqm": "judge_engine.fake.writers.mqm:write_gemba_mqm",
    "gemba-mqm-literary": "judge_engine.fake.writers.mqm:write_gemba_mqm_literary",
    "nonpragmatic-spans": "judge_engine.fake.writers.close_reading:write_nonpragmatic_spans",
    "pairwise-annotators": "judge_engine.fake.writers.annotators:write_annotator",
    "novel-spans": "judge_engine.fake.writers.close_reading:write_novel_spans",
    "prometheus-absolute": "judge_engine.fake.writers.prometheus:write_absolute",
    "prometheus-relative": "judge_engine.fake.writers.prometheus:write_relative",
    "ttct": "judge_engine.fake.writers.ttct:write_ttct",
}


class Writer(typing.Protocol):
    """The signature of an answer writer (see the module docstring)."""

    def __call__(
        self, messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool, model: str = ""
    ) -> str | None: ...


ModelBlindWriter = Callable[..., str | None]
"""A writer whose signature has no ``model`` (written before personas): it answers every model alike."""


_REGISTERED: dict[str, Writer] = {}
_ordered: dict[str, Writer] | None = None
"""Every writer in name order, built on first use and after each registration (read per request)."""


def register_writer(name: str, writer: Writer | ModelBlindWriter) -> Writer | ModelBlindWriter:
    """Make ``writer`` the fake server's answer writer for protocol ``name`` (replacing any);
    a running server asks it from its next request on.

    Returns the writer, so that ``register_writer("my-protocol", write_mine)`` can sit beside
    the writer's definition.
    """
    global _ordered
    _REGISTERED[name] = writer if _takes_model(writer) else _model_blind(writer)
    _ordered = None
    return writer


def _takes_model(writer: Callable[..., object]) -> bool:
    try:
        parameters = inspect.signature(writer).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): assume the current one
        return True
    return any(p.name == "model" or p.kind is p.VAR_KEYWORD for p in parameters)


def _model_blind(writer: ModelBlindWriter) -> Writer:
    def write(messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool,
              model: str = "") -> str | None:
        return writer(messages, seed=seed, temperature=temperature, json_mode=json_mode)

    return write


def get_writer(name: str) -> Writer:
    """The writer for protocol ``name``.

    Raises:
        KeyError: no writer for that protocol (the message lists the known ones).
    """
    if name not in _REGISTERED and name in _BUILTIN:
        module_name, _, attr = _BUILTIN[name].partition(":")
        writer = getattr(importlib.import_module(module_name), attr)
        _REGISTERED[name] = writer if _takes_model(writer) else _model_blind(writer)
    if name not in _REGISTERED:
        known = ", ".join(sorted(set(_BUILTIN) | set(_REGISTERED)))
        raise KeyError(f"no fake answer writer for protocol {name!r} (known: {known})")
    return _REGISTERED[name]


def writers() -> Mapping[str, Writer]:
    """Every writer, built-in and registered, by protocol name in sorted order (the built-in
    modules are imported on the first call)."""
    global _ordered
    if _ordered is None:
        _ordered = {name: get_writer(name) for name in sorted(set(_BUILTIN) | set(_REGISTERED))}
    return _ordered


def last_turn(messages: Sequence[Message]) -> str:
    """The content of the last message ("" for none): where every protocol puts its item."""
    return messages[-1]["content"] if messages else ""


__all__ = ["Writer", "get_writer", "last_turn", "register_writer", "writers"]
