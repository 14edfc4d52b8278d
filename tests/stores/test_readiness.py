"""The store state behind `/ready` and `/health` (READY-1, READY-2) and the classification of
storage errors (ERR-2, ERR-4), on real SQLite files: `PRAGMA max_page_count` makes SQLite
answer `SQLITE_FULL` ("database or disk is full") exactly as a full disk does, without
needing one (tests/origin/test_disk_full.py fills a real tmpfs)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.service.readiness import PROBE_INTERVAL_S, Readiness
from aidememo.stores.postgres.tx import driver_failure
from aidememo.stores.sqlite import SqliteStore, sqlite3_files
from aidememo.stores.sqlite.sqlite3_executor import storage_failure
from tests import pg
from tests.stores._support import SCOPE, mutation, provision


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _fill(store: SqliteStore) -> tuple[int, AidememoError]:
    """Commit until the database has no room; the number committed and the error."""
    seq = 0
    while True:
        write = mutation(seq + 1, f"r{seq}", b"x" * 4000)
        try:
            store.transaction(lambda tx, write=write: tx.commit_mutation(write))  # type: ignore[misc]
        except AidememoError as error:
            return seq, error
        seq += 1


def _pages(store: SqliteStore) -> int:
    pages = store.executor.execute("PRAGMA page_count")[0][0]
    assert isinstance(pages, int)
    return pages


def test_err4_ready1_sqlite_full_is_storage_full_and_the_probe_recovers(tmp_path: Path) -> None:
    store = SqliteStore.open_file(tmp_path / "canonical.sqlite")
    try:
        store.transaction(provision)
        ticks = Ticks()
        readiness = Readiness(store, monotonic=ticks)
        assert readiness.state() == "ok"
        store.executor.execute(f"PRAGMA max_page_count = {_pages(store) + 8}")
        committed, error = _fill(store)
        assert error.code is ErrorCode.STORAGE_FULL and error.http_status == 507
        assert "database or disk is full" in error.message
        assert error.to_json()["error"]["message"].startswith("canonical storage is full")
        readiness.observe(False, error)
        assert readiness.state() == "full"  # the last outcome, until the next probe
        # Room again (the file system has plenty): the probe's empty write says ok.
        store.executor.execute("PRAGMA max_page_count = 1073741823")
        assert readiness.state() == "full"
        ticks.now += PROBE_INTERVAL_S
        assert readiness.state() == "ok"
        # Every committed write is there, and writing goes on from the next sequence.
        rows = store.read(lambda tx: tx.list_changes(SCOPE, 0, 10_000, False))
        assert [row.seq for row in rows] == list(range(1, committed + 1))
        store.transaction(lambda tx: tx.commit_mutation(mutation(committed + 1, "after")))
    finally:
        store.close()


def test_ready1_a_full_store_stays_full_while_its_file_system_has_no_room(tmp_path: Path) -> None:
    store = SqliteStore.open_file(tmp_path / "canonical.sqlite")
    try:
        ticks = Ticks()
        readiness = Readiness(store, monotonic=ticks)
        readiness.observe(False, fail(ErrorCode.STORAGE_FULL, "disk full"))
        store.free_bytes = lambda: 4096  # type: ignore[method-assign]
        assert readiness.state() == "full"
        ticks.now += PROBE_INTERVAL_S
        assert readiness.state() == "full"
        store.free_bytes = lambda: 64 << 20  # type: ignore[method-assign]
        ticks.now += PROBE_INTERVAL_S
        assert readiness.state() == "ok"
        readiness.observe(True, None)
        assert readiness.state() == "ok"
    finally:
        store.close()


def test_ready1_unavailable_until_a_probe_reads_again(tmp_path: Path) -> None:
    store = SqliteStore.open_file(tmp_path / "canonical.sqlite")
    ticks = Ticks()
    readiness = Readiness(store, monotonic=ticks)
    assert readiness.state() == "ok" and readiness.schema_version is not None
    readiness.observe(False, fail(ErrorCode.STORAGE_FAILURE, "busy"))
    assert readiness.state() == "unavailable"
    readiness.observe(False, fail(ErrorCode.RESOURCE_NOT_FOUND, "no"))  # not about the store
    readiness.observe(False, None)  # a read that succeeded says nothing
    assert readiness.state() == "unavailable"
    ticks.now += PROBE_INTERVAL_S
    assert readiness.state() == "ok"
    store.close()
    ticks.now += PROBE_INTERVAL_S
    assert readiness.state() == "unavailable"  # a closed store cannot be read


def test_err2_err4_sqlite_codes_map_to_their_states(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def error(code: int, text: str) -> sqlite3.Error:
        exc = sqlite3.OperationalError(text)
        exc.sqlite_errorcode = code
        return exc

    full = storage_failure("commit", error(13, "database or disk is full"))
    assert (full.code, full.store_state) == (ErrorCode.STORAGE_FULL, "full")
    read_only = storage_failure("statement", error(8, "attempt to write a readonly database"))
    assert (read_only.code, read_only.store_state) == (ErrorCode.STORAGE_FAILURE, "read_only")
    busy = storage_failure("statement", error(5, "database is locked"))
    assert (busy.code, busy.store_state) == (ErrorCode.STORAGE_FAILURE, "unavailable")
    # An I/O error (SQLITE_IOERR_FSYNC) is full only when the file system is short of space.
    fsync = error(10 | (4 << 8), "disk I/O error")
    assert storage_failure("commit", fsync, str(tmp_path / "db")).code is ErrorCode.STORAGE_FAILURE
    assert storage_failure("commit", fsync).code is ErrorCode.STORAGE_FAILURE
    monkeypatch.setattr(sqlite3_files, "free_bytes", lambda path: 0)
    assert storage_failure("commit", fsync, str(tmp_path / "db")).code is ErrorCode.STORAGE_FULL
    # An error already classified keeps its code through the group commit's re-wrapping.
    assert storage_failure("batch", full) is full


class Psycopg(Exception):
    sqlstate = "53100"


@pytest.mark.parametrize(
    ("exc", "code", "state"),
    [
        (Psycopg("could not extend file: No space left on device"), "storage_full", "full"),
        (Exception({"C": "53100", "M": "could not extend file"}), "storage_full", "full"),
        (Exception({"C": "25006", "M": "read-only transaction"}), "storage_failure", "read_only"),
        (
            Exception({"C": "57P01", "M": "terminating connection"}),
            "storage_failure",
            "unavailable",
        ),
        (ConnectionError("connection refused"), "storage_failure", "unavailable"),
    ],
    ids=["psycopg-disk-full", "pg8000-disk-full", "read-only", "admin-shutdown", "refused"],
)
def test_err4_postgres_sqlstates_map_to_their_states(exc: Exception, code: str, state: str) -> None:
    """The SQLSTATE as each driver carries it (psycopg's `sqlstate`, pg8000's `C` field)."""
    error = driver_failure("statement", exc)
    assert (error.code.value, error.store_state) == (code, state)


@pytest.mark.postgres
@pytest.mark.parametrize("driver", pg.DRIVERS)
def test_ready1_postgres_read_only_then_writable_again(driver: str) -> None:
    """A database that turns read-only (a standby, `default_transaction_read_only`): writes
    are `storage_failure` with the state `read_only`, and the probe's write that changes no
    row sees it too, until the database takes writes again."""
    with pg.fresh_database() as db:
        store = db.open(driver)
        ticks = Ticks()
        readiness = Readiness(store, monotonic=ticks)
        try:
            store.transaction(provision)
            assert readiness.state() == "ok"
            with pg.admin(db.url) as conn:
                conn.execute("ALTER ROLE CURRENT_USER SET default_transaction_read_only = on")
            try:
                db.terminate_sessions()  # new sessions start read-only
                with pytest.raises(AidememoError) as err:
                    store.transaction(lambda tx: tx.commit_mutation(mutation(1, "r1")))
                assert err.value.code is ErrorCode.STORAGE_FAILURE
                assert err.value.store_state == "read_only"
                readiness.observe(False, err.value)
                ticks.now += PROBE_INTERVAL_S
                assert readiness.state() == "read_only"  # the probe's write is refused too
            finally:
                with pg.admin(db.url) as conn:  # itself a new, read-only session
                    conn.execute("SET default_transaction_read_only = off")
                    conn.execute("ALTER ROLE CURRENT_USER RESET default_transaction_read_only")
            db.terminate_sessions()
            ticks.now += PROBE_INTERVAL_S
            assert readiness.state() == "ok"
            store.transaction(lambda tx: tx.commit_mutation(mutation(1, "r1")))
        finally:
            store.close()
