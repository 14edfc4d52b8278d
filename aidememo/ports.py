"""Ports: what the service needs from the outside world, and nothing more.

Transactions are synchronous and callback-shaped, `store.transaction(fn)`, because a Durable
Object offers only `ctx.storage.transactionSync(fn)`; SQLite (`BEGIN IMMEDIATE`), PostgreSQL
(`BEGIN` ... `COMMIT` on one pooled connection) and the in-memory store all fit the same shape.
A callback that raises rolls everything back (STORE-1); a callback must not return an
awaitable (STORE-2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, TypeVar

from aidememo.domain.artifacts import GcIntent, Reservation
from aidememo.domain.model import (
    Actor,
    AuditRow,
    ChangeRecord,
    CommandCall,
    CommandStart,
    HandoffIndexRow,
    History,
    MailboxQuery,
    Member,
    Membership,
    Mutation,
    Project,
    RawOutcome,
    RawWrite,
    Receipt,
    ResourceRef,
    Scope,
    SearchPage,
    StoredResource,
    TokenBinding,
)
from aidememo.domain.semantic import Fingerprint
from aidememo.domain.semantic_index import (
    IndexState,
    IndexStep,
    NearestQuery,
    PendingProject,
    VectorRow,
)

T = TypeVar("T")

# Capability names a store may declare; tests that need one are skipped where it is absent.
CAP_REOPEN = "reopen"  # state survives close and reopen
CAP_TWO_CONNECTIONS = "two_connections"  # two handles on one database race for real
CAP_SECOND_PROCESS = "second_process"  # another OS process can open the same database
# The store runs several calls' writes in one transaction on one thread (`WriteBatches`): the
# origin's committer answers a batch of commands with one commit (SPEC.md HTTP-10).
CAP_WRITE_BATCH = "write_batch"


class ArtifactReads(Protocol):
    """The artifact catalog's reads (SPEC.md ART-*): reservations, GC intents, identity."""

    def get_artifact_reservation(self, scope: Scope, reservation_id: str) -> Reservation | None:
        """The reservation, or None."""
        ...

    def find_artifact_reservation(self, scope: Scope, command_id: str) -> Reservation | None:
        """The reservation a reservation command made (its replay receipt), or None."""
        ...

    def live_artifact_reservations(self, scope: Scope, artifact_id: str) -> list[Reservation]:
        """The artifact's reservations in a live state (expired or not), by reservation id."""
        ...

    def artifact_reservation_by_generation(self, generation: str) -> Reservation | None:
        """The reservation of a generation, in any tenant, or None."""
        ...

    def expired_artifact_reservations(self, now_ms: int, limit: int) -> list[Reservation]:
        """Up to `limit` reservations of any tenant in a live state whose expiry is at or
        before `now_ms`, earliest expiry first."""
        ...

    def get_artifact_revision(self, scope: Scope, artifact_id: str, revision: int) -> bytes | None:
        """The body of the `artifact` resource at `revision`, from the change log, or None."""
        ...

    def list_artifact_generations(self, tenant_id: str) -> list[tuple[str, str, str]]:
        """`(project_id, artifact_id, generation)` of every reservation of the tenant and of
        every current publication's body (duplicates allowed)."""
        ...

    def get_gc_intent(self, body_key: str) -> GcIntent | None:
        """The GC intent of a body-store key, or None."""
        ...

    def body_store_identity(self) -> str | None:
        """The body-store identity the catalog is pinned to (ART-8), or None."""
        ...

    def artifact_due_ms(self) -> int | None:
        """When GC next has work: the earliest expiry of a live reservation or time an
        intent is due (its not-before, or its lease's end when later); None: nothing."""
        ...

    def count_gc_intents(self, limit: int) -> int:
        """How many GC intents are queued, counting at most `limit` (METRICS-4)."""
        ...


