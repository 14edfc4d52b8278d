"""`SqlExecutor` over a Durable Object's SQLite storage, as Python Workers see it.

The API used (Cloudflare's `SqlStorage`):
- `storage.sql.exec(sql, *bindings)` returns a cursor; `cursor.raw().toArray()` gives every row
  as an array of column values in column order (checked in workerd through Miniflare:
  duplicate column names survive, which `toArray()` of row objects would collapse).
- workerd converts each binding to a number, a string, `null` or bytes (an `ArrayBuffer` or
  typed array); any other object is converted to its string. So bytes are handed over as a
  `Uint8Array` made here (`to_js`): a Python `bytes` crossing as it is arrives as a proxy whose
  string is `b'...'`, stored as TEXT (a STRICT BLOB column then refuses it with
  SQLITE_CONSTRAINT_DATATYPE). An integer beyond 2^53 - 1 arrives as a BigInt, which workerd
  refuses; the stores clamp every cursor they bind (`aidememo.domain.limits.seq_bound`).
- BLOBs come back as a JS `ArrayBuffer`; under Pyodide that arrives as a `memoryview`, a
  `JsProxy` with `to_bytes()`/`to_py()`, or `bytes`, and is always handed on as `bytes`.
- `storage.transactionSync(fn)` runs `fn` atomically and rolls back when it throws. The
  callback must return a plain value (the SDK's wrapper fails on a returned cursor), so ours
  always returns `None` and keeps the result on the Python side.
- `BEGIN`, `COMMIT`, `ROLLBACK`, `SAVEPOINT` and `RELEASE` are refused by workerd, so none is
  ever sent (`tests/pyodide/storage_driver.py` probes that refusal).

Under Pyodide the executor talks to the JS `DurableObjectStorage` itself, unwrapping the Workers
SDK's binding wrapper when there is one (`DurableObjectContext.storage`): the bindings it
hands over and the rows it reads back are then the same whichever SDK copy made the context,
and no statement pays the wrapper's generic deep conversion of arguments and results.

Reads run outside `transactionSync`: a Durable Object is single-threaded and the store's
reads are synchronous, so no other request can interleave between the statements of one
`read(fn)`; the snapshot is consistent without the cost of a transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.stores.sqlite.executor import Row, SqlValue

try:  # Pyodide only
    from pyodide.ffi import JsProxy as _JsProxy
    from pyodide.ffi import jsnull as _JSNULL
    from pyodide.ffi import to_js as _to_js
except ImportError:  # CPython: the storage is the test double, bindings go as they are
    _JsProxy = None
    _JSNULL = None
    _to_js = None

T = TypeVar("T")

_PLAIN = (int, float, str, bytes)
_AS_IS = frozenset({int, float, str})  # bindings that cross to JavaScript as they are
_PLAIN_TYPES = frozenset({int, float, str, bytes, type(None)})  # column values kept as they are


def _storage_failure(what: str, exc: BaseException) -> AidememoError:
    return fail(
        ErrorCode.STORAGE_FAILURE,
        f"durable object sql {what} failed: {type(exc).__name__}: {exc}",
    )


def to_sql_value(value: Any) -> SqlValue:
    """Turn one column value from the JS side into int, float, str, bytes or None."""
    if value is None or isinstance(value, _PLAIN):
        return value
    if value is _JSNULL:
        return None
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    to_bytes = getattr(value, "to_bytes", None)
    if callable(to_bytes):  # pyodide JsBuffer (ArrayBuffer, Uint8Array)
        return bytes(to_bytes())
    to_py = getattr(value, "to_py", None)
    if callable(to_py):
        return to_sql_value(to_py())
    raise fail(ErrorCode.STORAGE_FAILURE, f"unexpected SQL value type {type(value).__name__}")


def _rows(rows: Iterable[Sequence[Any]]) -> list[Row]:
    """Each row as a tuple of int, float, str, bytes or None. A row of such values only is
    taken as it is (checked without a Python step per value); in another, the columns that
    needed converting in the row before are converted first (a result's BLOB and NULL
    columns are usually the same from row to row), then any other that still needs it."""
    out: list[Row] = []
    odd: list[int] = []
    plain = _PLAIN_TYPES.issuperset
    for values in rows:
        if plain(map(type, values)):
            out.append(tuple(values))
            continue
        converted = list(values)
        for i in odd:
            converted[i] = to_sql_value(converted[i])
        if not plain(map(type, converted)):
            odd = [i for i, v in enumerate(converted) if type(v) not in _PLAIN_TYPES]
            for i in odd:
                converted[i] = to_sql_value(converted[i])
        out.append(tuple(converted))
    return out


def _js_binding(value: SqlValue) -> Any:
    """A binding as workerd's `sql.exec` takes it: bytes as a `Uint8Array`, None as null."""
    if isinstance(value, bytes):
        return _to_js(value)
    if value is None:
        return _JSNULL
    return value


