"""Store guarantees beyond the portable checks: races, isolation, reopen, crashes (STORE-*)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from aidememo.conformance.harness import EPOCH, PROJECT, RESOURCE, TENANT, Fixture
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import Scope
from aidememo.ports import CAP_REOPEN, CAP_SECOND_PROCESS, CAP_TWO_CONNECTIONS, WriteTx
from aidememo.service.access import Caller
from tests.conformance.conftest import Backend


def test_store1_raising_callback_leaves_no_trace(backend: Backend) -> None:
    fx = Fixture.create(backend.open)
    fx.put("command_create", "a")

    def half_done(tx: WriteTx) -> None:
        tx.insert_tenant("tenant_ghost", 1)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fx.store.transaction(half_done)
    assert not fx.store.read(lambda tx: tx.tenant_exists("tenant_ghost"))
    assert fx.put("command_next", "b").project_seq == 2
    fx.store.close()


def test_rec1_same_project_id_isolated_by_tenant(backend: Backend) -> None:
    fx = Fixture.create(backend.open)
    fx.identity.bootstrap(tenant_id="tenant_b", project_id=PROJECT, actor_id="actor_fixture")
    fx.put("command_create", "a")
    other = Caller("tenant_b", "actor_fixture")
    epoch_b = fx.store.read(lambda tx: tx.get_project(Scope("tenant_b", PROJECT)))
    assert epoch_b is not None
    page_b = fx.queries.changes(other, PROJECT, epoch_b.project_epoch, 0, 100)
    assert page_b.records == [] and page_b.scope == Scope("tenant_b", PROJECT)
    page_a = fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 100)
    assert [r.seq for r in page_a.records] == [1]
    with pytest.raises(AidememoError) as err:
        fx.queries.resource(other, PROJECT, RESOURCE)
    assert err.value.code is ErrorCode.RESOURCE_NOT_FOUND
    fx.store.close()


def test_store4_everything_survives_close_and_reopen(backend: Backend) -> None:
    backend.require(CAP_REOPEN)
    fx = Fixture.create(backend.open)
    token = bytes([7]) * 32
    fx.identity.provision_member(TENANT, PROJECT, "actor_tok", token_sha256=token)
    first = fx.put("command_create", "a")
    fx.delete("command_delete", expected=1)
    before = fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 100)
    fx.store.close()

    again = Fixture.create(backend.open)  # bootstrap is idempotent on the reopened store
    assert again.put("command_create", "a") == first  # the receipt survived
    assert again.queries.changes(again.actor, PROJECT, EPOCH, 0, 100) == before
    assert again.queries.resource(again.actor, PROJECT, RESOURCE).deleted
    assert again.identity.authenticate(token) == Caller(TENANT, "actor_tok")
    assert again.put("command_after", "c").project_seq == 3
    again.store.close()


def test_store3_two_connections_racing_one_command_commit_once(backend: Backend) -> None:
    backend.require(CAP_TWO_CONNECTIONS)
    Fixture.create(backend.open).store.close()
    for round_ in range(5):
        fixtures = [Fixture.create(backend.open) for _ in range(2)]
        barrier = threading.Barrier(2)
        receipts: list[object] = []

        def submit(
            fx: Fixture, barrier: threading.Barrier, receipts: list[object], command_id: str
        ) -> None:
            barrier.wait()
            receipts.append(fx.put(command_id, "race"))

        threads = [
            threading.Thread(target=submit, args=(fx, barrier, receipts, f"command_race_{round_}"))
            for fx in fixtures
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(receipts) == 2 and receipts[0] == receipts[1]
        for fx in fixtures:
            fx.store.close()
    fx = Fixture.create(backend.open)
    seqs = [r.seq for r in fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 100).records]
    assert seqs == [1, 2, 3, 4, 5]
    assert len(fx.store.read(lambda tx: tx.list_audit(Scope(TENANT, PROJECT)))) == 5
    fx.store.close()


_KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    from aidememo.conformance.harness import Fixture
    from aidememo.stores.sqlite import SqliteStore
    from aidememo.service.ledger import Decision
    from aidememo.domain.envelope import Command
    from aidememo.domain.model import ChangeOp
    from aidememo.conformance.harness import PROJECT, RESOURCE

    fx = Fixture.create(lambda: SqliteStore.open_file(sys.argv[1]))

    def decide(tx, project, current, now):
        # Write something inside the transaction first, then hang until killed.
        tx.insert_tenant("tenant_half_written", now)
        print("inside", flush=True)
        time.sleep(60)
        return Decision(ChangeOp.UPSERT, b'{"fixture":"killed"}')

    cmd = Command("command_killed", PROJECT, None, "fact.add", RESOURCE, ChangeOp.UPSERT,
                  {"fixture": "killed"})
    fx.ledger.execute(fx.actor, cmd, decide)
    """
)


def test_store5_writer_killed_inside_transaction_leaves_no_trace(backend: Backend) -> None:
    backend.require(CAP_SECOND_PROCESS)
    assert backend.path is not None
    fx = Fixture.create(backend.open)
    fx.put("command_create", "a")
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(backend.path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "inside"
    finally:
        child.kill()  # SIGKILL: no cleanup runs in the child
        child.wait(timeout=10)
        if child.stdout is not None:
            child.stdout.close()
    assert not fx.store.read(lambda tx: tx.tenant_exists("tenant_half_written"))
    assert (
        fx.store.read(lambda tx: tx.get_receipt(Scope(TENANT, PROJECT), "command_killed")) is None
    )
    assert fx.put("command_next", "b").project_seq == 2  # no gap in the sequence
    fx.store.close()
