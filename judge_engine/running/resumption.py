"""What a resumed session leaves alone and what it judges again, read from the run's index.

A resumed run must neither lose nor repeat work, and at a million tasks it must not read every
outcome line to find out which are done. Per judge: the leading dataset items whose tasks are all
finished (the engine skips them without reading them: outcome lines record each item's position
and task count), the other finished task ids, and for ``resume --retry`` the unscored tasks to
judge again (their new outcome lines supersede the old ones).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from judge_engine.errors import ConfigError
from judge_engine.rundir.index import Query, RunIndex
from judge_engine.rundir.records import reason_codes

RETRY_ALL = "unscored"
"""``--retry`` value that selects every unscored task, whatever its reason code."""


@dataclass(frozen=True, slots=True)
class Resumption:
    """What one judge finished before this session (read from the run's index)."""

    skip_rows: int = 0
    """Leading dataset items whose tasks are all finished: not even read again."""
    skip_tasks: int = 0
    """How many tasks those items hold."""
    done: frozenset[str] = frozenset()
    """Other finished task ids, left as they are."""
    again: frozenset[str] = frozenset()
    """Finished task ids judged again (``resume --retry``)."""

    def finished(self, task_id: str, row: int) -> bool:
        """Whether the task at dataset row ``row`` has its outcome from an earlier session and
        keeps it: in a leading item skipped unread, or among the other finished tasks (a task
        judged again is in neither). What a resumed session must never record or send again."""
        return 0 <= row < self.skip_rows or task_id in self.done


def retry_codes(retry: str | None) -> frozenset[str] | None:
    """The reason codes ``resume --retry`` names (``unscored``: all of them), checked.

    Raises:
        ConfigError: an unknown reason code (the message lists the known ones).
    """
    if retry is None:
        return None
    codes = frozenset(c.strip() for c in retry.split(",") if c.strip())
    known = {*reason_codes(), RETRY_ALL}
    if not codes or codes - known:
        raise ConfigError(f"--retry {retry}: unknown reason code {', '.join(sorted(codes - known)) or '(none)'} "
                          f"(use {RETRY_ALL} or some of: {', '.join(sorted(reason_codes()))})")
    return codes


def resumptions(index: RunIndex, judges: Sequence[str], codes: frozenset[str] | None) -> dict[str, Resumption]:
    """Per judge, what a resumed session leaves alone and what it judges again: the leading items
    whose tasks are all finished (skipped unread), the other finished tasks, and, for ``resume
    --retry``, the tasks whose last outcome is unscored with one of ``codes`` (see
    :func:`retry_codes`)."""
    found = {}
    for judge in judges:
        again: set[str] = set()
        if codes is not None:
            rows = index.tasks(Query(judge=judge, status="unscored"))
            again = {r.task_id for r in rows if RETRY_ALL in codes or str(r.reason_code) in codes}
        skip_rows, skip_tasks = index.finished_prefix(judge)
        if again:
            first = index.first_row(sorted(again))
            if first is None or first < skip_rows:  # a retried task's item must be read again
                skip_rows = 0 if first is None else first
                skip_tasks = index.finished_before(judge, skip_rows)
        done = index.finished_tasks(judge, from_row=skip_rows) - again
        found[judge] = Resumption(skip_rows, skip_tasks, frozenset(done), frozenset(again))
    return found
