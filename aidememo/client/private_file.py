"""`PrivateFile`: a client-side SQLite file only its owner can read (the replica, the outbox).

The file is created 0600 in a folder created 0700 before SQLite opens it, the connection is
autocommit with explicit transactions and waits up to 30 s for another process's lock, and the
class's `SCHEMA` statements run on open. `sqlite3` is imported when a file is opened, so a
command that never opens one does not pay for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Self

if TYPE_CHECKING:
    import sqlite3


def _create_private(path: Path) -> None:
    """The file (0600) in its folder (0700), before SQLite opens it."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def open_private_sqlite(path: Path) -> sqlite3.Connection:
    """A SQLite connection to `path`, created 0600; autocommit, transactions explicit."""
    import sqlite3

    _create_private(path)
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


class PrivateFile:
    """One private SQLite file, its schema applied; a context manager that closes it."""

    SCHEMA: ClassVar[tuple[str, ...]] = ()

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = open_private_sqlite(path)
        for statement in self.SCHEMA:
            self._conn.execute(statement)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
