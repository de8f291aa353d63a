"""Process-wide settings for a run from the command line (a library user's process keeps its own).

* The garbage collector. Importing litellm leaves ~1.5 million long-lived Python objects (~145 MB:
  code objects, its price table, pydantic models), and one litellm call keeps hundreds of
  container objects alive across its awaits, so with CPython's default thresholds (700, 10, 10)
  the cyclic collector runs a young collection every few requests and now and then a full one
  that walks everything litellm imported. A higher young threshold lets reference counting free
  most of a call's objects first, and litellm's import-time objects are collected once and then
  frozen (the provider catalogue does it right after the import, when :data:`FREEZE_AFTER_IMPORT
  <judge_engine.providers.catalog.FREEZE_AFTER_IMPORT>` is set): later collections skip them.
  Engine on the fake server, 5,000 items, no latency: 25.8 s -> 21.3 s of CPU; peak RSS +1.6 MB.
* The GIL switch interval. litellm runs part of every call in executor threads; each time the
  event-loop thread releases the GIL (a write, a cache insert) it may wait a whole switch
  interval (5 ms by default) to get it back, stalling every lane; 1 ms keeps the loop responsive.
"""

from __future__ import annotations

import gc
import sys

GC_THRESHOLDS = (5_000, 20, 20)
"""(young, middle, old). 5,000 saved as much CPU as 20,000 with half the extra RSS."""
SWITCH_INTERVAL_S = 0.001


def tune_for_a_run() -> None:
    """Apply the settings above to this process (call before the session starts)."""
    from judge_engine.providers import catalog

    gc.set_threshold(*GC_THRESHOLDS)
    catalog.FREEZE_AFTER_IMPORT = True
    sys.setswitchinterval(SWITCH_INTERVAL_S)
