"""Value objects of the canonical ledger: scopes, receipts, changes, identity records.

All are frozen, slotted dataclasses, except the three the read paths build by the thousand
(`ResourceRef`, `StoredResource`, `ChangeRecord`) and the three every command builds
(`Receipt`, `Mutation`, `CommandStart`): those are slotted dataclasses that are not frozen,
immutable by convention (`Final` fields, so mypy refuses assignments) and hashable
(`unsafe_hash`). A frozen dataclass sets each field through `object.__setattr__`, which made
building a 10,000-resource snapshot or a 1,000-entry change page cost more than reading it
from SQLite. Resource bodies travel as the canonical JSON bytes that were stored, so reads
never re-encode them (the change feed stays fast and byte-exact).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final

from aidememo.domain.canonical import JsonValue, decode_stored
from aidememo.domain.secrets import SecretFinding


class Role(StrEnum):
    """A member's role in a project; owner, admin and writer may write."""

    OWNER = "owner"
    ADMIN = "admin"
    WRITER = "writer"
    READER = "reader"

    @property
    def can_write(self) -> bool:
        """Readers only read; every other role writes (AUTH-4)."""
        return self is not Role.READER


class ActorKind(StrEnum):
    """Who an actor is."""

    HUMAN = "human"
    AGENT = "agent"
    SERVICE = "service"


class MemberStatus(StrEnum):
    """A suspended member is refused on the next request (AUTH-5)."""

    ACTIVE = "active"
    SUSPENDED = "suspended"


class ChangeOp(StrEnum):
    """What a change did to its resource."""

    UPSERT = "upsert"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class Scope:
    """Every canonical key starts with tenant and project (REC-1)."""

    tenant_id: str
    project_id: str

    def to_json(self) -> dict[str, str]:
        """Wire shape `{tenant_id, project_id}`."""
        return {"tenant_id": self.tenant_id, "project_id": self.project_id}


@dataclass(slots=True, unsafe_hash=True)
class ResourceRef:
    """A resource coordinate inside a project."""

    kind: Final[str]
    id: Final[str]

    def to_json(self) -> dict[str, str]:
        """Wire shape `{kind, id}`."""
        return {"kind": self.kind, "id": self.id}


@dataclass(frozen=True, slots=True)
class Project:
    """A project row: its epoch names the history; `head_seq` is the last committed seq."""

    tenant_id: str
    project_id: str
    project_epoch: str
    head_seq: int

    @property
    def scope(self) -> Scope:
        """The project's scope."""
        return Scope(self.tenant_id, self.project_id)


@dataclass(frozen=True, slots=True)
class Actor:
    """An identity inside a tenant."""

    tenant_id: str
    actor_id: str
    kind: ActorKind


@dataclass(frozen=True, slots=True)
class Membership:
    """An actor's role and status in one project."""

    tenant_id: str
    project_id: str
    actor_id: str
    role: Role
    status: MemberStatus

    @property
    def active(self) -> bool:
        """True when the member may act at all."""
        return self.status is MemberStatus.ACTIVE


@dataclass(frozen=True, slots=True)
class Member:
    """One row of a project's member list: the actor's kind beside its membership."""

    actor_id: str
    kind: ActorKind
    role: Role
    status: MemberStatus


@dataclass(frozen=True, slots=True)
class TokenBinding:
    """A token digest bound to one actor; tokens are never stored in plain text (AUTH-1)."""

    token_sha256: bytes
    tenant_id: str
    actor_id: str
    active: bool
    created_at_ms: int