class ArtifactWrites(Protocol):
    """The artifact catalog's writes; they commit with whatever else the transaction does."""

    def put_artifact_reservation(self, reservation: Reservation) -> None:
        """Insert or replace a reservation (keyed by scope and reservation id)."""
        ...

    def put_gc_intent(self, intent: GcIntent) -> None:
        """Queue a GC intent; an intent already queued for the key is left as it is."""
        ...

    def lease_gc_intents(self, now_ms: int, lease_until_ms: int, limit: int) -> list[GcIntent]:
        """Lease up to `limit` intents due at `now_ms` (not before and not leased past it),
        earliest first, until `lease_until_ms`; returns them as leased."""
        ...

    def update_gc_intent(self, intent: GcIntent) -> None:
        """Replace an intent's attempts, last error, not-before and lease."""
        ...

    def delete_gc_intent(self, body_key: str) -> None:
        """Drop an intent (nothing if it is gone)."""
        ...

    def prune_artifact_reservations(self, cutoff_ms: int, limit: int) -> int:
        """Delete up to `limit` reservations settled at or before `cutoff_ms`; the count."""
        ...

    def bind_body_store_identity(self, identity: str) -> None:
        """Pin the catalog to a body-store identity (nothing if one is pinned already)."""
        ...


class ReadTx(ArtifactReads, Protocol):
    """A consistent read-only view of the canonical records."""

    def get_project(self, scope: Scope) -> Project | None:
        """The project row, or None."""
        ...

    def get_resource(self, scope: Scope, ref: ResourceRef) -> StoredResource | None:
        """The current state of a resource (body or tombstone), or None if never written."""
        ...

    def get_receipt(self, scope: Scope, command_id: str) -> Receipt | None:
        """The stored receipt of a command id, or None."""
        ...

    def list_changes(
        self, scope: Scope, after_seq: int, limit: int, bodies: bool = True
    ) -> list[ChangeRecord]:
        """Up to `limit` change records with `seq > after_seq`, ascending, bodies included.

        With `bodies=False` (the metadata feed) a store may leave out the bodies (None) of
        every record except participant-scoped ones (`PARTICIPANT_KINDS`), which visibility
        needs; `op`, not the body, tells an upsert from a delete.
        """
        ...

    def list_resources(
        self, scope: Scope, limit: int, after: ResourceRef | None = None
    ) -> list[StoredResource]:
        """Up to `limit` current resources (tombstones included), ordered by (kind, id); with
        `after`, only those after it in that order (keyset paging)."""
        ...

    def list_resources_at(
        self, scope: Scope, at_seq: int, limit: int, after: ResourceRef | None = None
    ) -> list[StoredResource]:
        """`list_resources` as of sequence `at_seq` (SNAP-4): each resource at its last change
        with `seq <= at_seq` (revision and body, or tombstone, from the change log), leaving
        out resources first written after it; the same order and keyset paging."""
        ...

    def list_session_facts(
        self, scope: Scope, session_id: str, after_seq: int, limit: int
    ) -> list[tuple[int, StoredResource]]:
        """Up to `limit` facts of the session `(seq of their commit, fact)`, ascending, only
        those committed after `after_seq` (READS-4); facts are create-only, so the commit's
        change holds the fact's state."""
        ...

    def page_token_key(self) -> bytes:
        """The store's 32-byte key for snapshot page tokens (SNAP-3), made once by the
        store's migration (the reference store: when it is created)."""
        ...

    def list_audit(
        self, scope: Scope, after_seq: int = 0, limit: int | None = None
    ) -> list[AuditRow]:
        """The audit rows with a sequence above `after_seq`, ascending, at most `limit` (every
        one without a limit; keyset paging)."""
        ...

    def get_actor(self, tenant_id: str, actor_id: str) -> Actor | None:
        """The actor, or None."""
        ...

    def get_membership(self, scope: Scope, actor_id: str) -> Membership | None:
        """The actor's membership in the project, or None."""
        ...

    def list_members(self, scope: Scope) -> list[Member]:
        """Every member of the project (any status) with its actor's kind, by actor id."""
        ...

    def get_token(self, token_sha256: bytes) -> TokenBinding | None:
        """The binding of a token digest, or None."""
        ...

    def tenant_exists(self, tenant_id: str) -> bool:
        """True when the tenant row exists."""
        ...

    def authenticate_token(self, token_sha256: bytes) -> TokenBinding | None:
        """The binding of a token digest if it is active and its tenant and actor exist, else
        None; one statement where the backend allows (AUTH-2)."""
        ...

    def token_valid(self, token_sha256: bytes, tenant_id: str, actor_id: str) -> bool:
        """True when the digest is bound, active, to this tenant's actor and both exist: what
        `authenticate_token` answers, for a caller resolved before (AUTH-7)."""
        ...

    def get_access(
        self, scope: Scope, actor_id: str, token_sha256: bytes | None = None
    ) -> tuple[Project | None, Membership | None]:
        """The project row and the actor's membership in it (None for either when missing;
        no membership without a project); one statement where the backend allows. With
        `token_sha256`, also what `token_valid` checks, raising `authentication_failed` when
        it fails (AUTH-7)."""
        ...

    def get_access_resource(
        self, scope: Scope, actor_id: str, token_sha256: bytes | None, ref: ResourceRef
    ) -> tuple[Project | None, Membership | None, StoredResource | None]:
        """`get_access` and `get_resource` together, one statement where the backend allows
        (READS-5): the resource is None when the project is."""
        ...

    def mailbox(self, scope: Scope, query: MailboxQuery) -> list[tuple[int, HandoffIndexRow]]:
        """Up to `query.limit` mailbox rows `(updated_seq, row)`, newest first."""
        ...

    def list_sessions(
        self, scope: Scope, before_seq: int | None, limit: int
    ) -> list[tuple[int, str]]:
        """Up to `limit` sessions `(seq of their creation, session id)`, newest first, only
        those created before `before_seq` when given (keyset paging)."""
        ...

    def search(
        self, scope: Scope, terms: list[str], source_id: str | None, limit: int
    ) -> SearchPage:
        """Facts matching any of `terms`, best first, ties broken by fact id, scored and
        windowed by `aidememo.domain.ranking` over the project's own index (SRCH-4, SRCH-5)."""
        ...

    # -- the derived semantic index (SEM-6) -------------------------------------------------

    def semantic_state(self, scope: Scope) -> IndexState | None:
        """The project's semantic index state, or None before its first build."""
        ...

    def semantic_head(self, scope: Scope) -> tuple[int, IndexState | None] | None:
        """The project's head and its index state (None when not built, or built for another
        project epoch) in one read; None when there is no such project."""
        ...

    def semantic_pending(self, fingerprint: str, limit: int) -> list[PendingProject]:
        """Up to `limit` projects of any tenant whose index is missing, pinned to another
        fingerprint or epoch, or behind the head; by tenant and project id."""
        ...

    def semantic_vectors(self, scope: Scope, after_seq: int) -> list[VectorRow]:
        """The project's vectors made by changes after `after_seq`, by sequence."""
        ...

    # -- whole-tenant reads, for export and deletion (ARC-*) ------------------------------

    def list_projects(self, tenant_id: str) -> list[Project]:
        """Every project of the tenant, ordered by project id."""
        ...

    def list_actors(self, tenant_id: str) -> list[Actor]:
        """Every actor of the tenant, ordered by actor id."""
        ...

    def list_memberships(self, tenant_id: str) -> list[Membership]:
        """Every membership of the tenant, ordered by project and actor."""
        ...

    def list_tokens(self, tenant_id: str) -> list[TokenBinding]:
        """Every token binding of the tenant, ordered by digest."""
        ...

    def list_receipts(
        self, scope: Scope, after_seq: int = 0, limit: int | None = None
    ) -> list[Receipt]:
        """The receipts with a sequence above `after_seq`, ascending, at most `limit` (every
        one without a limit; keyset paging)."""
        ...

    def count_tenant_rows(self, tenant_id: str) -> dict[str, int]:
        """Row counts of everything the tenant owns, by table (ARC-4 verifies deletion)."""
        ...

    # -- an import's staged pages (ARC-9): outside the tenant data ------------------------

    def staged_import_page(self, import_id: str, project_id: str, seq: int) -> bytes | None:
        """Page `seq` (from 0) of a project's rows in a staged import, or None."""
        ...


