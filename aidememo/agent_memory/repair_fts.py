"""Guarded rebuild of the derived FTS index from the canonical rows (SPEC.md MEM-17).

This is an administrator workflow of the CLI (`aidememo memory integrity repair-fts`); no MCP
tool reaches it. `plan_repair` is read-only: the integrity report, whether a repair is required
(the FTS index drifted) and whether it is possible (schema 7, canonical data healthy, FTS
declared as the store declares it). `repair` needs `confirm` and refuses overlapping SQLite
filesets (real parent directories compared, so a stable directory alias is allowed but names the
same files), symbolic-link or non-file source and backup leaves, an existing backup fileset, a
source file replaced while it runs. Then, holding `BEGIN IMMEDIATE` on the source:

1. re-plan under the lock (another process may have repaired or changed the store);
2. take a WAL-consistent snapshot through a read-only sibling connection into
   `<backup>.tmp-<uuid>` (created 0600, `O_EXCL | O_NOFOLLOW`), switch it to the DELETE journal
   and rebuild only its FTS rows, so its canonical rows are the exact pre-repair snapshot;
3. validate it, publish it with `link()` (never replacing a path), re-check that no sidecar
   appeared, chmod 0600, validate the published file, remove the temporary name;
4. in the still-open source transaction `DELETE FROM memories_fts` and `INSERT ... SELECT` the
   active rows (tags space-joined in JSON order), run FTS5's `integrity-check`,
   `integrity_check`, the foreign-key check and the drift counts, and commit.

Any failure rolls the source back (canonical rows and audit history never change); a validated
published backup is kept and named in `details.backupPath`. A process killed at any step leaves
the canonical rows unchanged and either the old FTS rows or the new ones (SQLite's journal).
`AIDEMEMO_TEST_CRASH_AT=<step>` (SIGKILL) and `AIDEMEMO_TEST_FAIL_AT=<step>` (an exception) are
test hooks at the steps named in `STEPS`; unset, they do nothing.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import uuid
from typing import Any

from aidememo.agent_memory import backup as files
from aidememo.agent_memory import paths
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.integrity import FLAT_TAGS, IntegrityReport, fts_drift, inspect_store
from aidememo.agent_memory.schema import BUSY_TIMEOUT_MS, SCHEMA_VERSION

STEPS = (
    "locked",
    "snapshot",
    "backup_rebuilt",
    "published",
    "validated",
    "source_rebuilt",
    "source_checked",
    "committed",
)

REBUILD = (
    "INSERT INTO memories_fts (id, scope, content, tags) SELECT m.id, m.scope, m.content,"
    f" {FLAT_TAGS} FROM memories m WHERE m.archived_at IS NULL ORDER BY m.id ASC"
)


def reached(step: str) -> None:
    """A test hook at one step of `repair`: inert unless the test environment names the step."""
    if os.environ.get("AIDEMEMO_TEST_CRASH_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("AIDEMEMO_TEST_FAIL_AT") == step:
        raise RuntimeError(f"test failure injected at {step}")


def default_backup_path(source: str) -> str:
    return f"{os.path.abspath(source)}.fts-repair.backup.sqlite"


def plan_repair(path: str) -> dict[str, Any]:
    """The read-only plan: `{sourcePath, repairRequired, repairable, report}`."""
    report = inspect_store(path)
    return {
        "sourcePath": report.path,
        "repairRequired": not report.fts_ok,
        "repairable": report.schema_version == SCHEMA_VERSION
        and report.canonical_ok
        and report.fts_schema_ok,
        "report": report,
    }


def _refuse_unrepairable(plan: dict[str, Any]) -> None:
    if not plan["repairable"]:
        report: IntegrityReport = plan["report"]
        raise AgentMemoryError(
            C.MEMORY_FTS_REPAIR_SOURCE_INVALID,
            "Canonical SQLite integrity must pass before FTS repair.",
            {"path": plan["sourcePath"], "errors": report.errors},
        )


def _no_link_leaf(path: str) -> None:
    if os.path.islink(path):
        raise AgentMemoryError(
            C.MEMORY_FTS_REPAIR_PATH_UNSAFE,
            "FTS repair refuses symbolic-link source or backup files.",
            {"path": path},
        )


def _identity(path: str) -> files.Identity:
    return files.regular_identity(
        path,
        C.MEMORY_FTS_REPAIR_PATH_UNSAFE,
        "FTS repair requires a regular, non-symbolic-link SQLite file.",
    )


def _same_source(path: str, expected: files.Identity) -> None:
    if _identity(path) != expected:
        raise AgentMemoryError(
            C.MEMORY_FTS_REPAIR_SOURCE_CHANGED,
            "The source store path changed while FTS repair was running.",
            {"path": path},
        )


def _overlap(source: str, backup: str) -> None:
    if files.filesets_overlap(source, backup):
        raise AgentMemoryError(
            C.MEMORY_FTS_REPAIR_BACKUP_CONFLICT,
            "FTS repair backup files must not overlap the source SQLite fileset.",
        )


def _backup_exists(path: str, message: str) -> AgentMemoryError:
    return AgentMemoryError(C.MEMORY_BACKUP_EXISTS, message, {"path": path})


def rebuild_in(conn: sqlite3.Connection) -> None:
    """Replace every FTS row by the canonical active rows (inside the caller's transaction)."""
    conn.execute("DELETE FROM memories_fts")
    conn.execute(REBUILD)


def check_rebuilt(conn: sqlite3.Connection) -> None:
    """Refuse unless the FTS index now matches the canonical active rows exactly."""
    conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES('integrity-check', 1)")
    check = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    violations = int(conn.execute("SELECT COUNT(*) FROM pragma_foreign_key_check").fetchone()[0])
    drift = fts_drift(conn)
    active = int(
        conn.execute("SELECT COUNT(*) FROM memories WHERE archived_at IS NULL").fetchone()[0]
    )
    if (
        check != "ok"
        or violations
        or drift["fts_row_count"] != active
        or any(drift[k] for k in drift if k != "fts_row_count")
    ):
        raise AgentMemoryError(
            C.MEMORY_FTS_REPAIR_FAILED,
            "Rebuilt FTS index did not match canonical active memories.",
        )


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _rebuild_file(path: str) -> None:
    conn = _connect(path)
    try:
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("BEGIN IMMEDIATE")
        try:
            rebuild_in(conn)
            check_rebuilt(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()
    files.chmod_fileset(path)


def _inspected(path: str, code: C, message: str, details: dict[str, Any]) -> IntegrityReport:
    """The integrity report of `path`, or `code` with `details` and the report's errors."""
    report = inspect_store(path)
    if not report.ok:
        raise AgentMemoryError(code, message, details | {"errors": report.errors})
    return report


def _result(
    source: str, backup: str | None, before: IntegrityReport, **more: Any
) -> dict[str, Any]:
    return {
        "sourcePath": source,
        "backupPath": backup,
        "repaired": backup is not None,
        "pages": more.get("pages", 0),
        "remainingPages": more.get("remaining", 0),
        "before": before,
        "backup": more.get("backup_report"),
        "after": more.get("after", before),
    }


def repair(source: str, backup: str | None = None, *, confirm: bool = False) -> dict[str, Any]:
    """Rebuild the FTS index of the store at `source` after publishing a validated backup."""
    if not confirm:
        raise AgentMemoryError(
            C.MEMORY_FTS_REPAIR_CONFIRMATION_REQUIRED, "FTS repair requires explicit confirmation."
        )
    source_path = os.path.abspath(source)
    backup_path = os.path.abspath(backup) if backup else default_backup_path(source_path)
    _overlap(source_path, backup_path)
    _no_link_leaf(source_path)
    _no_link_leaf(backup_path)
    identity = _identity(source_path)
    plan = plan_repair(source_path)
    _same_source(source_path, identity)
    _refuse_unrepairable(plan)
    if not plan["repairRequired"]:
        return _result(source_path, None, plan["report"])
    if files.fileset_exists(backup_path):
        raise _backup_exists(
            backup_path, "Backup path already exists. Choose a different --backup-path."
        )
    paths.ensure_private_dir(os.path.dirname(backup_path))
    _no_link_leaf(backup_path)
    _overlap(source_path, backup_path)
    temporary = f"{backup_path}.tmp-{uuid.uuid4()}"
    writer = _connect(source_path)
    published = validated = committed = False
    stats: dict[str, Any] = {}
    try:
        writer.execute("BEGIN IMMEDIATE")
        _same_source(source_path, identity)
        plan = plan_repair(source_path)
        _same_source(source_path, identity)
        _refuse_unrepairable(plan)
        if not plan["repairRequired"]:
            writer.execute("ROLLBACK")
            return _result(source_path, None, plan["report"])
        reached("locked")
        files.create_private_exclusive(temporary)
        _same_source(source_path, identity)
        stats["pages"], stats["remaining"] = files.online_backup(source_path, temporary)
        _same_source(source_path, identity)
        reached("snapshot")
        _rebuild_file(temporary)
        _inspected(
            temporary,
            C.MEMORY_FTS_REPAIR_BACKUP_INVALID,
            "FTS repair backup failed validation.",
            {"path": temporary},
        )
        reached("backup_rebuilt")
        if files.fileset_exists(backup_path):
            raise _backup_exists(
                backup_path, "Backup path appeared while the repair backup was being prepared."
            )
        temp_identity = _identity(temporary)
        try:
            os.link(temporary, backup_path, follow_symlinks=False)
        except FileExistsError:
            raise _backup_exists(
                backup_path, "Backup path appeared while the repair backup was being published."
            ) from None
        published = True
        if files.entry_exists(f"{backup_path}-wal") or files.entry_exists(f"{backup_path}-shm"):
            _remove_if(backup_path, temp_identity)
            published = False
            raise _backup_exists(
                backup_path,
                "Backup sidecar path appeared while the repair backup was being published.",
            )
        reached("published")
        os.chmod(backup_path, paths.FILE_MODE)
        report = inspect_store(backup_path)
        if not report.ok:
            _remove_if(backup_path, temp_identity)
            published = False
            raise AgentMemoryError(
                C.MEMORY_FTS_REPAIR_BACKUP_INVALID,
                "Published FTS repair backup failed validation.",
                {"path": backup_path, "errors": report.errors},
            )
        stats["backup_report"] = report
        validated = True
        files.remove_fileset(temporary)
        reached("validated")
        _same_source(source_path, identity)
        rebuild_in(writer)
        reached("source_rebuilt")
        check_rebuilt(writer)
        reached("source_checked")
        writer.execute("COMMIT")
        committed = True
        reached("committed")
        _same_source(source_path, identity)
    except BaseException as error:
        if writer.in_transaction:
            try:
                writer.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # closing the connection rolls back too
        files.remove_fileset(temporary)
        retained = published and validated and not committed
        if isinstance(error, AgentMemoryError):
            if retained:
                raise AgentMemoryError(
                    C.MEMORY_FTS_REPAIR_FAILED,
                    "FTS repair failed and the source transaction was rolled back; the"
                    " validated backup was retained.",
                    {"backupPath": backup_path, "causeCode": error.code.value},
                ) from None
            raise
        if not isinstance(error, Exception):
            raise
        details: dict[str, Any] = {"cause": str(error)}
        if published and validated:
            details["backupPath"] = backup_path
        raise AgentMemoryError(C.MEMORY_FTS_REPAIR_FAILED, "FTS repair failed.", details) from None
    finally:
        writer.close()
        paths.protect(source_path)
    after = _inspected(
        source_path,
        C.MEMORY_FTS_REPAIR_FAILED,
        "FTS repair completed but the source store failed validation.",
        {"backupPath": backup_path},
    )
    return _result(source_path, backup_path, plan["report"], after=after, **stats)


def _remove_if(path: str, expected: files.Identity) -> None:
    """Remove `path` only while it is still the file this run published."""
    try:
        if _identity(path) == expected:
            os.unlink(path)
    except (AgentMemoryError, OSError):
        pass  # a concurrently replaced path is not ours to remove
