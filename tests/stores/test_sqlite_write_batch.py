"""Write batches of `Sqlite3Executor` (SPEC.md HTTP-10, STORE-7): several calls, one thread,
one `COMMIT`; each call's transaction a savepoint of its own; after-commit actions only once
the `COMMIT` returned; a voided batch answers every call with the storage error."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aidememo.conformance.harness import EPOCH, PROJECT, TENANT
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.model import Scope
from aidememo.ports import CAP_WRITE_BATCH, WriteTx
from aidememo.stores.sqlite import SqliteStore
from tests.stores.test_sqlite_group_commit import _count_commits, _executor, _open, _ref

SCOPE = Scope(TENANT, PROJECT)


def _tenant_on_disk(path: Path, tenant: str) -> bool:
    """Whether another connection (what a reader or another process sees) has the row."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT 1 FROM tenants WHERE tenant_id = ?", (tenant,)).fetchall()
    finally:
        conn.close()
    return bool(rows)


def test_http10_store7_a_batch_commits_once_and_a_failing_call_is_rolled_back_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fx = _open(tmp_path / "db.sqlite")
    assert CAP_WRITE_BATCH in fx.store.capabilities
    commits = _count_commits(_executor(fx), monkeypatch)
    raised = fail(ErrorCode.STALE_REVISION, "from the middle of the batch")

    def failing() -> None:
        def write_then_fail(tx: WriteTx) -> None:
            tx.insert_tenant("tenant_ghost", 5)
            raise raised

        fx.store.transaction(write_then_fail)

    calls: list[Callable[[], Any]] = [
        lambda: fx.put("command_1", "a", resource=_ref(1)),
        failing,
        lambda: fx.put("command_2", "b", resource=_ref(2)),
    ]
    batch = fx.store.batch(calls)  # type: ignore[attr-defined]
    assert [error for _, error in batch] == [None, raised, None]
    assert [value.project_seq for value, _ in (batch[0], batch[2])] == [1, 2]
    assert len(commits) == 1
    assert not fx.store.read(lambda tx: tx.tenant_exists("tenant_ghost"))
    seqs = [c.seq for c in fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 100).records]
    assert seqs == [1, 2]
    fx.store.close()
    reopened = _open(tmp_path / "db.sqlite")  # what the batch answered is on disk
    assert reopened.store.read(lambda tx: tx.get_project(SCOPE)).head_seq == 2  # type: ignore[union-attr]
    reopened.store.close()


def test_http10_a_call_sees_the_writes_of_the_calls_before_it(tmp_path: Path) -> None:
    fx = _open(tmp_path / "db.sqlite")
    seen: list[bool] = []
    calls: list[Callable[[], Any]] = [
        lambda: fx.store.transaction(lambda tx: tx.insert_tenant("tenant_one", 1)),
        lambda: seen.append(fx.store.read(lambda tx: tx.tenant_exists("tenant_one"))),
    ]
    assert [error for _, error in fx.store.batch(calls)] == [None, None]  # type: ignore[attr-defined]
    assert seen == [True]
    fx.store.close()


