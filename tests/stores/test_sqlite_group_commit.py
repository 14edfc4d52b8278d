"""Group commit in `Sqlite3Executor`: many callers, one `COMMIT`, nothing answered early."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aidememo.conformance.harness import ACTOR, EPOCH, PROJECT, RESOURCE, TENANT, Fixture
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.model import Membership, MemberStatus, ResourceRef, Role, Scope
from aidememo.ports import WriteTx
from aidememo.stores.sqlite import SqliteStore
from aidememo.stores.sqlite.sqlite3_executor import MAX_BATCH, Sqlite3Executor

SCOPE = Scope(TENANT, PROJECT)


def _open(path: Path) -> Fixture:
    return Fixture.create(lambda: SqliteStore.open_file(path))


def _executor(fx: Fixture) -> Sqlite3Executor:
    executor = fx.store.executor  # type: ignore[attr-defined]
    assert isinstance(executor, Sqlite3Executor)
    return executor


def _count_commits(executor: Sqlite3Executor, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    commits: list[int] = []
    original = executor._commit

    def counted(conn: Any) -> None:
        original(conn)
        commits.append(1)

    monkeypatch.setattr(executor, "_commit", counted)
    return commits


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


class _Outcomes:
    """Runs calls on threads and keeps each one's result or exception by name."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.errors: dict[str, BaseException] = {}
        self.threads: list[threading.Thread] = []

    def start(self, name: str, call: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                self.values[name] = call()
            except BaseException as exc:
                self.errors[name] = exc

        thread = threading.Thread(target=run, name=name)
        self.threads.append(thread)
        thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=30)
            assert not thread.is_alive()


def _hold_writer(fx: Fixture, outcomes: _Outcomes) -> threading.Event:
    """Start a transaction that holds the write lock until the returned event is set."""
    started, release = threading.Event(), threading.Event()

    def blocker(tx: WriteTx) -> str:
        started.set()
        assert release.wait(timeout=30)
        tx.insert_tenant("tenant_holder", 1)
        return "held"

    outcomes.start("holder", lambda: fx.store.transaction(blocker))
    assert started.wait(timeout=30)
    return release


def _queue_in_order(
    fx: Fixture, outcomes: _Outcomes, calls: list[tuple[str, Callable[[], Any]]]
) -> None:
    executor = _executor(fx)
    for index, (name, call) in enumerate(calls, start=1):
        outcomes.start(name, call)
        _wait_for(lambda n=index: len(executor._queue) == n, f"{name} to queue")  # type: ignore[misc]


def _ref(i: int) -> ResourceRef:
    return ResourceRef("custom.fact", f"fact_{i}")


def test_rec2_store7_group_commit_many_threads_dense_sequence(tmp_path: Path) -> None:
    fx = _open(tmp_path / "db.sqlite")
    threads, per_thread = 16, 12
    outcomes = _Outcomes()
    barrier = threading.Barrier(threads)

    def submit(t: int) -> list[Any]:
        barrier.wait()
        return [
            fx.put(f"command_{t}_{i}", f"v{t}.{i}", resource=_ref(t * per_thread + i))
            for i in range(per_thread)
        ]

    for t in range(threads):
        outcomes.start(f"t{t}", lambda t=t: submit(t))  # type: ignore[misc]
    outcomes.join()
    assert outcomes.errors == {}
    receipts = [r for rs in outcomes.values.values() for r in rs]
    total = threads * per_thread
    assert sorted(r.project_seq for r in receipts) == list(range(1, total + 1))
    changes = fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 10_000).records
    assert [c.seq for c in changes] == list(range(1, total + 1))
    by_seq = {r.project_seq: r for r in receipts}
    for change in changes:
        receipt = by_seq[change.seq]
        assert (change.ref, change.revision) == (receipt.resource, receipt.revision)
        assert fx.store.read(lambda tx, r=receipt: tx.get_receipt(SCOPE, r.command_id)) == receipt
    fx.store.close()
    reopened = _open(tmp_path / "db.sqlite")  # everything acknowledged is on disk
    assert reopened.store.read(lambda tx: tx.get_project(SCOPE)).head_seq == total  # type: ignore[union-attr]
    reopened.store.close()


