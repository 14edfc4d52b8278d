"""What every opening of a memory store checks before it reads or writes (SPEC.md MEM-1).

`check_files(path)` looks at the store path and its `-wal`/`-shm`/`-journal` sidecars with
`lstat` before anything opens them: a symbolic link, or anything but a regular file (a FIFO, a
directory, a device), is `MEMORY_STORE_PATH_UNSAFE`, so no open can follow a link or block on a
special file. `check_writable(conn, path)` refuses, with `MEMORY_STORE_INTEGRITY_FAILED` and
integrity's own messages, a store whose schema integrity would flag as unsafe for writes (the
canonical and FTS tables' shapes, a planted trigger). `damaged(error, path)` is the structured
error for SQLite finding the file itself damaged (a malformed page, garbage in an FTS shadow
table) in the middle of an operation.
"""

from __future__ import annotations

import os
import sqlite3
import stat

from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.integrity import write_safety_errors

SIDECARS = ("-wal", "-shm", "-journal")
StoreDamage = sqlite3.DatabaseError
"""What SQLite raises for a damaged file: callers outside the store's SQLite modules catch it
by this name (they import no `sqlite3`)."""


def check_files(path: str) -> None:
    """Refuse a store path or sidecar that is a link or not a regular file; a missing one is
    fine (the store is created, a sidecar made by SQLite)."""
    for candidate in (path, *(path + suffix for suffix in SIDECARS)):
        try:
            info = os.lstat(candidate)
        except FileNotFoundError:
            continue
        except OSError as error:
            raise AgentMemoryError(
                C.MEMORY_STORE_PATH_UNSAFE,
                "Memory store path could not be inspected.",
                {"path": candidate, "reason": error.strerror},
            ) from None
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
            raise AgentMemoryError(
                C.MEMORY_STORE_PATH_UNSAFE,
                "SQLite memory store path and its -wal/-shm/-journal files must be regular files"
                " and cannot be symbolic links.",
                {"path": candidate},
            )


def check_writable(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a store whose schema is unsafe for writes (see the module docstring)."""
    errors = write_safety_errors(conn)
    if errors:
        raise AgentMemoryError(
            C.MEMORY_STORE_INTEGRITY_FAILED,
            "Memory store failed integrity validation; run `aidememo memory integrity`.",
            {"path": path, "errors": errors},
        )


def damaged(error: sqlite3.DatabaseError, path: str) -> AgentMemoryError:
    """The structured error of a store SQLite finds damaged while it works on it."""
    return AgentMemoryError(
        C.MEMORY_STORE_DAMAGED,
        f"Memory store file is damaged ({error}); run `aidememo memory integrity`.",
        {"path": path},
    )
