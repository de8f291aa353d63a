"""Batch mode: a judge's tasks sent through its provider's batch API (``mode: batch``).

```
driver.py   the lifecycle of one judge: the task stream into chunks, chunks into batches (found
            again after a crash, never sent twice), polls, results, later rounds, online fallback
results.py  a batch result -> the same decide() as an online answer -> an outcome, or a carry
chunks.py   a chunk being formed: its request file, within the provider's limits and the quota
ledger.py   batches.jsonl folded into what is in flight (read by the driver and by status)
board.py    what the live display and ``judge-engine status`` show of a judge's batches
```

The provider side is behind the seam in :mod:`judge_engine.providers.batch` (one module per
API); the run directory's ``batches.jsonl`` format is :class:`judge_engine.records.BatchEvent`
and :class:`judge_engine.records.BatchCarry`.
"""
