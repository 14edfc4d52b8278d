"""The two SQLite executors: file safety, busy mapping, rollback, Durable Object rules."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.ports import (
    CAP_REOPEN,
    CAP_SECOND_PROCESS,
    CAP_TWO_CONNECTIONS,
    CAP_WRITE_BATCH,
    WriteTx,
)
from aidememo.stores.sqlite import SqliteStore
from aidememo.stores.sqlite.do_executor import DoSqlExecutor, to_sql_value
from aidememo.stores.sqlite.sqlite3_executor import Sqlite3Executor
from tests.doubles.do_storage import DoStorage, JsBuffer, JsException
from tests.stores._support import (
    KINDS,
    SCOPE,
    TENANT,
    commit_all,
    committer,
    mutation,
    open_store,
    provision,
)

ROOT = Path(__file__).resolve().parents[2]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_store7_sqlite_file_modes_0600(tmp_path: Path) -> None:
    old = os.umask(0o002)  # a permissive umask must not leak into the files
    try:
        path = tmp_path / "new_dir" / "canonical.sqlite"
        store = SqliteStore.open_file(path)
        commit_all_ok = store.transaction(lambda tx: tx.tenant_exists(TENANT))
        assert commit_all_ok is False
        for suffix in ("", "-wal", "-shm"):
            sidecar = Path(str(path) + suffix)
            assert sidecar.exists(), sidecar
            assert _mode(sidecar) == 0o600, (sidecar, oct(_mode(sidecar)))
        assert _mode(path.parent) == 0o700
        store.close()
    finally:
        os.umask(old)


def test_store7_sqlite_existing_file_tightened_to_0600(tmp_path: Path) -> None:
    path = tmp_path / "canonical.sqlite"
    path.touch(mode=0o644)
    os.chmod(path, 0o644)
    SqliteStore.open_file(path).close()
    assert _mode(path) == 0o600


def test_store7_sqlite_pragmas(tmp_path: Path) -> None:
    executor = Sqlite3Executor(tmp_path / "db.sqlite")
    try:
        assert executor.execute("PRAGMA journal_mode") == [("wal",)]
        assert executor.execute("PRAGMA synchronous") == [(2,)]  # FULL
        assert executor.execute("PRAGMA foreign_keys") == [(1,)]
        assert executor.execute("PRAGMA busy_timeout") == [(5000,)]
    finally:
        executor.close()
    normal = Sqlite3Executor(tmp_path / "db.sqlite", synchronous="normal")
    assert normal.execute("PRAGMA synchronous") == [(1,)]
    normal.close()
    with pytest.raises(ValueError):
        Sqlite3Executor(tmp_path / "db.sqlite", synchronous="sometimes")


def test_store3_store4_store7_capabilities_by_executor(tmp_path: Path) -> None:
    file_store = SqliteStore.open_file(tmp_path / "db.sqlite")
    memory_store = SqliteStore.open_memory()
    assert file_store.capabilities == {
        CAP_REOPEN,
        CAP_TWO_CONNECTIONS,
        CAP_SECOND_PROCESS,
        CAP_WRITE_BATCH,
    }
    assert memory_store.capabilities == {CAP_WRITE_BATCH}
    assert file_store.mode == memory_store.mode == "single_node"
    file_store.close()
    memory_store.close()
    storage = DoStorage()
    assert SqliteStore.on_durable_object(storage).mode == "edge"
    storage.close()


def test_store11_busy_maps_to_storage_failure(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    SqliteStore.open_file(path).close()
    store = SqliteStore(Sqlite3Executor(path, busy_timeout_ms=50))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(AidememoError) as info:
            store.transaction(lambda tx: tx.insert_tenant(TENANT, 1))
        assert info.value.code is ErrorCode.STORAGE_FAILURE
        assert not isinstance(info.value, sqlite3.Error)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.transaction(lambda tx: tx.insert_tenant(TENANT, 1))  # usable again afterwards
    assert store.read(lambda tx: tx.tenant_exists(TENANT))
    store.close()


def test_store11_constraint_violation_is_storage_failure(tmp_path: Path) -> None:
    for kind in KINDS:
        with open_store(kind, tmp_path / kind) as store:
            commit_all(store, [mutation(1, "r1")])
            # A second receipt for the same command id is a bug upstream, never a raw error.
            dup = mutation(2, "r2", command_id="cmd_1")
            with pytest.raises(AidememoError) as info:
                store.transaction(committer(dup))
            assert info.value.code is ErrorCode.STORAGE_FAILURE
            assert store.read(lambda tx: tx.get_project(SCOPE)).head_seq == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", KINDS)
def test_store1_rollback_on_callback_error(kind: str, tmp_path: Path) -> None:
    with open_store(kind, tmp_path) as store:
        raised = fail(ErrorCode.STALE_REVISION, "from the callback")

        def aidememo_error(tx: WriteTx) -> None:
            tx.commit_mutation(mutation(1, "r1"))
            tx.insert_tenant("tenant_ghost", 5)
            raise raised

        with pytest.raises(AidememoError) as info:
            store.transaction(aidememo_error)
        assert info.value is raised  # unchanged, not wrapped

        def other_error(tx: WriteTx) -> None:
            tx.insert_tenant("tenant_ghost", 5)
            raise KeyError("bug")

        with pytest.raises(KeyError):
            store.transaction(other_error)
        assert not store.read(lambda tx: tx.tenant_exists("tenant_ghost"))
        assert (
            store.read(lambda tx: tx.get_resource(SCOPE, mutation(1, "r1").receipt.resource))
            is None
        )
        assert store.read(lambda tx: tx.get_project(SCOPE)).head_seq == 0  # type: ignore[union-attr]
        commit_all(store, [mutation(1, "r1")])  # the head did not move: seq 1 is still next


@pytest.mark.parametrize("kind", KINDS)
def test_store1_nested_transaction_joins_outer(kind: str, tmp_path: Path) -> None:
    with open_store(kind, tmp_path) as store:

        def outer(tx: WriteTx) -> None:
            store.transaction(lambda inner: inner.insert_tenant("tenant_nested", 2))
            raise fail(ErrorCode.INVALID_COMMAND, "undo both")

        with pytest.raises(AidememoError):
            store.transaction(outer)
        assert not store.read(lambda tx: tx.tenant_exists("tenant_nested"))


@pytest.mark.parametrize("kind", KINDS)
def test_store2_async_callback_refused(kind: str, tmp_path: Path) -> None:
    with open_store(kind, tmp_path) as store:

        async def later(tx: WriteTx) -> None:
            tx.insert_tenant("tenant_async", 3)

        with pytest.raises(AidememoError) as info:
            store.transaction(later)  # type: ignore[unused-coroutine]
        assert info.value.code is ErrorCode.STORAGE_FAILURE


def test_store12_do_double_refuses_begin() -> None:
    storage = DoStorage()
    try:
        for statement in (
            "BEGIN",
            "begin immediate",
            " COMMIT",
            "ROLLBACK",
            "SAVEPOINT a",
            "RELEASE a",
        ):
            with pytest.raises(JsException, match=r"please use .*transactionSync\(\)"):
                storage.sql.exec(statement)
        for statement in ("PRAGMA user_version", "PRAGMA journal_mode", "PRAGMA user_version = 3"):
            with pytest.raises(JsException, match="SQLITE_AUTH"):
                storage.sql.exec(statement)
        with pytest.raises(JsException, match="not authorized"):
            storage.sql.exec("SELECT sqlite_version()")
        for statement in ("CREATE TABLE _cf_stage (a INTEGER)", "CREATE TABLE _cf_KV (k TEXT)"):
            with pytest.raises(JsException, match="not authorized"):
                storage.sql.exec(statement)  # workerd reserves the `_cf_` prefix
        assert storage.sql.exec("PRAGMA foreign_keys").raw().toArray() == [[1]]
        with pytest.raises(JsException, match="too big"):
            storage.sql.exec("SELECT ?", b"x" * 2_000_001)  # workerd's 2 MB value limit
        storage.sql.exec("CREATE TABLE t (a INTEGER) STRICT")
        assert storage.sql.databaseSize > 0
    finally:
        storage.close()


def test_store12_do_double_cursor_api() -> None:
    storage = DoStorage()
    try:
        sql = storage.sql
        sql.exec("CREATE TABLE t (a INTEGER, b BLOB) STRICT")
        assert sql.exec("INSERT INTO t VALUES (?, ?)", 1, b"\x00\xff").rowsWritten == 1
        cur = sql.exec("SELECT a, b, a AS a FROM t")
        assert cur.columnNames == ["a", "b", "a"]
        row = sql.exec("SELECT a, b FROM t").one()
        assert row.a == 1 and row["b"].to_bytes() == b"\x00\xff"
        with pytest.raises(JsException, match="got no results"):
            sql.exec("SELECT a FROM t WHERE a = 2").one()
        with pytest.raises(TypeError):
            sql.exec("SELECT ?", (1, 2))
        with pytest.raises(AttributeError):  # the SDK gotcha: never return a cursor
            storage.transactionSync(lambda: sql.exec("SELECT 1"))
    finally:
        storage.close()


def test_store12_do_executor_never_sends_transaction_sql() -> None:
    storage = DoStorage()
    try:
        store = SqliteStore.on_durable_object(storage)
        store.transaction(lambda tx: tx.insert_tenant(TENANT, 1))
        # The double refuses BEGIN/SAVEPOINT from SQL, so reaching here proves none was sent;
        # a callback returning rows (not a cursor) crosses transactionSync fine.
        executor = store.executor
        assert executor.transaction(lambda: executor.execute("SELECT 1")) == [(1,)]
    finally:
        storage.close()


def test_store11_do_executor_maps_js_errors_to_storage_failure() -> None:
    storage = DoStorage()
    try:
        executor = DoSqlExecutor(storage)
        with pytest.raises(AidememoError) as info:
            executor.execute("SELECT * FROM no_such_table")
        assert info.value.code is ErrorCode.STORAGE_FAILURE
    finally:
        storage.close()


def test_store12_blob_roundtrip_do_executor() -> None:
    body = bytes(range(256)) + b'{"x":"\xc3\xa9"}'
    storage = DoStorage()
    try:
        store = SqliteStore.on_durable_object(storage)
        store.transaction(provision)
        commit_all(store, [mutation(1, "blob", body)])
        ref = mutation(1, "blob").receipt.resource
        found = store.read(lambda tx: tx.get_resource(SCOPE, ref))
        assert found is not None and type(found.body) is bytes and found.body == body
        (change,) = store.read(lambda tx: tx.list_changes(SCOPE, 0, 10))
        assert type(change.body) is bytes and change.body == body
    finally:
        storage.close()


def test_store12_do_value_conversion() -> None:
    assert to_sql_value(memoryview(b"ab")) == b"ab"
    assert to_sql_value(bytearray(b"ab")) == b"ab"
    assert to_sql_value(JsBuffer(b"ab")) == b"ab"
    assert to_sql_value(None) is None and to_sql_value(3) == 3 and to_sql_value("s") == "s"

    class ToPyOnly:
        def to_py(self) -> memoryview:
            return memoryview(b"cd")

    assert to_sql_value(ToPyOnly()) == b"cd"
    with pytest.raises(AidememoError):
        to_sql_value(object())


def test_layer2_store_core_imports_without_sqlite3() -> None:
    # Pyodide has no sqlite3: the store package (and the DO executor) must import without it.
    code = (
        "import sys; sys.modules['sqlite3'] = None\n"
        "import aidememo.stores.sqlite, aidememo.stores.sqlite.do_executor\n"
        "from aidememo.stores.sqlite import SqliteStore\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_layer2_store_only_sqlite3_executor_imports_sqlite3() -> None:
    # The other allowed importers keep files that are not the ledger: the local memory store
    # (MEM-1) and the client's replica and outbox (REPLICA-1, OUTBOX-1).
    local_files = (ROOT / "aidememo" / "agent_memory", ROOT / "aidememo" / "client")
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "aidememo").rglob("*.py")
        if path.name != "sqlite3_executor.py"
        and not path.is_relative_to(local_files[0])
        and not path.is_relative_to(local_files[1])
        and any(
            line.strip().startswith(("import sqlite3", "from sqlite3"))
            for line in path.read_text(encoding="utf-8").splitlines()
        )
    ]
    assert offenders == []


def _append_one(store: SqliteStore, tag: str, n: int) -> None:
    def run(tx: WriteTx) -> None:
        project = tx.get_project(SCOPE)
        assert project is not None
        seq = project.head_seq + 1
        tx.commit_mutation(mutation(seq, f"{tag}_{n}", command_id=f"{tag}_{n}"))

    store.transaction(run)


def test_store3_two_connections_serialize_writers(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    first = SqliteStore.open_file(path, synchronous="NORMAL")
    first.transaction(provision)
    second = SqliteStore.open_file(path, synchronous="NORMAL")
    per_thread = 40
    errors: list[BaseException] = []

    def writer(store: SqliteStore, tag: str) -> None:
        try:
            for n in range(per_thread):
                _append_one(store, tag, n)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=(store, tag))
        for store, tag in ((first, "a"), (second, "b"), (first, "c"))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    changes = second.read(lambda tx: tx.list_changes(SCOPE, 0, 1000))
    assert [c.seq for c in changes] == list(range(1, 3 * per_thread + 1))
    first.close()
    second.close()


def test_store4_second_process_sees_commits(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = SqliteStore.open_file(path)
    store.transaction(provision)
    code = (
        "import sys\n"
        "from tests.stores._support import SCOPE, commit_all, mutation\n"
        "from aidememo.stores.sqlite import SqliteStore\n"
        "store = SqliteStore.open_file(sys.argv[1])\n"
        "commit_all(store, [mutation(1, 'from_child')])\n"
        "store.close()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    project = store.read(lambda tx: tx.get_project(SCOPE))
    assert project is not None and project.head_seq == 1
    store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_store11_storage_failure_inside_callback_keeps_its_cause(kind: str, tmp_path: Path) -> None:
    with open_store(kind, tmp_path) as store:
        executor = store.executor

        def bad(tx: WriteTx) -> None:
            tx.insert_tenant("tenant_cause", 1)
            executor.execute("SELECT * FROM no_such_table")

        with pytest.raises(AidememoError) as info:
            store.transaction(bad)
        assert info.value.code is ErrorCode.STORAGE_FAILURE
        assert info.value.__cause__ is not None  # the engine's error, for the server log
        assert not isinstance(info.value, sqlite3.Error)
        assert not store.read(lambda tx: tx.tenant_exists("tenant_cause"))
