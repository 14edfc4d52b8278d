"""The origin's live change feed: ASGI WebSocket sessions and one hub per project.

Only translation and scheduling live here; every decision (checks before the upgrade,
visibility, cursors, message shapes, errors and close codes) is the core's
(`aidememo.service.live`, `aidememo.http.live`), so the edge's Durable Object serves the
same feed.

- `LiveFeed.handle` answers one ASGI `websocket` scope: the pre-upgrade checks run first and
  a refusal is an HTTP response (ASGI's WebSocket denial response, which uvicorn supports),
  with the status and body `/changes` would give. After `websocket.accept` a sender task
  catches up through the ordinary materialized feed, then forwards the hub's batches.
- `ProjectHub` (one per project with subscribers) learns of commits from
  `Ledger.on_commit`, called after the commit is durable, and reads them once for every
  subscriber: one read view with the commits after the hub's sequence, the project row and
  the subscribed actors' memberships. Reads run in the dispatch pool, never on the loop.
  Commits arriving while a read runs are coalesced into the next read. Every
  `RECHECK_INTERVAL_S` the hub reads again, whether or not a commit was announced: that is
  how a suspension (an identity change, not a commit) reaches subscribers, and the backstop
  for the commits of another process on the same database (another worker, a second origin
  behind a load balancer): on PostgreSQL those arrive at once through `LISTEN`
  (`origin.notify`, `LiveFeed.notified`, LIVE-9), on SQLite or behind a pooler only here.
- A subscriber's queue is bounded in items (`SUBSCRIBER_QUEUE_MAX`) and in bytes
  (`LIVE_PENDING_MAX_BYTES`, counting what is queued and what the sender holds until it is
  sent; uvicorn's `send` waits while the socket's buffer is full, so what sits there is at
  most one message more): the hub never waits for a subscriber, and one that overflows has
  its queue dropped at once and is sent `feed_overflow` and closed (4429) as soon as its
  socket takes them; it reconnects from the last cursor it received. A subscriber still
  catching up is not queued to: it only notes that it missed a batch and reads on until it
  has seen the head.
- Lease notices: each hub keeps a `LeaseBook` of its handoffs' live claims and a loop timer
  at the earliest expiry; when it fires, the due claims are re-read (a heartbeat the hub has
  not read yet must not produce a notice) and `lease_expired` goes to the subscribers that
  may see each handoff. Nothing is written (HO-6).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

from aidememo import metrics
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.limits import LIVE_PENDING_MAX_BYTES, SNAPSHOT_MAX_RESOURCES
from aidememo.domain.model import Scope
from aidememo.http.app import HttpApp, error_response
from aidememo.http.live import (
    commit_message,
    error_message,
    notice_message,
    open_subscription,
    page_message,
)
from aidememo.http.types import Request
from aidememo.service.live import (
    COMMIT_READ_LIMIT,
    RECHECK_INTERVAL_S,
    SUBSCRIBER_QUEUE_MAX,
    CommitBatch,
    FeedCursor,
    Gap,
    LeaseBook,
    close_code,
    load_leases,
    read_commits,
    reread_leases,
    settle_due,
)
from origin.accesslog import ACCESS_LOGGER, AccessLog
from origin.asgi_common import (
    REQUEST_ID_HEADER,
    AsgiReceive,
    AsgiScope,
    AsgiSend,
    fold_headers,
    log_safe,
    request_id,
)

T = TypeVar("T")
log = logging.getLogger("aidememo.live")
LIVE_FORMAT = "request_id=%s method=GET path=%s status=%d websocket_close=%s duration_ms=%.2f"
access = AccessLog(logging.getLogger(ACCESS_LOGGER), LIVE_FORMAT, "handle")
"""A live-feed WebSocket's access line, written when it closes (HTTP-6)."""

