"""judge-engine: run LLM judges at scale, and measure how far they can be trusted.

The public surface: configuration, the protocol contract and registry, the error tree, and the
functions that run a job programmatically. Heavy parts (litellm, the engine) load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from judge_engine.config import JobConfig, JudgeConfig, load_config
from judge_engine.errors import (
    ConfigError,
    DatasetError,
    FatalProviderError,
    JudgeEngineError,
    ProviderError,
    RunDirError,
    TemplateError,
    VerdictError,
)
from judge_engine.protocols import (
    Protocol,
    ProtocolOptions,
    Score,
    available,
    get_protocol,
    register,
)

if TYPE_CHECKING:
    from pathlib import Path

__version__ = "0.1.0"


def run(config_path: str | Path, *, demo: bool = False, new_run: bool = False, **overrides: Any) -> int:
    """Run (or resume) the job of a config file, as ``judge-engine run`` does without the live
    display. ``overrides`` are ``model``, ``limit``, ``output_dir``, ``cache_dir``. Returns the exit code."""
    from pathlib import Path

    from judge_engine.running import DEMO_API_BASE, run_job

    if demo:
        overrides["api_base"] = DEMO_API_BASE
    return run_job(Path(config_path), overrides=overrides, demo=demo, new_run=new_run, live=False)


__all__ = [
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
    "Score",
    "TemplateError",
    "VerdictError",
    "__version__",
    "available",
    "get_protocol",
    "load_config",
    "register",
    "run",
]
