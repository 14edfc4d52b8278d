"""`ProjectCoordinator`: one Durable Object per project, named `"{tenant}/{project}"`.

It holds the project's records, receipts, change log, audit, search index and the project's
memberships in its own SQLite (the shared `SqliteStore`), and answers the contract by running
the core's `HttpApp.dispatch(request, caller)`. The Worker has already authenticated the
token; `caller` is that identity, passed as an RPC argument, never read from headers. The
core checks the caller's membership on every request, inside the same read or write, so a
suspension or role change takes effect on the next request.

The object serializes its own writes (one Durable Object runs one call at a time, and every
command is one `transactionSync`), which is the edge's per-project lock. With
`STORAGE_MODE=postgres` the records live in the shared PostgreSQL store instead
(`durable_objects.pg_connection`); `handle` then holds the object's lock across each request,
so the project's writes still reach PostgreSQL one at a time, and the administration below is
not used: the Worker runs the admin routes on PostgreSQL itself.

Administration arrives from the Worker as RPC calls:
- `sync_member`: the tenant registry's view of one member (and the project's epoch) applied
  here; idempotent, so a retried bootstrap completes a half-done one.
- `export_begin` / `export_page`: a consistent snapshot of the project's rows, taken in one
  synchronous read and handed out in pages of at most 1 MiB.
- `import_begin` / `import_page` / `import_commit`: the project's part of an import, staged in
  pages and written in one transaction by the core's `Archive.import_plan`.
- `delete_tenant`: every row of the tenant removed, verified by counts.
Snapshots and staged imports live in memory, keyed by an id; an alarm drops those left behind
by a Worker that gave up. If the object is evicted in between, the next page call fails and the
Worker answers 503, so the client retries the whole export or import.

The live change feed (`durable_objects.live`): the Worker forwards
`GET .../changes/live` with `Upgrade: websocket` by `stub.fetch` with the identity it
authenticated in headers; `fetch` runs the shared pre-upgrade checks (a refusal is the HTTP
error of `/changes`), accepts a hibernatable WebSocket and answers 101. Every request that
committed is followed by one shared read pushed to the subscribers; `sync_member`,
`delete_tenant` and `import_commit` re-check them at once (in SQLite mode every identity change
of the project reaches the object that way). The object's one alarm is set to the earliest of:
a staged export or import's expiry, the earliest live claim expiry (lease notices) and, in
PostgreSQL mode, where the Worker changes memberships on the database directly, the membership
re-check every 2 s while subscribers exist.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote, urlsplit

from workers import DurableObject

from aidememo.domain.canonical import decode_json
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.domain.limits import HANDOFF_LEASE_MS_DEFAULT, HANDOFF_LEASE_MS_MAX
from aidememo.domain.model import Actor, ActorKind, Membership, MemberStatus, Project, Role, Scope
from aidememo.http.app import HttpApp, error_response
from aidememo.http.live import open_subscription
from aidememo.http.types import Request
from aidememo.ports import WriteTx
from aidememo.service.archive import Archive, Plan, project_lines
from aidememo.stores.memory import MemoryStore
from durable_objects.base import StoredObject
from durable_objects.live import EdgeFeed, answer_close
from durable_objects.rpc import (
    answer,
    caller_from,
    forwarded_caller,
    pack_pages,
    plain,
    request_from,
    response_payload,
)

log = logging.getLogger("aidememo.edge")

# Staged exports and imports older than this are dropped by the alarm.
STAGE_TTL_MS = 10 * 60 * 1000
# Tables whose rows belong to a project's content (the rest are identity rows).
CONTENT_TABLES = (
    "resources",
    "changes",
    "receipts",
    "audit",
    "handoff_index",
    "fact_search_keys",
    "fact_search",
)


def lease_ms(env: Any) -> int:
    """The `HANDOFF_LEASE_MS` var (a string in `[vars]`), or the origin's default."""
    raw = getattr(env, "HANDOFF_LEASE_MS", None)
    if raw in (None, ""):
        return HANDOFF_LEASE_MS_DEFAULT
    value = int(str(raw))
    if not 0 < value <= HANDOFF_LEASE_MS_MAX:
        raise ValueError(f"HANDOFF_LEASE_MS must be 1..{HANDOFF_LEASE_MS_MAX}")
    return value


