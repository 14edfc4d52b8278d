"""`SqliteStore`: the canonical store on SQLite, over any `SqlExecutor`.

The same SQL serves the embedded file (stdlib `sqlite3`) and a project's Durable Object
(`ctx.storage.sql`); only the executor differs. The row mapping it shares with the PostgreSQL
store is `aidememo.stores.sql_common.rows`, search is `aidememo.stores.sqlite.search`; this
module adds a command's begin and commit, and the store itself. A command is one statement
before its commit (`begin_command`'s four point reads in one SELECT), then the operation's own
reads, then five or six statements in `commit_mutation`, plus a fact's index entry (five, or
eight when it replaces one); a generic put or delete (`POST /v1/commands`) is six statements between
`BEGIN` and `COMMIT`.

Writers are serialized by the executor (`BEGIN IMMEDIATE`, or a Durable Object's single
thread), so `begin_command` reads without a lock; the head still moves by compare-and-swap, so a
second writer that slipped past would fail with `storage_failure` instead of forking history.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.model import (
    CommandCall,
    CommandStart,
    Mutation,
    RawOutcome,
    RawWrite,
    Scope,
    SearchPage,
)
from aidememo.ports import CAP_WRITE_BATCH, ReadTx, WriteBatches, WriteTx
from aidememo.stores import raw_write
from aidememo.stores.guard import not_awaitable
from aidememo.stores.sql_common.artifact_rows import ArtifactRows
from aidememo.stores.sql_common.rows import SqlReadRows, SqlWriteRows, command_start
from aidememo.stores.sql_common.semantic_rows import SemanticRows
from aidememo.stores.sqlite import sql as q
from aidememo.stores.sqlite.archive import ArchiveReads, ArchiveWrites
from aidememo.stores.sqlite.executor import Outcome, SqlExecutor
from aidememo.stores.sqlite.schema import migrate, read_version
from aidememo.stores.sqlite.search import index_fact, search

T = TypeVar("T")


class SqliteReadTx(SemanticRows, ArtifactRows[SqlExecutor], ArchiveReads, SqlReadRows[SqlExecutor]):
    """`ReadTx` over an executor: the shared row mapping plus search."""

    __slots__ = ()
    _d = q.DIALECT
    _resources_at = (q.RESOURCES_AT, q.RESOURCES_AT_AFTER)
    _session_facts = q.SESSION_FACTS

    def search(
        self, scope: Scope, terms: list[str], source_id: str | None, limit: int
    ) -> SearchPage:
        """Facts matching any term, best first, then by fact id (SRCH-3..5)."""
        return search(self._x, scope, terms, source_id, limit)


class SqliteWriteTx(ArchiveWrites, SqlWriteRows[SqlExecutor], SqliteReadTx):
    """`WriteTx`: the reads plus the writes of one command or one provisioning step."""

    __slots__ = ()

    def begin_command(self, call: CommandCall) -> CommandStart:
        """The four point reads of CMD-5 in one statement (`q.BEGIN_COMMAND`): what
        `get_project`, `get_membership`, `get_receipt` and `get_resource` would return;
        with `call.token_sha256`, the binding's check of AUTH-7 in the same statement."""
        t, p = call.scope.tenant_id, call.scope.project_id
        actor_id, kind, rid = call.actor_id, call.resource.kind, call.resource.id
        params = (t, p, t, p, actor_id, t, p, call.command_id, t, p, kind, rid)
        row: Any
        if call.token_sha256 is None:
            row = self._x.execute(q.BEGIN_COMMAND, params)[0]
        else:
            token = (bytes(call.token_sha256), t, actor_id)
            row = self._x.execute(q.BEGIN_COMMAND_TOKEN, (*token, *params))[0]
            if row[13] is None:
                raise fail(ErrorCode.AUTHENTICATION_FAILED, "unknown or revoked token")
        return command_start(call, row, row[11], row[12])

    def commit_mutation(self, mutation: Mutation) -> None:
        """Move the head by compare-and-swap, then write resource, change, audit, receipt and
        the optional index rows (CMD-6); `storage_failure` if the head was not `seq - 1`."""
        r = mutation.receipt
        t, p, seq = r.tenant_id, r.project_id, r.project_seq
        x, d = self._x, self._d
        if x.execute_count(q.ADVANCE_HEAD, (seq, t, p, seq - 1)) != 1:
            raise fail(ErrorCode.STORAGE_FAILURE, "project head moved during the command")
        kind, rid, rev, actor, at = (
            r.resource.kind,
            r.resource.id,
            r.revision,
            r.actor_id,
            (r.committed_at_ms),
        )
        body = mutation.body
        x.execute(d.UPSERT_RESOURCE, (t, p, kind, rid, rev, body))
        x.execute(
            d.INSERT_CHANGE,
            (t, p, seq, mutation.project_epoch, kind, rid, mutation.op.value, rev, actor, at, body),
        )
        x.execute(
            d.INSERT_AUDIT, (t, p, seq, r.command_id, mutation.operation, kind, rid, actor, at)
        )
        x.execute(
            d.INSERT_RECEIPT, (t, p, r.command_id, r.fingerprint, actor, seq, kind, rid, rev, at)
        )
        h = mutation.handoff
        if h is not None:
            x.execute(
                d.UPSERT_HANDOFF,
                (
                    t,
                    p,
                    h.handoff_id,
                    h.from_actor,
                    h.to_actor,
                    h.source_id,
                    h.status,
                    h.revision,
                    h.updated_seq,
                ),
            )
        if mutation.search is not None:
            index_fact(x, t, p, mutation.search)