class WriteTx(ArtifactWrites, ReadTx, Protocol):
    """A write transaction; writers of one project are serialized (STORE-3)."""

    def begin_command(self, call: CommandCall) -> CommandStart:
        """Lock the call's project, then read the caller's membership, the command id's receipt
        and the resource's current state; one round trip where the backend allows (CMD-5).
        With `call.token_sha256`, also what `token_valid` checks, raising
        `authentication_failed` when it fails (AUTH-7)."""
        ...

    def commit_mutation(self, mutation: Mutation) -> None:
        """Apply one command's writes and move the head by compare-and-swap (CMD-6).

        Raises `storage_failure` if the head is not `receipt.project_seq - 1`.
        """
        ...

    def semantic_reset(self, scope: Scope, fingerprint: str, project_epoch: str) -> None:
        """Drop the project's vectors and pin its index to `fingerprint` at sequence 0
        (SEM-2: a model change rebuilds, never mixes)."""
        ...

    def semantic_apply(self, scope: Scope, step: IndexStep) -> bool:
        """Move the index by `step`, writing its vectors and removing its facts' vectors;
        False, writing nothing, when the index is no longer at `step.from_seq` under
        `step.fingerprint` (another indexer moved it)."""
        ...

    def insert_tenant(self, tenant_id: str, created_at_ms: int) -> None:
        """Create a tenant row."""
        ...

    def insert_project(self, project: Project, created_at_ms: int) -> None:
        """Create a project row with its epoch and head 0."""
        ...

    def insert_actor(self, actor: Actor, created_at_ms: int) -> None:
        """Create an actor row."""
        ...

    def put_membership(self, membership: Membership, updated_at_ms: int) -> None:
        """Create or replace a membership."""
        ...

    def insert_token(self, binding: TokenBinding) -> None:
        """Bind a token digest to an actor."""
        ...

    def set_token_active(self, token_sha256: bytes, active: bool) -> None:
        """Activate or revoke a token binding."""
        ...

    def restore_history(self, project: Project, history: History) -> None:
        """Write an imported project's rows as they are (ARC-3); the project row exists."""
        ...

    def delete_tenant(self, tenant_id: str) -> None:
        """Remove every row of the tenant (ARC-4)."""
        ...

    def stage_import_page(
        self, import_id: str, project_id: str, seq: int, body: bytes, created_at_ms: int
    ) -> None:
        """Stage page `seq` of a project's rows (whole export lines) for an import that began
        at `created_at_ms`; not tenant data: no tenant read, count or deletion sees it."""
        ...

    def drop_import_stage(self, import_id: str) -> None:
        """Drop every staged page of an import (nothing if it is gone)."""
        ...

    def drop_import_stages_before(self, cutoff_ms: int) -> None:
        """Drop the staged pages of every import that began at or before `cutoff_ms`."""
        ...


