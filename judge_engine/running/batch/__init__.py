"""Batch mode: a judge's tasks sent through its provider's batch API (``mode: batch``).

```
driver.py   the lifecycle of one judge: the task stream into chunks, polls, later rounds, online
            fallback
submit.py   a chunk into a batch exactly once: intent, upload, create, id; after a crash, a batch
            created but never recorded is found on the provider before anything is sent again
results.py  a batch result -> the same decide() as an online answer -> an outcome, or a carry
chunks.py   a chunk being formed: its request file, within the provider's limits and the quota
ledger.py   batches.jsonl folded into what is in flight (read by the driver and by status)
board.py    what the live display and ``judge-engine status`` show of a judge's batches
killpoints.py  the steps of a collection where a crash test can have the process SIGKILL itself
```

A run's batches seen without its process are :mod:`judge_engine.running.status` (``judge-engine
status``) and :mod:`judge_engine.running.cancel` (``judge-engine cancel``): they start from a
resumed session's preparation, so they sit beside the session, above batch mode.

The provider side is behind the seam in :mod:`judge_engine.providers.batch` (one module per
API); the run directory's ``batches.jsonl`` format is :class:`judge_engine.rundir.records.BatchEvent`
and :class:`judge_engine.rundir.records.BatchCarry`.
"""
