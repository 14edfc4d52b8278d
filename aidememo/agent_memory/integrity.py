"""Read-only integrity diagnostics of a memory store file (SPEC.md MEM-16).

`inspect_store(path)` compares the derived FTS index `memories_fts` with the canonical rows by id,
scope, content and space-joined tag text and reports each drift class apart: missing (an active
memory without an FTS row), orphan (an FTS row whose memory is gone or archived), duplicate (more
than one FTS row for one id) and mismatched (scope, content or tags differ). Beside it: SQLite's
`integrity_check`, foreign-key violations, the canonical tables' shapes, invalid tag JSON and the
exact FTS5 declaration. The file is `lstat`ed first (a symbolic link, a missing path or a
non-file is reported, never opened) and opened read-only: nothing is migrated, chmodded or
written, and no `-wal`/`-shm` file is created next to a store that has none (MEM-1).
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
from dataclasses import dataclass, field
from typing import Any

from aidememo.agent_memory import sidecar
from aidememo.agent_memory.schema import BUSY_TIMEOUT_MS, SCHEMA_VERSION

# The only FTS declaration the store accepts: Nuzo's, with the default tokenizer.
_FTS_DECLARATION = re.compile(
    r"^\s*CREATE\s+VIRTUAL\s+TABLE\s+memories_fts\s+USING\s+fts5\s*\(\s*id\s+UNINDEXED\s*,"
    r"\s*scope\s+UNINDEXED\s*,\s*content\s*,\s*tags\s*\)\s*$",
    re.IGNORECASE,
)

# The tags of a memory as its FTS row holds them: the JSON array's strings joined by one space.
FLAT_TAGS = (
    "COALESCE((SELECT GROUP_CONCAT(value, ' ') FROM (SELECT value FROM json_each(m.tags)"
    " ORDER BY key)), '')"
)

_INVALID_TAG_ROWS = """SELECT COUNT(*) FROM memories m
WHERE json_valid(m.tags) = 0
  OR CASE WHEN json_valid(m.tags) THEN json_type(m.tags) ELSE 'invalid' END <> 'array'
  OR EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(m.tags) THEN m.tags ELSE '[]' END)
             WHERE type <> 'text')"""


@dataclass
class IntegrityReport:
    """The integrity of one store file; the field names are the `--json` keys."""

    path: str
    ok: bool = False
    canonical_ok: bool = False
    fts_ok: bool = False
    fts_schema_ok: bool = False
    schema_version: int | None = None
    supported_schema_version: int = SCHEMA_VERSION
    integrity_check: str = "error"
    foreign_key_violations: int = 0
    memory_count: int = 0
    active_memory_count: int = 0
    fts_row_count: int = 0
    missing_fts_rows: int = 0
    orphan_fts_rows: int = 0
    duplicate_fts_rows: int = 0
    mismatched_fts_rows: int = 0
    errors: list[str] = field(default_factory=list)
    # The semantic sidecar beside the store, when there is one (MEM-22): reported, never
    # part of `ok` (it is derived and disposable).
    semantic_index: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The report as `integrity --json` prints it (Nuzo's keys and order)."""
        return {
            "ok": self.ok,
            "canonical_ok": self.canonical_ok,
            "fts_ok": self.fts_ok,
            "fts_schema_ok": self.fts_schema_ok,
            "path": self.path,
            "schema_version": self.schema_version,
            "supported_schema_version": self.supported_schema_version,
            "integrity_check": self.integrity_check,
            "foreign_key_violations": self.foreign_key_violations,
            "memory_count": self.memory_count,
            "active_memory_count": self.active_memory_count,
            "fts_row_count": self.fts_row_count,
            "missing_fts_rows": self.missing_fts_rows,
            "orphan_fts_rows": self.orphan_fts_rows,
            "duplicate_fts_rows": self.duplicate_fts_rows,
            "mismatched_fts_rows": self.mismatched_fts_rows,
            "errors": list(self.errors),
        } | ({} if self.semantic_index is None else {"semantic_index": self.semantic_index})

    def text(self) -> str:
        """The report as `integrity` prints it."""
        lines = [
            f"Store: {self.path}",
            f"Status: {'ok' if self.ok else 'failed'}",
            f"Canonical data: {'ok' if self.canonical_ok else 'failed'}",
            f"Schema: {'unknown' if self.schema_version is None else self.schema_version}"
            f" (supported {self.supported_schema_version})",
            f"SQLite integrity: {self.integrity_check}",
            f"Foreign key violations: {self.foreign_key_violations}",
            f"Memories: {self.memory_count}",
            f"Active memories: {self.active_memory_count}",
            f"FTS: {'ok' if self.fts_ok else 'failed'}",
            f"FTS schema: {'ok' if self.fts_schema_ok else 'failed'}",
            f"FTS rows: {self.fts_row_count}",
            f"Missing FTS rows: {self.missing_fts_rows}",
            f"Orphan FTS rows: {self.orphan_fts_rows}",
            f"Duplicate FTS rows: {self.duplicate_fts_rows}",
            f"Mismatched FTS rows: {self.mismatched_fts_rows}",
        ]
        lines += [f"Error: {error}" for error in self.errors]
        if self.semantic_index is not None:
            lines.append(semantic_line(self.semantic_index))
        return "\n".join(lines)