class Store(Protocol):
    """The canonical record store."""

    capabilities: frozenset[str]
    mode: str  # what /health reports: "single_node", "postgres" or "edge"

    def transaction(self, fn: Callable[[WriteTx], T]) -> T:
        """Run `fn` in one write transaction; commit if it returns, roll back if it raises."""
        ...

    def read(self, fn: Callable[[ReadTx], T]) -> T:
        """Run `fn` against one consistent read-only view."""
        ...

    def schema_version(self) -> int:
        """The schema version of the open database."""
        ...

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run `fn` once the write this thread just made is durable: at once, or, inside a
        write batch (`CAP_WRITE_BATCH`), after the batch's commit (never, if it is voided)."""
        ...

    def execute_raw(self, write: RawWrite) -> RawOutcome:
        """A generic put or delete as one guarded write, in a transaction of its own (or the
        one open on this thread): lock the project, read what `WriteTx.begin_command` reads,
        run the command checks on those rows (`aidememo.domain.admission.raw_verdict`) and,
        only when they admit the command, write what the generic pipeline writes (CMD-6) at
        the next sequence and revision. Answers the verdict, from which the caller names any
        error (`aidememo.stores.raw_write`; PostgreSQL does it in one statement)."""
        ...

    def close(self) -> None:
        """Release connections; the store is unusable afterwards."""
        ...