def test_store7_group_commit_batches_queued_callers_into_one_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fx = _open(tmp_path / "db.sqlite")
    commits = _count_commits(_executor(fx), monkeypatch)
    outcomes = _Outcomes()
    release = _hold_writer(fx, outcomes)
    calls: list[tuple[str, Callable[[], Any]]] = [
        (f"c{i}", lambda i=i: fx.put(f"command_{i}", "v", resource=_ref(i)))  # type: ignore[misc]
        for i in range(5)
    ]
    _queue_in_order(fx, outcomes, calls)
    assert outcomes.values == {}  # nobody is answered while the writer holds the lock
    release.set()
    outcomes.join()
    assert outcomes.errors == {}
    assert outcomes.values["holder"] == "held"
    assert [outcomes.values[f"c{i}"].project_seq for i in range(5)] == [1, 2, 3, 4, 5]
    assert len(commits) == 2  # the holder alone, then the five queued callers together
    fx.store.close()


def test_store7_group_commit_failing_callback_affects_only_itself(tmp_path: Path) -> None:
    fx = _open(tmp_path / "db.sqlite")
    outcomes = _Outcomes()
    raised = fail(ErrorCode.STALE_REVISION, "from the middle of the batch")

    def failing(tx: WriteTx) -> None:
        tx.insert_tenant("tenant_ghost", 5)
        raise raised

    release = _hold_writer(fx, outcomes)
    _queue_in_order(
        fx,
        outcomes,
        [
            ("before", lambda: fx.put("command_before", "a", resource=_ref(1))),
            ("failing", lambda: fx.store.transaction(failing)),
            ("bug", lambda: fx.store.transaction(lambda tx: {}["missing"])),
            ("after", lambda: fx.put("command_after", "b", resource=_ref(2))),
        ],
    )
    release.set()
    outcomes.join()
    assert outcomes.errors["failing"] is raised  # the caller's own exception, unchanged
    assert isinstance(outcomes.errors["bug"], KeyError)
    assert set(outcomes.errors) == {"failing", "bug"}
    assert outcomes.values["before"].project_seq == 1
    assert outcomes.values["after"].project_seq == 2
    assert not fx.store.read(lambda tx: tx.tenant_exists("tenant_ghost"))
    assert fx.store.read(lambda tx: tx.tenant_exists("tenant_holder"))
    seqs = [c.seq for c in fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 100).records]
    assert seqs == [1, 2]
    assert fx.put("command_next", "c", resource=_ref(3)).project_seq == 3
    fx.store.close()


def test_store7_group_commit_failed_commit_answers_every_caller(tmp_path: Path) -> None:
    fx = _open(tmp_path / "db.sqlite")
    executor = _executor(fx)
    outcomes = _Outcomes()

    def breaks_commit(tx: WriteTx) -> str:
        # A deferred foreign key violation passes every statement and fails the COMMIT.
        executor.execute("PRAGMA defer_foreign_keys = ON")
        tx.put_membership(
            Membership(
                "tenant_nope", "project_nope", "actor_nope", Role.WRITER, MemberStatus.ACTIVE
            ),
            1,
        )
        return "returned"

    release = _hold_writer(fx, outcomes)
    _queue_in_order(
        fx,
        outcomes,
        [
            ("before", lambda: fx.put("command_before", "a", resource=_ref(1))),
            ("breaker", lambda: fx.store.transaction(breaks_commit)),
            ("raiser", lambda: fx.store.transaction(lambda tx: {}["missing"])),
            ("after", lambda: fx.put("command_after", "b", resource=_ref(2))),
        ],
    )
    release.set()
    outcomes.join()
    assert outcomes.values == {"holder": "held"}  # the holder committed alone, before
    assert set(outcomes.errors) == {"before", "breaker", "raiser", "after"}
    for error in outcomes.errors.values():
        assert isinstance(error, AidememoError) and error.code is ErrorCode.STORAGE_FAILURE
    assert fx.store.read(lambda tx: tx.get_project(SCOPE)).head_seq == 0  # type: ignore[union-attr]
    for command_id in ("command_before", "command_after"):
        assert fx.store.read(lambda tx, c=command_id: tx.get_receipt(SCOPE, c)) is None
    assert fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 100).records == []
    assert fx.put("command_retry", "a", resource=_ref(1)).project_seq == 1  # usable again
    fx.store.close()