def test_http10_after_commit_actions_run_once_the_commit_is_durable(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    fx = _open(path)
    store: Any = fx.store
    seen: list[tuple[str, bool]] = []

    def write(tenant: str) -> None:
        store.transaction(lambda tx: tx.insert_tenant(tenant, 1))
        store.after_commit(lambda: seen.append((tenant, _tenant_on_disk(path, tenant))))

    store.batch([lambda: write("tenant_a"), lambda: write("tenant_b")])
    assert seen == [("tenant_a", True), ("tenant_b", True)]  # run after the COMMIT, in order
    write("tenant_c")  # outside a batch: at once, its transaction has committed
    assert seen[-1] == ("tenant_c", True)
    fx.store.close()


def test_http10_store7_a_failed_commit_voids_every_call_and_runs_no_action(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "db.sqlite"
    fx = _open(path)
    store: Any = fx.store
    executor = _executor(fx)
    broken = fail(ErrorCode.STORAGE_FULL, "the disk is full")

    def failing_commit(conn: Any) -> None:
        raise broken

    monkeypatch.setattr(executor, "_commit", failing_commit)
    actions: list[str] = []

    def write(tenant: str) -> str:
        store.transaction(lambda tx: tx.insert_tenant(tenant, 1))
        store.after_commit(lambda: actions.append(tenant))
        return tenant

    outcomes = store.batch([lambda: write("tenant_a"), lambda: write("tenant_b")])
    assert outcomes == [(None, broken), (None, broken)]
    assert actions == []
    monkeypatch.undo()
    assert not _tenant_on_disk(path, "tenant_a")
    assert not _tenant_on_disk(path, "tenant_b")
    assert store.batch([lambda: write("tenant_c")]) == [("tenant_c", None)]  # the next commits
    assert actions == ["tenant_c"]
    fx.store.close()


def test_http10_store7_an_engine_rollback_voids_the_calls_so_far_and_the_rest_run_anew(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.sqlite"
    fx = _open(path)
    store: Any = fx.store
    executor = _executor(fx)

    def rolled_back(tx: WriteTx) -> None:
        tx.insert_tenant("tenant_b", 1)
        executor._conn.execute("ROLLBACK")  # what SQLite does by itself on SQLITE_FULL or IOERR
        raise fail(ErrorCode.STORAGE_FAILURE, "disk I/O error")

    outcomes = store.batch(
        [
            lambda: store.transaction(lambda tx: tx.insert_tenant("tenant_a", 1)),
            lambda: store.transaction(rolled_back),
            lambda: store.transaction(lambda tx: tx.insert_tenant("tenant_c", 1)),
        ]
    )
    errors = [error for _, error in outcomes]
    assert all(isinstance(error, AidememoError) for error in errors[:2])
    assert errors[2] is None
    assert [error.code for error in errors[:2]] == [ErrorCode.STORAGE_FAILURE] * 2
    assert not _tenant_on_disk(path, "tenant_a")  # its writes went with the transaction
    assert not _tenant_on_disk(path, "tenant_b")
    assert _tenant_on_disk(path, "tenant_c")  # ran in a new transaction, committed
    fx.store.close()


def test_http10_store7_a_batch_takes_its_turn_among_the_group_commit_writers(
    tmp_path: Path,
) -> None:
    fx = _open(tmp_path / "db.sqlite")
    store: Any = fx.store
    executor = _executor(fx)
    started, release = threading.Event(), threading.Event()
    answers: dict[str, Any] = {}

    def holder(tx: WriteTx) -> str:
        started.set()
        assert release.wait(timeout=30)
        tx.insert_tenant("tenant_holder", 1)
        return "held"

    def run(name: str, call: Callable[[], Any]) -> threading.Thread:
        thread = threading.Thread(target=lambda: answers.__setitem__(name, call()))
        thread.start()
        return thread

    threads = [run("holder", lambda: store.transaction(holder))]
    assert started.wait(timeout=30)
    threads.append(
        run("batch", lambda: store.batch([lambda: fx.put("c_batch", "v", resource=_ref(1))]))
    )
    while len(executor._queue) < 1:  # the batch waits its turn behind the holder
        threading.Event().wait(0.001)
    threads.append(run("queued", lambda: fx.put("c_queued", "v", resource=_ref(2))))
    while len(executor._queue) < 2:
        threading.Event().wait(0.001)
    assert answers == {}
    release.set()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    assert answers["holder"] == "held"
    batch_value, batch_error = answers["batch"][0]
    assert batch_error is None and batch_value.project_seq == 1  # in queue order
    assert answers["queued"].project_seq == 2
    fx.store.close()


def test_http10_no_batch_inside_a_transaction(tmp_path: Path) -> None:
    fx = _open(tmp_path / "db.sqlite")
    store: Any = fx.store
    with pytest.raises(AidememoError) as caught:
        store.transaction(lambda tx: store.batch([lambda: None]))
    assert caught.value.code is ErrorCode.STORAGE_FAILURE
    memory: Any = SqliteStore.open_memory()  # a private database batches on its connection
    assert memory.batch([lambda: memory.transaction(lambda tx: tx.insert_tenant("t", 1))]) == [
        (None, None)
    ]
    assert memory.read(lambda tx: tx.tenant_exists("t"))
    memory.close()
    fx.store.close()


def test_http10_an_action_registered_inside_a_transaction_waits_for_its_commit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.sqlite"
    fx = _open(path)
    store: Any = fx.store
    seen: list[bool] = []

    def write(tx: WriteTx) -> None:
        tx.insert_tenant("tenant_a", 1)
        store.after_commit(lambda: seen.append(_tenant_on_disk(path, "tenant_a")))

    store.transaction(write)
    assert seen == [True]

    def failing(tx: WriteTx) -> None:
        tx.insert_tenant("tenant_b", 1)
        store.after_commit(lambda: seen.append(False))
        raise fail(ErrorCode.STALE_REVISION, "no commit")

    with pytest.raises(AidememoError):
        store.transaction(failing)
    assert seen == [True]  # never run: its transaction did not commit
    fx.store.close()
