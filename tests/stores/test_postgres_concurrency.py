"""The PostgreSQL store under concurrent writers, on a real PostgreSQL 15 (STORE-3).

Each writer has its own store and so its own connections, as separate origin workers would.
Every test runs with psycopg 3 and again with pg8000.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from aidememo.conformance.harness import EPOCH, PROJECT, RESOURCE, TENANT, Fixture
from aidememo.domain.clock import FixedClock
from aidememo.domain.envelope import Command
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import ChangeOp, CommandCall, Project, Receipt, ResourceRef, Role, Scope
from aidememo.http.app import HttpApp
from aidememo.ports import WriteTx
from aidememo.service.ledger import Decision
from aidememo.stores.postgres import PostgresStore
from tests import pg
from tests.contract.support import (
    HERMES,
    LEASE_MS,
    RECEIVER,
    START_MS,
    WRITER,
    Api,
    InProcessClient,
    P,
)

pytestmark = pytest.mark.postgres

WRITERS = 8
COMMANDS = 200


@pytest.fixture
def db() -> Iterator[pg.Database]:
    """A fresh schema; every store opened through `db.open` is closed at teardown."""
    with pg.fresh_database() as database:
        opened: list[PostgresStore] = []
        plain_open = database.open

        def open_store(driver: str, **options: Any) -> PostgresStore:
            store = plain_open(driver, **options)
            opened.append(store)
            return store

        database.open = open_store  # type: ignore[method-assign]
        try:
            yield database
        finally:
            for store in opened:
                store.close()


def _run_threads(targets: list[Callable[[], None]], timeout: float = 120) -> None:
    errors: list[BaseException] = []

    def wrap(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as exc:
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), "a writer hung"
    if errors:
        raise errors[0]


@pytest.mark.timeout(300)
def test_rec2_store8_eight_writers_on_one_project_keep_a_dense_sequence(
    db: pg.Database, driver: str
) -> None:
    fixtures = [Fixture.create(lambda: db.open(driver, pool_size=1)) for _ in range(WRITERS)]
    acked: list[list[Receipt]] = [[] for _ in range(WRITERS)]
    barrier = threading.Barrier(WRITERS)

    def writer(n: int) -> Callable[[], None]:
        def run() -> None:
            fx = fixtures[n]
            barrier.wait()
            for i in range(COMMANDS):
                ref = ResourceRef("custom.fact", f"fact_{n}_{i % 7}")
                acked[n].append(fx.put(f"command_{n}_{i}", f"{n}:{i}", resource=ref))

        return run

    _run_threads([writer(n) for n in range(WRITERS)])
    fx = fixtures[0]
    scope = Scope(TENANT, PROJECT)
    changes = fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 10_000).records
    total = WRITERS * COMMANDS
    assert [c.seq for c in changes] == list(range(1, total + 1))
    for receipts in acked:  # each writer saw its own sequence numbers strictly increase
        seqs = [r.project_seq for r in receipts]
        assert seqs == sorted(seqs) and len(set(seqs)) == COMMANDS
    all_acked = [r for receipts in acked for r in receipts]
    assert sorted(r.project_seq for r in all_acked) == list(range(1, total + 1))
    by_seq = {c.seq: c for c in changes}
    for receipt in all_acked:  # every acknowledged receipt is stored, and matches its change
        stored = fx.store.read(lambda tx, r=receipt: tx.get_receipt(scope, r.command_id))
        assert stored == receipt
        change = by_seq[receipt.project_seq]
        assert (change.ref, change.revision) == (receipt.resource, receipt.revision)
    # revisions of each resource are dense too
    revisions: dict[ResourceRef, list[int]] = {}
    for change in changes:
        revisions.setdefault(change.ref, []).append(change.revision)
    assert all(revs == list(range(1, len(revs) + 1)) for revs in revisions.values())
    # replays, from another writer's store, return the stored receipt and write nothing
    for receipt in all_acked[:: total // 40]:
        n, i = (int(x) for x in receipt.command_id.split("_")[1:])
        ref = ResourceRef("custom.fact", f"fact_{n}_{i % 7}")
        again = fixtures[(n + 1) % WRITERS].put(receipt.command_id, f"{n}:{i}", resource=ref)
        assert again == receipt
    assert fx.store.read(lambda tx: tx.get_project(scope)).head_seq == total  # type: ignore[union-attr]
    assert len(fx.store.read(lambda tx: tx.list_audit(scope))) == total
    for f in fixtures:
        f.store.close()


def _apis(db: pg.Database, driver: str, count: int = 2) -> list[Api]:
    apis: list[Api] = []
    clock = FixedClock(START_MS)
    for n in range(count):
        app = HttpApp(db.open(driver), clock=clock, handoff_lease_ms=LEASE_MS)
        apis.append(Api(f"pg{n}", InProcessClient(app), app.services.identity, clock))
    for actor in (WRITER, RECEIVER, HERMES):
        token = apis[0].provision(actor, Role.WRITER)
        for api in apis[1:]:
            api.tokens[actor] = token
    return apis


def _close(apis: list[Api]) -> None:
    for api in apis:
        client = api.client
        assert isinstance(client, InProcessClient)
        client.app.services.store.close()


def _race(calls: list[Callable[[], tuple[int, str | None]]]) -> Counter[tuple[int, str | None]]:
    barrier = threading.Barrier(len(calls))
    results: list[tuple[int, str | None]] = []
    lock = threading.Lock()

    def wrap(call: Callable[[], tuple[int, str | None]]) -> Callable[[], None]:
        def run() -> None:
            barrier.wait()
            outcome = call()
            with lock:
                results.append(outcome)

        return run

    _run_threads([wrap(call) for call in calls], timeout=60)
    return Counter(results)


@pytest.mark.timeout(120)
def test_typ3_two_concurrent_creates_of_one_id_one_wins(db: pg.Database, driver: str) -> None:
    apis = _apis(db, driver)
    apis[0].session("s_race", source_id="race")
    rounds = 6
    for round_ in range(rounds):
        fact_id = f"fact_race_{round_}"

        def create(api: Api, actor: str, n: int, fact_id: str = fact_id) -> tuple[int, str | None]:
            body: dict[str, Any] = {
                "command_id": f"cmd_{fact_id}_{n}",
                "payload": {"fact_id": fact_id, "session_id": "s_race", "content": f"w {n}"},
            }
            reply = api.post(f"{P}/facts", body, actor)
            return reply.status, reply.code

        outcome = _race([lambda: create(apis[0], WRITER, 0), lambda: create(apis[1], HERMES, 1)])
        assert outcome == Counter({(200, None): 1, (409, "resource_already_exists"): 1})
    assert apis[1].head() == 1 + rounds
    _close(apis)


@pytest.mark.timeout(120)
def test_ho7_two_receivers_racing_accept_one_claim_wins_other_is_stale(
    db: pg.Database, driver: str
) -> None:
    apis = _apis(db, driver)
    api = apis[0]
    api.session("s_ho", source_id="src")
    rounds = 5
    for round_ in range(rounds):
        handoff = f"h_race_{round_}"
        revision = api.send(handoff, "s_ho", RECEIVER).expect(200)["revision"]

        def accept(a: Api, claim: str, h: str = handoff, rev: int = revision) -> Any:
            reply = a.transition(h, "accept", {"claim_id": claim}, rev)
            return reply.status, reply.code

        outcome = _race(
            [lambda: accept(apis[0], "claim_one"), lambda: accept(apis[1], "claim_two")]
        )
        assert outcome == Counter({(200, None): 1, (409, "stale_revision"): 1})  # HO-7
        status = api.status_of(handoff)
        assert status["revision"] == revision + 1
        assert status["record"]["status"] == "accepted"
        assert status["record"]["claim_id"] in ("claim_one", "claim_two")
        inbox = api.get(f"{P}/handoffs", RECEIVER, query={"box": "inbox"}).expect(200)
        row = next(a for a in inbox["assignments"] if a["record"]["handoff_id"] == handoff)
        assert row["revision"] == revision + 1
        assert row["record"]["claim_id"] == status["record"]["claim_id"]
    _close(apis)


@pytest.mark.timeout(60)
def test_store5_writer_terminated_mid_transaction_leaves_nothing_behind(
    db: pg.Database, driver: str
) -> None:
    fx = Fixture.create(lambda: db.open(driver))
    fx.put("command_create", "a")
    inside = threading.Event()
    terminated = threading.Event()
    outcome: list[BaseException] = []

    def decide(tx: WriteTx, project: Project, current: Any, now: int) -> Decision:
        # Write something inside the transaction, then wait until the backend is killed.
        tx.insert_tenant("tenant_half_written", now)
        inside.set()
        terminated.wait(30)
        return Decision(ChangeOp.UPSERT, b'{"fixture":"killed"}')

    command = Command(
        "command_killed", PROJECT, None, "fact.add", RESOURCE, ChangeOp.UPSERT, {"f": "k"}
    )

    def writer() -> None:
        try:
            fx.ledger.execute(fx.actor, command, decide)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    assert inside.wait(30)
    with pg.admin(db.server) as conn:
        killed = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND state = 'idle in transaction'",
            (db.name,),
        ).fetchall()
    assert killed == [(True,)]
    terminated.set()
    thread.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], AidememoError)
    assert outcome[0].code is ErrorCode.STORAGE_FAILURE
    assert outcome[0].__cause__ is not None  # the driver's exception, kept for the log
    scope = Scope(TENANT, PROJECT)
    assert not fx.store.read(lambda tx: tx.tenant_exists("tenant_half_written"))
    assert fx.store.read(lambda tx: tx.get_receipt(scope, "command_killed")) is None
    assert fx.put("command_next", "b").project_seq == 2  # no gap; the pool replaced the link
    assert fx.put("command_killed", "again").project_seq == 3  # the id was never used
    fx.store.close()


@pytest.mark.timeout(60)
def test_store8_pool_exhaustion_is_a_quick_storage_failure_and_503(
    db: pg.Database, driver: str
) -> None:
    store = db.open(driver, pool_size=1, acquire_timeout_s=0.2)
    holding = threading.Event()
    release = threading.Event()

    def hold(tx: Any) -> None:
        holding.set()
        release.wait(30)

    thread = threading.Thread(target=lambda: store.read(hold))
    thread.start()
    assert holding.wait(30)
    try:
        started = time.monotonic()
        with pytest.raises(AidememoError) as err:
            store.read(lambda tx: tx.tenant_exists(TENANT))
        assert err.value.code is ErrorCode.STORAGE_FAILURE
        assert time.monotonic() - started < 2
        app = HttpApp(store, clock=FixedClock(START_MS))
        status, headers, body = InProcessClient(app).request("GET", f"{P}/identity", token="a" * 64)
        assert status == 503 and body["error"]["code"] == "storage_failure"
        assert "retry-after" in headers
    finally:
        release.set()
        thread.join(30)
    assert not store.read(lambda tx: tx.tenant_exists(TENANT))  # usable again
    store.close()


@pytest.mark.timeout(60)
def test_store8_writers_of_two_projects_do_not_block_each_other(
    db: pg.Database, driver: str
) -> None:
    fx = Fixture.create(lambda: db.open(driver))
    other_project = "project_other"
    fx.identity.bootstrap(
        tenant_id=TENANT, project_id=other_project, actor_id=fx.actor.actor_id, role=Role.WRITER
    )
    locked = threading.Event()
    release = threading.Event()

    def hold_project_lock(tx: WriteTx) -> None:
        tx.begin_command(
            CommandCall(Scope(TENANT, PROJECT), fx.actor.actor_id, "command_hold", RESOURCE)
        )
        locked.set()
        release.wait(30)

    holder = db.open(driver)
    thread = threading.Thread(target=lambda: holder.transaction(hold_project_lock))
    thread.start()
    assert locked.wait(30)
    try:
        # Another project: commits at once, while the first project's row stays locked.
        started = time.monotonic()
        command = Command(
            "command_b", other_project, None, "fact.add", RESOURCE, ChangeOp.UPSERT, {"p": "b"}
        )
        receipt = fx.ledger.execute_raw(fx.actor, command)
        assert receipt.project_seq == 1
        assert time.monotonic() - started < 2
        # The same project: waits for the lock, and gives up after lock_timeout.
        impatient = Fixture.create(lambda: db.open(driver, lock_timeout_ms=300))
        started = time.monotonic()
        with pytest.raises(AidememoError) as err:
            impatient.put("command_a", "a")
        assert err.value.code is ErrorCode.STORAGE_FAILURE
        assert 0.25 < time.monotonic() - started < 5
        impatient.store.close()
    finally:
        release.set()
        thread.join(30)
    assert fx.put("command_a", "a").project_seq == 1  # the lock is free again
    holder.close()
    fx.store.close()


def test_store8_statement_timeout_is_per_transaction_only(db: pg.Database, driver: str) -> None:
    store = db.open(driver, pool_size=1, statement_timeout_ms=200)
    with pytest.raises(AidememoError) as err:
        store.read(lambda tx: tx._x.execute("SELECT pg_sleep(5)"))
    assert err.value.code is ErrorCode.STORAGE_FAILURE
    assert "cancel" in str(err.value.__cause__).lower()
    shown = store.read(lambda tx: tx._x.execute("SHOW statement_timeout"))
    assert [tuple(row) for row in shown] == [("200ms",)]
    # Outside a transaction the session keeps the server default: SET LOCAL never leaks to
    # whoever gets this connection next from a transaction-mode pool.
    conn = store.pool.acquire()
    try:
        cur = conn.cursor()
        cur.execute("SHOW statement_timeout")
        assert cur.fetchall()[0][0] == "0"
        cur.execute("SHOW lock_timeout")
        assert cur.fetchall()[0][0] == "0"
        cur.close()
    finally:
        store.pool.release(conn)
    store.close()
