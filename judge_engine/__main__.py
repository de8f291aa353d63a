"""``python -m judge_engine``: the command line, as the ``judge-engine`` command runs it."""

import sys

from judge_engine.cli import main

sys.exit(main())