# How long a closing subscriber may take to accept its error message and close frame (a slow
# one first has to read what is already buffered for it); then the socket is dropped.
CLOSE_SEND_TIMEOUT_S = 30.0

Item = CommitBatch | str  # a shared batch, or a ready notice text


class Subscriber:
    """One accepted WebSocket: its cursor, its bounded queue and how it ends."""

    __slots__ = (
        "actor",
        "cursor",
        "failed",
        "failure",
        "live",
        "max_bytes",
        "missed",
        "pending",
        "queue",
    )

    def __init__(self, cursor: FeedCursor, queue_max: int, max_bytes: int) -> None:
        self.cursor = cursor
        self.actor = cursor.sub.caller.actor_id
        self.queue: asyncio.Queue[tuple[Item, int]] = asyncio.Queue(queue_max)
        self.max_bytes = max_bytes
        self.pending = 0  # bytes queued, or taken by the sender and not yet sent
        self.live = False  # False while catching up: batches are noted, not queued
        self.missed = False
        self.failure: AidememoError | None = None
        self.failed = asyncio.Event()

    def fail(self, error: AidememoError) -> None:
        """End this subscriber with `error` (the first one wins)."""
        if self.failure is None:
            self.failure = error
            self.failed.set()

    def offer(self, item: Item) -> None:
        """Queue without waiting; past `queue_max` items or `max_bytes` pending the
        subscriber ends with `feed_overflow` (LIVE-6). One item is always taken when
        nothing is pending, so a batch larger than the bound alone still gets through to
        a subscriber that reads."""
        if self.failure is not None:
            return  # closing: nothing more is held for it
        size = item.pending_bytes() if isinstance(item, CommitBatch) else len(item)
        if self.pending and self.pending + size > self.max_bytes:
            self._overflow(f"more than {self.max_bytes} bytes")
            return
        try:
            self.queue.put_nowait((item, size))
        except asyncio.QueueFull:
            self._overflow(f"more than {self.queue.maxsize} messages")
            return
        self.pending += size

    def sent(self, size: int) -> None:
        """The sender has sent an item of `size` bytes."""
        self.pending = max(0, self.pending - size)

    def release(self) -> None:
        """Drop everything queued: a subscriber that ends holds no data (LIVE-6)."""
        while True:
            try:
                self.queue.get_nowait()
            except asyncio.QueueEmpty:
                break
        self.pending = 0

    def _overflow(self, what: str) -> None:
        metrics.live_dropped()
        self.fail(
            fail(
                ErrorCode.FEED_OVERFLOW,
                f"{what} waiting for this subscriber; reconnect from the last next_cursor received",
            )
        )
        self.release()


