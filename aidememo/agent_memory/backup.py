"""WAL-safe backup and validated restore of a memory store file (SPEC.md MEM-18).

`backup_store` copies a live store through SQLite's online backup API from a read-only
connection (so rows still only in the `-wal` file are captured) into a file created 0600 with
`O_EXCL | O_NOFOLLOW`, switches the copy to the DELETE journal so it is one self-contained
file, and validates it with `inspect_store`; a copy that fails is removed. `restore_store`
validates the backup, `VACUUM INTO`s a temporary file beside the target, validates that copy,
then removes the target's `-wal`/`-shm` and replaces the target by one atomic rename
(a failure leaves the old file) and chmods it 0600. Both refuse with Nuzo's
`MEMORY_BACKUP_*` / `MEMORY_RESTORE_*` codes. The file helpers here (SQLite filesets, exclusive
private files, file identities, overlap checks) are shared with `repair_fts`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import uuid
from dataclasses import dataclass
from typing import Any

from aidememo.agent_memory import paths
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.integrity import IntegrityReport, inspect_store, open_readonly
from aidememo.agent_memory.open_checks import check_files
from aidememo.agent_memory.schema import BUSY_TIMEOUT_MS, check_version, user_version

SIDECARS = ("", "-wal", "-shm")


def fileset(path: str) -> list[str]:
    """The store file and its `-wal` and `-shm` sidecars."""
    return [path + suffix for suffix in SIDECARS]


def entry_exists(path: str) -> bool:
    """True when anything (a dangling symbolic link too) is at `path`."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True


def fileset_exists(path: str) -> bool:
    return any(entry_exists(candidate) for candidate in fileset(path))


def remove_fileset(path: str) -> None:
    for candidate in fileset(path):
        try:
            os.unlink(candidate)
        except FileNotFoundError:
            pass


def chmod_fileset(path: str) -> None:
    for candidate in fileset(path):
        if os.path.exists(candidate) and not os.path.islink(candidate):
            os.chmod(candidate, paths.FILE_MODE)


def comparable(path: str) -> str:
    """`path` with its parent directory's real path: stable directory aliases compare equal."""
    try:
        return os.path.join(
            os.path.realpath(os.path.dirname(path), strict=True), os.path.basename(path)
        )
    except OSError:
        return path


def filesets_overlap(left: str, right: str) -> bool:
    """True when any file of one SQLite fileset is a file of the other."""
    return bool(set(fileset(comparable(left))) & set(fileset(comparable(right))))


def create_private_exclusive(path: str) -> None:
    """Create an empty 0600 regular file at `path`, never over anything, never through a link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, paths.FILE_MODE)
    try:
        os.fchmod(fd, paths.FILE_MODE)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Identity:
    """A file's `(st_dev, st_ino)`: a path replaced by another file has another identity."""

    dev: int
    ino: int


def regular_identity(path: str, code: C, message: str) -> Identity:
    """The identity of the regular, non-link file at `path`; `code` otherwise."""
    try:
        info = os.lstat(path)
    except OSError:
        raise AgentMemoryError(code, message, {"path": path}) from None
    if not stat.S_ISREG(info.st_mode):
        raise AgentMemoryError(code, message, {"path": path})
    return Identity(info.st_dev, info.st_ino)


def online_backup(source: str, target: str) -> tuple[int, int]:
    """Copy `source` (read through a read-only connection, `-wal` included) into the existing
    empty file `target`, then give the copy the DELETE journal; returns (pages, remaining)."""
    progress = [0, 0]

    def note(_status: int, remaining: int, total: int) -> None:
        progress[0], progress[1] = total, remaining

    # With no `-wal` next to the store no other connection has it open: read it through an
    # ordinary connection, which removes the sidecars it creates when it closes (a read-only
    # one would leave them behind). Otherwise read-only, beside the connections using it.
    busy = os.path.exists(f"{source}-wal")
    reader = sqlite3.connect(
        f"file:{source}?mode={'ro' if busy else 'rw'}", uri=True, timeout=BUSY_TIMEOUT_MS / 1000
    )
    try:
        reader.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        copy = sqlite3.connect(target, isolation_level=None)
        try:
            reader.backup(copy, progress=note)
            copy.execute("PRAGMA journal_mode = DELETE")
        finally:
            copy.close()
    finally:
        reader.close()
    chmod_fileset(target)
    return progress[0], progress[1]


def _invalid(code: C, message: str, path: str, report: IntegrityReport) -> AgentMemoryError:
    return AgentMemoryError(code, message, {"path": path, "errors": report.errors})


@dataclass(frozen=True)
class _CopyRefusals:
    """The code and message of each refusal of a copy from one store file to another."""

    same_path: tuple[C, str]
    source_missing: tuple[C, str]
    target_exists: tuple[C, str]


