"""A small double of Durable Object storage as Python Workers see it, on real SQLite.

Mirrored API points (Cloudflare `SqlStorage` / `DurableObjectStorage`, through the Workers SDK
binding wrapper; each behaviour below was checked in workerd through Miniflare):
- `storage.sql.exec(sql, *bindings)` returns a cursor: `toArray()` (rows as dict-like objects
  with attribute access, the SDK's `JsDict`), `one()` (exactly one row, else "Expected exactly
  one result from SQL query, but got no results." / "... multiple results."), `raw()` (an
  iterator of value lists that also has `toArray()`), iteration, `columnNames`, `rowsRead`,
  `rowsWritten`; `storage.sql.databaseSize`.
- BLOBs come back as a JS `ArrayBuffer`, here `JsBuffer` (`to_bytes()`, `to_py()`); bindings
  reject `tuple` and `bytearray` like the SDK's `python_to_rpc`.
- Bindings are what workerd's `sql.exec` converts (`null`, a number, a string, an
  `ArrayBuffer` or typed array): Pyodide hands an integer whose magnitude is at least
  `Number.MAX_SAFE_INTEGER` (2^53 - 1) over as a BigInt (checked in Pyodide 314), which
  workerd refuses ("TypeError: Cannot convert a BigInt value to a number"); so does this
  double.
- `storage.transactionSync(fn)` commits when `fn` returns, rolls back and re-raises when it
  throws, nests, and (SDK gotcha) fails with `AttributeError` if `fn` returns a cursor.
- Refused like workerd: `BEGIN`, `COMMIT`, `END`, `ROLLBACK`, `SAVEPOINT`, `RELEASE` ("please
  use ... transactionSync()"); `PRAGMA user_version` and `PRAGMA journal_mode` ("not
  authorized: SQLITE_AUTH"); the function `sqlite_version()` ("not authorized to use
  function"); any table or index whose name starts with `_cf_` (workerd's
  `SqlStorage::isAllowedName` reserves the prefix; "not authorized"); a string, BLOB or row
  over 2 MB (Cloudflare's limit for SQLite-backed objects; SQLITE_TOOBIG). Foreign keys are
  on.
Errors surface as `JsException`, as JS errors do in Pyodide, never as `sqlite3` errors.
Not mirrored: several statements in one `exec` (workerd runs them; this double refuses).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

_TX_RE = re.compile(r"^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b", re.IGNORECASE)
_TX_MESSAGE = (
    "To execute a transaction, please use the state.storage.transaction() or "
    "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT "
    "statements."
)
_DENIED_PRAGMAS = frozenset({"user_version", "journal_mode"})
_RESERVED_PREFIX = "_cf_"
MAX_SAFE_INTEGER = 2**53 - 1  # JavaScript's Number.MAX_SAFE_INTEGER
_BIGINT_MESSAGE = "TypeError: Cannot convert a BigInt value to a number"
MAX_VALUE_BYTES = 2_000_000  # "Maximum string, BLOB or table row size: 2 MB"
# Authorizer actions whose first argument names a table or an index (the second names the
# table for index actions).
_NAMED = frozenset(
    {
        sqlite3.SQLITE_CREATE_TABLE,
        sqlite3.SQLITE_CREATE_TEMP_TABLE,
        sqlite3.SQLITE_DROP_TABLE,
        sqlite3.SQLITE_DROP_TEMP_TABLE,
        sqlite3.SQLITE_CREATE_INDEX,
        sqlite3.SQLITE_DROP_INDEX,
        sqlite3.SQLITE_INSERT,
        sqlite3.SQLITE_UPDATE,
        sqlite3.SQLITE_DELETE,
        sqlite3.SQLITE_READ,
        sqlite3.SQLITE_ALTER_TABLE,
    }
)


class JsException(Exception):
    """What a JavaScript error thrown by the runtime looks like from Python."""


class JsBuffer:
    """A JS ArrayBuffer as Pyodide hands it over."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def to_bytes(self) -> bytes:
        return self._data

    def to_py(self) -> memoryview:
        return memoryview(self._data)