class ProjectHub:
    """The subscribers of one project, the shared commit reads and the lease timer."""

    def __init__(self, feed: LiveFeed, scope: Scope) -> None:
        self.feed = feed
        self.scope = scope
        self.subs: set[Subscriber] = set()
        self.seq: int | None = None  # read up to here; None until the first read
        self.leases = LeaseBook()
        self.dirty = False
        self.reading = False
        self.recheck_tokens = False
        self.timer: asyncio.TimerHandle | None = None
        self.ticker: asyncio.Task[None] | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self.ticker = asyncio.get_running_loop().create_task(self._tick())
        # The first read re-checks the tokens too: it may run after an identity change that
        # happened while the first subscriber caught up, which it must judge as a tick would.
        self.recheck_tokens = True
        self.wake()

    def stop(self) -> None:
        if self.ticker is not None:
            self.ticker.cancel()
        if self.timer is not None:
            self.timer.cancel()
        for task in self.tasks:
            task.cancel()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def wake(self) -> None:
        """A commit (or the recheck tick) happened: read once more."""
        self.dirty = True
        if not self.reading:
            self.reading = True
            self._spawn(self._read_loop())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.feed.recheck_s)
            self.recheck_tokens = True  # the tick's read also re-authenticates the tokens
            self.wake()

    async def _read_loop(self) -> None:
        store = self.feed.store
        try:
            while self.dirty and self.subs:
                self.dirty = False
                try:
                    if self.seq is None:
                        now = self.feed.clock.now_ms()
                        project, book = await self.feed.run(
                            load_leases, store, self.scope, now, SNAPSHOT_MAX_RESOURCES
                        )
                        self.seq = 0 if project is None else project.head_seq
                        self.leases = book
                        self._arm_timer()
                    actors = {sub.actor for sub in self.subs}
                    tokens: set[bytes] = set()
                    if self.recheck_tokens:
                        self.recheck_tokens = False
                        tokens = {t for sub in self.subs if (t := sub.cursor.sub.token_sha256)}
                    batch = await self.feed.run(
                        read_commits,
                        store,
                        self.scope,
                        self.seq,
                        actors,
                        self.feed.read_limit,
                        tokens,
                    )
                except AidememoError as error:
                    log.warning("live feed read failed for %s: %s", self.scope, error)
                    continue  # the next commit or tick reads again
                self.seq = batch.last_seq
                if batch.project is not None and batch.project.head_seq > self.seq:
                    self.dirty = True  # a longer backlog than one read: read on
                if batch.rows:
                    self.leases.observe_rows(batch.rows)
                    self._arm_timer()
                self._publish(batch)
        finally:
            self.reading = False

    def _publish(self, batch: CommitBatch) -> None:
        for sub in list(self.subs):
            if sub.live:
                sub.offer(batch)
            else:
                sub.missed = True

    # -- lease notices --------------------------------------------------------------------

    def _arm_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        expiry = self.leases.next_expiry()
        if expiry is None or not self.subs:
            return
        delay = max(0.0, (expiry - self.feed.clock.now_ms()) / 1000.0)
        self.timer = asyncio.get_running_loop().call_later(delay, self._lease_timer)

    def _lease_timer(self) -> None:
        self.timer = None
        self._spawn(self._announce())

    async def _announce(self) -> None:
        now = self.feed.clock.now_ms()
        due = self.leases.due(now)
        if due:
            try:
                current = await self.feed.run(
                    reread_leases, self.feed.store, self.scope, [d.handoff_id for d in due]
                )
            except AidememoError as error:
                log.warning("lease re-read failed for %s: %s", self.scope, error)
                for lease in due:
                    self.leases.track(lease.handoff_id, lease)
                current = None
            if current is not None:
                for lease in settle_due(self.leases, due, current, now):
                    text = notice_message(lease)
                    for sub in list(self.subs):
                        if sub.actor in lease.participants:
                            sub.offer(text)
        if self.timer is None:
            self._arm_timer()