@dataclass(slots=True, unsafe_hash=True)
class Receipt:
    """The stored answer to a command; a replay returns it unchanged (CMD-3)."""

    command_id: Final[str]
    fingerprint: Final[str]
    tenant_id: Final[str]
    project_id: Final[str]
    actor_id: Final[str]
    project_seq: Final[int]
    resource: Final[ResourceRef]
    revision: Final[int]
    committed_at_ms: Final[int]
    # Not part of the receipt (not compared, never stored or sent in its body): whether this
    # answer is the stored receipt of an earlier application (CMD-7).
    replayed: bool = field(default=False, init=False, compare=False, repr=False)

    def as_replay(self) -> Receipt:
        """The same receipt, answered for a command that was already applied (CMD-7)."""
        again = replace(self)
        again.replayed = True
        return again

    def to_json(self) -> dict[str, Any]:
        """Wire shape of a receipt."""
        return {
            "command_id": self.command_id,
            "fingerprint": self.fingerprint,
            "tenant_id": self.tenant_id,
            "project_id": self.project_id,
            "actor_id": self.actor_id,
            "project_seq": self.project_seq,
            "resource": self.resource.to_json(),
            "revision": self.revision,
            "committed_at_ms": self.committed_at_ms,
        }


@dataclass(slots=True, unsafe_hash=True)
class StoredResource:
    """A resource's current state: a body, or a tombstone kept forever (REC-3)."""

    ref: Final[ResourceRef]
    revision: Final[int]
    body: Final[bytes | None]  # canonical JSON bytes; None means deleted

    @property
    def deleted(self) -> bool:
        """True for a tombstone."""
        return self.body is None

    def body_json(self) -> JsonValue:
        """The decoded body (None for a tombstone)."""
        return None if self.body is None else decode_stored(self.body)


@dataclass(slots=True, unsafe_hash=True)
class ChangeRecord:
    """One entry of the change log with the exact body at its revision (FEED-1)."""

    seq: Final[int]
    project_epoch: Final[str]
    ref: Final[ResourceRef]
    op: Final[ChangeOp]
    revision: Final[int]
    actor_id: Final[str]
    committed_at_ms: Final[int]
    body: Final[bytes | None]  # None for a delete


@dataclass(frozen=True, slots=True)
class AuditRow:
    """Who did what, one per committed command."""

    project_seq: int
    command_id: str
    operation: str
    ref: ResourceRef
    actor_id: str
    committed_at_ms: int


@dataclass(frozen=True, slots=True)
class HandoffIndexRow:
    """The mailbox projection of a handoff, written in the handoff's own transaction."""

    handoff_id: str
    from_actor: str
    to_actor: str
    source_id: str
    status: str
    revision: int
    updated_seq: int


@dataclass(frozen=True, slots=True)
class SearchDoc:
    """The lexical index entry of a fact: its tokenizer output, committed with the fact."""

    fact_id: str
    source_id: str
    terms: str  # space-separated tokens (see domain.tokenize)


@dataclass(slots=True, unsafe_hash=True)
class Mutation:
    """Everything one command writes, applied by a store in its transaction (CMD-6).

    The store writes the resource, the change (with body), the audit row, the receipt, the
    optional index rows, and moves the head from `receipt.project_seq - 1` to
    `receipt.project_seq` with a compare-and-swap.
    """

    receipt: Final[Receipt]
    project_epoch: Final[str]
    operation: Final[str]
    op: Final[ChangeOp]
    body: Final[bytes | None]
    handoff: Final[HandoffIndexRow | None] = None
    search: Final[SearchDoc | None] = None

    def change(self) -> ChangeRecord:
        """The change record this mutation appends."""
        r = self.receipt
        return ChangeRecord(
            seq=r.project_seq,
            project_epoch=self.project_epoch,
            ref=r.resource,
            op=self.op,
            revision=r.revision,
            actor_id=r.actor_id,
            committed_at_ms=r.committed_at_ms,
            body=self.body,
        )

    def audit(self) -> AuditRow:
        """The audit row this mutation appends."""
        r = self.receipt
        return AuditRow(
            project_seq=r.project_seq,
            command_id=r.command_id,
            operation=self.operation,
            ref=r.resource,
            actor_id=r.actor_id,
            committed_at_ms=r.committed_at_ms,
        )