class JsDict(dict[str, Any]):
    """The SDK's row type: a dict with attribute access."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class _Raw:
    def __init__(self, rows: list[list[Any]]) -> None:
        self._rows = iter(rows)

    def __iter__(self) -> Iterator[list[Any]]:
        return self._rows

    def __next__(self) -> list[Any]:
        return next(self._rows)

    def toArray(self) -> list[list[Any]]:
        return list(self._rows)


class SqlCursor:
    """The result of one `exec`; like workerd's cursor, its rows can be consumed once."""

    def __init__(self, columns: list[str], rows: list[list[Any]], written: int) -> None:
        self.columnNames = columns
        self.rowsRead = len(rows)  # approximation: rows returned, not rows scanned
        self.rowsWritten = written
        self._rows = iter(rows)

    def raw(self) -> _Raw:
        return _Raw(list(self._rows))

    def toArray(self) -> list[JsDict]:
        return [JsDict(zip(self.columnNames, row, strict=True)) for row in self._rows]

    def one(self) -> JsDict:
        rows = self.toArray()
        if len(rows) != 1:
            got = "no results" if not rows else "multiple results"
            raise JsException(f"Expected exactly one result from SQL query, but got {got}.")
        return rows[0]

    def __iter__(self) -> Iterator[JsDict]:
        return iter(self.toArray())


class SqlStorage:
    """`ctx.storage.sql`."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def exec(self, query: str, *bindings: Any) -> SqlCursor:
        if _TX_RE.match(query):
            raise JsException(_TX_MESSAGE)
        for value in bindings:
            if isinstance(value, (tuple, bytearray)):
                raise TypeError(f"{type(value)} cannot be sent over RPC.")
            if isinstance(value, int) and not -MAX_SAFE_INTEGER < value < MAX_SAFE_INTEGER:
                raise JsException(_BIGINT_MESSAGE)
        return self._run(query, bindings)

    def _run(self, query: str, bindings: tuple[Any, ...]) -> SqlCursor:
        before = self._conn.total_changes
        try:
            cur = self._conn.execute(query, bindings)
            rows = [[JsBuffer(v) if isinstance(v, bytes) else v for v in r] for r in cur]
        except sqlite3.Error as exc:
            code = getattr(exc, "sqlite_errorname", "SQLITE_ERROR")
            raise JsException(f"Error: {exc}: {code}") from None
        columns = [d[0] for d in cur.description or ()]
        return SqlCursor(columns, rows, self._conn.total_changes - before)

    @property
    def databaseSize(self) -> int:
        (pages,) = self._conn.execute("PRAGMA page_count").fetchone()
        (size,) = self._conn.execute("PRAGMA page_size").fetchone()
        return int(pages) * int(size)


class DoStorage:
    """`ctx.storage` of a SQLite-backed Durable Object."""

    def __init__(self, path: str = ":memory:") -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA foreign_keys = ON")
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self._conn.set_authorizer(self._authorize)
        self._depth = 0
        self.sql = SqlStorage(self._conn)

    @staticmethod
    def _authorize(action: int, arg1: str | None, arg2: str | None, *_: str | None) -> int:
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _DENIED_PRAGMAS:
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() == "sqlite_version":
            return sqlite3.SQLITE_DENY
        if action in _NAMED and any(
            (name or "").startswith(_RESERVED_PREFIX) for name in (arg1, arg2)
        ):
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def transactionSync(self, fn: Callable[[], Any]) -> Any:
        name = f"tx{self._depth}"
        self._conn.execute(f"SAVEPOINT {name}")
        self._depth += 1
        try:
            result = fn()
            if isinstance(result, SqlCursor):  # what the SDK does with a returned cursor
                raise AttributeError("'function' object has no attribute 'name'")
        except BaseException:
            self._conn.execute(f"ROLLBACK TO {name}")
            self._conn.execute(f"RELEASE {name}")
            raise
        finally:
            self._depth -= 1
        self._conn.execute(f"RELEASE {name}")
        return result

    def close(self) -> None:
        """Not part of the API: lets tests release the connection."""
        self._conn.close()