class LiveFeed:
    """Every live subscription of one `HttpApp`, served from one event loop."""

    def __init__(
        self,
        app: HttpApp,
        *,
        queue_max: int = SUBSCRIBER_QUEUE_MAX,
        max_pending_bytes: int = LIVE_PENDING_MAX_BYTES,
        recheck_s: float = RECHECK_INTERVAL_S,
        read_limit: int = COMMIT_READ_LIMIT,
    ) -> None:
        self.app = app
        self.max_pending_bytes = max_pending_bytes
        self.store = app.services.store
        self.ledger_reads = app.services.ledger_reads
        self.clock = app.services.ledger.clock
        self.queue_max = queue_max
        self.recheck_s = recheck_s
        self.read_limit = read_limit
        self.hubs: dict[Scope, ProjectHub] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pool: Executor | None = None  # the dispatch pool, given with the first WebSocket
        self.on_demand: Callable[[bool], None] | None = None
        """Told True when the first hub opens and False when the last one closes (the commit
        listener's `want`, `origin.notify`: it listens only while there is someone to wake)."""
        app.services.ledger.on_commit.append(self._committed)

    # -- commits (called from any thread) -------------------------------------------------

    def _committed(self, scope: Scope, seq: int) -> None:
        loop = self.loop
        if loop is None or scope not in self.hubs:
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to tell
            loop.call_soon_threadsafe(self._wake, scope)

    def _wake(self, scope: Scope) -> None:
        hub = self.hubs.get(scope)
        if hub is not None:
            hub.wake()

    def notified(self, scope: Scope, seq: int) -> None:
        """A commit another process (or this one) made, heard through PostgreSQL `LISTEN`
        (`origin.notify`, LIVE-9); called from the listener's thread. Wakes the project's
        feed unless it has read that far already (this process's own commits woke it)."""
        loop = self.loop
        if loop is None or scope not in self.hubs:
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to tell
            loop.call_soon_threadsafe(self._wake_before, scope, seq)

    def _wake_before(self, scope: Scope, seq: int) -> None:
        hub = self.hubs.get(scope)
        if hub is not None and (hub.seq is None or hub.seq < seq):
            hub.wake()

    def listening(self) -> None:
        """The commit listener's `LISTEN` took effect (called from its thread): every hub reads
        once more, since a commit another process made before then was not notified here."""
        loop = self.loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to tell
            loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for hub in list(self.hubs.values()):
            hub.wake()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """A blocking store call in the dispatch pool (the pool lane, HTTP-14)."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    # -- one WebSocket --------------------------------------------------------------------

    async def handle(
        self, scope: AsgiScope, receive: AsgiReceive, send: AsgiSend, pool: Executor
    ) -> None:
        """Serve one ASGI `websocket` scope until either side closes; blocking store calls
        (the upgrade's admission, the hubs' reads) run on `pool`."""
        self.loop = asyncio.get_running_loop()
        self.pool = pool
        started = time.perf_counter()
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        headers = fold_headers(scope["headers"])
        rid = request_id(headers)
        request = Request(
            method="GET",
            path=scope["path"],
            query=scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
            request_id=rid,
            upgrade=True,
        )
        status = 101
        code: int | None = None
        try:
            try:
                sub = await self.run(open_subscription, self.app, request)
            except AidememoError as error:
                status = error.http_status
                await _deny(scope, send, error, rid)
                return
            except Exception:
                log.exception("live feed check raised; request_id=%s", rid)
                status = 503
                await _deny(scope, send, fail(ErrorCode.STORAGE_FAILURE, "check raised"), rid)
                return
            await send(
                {
                    "type": "websocket.accept",
                    "headers": [(REQUEST_ID_HEADER.encode(), rid.encode())],
                }
            )
            code = await self._serve(sub.scope, FeedCursor(sub), receive, send)
        finally:
            if access.enabled():
                elapsed_ms = (time.perf_counter() - started) * 1000.0
                close = "-" if code is None else code
                access.write((rid, log_safe(request.path), status, close, elapsed_ms))

    async def _serve(
        self, scope: Scope, cursor: FeedCursor, receive: AsgiReceive, send: AsgiSend
    ) -> int | None:
        """Run an accepted subscriber; returns the close code sent (None: the client left)."""
        sub = Subscriber(cursor, self.queue_max, self.max_pending_bytes)
        hub = self.hubs.get(scope)
        if hub is None:
            first = not self.hubs
            hub = self.hubs[scope] = ProjectHub(self, scope)
            hub.subs.add(sub)
            hub.start()
            if first and self.on_demand is not None:
                self.on_demand(True)
        else:
            hub.subs.add(sub)
        metrics.live_subscribers(1)
        loop = asyncio.get_running_loop()
        sender = loop.create_task(self._send_loop(sub, send))
        listener = loop.create_task(_until_disconnect(receive))
        failed = loop.create_task(sub.failed.wait())
        try:
            await asyncio.wait({sender, listener, failed}, return_when=asyncio.FIRST_COMPLETED)
            if listener.done():
                return None
            if sender.done() and sub.failure is None:
                error = sender.exception()
                if isinstance(error, AidememoError):
                    sub.fail(error)
                elif isinstance(error, OSError):  # uvicorn's ClientDisconnected
                    return None
                else:
                    if error is not None:
                        log.error("live feed sender failed", exc_info=error)
                    sub.fail(fail(ErrorCode.STORAGE_FAILURE, "live feed failed"))
            assert sub.failure is not None
            sender.cancel()
            with contextlib.suppress(BaseException):
                await sender
            sub.release()
            return await _close_with(send, sub.failure)
        finally:
            for task in (sender, listener, failed):
                task.cancel()
            sub.release()
            hub.subs.discard(sub)
            metrics.live_subscribers(-1)
            if not hub.subs and self.hubs.get(scope) is hub:
                del self.hubs[scope]
                hub.stop()
                if not self.hubs and self.on_demand is not None:
                    self.on_demand(False)

    async def _send_loop(self, sub: Subscriber, send: AsgiSend) -> None:
        """Catch up, go live, then forward the hub's batches and notices in order."""

        async def text(value: str) -> None:
            await send({"type": "websocket.send", "text": value})

        await self._catch_up(sub, text, first=True)
        while True:
            item, size = await sub.queue.get()
            if isinstance(item, str):
                await text(item)
                sub.sent(size)
                continue
            try:
                messages = sub.cursor.messages(item, commit_message)
            except Gap:
                sub.sent(size)
                await self._catch_up(sub, text, first=False)
                continue
            del item  # the batch is shared: hold only this subscriber's messages
            for message in messages:
                await text(message)
            sub.sent(size)

    async def _catch_up(
        self, sub: Subscriber, text: Callable[[str], Awaitable[None]], *, first: bool
    ) -> None:
        """Page the materialized feed from the cursor to the head; the first page is always
        sent (it tells the client it has caught up), later empty pages are not. Ends live:
        batches published from then on are queued."""
        cursor = sub.cursor
        sub.live = False
        while True:
            sub.missed = False
            while True:
                before = cursor.after_seq
                page = await self.run(cursor.catch_up, self.ledger_reads)
                if first or page.records or cursor.after_seq != before:
                    await text(page_message(page))
                    first = False
                if not page.has_more:
                    break
            if not sub.missed:
                sub.live = True  # no await since the last read: no batch slips between
                return