def test_store7_group_commit_bounded_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fx = _open(tmp_path / "db.sqlite")
    commits = _count_commits(_executor(fx), monkeypatch)
    outcomes = _Outcomes()
    release = _hold_writer(fx, outcomes)
    count = MAX_BATCH + 3
    calls: list[tuple[str, Callable[[], Any]]] = [
        (f"c{i}", lambda i=i: fx.put(f"command_{i}", "v", resource=_ref(i)))  # type: ignore[misc]
        for i in range(count)
    ]
    _queue_in_order(fx, outcomes, calls)
    release.set()
    outcomes.join()
    assert outcomes.errors == {}
    assert [outcomes.values[f"c{i}"].project_seq for i in range(count)] == list(range(1, count + 1))
    assert len(commits) == 3  # the holder, a full batch, then the remaining three
    fx.store.close()


def test_store7_group_commit_direct_path_and_caller_context(tmp_path: Path) -> None:
    fx = _open(tmp_path / "db.sqlite")
    # Uncontended: the callback runs on the caller's own thread.
    assert fx.store.transaction(lambda tx: threading.current_thread()) is threading.current_thread()
    # Queued: the callback runs on the leader's thread, but in its caller's context.
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="none")
    outcomes = _Outcomes()
    release = _hold_writer(fx, outcomes)

    def tagged(tag: str) -> str:
        marker.set(tag)
        return fx.store.transaction(lambda tx: marker.get())

    _queue_in_order(fx, outcomes, [("x", lambda: tagged("x")), ("y", lambda: tagged("y"))])
    release.set()
    outcomes.join()
    assert outcomes.values["x"] == "x" and outcomes.values["y"] == "y"

    # A caller that queued alone is promoted and runs alone, on its own thread.
    lone = _Outcomes()
    release = _hold_writer(fx, lone)
    _queue_in_order(
        fx,
        lone,
        [("z", lambda: (fx.store.transaction(lambda tx: threading.current_thread()),))],
    )
    release.set()
    lone.join()
    assert lone.values["z"][0] is next(t for t in lone.threads if t.name == "z")
    fx.store.close()


# -- reads off the writer's lock ------------------------------------------------------------


def test_store7_reads_do_not_wait_for_the_writer(tmp_path: Path) -> None:
    fx = _open(tmp_path / "db.sqlite")
    fx.put("command_a", "a")
    outcomes = _Outcomes()
    release = _hold_writer(fx, outcomes)  # holds BEGIN IMMEDIATE with a write in flight
    try:
        started = time.monotonic()
        assert fx.identity.membership(fx.actor, PROJECT) is not None
        page = fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 100)
        assert [c.seq for c in page.records] == [1]
        # The holder's write is not committed, so no read view sees it yet.
        assert not fx.store.read(lambda tx: tx.tenant_exists("tenant_holder"))
        assert time.monotonic() - started < 5  # busy_timeout would be 5 s
    finally:
        release.set()
        outcomes.join()
    assert outcomes.values["holder"] == "held"
    assert fx.store.read(lambda tx: tx.tenant_exists("tenant_holder"))  # visible once committed
    fx.store.close()


