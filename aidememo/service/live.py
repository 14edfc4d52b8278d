"""The live change feed's logic, free of any transport (SPEC.md LIVE-*).

A subscriber holds a cursor `(project_epoch, after_seq)`. It first catches up through the
ordinary change feed (`LedgerReads.changes`, which checks membership and the cursor on every
page), then receives every later commit as it happens. Both fronts use this module: the
origin from asyncio tasks (`origin/live.py`), the edge from its Durable Object's WebSocket
handlers; neither decides anything about visibility, cursors or errors itself.

The pieces:
- `LiveSubscription`: who subscribed to what, after the checks that run before the upgrade.
- `read_commits`: one read, shared by every subscriber of a project, of the commits after a
  sequence, together with the project row and the memberships of the subscribed actors, all
  from one read view (so membership is re-checked on every push, AUTH-5).
- `FeedCursor`: one subscriber's position; turns a shared `CommitBatch` into that
  subscriber's messages (one per commit, visibility-filtered), trims what it already has,
  and reports a gap it must fill by catching up first.
- `LeaseBook`: the live claims of the project's handoffs, so a timer can be set to the
  earliest expiry and `lease_expired` notices go to the handoff's participants (HO-6: the
  notice writes nothing; the state stays evaluated when read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from aidememo.domain.canonical import decode_stored
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.model import ChangeRecord, Membership, Project, ResourceRef, Scope
from aidememo.domain.visibility import visible_to
from aidememo.ports import ReadTx, Store
from aidememo.service.access import Caller, authorize
from aidememo.service.ledger_reads import ChangePage, LedgerReads, check_cursor

HANDOFF_KIND = "handoff"

# Commits one shared read fetches at most; a longer backlog is read in several rounds.
COMMIT_READ_LIMIT = 1_000
# Messages waiting for one subscriber before it is closed as too slow (LIVE-6); its bytes
# are bounded too (`LIVE_PENDING_MAX_BYTES`, measured by `pending_bytes`).
SUBSCRIBER_QUEUE_MAX = 1_024
# What one commit's message adds to its body's bytes: cursor, change entry, scope (LIVE-2).
MESSAGE_OVERHEAD_BYTES = 512
# How often membership (and, for commits from other processes, the head) is re-read while a
# project has subscribers; a suspended member is closed within this plus one read (LIVE-5).
RECHECK_INTERVAL_S = 2.0
# Close codes after the upgrade are 4000 + the HTTP status of the error (LIVE-4).
CLOSE_CODE_BASE = 4000


def close_code(error: AidememoError) -> int:
    """The WebSocket close code of an error after the upgrade: 4000 + its HTTP status."""
    return CLOSE_CODE_BASE + error.http_status


@dataclass(frozen=True, slots=True)
class LiveSubscription:
    """A subscriber that passed the pre-upgrade checks (LIVE-1)."""

    caller: Caller
    project_id: str
    project_epoch: str
    after_seq: int
    page_limit: int
    token_sha256: bytes | None = None

    @property
    def scope(self) -> Scope:
        """The project's scope."""
        return self.caller.scope(self.project_id)


def check_subscription(store: Store, sub: LiveSubscription) -> Project:
    """Membership and cursor, in one read, before the upgrade (LIVE-1: the errors of
    `/changes`: 403 `project_unauthorized`, 409 `cursor_epoch_mismatch`/`cursor_out_of_range`)."""

    def run(tx: ReadTx) -> Project:
        project, _ = authorize(tx, sub.caller, sub.project_id, write=False)
        check_cursor(project, sub.project_epoch, sub.after_seq)
        return project

    return store.read(run)


@dataclass(slots=True)
class CommitBatch:
    """What one shared read found: the commits after `after_seq` (dense, ascending), the head
    and epoch they were read at, and the membership of every actor asked about. `project` is
    None once the project is gone (tenant deleted)."""

    scope: Scope
    after_seq: int
    project: Project | None
    rows: list[ChangeRecord]
    members: dict[str, Membership | None]
    # Token digests re-checked in this read -> still active (AUTH-2); empty when not checked.
    tokens: dict[bytes, bool] = field(default_factory=dict)
    # Rendered messages, shared by every subscriber: (seq, visible) -> message text.
    rendered: dict[tuple[int, bool], str] = field(default_factory=dict)

    @property
    def last_seq(self) -> int:
        """The sequence this batch brings a subscriber to."""
        return self.rows[-1].seq if self.rows else self.after_seq

    def pending_bytes(self) -> int:
        """What this batch adds to a subscriber's pending data (LIVE-6): the bodies it will
        send, plus each message's own fields. The batch is shared, so a subscriber is
        charged for what it holds, not for a copy."""
        return sum(len(row.body or b"") + MESSAGE_OVERHEAD_BYTES for row in self.rows)


