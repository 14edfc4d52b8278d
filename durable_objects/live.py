"""The live change feed at the edge: a project object's hibernatable WebSockets (LIVE-*).

Every decision is the shared core's (`aidememo.service.live`, `aidememo.http.live`), as on the
origin (`origin/live.py`); this module only moves its messages over the Durable Object
WebSocket Hibernation API and schedules its reads:

- `EdgeFeed.subscribe` runs after the pre-upgrade checks passed: `WebSocketPair`, then
  `ctx.acceptWebSocket(server)` (hibernatable: the object may leave memory while the socket
  stays open), the subscriber's state in the socket's attachment, then the catch-up pages of
  the ordinary materialized feed up to the head; the caller answers 101 with the client end.
- The project object is the only writer of its project, so it knows every commit: after each
  request that committed, `push` reads the new commits once for every subscriber
  (`read_commits`, which also reads the subscribed actors' memberships: a suspended member is
  closed at the next push) and each subscriber's `FeedCursor` turns that batch into its
  messages (one per commit; an empty batch for a commit it may not see).
- `recheck` is the same read without a commit, run when the object learns of an identity
  change (`sync_member`, `delete_tenant`, `import_commit`) and from the alarm.
- The attachment (`serializeAttachment`, kept by the runtime while the object hibernates)
  holds what a subscriber is: tenant, actor, the digest of the token it connected with (a
  revocation closes it: `revoke`, and in PostgreSQL mode the alarm's token re-check), project,
  epoch, page limit, its cursor (updated at every push) and the time up to which it has been
  told of expired leases. A re-created
  object recovers its subscribers from `ctx.getWebSockets()` and those attachments.
- Lease notices: `LeaseBook` holds the live claims of the project's handoffs; the object's one
  alarm (`alarm_at`) is set to the earliest expiry, and `announce` re-reads the due claims
  and sends `lease_expired` to the participants that were subscribed when the claim expired.
  Nothing is written (HO-6). After hibernation the book is read again from the handoffs,
  from the oldest time a subscriber was last told of expiries, so a claim that expired while
  the object was away is still announced, once.

Attachments are JSON text: a string crosses into JavaScript as a string, so it is
structured-cloneable without `to_js` (a Python dict would reach the runtime as a proxy, which
structured clone refuses).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from aidememo.domain.canonical import decode_stored
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.limits import SNAPSHOT_MAX_RESOURCES
from aidememo.domain.model import Scope
from aidememo.http.live import commit_message, error_message, notice_message, page_message
from aidememo.ports import Clock, Store
from aidememo.service.access import Caller
from aidememo.service.ledger_reads import LedgerReads
from aidememo.service.live import (
    COMMIT_READ_LIMIT,
    RECHECK_INTERVAL_S,
    CommitBatch,
    FeedCursor,
    Gap,
    Lease,
    LeaseBook,
    LiveSubscription,
    close_code,
    load_leases,
    read_commits,
    reread_leases,
    settle_due,
)

log = logging.getLogger("aidememo.edge")

# How often membership is re-read while subscribers exist, when identity changes can bypass
# the object (PostgreSQL mode: the Worker runs the admin routes on the database itself).
RECHECK_MS = int(RECHECK_INTERVAL_S * 1000)
# Attachment format version.
ATTACHMENT_VERSION = 1
# The close of a subscriber the object cannot serve any more without an error of the core to
# report (its socket failed, or its attachment is unreadable): reconnect, as after 4503. Codes
# 1001-2999 are avoided: the WebSocket API lets a server send only 1000 and 3000-4999.
RESTART_CLOSE = 4503
# Close codes the runtime refuses to send; a peer's close with one is answered with 1000.
_RESERVED_CLOSE = frozenset({1005, 1006, 1015})


class Subscriber:
    """One accepted WebSocket, rebuilt from its attachment after hibernation."""

    __slots__ = ("cursor", "id", "lease_ms", "saved", "ws")

    def __init__(self, ws: Any, sub_id: str, cursor: FeedCursor, lease_ms: int) -> None:
        self.ws = ws
        self.id = sub_id
        self.cursor = cursor
        self.lease_ms = lease_ms  # told of every claim that expired up to here
        self.saved = ""

    @property
    def actor(self) -> str:
        return self.cursor.sub.caller.actor_id

    def attachment(self) -> str:
        sub = self.cursor.sub
        return json.dumps(
            {
                "v": ATTACHMENT_VERSION,
                "id": self.id,
                "tenant_id": sub.caller.tenant_id,
                "actor_id": sub.caller.actor_id,
                "project_id": sub.project_id,
                "project_epoch": self.cursor.epoch,
                "after_seq": self.cursor.after_seq,
                "limit": sub.page_limit,
                "lease_ms": self.lease_ms,
                "token": None if sub.token_sha256 is None else sub.token_sha256.hex(),
            },
            separators=(",", ":"),
        )

    def save(self) -> None:
        """Store the attachment if it changed (it survives hibernation)."""
        text = self.attachment()
        if text != self.saved:
            self.ws.serializeAttachment(text)
            self.saved = text

    @classmethod
    def restore(cls, ws: Any) -> Subscriber | None:
        """The subscriber an accepted socket's attachment describes, or None."""
        raw = ws.deserializeAttachment()
        if not isinstance(raw, str):
            return None
        try:
            data = decode_stored(raw)
            if data.get("v") != ATTACHMENT_VERSION:
                return None
            sub = LiveSubscription(
                caller=Caller(str(data["tenant_id"]), str(data["actor_id"])),
                project_id=str(data["project_id"]),
                project_epoch=str(data["project_epoch"]),
                after_seq=int(data["after_seq"]),
                page_limit=int(data["limit"]),
                token_sha256=None if data.get("token") is None else bytes.fromhex(data["token"]),
            )
            found = cls(ws, str(data["id"]), FeedCursor(sub), int(data["lease_ms"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        found.saved = raw
        return found


def socket_id(ws: Any) -> str | None:
    """The subscriber id in a socket's attachment (how a socket is recognised again: the
    runtime hands the handlers a new proxy of the same socket each time)."""
    try:
        raw = ws.deserializeAttachment()
        data = decode_stored(raw) if isinstance(raw, str) else None
    except Exception:  # a closed socket, or an attachment that is not ours
        return None
    return str(data["id"]) if isinstance(data, dict) and "id" in data else None


class EdgeFeed:
    """The subscribers of one project object, its shared reads and its lease book."""

    def __init__(self, ctx: Any, clock: Clock, new_id: Callable[[], str]) -> None:
        self.ctx = ctx
        self.clock = clock
        self.new_id = new_id
        self._subs: list[Subscriber] | None = None  # None until recovered
        self.scope: Scope | None = None
        self.seq: int | None = None  # the shared read position
        self.book: LeaseBook | None = None

    # -- subscribers ----------------------------------------------------------------------

    def subscribers(self) -> list[Subscriber]:
        """The live subscribers; after hibernation, recovered from the runtime's sockets."""
        if self._subs is None:
            subs: list[Subscriber] = []
            for ws in self.ctx.getWebSockets():
                found = Subscriber.restore(ws)
                if found is None:
                    _close(ws, RESTART_CLOSE, "unknown subscriber; reconnect")
                    continue
                subs.append(found)
            self._subs = subs
            if subs:
                first = subs[0].cursor.sub
                self.scope = first.scope
                self.seq = min(s.cursor.after_seq for s in subs)
        return self._subs

    def subscribe(self, sub: LiveSubscription, store: Store, queries: LedgerReads) -> Any:
        """Accept a subscriber that passed the pre-upgrade checks; send its catch-up pages.
        Returns the client end of the pair, for the 101 response."""
        from js import WebSocketPair

        subs = self.subscribers()
        client, server = WebSocketPair.new().object_values()
        self.ctx.acceptWebSocket(server)
        found = Subscriber(server, self.new_id(), FeedCursor(sub), self.clock.now_ms())
        try:
            found.save()
            self._catch_up(found, queries, first=True)
            found.save()
        except BaseException:  # answered with an HTTP error instead: no socket stays behind
            _close(server, RESTART_CLOSE, "subscription failed")
            raise
        self.scope = sub.scope
        after = found.cursor.after_seq  # the head: nothing commits while the object is busy
        self.seq = after if self.seq is None or not subs else min(self.seq, after)
        subs.append(found)
        self._ensure_book(store)
        return client

    def drop(self, ws: Any) -> None:
        """A socket closed or failed: forget its subscriber."""
        sub_id = socket_id(ws)
        subs = self.subscribers()
        self._subs = [s for s in subs if s.id != sub_id] if sub_id is not None else subs

    def _catch_up(self, sub: Subscriber, queries: LedgerReads, *, first: bool) -> None:
        """The materialized pages from the cursor to the head (LIVE-2): the first page of a
        new subscriber is always sent, later empty pages are not."""
        cursor = sub.cursor
        while True:
            before = cursor.after_seq
            page = cursor.catch_up(queries)
            if first or page.records or cursor.after_seq != before:
                sub.ws.send(page_message(page))
                first = False
            if not page.has_more:
                return

    def _end(self, sub: Subscriber, error: AidememoError) -> None:
        """`{"error": ...}` then a close with 4000 + status (LIVE-4)."""
        try:
            sub.ws.send(error_message(error))
        except Exception:
            pass  # the client has gone; the close below is all that is left
        _close(sub.ws, close_code(error), error.code.value)
        if self._subs is not None:
            self._subs = [s for s in self._subs if s is not sub]

    # -- commits and rechecks -------------------------------------------------------------

    def push(self, store: Store, queries: LedgerReads, *, tokens: bool = False) -> None:
        """Read the commits after the shared position once, with the subscribers'
        memberships (and with `tokens`, whether their tokens still authenticate: only where
        the store holds the tokens, i.e. PostgreSQL mode), and send each subscriber its
        messages (LIVE-2, LIVE-3, LIVE-5)."""
        while True:
            subs = self.subscribers()
            if not subs or self.scope is None:
                return
            if self.seq is None:
                self.seq = min(s.cursor.after_seq for s in subs)
            actors = {s.actor for s in subs}
            digests = {d for s in subs if (d := s.cursor.sub.token_sha256)} if tokens else set()
            batch = read_commits(store, self.scope, self.seq, actors, COMMIT_READ_LIMIT, digests)
            tokens = False  # once per call
            self.seq = batch.last_seq
            if batch.rows:
                self._ensure_book(store).observe_rows(batch.rows)
            for sub in list(subs):
                self._deliver(sub, batch, queries)
            project = batch.project
            if project is None or project.head_seq <= self.seq:
                return

    def revoke(self, token_sha256: bytes) -> int:
        """Close the subscribers that authenticated with a token just revoked (LIVE-5:
        `authentication_failed`, 4401); how many were closed."""
        gone = [s for s in self.subscribers() if s.cursor.sub.token_sha256 == token_sha256]
        for sub in gone:
            self._end(sub, fail(ErrorCode.AUTHENTICATION_FAILED, "unknown or revoked token"))
        return len(gone)

    def _deliver(self, sub: Subscriber, batch: CommitBatch, queries: LedgerReads) -> None:
        try:
            try:
                messages = sub.cursor.messages(batch, commit_message)
            except Gap:
                self._catch_up(sub, queries, first=False)
                messages = sub.cursor.messages(batch, commit_message)
            for text in messages:
                sub.ws.send(text)
        except AidememoError as error:
            self._end(sub, error)
            return
        except Exception:  # the socket is gone (a send on a closed socket throws)
            log.warning("live subscriber dropped after a failed send", exc_info=True)
            _close(sub.ws, RESTART_CLOSE, "send failed; reconnect")
            if self._subs is not None:
                self._subs = [s for s in self._subs if s is not sub]
            return
        sub.save()

    # -- lease notices --------------------------------------------------------------------

    def _ensure_book(self, store: Store) -> LeaseBook:
        """The lease book; read from the handoffs when the object (re)starts, keeping the
        claims that expired after the oldest time a subscriber was last told (a claim that
        expired before anyone subscribed is not announced)."""
        if self.book is None:
            subs = self.subscribers()
            if self.scope is None or not subs:
                return LeaseBook()
            since = min(s.lease_ms for s in subs)
            _, self.book = load_leases(store, self.scope, since, SNAPSHOT_MAX_RESOURCES)
        return self.book

    def announce(self, store: Store) -> None:
        """Tell each subscriber of the claims that expired since it was last told (LIVE-7),
        after re-reading them (a renewal the feed has not read must not be announced)."""
        subs = self.subscribers()
        if not subs or self.scope is None:
            return
        now = self.clock.now_ms()
        book = self._ensure_book(store)
        due = book.due(now)
        if not due:
            return
        current = reread_leases(store, self.scope, [lease.handoff_id for lease in due])
        notices: list[Lease] = settle_due(book, due, current, now)
        for sub in list(subs):
            for lease in notices:
                if sub.actor in lease.participants and lease.expires_at_ms > sub.lease_ms:
                    try:
                        sub.ws.send(notice_message(lease))
                    except Exception:
                        log.warning("lease notice not delivered", exc_info=True)
            sub.lease_ms = now
            sub.save()

    # -- the alarm ------------------------------------------------------------------------

    def alarm_at(self, recheck: bool) -> int | None:
        """When the object's alarm must fire for the feed: the earliest live claim expiry,
        and (with `recheck`) no later than the membership re-check; None without
        subscribers."""
        subs = self.subscribers()
        if not subs:
            return None
        times: list[int] = []
        if self.book is not None and (expiry := self.book.next_expiry()) is not None:
            times.append(expiry)
        if recheck:
            times.append(self.clock.now_ms() + RECHECK_MS)
        return min(times) if times else None


def _close(ws: Any, code: int, reason: str) -> None:
    """Close a socket, ignoring one that is already closed."""
    try:
        ws.close(code, reason)
    except Exception:
        pass


def answer_close(ws: Any, code: int, reason: str) -> None:
    """Complete a close the client started (the Hibernation API does not on every
    compatibility date; on a closed socket `close` does nothing)."""
    _close(ws, 1000 if code in _RESERVED_CLOSE else code, reason)
