"""Which failures to write are the machine's, not the input's: a disk full, read-only or over quota.

Every writer of a run (the store, the index, the batch files) turns such a failure into a
:class:`~judge_engine.errors.DiskError` naming the path, at its boundary (:func:`writing`), so a
run stops with one message and an exit code of its own instead of a traceback; anything else (a
bug, a corrupt file) propagates as it is. The answer cache does the same and then goes on without
writing (:mod:`judge_engine.running.cache`). SQLite says the same things in its own codes: ``database or
disk is full``, ``attempt to write a readonly database``, ``unable to open database file`` (it
could not create a file beside the database; the place says why).

Two tools for writing under such a disk: :func:`append_whole` appends whole lines or nothing (a
write the disk cuts short is taken back), and :func:`hold_room` allocates room ahead, for a
writer to give back when the disk fills and it still has its last words to write.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from judge_engine.errors import DiskError

_ERRNO = {errno.ENOSPC: "full", errno.EDQUOT: "quota", errno.EROFS: "read-only", errno.EACCES: "permission",
          errno.EPERM: "permission"}
_SQLITE_PERM, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN = 3, 8, 10, 13, 14
_SQLITE_MESSAGES = {"database or disk is full": _SQLITE_FULL, "attempt to write a readonly database": _SQLITE_READONLY,
                    "unable to open database file": _SQLITE_CANTOPEN, "disk I/O error": _SQLITE_IOERR}
LOW_SPACE = 64 * 1024
"""Bytes free under which a place counts as full when SQLite does not say why it failed."""


def disk_error(exc: BaseException, path: Path | str) -> DiskError | None:
    """``exc`` as a :class:`DiskError` about ``path``, or None when it means something else."""
    if isinstance(exc, DiskError):
        return exc
    if isinstance(exc, OSError):
        of_errno = _ERRNO.get(exc.errno or 0)
        return None if of_errno is None else DiskError(str(path), of_errno, exc.strerror or str(exc))
    code = _sqlite_code(exc)
    if code is None:
        return None
    found = place_kind(path)
    if code == _SQLITE_FULL:
        kind: str | None = "full"
    elif code in (_SQLITE_READONLY, _SQLITE_PERM):
        kind = found or "read-only"
    elif code == _SQLITE_CANTOPEN:
        kind = found or "unwritable"
    else:  # an I/O error is the disk's only when the place shows why
        kind = found if code == _SQLITE_IOERR else None
    return None if kind is None else DiskError(str(path), kind, str(exc))


def _sqlite_code(exc: BaseException) -> int | None:
    """The primary SQLite result code of a ``sqlite3.Error`` (None for anything else)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF
    if type(exc).__module__ == "sqlite3":
        return _SQLITE_MESSAGES.get(str(exc))
    return None


def place_kind(path: Path | str) -> str | None:
    """Why nothing can be written at ``path`` (``read-only``, ``permission``, ``full``), seen
    from the place itself (the nearest directory that exists); None when nothing shows."""
    where = Path(path)
    directory = where if where.is_dir() else where.parent
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    try:
        stat = os.statvfs(directory)
    except OSError:
        return None
    if stat.f_flag & os.ST_RDONLY:
        return "read-only"
    if not os.access(directory, os.W_OK) or (where.exists() and not os.access(where, os.W_OK)):
        return "permission"
    if stat.f_bavail * stat.f_frsize < LOW_SPACE:
        return "full"
    return None


@contextmanager
def writing(path: Path | str) -> Iterator[None]:
    """Raise a failure to write ``path`` that is the disk's as a :class:`DiskError` naming it."""
    try:
        yield
    except Exception as exc:
        error = disk_error(exc, path)
        if error is None or error is exc:
            raise
        raise error from exc


def append_whole(fd: int, data: bytes, path: Path, write: Callable[[int, bytes], int]) -> None:
    """Append ``data`` (whole lines) to the file open at ``fd`` with ``write`` (``os.write``),
    or nothing: a write the disk cuts short is taken back (truncated away), so the file
    never ends in a torn line the next append would glue onto.

    Raises:
        DiskError: the disk refused (its ``taken_back`` False when even the truncation failed,
            leaving a torn last line: write nothing more to that file).
    """
    written = 0
    try:
        while written < len(data):
            done = write(fd, data[written:] if written else data)
            if done <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written += done
    except OSError as exc:
        error = disk_error(exc, path)
        if written:
            try:
                os.ftruncate(fd, os.lseek(fd, 0, os.SEEK_END) - written)
            except OSError:
                error = error or DiskError(str(path), "unwritable", str(exc))
                error.taken_back = False
        if error is None:
            raise
        raise error from exc


def hold_room(path: Path, size: int) -> None:
    """Allocate ``size`` bytes to ``path`` (room to give back later by deleting it). A file
    system that cannot allocate ahead (some network ones) holds none; a disk without the room
    raises :class:`DiskError`."""
    with writing(path):
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as exc:
            if disk_error(exc, path) is not None:
                raise
        finally:
            os.close(fd)
