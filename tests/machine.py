"""Hostile machines for tests: a small disk that fills, and a run directory nobody may write.

Both need privileges a CI runner may not have: a test using them skips (saying why) when the
machine does not allow them, and never leaves a mount behind.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _run(*command: str) -> bool:
    if shutil.which(command[0]) is None:
        return False
    return subprocess.run(command, capture_output=True, timeout=30).returncode == 0


@contextlib.contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``768k``) mounted at ``path`` (skips where mounting is not allowed);
    :func:`grow` gives it more room."""
    path.mkdir(parents=True, exist_ok=True)
    if not _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)):
        pytest.skip("cannot mount a tmpfs here (needs root and a mount namespace that allows it)")
    try:
        yield path
    finally:
        _run("umount", "-l", str(path))


def grow(path: Path, size: str) -> None:
    """Give the tmpfs at ``path`` more room (free space on the full disk)."""
    assert _run("mount", "-o", f"remount,size={size}", str(path)), f"cannot remount {path}"


@contextlib.contextmanager
def read_only(source: Path, view: Path) -> Iterator[Path]:
    """``source`` as a directory this process may not write: a read-only bind mount at ``view``
    (as root, where mounting is allowed), or ``source`` itself with its write permissions taken
    away (not root: permissions bind); skips where neither works (root without mounts ignores
    permissions)."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in (source, *source.rglob("*"))}
        for p, mode in modes.items():
            p.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        try:
            yield source
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    view.mkdir(parents=True, exist_ok=True)
    if not _run("mount", "--bind", str(source), str(view)):
        pytest.skip("root, but cannot bind-mount here: a read-only run cannot be made (root ignores permissions)")
    try:
        if not _run("mount", "-o", "remount,ro,bind", str(view)):
            pytest.skip("cannot remount a bind mount read-only here")
        yield view
    finally:
        _run("umount", "-l", str(view))


def snapshot(directory: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under ``directory``: its size, modification time and first bytes (a change
    to any of them, or a file more or less, is a write)."""
    found: dict[str, tuple[int, int, bytes]] = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file():
            info = p.stat()
            found[str(p.relative_to(directory))] = (info.st_size, info.st_mtime_ns, p.read_bytes()[:4096])
    return found


def as_nobody(argv: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m judge_engine.cli *argv`` run as the unprivileged user ``nobody`` (as root, with
    ``setpriv``): permissions bind it, as they bind any user. Skips where that cannot be done
    (not root, no ``setpriv``, or no Python ``nobody`` may run with this checkout importable)."""
    command = _nobody_python()
    if command is None:
        pytest.skip("cannot run a command as nobody here (needs root, setpriv, and a Python nobody may run)")
    return subprocess.run([*command, "-m", "judge_engine.cli", *argv], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "TMPDIR": str(cwd)}, timeout=300)


@functools.cache
def _nobody_python() -> tuple[str, ...] | None:
    """The command prefix that runs this checkout's Python as ``nobody``, or None."""
    import site
    import sys

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    repo = Path(__file__).resolve().parents[1]
    path = os.pathsep.join([str(repo), *site.getsitepackages()])
    drop = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "env", f"PYTHONPATH={path}",
            "LITELLM_LOCAL_MODEL_COST_MAP=True")
    probe = f"import sys; assert sys.version_info[:2] == {tuple(sys.version_info[:2])}; import judge_engine.cli"
    for python in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        if subprocess.run([*drop, python, "-c", probe], capture_output=True, cwd="/", timeout=120).returncode == 0:
            return (*drop, python)
    return None
