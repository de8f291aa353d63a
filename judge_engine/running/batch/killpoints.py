"""Named steps of a batch collection where a crash test can have the process kill itself.

A test that kills the engine from outside lands wherever the timing puts it; one that must hit
each step of a collection (download, each result's transcript line, each outcome or carry, the
``collected`` line) sets ``JUDGE_ENGINE_KILL_AT=<step>:<n>`` for the process it starts, which
then sends itself SIGKILL the ``n``-th time it reaches ``<step>``: a real kill -9, with nothing
flushed or closed on the way out. Unset (always, outside such tests), :func:`reached` costs one
comparison.

Steps are ``<what>-r<round>``: ``fetch`` (an ended batch found, before its results are
downloaded), ``downloaded`` (the results file on disk, nothing recorded), ``recorded`` (a
result's transcript line written, its outcome or carry not yet), ``taken`` (a task's outcome or
carry written), ``collected`` (the chunk's ``collected`` line written, its files not yet
deleted).
"""

from __future__ import annotations

import os
import signal
from collections import Counter

ENV = "JUDGE_ENGINE_KILL_AT"


def _aim(value: str) -> tuple[str, int] | None:
    step, _, count = value.rpartition(":")
    if not step or not count.isdigit() or int(count) < 1:
        return None
    return step, int(count)


_AIM = _aim(os.environ.get(ENV, ""))
_SEEN: Counter[str] = Counter()


def reached(step: str) -> None:
    """Count ``step``; SIGKILL this process at the step and count ``JUDGE_ENGINE_KILL_AT`` names."""
    if _AIM is None or step != _AIM[0]:
        return
    _SEEN[step] += 1
    if _SEEN[step] == _AIM[1]:
        os.kill(os.getpid(), signal.SIGKILL)
