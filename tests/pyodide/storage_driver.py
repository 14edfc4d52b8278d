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


def blob_round_trip(make: Callable[[], Any]) -> Callable[[], str]:
    """Bytes bound by the executor are a BLOB, on the storage `make` returns."""

    def probe() -> str:
        executor = DoSqlExecutor(make())
        executor.execute("CREATE TABLE b (k TEXT PRIMARY KEY, v BLOB) STRICT")
        executor.execute("INSERT INTO b VALUES (?, ?)", ("k", b"\x00\xffbody"))
        rows = executor.execute(
            "SELECT v, length(v), typeof(v) FROM b WHERE v = ?", (b"\x00\xffbody",)
        )
        assert rows == [(b"\x00\xffbody", 6, "blob")], rows
        return "bytes in, a BLOB stored, bytes out"

    return probe


def raw_storage() -> Any:
    """The JS `DurableObjectStorage` as a runtime whose SDK copy does not wrap it hands it over."""
    return edge_harness.new_state().storage


def unconverted_bytes_are_text() -> str:
    """What workerd does with a Python `bytes` handed over without conversion (the runtime's
    own SDK copy did so with the token digest): the proxy's string, refused by a BLOB column."""
    sql = raw_storage().sql
    sql.exec("CREATE TABLE b (v BLOB) STRICT")
    try:
        sql.exec("INSERT INTO b VALUES (?)", b"\x01\x02")
    except Exception as exc:
        assert "SQLITE_CONSTRAINT_DATATYPE" in str(exc) or "cannot store TEXT" in str(exc), exc
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError("bytes crossed unconverted and were stored")


def bigint_refused(make: Callable[[], Any]) -> Callable[[], str]:
    """An integer of magnitude 2^53 - 1 or more reaches `sql.exec` as a BigInt (Pyodide's
    conversion): refused; 2^53 - 2 is a number."""

    def probe() -> str:
        sql = make().sql
        assert sql.exec("SELECT ?", 2**53 - 2).raw().toArray()[0][0] == 2**53 - 2
        for value in (2**53 - 1, -(2**53 - 1), 2**53, 2**63 - 1):
            try:
                sql.exec("SELECT ?", value)
            except Exception as exc:
                assert "BigInt" in str(exc), exc
                continue
            raise AssertionError(f"{value} was bound")
        return "2^53 - 1 and beyond refused: Cannot convert a BigInt value to a number"

    return probe


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
    "blob_round_trip": blob_round_trip(storage),
    "blob_round_trip_raw_storage": blob_round_trip(raw_storage),
    "unconverted_bytes_are_text": unconverted_bytes_are_text,
    "bigint_refused": bigint_refused(storage),
    "bigint_refused_raw_storage": bigint_refused(raw_storage),
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