def _conforms(executor: SqlExecutor) -> tuple[ReadTx, WriteTx]:
    """Never called: lets mypy check that the transaction classes implement the ports."""
    return SqliteReadTx(executor), SqliteWriteTx(executor)


class SqliteStore:
    """The canonical store on one SQLite database; implements `aidememo.ports.Store`."""

    def __init__(self, executor: SqlExecutor, mode: str = "single_node") -> None:
        self.executor = executor
        self.mode = mode
        self.capabilities: frozenset[str] = executor.capabilities
        self._read_tx = SqliteReadTx(executor)
        self._write_tx = SqliteWriteTx(executor)
        migrate(executor)

    @classmethod
    def open_file(
        cls, path: str | os.PathLike[str], synchronous: str = "FULL", mode: str = "single_node"
    ) -> SqliteStore:
        """Open (or create, 0600) a database file with the stdlib `sqlite3` executor."""
        from aidememo.stores.sqlite.sqlite3_executor import Sqlite3Executor

        executor = Sqlite3Executor(path, synchronous=synchronous)
        return cls._opened(executor, mode)

    @classmethod
    def open_memory(cls) -> SqliteStore:
        """A private in-memory database: fast, gone on close (tests, throwaway stores)."""
        from aidememo.stores.sqlite.sqlite3_executor import MEMORY, Sqlite3Executor

        return cls._opened(Sqlite3Executor(MEMORY), "single_node")

    @classmethod
    def on_durable_object(
        cls, storage: Any, capabilities: frozenset[str] = frozenset()
    ) -> SqliteStore:
        """The store of one project's Durable Object, over `ctx.storage`."""
        from aidememo.stores.sqlite.do_executor import DoSqlExecutor

        return cls(DoSqlExecutor(storage, capabilities), mode="edge")

    @classmethod
    def _opened(cls, executor: SqlExecutor, mode: str) -> SqliteStore:
        try:
            return cls(executor, mode)
        except BaseException:
            executor.close()  # a refused schema must not leak the connection
            raise

    def transaction(self, fn: Callable[[WriteTx], T]) -> T:
        """Run `fn` in one write transaction; commit if it returns, roll back if it raises."""
        tx = self._write_tx

        def run() -> T:
            return not_awaitable(fn(tx))

        return self.executor.transaction(run)

    def execute_raw(self, write: RawWrite) -> RawOutcome:
        """`Store.execute_raw`: the guarded write in a transaction of this store's."""
        return raw_write.execute_raw(self, write)

    def read(self, fn: Callable[[ReadTx], T]) -> T:
        """Run `fn` against one consistent read-only view."""
        tx = self._read_tx
        return self.executor.read(lambda: not_awaitable(fn(tx)))

    def batch(self, calls: Sequence[Callable[[], T]]) -> list[Outcome[T]]:
        """`WriteBatches.batch`, on an executor declaring `CAP_WRITE_BATCH` (the stdlib
        `sqlite3` one); elsewhere `storage_failure`."""
        return self._batches().batch(calls)

    def after_commit(self, fn: Callable[[], None]) -> None:
        """`Store.after_commit`: after the open write batch's commit, else at once."""
        if CAP_WRITE_BATCH in self.capabilities:
            self._batches().after_commit(fn)
        else:
            fn()

    def _batches(self) -> WriteBatches:
        if CAP_WRITE_BATCH not in self.capabilities:
            raise fail(ErrorCode.STORAGE_FAILURE, "this executor runs no write batches")
        return cast(WriteBatches, self.executor)

    def schema_version(self) -> int:
        """The version recorded in `aidememo_schema`."""
        executor = self.executor
        return executor.read(lambda: read_version(executor))

    def free_bytes(self) -> int | None:
        """Free bytes on the database file's file system, for the readiness probe (READY-1);
        None where the executor has no file (`:memory:`, a Durable Object)."""
        probe: Callable[[], int | None] | None = getattr(self.executor, "free_bytes", None)
        return None if probe is None else probe()

    def close(self) -> None:
        """Release the connection; the store is unusable afterwards."""
        self.executor.close()