def test_store7_read_view_is_read_only_and_consistent(tmp_path: Path) -> None:
    fx = _open(tmp_path / "db.sqlite")
    executor = _executor(fx)

    def write_in_read(tx: Any) -> None:
        executor.execute("INSERT INTO tenants (tenant_id, created_at_ms) VALUES ('t_x', 1)")

    with pytest.raises(AidememoError) as info:
        fx.store.read(write_in_read)
    assert info.value.code is ErrorCode.STORAGE_FAILURE
    with pytest.raises(AidememoError):
        fx.store.read(lambda tx: fx.store.transaction(lambda w: None))

    # One snapshot for the whole view: a commit in the middle of it is not seen.
    writer = threading.Thread(target=lambda: fx.put("command_mid", "m"))

    def two_reads(tx: Any) -> tuple[int, int]:
        first = tx.get_project(SCOPE).head_seq
        writer.start()
        writer.join(timeout=30)
        return first, tx.get_project(SCOPE).head_seq

    assert fx.store.read(two_reads) == (0, 0)
    assert fx.store.read(lambda tx: tx.get_project(SCOPE).head_seq) == 1
    fx.store.close()


def test_store7_reader_pool_bounded_and_closed(tmp_path: Path) -> None:
    from aidememo.stores.sqlite.sqlite3_executor import MAX_IDLE_READERS

    fx = _open(tmp_path / "db.sqlite")
    executor = _executor(fx)
    inside = threading.Barrier(MAX_IDLE_READERS + 4)
    outcomes = _Outcomes()
    for i in range(MAX_IDLE_READERS + 4):
        outcomes.start(f"r{i}", lambda: fx.store.read(lambda tx: inside.wait(timeout=30)))
    outcomes.join()
    assert outcomes.errors == {}
    assert len(executor._idle) == MAX_IDLE_READERS
    assert len(executor._readers) == MAX_IDLE_READERS
    fx.store.close()
    assert executor._readers == set()
    with pytest.raises(AidememoError):
        fx.store.read(lambda tx: tx.get_project(SCOPE))


@pytest.mark.parametrize("memory", [False, True])
def test_store7_standalone_read_needs_no_begin_and_stays_alone(
    tmp_path: Path, memory: bool
) -> None:
    fx = Fixture.create(
        SqliteStore.open_memory if memory else lambda: SqliteStore.open_file(tmp_path / "db")
    )
    digest = bytes([9]) * 32
    fx.identity.provision_member(TENANT, PROJECT, "actor_tok", token_sha256=digest)
    executor = _executor(fx)
    statements: list[str] = []
    conn = executor._conn if memory else None

    def trace(tx: Any) -> Any:
        reader = executor._local.conn
        assert reader is not None
        reader.set_trace_callback(statements.append)
        try:
            return tx.authenticate_token(digest)
        finally:
            reader.set_trace_callback(None)

    assert fx.store.read(trace) is not None
    assert len(statements) == 1 and statements[0].startswith("SELECT")  # no BEGIN, no COMMIT
    with pytest.raises(AidememoError) as info:  # a second statement would read another snapshot
        fx.store.read(lambda tx: (tx.authenticate_token(digest), tx.get_project(SCOPE)))
    assert info.value.code is ErrorCode.STORAGE_FAILURE
    # After another statement began the view, it is an ordinary statement of that snapshot.
    both = fx.store.read(lambda tx: (tx.get_project(SCOPE), tx.authenticate_token(digest)))
    assert both[0] is not None and both[1] is not None
    assert conn is None or not conn.in_transaction
    fx.store.close()


def test_reads5_store7_a_resource_read_is_one_statement_without_begin(tmp_path: Path) -> None:
    fx = Fixture.create(lambda: SqliteStore.open_file(tmp_path / "db"))
    digest = bytes([8]) * 32
    fx.identity.provision_member(TENANT, PROJECT, "actor_tok", token_sha256=digest)
    fx.put("command_one", "a")
    executor = _executor(fx)
    for token, actor in ((None, ACTOR), (digest, "actor_tok")):
        statements: list[str] = []

        def trace(
            tx: Any, token: bytes | None = token, actor: str = actor, seen: list[str] = statements
        ) -> Any:
            reader = executor._local.conn
            assert reader is not None
            reader.set_trace_callback(seen.append)
            try:
                return tx.get_access_resource(SCOPE, actor, token, RESOURCE)
            finally:
                reader.set_trace_callback(None)

        project, member, found = fx.store.read(trace)
        assert project is not None and member is not None and found is not None
        assert len(statements) == 1 and statements[0].startswith("SELECT")  # no BEGIN, COMMIT
    fx.store.close()
