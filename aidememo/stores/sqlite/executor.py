"""The seam between the SQLite-dialect store and whatever runs its SQL.

Two executors implement it: `Sqlite3Executor` (stdlib `sqlite3`, embedded and origin) and
`DoSqlExecutor` (a Durable Object's `ctx.storage.sql`, edge). The store writes its SQL once,
for both: one SQLite-dialect store, two executors.

The protocol is deliberately tiny because the hot path of one command is a handful of
statements: each `execute` returns every row at once as plain tuples in column order, so the
store never holds a cursor across a call (a Durable Object cursor must not outlive its
`transactionSync` callback either).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeAlias, TypeVar

T = TypeVar("T")

SqlValue: TypeAlias = int | float | str | bytes | None
"""What SQLite stores and returns; BLOBs are always `bytes` on the Python side."""

Row: TypeAlias = tuple[SqlValue, ...]

Outcome: TypeAlias = tuple[T | None, Exception | None]
"""One call of a write batch (`aidememo.ports.WriteBatches`): `(value, None)` or `(None, error)`."""


class SqlExecutor(Protocol):
    """Runs SQLite SQL on one database; every failure of the engine is `storage_failure`."""

    capabilities: frozenset[str]
    """Capability names from `aidememo.ports` (`reopen`, `two_connections`, ...)."""

    def execute(self, sql: str, params: Sequence[SqlValue] = ()) -> list[Row]:
        """Run one statement with `?` placeholders and return all its rows (maybe none)."""
        ...

    def execute_alone(self, sql: str, params: Sequence[SqlValue] = ()) -> list[Row]:
        """`execute` for a statement that may be a read view's only one: an executor may then
        skip the view's `BEGIN`/`COMMIT` (one statement is atomic on its own), and refuse any
        further statement in that view."""
        ...

    def execute_count(self, sql: str, params: Sequence[SqlValue] = ()) -> int:
        """Run one INSERT, UPDATE or DELETE (no RETURNING clause, no trailing `;`) and return
        how many rows it changed. `sqlite3` reads the count off the cursor, where a RETURNING
        clause would cost an ephemeral table; an executor without a count may append
        `RETURNING 1` and count the rows."""
        ...

    def execute_script(self, statements: Sequence[str]) -> None:
        """Run parameterless statements in order (schema DDL); call inside `transaction`."""
        ...

    def transaction(self, fn: Callable[[], T]) -> T:
        """Run `fn` in one write transaction, serialized with every other writer.

        Commits when `fn` returns and rolls back when it raises; the callback's exception
        propagates unchanged. A nested call joins the enclosing transaction.
        """
        ...

    def read(self, fn: Callable[[], T]) -> T:
        """Run `fn` against one consistent snapshot (no writes); nested calls join it."""
        ...

    def close(self) -> None:
        """Release the connection; the executor is unusable afterwards."""
        ...
