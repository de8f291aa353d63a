"""Module paths (and a few names) that moved when the package was grouped by pipeline stage (0.2),
still importable for one release.

``import judge_engine.config`` (or ``from judge_engine.cascade.stages import ...``) warns with a
:class:`DeprecationWarning` naming the new path, and gives the module at that path: the same
object, so classes, ``isinstance`` checks and monkeypatching agree whichever path named it.
:data:`MOVED` is the whole list (the changelog prints it too); the old paths go in 0.3.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader, MetaPathFinder

MOVED: dict[str, str] = {
    # leaf helpers
    "naming": "util.naming", "money": "util.money", "jsonio": "util.jsonio", "text": "util.text",
    "languages": "util.languages", "redaction": "util.redaction", "parquet": "util.parquet",
    "logprobs": "util.logprobs", "families": "util.families",
    # reading the job
    "config": "inputs.config", "config_file": "inputs.config_file", "dataset": "inputs.dataset",
    # protocols: their templates and what the generation protocols score with
    "templating": "protocols.templating", "lexicon": "protocols.lexicon",
    "embeddings": "protocols.embeddings", "schemas": "protocols.schemas",
    # planning
    "plan": "planning.plan", "self_preference": "planning.self_preference",
    # the run directory
    "records": "rundir.records", "blocks": "rundir.blocks", "disk": "rundir.disk", "store": "rundir.store",
    "index": "rundir.index", "layout": "rundir.layout", "export": "rundir.export", "frames": "rundir.frames",
    # trust
    "decisions": "trust.decisions", "jury": "trust.jury", "calibration": "trust.calibration",
    "thresholds": "trust.thresholds", "cascade": "trust.cascade",
    # running
    "cascade.session": "running.cascade",
    "session": "running.session", "engine": "running.engine", "task": "running.task",
    "attempt": "running.attempt", "runtime": "running.runtime", "retry": "running.retry",
    "budget": "running.budget", "routing": "running.routing", "cache": "running.cache",
    "interrupts": "running.interrupts", "resumption": "running.resumption", "demo": "running.demo",
    # (0.1's judge_engine.estimate, the dry-run cost estimate, is judge_engine.running.estimate: the
    # name is now the public function judge_engine.estimate, so its old path is not redirected)
    "rescore": "running.rescore", "batch": "running.batch",
    "batch.status": "running.status", "batch.cancel": "running.cancel",
    # statistics: the two "calibration" modules no longer share a name
    "stats.calibration": "stats.risk_control",
    # the batch APIs' HTTP client is the engine's one HTTP client (issue 32)
    "providers.batch_http": "providers.http",
}
"""Old path -> new path, both under ``judge_engine.``; a moved package's modules move with it
(``cascade.stages`` -> ``trust.cascade.stages``), the longest old path deciding."""

_PREFIX = "judge_engine."


def new_name(fullname: str) -> str | None:
    """Where the module once imported as ``fullname`` lives now, or None if it did not move."""
    if not fullname.startswith(_PREFIX):
        return None
    old = fullname[len(_PREFIX):]
    parts = old.split(".")
    for end in range(len(parts), 0, -1):
        moved = MOVED.get(".".join(parts[:end]))
        if moved is not None:
            return _PREFIX + ".".join([moved, *parts[end:]])
    return None


class _Finder:
    """A meta path finder (first on ``sys.meta_path``, so a moved package's children are found
    here rather than loaded a second time under their old name) and the loader of its specs."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        new = new_name(fullname)
        return None if new is None else ModuleSpec(fullname, cast("Loader", self), origin=new)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        new = str(spec.origin)
        warnings.warn(f"{spec.name} has moved to {new}: import it from there ({spec.name} goes in "
                      f"judge-engine 0.3)", DeprecationWarning, stacklevel=2)  # the import system's frames are skipped
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system has just set the module's __spec__ to the old name's: give it back its own.
        alias = module.__spec__
        if alias is not None and alias.name != module.__name__:
            module.__spec__ = alias.loader_state


def moved_names(module: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the names that moved out of ``module`` (name -> the module that
    holds it now): each still reads, with a DeprecationWarning naming its new home."""

    def __getattr__(name: str) -> Any:
        home = names.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(f"{module}.{name} has moved to {home}.{name}: import it from there (the old name goes in "
                      "judge-engine 0.3)", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(home), name)

    return __getattr__


_FINDER = _Finder()


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(finder is _FINDER for finder in sys.meta_path):
        sys.meta_path.insert(0, cast("MetaPathFinder", _FINDER))