@dataclass(frozen=True, slots=True)
class CommandCall:
    """One caller's command on one resource: what `WriteTx.begin_command` reads the rows of
    with the project locked (CMD-5). `token_sha256` is a cached caller's token digest, checked
    in the same statement (AUTH-7)."""

    scope: Scope
    actor_id: str
    command_id: str
    resource: ResourceRef
    token_sha256: bytes | None = None


@dataclass(slots=True, unsafe_hash=True)
class CommandStart:
    """What the pipeline reads first, with the project locked (CMD-5)."""

    project: Final[Project | None]
    membership: Final[Membership | None]
    receipt: Final[Receipt | None]
    current: Final[StoredResource | None]


@dataclass(frozen=True, slots=True)
class RawWrite:
    """A generic put or delete (`POST /v1/commands`) as one guarded write (`Store.execute_raw`):
    everything Python decides is already here (fingerprint, canonical body, time, the secret
    screen's finding). The store writes it only when the command checks admit it on the rows
    read with the project locked (`aidememo.domain.admission.raw_verdict`)."""

    call: CommandCall
    fingerprint: str
    expected_revision: int | None
    operation: str
    op: ChangeOp
    body: bytes | None  # canonical JSON for an upsert, None for a delete
    now_ms: int
    secret: SecretFinding | None  # the first secret in the payload (SEC-3): never written


class Verdict(StrEnum):
    """The outcome of the command checks (`aidememo.domain.admission`); the values are what
    PostgreSQL's `aidememo_raw_verdict` answers."""

    ADMITTED = "admitted"  # every check passed: the command is written
    REPLAY = "replay"  # the stored receipt of this same command (CMD-3)
    NO_MEMBERSHIP = "no_membership"  # no project, no membership, or a suspended one (AUTH-3, 5)
    READ_ONLY = "read_only"  # an active member whose role does not write (AUTH-4)
    COMMAND_CONFLICT = "command_conflict"  # the command id answers another command (CMD-3)
    SECRET = "secret"  # the payload holds a secret (SEC-3)
    NOT_FOUND = "not_found"  # an expected revision of a resource never written (REV-2)
    STALE_REVISION = "stale_revision"  # another current revision than expected (REV-2)
    DELETE_MISSING = "delete_missing"  # a delete of a resource never written (REV-3)


@dataclass(frozen=True, slots=True)
class RawOutcome:
    """What `Store.execute_raw` did with a `RawWrite`: the checks' `verdict` on the rows read
    with the project locked; `receipt` is the new commit's when admitted, the stored one of a
    replay, None otherwise; `current_revision` is the resource's revision before the write
    (None: never written). `retried` says the store sent the write a second time after losing
    the first attempt's answer, so a replayed receipt may be that attempt's own commit."""

    verdict: Verdict
    receipt: Receipt | None
    current_revision: int | None
    retried: bool = False


@dataclass(frozen=True, slots=True)
class MailboxQuery:
    """A page of one actor's inbox or outbox, newest first by `updated_seq`."""

    actor_id: str
    box: str  # "inbox" | "outbox"
    source_id: str | None
    include_completed: bool
    before_seq: int | None
    limit: int


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A matched fact id and its score (higher is better)."""

    fact_id: str
    score: float


@dataclass(frozen=True, slots=True)
class SearchPage:
    """The best hits, and whether every matching fact of the project was evaluated (SRCH-5).
    A store that reads the hits' facts with them (PostgreSQL, SRCH-6) gives `bodies`: each
    hit's current body in the same view, None where there is none; None when not read."""

    hits: list[SearchHit]
    exhaustive: bool
    bodies: list[bytes | None] | None = None


@dataclass(frozen=True, slots=True)
class History:
    """One project's canonical rows as an import restores them, with rebuilt index rows."""

    resources: list[StoredResource]
    changes: list[ChangeRecord]
    receipts: list[Receipt]
    audit: list[AuditRow]
    handoffs: list[HandoffIndexRow]
    search: list[SearchDoc]
