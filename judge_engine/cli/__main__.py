"""``python -m judge_engine.cli``: the same as the ``judge-engine`` command."""

import sys

from judge_engine.cli import main

sys.exit(main())
