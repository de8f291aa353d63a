"""Cascaded judging with a guarantee of agreement with humans ("Trust or Escalate", Jung,
Brahman & Choi, ICLR 2025).

```yaml
cascade:
  name: cascade                  # the judge of its outcome lines
  stages: [cheap, mid, strong]   # judges or juries of this config, one protocol, cheapest first
  thresholds: thresholds.json    # judge-engine calibrate ... --output (relative to the config)
```

Each item is asked of the first stage; the stage's verdict stands when its confidence reaches
the stage's calibrated threshold, otherwise the item goes on to the next stage, and after the
last it is abstained. A stage whose calibration found no threshold is not asked at all. So the
strong judge is called, and paid, only for the items every cheaper stage was unsure of, and
agreement with humans on the answered items is what the calibration guaranteed.

- :mod:`.stages`: the stages checked against the config and the thresholds file; what a
  stage's deciding line decides (answer, escalate, hold);
- :mod:`.outcome`: the cascade's outcome line, one per item;
- :mod:`.state`: where every item is, rebuilt from the run's lines at a session's start;
- :mod:`.router`: routing items as the lines are written, and feeding the later stages;
- :mod:`.session`: what a session calls;
- :mod:`.rows`: a run's judgments as calibration rows, joined to a human table.

**When a stage has no verdict.** A line with no decision because the stage has no judgment of
the item (every answer unreadable: ``none_readable``; a tie; kept off by ``self_preference:
forbid``) sends the item on, as calibration sends on an item a stage has no confidence for. A
line that ended for a reason outside the answers (``item_incomplete``: a request's transport
retries ran out; ``transport_exhausted``, ``protocol_error``...) holds the item at the stage:
the next stage is not paid for an outage. The held item has a cascade line with that code (a
failure, counted as one), and ``resume --retry CODE`` asks that stage again.
"""

from judge_engine.trust.cascade.outcome import CASCADE_PROTOCOL, CascadeLine
from judge_engine.trust.cascade.stages import (
    CascadePlan,
    Stage,
    StageDecision,
    cascade_plan,
    check_stages,
)

__all__ = ["CASCADE_PROTOCOL", "CascadeLine", "CascadePlan", "Stage", "StageDecision", "cascade_plan", "check_stages"]
