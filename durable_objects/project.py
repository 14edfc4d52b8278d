"""`ProjectCoordinator`: one Durable Object per project, named `"{tenant}/{project}"`.

It holds the project's records, receipts, change log, audit, search index and the project's
memberships in its own SQLite (the shared `SqliteStore`), and answers the contract by running
the core's `HttpApp.serve(admission, request)`: the Worker has already run the request
pipeline's stage one and read the body (`aidememo.http.pipeline`), and hands over the route it
resolved, the body as text and the caller it authenticated, as RPC arguments, never read from
headers. The core checks the caller's membership on every request, inside the same read or
write, so a suspension or role change takes effect on the next request.

The object serializes its own writes (one Durable Object runs one call at a time, and every
command is one `transactionSync`), which is the edge's per-project lock. With
`STORAGE_MODE=postgres` the records live in the shared PostgreSQL store instead
(`durable_objects.pg_connection`); `handle` then holds the object's lock across each request,
so the project's writes still reach PostgreSQL one at a time, and the administration below is
not used: the Worker runs the admin routes on PostgreSQL itself.

Administration arrives from the Worker as RPC calls:
- `sync_member`: the tenant registry's view of one member (and the project's epoch) applied
  here; idempotent, so a retried bootstrap completes a half-done one.
- `export_begin` / `export_page`: a consistent snapshot of the project's rows, read in
  keyset pages (`archive_rows.project_lines`) and packed into pages of at most 1 MiB that go
  straight into the staging table, all in one synchronous transaction (no await, so no other
  call interleaves); `export_page` reads one page back, and the last page drops the rest.
- `import_begin` / `import_page` / `import_commit` / `import_abort`: the project's part of an
  import; the spec and each page (whole NDJSON lines, at most 1 MiB) are appended to the
  staging table, and `import_commit` reads them back one page at a time, checking and writing
  them in one transaction (`project_import.ProjectImport`: all or nothing). The stage is
  dropped after the commit, whatever its outcome, or by `import_abort` when the Worker refuses
  the stream.
- `delete_tenant`: every row of the tenant removed, verified by counts, and its stages dropped.
Snapshots and staged imports live in the object's own SQLite (`durable_objects.staging`, table
`aidememo_staging`, outside the canonical schema), never in Python memory: the object holds
about one page at a time whatever the project's size (SPEC.md ARC-8). They survive an
eviction between two calls; the alarm drops those older than `STAGE_TTL_MS`, left behind by a
Worker that gave up, and a call on a dropped stage is `storage_failure` (503: the client
starts the export or import again).

The live change feed (`durable_objects.live`): the Worker forwards
`GET .../changes/live` with `Upgrade: websocket` by `stub.fetch` with the identity it
authenticated in headers; `fetch` runs the shared pre-upgrade checks (a refusal is the HTTP
error of `/changes`), accepts a hibernatable WebSocket and answers 101. Every request that
committed is followed by one shared read pushed to the subscribers; `sync_member`,
`delete_tenant` and `import_commit` re-check them at once (in SQLite mode every identity change
of the project reaches the object that way). The object's one alarm is set to the earliest of:
a staged export or import's expiry, the earliest live claim expiry (lease notices), the
semantic indexer's next step (`durable_objects.project_index`, SEM-11) and, in PostgreSQL
mode, where the Worker changes memberships on the database directly, the membership re-check
every 2 s while subscribers exist.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote, urlsplit

from workers import DurableObject

from aidememo.bodies import r2_grants
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.domain.limits import HANDOFF_LEASE_MS_DEFAULT, HANDOFF_LEASE_MS_MAX
from aidememo.domain.model import Actor, ActorKind, Membership, MemberStatus, Project, Role, Scope
from aidememo.http.app import HttpApp, error_response
from aidememo.http.live import open_forwarded
from aidememo.http.types import Request
from aidememo.mcp.http import parse_origins
from aidememo.ports import ReadTx, WriteTx
from aidememo.service.archive import Archive
from aidememo.service.archive_rows import project_lines
from aidememo.service.project_import import ProjectImport
from aidememo.stores.in_memory import InMemoryStore
from durable_objects.artifacts import artifact_due, gc_pass, pin_identity, run_phase
from durable_objects.base import StoredObject, delete_rows
from durable_objects.live import EdgeFeed, answer_close
from durable_objects.mcp_bodies import InlineBodies
from durable_objects.project_index import ProjectIndex
from durable_objects.rpc import (
    answer,
    caller_from,
    forwarded_caller,
    forwarded_token,
    iter_packed,
    plain,
    request_and_caller,
    request_from,
    response_payload,
    response_text,
)
from durable_objects.staging import EXPORT, IMPORT, StagedPages, Staging

log = logging.getLogger("aidememo.edge")

# Staged exports and imports older than this are dropped by the alarm.
STAGE_TTL_MS = 10 * 60 * 1000
# Rows per read while an export is staged: a resource or change carries a body of up to about
# 1 MiB (the request limit), so a read holds at most a few MiB next to the page being built.
EXPORT_READ_ROWS = 8
_GONE_EXPORT = "export snapshot is gone; start again"
_GONE_IMPORT = "staged import is gone; start again"


def lease_ms(env: Any) -> int:
    """The `HANDOFF_LEASE_MS` var (a string in `[vars]`), or the origin's default."""
    raw = getattr(env, "HANDOFF_LEASE_MS", None)
    if raw in (None, ""):
        return HANDOFF_LEASE_MS_DEFAULT
    value = int(str(raw))
    if not 0 < value <= HANDOFF_LEASE_MS_MAX:
        raise ValueError(f"HANDOFF_LEASE_MS must be 1..{HANDOFF_LEASE_MS_MAX}")
    return value


