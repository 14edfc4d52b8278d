"""The fixture every conformance check starts from, and the violation it raises.

Plain Python with no pytest dependency, so the same checks run on CPython against every
store and inside Pyodide against the in-memory store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aidememo.domain.canonical import canonical_bytes
from aidememo.domain.clock import FixedClock
from aidememo.domain.envelope import Command
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import ChangeOp, Project, Receipt, ResourceRef, Role, StoredResource
from aidememo.ports import Store, WriteTx
from aidememo.service.access import Caller
from aidememo.service.identity import IdentityService
from aidememo.service.ledger import Decide, Decision, Ledger, check_raw
from aidememo.service.ledger_reads import LedgerReads

StoreFactory = Callable[[], Store]

TENANT = "tenant_fixture"
PROJECT = "project_fixture"
EPOCH = "epoch_fixture"
ACTOR = "actor_fixture"
OTHER_ACTOR = "actor_other"
RESOURCE = ResourceRef("custom.fact", "fact_fixture")


class ConformanceViolation(AssertionError):
    """A store broke the contract; carries the `conformance_violation` code (ERR-3)."""

    code = ErrorCode.CONFORMANCE_VIOLATION


def expect(condition: bool, message: str) -> None:
    """Raise a `ConformanceViolation` unless `condition` holds."""
    if not condition:
        raise ConformanceViolation(message)


def expect_error(code: ErrorCode, fn: Callable[[], Any]) -> None:
    """Run `fn` and require it to fail with exactly `code`."""
    try:
        fn()
    except AidememoError as exc:
        expect(exc.code is code, f"expected {code}, got {exc.code}: {exc.message}")
        return
    raise ConformanceViolation(f"expected {code}, but the call succeeded")


class _SeqIds:
    def __init__(self) -> None:
        self.n = 0

    def new_id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_{self.n}"


@dataclass
class Fixture:
    """A store with one project (epoch `EPOCH`) and two writers, and the services over it."""

    store: Store
    clock: FixedClock
    ledger: Ledger
    queries: LedgerReads
    identity: IdentityService
    actor: Caller
    other: Caller

    @classmethod
    def create(cls, factory: StoreFactory) -> Fixture:
        """Open a fresh store from `factory` and provision the fixture project."""
        store = factory()
        clock = FixedClock(1_000)
        identity = IdentityService(store, clock, _SeqIds())
        for actor_id in (ACTOR, OTHER_ACTOR):
            identity.bootstrap(
                tenant_id=TENANT,
                project_id=PROJECT,
                actor_id=actor_id,
                role=Role.WRITER,
                project_epoch=EPOCH,
            )
        return cls(
            store=store,
            clock=clock,
            ledger=Ledger(store, clock),
            queries=LedgerReads(store),
            identity=identity,
            actor=Caller(TENANT, ACTOR),
            other=Caller(TENANT, OTHER_ACTOR),
        )

    def put(
        self,
        command_id: str,
        tag: str,
        *,
        expected: int | None = None,
        operation: str = "fact.add",
        caller: Caller | None = None,
        resource: ResourceRef = RESOURCE,
    ) -> Receipt:
        """Upsert `{"fixture": tag}` into the fixture resource."""
        command = Command(
            command_id, PROJECT, expected, operation, resource, ChangeOp.UPSERT, {"fixture": tag}
        )
        return self.ledger.execute_raw(caller or self.actor, command)

    def delete(self, command_id: str, *, expected: int | None) -> Receipt:
        """Delete the fixture resource."""
        command = Command(
            command_id, PROJECT, expected, "fact.delete", RESOURCE, ChangeOp.DELETE, None
        )
        return self.ledger.execute_raw(self.actor, command)

    def put_generic(self, command_id: str, tag: str) -> Receipt:
        """`put` through the generic pipeline (`Ledger.execute`: `begin_command`, then
        `commit_mutation`) instead of the store's guarded write."""
        command = Command(
            command_id, PROJECT, None, "fact.add", RESOURCE, ChangeOp.UPSERT, {"fixture": tag}
        )
        return self.ledger.execute(self.actor, command, raw_decide(command))


def raw_decide(command: Command) -> Decide:
    """The decide of a generic put or delete on the generic pipeline (REV-2, REV-3): the
    reference `Store.execute_raw` is compared with."""
    body = canonical_bytes(command.payload) if command.change is ChangeOp.UPSERT else None

    def decide(tx: WriteTx, project: Project, current: StoredResource | None, now: int) -> Decision:
        check_raw(command, current)
        return Decision(command.change, body)

    return decide