def read_commits(
    store: Store,
    scope: Scope,
    after_seq: int,
    actors: Iterable[str],
    limit: int,
    tokens: Iterable[bytes] = (),
) -> CommitBatch:
    """One read view: the project row, the actors' memberships, and up to `limit` commits
    after `after_seq` with their bodies (the shared read of LIVE-3); with `tokens`, whether
    each of those bearer token digests still authenticates (a revoked token ends its
    subscriptions, AUTH-2)."""
    wanted = sorted(set(actors))
    digests = sorted(set(tokens))

    def run(tx: ReadTx) -> CommitBatch:
        project = tx.get_project(scope)
        members = {actor: tx.get_membership(scope, actor) for actor in wanted}
        active = {digest: tx.authenticate_token(digest) is not None for digest in digests}
        rows: list[ChangeRecord] = []
        if project is not None and project.head_seq > after_seq:
            rows = tx.list_changes(scope, after_seq, limit, True)
        return CommitBatch(scope, after_seq, project, rows, members, active)

    return store.read(run)


def batch_error(
    batch: CommitBatch, actor_id: str, project_epoch: str, token: bytes | None = None
) -> AidememoError | None:
    """Why `actor_id` (holding `token`) may no longer follow this feed, or None (AUTH-2,
    AUTH-5, FEED-2)."""
    if token is not None and batch.tokens.get(token) is False:
        return fail(ErrorCode.AUTHENTICATION_FAILED, "unknown or revoked token")
    membership = batch.members.get(actor_id)
    if batch.project is None or membership is None or not membership.active:
        return fail(ErrorCode.PROJECT_UNAUTHORIZED, "no active membership in this project")
    if batch.project.project_epoch != project_epoch:
        return fail(
            ErrorCode.CURSOR_EPOCH_MISMATCH,
            "the project has a new epoch; read a snapshot and follow the feed from its head",
        )
    return None


Render = Callable[["CommitBatch", ChangeRecord, bool], str]
"""`render(batch, row, visible)`: the message of one commit, for subscribers that may see
it (`visible`) or not (an empty batch that still advances the cursor)."""


class Gap(Exception):
    """A batch starts after the subscriber's cursor: catch up through the feed first."""


class FeedCursor:
    """One subscriber's position in the feed, and what it is sent next.

    `render(batch, row, visible)` builds the message of one commit (the transport's
    renderer, `aidememo.http.live.commit_message`); it is called once per commit and
    visibility, whatever the number of subscribers.
    """

    __slots__ = ("after_seq", "caught_up", "epoch", "sub")

    def __init__(self, sub: LiveSubscription) -> None:
        self.sub = sub
        self.epoch = sub.project_epoch
        self.after_seq = sub.after_seq
        self.caught_up = False

    def catch_up(self, queries: LedgerReads) -> ChangePage:
        """The next page of the ordinary materialized feed after the cursor; advances it."""
        page = queries.changes(
            self.sub.caller, self.sub.project_id, self.epoch, self.after_seq, self.sub.page_limit
        )
        self.after_seq = page.next_after_seq
        return page

    def messages(self, batch: CommitBatch, render: Render) -> list[str]:
        """One message per commit of `batch` that this subscriber has not had yet.

        Raises the error to close with (suspension, deleted project, new epoch), or `Gap`
        when the batch starts beyond the cursor or was read without this subscriber's actor."""
        if self.sub.caller.actor_id not in batch.members:
            # Read before this subscriber joined (a shared read in flight while it caught up):
            # the batch cannot judge it, so it catches up from its own cursor instead.
            raise Gap
        error = batch_error(batch, self.sub.caller.actor_id, self.epoch, self.sub.token_sha256)
        if error is not None:
            raise error
        if batch.after_seq > self.after_seq:
            raise Gap  # rows are dense from batch.after_seq + 1 (REC-2): nothing is sent
        out: list[str] = []
        actor = self.sub.caller.actor_id
        for row in batch.rows:
            seq = row.seq
            if seq <= self.after_seq:
                continue
            visible = visible_to(row.ref.kind, row.body, actor)
            key = (seq, visible)
            text = batch.rendered.get(key)
            if text is None:
                text = batch.rendered[key] = render(batch, row, visible)
            out.append(text)
            self.after_seq = seq
        return out


# -- lease notices (LIVE-7) -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lease:
    """A live claim: who may see it and when it expires."""

    handoff_id: str
    claim_id: str
    expires_at_ms: int
    participants: tuple[str, str]


