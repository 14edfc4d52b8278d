"""PostgreSQL's copy of the raw command checks against the domain's (SPEC.md STORE-9).

`aidememo_raw_verdict` is the SQL copy of `aidememo.domain.admission.raw_verdict`, which the
guarded write runs inside the database (`aidememo_execute_raw`). Every combination of the rows
the checks read (project found or not; no membership, or each role active or suspended; no
receipt, this command's, or one differing in actor, fingerprint, kind or id; a secret or not;
no current resource or revision 3; no expectation, 3 or 2; a put or a delete) goes through
both, and each must answer the same verdict. The table reaches every verdict, so each check of
CMD-3..5, SEC-3, REV-2 and REV-3 is seen both passing and refusing. How the function's inputs
come from the rows is tested end to end in tests/stores/test_raw_guarded_write.py.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from aidememo.conformance.harness import ACTOR, PROJECT, RESOURCE, TENANT, Fixture
from aidememo.domain.admission import WRITER_ROLES, raw_verdict
from aidememo.domain.canonical import canonical_bytes
from aidememo.domain.clock import FixedClock
from aidememo.domain.envelope import Command
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import (
    ChangeOp,
    CommandCall,
    CommandStart,
    Membership,
    MemberStatus,
    Project,
    RawWrite,
    Receipt,
    ResourceRef,
    Role,
    Scope,
    StoredResource,
    Verdict,
)
from aidememo.domain.secrets import SecretFinding
from aidememo.service.access import Caller
from aidememo.service.ledger import Ledger, command_fingerprint
from aidememo.stores.postgres import PostgresStore, schema
from tests import pg

pytestmark = pytest.mark.postgres

T, P, CMD, FP = "tenant_v", "project_v", "command_v", "f" * 64
REF = ResourceRef("custom.note", "note_v")
MEMBERS: tuple[tuple[Role, MemberStatus] | None, ...] = (
    None,
    *itertools.product(Role, MemberStatus),
)
RECEIPTS = {  # the stored receipt under the command id: (actor, fingerprint, kind, id)
    "none": None,
    "same": (ACTOR, FP, REF.kind, REF.id),
    "other_actor": ("actor_w", FP, REF.kind, REF.id),
    "other_fingerprint": (ACTOR, "e" * 64, REF.kind, REF.id),
    "other_kind": (ACTOR, FP, "custom.other", REF.id),
    "other_id": (ACTOR, FP, REF.kind, "note_w"),
}


@dataclass(frozen=True)
class Case:
    project: bool
    member: tuple[Role, MemberStatus] | None
    receipt: str
    secret: bool
    current: int | None
    expected: int | None
    op: ChangeOp

    def python(self) -> Verdict:
        """The domain's verdict on this case's rows."""
        scope = Scope(T, P)
        project = Project(T, P, "epoch_v", 7) if self.project else None
        member = None
        if self.member is not None:
            member = Membership(T, P, ACTOR, *self.member)
        stored = RECEIPTS[self.receipt]
        receipt = None
        if stored is not None:
            actor, fp, kind, rid = stored
            receipt = Receipt(CMD, fp, T, P, actor, 5, ResourceRef(kind, rid), 1, 900)
        current = None if self.current is None else StoredResource(REF, self.current, None)
        write = RawWrite(
            call=CommandCall(scope, ACTOR, CMD, REF),
            fingerprint=FP,
            expected_revision=self.expected,
            operation="resource.put",
            op=self.op,
            body=None if self.op is ChangeOp.DELETE else b"{}",
            now_ms=1_000,
            secret=SecretFinding("aws_access_key_id", "/payload/k") if self.secret else None,
        )
        return raw_verdict(write, CommandStart(project, member, receipt, current))

    def sql_row(self) -> tuple[Any, ...]:
        """This case as `aidememo_raw_verdict`'s arguments, the way the guarded write passes
        the rows it read."""
        role, status = (None, None) if self.member is None else (self.member[0], self.member[1])
        stored = RECEIPTS[self.receipt] or (None, None, None, None)
        return (
            self.project, role and role.value, status and status.value, " ".join(WRITER_ROLES),
            ACTOR, FP, REF.kind, REF.id, *stored,
            self.secret, self.expected, self.current, self.op is ChangeOp.DELETE,
        )  # fmt: skip


CASES = [
    Case(*values)
    for values in itertools.product(
        (True, False),
        MEMBERS,
        RECEIPTS,
        (False, True),
        (None, 3),
        (None, 3, 2),
        (ChangeOp.UPSERT, ChangeOp.DELETE),
    )
]

_COLUMNS = (
    ("project_found", "boolean"),
    ("member_role", "text"),
    ("member_status", "text"),
    ("writers", "text"),
    ("actor", "text"),
    ("fingerprint", "text"),
    ("kind", "text"),
    ("resource", "text"),
    ("r_actor", "text"),
    ("r_fingerprint", "text"),
    ("r_kind", "text"),
    ("r_resource", "text"),
    ("secret", "boolean"),
    ("expected", "bigint"),
    ("current", "bigint"),
    ("is_delete", "boolean"),
)
# Every case in one statement: one array per argument, unnested side by side, in case order.
VERDICTS_SQL = (
    f"SELECT aidememo_raw_verdict({', '.join(f't.{name}' for name, _ in _COLUMNS)}) "
    f"FROM unnest({', '.join(f'%s::{kind}[]' for _, kind in _COLUMNS)}) "
    f"WITH ORDINALITY AS t({', '.join(name for name, _ in _COLUMNS)}, n) ORDER BY t.n"
)


def sql_verdicts(db: pg.Database, cases: list[Case]) -> list[str]:
    """`aidememo_raw_verdict` of the real database on each case."""
    columns = [list(column) for column in zip(*(case.sql_row() for case in cases), strict=True)]
    with pg.admin(db.url) as conn:
        return [row[0] for row in conn.execute(VERDICTS_SQL, columns).fetchall()]


def test_store9_the_postgres_checks_answer_the_domains_verdict_on_every_case(
    db: pg.Database,
) -> None:
    answers = sql_verdicts(db, CASES)
    assert len(answers) == len(CASES) == 2 * 9 * 6 * 2 * 2 * 3 * 2
    differ = [
        (case, answer, case.python().value)
        for case, answer in zip(CASES, answers, strict=True)
        if answer != case.python().value
    ]
    assert not differ, f"{len(differ)} cases differ, first: {differ[:3]}"
    assert {Verdict(answer) for answer in answers} == set(Verdict)


def test_store9_each_verdict_is_reached_where_the_checks_order_says() -> None:
    """Spot checks of the table's Python side, so a rule changed in both copies alike still
    shows: CMD-5's order is membership, receipt, secret, then the revisions."""
    base = Case(True, (Role.WRITER, MemberStatus.ACTIVE), "none", False, 3, None, ChangeOp.UPSERT)

    def verdict(**changes: Any) -> Verdict:
        return Case(**{**base.__dict__, **changes}).python()

    assert verdict() is Verdict.ADMITTED
    assert verdict(project=False, receipt="other_actor") is Verdict.NO_MEMBERSHIP
    assert verdict(member=(Role.WRITER, MemberStatus.SUSPENDED)) is Verdict.NO_MEMBERSHIP
    assert verdict(member=(Role.READER, MemberStatus.ACTIVE), secret=True) is Verdict.READ_ONLY
    assert verdict(receipt="same", secret=True, expected=2) is Verdict.REPLAY
    assert verdict(receipt="other_kind", secret=True) is Verdict.COMMAND_CONFLICT
    assert verdict(secret=True, expected=2) is Verdict.SECRET
    assert verdict(current=None, expected=3, op=ChangeOp.DELETE) is Verdict.NOT_FOUND
    assert verdict(expected=2) is Verdict.STALE_REVISION
    assert verdict(current=None, op=ChangeOp.DELETE) is Verdict.DELETE_MISSING
    assert verdict(current=None) is Verdict.ADMITTED