class ProjectCoordinator(DurableObject, StoredObject):  # type: ignore[misc]
    """One project's canonical store and its single writer."""

    # Re-check the live subscribers' memberships from the alarm even in SQLite mode (where
    # every identity change reaches the object itself); PostgreSQL mode always does.
    live_recheck: bool = False

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self._app: HttpApp | None = None
        self._exports: dict[str, tuple[int, list[list[Any]]]] = {}
        self._imports: dict[str, tuple[int, dict[str, Any], list[bytes]]] = {}
        self._init_store()
        self._feed = EdgeFeed(ctx, self.clock, lambda: self.ids.new_id("sub"))
        self._committed = False
        self._alarm_at: int | None = None
        self._alarm_known = False

    # -- requests -------------------------------------------------------------------------

    def _http(self) -> HttpApp:
        store = self._open(create=False)
        if store is None:
            # Never provisioned: answer from an empty store, which gives exactly the origin's
            # answers for a project that does not exist, and write nothing.
            return HttpApp(MemoryStore(), clock=self.clock, ids=self.ids)
        if self._app is None or self._app.store is not store:
            self._app = HttpApp(
                store, clock=self.clock, ids=self.ids, handoff_lease_ms=lease_ms(self.env)
            )
            self._app.services.ledger.on_commit.append(self._on_commit)
        return self._app

    def _on_commit(self, scope: Scope, seq: int) -> None:
        self._committed = True

    async def handle(self, request: Any, caller: Any) -> dict[str, Any]:
        """One contract request for this project, from an authenticated caller. Calls run one
        at a time (`_serial`; in PostgreSQL mode a socket wait would let the next one in)."""
        async with self._serial:
            try:
                app = self._http()
            except AidememoError as error:  # PostgreSQL unreachable, or its schema not migrated
                log.warning("project store unavailable: %s", error.message)
                return response_payload(error_response(error))
            self._committed = False
            response = app.dispatch(request_from(request), caller_from(caller))
            committed, self._committed = self._committed, False
            if committed:
                self._live(app, push=True)
        if committed and self._feed.subscribers():
            await self._schedule()  # a new claim may expire before the alarm already set
        return response_payload(response)

    # -- the live change feed -------------------------------------------------------------

    async def fetch(self, request: Any) -> Any:
        """`GET .../changes/live` forwarded by the Worker: the checks of `/changes` (a refusal
        is that HTTP error, before any upgrade), then a hibernatable WebSocket and 101."""
        from workers import Response

        async with self._serial:
            try:
                core = _core_request(request)
                caller = forwarded_caller(core.headers)
                app = self._http()
                sub = open_subscription(app, core, caller)
                if core.headers.get("upgrade", "").strip().lower() != "websocket":
                    raise fail(ErrorCode.UPGRADE_REQUIRED, "connect with a WebSocket upgrade")
                client = self._feed.subscribe(sub, app.services.store, app.services.queries)
            except Exception as exc:
                error = (
                    exc
                    if isinstance(exc, AidememoError)
                    else fail(ErrorCode.STORAGE_FAILURE, "unexpected failure")
                )
                if not isinstance(exc, AidememoError):
                    log.exception("live feed upgrade failed")
                elif error.code is ErrorCode.STORAGE_FAILURE:
                    log.warning("live feed upgrade: %s", error.message)
                refused = error_response(error)
                return Response(refused.body, status=refused.status, headers=dict(refused.headers))
        await self._schedule()
        return Response(None, status=101, web_socket=client)

    def _live(self, app: HttpApp, *, push: bool) -> None:
        """Push the commits after the feed's position (and re-check memberships) to the
        subscribers; a failed read is logged, and the next commit or alarm reads again."""
        if not self._feed.subscribers():
            return
        try:
            self._feed.push(app.services.store, app.services.queries)
        except AidememoError as error:
            log.warning("live feed read failed (%s): %s", "push" if push else "recheck", error)

    async def _recheck(self) -> None:
        """An identity change reached the object: re-check its subscribers now."""
        if self._feed.subscribers():
            async with self._serial:
                self._live(self._http(), push=False)
            await self._schedule()

    async def webSocketMessage(self, ws: Any, message: Any) -> None:
        """Messages from subscribers are ignored (LIVE-6)."""

    async def webSocketClose(self, ws: Any, code: int, reason: str, was_clean: bool) -> None:
        """A subscriber left: forget it and complete the close."""
        self._feed.drop(ws)
        answer_close(ws, int(code), str(reason))

    async def webSocketError(self, ws: Any, error: Any) -> None:
        """A subscriber's socket failed: forget it."""
        self._feed.drop(ws)

    # -- membership -----------------------------------------------------------------------

    async def sync_member(self, spec: Any) -> dict[str, Any]:
        """Apply the registry's view of one member: tenant, project (with its epoch), actor,
        role and status. Idempotent; a different epoch or actor kind is `identity_mismatch`."""
        s = plain(spec)

        def run(tx: WriteTx) -> dict[str, Any]:
            now = self.clock.now_ms()
            tenant_id, project_id = s["tenant_id"], s["project_id"]
            if not tx.tenant_exists(tenant_id):
                tx.insert_tenant(tenant_id, now)
            project = tx.get_project(Scope(tenant_id, project_id))
            if project is None:
                tx.insert_project(Project(tenant_id, project_id, s["project_epoch"], 0), now)
            elif project.project_epoch != s["project_epoch"]:
                raise fail(ErrorCode.IDENTITY_MISMATCH, "project exists with another epoch")
            kind = ActorKind(s["kind"])
            actor = tx.get_actor(tenant_id, s["actor_id"])
            if actor is None:
                tx.insert_actor(Actor(tenant_id, s["actor_id"], kind), now)
            elif actor.kind is not kind:
                raise fail(ErrorCode.IDENTITY_MISMATCH, f"actor exists with kind {actor.kind}")
            member = Membership(
                tenant_id, project_id, s["actor_id"], Role(s["role"]), MemberStatus(s["status"])
            )
            tx.put_membership(member, now)
            return {"role": member.role.value, "status": member.status.value}

        result = answer(lambda: self._writable().transaction(run))
        await self._recheck()  # a suspension closes the member's subscriptions at once
        return result

    # -- export ---------------------------------------------------------------------------

    async def export_begin(self, spec: Any) -> dict[str, Any]:
        """Snapshot the project's rows; `{export_id, project_epoch, head_seq, pages}`."""
        s = plain(spec)

        def run() -> dict[str, Any]:
            store = self._open(create=False)
            scope = Scope(s["tenant_id"], s["project_id"])
            if store is None:
                raise fail(ErrorCode.RESOURCE_NOT_FOUND, f"project {scope.project_id} not found")

            def snapshot(tx: Any) -> tuple[Project, list[tuple[str, bytes]]]:
                project = tx.get_project(scope)
                if project is None:
                    raise fail(ErrorCode.RESOURCE_NOT_FOUND, "project not found")
                return project, list(project_lines(tx, project))

            project, lines = store.read(snapshot)
            export_id = self.ids.new_id("export")
            pages = pack_pages(lines)
            self._exports[export_id] = (self.clock.now_ms(), pages)
            return {
                "export_id": export_id,
                "project_epoch": project.project_epoch,
                "head_seq": project.head_seq,
                "pages": len(pages),
            }

        result = answer(run)
        await self._schedule()
        return result

    async def export_page(self, export_id: Any, number: Any) -> dict[str, Any]:
        """Page `number` of a snapshot: runs `[type, count, text]`; the last page frees it."""

        def run() -> list[Any]:
            entry = self._exports.get(str(export_id))
            if entry is None:
                raise fail(ErrorCode.STORAGE_FAILURE, "export snapshot is gone; start again")
            pages = entry[1]
            n = int(number)
            if n == len(pages) - 1:
                del self._exports[str(export_id)]
            return pages[n]

        return answer(run)

    # -- import ---------------------------------------------------------------------------

    async def import_begin(self, spec: Any) -> dict[str, Any]:
        """Stage an import: `{import_id, tenant_id, project_id, project_epoch, identity}`
        where `identity` holds the project's project, actor and membership records."""
        s = plain(spec)
        self._imports[str(s["import_id"])] = (self.clock.now_ms(), s, [])
        await self._schedule()
        return answer(lambda: None)

    async def import_page(self, import_id: Any, text: Any) -> dict[str, Any]:
        """Append whole lines (at most 1 MiB) of the project's rows to a staged import."""

        def run() -> None:
            entry = self._imports.get(str(import_id))
            if entry is None:
                raise fail(ErrorCode.STORAGE_FAILURE, "staged import is gone; start again")
            entry[2].extend(str(text).encode("utf-8").splitlines(keepends=True))

        return answer(run)

    async def import_commit(self, import_id: Any) -> dict[str, Any]:
        """Check the staged project with the core's `Plan` and write it in one transaction."""

        def run() -> dict[str, Any]:
            entry = self._imports.pop(str(import_id), None)
            if entry is None:
                raise fail(ErrorCode.STORAGE_FAILURE, "staged import is gone; start again")
            _, s, lines = entry
            records = list(s["identity"]) + [decode_json(line) for line in lines]
            plan = Plan.build(validate_id(s["tenant_id"], "tenant_id"), records)
            if list(plan.projects) != [s["project_id"]]:
                raise fail(ErrorCode.INVALID_COMMAND, "an import page names another project")
            archive = Archive(self._writable(), self.clock, self.ids)
            archive.import_plan(plan, {s["project_id"]: s["project_epoch"]})
            return {"head_seq": plan.projects[s["project_id"]]}

        result = answer(run)
        await self._recheck()  # a new epoch closes the subscriptions with 4409
        return result

    # -- deletion -------------------------------------------------------------------------

    async def delete_tenant(self, tenant_id: Any) -> dict[str, Any]:
        """Remove every row of the tenant here; `{removed, left}` counts by table."""
        result = answer(lambda: delete_rows(self._open(create=False), str(tenant_id)))
        await self._recheck()  # the project is gone: its subscribers are closed (4403)
        return result

    # -- alarm ----------------------------------------------------------------------------

    def _rechecks(self) -> bool:
        return self._postgres or self.live_recheck

    async def _schedule(self) -> None:
        """Set the object's one alarm to the earliest thing it must do: drop a stale staged
        export or import, announce an expired lease, re-check memberships. An alarm already
        set earlier is kept (it fires, finds less to do, and sets the next one)."""
        staged = [v[0] for v in self._exports.values()] + [v[0] for v in self._imports.values()]
        times = [at + STAGE_TTL_MS for at in staged]
        live = self._feed.alarm_at(self._rechecks())
        if live is not None:
            times.append(live)
        if not times:
            return
        want = min(times)
        if not self._alarm_known:
            current = await self.ctx.storage.getAlarm()
            self._alarm_at = None if current is None else int(current)
            self._alarm_known = True
        if self._alarm_at is None or want < self._alarm_at:
            await self.ctx.storage.setAlarm(want)
            self._alarm_at = want

    async def alarm(self, alarm_info: Any = None) -> None:
        """Drop staged exports and imports older than `STAGE_TTL_MS`; send the due lease
        notices and re-check the subscribers (LIVE-5, LIVE-7); set the next alarm. The live
        feed writes nothing here (HO-6)."""
        self._alarm_at, self._alarm_known = None, True  # the alarm that was set has fired
        cutoff = self.clock.now_ms() - STAGE_TTL_MS
        for key in [k for k, v in self._exports.items() if v[0] <= cutoff]:
            del self._exports[key]
        for key in [k for k, v in self._imports.items() if v[0] <= cutoff]:
            del self._imports[key]
        if self._feed.subscribers():
            async with self._serial:
                try:
                    app = self._http()
                    if self._rechecks():
                        self._feed.push(app.services.store, app.services.queries)
                    self._feed.announce(app.services.store)
                except AidememoError as error:
                    log.warning("live feed alarm failed: %s", error.message)
        await self._schedule()


def _core_request(request: Any) -> Request:
    """The SDK request the Worker forwarded, as the core's `Request` (no body: a GET)."""
    url = urlsplit(str(request.url))
    headers = {str(k).lower(): str(v) for k, v in request.headers.items()}
    return Request("GET", unquote(url.path) or "/", url.query, headers, b"")


def delete_rows(store: Any, tenant_id: str) -> dict[str, dict[str, int]]:
    """Delete the tenant's rows from one object's store and count what is left (ARC-4).

    An object that never held the tenant removes nothing; if any row survived, the deletion is
    rolled back and reported as `storage_failure`.
    """
    if store is None:
        return {"removed": {}, "left": {}}

    def run(tx: WriteTx) -> dict[str, dict[str, int]]:
        before = {k: v for k, v in tx.count_tenant_rows(tenant_id).items() if v}
        if before:
            tx.delete_tenant(tenant_id)
        left = {k: v for k, v in tx.count_tenant_rows(tenant_id).items() if v}
        if left:  # roll back: a deletion is whole or not at all
            raise fail(ErrorCode.STORAGE_FAILURE, f"tenant rows survived deletion: {left}")
        return {"removed": before, "left": left}

    result: dict[str, dict[str, int]] = store.transaction(run)
    return result