def semantic_line(index: dict[str, Any]) -> str:
    """`Semantic index: STATE (indexed/active, N stale, N missing)`."""
    return (
        f"Semantic index: {index['state']} ({index['indexedMemories']}/{index['activeMemories']}"
        f" indexed, {index['staleMemories']} stale, {index['missingMemories']} missing)"
    )


def open_readonly(path: str) -> sqlite3.Connection:
    """A read-only connection that creates no `-wal`/`-shm` next to a store without a `-wal`."""
    quiet = "&immutable=1" if not os.path.exists(f"{path}-wal") else ""
    conn = sqlite3.connect(
        f"file:{path}?mode=ro{quiet}",
        uri=True,
        isolation_level=None,
        timeout=BUSY_TIMEOUT_MS / 1000,
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _count(conn: sqlite3.Connection, sql: str) -> int:
    return int(conn.execute(sql).fetchone()[0])


def _kind_exists(conn: sqlite3.Connection, name: str, kinds: tuple[str, ...]) -> bool:
    marks = ",".join("?" * len(kinds))
    return (
        conn.execute(
            f"SELECT 1 FROM sqlite_master WHERE name = ? AND type IN ({marks}) LIMIT 1",
            (name, *kinds),
        ).fetchone()
        is not None
    )


def _columns(conn: sqlite3.Connection, table: str) -> dict[str, int]:
    return {row[1]: int(row[5]) for row in conn.execute(f"PRAGMA table_info({table})")}


def _has(conn: sqlite3.Connection, table: str, columns: list[str], pk: str | None = None) -> bool:
    found = _columns(conn, table)
    return all(c in found for c in columns) and (pk is None or found.get(pk) == 1)


def _memory_columns(version: int) -> list[str]:
    columns = ["id", "revision", "scope", "kind", "content", "tags", "source", "confidence"]
    columns += ["created_at", "updated_at", "last_used_at", "archived_at"]
    if version >= 3:
        columns.append("provenance")
    if version >= 4:
        columns.append("confidence_state")
    if version >= 5:
        columns += ["review_after", "expires_at"]
    if version >= 7:
        columns.append("capture_key")
    return columns


def _relations_ok(conn: sqlite3.Connection) -> bool:
    columns = ["id", "source_memory_id", "target_memory_id", "relation", "reason", "created_at"]
    if not _has(conn, "memory_relations", columns, "id"):
        return False
    keys = conn.execute("PRAGMA foreign_key_list(memory_relations)").fetchall()
    for column in ("source_memory_id", "target_memory_id"):
        # foreign_key_list rows: (id, seq, table, from, to, on_update, on_delete, match)
        if not any(
            k[3] == column
            and k[2] == "memories"
            and k[4] == "id"
            and str(k[6]).upper() == "CASCADE"
            for k in keys
        ):
            return False
    for index in conn.execute("PRAGMA index_list(memory_relations)").fetchall():
        if int(index[2]) != 1:
            continue
        info = sorted(conn.execute(f"PRAGMA index_info({_quote(index[1])})").fetchall())
        if ",".join(row[2] for row in info) == "source_memory_id,target_memory_id,relation":
            return True
    return False


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _fts_declared(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'memories_fts' AND type = 'table'"
    ).fetchone()
    return row is not None and isinstance(row[0], str) and bool(_FTS_DECLARATION.match(row[0]))


def fts_drift(conn: sqlite3.Connection, compare_values: bool = True) -> dict[str, int]:
    """The FTS row count and the four drift counts; values compared only when `compare_values`
    (the canonical tags are valid JSON arrays of strings)."""
    active = _count(conn, "SELECT COUNT(*) FROM memories WHERE archived_at IS NULL")
    indexed = _count(
        conn,
        "SELECT COUNT(DISTINCT f.id) FROM memories_fts f JOIN memories m ON m.id = f.id"
        " WHERE m.archived_at IS NULL",
    )
    mismatched = 0
    if compare_values:
        mismatched = _count(
            conn,
            "SELECT COUNT(*) FROM memories m JOIN memories_fts f ON f.id = m.id"
            " WHERE m.archived_at IS NULL AND (f.scope IS NOT m.scope OR f.content IS NOT"
            f" m.content OR f.tags IS NOT {FLAT_TAGS})",
        )
    return {
        "fts_row_count": _count(conn, "SELECT COUNT(*) FROM memories_fts"),
        "missing_fts_rows": max(0, active - indexed),
        "orphan_fts_rows": _count(
            conn,
            "SELECT COUNT(*) FROM memories_fts f LEFT JOIN memories m ON m.id = f.id"
            " WHERE m.id IS NULL OR m.archived_at IS NOT NULL",
        ),
        "duplicate_fts_rows": _count(
            conn,
            "SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM memories_fts"
            " GROUP BY id HAVING COUNT(*) > 1)",
        ),
        "mismatched_fts_rows": mismatched,
    }


def unknown_triggers(conn: sqlite3.Connection) -> list[str]:
    """The store's triggers: its schema defines none, so every one was planted (MEM-1)."""
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
    return [str(row[0]) for row in rows]


def write_safety_errors(conn: sqlite3.Connection) -> list[str]:
    """What makes a store unsafe to write, from its schema alone (cheap enough for every
    open, MEM-1): the canonical tables' shapes, the exact FTS declaration and any trigger."""
    errors: list[str] = []
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if not _has(conn, "memories", _memory_columns(version), "id"):
        errors.append("memories table schema is invalid")
    events = ["id", "memory_id", "event_type", "actor", "payload", "created_at"]
    if not _has(conn, "memory_events", events, "id"):
        errors.append("memory_events table schema is invalid")
    if version >= 6 and not _relations_ok(conn):
        errors.append("memory_relations table schema is invalid")
    fts_usable = _has(conn, "memories_fts", ["id", "scope", "content", "tags"])
    if not (fts_usable and _fts_declared(conn)):
        errors.append("memories_fts schema is invalid")
    triggers = unknown_triggers(conn)
    if triggers:
        errors.append(f"unknown trigger(s) found: {', '.join(triggers)}")
    return errors


def _inspect_open(conn: sqlite3.Connection, report: IntegrityReport) -> None:
    canonical: list[str] = []
    fts: list[str] = []
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    report.schema_version = version
    report.integrity_check = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    if report.integrity_check != "ok":
        canonical.append(f"sqlite integrity_check failed: {report.integrity_check}")
    if version > SCHEMA_VERSION:
        canonical.append(
            f"schema version {version} is newer than supported version {SCHEMA_VERSION}"
        )
    if version < 1:
        canonical.append("schema version is not initialized")
    report.foreign_key_violations = _count(conn, "SELECT COUNT(*) FROM pragma_foreign_key_check")
    if report.foreign_key_violations > 0:
        canonical.append(f"{report.foreign_key_violations} foreign key violation(s) found")
    has_memories = _kind_exists(conn, "memories", ("table",))
    has_events = _kind_exists(conn, "memory_events", ("table",))
    has_relations = _kind_exists(conn, "memory_relations", ("table",))
    memories_ok = has_memories and _has(conn, "memories", _memory_columns(version), "id")
    event_columns = ["id", "memory_id", "event_type", "actor", "payload", "created_at"]
    events_ok = has_events and _has(conn, "memory_events", event_columns, "id")
    relations_ok = version < 6 or (has_relations and _relations_ok(conn))
    has_fts = _kind_exists(conn, "memories_fts", ("table", "view"))
    fts_usable = has_fts and _has(conn, "memories_fts", ["id", "scope", "content", "tags"])
    fts_virtual = has_fts and _fts_declared(conn)
    invalid_rows = 0
    if memories_ok:
        report.memory_count = _count(conn, "SELECT COUNT(*) FROM memories")
        report.active_memory_count = _count(
            conn, "SELECT COUNT(*) FROM memories WHERE archived_at IS NULL"
        )
        invalid_rows = _count(conn, _INVALID_TAG_ROWS)
        if fts_usable:
            for name, value in fts_drift(conn, invalid_rows == 0).items():
                setattr(report, name, value)
    if not has_memories:
        canonical.append("memories table is missing")
    elif not memories_ok:
        canonical.append("memories table schema is invalid")
    if not has_events:
        canonical.append("memory_events table is missing")
    elif not events_ok:
        canonical.append("memory_events table schema is invalid")
    if version >= 6 and not has_relations:
        canonical.append("memory_relations table is missing")
    elif version >= 6 and not relations_ok:
        canonical.append("memory_relations table schema is invalid")
    if invalid_rows > 0:
        canonical.append(f"{invalid_rows} canonical memory row(s) are invalid")
    triggers = unknown_triggers(conn)
    if triggers:
        canonical.append(f"unknown trigger(s) found: {', '.join(triggers)}")
    if not has_fts:
        fts.append("memories_fts table is missing")
    elif not (fts_usable and fts_virtual):
        fts.append("memories_fts schema is invalid")
    for key, what in (
        ("missing_fts_rows", "active memory row(s) are missing from FTS"),
        ("orphan_fts_rows", "orphan or archived FTS row(s) found"),
        ("duplicate_fts_rows", "duplicate FTS row(s) found"),
        ("mismatched_fts_rows", "stale FTS row(s) found"),
    ):
        if getattr(report, key) > 0:
            fts.append(f"{getattr(report, key)} {what}")
    report.errors = canonical + fts
    report.canonical_ok = not canonical
    report.fts_ok = not fts
    report.fts_schema_ok = fts_usable and fts_virtual
    report.ok = not report.errors


def inspect_store(path: str) -> IntegrityReport:
    """The integrity report of the store file at `path`; never raises for a bad store."""
    store_path = os.path.abspath(path)
    report = IntegrityReport(path=store_path)
    try:
        info = os.lstat(store_path)
    except FileNotFoundError:
        report.integrity_check = "missing"
        report.errors = ["memory store does not exist"]
        return report
    except OSError as error:
        report.errors = [str(error)]
        return report
    if stat.S_ISLNK(info.st_mode):
        report.integrity_check = "unsafe_symlink"
        report.errors = ["memory store path is a symbolic link"]
        return report
    if not stat.S_ISREG(info.st_mode):
        report.integrity_check = "not_a_file"
        report.errors = ["memory store path is not a file"]
        return report
    try:
        conn = open_readonly(store_path)
    except sqlite3.Error as error:
        report.errors = [str(error)]
        return report
    try:
        _inspect_open(conn, report)
    except sqlite3.Error as error:
        fresh = IntegrityReport(path=store_path, errors=[str(error)])
        return fresh
    finally:
        conn.close()
    report.semantic_index = sidecar.summary(sidecar.sidecar_path(store_path), store_path)
    return report
