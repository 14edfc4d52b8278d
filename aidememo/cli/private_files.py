"""The command line's new private files (token files, saved profiles, exports): opened only
when nothing is at the path, never through a symbolic link, and written whole."""

from __future__ import annotations

import os

NEW_FILE_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd` (one `os.write` may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
