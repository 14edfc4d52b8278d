"""Runs inside Pyodide (via edge_runner.mjs, before edge_driver.py): Durable Object SQL as the edge
code sees it, through the real SDK's `DurableObjectContext(state).storage` wrapper, on the
harness's real SQLite.

Checks that the stand-in refuses and allows what workerd does (transaction statements and
`PRAGMA user_version` refused, STORE-6), that the
SDK behaves as the edge code assumes (the cursor-returning `transactionSync` gotcha, BLOBs,
rollback on a raised exception), and runs the conformance suite on the shared SQLite store over
this storage (`SqliteStore.on_durable_object`).

`main()` returns {"probes": {name: {"ok", "detail"}}, "conformance": [...], "error": str}.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import edge_harness
from workers.entrypoints import DurableObjectContext

from aidememo.stores.sqlite.do_executor import DoSqlExecutor


def storage() -> Any:
    """`ctx.storage` of a fresh object, wrapped by the SDK exactly as in a Durable Object."""
    return DurableObjectContext(edge_harness.new_state()).storage


def refused(sql: str, needle: str) -> Callable[[], str]:
    def probe() -> str:
        try:
            storage().sql.exec(sql)
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
            if needle not in text:
                raise AssertionError(f"refused without {needle!r}: {text}") from None
            return text
        raise AssertionError(f"{sql!r} was accepted")

    return probe


def allowed(*statements: str) -> Callable[[], Any]:
    def probe() -> Any:
        sql = storage().sql
        return [sql.exec(s).raw().toArray() for s in statements][-1]

    return probe


def blob_round_trip() -> str:
    executor = DoSqlExecutor(storage())
    executor.execute("CREATE TABLE b (k TEXT PRIMARY KEY, v BLOB) STRICT")
    executor.execute("INSERT INTO b VALUES (?, ?)", ("k", b"\x00\xffbody"))
    rows = executor.execute("SELECT v, length(v) FROM b")
    assert rows == [(b"\x00\xffbody", 6)], rows
    return "bytes in, bytes out"


def rollback_on_raise() -> str:
    st = storage()
    executor = DoSqlExecutor(st)
    executor.execute("CREATE TABLE t (x INTEGER)")

    def write_then_fail() -> None:
        executor.execute("INSERT INTO t VALUES (1)")
        raise ValueError("abort this transaction")

    try:
        executor.transaction(write_then_fail)
    except ValueError:
        pass
    else:
        raise AssertionError("the exception did not propagate")
    assert executor.execute("SELECT count(*) FROM t") == [(0,)]
    assert executor.transaction(lambda: 7) == 7
    return "rolled back; the callback's own exception came back unchanged"


def cursor_from_transaction_sync() -> str:
    st = storage()
    st.sql.exec("CREATE TABLE c (x)")
    try:
        st.transactionSync(lambda: st.sql.exec("SELECT 1"))
    except AttributeError as exc:
        return f"AttributeError: {exc}"
    raise AssertionError("returning a cursor from transactionSync did not fail")


def cursor_api() -> dict[str, Any]:
    sql = storage().sql
    cur = sql.exec("SELECT 1 AS a, 'x' AS b")
    one = sql.exec("SELECT 2 AS a").one()
    try:
        sql.exec("SELECT 1 WHERE 0").one()
    except Exception as exc:
        none = str(exc)
    else:
        raise AssertionError("one() of no rows did not fail")
    rows = sql.exec("SELECT 1 AS a UNION ALL SELECT 2").toArray()
    return {
        "columnNames": list(cur.columnNames),
        "one": one.a,
        "one_of_none": none,
        "toArray": [r.a for r in rows],
    }


PROBES: dict[str, Callable[[], Any]] = {
    "begin_refused": refused("BEGIN", "transactionSync()"),
    "commit_refused": refused("COMMIT", "transactionSync()"),
    "rollback_refused": refused("ROLLBACK", "transactionSync()"),
    "savepoint_refused": refused("SAVEPOINT s1", "transactionSync()"),
    "release_refused": refused("RELEASE s1", "transactionSync()"),
    "user_version_refused": refused("PRAGMA user_version", "SQLITE_AUTH"),
    "user_version_set_refused": refused("PRAGMA user_version = 3", "SQLITE_AUTH"),
    "journal_mode_refused": refused("PRAGMA journal_mode", "SQLITE_AUTH"),
    "sqlite_version_refused": refused("SELECT sqlite_version()", "not authorized"),
    "foreign_keys_on": allowed("PRAGMA foreign_keys"),
    "table_list_allowed": allowed("CREATE TABLE z (a)", "PRAGMA table_list"),
    "fts5_strict_returning": allowed(
        "CREATE TABLE s (id INTEGER PRIMARY KEY, t TEXT) STRICT",
        "CREATE VIRTUAL TABLE f USING fts5(body)",
        "INSERT INTO f (body) VALUES ('edge search works')",
        "INSERT INTO s (t) VALUES ('x') RETURNING id",
    ),
    "blob_round_trip": blob_round_trip,
    "rollback_on_raise": rollback_on_raise,
    "cursor_from_transaction_sync": cursor_from_transaction_sync,
    "cursor_api": cursor_api,
}


async def main() -> dict[str, Any]:
    probes: dict[str, dict[str, Any]] = {}
    for name, probe in PROBES.items():
        try:
            probes[name] = {"ok": True, "detail": probe()}
        except Exception:
            probes[name] = {"ok": False, "detail": traceback.format_exc()}
    conformance: list[dict[str, object]] = []
    error = ""
    try:
        from aidememo.conformance import run_all
        from aidememo.stores.sqlite.store import SqliteStore

        conformance = run_all(lambda: SqliteStore.on_durable_object(storage()))
    except Exception:
        error = traceback.format_exc()
    return {"probes": probes, "conformance": conformance, "error": error}
