"""The memory store's SQLite connection and its row-level statements (SPEC.md MEM-1, MEM-5).

`MemoryDatabase` opens a store in place (creating it 0600 when missing, never through a symbolic
link), migrates it to version 7, and runs each logical write in one `BEGIN IMMEDIATE`
transaction: rows, FTS rows and the audit event commit together or not at all. Writers in one
process are serialized per store file; writers in other processes wait on SQLite's lock for up to
the five-second busy timeout. Every statement here names its columns, so stores whose columns
were added by migrations (a different column order) read the same.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from aidememo.agent_memory import paths
from aidememo.agent_memory.closing import ClosedOnExit
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.jstext import js_json
from aidememo.agent_memory.model import Event, Memory, Relation
from aidememo.agent_memory.open_checks import check_files, check_writable, damaged
from aidememo.agent_memory.schema import (
    BUSY_TIMEOUT_MS,
    capture_key,
    check_version,
    migrate,
    user_version,
)

COLUMNS = (
    "id, revision, scope, kind, content, tags, source, confidence, confidence_state, provenance, "
    "review_after, expires_at, created_at, updated_at, last_used_at, archived_at"
)
EVENT_COLUMNS = "id, memory_id, event_type, actor, payload, created_at"
RELATION_COLUMNS = "id, source_memory_id, target_memory_id, relation, reason, created_at"

_LOCKS: dict[str, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(path: str) -> threading.RLock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path, threading.RLock())


def _json_object(text: str | None, code: C, message: str) -> dict[str, Any] | None:
    if text is None:
        return None
    value = json.loads(text)
    if not isinstance(value, dict):
        raise AgentMemoryError(code, message)
    return value


def memory_from_row(row: Sequence[Any]) -> Memory:
    tags = [] if row[5] == "[]" else json.loads(row[5])
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise AgentMemoryError(C.MEMORY_TAGS_INVALID, "Stored memory tags are invalid.")
    return Memory(
        id=row[0],
        revision=int(row[1]),
        scope=row[2],
        kind=row[3],
        content=row[4],
        tags=tags,
        source=row[6],
        confidence=float(row[7]),
        confidence_state=row[8],
        provenance=_json_object(
            row[9], C.MEMORY_PROVENANCE_INVALID, "Stored memory provenance is invalid."
        ),
        review_after=row[10] or None,
        expires_at=row[11] or None,
        created_at=row[12],
        updated_at=row[13],
        last_used_at=row[14] or None,
        archived_at=row[15] or None,
    )


def event_from_row(row: Sequence[Any]) -> Event:
    payload = _json_object(
        row[4], C.MEMORY_EVENT_PAYLOAD_INVALID, "Stored memory event payload is invalid."
    )
    return Event(row[0], row[1], row[2], row[3], payload or {}, row[5])


def relation_from_row(row: Sequence[Any]) -> Relation:
    return Relation(row[0], row[1], row[2], row[3], row[4], row[5])


def _row(memory: Memory) -> tuple[Any, ...]:
    return (
        memory.id,
        memory.revision,
        memory.scope,
        memory.kind,
        memory.content,
        capture_key(memory.content),
        js_json(memory.tags),
        memory.source,
        memory.confidence,
        memory.confidence_state,
        None if memory.provenance is None else js_json(memory.provenance),
        memory.review_after,
        memory.expires_at,
        memory.created_at,
        memory.updated_at,
        memory.last_used_at,
        memory.archived_at,
    )


# Per connection, never stored in the file: a 32 MiB page cache and reads through a memory
# map of up to 256 MiB. Recall reads FTS doclists, sizes and content pages all over a store of
# tens of MiB; with SQLite's 2 MiB default most of them are re-read from the OS each query.
READ_PRAGMAS = ("PRAGMA cache_size = -32768", "PRAGMA mmap_size = 268435456")


def _tune(conn: sqlite3.Connection) -> None:
    for pragma in READ_PRAGMAS:
        conn.execute(pragma)


class MemoryDatabase(ClosedOnExit):
    """One open memory store file (or `:memory:`); `readonly` opens never create, migrate,
    chmod or write, and create no `-wal`/`-shm` file when the store has none."""

    def __init__(self, path: str, *, readonly: bool = False) -> None:
        self.path = path if path == ":memory:" else os.path.abspath(path)
        self.readonly = readonly
        self._lock = threading.RLock() if path == ":memory:" else _lock_for(self.path)
        if path != ":memory:":
            check_files(self.path)  # before any open: no link followed, no FIFO waited on
        if readonly:
            # Without a -wal file no writer is mid-transaction: read the file as immutable so no
            # -wal/-shm sidecar is created next to a store this process only inspects.
            quiet = "&immutable=1" if not os.path.exists(f"{self.path}-wal") else ""
            self.conn = sqlite3.connect(
                f"file:{self.path}?mode=ro{quiet}",
                uri=True,
                isolation_level=None,
                timeout=BUSY_TIMEOUT_MS / 1000,
                check_same_thread=False,
            )
            self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _tune(self.conn)
            check_version(user_version(self.conn))
            return
        if path != ":memory:":
            paths.create_private_file(self.path)
        self.conn = sqlite3.connect(
            self.path,
            isolation_level=None,
            timeout=BUSY_TIMEOUT_MS / 1000,
            check_same_thread=False,
        )
        _tune(self.conn)
        try:
            with self._lock:
                self.previous_version = migrate(self.conn)
            check_writable(self.conn, self.path)
        except sqlite3.DatabaseError as error:
            self.conn.close()
            raise damaged(error, self.path) from None
        except BaseException:
            self.conn.close()
            paths.protect(self.path)
            raise
        paths.protect(self.path)

    def close(self) -> None:
        self.conn.close()
        if not self.readonly and self.path != ":memory:":
            paths.protect(self.path)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (`BEGIN IMMEDIATE`): commits on success, rolls back on error."""
        if self.readonly:
            raise AgentMemoryError(C.MEMORY_STORE_PATH_UNSAFE, "Memory store is open read-only.")
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            finally:
                if self.path != ":memory:":
                    paths.protect(self.path)

    # -- memories --------------------------------------------------------------------------

    def find(self, memory_id: str) -> Memory | None:
        row = self.conn.execute(
            f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
        return None if row is None else memory_from_row(row)

    def find_many(self, ids: Sequence[str]) -> dict[str, Memory]:
        unique = list(dict.fromkeys(ids))
        found: dict[str, Memory] = {}
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE id IN ({marks})", chunk
            ):
                memory = memory_from_row(row)
                found[memory.id] = memory
        return found

    def insert(self, memory: Memory) -> None:
        self.conn.execute(
            "INSERT INTO memories (id, revision, scope, kind, content, capture_key, tags, source,"
            " confidence, confidence_state, provenance, review_after, expires_at, created_at,"
            " updated_at, last_used_at, archived_at) VALUES"
            " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            _row(memory),
        )

    def update_cas(self, memory: Memory, expected_revision: int) -> bool:
        """Write `memory` over the row still at `expected_revision`; False when it moved on."""
        values = _row(memory)
        cursor = self.conn.execute(
            "UPDATE memories SET revision = ?, scope = ?, kind = ?, content = ?, capture_key = ?,"
            " tags = ?, source = ?, confidence = ?, confidence_state = ?, provenance = ?,"
            " review_after = ?, expires_at = ?, created_at = ?, updated_at = ?, last_used_at = ?,"
            " archived_at = ? WHERE id = ? AND revision = ?",
            (*values[1:], memory.id, expected_revision),
        )
        return cursor.rowcount == 1

    def archive_cas(self, memory_id: str, at: str, expected_revision: int) -> bool:
        cursor = self.conn.execute(
            "UPDATE memories SET revision = revision + 1, archived_at = ?, updated_at = ?"
            " WHERE id = ? AND revision = ?",
            (at, at, memory_id, expected_revision),
        )
        return cursor.rowcount == 1

    def delete_cas(self, memory_id: str, expected_revision: int) -> bool:
        cursor = self.conn.execute(
            "DELETE FROM memories WHERE id = ? AND revision = ?", (memory_id, expected_revision)
        )
        return cursor.rowcount == 1

    def index(self, memory: Memory, *, new: bool = False) -> None:
        """Replace the memory's FTS row (none while archived); `new`: it has none yet.

        `memories_fts.id` is not indexed, so finding a row by id scans the whole table. The FTS
        row is therefore written at the rowid of its `memories` row, where it is found directly
        later; a row placed elsewhere (by another writer, or before a VACUUM renumbered the
        rowids) is found by the scan once and moved (MEM-5).
        """
        found = self.conn.execute(
            "SELECT rowid FROM memories WHERE id = ?", (memory.id,)
        ).fetchone()
        rowid = None if found is None else int(found[0])
        if not new:
            self._unindex(memory.id, rowid)
        if memory.archived_at is not None:
            return
        values = (memory.id, memory.scope, memory.content, " ".join(memory.tags))
        taken = (
            rowid is None
            or self.conn.execute("SELECT 1 FROM memories_fts WHERE rowid = ?", (rowid,)).fetchone()
        )
        if taken:
            self.conn.execute(
                "INSERT INTO memories_fts (id, scope, content, tags) VALUES (?, ?, ?, ?)", values
            )
        else:
            self.conn.execute(
                "INSERT INTO memories_fts (rowid, id, scope, content, tags) VALUES (?, ?, ?, ?, ?)",
                (rowid, *values),
            )

    def _unindex(self, memory_id: str, rowid: int | None) -> None:
        if rowid is not None:
            cursor = self.conn.execute(
                "DELETE FROM memories_fts WHERE rowid = ? AND id = ?", (rowid, memory_id)
            )
            if cursor.rowcount == 1:
                return
        self.conn.execute("DELETE FROM memories_fts WHERE id = ?", (memory_id,))

    def unindex(self, memory_id: str) -> None:
        """Drop the memory's FTS row (call while its `memories` row still exists)."""
        found = self.conn.execute(
            "SELECT rowid FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
        self._unindex(memory_id, None if found is None else int(found[0]))

    def list_memories(
        self,
        *,
        scope: str | None = None,
        tags: Sequence[str] = (),
        include_archived: bool = False,
        review_due_at: str | None = None,
        limit: int | None = None,
        after: tuple[str, str, str] | None = None,
    ) -> list[Memory]:
        """Memories newest first (`updated_at`, `created_at`, `id` descending); `after` is an
        exclusive `(updated_at, created_at, id)` cursor."""
        where: list[str] = []
        args: list[Any] = []
        if scope is not None:
            where.append("scope = ?")
            args.append(scope)
        if not include_archived:
            where.append("archived_at IS NULL")
        if review_due_at is not None:
            where.append(
                "((review_after IS NOT NULL AND review_after <= ?) OR"
                " (expires_at IS NOT NULL AND expires_at <= ?))"
            )
            args += [review_due_at, review_due_at]
        for tag in tags:
            where.append("EXISTS (SELECT 1 FROM json_each(memories.tags) WHERE value = ?)")
            args.append(tag)
        if after is not None:
            where.append(
                "(updated_at < ? OR (updated_at = ? AND created_at < ?) OR"
                " (updated_at = ? AND created_at = ? AND id < ?))"
            )
            args += [after[0], after[0], after[1], after[0], after[1], after[2]]
        sql = f"SELECT {COLUMNS} FROM memories"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_at DESC, created_at DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [memory_from_row(row) for row in self.conn.execute(sql, args)]

    # -- events ----------------------------------------------------------------------------

    def append(self, event: Event) -> None:
        self.conn.execute(
            f"INSERT INTO memory_events ({EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            (
                event.id,
                event.memory_id,
                event.event_type,
                event.actor,
                js_json(event.payload),
                event.created_at,
            ),
        )

    def history(
        self, memory_id: str, limit: int | None = None, after: tuple[str, str] | None = None
    ) -> list[Event]:
        sql = f"SELECT {EVENT_COLUMNS} FROM memory_events WHERE memory_id = ?"
        args: list[Any] = [memory_id]
        if after is not None:
            sql += " AND (created_at > ? OR (created_at = ? AND id > ?))"
            args += [after[0], after[0], after[1]]
        sql += " ORDER BY created_at ASC, id ASC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [event_from_row(row) for row in self.conn.execute(sql, args)]

    def audit(
        self,
        *,
        memory_id: str | None,
        event_types: Sequence[str],
        actor: str | None,
        scope: str | None,
        since: str | None,
        until: str | None,
        limit: int,
    ) -> list[Event]:
        """Events matching every filter given, newest first (checked by `reads.audit`)."""
        where: list[str] = []
        args: list[Any] = []
        if memory_id is not None:
            where.append("e.memory_id = ?")
            args.append(memory_id)
        if event_types:
            where.append(f"e.event_type IN ({','.join('?' * len(event_types))})")
            args += list(event_types)
        if actor is not None:
            where.append("e.actor = ?")
            args.append(actor)
        if scope is not None:
            # An import's originalScope comes from the document: only the store's own rehome
            # event may select by a historical scope.
            where.append(
                "(m.scope = ? OR json_extract(e.payload, '$.scope') = ? OR"
                " (e.event_type = 'memory.scope.rehomed' AND"
                " json_extract(e.payload, '$.originalScope') = ?))"
            )
            args += [scope, scope, scope]
        if since is not None:
            where.append("e.created_at >= ?")
            args.append(since)
        if until is not None:
            where.append("e.created_at <= ?")
            args.append(until)
        sql = (
            "SELECT e.id, e.memory_id, e.event_type, e.actor, e.payload, e.created_at"
            " FROM memory_events e LEFT JOIN memories m ON m.id = e.memory_id"
        )
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY e.created_at DESC, e.id DESC LIMIT ?"
        args.append(limit)
        return [event_from_row(row) for row in self.conn.execute(sql, args)]

    # -- relations -------------------------------------------------------------------------

    def insert_relation(self, relation: Relation) -> bool:
        cursor = self.conn.execute(
            f"INSERT OR IGNORE INTO memory_relations ({RELATION_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                relation.id,
                relation.source_memory_id,
                relation.target_memory_id,
                relation.relation,
                relation.reason,
                relation.created_at,
            ),
        )
        return cursor.rowcount == 1

    def find_relation(self, relation_id: str) -> Relation | None:
        row = self.conn.execute(
            f"SELECT {RELATION_COLUMNS} FROM memory_relations WHERE id = ?", (relation_id,)
        ).fetchone()
        return None if row is None else relation_from_row(row)

    def delete_relation(self, relation_id: str) -> bool:
        cursor = self.conn.execute("DELETE FROM memory_relations WHERE id = ?", (relation_id,))
        return cursor.rowcount == 1

    def relations_of(self, memory_id: str, include_reverse: bool = True) -> list[Relation]:
        sql = f"SELECT {RELATION_COLUMNS} FROM memory_relations WHERE source_memory_id = ?"
        args = [memory_id]
        if include_reverse:
            sql += " OR target_memory_id = ?"
            args.append(memory_id)
        sql += " ORDER BY created_at DESC, id DESC"
        return [relation_from_row(row) for row in self.conn.execute(sql, args)]

    def relations_among(self, ids: Sequence[str], include_reverse: bool = True) -> list[Relation]:
        """Relations touching any of `ids`, oldest first."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        marks = ",".join("?" * len(unique))
        sql = f"SELECT {RELATION_COLUMNS} FROM memory_relations WHERE source_memory_id IN ({marks})"
        args = list(unique)
        if include_reverse:
            sql += f" OR target_memory_id IN ({marks})"
            args += unique
        sql += " ORDER BY created_at ASC, id ASC"
        return [relation_from_row(row) for row in self.conn.execute(sql, args)]
