"""The PostgreSQL store itself: schema versions and migrations, round trips per command, the
pool, driver errors, and search agreeing with SQLite and the reference store.

Runs on a real PostgreSQL 15 (scripts/test starts one), with psycopg 3 and with pg8000.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aidememo.conformance.harness import ACTOR, EPOCH, PROJECT, RESOURCE, TENANT, Fixture
from aidememo.domain.clock import FixedClock
from aidememo.domain.envelope import Command
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import ChangeOp, CommandCall, ResourceRef, Role, Scope, TokenBinding
from aidememo.http.app import HttpApp
from aidememo.service.access import Caller
from aidememo.service.ledger import Ledger
from aidememo.stores.postgres import SCHEMA_VERSION, PostgresStore
from tests import pg
from tests.contract.support import BACKENDS, START_MS, WRITER, Api, InProcessClient, P

pytestmark = pytest.mark.postgres


@pytest.fixture
def empty_db() -> Iterator[pg.Database]:
    with pg.fresh_database(migrated=False) as database:
        yield database


def _statement_name(sql: str) -> str:
    """What the counting log records: the server-side function a statement calls, else the
    word before its first parenthesis, else the whole statement."""
    called = re.search(r"\b(aidememo_\w+)\(", sql)
    if called is not None:
        return called.group(1)
    return sql.split("(", maxsplit=1)[0].strip().split()[-1] if "(" in sql else sql


class CountingConnection:
    """A DB-API connection that counts the statements sent through its cursors."""

    def __init__(self, conn: Any, log: list[str]) -> None:
        self._conn = conn
        self._log = log

    def cursor(self) -> Any:
        conn, log = self, self._log

        class Cursor:
            def __init__(self) -> None:
                self._cur = conn._conn.cursor()

            def execute(self, sql: str, params: Any = ()) -> Any:
                log.append(_statement_name(sql))
                return self._cur.execute(sql, params) if params else self._cur.execute(sql)

            def __getattr__(self, name: str) -> Any:
                return getattr(self._cur, name)

        return Cursor()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("_conn", "_log"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._conn, name, value)


def _counting(db: pg.Database, driver: str, log: list[str]) -> Callable[[], Any]:
    connect = db.connect(driver)
    return lambda: CountingConnection(connect(), log)


# -- schema ------------------------------------------------------------------------------------


def test_store8_opening_never_migrates_and_an_old_schema_says_how_to_migrate(
    empty_db: pg.Database, driver: str
) -> None:
    with pytest.raises(AidememoError) as err:
        PostgresStore.open(empty_db.connect(driver))
    assert err.value.code is ErrorCode.STORAGE_FAILURE
    assert "aidememo admin migrate" in err.value.message
    store = PostgresStore(empty_db.connect(driver))
    assert store.schema_version() == 0  # nothing was created by the refused open
    assert store.migrate() == SCHEMA_VERSION
    assert store.migrate() == SCHEMA_VERSION  # idempotent
    store.close()
    again = PostgresStore.open(empty_db.connect(driver))
    assert again.schema_version() == SCHEMA_VERSION
    again.close()


def test_arc9_a_version_1_database_migrates_to_the_guarded_write_and_the_staging(
    empty_db: pg.Database, driver: str
) -> None:
    """Migrations are ordered: a database left at version 1 gets only the later steps
    (`aidememo_execute_raw`, the import staging table, the receipts index of the session list),
    and its data stays; until then the
    code refuses to open it."""
    from aidememo.stores.postgres import schema

    version, steps = schema.MIGRATIONS[0]
    assert version == 1 and [v for v, _ in schema.MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))
    with pg.admin(empty_db.url) as conn, conn.transaction():
        conn.execute(schema.CREATE_VERSION_TABLE)
        for statement in (*steps, *schema.V10):  # this code's commits read the listener registry
            conn.execute(statement)
        conn.execute(schema.UPSERT_VERSION, (schema.COMPONENT, 1))
    # (the constructor checks nothing; the generic pipeline needs nothing of later versions)
    old = Fixture.create(lambda: PostgresStore(empty_db.connect(driver)))
    old.put_generic("command_v1", "a")
    old.store.close()
    with pytest.raises(AidememoError) as err:
        PostgresStore.open(empty_db.connect(driver))
    assert "aidememo admin migrate" in err.value.message
    store = PostgresStore.open(empty_db.connect(driver), migrate=True)
    assert store.schema_version() == SCHEMA_VERSION == 15
    assert store.migrate() == SCHEMA_VERSION  # idempotent
    # version 3: the import staging table (ARC-9)
    store.transaction(lambda tx: tx.stage_import_page("import_1", "p", 0, b"{}\n", 1))
    assert store.read(lambda tx: tx.staged_import_page("import_1", "p", 0)) == b"{}\n"
    ledger = Ledger(store, FixedClock(2_000))
    command = Command(
        "command_v2", PROJECT, 1, "fact.add", RESOURCE, ChangeOp.UPSERT, {"fixture": "b"}
    )
    receipt = ledger.execute_raw(Caller(TENANT, ACTOR), command)
    assert (receipt.project_seq, receipt.revision) == (2, 2)
    store.close()


def test_store6_a_newer_schema_is_refused(db: pg.Database, driver: str) -> None:
    with pg.admin(db.url) as conn:
        conn.execute("UPDATE aidememo_schema SET version = %s", (SCHEMA_VERSION + 1,))
    for migrate in (False, True):
        with pytest.raises(AidememoError) as err:
            PostgresStore.open(db.connect(driver), migrate=migrate)
        assert err.value.code is ErrorCode.STORAGE_FAILURE
        assert "newer" in err.value.message


def test_store8_concurrent_migrations_are_serialized(empty_db: pg.Database, driver: str) -> None:
    barrier = threading.Barrier(4)
    versions: list[int] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            barrier.wait()
            store = PostgresStore.open(empty_db.connect(driver), migrate=True)
            versions.append(store.schema_version())
            store.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors and versions == [SCHEMA_VERSION] * 4


def test_arc4_tenant_deletion_cascades_through_every_table(db: pg.Database, driver: str) -> None:
    fx = Fixture.create(lambda: db.open(driver))
    fx.put("command_a", "a")
    scope = Scope(TENANT, PROJECT)
    counts = fx.store.read(lambda tx: tx.count_tenant_rows(TENANT))
    assert counts["changes"] == counts["receipts"] == counts["audit"] == 1
    fx.store.transaction(lambda tx: tx.delete_tenant(TENANT))
    assert not any(fx.store.read(lambda tx: tx.count_tenant_rows(TENANT)).values())
    assert fx.store.read(lambda tx: tx.get_project(scope)) is None
    fx.store.close()


# -- round trips -------------------------------------------------------------------------------


def test_store8_a_command_is_four_round_trips(db: pg.Database, driver: str) -> None:
    """The generic pipeline (every typed command)."""
    log: list[str] = []
    fx = Fixture.create(lambda: PostgresStore.open(_counting(db, driver, log)))
    fx.put_generic("command_warm", "a")
    log.clear()
    fx.put_generic("command_counted", "b")
    assert log == [
        "BEGIN ISOLATION LEVEL READ COMMITTED",
        "aidememo_begin_command",
        "aidememo_commit_mutation",
        "COMMIT",
    ]
    log.clear()
    assert fx.put_generic("command_counted", "b").project_seq == 2  # a replay: no commit_mutation
    assert log == ["BEGIN ISOLATION LEVEL READ COMMITTED", "aidememo_begin_command", "COMMIT"]
    log.clear()
    fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 10)
    assert log[0] == "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
    assert log[1] == "set_config" and log[-1] == "COMMIT"
    fx.store.close()


def test_store9_a_raw_command_is_one_round_trip_whatever_its_outcome(
    db: pg.Database, driver: str
) -> None:
    """`POST /v1/commands` is one guarded write: one `aidememo_execute_raw` statement, no
    BEGIN or COMMIT, for a commit, a replay and every refusal alike. pg8000 splits a
    statement with parameters over three Syncs, so there it is framed by BEGIN and COMMIT
    (each one simple query), which keep a transaction-mode pool on one server connection."""
    probe = PostgresStore(db.connect(driver))
    conn = probe.pool.acquire()
    assert probe._is_framed(conn) is (driver == "pg8000")  # detected from the connection
    probe.pool.release(conn)
    probe.close()
    log: list[str] = []
    fx = Fixture.create(
        lambda: PostgresStore.open(_counting(db, driver, log), framed=driver == "pg8000")
    )
    fx.put("command_warm", "a")
    one = ["aidememo_execute_raw"]
    if driver == "pg8000":
        one = ["BEGIN ISOLATION LEVEL READ COMMITTED", *one, "COMMIT"]
    steps: list[tuple[str, Callable[[], Any], ErrorCode | None]] = [
        ("put", lambda: fx.put("command_counted", "b"), None),
        ("replay", lambda: fx.put("command_counted", "b"), None),
        ("conflict", lambda: fx.put("command_counted", "other"), ErrorCode.COMMAND_CONFLICT),
        ("stale", lambda: fx.put("command_stale", "c", expected=1), ErrorCode.STALE_REVISION),
        (
            "missing",
            lambda: fx.put(
                "command_missing", "c", expected=1, resource=ResourceRef("custom.x", "x")
            ),
            ErrorCode.RESOURCE_NOT_FOUND,
        ),
        ("delete", lambda: fx.delete("command_delete", expected=2), None),
        (
            "unauthorized",
            lambda: fx.put("command_nobody", "d", caller=Caller(TENANT, "actor_nobody")),
            ErrorCode.PROJECT_UNAUTHORIZED,
        ),
    ]
    for name, call, code in steps:
        log.clear()
        if code is None:
            call()
        else:
            with pytest.raises(AidememoError) as err:
                call()
            assert err.value.code is code, name
        assert log == one, name
    scope = Scope(TENANT, PROJECT)
    assert fx.store.read(lambda tx: tx.get_project(scope)).head_seq == 3  # type: ignore[union-attr]
    # Inside a transaction already open on the thread, the statement joins it.
    log.clear()
    receipt = fx.store.transaction(lambda tx: fx.put("command_nested", "e"))
    assert receipt.project_seq == 4
    timeouts = "" if driver == "pg8000" else fx.store._set_local  # with the BEGIN (SRCH-6)
    begin = "BEGIN ISOLATION LEVEL READ COMMITTED" + timeouts
    assert log == [begin, "aidememo_execute_raw", "COMMIT"]
    fx.store.close()


def test_store9_post_v1_commands_is_one_guarded_write(db: pg.Database, driver: str) -> None:
    """Through the HTTP app: the command is the one `aidememo_execute_raw` statement (the
    first request's token lookup is a read of its own; once cached, the binding is checked in
    that same statement, AUTH-7); typed commands keep the pipeline."""
    log: list[str] = []
    store = PostgresStore.open(_counting(db, driver, log), framed=driver == "pg8000")
    app = HttpApp(store, clock=FixedClock(START_MS))
    api = Api("counted", InProcessClient(app), app.services.identity, FixedClock(START_MS))
    api.provision(WRITER, Role.WRITER)
    for _ in ("commit", "replay"):
        log.clear()
        api.put_note("note_http", {"text": "one round trip"}).expect(200)
        assert log.count("aidememo_execute_raw") == 1
        assert "aidememo_begin_command" not in log and "aidememo_commit_mutation" not in log
    if driver == "psycopg":
        assert log == ["aidememo_execute_raw"]  # the cached caller: no read of its own
    log.clear()
    api.session("s_http", source_id="src")  # a typed command: the generic pipeline
    assert "aidememo_begin_command" in log and "aidememo_execute_raw" not in log
    store.close()


def test_store9_the_guarded_write_sets_its_timeouts_for_its_own_statement_only(
    db: pg.Database, driver: str
) -> None:
    """lock_timeout bounds the wait for the project row; nothing outlives the statement."""
    fx = Fixture.create(lambda: db.open(driver, pool_size=1, lock_timeout_ms=300))
    holder = db.open(driver)
    locked = threading.Event()
    release = threading.Event()

    def hold(tx: Any) -> None:
        tx.begin_command(
            CommandCall(Scope(TENANT, PROJECT), fx.actor.actor_id, "command_hold", RESOURCE)
        )
        locked.set()
        release.wait(30)

    thread = threading.Thread(target=lambda: holder.transaction(hold))
    thread.start()
    try:
        assert locked.wait(30)
        started = time.monotonic()
        with pytest.raises(AidememoError) as err:
            fx.put("command_waits", "a")
        assert err.value.code is ErrorCode.STORAGE_FAILURE
        assert "lock" in str(err.value.__cause__).lower()
        assert 0.25 < time.monotonic() - started < 5
    finally:
        release.set()
        thread.join(30)
    assert fx.put("command_waits", "a").project_seq == 1  # nothing of the refused attempt
    conn = fx.store.pool.acquire()  # type: ignore[attr-defined]
    try:
        cur = conn.cursor()
        for setting in ("statement_timeout", "lock_timeout"):
            cur.execute(f"SHOW {setting}")
            assert cur.fetchall()[0][0] == "0", setting
        cur.close()
    finally:
        fx.store.pool.release(conn)  # type: ignore[attr-defined]
    holder.close()
    fx.store.close()


def test_store9_a_raw_command_on_a_connection_that_died_while_idle_is_retried_once(
    db: pg.Database, driver: str
) -> None:
    log: list[str] = []
    framed = driver == "pg8000"
    fx = Fixture.create(
        lambda: PostgresStore.open(_counting(db, driver, log), pool_size=1, framed=framed)
    )
    fx.put("command_a", "a")
    db.terminate_sessions()
    log.clear()
    assert fx.put("command_b", "b").project_seq == 2
    # the probe after the failure is sent only where the driver still has a socket
    sent = [e for e in log if e not in ("SELECT 1", "ROLLBACK")]
    if framed:
        begin = "BEGIN ISOLATION LEVEL READ COMMITTED"
        assert sent == [begin, begin, "aidememo_execute_raw", "COMMIT"]  # BEGIN failed first
    else:
        assert sent == ["aidememo_execute_raw"] * 2
    log.clear()
    with pytest.raises(AidememoError) as err:  # a refusal on a live connection: no retry
        fx.put("command_b", "other")
    assert err.value.code is ErrorCode.COMMAND_CONFLICT
    assert log.count("aidememo_execute_raw") == 1
    fx.store.close()


# -- errors and the pool -----------------------------------------------------------------------


def test_store8_driver_errors_become_storage_failure_with_the_cause(
    db: pg.Database, driver: str
) -> None:
    fx = Fixture.create(lambda: db.open(driver, pool_size=1))
    bad = TokenBinding(b"short", TENANT, "actor_fixture", True, 1)  # violates the length CHECK
    with pytest.raises(AidememoError) as err:
        fx.store.transaction(lambda tx: tx.insert_token(bad))
    assert err.value.code is ErrorCode.STORAGE_FAILURE
    assert err.value.__cause__ is not None
    assert not isinstance(err.value.__cause__, AidememoError)
    assert fx.put("command_after", "a").project_seq == 1  # the connection was rolled back
    fx.store.close()


def test_store8_connections_that_died_while_idle_are_replaced(db: pg.Database, driver: str) -> None:
    fx = Fixture.create(lambda: db.open(driver, pool_size=2))
    fx.put("command_a", "a")
    db.terminate_sessions()  # every pooled connection is now dead
    assert fx.put("command_b", "b").project_seq == 2
    assert fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 10).records[-1].seq == 2
    fx.store.close()


def test_store8_an_unreachable_server_is_a_storage_failure_not_a_hang(driver: str) -> None:
    pg.server_url()
    dead = f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres"
    store = PostgresStore(pg.connector(driver, dead))
    with pytest.raises(AidememoError) as err:
        store.read(lambda tx: tx.tenant_exists("t"))
    assert err.value.code is ErrorCode.STORAGE_FAILURE
    store.close()


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_store1_store8_a_write_inside_a_read_is_refused_and_nested_writes_join(
    db: pg.Database, driver: str
) -> None:
    store = db.open(driver)
    with pytest.raises(AidememoError):
        store.read(lambda tx: store.transaction(lambda inner: inner.insert_tenant("t", 1)))

    def outer(tx: Any) -> None:
        tx.insert_tenant("t_outer", 1)
        store.transaction(lambda inner: inner.insert_tenant("t_inner", 1))
        raise RuntimeError("roll back both")

    with pytest.raises(RuntimeError):
        store.transaction(outer)
    assert not store.read(lambda tx: tx.tenant_exists("t_inner"))
    store.close()


# -- search ------------------------------------------------------------------------------------


CORPUS = [
    ("fact-01", "src-a", "redis cluster timeout decision for the cache layer"),
    ("fact-02", "src-a", "cache cache cache eviction policy"),
    ("fact-03", "src-b", "어제 서버 배포가 실패했습니다 redis 타임아웃"),
    ("fact-04", "src-b", "운영서버가다운됨 서버 재시작"),
    ("fact-05", "src-a", "我们的服务器昨天挂了, 服务恢复了"),
    ("fact-06", "src-b", "サーバーのタイムアウト timeout 設定"),
    ("fact-07", "src-a", "timeout"),
    ("fact-08", "src-b", "a cache"),
    ("fact-09", "src-b", "a cache"),
    ("fact-10", "src-a", "Deploy deploy DEPLOY pipeline; 배포 파이프라인"),
    ("fact-11", "src-a", "nothing relevant at all"),
    ("fact-12", "src-b", "redis"),
]
QUERIES = [
    ("redis", None),
    ("cache timeout", None),
    ("서버", None),
    ("서버 배포 redis", None),
    ("服务 服务器", None),
    ("タイムアウト timeout", None),
    ("deploy 배포", None),
    ("cache", "src-b"),
    ("redis timeout 서버 cache deploy", "src-a"),
    ("zebra", None),
]


def _search_results(backend: str, tmp_path: Path) -> list[list[tuple[str, float]]]:
    made = BACKENDS[backend](tmp_path, FixedClock(START_MS))
    api = Api(backend, made.client, made.identity, FixedClock(START_MS))
    try:
        api.provision(WRITER, Role.WRITER)
        api.session("s-a", source_id="src-a")
        api.session("s-b", source_id="src-b")
        for fact_id, source, content in CORPUS:
            api.fact(fact_id, "s-a" if source == "src-a" else "s-b", content)
        results = []
        for q, source_id in QUERIES:
            query: dict[str, str | int] = {"q": q, "limit": 100}
            if source_id is not None:
                query["source_id"] = source_id
            found = api.get(f"{P}/search", query=query).expect(200)["results"]
            results.append([(r["fact_id"], float(r["score"])) for r in found])
        return results
    finally:
        made.close()


def test_srch4_search_finds_the_same_facts_and_scores_on_every_backend(
    tmp_path: Path,
) -> None:
    pg.server_url()
    reference = _search_results("memory", tmp_path / "memory")
    assert any(len(hits) > 2 for hits in reference)
    for backend in ("sqlite_file", "durable_object", "postgres_psycopg", "postgres_pg8000"):
        results = _search_results(backend, tmp_path / backend)
        for (q, _), expected, got in zip(QUERIES, reference, results, strict=True):
            assert got == expected, (backend, q)  # the same facts and scores, bit for bit