class ProjectCoordinator(DurableObject, StoredObject, ProjectIndex):  # type: ignore[misc]
    """One project's canonical store and its single writer."""

    # Re-check the live subscribers' memberships from the alarm even in SQLite mode (where
    # every identity change reaches the object itself); PostgreSQL mode always does.
    live_recheck: bool = False

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self._app: HttpApp | None = None
        self._inline_app: HttpApp | None = None  # MCP's app: bodies through R2 (ART-11)
        self._inline = InlineBodies()
        self._staging = Staging(ctx.storage)
        self._init_store()
        self._init_index()
        self._feed = EdgeFeed(ctx, self.clock, lambda: self.ids.new_id("sub"))
        self._committed = False
        self._alarm_at: int | None = None
        self._alarm_known = False
        self._pinned = False  # the catalog's body-store identity checked (ART-8)

    # -- requests -------------------------------------------------------------------------

    def _http(self) -> HttpApp:
        store = self._open(create=False)
        if store is None:
            # Never provisioned: answer from an empty store, which gives exactly the origin's
            # answers for a project that does not exist, and write nothing.
            return HttpApp(InMemoryStore(), clock=self.clock, ids=self.ids)
        if self._app is None or self._app.store is not store:
            self._app = self._build(store, _grants(self.env))  # GRANT-5: grants via R2's S3 API
            if getattr(self.env, "ARTIFACTS", None) is not None:
                self._inline_app = self._build(store, self._inline)
        return self._app

    def _build(self, store: Any, bodies: Any) -> HttpApp:
        app = HttpApp(
            store,
            clock=self.clock,
            ids=self.ids,
            handoff_lease_ms=lease_ms(self.env),
            mcp_allowed_origins=parse_origins(getattr(self.env, "MCP_ALLOWED_ORIGINS", "")),
            bodies=bodies,
            semantic=self._vectors,  # Workers AI and Vectorize, when bound (SEM-10)
            search_wait_s=0,  # the object has waited already (_await_index)
        )
        app.services.ledger.on_commit.append(self._on_commit)
        return app

    async def _serve(
        self, app: HttpApp, request: Any, caller: Any, admission: Any, core: Any
    ) -> Any:
        """Serve a request, and serve it again (at most twice more) after a pass that wanted
        what only an await gives: the query's embedding and nearest vectors (SEM-10,
        `durable_objects.edge_search`) or, for a route that reaches artifact bodies inline
        (the MCP tools, ART-11), a body fetched from or written into R2 over the app whose
        body store is the object's one `InlineBodies` (`durable_objects.mcp_bodies`)."""
        inline_app = self._inline_app if admission.route.inline_bodies else None
        inline = inline_app is not None
        if inline_app is not None:
            app = inline_app
            self._inline.reset()
        try:
            response = app.serve(admission, core)
            for _ in range(2):
                if self._vectors is not None and await self._vectors.fetch():
                    pass
                elif not inline:
                    break
                else:
                    if self._inline.to_put is not None and not self._pinned:
                        pin_identity(app.services.artifacts.store)  # the catalog names R2 (ART-8)
                        self._pinned = True
                    if not await self._inline.fetch(getattr(self.env, "ARTIFACTS", None)):
                        break
                core, admission = request_from(request, caller_from(caller))
                response = app.serve(admission, core)
        except AidememoError as error:
            return error_response(error)
        finally:
            if self._vectors is not None:
                self._vectors.reset()
        return response

    def _on_commit(self, scope: Scope, seq: int) -> None:
        self._committed = True
        self._learn(scope)

    async def handle(self, request: Any, caller: Any = None) -> Any:
        """One contract request for this project, from an authenticated caller. Calls run one
        at a time (`_serial`; in PostgreSQL mode a socket wait would let the next one in).
        The Worker sends one `request_text` and gets a `response_text` back; the payload and
        caller as two RPC objects are answered with a `response_payload` dict."""
        if isinstance(request, str):
            payload, who = request_and_caller(request)
            return response_text(await self._handle(payload, who))
        return response_payload(await self._handle(request, caller))

    async def _handle(self, request: Any, caller: Any) -> Any:
        who = caller_from(caller)
        core, admission = request_from(request, who)
        if admission.route.semantic and self._indexer is not None:
            project_id = admission.params.get("project_id")
            if project_id:
                await self._await_index(request, who.scope(project_id))  # SEM-5
        async with self._serial:
            try:
                app = self._http()
            except AidememoError as error:  # PostgreSQL unreachable, or its schema not migrated
                log.warning("project store unavailable: %s", error.message)
                return error_response(error)
            self._committed = False
            response = await self._serve(app, request, caller, admission, core)
            committed, self._committed = self._committed, False
            if committed:
                self._live(app, push=True)
        artifact = admission.route.catalog  # a GC deadline may move (ART-7)
        if artifact or (committed and (self._feed.subscribers() or self._indexer is not None)):
            await self._schedule(artifact)  # a new claim may expire, an index step is due
        return response

    async def artifact_phase(self, phase: Any, args: Any, caller: Any) -> dict[str, Any]:
        """One catalog step of an artifact body route the Worker drives around its R2
        transfer (`durable_objects.artifacts`, SPEC.md ART-10); `{"ok"}` or `{"error"}`."""
        async with self._serial:
            try:
                app = self._http()
            except AidememoError as error:
                return {"error": {"code": error.code.value, "message": error.message}}
            self._committed = False
            who, what = caller_from(caller), plain(args)

            def run() -> Any:
                if not self._pinned:  # once per object: the catalog names R2 (ART-8)
                    pin_identity(app.services.artifacts.store)
                    self._pinned = True
                return run_phase(app.services.artifacts, str(phase), what, who)

            result = answer(run)
            committed, self._committed = self._committed, False
            if committed:
                self._live(app, push=True)
        await self._schedule(True)  # a reservation's expiry or a GC intent may be the earliest
        return result

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
                sub = open_forwarded(app, core, caller, forwarded_token(core.headers))
                if core.headers.get("upgrade", "").strip().lower() != "websocket":
                    raise fail(ErrorCode.UPGRADE_REQUIRED, "connect with a WebSocket upgrade")
                client = self._feed.subscribe(sub, app.services.store, app.services.ledger_reads)
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
            self._feed.push(app.services.store, app.services.ledger_reads)
        except AidememoError as error:
            log.warning("live feed read failed (%s): %s", "push" if push else "recheck", error)

    async def _recheck(self) -> None:
        """An identity change reached the object: re-check its subscribers now."""
        if self._feed.subscribers():
            async with self._serial:
                self._live(self._http(), push=False)
            await self._schedule()

    async def revoke_token(self, token_sha256: Any) -> dict[str, Any]:
        """A token was revoked (the Worker calls every project of its actor): its live feeds
        here close with `authentication_failed` (4401); `{"closed": n}`."""
        digest = bytes.fromhex(str(token_sha256))
        async with self._serial:
            closed = self._feed.revoke(digest) if self._feed.subscribers() else 0
        return answer(lambda: {"closed": closed})

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
        """Snapshot the project's rows into the staging table, page by page, in one
        synchronous transaction; `{export_id, project_epoch, head_seq, pages}`."""
        s = plain(spec)

        def run() -> dict[str, Any]:
            store = self._open(create=False)
            scope = Scope(s["tenant_id"], s["project_id"])
            if store is None:
                raise fail(ErrorCode.RESOURCE_NOT_FOUND, f"project {scope.project_id} not found")
            export_id, now = self.ids.new_id("export"), self.clock.now_ms()

            def snapshot(tx: ReadTx) -> tuple[Project, int]:
                project = tx.get_project(scope)
                if project is None:
                    raise fail(ErrorCode.RESOURCE_NOT_FOUND, "project not found")
                lines = project_lines(tx, project, read_rows=EXPORT_READ_ROWS)
                pages = self._staging.stage_export(
                    export_id, scope.tenant_id, now, iter_packed(lines)
                )
                return project, pages

            # No await from the first read to the last staged page: nothing interleaves, and
            # the transaction leaves the stage whole or absent.
            project, pages = self._staging.transaction(lambda: store.read(snapshot))
            return {
                "export_id": export_id,
                "project_epoch": project.project_epoch,
                "head_seq": project.head_seq,
                "pages": pages,
            }

        result = answer(run)
        await self._schedule()
        return result

    async def export_page(self, export_id: Any, number: Any) -> dict[str, Any]:
        """Page `number` of a snapshot: runs `[type, count, text]`; the last page drops it."""

        def run() -> list[Any]:
            found = self._staging.export_page(str(export_id), int(number))
            if found is None:
                raise fail(ErrorCode.STORAGE_FAILURE, _GONE_EXPORT)
            page, last = found
            if last:
                self._staging.drop(EXPORT, str(export_id))
            return page

        return answer(run)

    # -- import ---------------------------------------------------------------------------

    async def import_begin(self, spec: Any) -> dict[str, Any]:
        """Stage an import: `{import_id, tenant_id, project_id, project_epoch, identity}`
        where `identity` holds the project's project, actor and membership records."""
        s = plain(spec)

        def run() -> None:
            for key in ("import_id", "tenant_id", "project_id", "project_epoch"):
                validate_id(s.get(key), key)
            if not isinstance(s.get("identity"), list):
                raise fail(ErrorCode.INVALID_COMMAND, "identity must be a list of records")
            staged = {k: s[k] for k in ("tenant_id", "project_id", "project_epoch", "identity")}
            self._staging.begin(IMPORT, s["import_id"], s["tenant_id"], self.clock.now_ms(), staged)

        result = answer(run)
        await self._schedule()
        return result

    async def import_page(self, import_id: Any, text: Any) -> dict[str, Any]:
        """Append whole lines (at most 1 MiB) of the project's rows to a staged import."""

        def run() -> None:
            data = str(text).encode("utf-8")
            if self._staging.add_page(IMPORT, str(import_id), data) is None:
                raise fail(ErrorCode.STORAGE_FAILURE, _GONE_IMPORT)

        return answer(run)

    async def import_commit(self, import_id: Any) -> dict[str, Any]:
        """Check the staged rows page by page and write the project in one transaction
        (`ProjectImport`); the stage is dropped whatever the outcome."""
        key = str(import_id)
        imported: list[Scope] = []

        def run() -> dict[str, Any]:
            s = self._staging.spec(IMPORT, key)
            if s is None:
                raise fail(ErrorCode.STORAGE_FAILURE, _GONE_IMPORT)
            archive = Archive(self._writable(), self.clock, self.ids)
            importer = ProjectImport(
                archive, s["tenant_id"], s["project_id"], s["project_epoch"], s["identity"]
            )
            head = importer.write(StagedPages(self._staging, key))
            imported.append(Scope(s["tenant_id"], s["project_id"]))
            return {"head_seq": head}

        try:
            result = answer(run)
        finally:
            self._drop_stage(IMPORT, key)
        for scope in imported:  # the imported project is indexed anew (SEM-11)
            self._learn(scope)
            await self._schedule()
        await self._recheck()  # a new epoch closes the subscriptions with 4409
        return result

    async def import_abort(self, import_id: Any) -> dict[str, Any]:
        """Drop a staged import (the Worker refused the stream); nothing if it is gone."""
        return answer(lambda: self._staging.drop(IMPORT, str(import_id)))

    def _drop_stage(self, kind: str, key: str) -> None:
        try:
            self._staging.drop(kind, key)
        except AidememoError as error:  # the alarm drops it later
            log.warning("dropping a staged %s failed: %s", kind, error.message)

    # -- deletion -------------------------------------------------------------------------

    async def delete_tenant(self, tenant_id: Any) -> dict[str, Any]:
        """Remove every row of the tenant here, staged exports and imports included;
        `{removed, left}` counts by table (staged rows are not tenant rows: not counted)."""

        def run() -> dict[str, dict[str, int]]:
            self._staging.drop_tenant(str(tenant_id))
            grants = _grants(self.env)  # its intents outwait every grant (GRANT-7)
            window = 0 if grants is None else grants.grant_window_ms
            return delete_rows(
                self._open(create=False), str(tenant_id), self.clock.now_ms(), window
            )

        result = answer(run)
        await self._clear_index()  # its vectors leave Vectorize (ARC-4, SEM-11)
        await self._recheck()  # the project is gone: its subscribers are closed (4403)
        await self._schedule(True)  # its artifact bodies are now GC intents (ART-7)
        return result

    # -- the semantic index (SEM-11) --------------------------------------------------------

    async def clear_index(self) -> dict[str, Any]:
        """The Worker deleted the tenant on PostgreSQL: the project's vectors leave Vectorize."""
        await self._clear_index()
        return answer(lambda: None)

    async def reindex(self, tenant_id: Any, project_id: Any) -> dict[str, Any]:
        """The Worker imported the project on PostgreSQL: index it anew from the alarm."""
        self._learn(Scope(str(tenant_id), str(project_id)))
        await self._schedule()
        return answer(lambda: None)

    # -- alarm ----------------------------------------------------------------------------

    def _rechecks(self) -> bool:
        return self._postgres or self.live_recheck

    async def _schedule(self, artifacts: bool = False) -> None:
        """Set the object's one alarm to the earliest thing it must do: drop a stale staged
        export or import, announce an expired lease, re-check memberships and, with
        `artifacts` (after an artifact request, and from the alarm), the artifact GC's next
        due work. An alarm already set earlier is kept (it fires, finds less to do, and sets
        the next one)."""
        times: list[int] = []
        try:
            staged = self._staging.earliest()
        except AidememoError as error:
            log.warning("reading the staging table failed: %s", error.message)
            staged = None
        if staged is not None:
            times.append(staged + STAGE_TTL_MS)
        live = self._feed.alarm_at(self._rechecks())
        if live is not None:
            times.append(live)
        due = artifact_due(self._open(create=False)) if artifacts else None
        if due is not None:
            times.append(due)
        if self._index_due is not None:  # the semantic indexer's next step (SEM-11)
            times.append(self._index_due)
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
        try:
            self._staging.drop_older(self.clock.now_ms() - STAGE_TTL_MS)
        except AidememoError as error:  # the next alarm tries again
            log.warning("dropping stale staged rows failed: %s", error.message)
        async with self._serial:  # the artifact GC's due work (ART-7), bounded
            await gc_pass(self._open(create=False), self.env, self.clock)
        await self._run_index()  # the semantic indexer's steps (SEM-11)
        if self._feed.subscribers():
            async with self._serial:
                try:
                    app = self._http()
                    if self._rechecks():
                        # PostgreSQL mode holds the tokens too: a revoked one closes (4401).
                        self._feed.push(
                            app.services.store, app.services.ledger_reads, tokens=self._postgres
                        )
                    self._feed.announce(app.services.store)
                except AidememoError as error:
                    log.warning("live feed alarm failed: %s", error.message)
        await self._schedule(True)


def _core_request(request: Any) -> Request:
    """The SDK request the Worker forwarded, as the core's `Request` (no body: a GET)."""
    url = urlsplit(str(request.url))
    headers = {str(k).lower(): str(v) for k, v in request.headers.items()}
    return Request("GET", unquote(url.path) or "/", url.query, headers, upgrade=True)


def _grants(env: Any) -> r2_grants.R2Grants | None:
    """The edge's grant signer; a half configuration is logged here and refused by every body
    route in the Worker, so the object's other routes keep working (GRANT-5)."""
    try:
        return r2_grants.from_env(env)
    except AidememoError as error:
        log.warning("artifact grants are misconfigured: %s", error.message)
        return None
