"""Summarise a py-spy ``--format raw`` profile (collapsed stacks: ``frame;frame;... count``).

    python benchmarks/collapsed.py profile.raw [--top 30] [--under acompletion] [--without importlib ...]

Prints the share of samples per function, inclusive (anywhere on the stack) and self (the leaf),
optionally only for stacks that pass through a frame whose text contains ``--under``, and
leaving out stacks with a frame that contains any ``--without`` (start-up's imports, a thread
waiting in ``Condition.wait`` or the loop in ``EpollSelector.select``).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>[^ ]+) \((?P<file>[^:]+)(?::\d+)?\)$")


def short(frame: str) -> str:
    """``func (path/to/site-packages/pkg/mod.py:12)`` -> ``pkg/mod.py:func``."""
    match = _FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    path = match["file"]
    for marker in ("site-packages/", "lib/python3.11/", "/work/main/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{match['func']}"


def load(path: Path, under: str | None = None, without: tuple[str, ...] = ()) -> tuple[Counter[str], Counter[str], int]:
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    total = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = [short(f) for f in stack.split(";")]
        if under is not None and not any(under in f for f in frames):
            continue
        if any(text in f for f in frames for text in without):
            continue
        count = int(count_text)
        total += count
        for name in set(frames):
            inclusive[name] += count
        leaf[frames[-1]] += count
    return inclusive, leaf, total


def report(path: Path, *, top: int = 30, under: str | None = None, without: tuple[str, ...] = ()) -> str:
    inclusive, leaf, total = load(path, under, without)
    lines = [f"{path}: {total} samples" + (f" under {under!r}" if under else "")]
    lines.append(f"{'inclusive':>9}  function")
    for name, count in inclusive.most_common(top):
        lines.append(f"{100 * count / max(total, 1):8.1f}%  {name}")
    lines.append(f"{'self':>9}  function")
    for name, count in leaf.most_common(top):
        lines.append(f"{100 * count / max(total, 1):8.1f}%  {name}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--under")
    parser.add_argument("--without", action="append", default=[], help="leave out stacks through such a frame")
    args = parser.parse_args()
    print(report(args.profile, top=args.top, under=args.under, without=tuple(args.without)))


if __name__ == "__main__":
    main()