def _js_storage(storage: Any) -> Any:
    """The JS `DurableObjectStorage` under Pyodide (unwrapping the SDK's `_BindingWrapper`),
    else None (the CPython test double)."""
    if _JsProxy is None:
        return None
    raw = getattr(storage, "_binding", storage)
    return raw if isinstance(raw, _JsProxy) else None


class DoSqlExecutor:
    """Runs the store's SQL on `ctx.storage` of a Durable Object (or the test double)."""

    def __init__(self, storage: Any, capabilities: frozenset[str] = frozenset()) -> None:
        js = _js_storage(storage)
        self._storage = storage if js is None else js
        self._exec = self._storage.sql.exec
        self._js = js is not None
        self.capabilities = capabilities
        self._in_tx = False

    def execute(self, sql: str, params: Sequence[SqlValue] = ()) -> list[Row]:
        """Run one statement; the cursor is drained at once so it never outlives the call."""
        try:
            if self._js:
                found = self._exec(
                    sql, *[v if type(v) in _AS_IS else _js_binding(v) for v in params]
                )
                rows = found.raw().toArray().to_py()
            else:
                rows = self._exec(sql, *params).raw().toArray()
        except AidememoError:
            raise
        except Exception as exc:
            raise _storage_failure("statement", exc) from exc
        return _rows(rows)

    def execute_alone(self, sql: str, params: Sequence[SqlValue] = ()) -> list[Row]:
        """`execute`: a Durable Object's read runs alone anyway (one call at a time)."""
        return self.execute(sql, params)

    def execute_count(self, sql: str, params: Sequence[SqlValue] = ()) -> int:
        """Rows changed by one INSERT, UPDATE or DELETE, counted with `RETURNING 1` (a
        cursor's `rowsWritten` would count index entries as well)."""
        return len(self.execute(sql + " RETURNING 1", params))

    def execute_script(self, statements: Sequence[str]) -> None:
        """Run parameterless statements in order."""
        for statement in statements:
            self.execute(statement)

    def transaction(self, fn: Callable[[], T]) -> T:
        """Run `fn` inside `transactionSync`; its own exception propagates unchanged."""
        if self._in_tx:
            return fn()
        results: list[T] = []
        errors: list[BaseException] = []

        def run() -> None:
            # Keep the result and the exception in Python: a value crossing into JS and back
            # could be converted, and an exception could come back wrapped.
            try:
                results.append(fn())
            except BaseException as exc:
                errors.append(exc)
                raise

        self._in_tx = True
        try:
            self._storage.transactionSync(run)
        except BaseException as exc:
            if not errors:  # the commit itself failed
                raise _storage_failure("transaction", exc) from exc
        finally:
            self._in_tx = False
        if errors:
            # Raised outside the `except` block, so its own cause and context stay intact.
            raise errors[0]
        return results[0]

    def read(self, fn: Callable[[], T]) -> T:
        """Run `fn` directly: a Durable Object runs one synchronous call at a time."""
        return fn()

    def close(self) -> None:
        """Nothing to release: the runtime owns the storage."""
