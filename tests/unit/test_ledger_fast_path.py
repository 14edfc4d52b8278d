"""`Ledger.execute_raw` and a store's fast path (`CAP_RAW_FAST_PATH`), without PostgreSQL:
which outcome leads where, the live-feed hook, and a store whose checks disagree with the
pipeline's. The PostgreSQL fast path itself is tested against the reference in
tests/stores/test_raw_fast_path.py."""

from __future__ import annotations

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.envelope import Command
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import (
    ChangeOp,
    CommandStart,
    Membership,
    MemberStatus,
    Project,
    RawOutcome,
    RawWrite,
    Receipt,
    ResourceRef,
    Role,
    Scope,
    StoredResource,
)
from aidememo.ports import CAP_RAW_FAST_PATH
from aidememo.service.access import Caller
from aidememo.service.identity import IdentityService
from aidememo.service.ledger import Ledger
from aidememo.stores.in_memory import InMemoryStore

TENANT, PROJECT, ACTOR = "tenant_u", "project_u", "actor_u"
REF = ResourceRef("custom.note", "note_u")
CALLER = Caller(TENANT, ACTOR)


class FastStore(InMemoryStore):
    """The reference store, plus a scripted fast path."""

    capabilities = frozenset({CAP_RAW_FAST_PATH})

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[RawOutcome | None] = []
        self.seen: list[RawWrite] = []

    def execute_raw(self, write: RawWrite) -> RawOutcome | None:
        self.seen.append(write)
        return self.answers.pop(0)


def _setup() -> tuple[FastStore, Ledger, list[int]]:
    store = FastStore()
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


def _put(expected: int | None = None) -> Command:
    return Command("cmd_u", PROJECT, expected, "resource.put", REF, ChangeOp.UPSERT, {"a": 1})


def _start(revision: int | None) -> CommandStart:
    project = Project(TENANT, PROJECT, "epoch_u", 3)
    member = Membership(TENANT, PROJECT, ACTOR, Role.WRITER, MemberStatus.ACTIVE)
    current = None if revision is None else StoredResource(REF, revision, None)
    return CommandStart(project, member, None, current)


def test_store9_the_write_carries_what_python_decides() -> None:
    store, ledger, hooked = _setup()
    receipt = Receipt("cmd_u", "fp", TENANT, PROJECT, ACTOR, 4, REF, 1, 5_000)
    store.answers = [RawOutcome("committed", receipt), RawOutcome("replayed", receipt)]
    assert ledger.execute_raw(CALLER, _put()) == receipt
    assert ledger.execute_raw(CALLER, _put()) == receipt
    assert hooked == [4]  # the live feed hears of the commit, not of the replay
    write = store.seen[0]
    assert write.scope == Scope(TENANT, PROJECT) and write.now_ms == 5_000
    assert write.body == b'{"a":1}' and write.op is ChangeOp.UPSERT
    assert len(write.fingerprint) == 64


def test_store9_none_means_the_generic_pipeline() -> None:
    store, ledger, hooked = _setup()
    store.answers = [None]
    receipt = ledger.execute_raw(CALLER, _put())
    assert (receipt.project_seq, receipt.revision, receipt.committed_at_ms) == (1, 1, 5_000)
    assert hooked == [1]


def test_store9_a_refusal_raises_the_pipelines_own_error() -> None:
    store, ledger, hooked = _setup()
    store.answers = [RawOutcome("refused", None, "stale_revision", _start(2))]
    with pytest.raises(AidememoError) as err:
        ledger.execute_raw(CALLER, _put(expected=1))
    assert err.value.code is ErrorCode.STALE_REVISION
    assert err.value.message == "expected revision 1, current revision is 2"
    assert hooked == []


@pytest.mark.parametrize(
    ("error", "revision"),
    [
        ("stale_revision", 1),  # the rows say the expectation holds
        ("resource_not_found", 2),  # the rows say the resource exists, at another revision
        ("project_unauthorized", 1),
    ],
)
def test_store9_a_store_that_disagrees_with_the_pipeline_is_a_storage_failure(
    error: str, revision: int
) -> None:
    store, ledger, _ = _setup()
    store.answers = [RawOutcome("refused", None, error, _start(revision))]
    with pytest.raises(AidememoError) as err:
        ledger.execute_raw(CALLER, _put(expected=1))
    assert err.value.code is ErrorCode.STORAGE_FAILURE


def test_store9_an_unknown_outcome_is_a_storage_failure() -> None:
    store, ledger, _ = _setup()
    store.answers = [RawOutcome("maybe")]
    with pytest.raises(AidememoError) as err:
        ledger.execute_raw(CALLER, _put())
    assert err.value.code is ErrorCode.STORAGE_FAILURE