_BACKUP_REFUSALS = _CopyRefusals(
    (C.MEMORY_BACKUP_TARGET_CONFLICT, "Backup path must differ from the source store path."),
    (C.MEMORY_BACKUP_SOURCE_MISSING, "Backup source store does not exist."),
    (C.MEMORY_BACKUP_EXISTS, "Backup path already exists. Use --overwrite to replace it."),
)
_RESTORE_REFUSALS = _CopyRefusals(
    (
        C.MEMORY_RESTORE_TARGET_CONFLICT,
        "Restore backup path must differ from the target store path.",
    ),
    (C.MEMORY_RESTORE_SOURCE_MISSING, "Restore backup path does not exist."),
    (
        C.MEMORY_RESTORE_CONFIRMATION_REQUIRED,
        "Restore would replace an existing store. Re-run with --yes to confirm.",
    ),
)


def _check_copy(source: str, target: str, overwrite: bool, refusals: _CopyRefusals) -> None:
    """A copy's checks in Nuzo's order: two paths, an existing source, no target unless
    `overwrite`."""
    if source == target:
        raise AgentMemoryError(*refusals.same_path)
    if not os.path.exists(source):
        raise AgentMemoryError(*refusals.source_missing, {"path": source})
    if os.path.exists(target) and not overwrite:
        raise AgentMemoryError(*refusals.target_exists, {"path": target})


def backup_store(source: str, backup: str, *, overwrite: bool = False) -> dict[str, Any]:
    """Back up the store at `source` to `backup`; the result as `backup --json` prints it."""
    source_path, backup_path = os.path.abspath(source), os.path.abspath(backup)
    _check_copy(source_path, backup_path, overwrite, _BACKUP_REFUSALS)
    paths.ensure_private_dir(os.path.dirname(backup_path))
    remove_fileset(backup_path)
    try:
        create_private_exclusive(backup_path)
        pages, remaining = online_backup(source_path, backup_path)
        report = inspect_store(backup_path)
        if not report.ok:
            raise _invalid(
                C.MEMORY_BACKUP_INVALID,
                "Created backup failed integrity validation.",
                backup_path,
                report,
            )
    except BaseException:
        remove_fileset(backup_path)
        raise
    return {
        "source_path": source_path,
        "backup_path": backup_path,
        "pages": pages,
        "remaining_pages": remaining,
        "integrity": report.to_json(),
    }


def _check_target(target: str) -> None:
    """The checks every other command makes of a store, made of the one a restore replaces:
    no link or special file at it or its sidecars, and no store of a newer schema, whose data
    this version cannot carry over (MEM-1, MEM-18)."""
    check_files(target)
    if not entry_exists(target):
        return
    reader = open_readonly(target)
    try:
        version = user_version(reader)
    except sqlite3.DatabaseError:
        return  # a damaged store: replacing it is what a restore is for
    finally:
        reader.close()
    check_version(version)


def restore_store(backup: str, target: str, *, overwrite: bool = False) -> dict[str, Any]:
    """Restore the store at `target` from the backup at `backup` (`overwrite`: replace an
    existing target); the result as `restore --json` prints it."""
    backup_path, target_path = os.path.abspath(backup), os.path.abspath(target)
    _check_copy(backup_path, target_path, overwrite, _RESTORE_REFUSALS)
    _check_target(target_path)
    source_report = inspect_store(backup_path)
    if not source_report.ok:
        raise _invalid(
            C.MEMORY_RESTORE_SOURCE_INVALID,
            "Restore backup failed integrity validation.",
            backup_path,
            source_report,
        )
    paths.ensure_private_dir(os.path.dirname(target_path))
    temporary = f"{target_path}.restore-{uuid.uuid4()}"
    try:
        create_private_exclusive(temporary)
        reader = open_readonly(backup_path)
        try:
            reader.execute("VACUUM INTO ?", (temporary,))
        finally:
            reader.close()
        copy_report = inspect_store(temporary)
        if not copy_report.ok:
            raise _invalid(
                C.MEMORY_RESTORE_COPY_INVALID,
                "Restore copy failed integrity validation.",
                temporary,
                copy_report,
            )
        # The old sidecars go first (a stale -wal must never be replayed onto the restored
        # file), then one atomic rename replaces the store: a failure leaves the old file.
        for sidecar in fileset(target_path)[1:]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(sidecar)
        os.replace(temporary, target_path)
        chmod_fileset(target_path)
    except AgentMemoryError:
        remove_fileset(temporary)
        raise
    except Exception as error:
        remove_fileset(temporary)
        raise AgentMemoryError(
            C.MEMORY_RESTORE_FAILED, "Memory store restore failed.", {"cause": str(error)}
        ) from None
    report = inspect_store(target_path)
    return {
        "backup_path": backup_path,
        "target_path": target_path,
        "integrity": report.to_json(),
    }
