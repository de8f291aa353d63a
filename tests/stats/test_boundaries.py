"""stats is engine-free and light to import; the public surface is pinned."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import judge_engine.stats as stats

STATS_DIR = Path(stats.__file__).parent
FORBIDDEN = ("judge_engine.inputs.config", "judge_engine.running.engine", "judge_engine.providers",
             "judge_engine.protocols", "judge_engine.cli", "litellm")  # fmt: skip


def test_stats_imports_no_engine_modules() -> None:
    for path in STATS_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert not name.startswith(FORBIDDEN), f"{path.name} imports {name}"


def test_cli_module_import_is_light() -> None:
    code = (
        "import sys, judge_engine.cli.stats, judge_engine.cli.meta; "
        "print(any(m.split('.')[0] in ('scipy', 'matplotlib', 'rich', 'krippendorff') "
        "for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_public_surface_sorted() -> None:
    assert stats.__all__ == sorted(stats.__all__)
    assert all(hasattr(stats, name) for name in stats.__all__)