class WriteBatches(Protocol):
    """The optional methods of a store declaring `CAP_WRITE_BATCH`."""

    def batch(self, calls: Sequence[Callable[[], T]]) -> list[tuple[T | None, Exception | None]]:
        """Run `calls` in order on this thread in one write transaction, each `transaction`
        of a call in a savepoint of its own; per call `(value, None)`, or `(None, error)`:
        what it raised, or the `storage_failure` that voided it when its transaction did not
        commit. Returns only once what it answers is durable."""
        ...

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run `fn` once the write this thread just made is durable: at once, or inside a
        batch after its commit (never, if the batch is voided)."""
        ...


class BodyStore(Protocol):
    """Where artifact bodies live, under random generation keys (ART-6, ART-8).

    Keys are generations the catalog made (never a logical path); a body is created once and
    never changed. Blocking calls: the origin runs them in a worker thread.
    """

    identity: str  # credential-free; the catalog is pinned to it (ART-8)

    def create(self, key: str, chunks: Iterator[bytes], size: int) -> tuple[int, str]:
        """Write exactly `size` bytes from `chunks` under `key` if nothing is there yet, and
        return `(size, sha256 hex)` of what is stored now. A different size refuses with
        `artifact_body_mismatch` and stores nothing; a body already under the key is kept,
        and its own observation returned, so the caller compares."""
        ...

    def head(self, key: str) -> int | None:
        """The stored size, or None when nothing is under the key."""
        ...

    def read(self, key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """The bytes `[start, end)` in chunks; `artifact_not_found` when the key is absent."""
        ...

    def delete(self, key: str) -> None:
        """Remove the body; nothing when it is gone already (idempotent)."""
        ...


class Embedder(Protocol):
    """Turns texts into vectors (SPEC.md SEM-2). Providers live outside the core
    (`aidememo.embedding`, CPython only); the core only calls this."""

    fingerprint: Fingerprint  # provider, model, revision, dimensions

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        """One vector per text, in order: `fingerprint.dimensions` float32 values,
        little-endian, L2-normalised (`aidememo.domain.semantic.pack`). Blocking; may raise
        `AidememoError` (`semantic_unavailable`) when the provider fails."""
        ...


class VectorSearch(Protocol):
    """Query-time semantic search over a project's derived index (SPEC.md SEM-4): the
    embedder that made the index, and the nearest vectors. The CPython implementation keeps
    each project's vectors in memory (`aidememo.embedding.matrix`), refreshed from the
    index tables inside the caller's read view."""

    fingerprint: Fingerprint

    def embed_query(self, text: str) -> bytes:
        """The query's packed vector; blocking, called outside any transaction."""
        ...

    def nearest(
        self, tx: ReadTx, scope: Scope, state: IndexState, want: NearestQuery
    ) -> list[tuple[str, float]]:
        """Up to `want.k` `(fact_id, cosine)` of the project's index at `state`, best first,
        ties by fact id; only facts of `want.source_id` when given."""
        ...


class Clock(Protocol):
    """Wall-clock milliseconds; injected so tests control time."""

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...


class Ids(Protocol):
    """Fresh random identifiers (epochs, claim ids, request ids)."""

    def new_id(self, prefix: str) -> str:
        """A new unique id in the identifier grammar, starting with `prefix`."""
        ...
