"""judge-engine: run LLM judges at scale, and measure how far they can be trusted.

The public surface: configuration, the protocol contract and registry, the error tree, the
functions that run a job programmatically, :func:`load_run` (a run as a pandas DataFrame) and
:func:`calibrate` (a cascade's confidence thresholds with a guarantee of agreement with humans,
over rows or a run's judgments: :func:`calibration_rows`), :func:`estimate` (a system's
human-scale score with a valid interval from every verdict plus a few human labels) and
:func:`label_plan` (which items to send to humans).
Heavy parts (litellm, the engine, pandas) load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from judge_engine import _moved
from judge_engine._version import __version__

if TYPE_CHECKING:
    from pathlib import Path

    from judge_engine.errors import (
        CalibrationError,
        ConfigError,
        DatasetError,
        FatalProviderError,
        JudgeEngineError,
        ProviderError,
        RunDirError,
        TemplateError,
        VerdictError,
    )
    from judge_engine.inputs.config import JobConfig, JudgeConfig, load_config
    from judge_engine.protocols import (
        Protocol,
        ProtocolOptions,
        Score,
        available,
        get_protocol,
        register,
    )
    from judge_engine.rundir.frames import load_run
    from judge_engine.running.session import RunResult
    from judge_engine.trust.calibration import calibrate
    from judge_engine.trust.cascade.rows import calibration_rows
    from judge_engine.trust.estimates import estimate
    from judge_engine.trust.label_plan import label_plan

_moved.install()  # the module paths of 0.1, for one release (judge_engine/_moved.py)

# The public names load on first use (PEP 562): importing the package, as ``judge-engine --help``
# does for its version, then costs no pydantic (~0.1 s of a 0.2 s start-up).
_LAZY = {
    **dict.fromkeys(("JobConfig", "JudgeConfig", "load_config"), "judge_engine.inputs.config"),
    **dict.fromkeys(("CalibrationError", "ConfigError", "DatasetError", "FatalProviderError", "JudgeEngineError",
                     "ProviderError", "RunDirError", "TemplateError", "VerdictError"), "judge_engine.errors"),
    **dict.fromkeys(("Protocol", "ProtocolOptions", "Score", "available", "get_protocol", "register"),
                    "judge_engine.protocols"),
    "RunResult": "judge_engine.running.session",
    "calibrate": "judge_engine.trust.calibration",
    "calibration_rows": "judge_engine.trust.cascade.rows",
    "estimate": "judge_engine.trust.estimates",
    "label_plan": "judge_engine.trust.label_plan",
    "load_run": "judge_engine.rundir.frames",
}


if not TYPE_CHECKING:  # type checkers read the imports above; a module __getattr__ would make any name pass

    def __getattr__(name: str) -> Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'judge_engine' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups skip this hook
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))




def run(config_path: str | Path, *, demo: bool = False, new_run: bool = False, **overrides: Any) -> RunResult:
    """Run (or resume) the job of a config file, as ``judge-engine run`` does, printing nothing.

    ``overrides`` are ``model``, ``limit``, ``output_dir``, ``cache_dir``, ``batch`` (True: every
    judge in batch mode, as ``--batch``). The result says how it
    ended (``status``, ``counts`` by reason code, ``failures``, the ``manifest`` with the spend);
    bad input raises :class:`ConfigError`, :class:`DatasetError`, :class:`TemplateError` or
    :class:`RunDirError` before anything is sent. Runs its own event loop (use
    :func:`judge_engine.running.session.execute` from async code).
    """
    from pathlib import Path

    from judge_engine.running import session

    return session.run(Path(config_path), overrides=overrides, demo=demo, new_run=new_run)


def resume(run_dir: str | Path, *, retry: str | None = None, batch: bool = False) -> RunResult:
    """Finish a killed, cancelled or stopped run, or (``retry``: ``"unscored"`` or reason codes
    separated by commas) judge its unscored tasks again, as ``judge-engine resume`` does
    (``batch``: every judge in batch mode from now on, as ``--batch``)."""
    from pathlib import Path

    from judge_engine.running import session

    return session.resume(Path(run_dir), retry=retry, batch=batch)


__all__ = [
    "CalibrationError",
    "ConfigError",
    "DatasetError",
    "FatalProviderError",
    "JobConfig",
    "JudgeConfig",
    "JudgeEngineError",
    "Protocol",
    "ProtocolOptions",
    "ProviderError",
    "RunDirError",
    "RunResult",
    "Score",
    "TemplateError",
    "VerdictError",
    "__version__",
    "available",
    "calibrate",
    "calibration_rows",
    "estimate",
    "get_protocol",
    "label_plan",
    "load_config",
    "load_run",
    "register",
    "resume",
    "run",
]