def lease_of(handoff_id: str, body: bytes | None) -> Lease | None:
    """The claim of an accepted handoff whose lease has an expiry, else None."""
    if body is None:
        return None
    record = decode_stored(body)
    if not isinstance(record, dict) or record.get("status") != "accepted":
        return None
    claim, expires = record.get("claim_id"), record.get("claim_expires_at_ms")
    sender, receiver = record.get("from_actor"), record.get("to_actor")
    if not (
        isinstance(claim, str)
        and isinstance(expires, int)
        and isinstance(sender, str)
        and isinstance(receiver, str)
    ):
        return None
    return Lease(handoff_id, claim, expires, (sender, receiver))


class LeaseBook:
    """The project's claims that have not yet been announced as expired."""

    __slots__ = ("announced", "leases")

    def __init__(self) -> None:
        self.leases: dict[str, Lease] = {}
        self.announced: dict[str, Lease] = {}  # the last claim announced, per handoff

    def observe(self, ref: ResourceRef, body: bytes | None) -> None:
        """Track the latest committed state of a handoff."""
        if ref.kind == HANDOFF_KIND:
            self.track(ref.id, lease_of(ref.id, body))

    def track(self, handoff_id: str, lease: Lease | None) -> None:
        """Set the handoff's current claim (None: no live claim); an announced claim stays
        announced."""
        if lease is None or self.announced.get(handoff_id) == lease:
            self.leases.pop(handoff_id, None)
        else:
            self.leases[handoff_id] = lease

    def observe_rows(self, rows: Iterable[ChangeRecord]) -> None:
        """Track the handoffs among committed changes."""
        for row in rows:
            if row.ref.kind == HANDOFF_KIND:
                self.observe(row.ref, row.body)

    def next_expiry(self) -> int | None:
        """The earliest expiry still to announce, in ms since the epoch."""
        return min((lease.expires_at_ms for lease in self.leases.values()), default=None)

    def due(self, now_ms: int) -> list[Lease]:
        """The leases expired at `now_ms` (HO-6: live while `now < expires`), removed."""
        expired = [lease for lease in self.leases.values() if lease.expires_at_ms <= now_ms]
        for lease in expired:
            del self.leases[lease.handoff_id]
        return expired

    def announce(self, lease: Lease) -> None:
        """Remember that `lease` was announced, so a re-read of it is not announced again."""
        self.announced[lease.handoff_id] = lease
        if self.leases.get(lease.handoff_id) == lease:
            del self.leases[lease.handoff_id]


def load_leases(
    store: Store, scope: Scope, now_ms: int, limit: int
) -> tuple[Project | None, LeaseBook]:
    """The project row and the claims of its current handoffs that are still live, in one
    read (a claim that expired before anyone subscribed is not announced: its state is read
    from the handoff like any other)."""

    def run(tx: ReadTx) -> tuple[Project | None, LeaseBook]:
        book = LeaseBook()
        project = tx.get_project(scope)
        if project is not None:
            for row in tx.list_resources(scope, limit):
                if row.ref.kind != HANDOFF_KIND:
                    continue
                lease = lease_of(row.ref.id, row.body)
                if lease is not None and lease.expires_at_ms > now_ms:
                    book.track(row.ref.id, lease)
        return project, book

    return store.read(run)


def reread_leases(
    store: Store, scope: Scope, handoff_ids: Iterable[str]
) -> dict[str, Lease | None]:
    """The current claim of each handoff, re-read just before announcing its expiry (a
    heartbeat that the feed has not read yet must not produce a notice)."""
    ids = sorted(set(handoff_ids))

    def run(tx: ReadTx) -> dict[str, Lease | None]:
        out: dict[str, Lease | None] = {}
        for handoff_id in ids:
            row = tx.get_resource(scope, ResourceRef(HANDOFF_KIND, handoff_id))
            out[handoff_id] = None if row is None else lease_of(handoff_id, row.body)
        return out

    return store.read(run)


def settle_due(
    book: LeaseBook, due: list[Lease], current: dict[str, Lease | None], now_ms: int
) -> list[Lease]:
    """The leases to announce now, given their re-read state; renewed ones go back into
    the book, finished ones (returned, replaced by a later live claim) are dropped."""
    notices: list[Lease] = []
    for lease in due:
        now = current.get(lease.handoff_id)
        if now is None:
            continue
        if now.expires_at_ms <= now_ms:
            if book.announced.get(now.handoff_id) != now:
                book.announce(now)
                notices.append(now)
        elif now.handoff_id not in book.leases:  # renewed, and no later state observed yet
            book.track(now.handoff_id, now)
    return notices
