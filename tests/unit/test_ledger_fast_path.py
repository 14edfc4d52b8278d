"""`Ledger.execute_raw` over `Store.execute_raw`, without PostgreSQL: what the guarded write
carries, how the verdict it answers names the answer, the live-feed hook, and a store answering
a verdict without the receipt it needs. Every store's guarded write is tested against the
generic pipeline in tests/stores/test_raw_guarded_write.py."""

from __future__ import annotations

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.envelope import Command
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import (
    ChangeOp,
    RawOutcome,
    RawWrite,
    Receipt,
    ResourceRef,
    Scope,
    Verdict,
)
from aidememo.service.access import Caller
from aidememo.service.identity import IdentityService
from aidememo.service.ledger import Ledger
from aidememo.stores.in_memory import InMemoryStore

TENANT, PROJECT, ACTOR = "tenant_u", "project_u", "actor_u"
REF = ResourceRef("custom.note", "note_u")
CALLER = Caller(TENANT, ACTOR)
SECRET = "AKIA" + "IOSFODNN7EXAMPLE"


class ScriptedStore(InMemoryStore):
    """The in-memory store, whose guarded write answers from a script when one is given."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[RawOutcome] = []
        self.seen: list[RawWrite] = []

    def execute_raw(self, write: RawWrite) -> RawOutcome:
        self.seen.append(write)
        if self.answers:
            return self.answers.pop(0)
        return super().execute_raw(write)


def _setup() -> tuple[ScriptedStore, Ledger, list[int]]:
    store = ScriptedStore()
    IdentityService(store, FixedClock(1), _Ids()).bootstrap(
        tenant_id=TENANT, project_id=PROJECT, actor_id=ACTOR, project_epoch="epoch_u"
    )
    ledger = Ledger(store, FixedClock(5_000))
    hooked: list[int] = []
    ledger.on_commit.append(lambda scope, seq: hooked.append(seq))
    return store, ledger, hooked


class _Ids:
    def new_id(self, prefix: str) -> str:
        return f"{prefix}_1"


def _put(expected: int | None = None, payload: dict[str, object] | None = None) -> Command:
    return Command(
        "cmd_u", PROJECT, expected, "resource.put", REF, ChangeOp.UPSERT, payload or {"a": 1}
    )


def test_store9_the_write_carries_what_python_decides() -> None:
    store, ledger, hooked = _setup()
    first = ledger.execute_raw(CALLER, _put())
    again = ledger.execute_raw(CALLER, _put())
    assert (first.project_seq, first.revision, first.committed_at_ms) == (1, 1, 5_000)
    assert again == first and again.replayed and not first.replayed
    assert hooked == [1]  # the live feed hears of the commit, not of the replay
    write = store.seen[0]
    assert write.call.scope == Scope(TENANT, PROJECT) and write.now_ms == 5_000
    assert write.body == b'{"a":1}' and write.op is ChangeOp.UPSERT
    assert write.secret is None and len(write.fingerprint) == 64
    delete = Command("cmd_d", PROJECT, 1, "resource.delete", REF, ChangeOp.DELETE, None)
    ledger.execute_raw(CALLER, delete)
    assert store.seen[-1].op is ChangeOp.DELETE and store.seen[-1].body is None
    assert store.seen[-1].expected_revision == 1


def test_store9_sec3_a_secret_is_written_by_no_one_and_refused_after_replay() -> None:
    store, ledger, hooked = _setup()
    with pytest.raises(AidememoError) as err:
        ledger.execute_raw(CALLER, _put(payload={"key": SECRET}))
    assert err.value.code is ErrorCode.SECRET_REJECTED
    finding = store.seen[-1].secret
    assert finding is not None and finding.field == "/payload/key" and hooked == []
    outsider = Caller(TENANT, "actor_nobody")
    with pytest.raises(AidememoError) as err:  # membership first (AUTH-3)
        ledger.execute_raw(outsider, _put(payload={"key": SECRET}))
    assert err.value.code is ErrorCode.PROJECT_UNAUTHORIZED


def test_store9_a_refusal_raises_the_pipelines_own_error() -> None:
    store, ledger, hooked = _setup()
    store.answers = [RawOutcome(Verdict.STALE_REVISION, None, 2)]
    with pytest.raises(AidememoError) as err:
        ledger.execute_raw(CALLER, _put(expected=1))
    assert err.value.code is ErrorCode.STALE_REVISION
    assert err.value.message == "expected revision 1, current revision is 2"
    assert hooked == []


def test_store9_a_retried_write_that_finds_its_own_receipt_is_a_commit() -> None:
    """The store lost the first attempt's answer and sent the write again: the receipt it
    found may be that attempt's commit, so it is answered and announced as one."""
    store, ledger, hooked = _setup()
    ledger.execute_raw(CALLER, _put())  # learn the fingerprint
    fp = store.seen[0].fingerprint
    mine = Receipt("cmd_u", fp, TENANT, PROJECT, ACTOR, 4, REF, 1, 4_000)
    store.answers = [RawOutcome(Verdict.REPLAY, mine, 1, retried=True)]
    receipt = ledger.execute_raw(CALLER, _put())
    assert receipt == mine and not receipt.replayed
    assert hooked == [1, 4]


@pytest.mark.parametrize("verdict", [Verdict.ADMITTED, Verdict.REPLAY, Verdict.SECRET])
def test_store9_a_verdict_without_what_it_needs_is_a_storage_failure(verdict: Verdict) -> None:
    """A store answering a write or a replay without its receipt, or a secret for a command
    that held none, has a bug: `storage_failure`, and nothing is announced."""
    store, ledger, hooked = _setup()
    store.answers = [RawOutcome(verdict, None, None)]
    with pytest.raises(AidememoError) as err:
        ledger.execute_raw(CALLER, _put())
    assert err.value.code is ErrorCode.STORAGE_FAILURE
    assert hooked == []
