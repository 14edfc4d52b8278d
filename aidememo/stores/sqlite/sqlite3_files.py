"""The file side of the `sqlite3` executor (`sqlite3_executor`): its engine errors mapped to
error codes, the free space behind `storage_full`, and the database file's modes.

It needs no `sqlite3` import (an engine error's code is read off the exception), so the rule
that only `sqlite3_executor` imports `sqlite3` holds.
"""

from __future__ import annotations

import os

from aidememo.domain.errors import STORE_READ_ONLY, AidememoError, ErrorCode, fail
from aidememo.domain.limits import STORAGE_FULL_FLOOR_BYTES

FILE_MODE = 0o600
DIR_MODE = 0o700

# SQLite's primary result codes (`sqlite3.Error.sqlite_errorcode & 0xff`).
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_FULL = 13


def storage_failure(what: str, exc: BaseException, path: str | None = None) -> AidememoError:
    """Map an engine error to its code; the message stays server-side (ERR-2, ERR-4).

    `SQLITE_FULL` ("database or disk is full": SQLite reports a write that hit ENOSPC so) is
    `storage_full`, and so is an I/O error (an fsync or write that failed with ENOSPC, which
    SQLite reports as `SQLITE_IOERR_*` without the errno) while the database's file system
    has less than `STORAGE_FULL_FLOOR_BYTES` free. `SQLITE_READONLY*` is `storage_failure` with the
    store state `read_only`; anything else `storage_failure` (state `unavailable`).
    """
    if isinstance(exc, AidememoError) and exc.store_state is not None:
        return exc  # classified where it happened
    detail = f"sqlite {what} failed: {type(exc).__name__}: {exc}"
    primary = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if primary == _SQLITE_FULL or (
        primary == _SQLITE_IOERR and path is not None and _short_of_space(path)
    ):
        return fail(ErrorCode.STORAGE_FULL, detail)
    if primary == _SQLITE_READONLY:
        return fail(ErrorCode.STORAGE_FAILURE, detail, STORE_READ_ONLY)
    return fail(ErrorCode.STORAGE_FAILURE, detail)


def free_bytes(path: str) -> int | None:
    """Bytes an unprivileged writer may still use on the file system holding `path`."""
    try:
        stat = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def _short_of_space(path: str) -> bool:
    free = free_bytes(path)
    return free is not None and free < STORAGE_FULL_FLOOR_BYTES


def prepare_file(path: str) -> None:
    """Create the parent directory (0700) and the database file (0600) before SQLite does."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        os.makedirs(parent, mode=DIR_MODE, exist_ok=True)
        os.chmod(parent, DIR_MODE)  # makedirs honours the umask; chmod does not
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def restrict_sidecars(path: str) -> None:
    """SQLite gives -wal and -shm the database file's mode; enforce it in case it differs."""
    for suffix in ("-wal", "-shm"):
        try:
            os.chmod(path + suffix, FILE_MODE)
        except FileNotFoundError:
            pass
