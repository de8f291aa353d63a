"""``judge-engine`` under cProfile, switched on by SIGUSR1 (at the run's first request).

    python benchmarks/profiled.py run CONFIG ...     # writes $PROFILE_OUT at exit

What ``idle.py --cprofile`` runs: a profile of the run's requests, not of its imports and
start-up, which would drown them (~2 s of imports against ~1 ms a request).
"""

import atexit
import cProfile
import os
import runpy
import signal
import sys

profile = cProfile.Profile()
signal.signal(signal.SIGUSR1, lambda *_: profile.enable())


@atexit.register
def _dump() -> None:
    profile.disable()
    profile.dump_stats(os.environ.get("PROFILE_OUT", "profile.pstats"))


sys.argv = ["judge_engine.cli", *sys.argv[1:]]
runpy.run_module("judge_engine.cli", run_name="__main__", alter_sys=True)