async def _until_disconnect(receive: AsgiReceive) -> None:
    """Wait for the client to close; anything it sends is ignored."""
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return


async def _close_with(send: AsgiSend, error: AidememoError) -> int | None:
    """`{"error": ...}` then a close with 4000 + status (LIVE-4); None if the client is gone."""
    code = close_code(error)
    try:
        await asyncio.wait_for(
            send({"type": "websocket.send", "text": error_message(error)}), CLOSE_SEND_TIMEOUT_S
        )
        await asyncio.wait_for(
            send({"type": "websocket.close", "code": code, "reason": error.code.value}),
            CLOSE_SEND_TIMEOUT_S,
        )
    except Exception:  # the client went away, or stopped reading altogether
        return None
    return code


async def _deny(scope: AsgiScope, send: AsgiSend, error: AidememoError, rid: str) -> None:
    """Refuse before the upgrade with the HTTP error `/changes` would give (LIVE-1). The
    WebSocket protocol writes the head; its fields are the error's, its length and the
    request id."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        # A server without the denial-response extension can only answer 403.
        await send({"type": "websocket.close", "code": 1008})
        return
    response = error_response(error)  # its headers, Retry-After of a 503 included (ERR-2)
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]
    headers.append((b"content-length", str(len(response.body)).encode()))
    headers.append((REQUEST_ID_HEADER.encode(), rid.encode()))
    await send(
        {"type": "websocket.http.response.start", "status": response.status, "headers": headers}
    )
    await send({"type": "websocket.http.response.body", "body": response.body})
