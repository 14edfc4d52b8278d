"""Typed answers of the HTTP contract (the component schemas of `openapi.json`).

Every model ignores fields it does not know, so a client keeps working against a server that
added one; the fields named here are the contract's and are checked when an answer is parsed
(`aidememo.client.records`). Records are frozen: an answer is a value, not something to edit
and send back.
"""

from __future__ import annotations

from typing import Any, Literal

from aidememo.client.records import Record


class Health(Record):
    status: str
    mode: str
    schema_version: int | None
    state: str


class Scope(Record):
    tenant_id: str
    project_id: str


class ResourceRef(Record):
    kind: str
    id: str


class Receipt(Record):
    """The stored answer of one command (CMD-3: a replay returns it unchanged)."""

    command_id: str
    fingerprint: str
    tenant_id: str
    project_id: str
    actor_id: str
    project_seq: int
    resource: ResourceRef
    revision: int
    committed_at_ms: int
    _replayed = False  # not a field: set by the client from the answer's header

    @property
    def replayed(self) -> bool:
        """The server answered with the stored receipt of an earlier application (the
        `aidememo-replayed` header, CMD-7)."""
        return self._replayed


class Written(Record):
    """The outcome of a write: the receipt, and whether this call found its exact command
    already applied (`recovered`, CLIENT-2)."""

    receipt: Receipt
    recovered: bool

    @property
    def id(self) -> str:
        """The id of the record written (a generated one when the caller left it out)."""
        return self.receipt.resource.id

    @property
    def command_id(self) -> str:
        return self.receipt.command_id


class Transition(Written):
    """The outcome of an accept, heartbeat or return, with the claim it acted under."""

    claim_id: str


class Identity(Record):
    tenant_id: str
    project_id: str
    project_epoch: str
    actor_id: str
    role: Literal["owner", "admin", "writer", "reader"]


class Member(Record):
    actor_id: str
    kind: str
    role: str
    status: str


class Members(Record):
    members: list[Member]


class ResourceState(Record):
    """`present` with the exact `body`, or `deleted` (a tombstone, REC-3)."""

    state: Literal["present", "deleted"]
    body: Any = None


class Resource(Record):
    scope: Scope
    resource: ResourceRef
    revision: int
    state: ResourceState

    @property
    def body(self) -> Any:
        """The body; None for a tombstone."""
        return self.state.body


class SessionRecord(Record):
    session_id: str
    source_id: str
    topic: str
    created_by: str


class SessionItem(Record):
    project_seq: int
    revision: int
    record: SessionRecord


class Sessions(Record):
    sessions: list[SessionItem]
    next_before_seq: int | None


class FactRecord(Record):
    fact_id: str
    session_id: str
    source_id: str
    actor_id: str
    content: str


class FactItem(Record):
    project_seq: int
    revision: int
    record: FactRecord


class SessionFacts(Record):
    """A page of one session's facts in commit order (`GET .../sessions/{id}/facts`)."""

    facts: list[FactItem]
    next_after_seq: int | None = None


class HandoffRecord(Record):
    handoff_id: str
    session_id: str
    source_id: str
    from_actor: str
    to_actor: str
    focus: str | None
    done_when: str | None
    context_id: str | None
    status: Literal["pending", "accepted", "completed"]
    claim_id: str | None
    claim_heartbeat_at_ms: int | None
    claim_expires_at_ms: int | None
    attempt_count: int
    result_fact_id: str | None
    outcome: Literal["succeeded", "failed"] | None
    result_artifact_id: str | None = None


LeaseState = Literal["live", "expired"]


class HandoffStatus(Record):
    """`{revision, record}` and the lease's state read now (HO-8, READS-2)."""

    revision: int
    record: HandoffRecord
    lease_state: LeaseState | None = None


class Assignment(Record):
    project_seq: int
    revision: int
    record: HandoffRecord
    lease_state: LeaseState | None = None


class Mailbox(Record):
    assignments: list[Assignment]
    next_before_seq: int | None


class SearchResult(Record):
    fact_id: str
    session_id: str
    source_id: str
    actor_id: str
    content: str
    score: float
    # SEM-1: what each list said of the fact (None where it was not in that list).
    lexical_score: float | None = None
    lexical_rank: int | None = None
    semantic_score: float | None = None
    semantic_rank: int | None = None


class SemanticModel(Record):
    provider: str
    model: str
    revision: str
    dimensions: int


class Search(Record):
    project_epoch: str
    index_seq: int
    mode: Literal["lexical", "semantic", "hybrid"]
    semantic_model: SemanticModel | None
    results: list[SearchResult]
    semantic_lag: int | None = None
    fallback_reason: str | None = None


class Cursor(Record):
    project_epoch: str
    after_seq: int


class ChangeEntry(Record):
    tenant_id: str
    project_id: str
    project_epoch: str
    seq: int
    resource: ResourceRef
    operation: Literal["upsert", "delete"]
    revision: int
    actor_id: str
    committed_at_ms: int


class ChangeBatch(Record):
    scope: Scope
    cursor: Cursor
    entries: list[ChangeEntry]
    next_cursor: Cursor
    has_more: bool


class MaterializedEntry(Record):
    change: ChangeEntry
    resource: Resource


class MaterializedBatch(Record):
    scope: Scope
    cursor: Cursor
    entries: list[MaterializedEntry]
    next_cursor: Cursor
    has_more: bool


class Snapshot(Record):
    """One page of the snapshot: every page of one walk is the state at `at_seq`;
    `next_page_token` is null (or absent) on the last page."""

    scope: Scope
    project_epoch: str
    at_seq: int
    resources: list[Resource]
    next_page_token: str | None = None