V14_EXECUTE_RAW = Path(__file__).parents[1] / "data" / "pg_execute_raw_v14.sql"
OLD_CALL = (  # version 14's signature: ..., p_writers, p_expected, p_must_exist, ...
    "SELECT committed, seq FROM aidememo_execute_raw(NULL, NULL, %s, %s, %s, %s, %s, %s, %s, "
    "'owner admin writer', NULL, false, 'resource.put', 'upsert', %s, 1500)"
)
FUNCTIONS = (
    "SELECT count(*) FROM pg_proc WHERE proname = %s "
    "AND pronamespace = current_schema()::regnamespace"
)


def test_store9_store6_a_version_14_database_upgrades_its_guarded_write_in_place(
    driver: str,
) -> None:
    """A database left at version 14, with a raw command its guarded write committed: the
    migration replaces the function in place (no second overload stays), the command replays
    through the new one, and the next commands are written or refused as before."""
    with pg.fresh_database(migrated=False) as db:
        with pg.admin(db.url) as conn, conn.transaction():
            conn.execute(schema.CREATE_VERSION_TABLE)
            for version, steps in schema.MIGRATIONS:
                for statement in steps if version <= 14 else ():
                    conn.execute(statement)
            conn.execute(V14_EXECUTE_RAW.read_text())
            conn.execute(schema.UPSERT_VERSION, (schema.COMPONENT, 14))
        Fixture.create(lambda: PostgresStore(db.connect(driver))).store.close()
        first = Command(
            "command_old", PROJECT, None, "resource.put", RESOURCE, ChangeOp.UPSERT, {"v": 1}
        )
        body = canonical_bytes(first.payload)
        with pg.admin(db.url) as conn:
            committed, seq = conn.execute(
                OLD_CALL,
                (TENANT, PROJECT, ACTOR, first.command_id, command_fingerprint(first, body),
                 RESOURCE.kind, RESOURCE.id, body),
            ).fetchone()  # fmt: skip
        assert (committed, seq) == (True, 1)
        with pytest.raises(AidememoError, match="aidememo admin migrate"):
            PostgresStore.open(db.connect(driver))
        store = PostgresStore.open(db.connect(driver), migrate=True)
        try:
            assert store.schema_version() == schema.SCHEMA_VERSION == 15
            with pg.admin(db.url) as conn:
                for name in ("aidememo_execute_raw", "aidememo_raw_verdict"):
                    assert conn.execute(FUNCTIONS, (name,)).fetchone() == (1,), name
            ledger = Ledger(store, FixedClock(2_000))
            caller = Caller(TENANT, ACTOR)
            again = ledger.execute_raw(caller, first)
            assert again.replayed and (again.project_seq, again.committed_at_ms) == (1, 1_500)
            second = replace(first, command_id="command_new", expected_revision=1)
            receipt = ledger.execute_raw(caller, second)
            assert (receipt.project_seq, receipt.revision, receipt.replayed) == (2, 2, False)
            with pytest.raises(AidememoError) as err:
                ledger.execute_raw(caller, replace(second, command_id="command_stale"))
            assert err.value.code is ErrorCode.STALE_REVISION
            assert err.value.message == "expected revision 1, current revision is 2"
        finally:
            store.close()
