"""Every store's guarded write of raw commands (`Store.execute_raw`) against the reference.

Hypothesis drives random sequences of raw commands (puts and deletes of a few resources by a
few actors: fresh commands, identical replays, reuse of a command id for something else,
stale and missing expectations, deletes of resources never written, payloads holding a secret,
a reader, a suspended writer and a stranger writing) side by side through:

- the reference: the generic pipeline (`Ledger.execute`: begin_command, the checks, then
  commit_mutation) on the in-memory store;
- `Ledger.execute_raw` on the in-memory store, on SQLite and on PostgreSQL (one
  `aidememo_execute_raw` statement per command).

Every command must give the same receipt, or the same error code and message, on all four;
afterwards the change feed, the snapshot, the audit rows and the stored receipts must be equal.
PostgreSQL runs with psycopg 3 and pg8000, directly and through PgBouncer in transaction pool
mode. Each example uses a tenant of its own, so examples share one schema without seeing each
other.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aidememo.conformance.harness import raw_decide
from aidememo.domain.clock import FixedClock
from aidememo.domain.envelope import Command
from aidememo.domain.errors import AidememoError
from aidememo.domain.model import ChangeOp, MemberStatus, Receipt, ResourceRef, Role, Scope
from aidememo.domain.secrets import find_in_json
from aidememo.ports import Store
from aidememo.service.access import Caller
from aidememo.service.identity import IdentityService
from aidememo.service.ledger import Ledger
from aidememo.stores.in_memory import InMemoryStore
from aidememo.stores.postgres import PostgresStore
from aidememo.stores.sqlite import SqliteStore
from tests import pg

pytestmark = pytest.mark.postgres

PROJECT = "project_prop"
EPOCH = "epoch_prop"
WRITERS = ("actor_a", "actor_b")
READER = "actor_reader"
SUSPENDED = "actor_suspended"  # a writer whose membership is suspended
STRANGER = "actor_stranger"  # no membership at all
RESOURCES = (
    ResourceRef("custom.note", "note_1"),
    ResourceRef("custom.note", "note_2"),
    ResourceRef("custom.other", "note_1"),
)
SECRET = "AKIA" + "IOSFODNN7EXAMPLE"  # an AWS access key id's shape (SEC-1)
_tenants = itertools.count()


@dataclass(frozen=True)
class Spec:
    """One raw command, before its command id is chosen. `expected` is the expected
    revision, or in a drawn step the offset from the current revision at the time."""

    actor: str
    resource: ResourceRef
    delete: bool
    expected: int | None
    tag: int

    def command(self, command_id: str, expected: int | None) -> Command:
        if self.delete:
            return Command(
                command_id, PROJECT, expected, "resource.delete", self.resource,
                ChangeOp.DELETE, None,
            )  # fmt: skip
        return Command(
            command_id, PROJECT, expected, "resource.put", self.resource, ChangeOp.UPSERT,
            {"tag": self.tag, "text": SECRET if self.tag == 5 else "서버 x" * (self.tag % 3)},
        )  # fmt: skip


specs = st.builds(
    Spec,
    actor=st.sampled_from((*WRITERS * 4, READER, SUSPENDED, STRANGER)),
    resource=st.sampled_from((RESOURCES[0], RESOURCES[0], *RESOURCES)),
    delete=st.sampled_from((False, False, False, True)),
    # None: unconditional; else current revision + offset (0: matches; never below 1)
    expected=st.sampled_from((None, None, None, 0, 0, -1, 1, -2)),
    tag=st.integers(min_value=0, max_value=5),
)
# A step is a fresh command, an identical replay of an earlier step, an earlier step's command
# id reused for another command (by whoever), altered (same actor and resource, another
# payload or change: only the fingerprint differs) or stolen (the same command sent by another
# actor: only the actor differs).
_earlier = st.integers(min_value=0, max_value=40)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("fresh"), specs, st.just(0)),
        st.tuples(st.just("replay"), st.none(), _earlier),
        st.tuples(st.just("reuse"), specs, _earlier),
        st.tuples(st.just("alter"), st.none(), _earlier),
        st.tuples(st.just("steal"), st.none(), _earlier),
    ),
    min_size=8,
    max_size=30,
)


@dataclass
class Side:
    """One store with a ledger and a clock of its own (all clocks move together); `generic`
    runs commands through the generic pipeline instead of the guarded write."""

    name: str
    store: Store
    clock: FixedClock
    ledger: Ledger
    generic: bool = False

    def run(self, caller: Caller, command: Command) -> Receipt:
        if not self.generic:
            return self.ledger.execute_raw(caller, command)
        secret = None
        if command.change is ChangeOp.UPSERT:
            secret = find_in_json(command.payload, "/payload")
        return self.ledger.execute(caller, command, raw_decide(command), secret=secret)


def _provision(store: Store, tenant: str) -> None:
    identity = IdentityService(store, FixedClock(500), _Ids())
    for actor in WRITERS:
        identity.bootstrap(
            tenant_id=tenant, project_id=PROJECT, actor_id=actor, role=Role.WRITER,
            project_epoch=EPOCH,
        )  # fmt: skip
    for actor, role in ((READER, Role.READER), (SUSPENDED, Role.WRITER)):
        identity.bootstrap(
            tenant_id=tenant, project_id=PROJECT, actor_id=actor, role=role,
            project_epoch=EPOCH,
        )  # fmt: skip
    identity.set_membership(tenant, PROJECT, SUSPENDED, status=MemberStatus.SUSPENDED)


class _Ids:
    def __init__(self) -> None:
        self.n = 0

    def new_id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_{self.n}"


def _outcome(side: Side, tenant: str, actor: str, command: Command) -> tuple[Any, ...]:
    try:
        receipt = side.run(Caller(tenant, actor), command)
    except AidememoError as exc:
        return ("error", exc.code.value, exc.message)
    return ("receipt", receipt)


def _altered(command: Command) -> Command:
    """The same actor, id and resource, another fingerprint."""
    if command.change is ChangeOp.DELETE:
        return replace(
            command, operation="resource.put", change=ChangeOp.UPSERT, payload={"tag": 9}
        )
    return replace(command, payload={"tag": 9, "was": command.payload})


def _revision(store: Store, tenant: str, ref: ResourceRef) -> int:
    current = store.read(lambda tx: tx.get_resource(Scope(tenant, PROJECT), ref))
    return 0 if current is None else current.revision


def _state(store: Store, tenant: str) -> tuple[Any, ...]:
    scope = Scope(tenant, PROJECT)

    def read(tx: Any) -> tuple[Any, ...]:
        return (
            tx.get_project(scope),
            tx.list_changes(scope, 0, 10_000),
            tx.list_resources(scope, 10_000),
            tx.list_audit(scope),
            tx.list_receipts(scope),
        )

    return store.read(read)


@pytest.fixture(
    params=[("psycopg", False), ("pg8000", False), ("psycopg", True), ("pg8000", True)],
    ids=["postgres_psycopg", "postgres_pg8000", "pgbouncer_psycopg", "pgbouncer_pg8000"],
)
def sides(request: pytest.FixtureRequest) -> Iterator[list[Side]]:
    driver, pooled = request.param
    with pg.fresh_database(pooled=pooled) as db:
        postgres = PostgresStore.open(db.connect(driver))
        sqlite = SqliteStore.open_memory()
        try:
            yield [
                _side("reference", InMemoryStore(), generic=True),
                _side("memory", InMemoryStore()),
                _side("sqlite", sqlite),
                _side("postgres", postgres),
            ]
        finally:
            postgres.close()
            sqlite.close()


def _side(name: str, store: Store, generic: bool = False) -> Side:
    clock = FixedClock(1_000)
    return Side(name, store, clock, Ledger(store, clock), generic)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=steps)
def test_store9_random_raw_sequences_agree_with_the_reference(
    sides: list[Side], script: list[tuple[str, Spec | None, int]]
) -> None:
    tenant = f"tenant_prop_{next(_tenants)}"
    for side in sides:
        _provision(side.store, tenant)
    done: list[tuple[str, Command]] = []  # (actor, command) of every step so far
    for n, (kind, spec, back) in enumerate(script):
        if kind in ("replay", "alter", "steal"):
            if not done:
                continue
            actor, command = done[back % len(done)]
            if kind == "alter":
                command = _altered(command)
            elif kind == "steal":
                actor = WRITERS[1] if actor == WRITERS[0] else WRITERS[0]
        else:
            assert spec is not None
            command_id = f"command_{n}"
            if kind == "reuse" and done:
                command_id = done[back % len(done)][1].command_id
            expected = None
            if spec.expected is not None:
                current = _revision(sides[0].store, tenant, spec.resource)
                expected = max(1, current + spec.expected)
            actor, command = spec.actor, spec.command(command_id, expected)
        done.append((actor, command))
        outcomes = []
        for side in sides:
            side.clock.advance(7)
            outcomes.append(_outcome(side, tenant, actor, command))
        reference = outcomes[0]
        event(f"{kind}: {reference[1] if reference[0] == 'error' else 'receipt'}")
        for side, outcome in zip(sides[1:], outcomes[1:], strict=True):
            assert outcome == reference, (side.name, n, kind, command)
    reference_state = _state(sides[0].store, tenant)
    for side in sides[1:]:
        assert _state(side.store, tenant) == reference_state, side.name


def test_store9_the_sequence_covers_every_outcome(sides: list[Side]) -> None:
    """A fixed script that hits each outcome once, so the property's reach is not luck."""
    tenant = f"tenant_fixed_{next(_tenants)}"
    for side in sides:
        _provision(side.store, tenant)
    note = RESOURCES[0]
    script: list[tuple[str, Spec]] = [
        ("c1", Spec(WRITERS[0], note, False, None, 1)),  # create
        ("c1", Spec(WRITERS[0], note, False, None, 1)),  # identical replay
        ("c1", Spec(WRITERS[1], note, False, None, 1)),  # another actor: conflict
        ("c1", Spec(WRITERS[0], note, False, None, 2)),  # another payload: conflict
        ("c1", Spec(WRITERS[0], RESOURCES[1], False, None, 1)),  # another resource: conflict
        ("c2", Spec(WRITERS[1], note, False, 3, 2)),  # stale
        ("c3", Spec(WRITERS[1], RESOURCES[1], False, 1, 2)),  # expected, never written
        ("c4", Spec(WRITERS[1], RESOURCES[1], True, None, 0)),  # delete never written
        ("c5", Spec(READER, note, False, None, 3)),  # a reader may not write
        ("c6", Spec(STRANGER, note, False, None, 3)),  # nor may a stranger
        ("c6", Spec(SUSPENDED, note, False, None, 3)),  # nor a suspended writer
        ("c7", Spec(WRITERS[1], note, False, 1, 4)),  # update at the expected revision
        ("c8", Spec(WRITERS[0], note, True, 2, 0)),  # delete at the expected revision
        ("c9", Spec(WRITERS[0], note, True, None, 0)),  # delete a tombstone: a new one
        ("c10", Spec(WRITERS[1], note, False, 4, 4)),  # recreate over the tombstone
        ("c11", Spec(WRITERS[1], note, False, None, 5)),  # a secret
        ("c10", Spec(WRITERS[1], note, False, 4, 5)),  # a secret in a conflicting reuse
    ]
    seen = set()
    for command_id, spec in script:
        outcomes = [
            _outcome(side, tenant, spec.actor, spec.command(command_id, spec.expected))
            for side in sides
        ]
        assert all(outcome == outcomes[0] for outcome in outcomes), (command_id, outcomes)
        seen.add(outcomes[0][1] if outcomes[0][0] == "error" else "receipt")
    assert seen == {
        "receipt",
        "command_conflict",
        "stale_revision",
        "resource_not_found",
        "project_unauthorized",
        "secret_rejected",
    }
    reference_state = _state(sides[0].store, tenant)
    assert reference_state[0].head_seq == 5
    for side in sides[1:]:
        assert _state(side.store, tenant) == reference_state, side.name
