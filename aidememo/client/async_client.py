"""`AsyncClient`: the asynchronous client, one method per member route.

The steps of each method are the plans of `aidememo.client.plans`; this class hands their
calls to its transport, awaiting each, as it steps a plan's `Run`; its settings are
`aidememo.client.base.ClientBase`'s. It is the one source of both clients:
`scripts/gen_sync_client.py` writes `Client` (`aidememo.client.sync`) from it by dropping
`async` and `await`, and tests/unit/test_generated_client.py checks that file is current.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Unpack

from aidememo.client import models as m
from aidememo.client import plans as p
from aidememo.client.base import ClientBase
from aidememo.client.errors import AidememoClientError
from aidememo.client.httpx_transport import default_async_transport
from aidememo.client.records import Record
from aidememo.client.transport import AsyncTransport

if TYPE_CHECKING:
    from aidememo.client.async_artifacts import AsyncArtifactCalls

T = TypeVar("T")
M = TypeVar("M", bound=Record)
Outcome = Literal["succeeded", "failed"]


class AsyncClient(ClientBase[AsyncTransport]):
    """A member of one project, over HTTP: one method per member route (made with the
    settings `ClientBase` describes)."""

    def _default_transport(self) -> AsyncTransport:
        return default_async_transport()

    @property
    def artifacts(self) -> AsyncArtifactCalls:
        """The artifact routes (`aidememo.client.async_artifacts`, SPEC.md ART-*)."""
        from aidememo.client.async_artifacts import AsyncArtifactCalls

        return AsyncArtifactCalls(self)

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _send(self, call: p.Call[Any]) -> Any:
        request = self._wire.request(call.method, call.target, call.body)
        answer = await self._transport.exchange(request)
        return p.parse(call, answer.status, answer.content, answer.headers.get(p.REPLAYED_HEADER))

    async def _run(self, plan: p.Plan[T]) -> T:
        """Run `plan` to its end: each call it yields sent, its answer (or error) handed back."""
        run = p.Run(plan)
        while run.step is not None:
            try:
                answer = await self._send(run.step)
            except AidememoClientError as exc:
                run.refuse(exc)
            else:
                run.answer(answer)
        return run.result

    async def _read(self, call: p.Call[M]) -> M:
        """A read, sent again after a retryable transport failure."""
        return await self._run(p.fetch(self._ctx, call))

    async def _get(self, path: str, model: type[M], **query: str | int | bool | None) -> M:
        """`GET` of `path` under the project with the query parameters that are not None."""
        return await self._read(p.get(self._ctx.base + path, model, **query))

    # -- public and identity ----------------------------------------------------------------

    async def health(self) -> m.Health:
        """`GET /health` (public)."""
        return await self._read(p.get("/health", m.Health))

    async def identity(self) -> m.Identity:
        """`GET .../identity`: the caller's tenant, project, epoch, actor and role."""
        return await self._run(p.identity(self._ctx))

    async def members(self) -> m.Members:
        """`GET .../members` (READS-1)."""
        return await self._get("/members", m.Members)

    # -- sessions and facts -----------------------------------------------------------------

    async def create_session(self, topic: str, **options: Unpack[p.SessionOptions]) -> m.Written:
        """`POST .../sessions`: `session_id` (a ULID unless given), `source_id`, `command_id`."""
        return await self._run(p.create(self._ctx, p.SESSION, {"topic": topic}, options))

    async def sessions(
        self,
        *,
        source_id: str | None = None,
        before_seq: int | None = None,
        limit: int | None = None,
    ) -> m.Sessions:
        """`GET .../sessions`, newest first (READS-3)."""
        return await self._get(
            "/sessions", m.Sessions, source_id=source_id, before_seq=before_seq, limit=limit
        )

    async def session_facts(
        self, session_id: str, *, after_seq: int | None = None, limit: int | None = None
    ) -> m.SessionFacts:
        """`GET .../sessions/{session_id}/facts`, in commit order."""
        path = f"/sessions/{p.segment(session_id)}/facts"
        return await self._get(path, m.SessionFacts, after_seq=after_seq, limit=limit)

    async def create_fact(
        self, session_id: str, content: str, **options: Unpack[p.FactOptions]
    ) -> m.Written:
        """`POST .../facts`: `fact_id` (a ULID unless given), `command_id`."""
        fields = {"session_id": session_id, "content": content}
        return await self._run(p.create(self._ctx, p.FACT, fields, options))

    # -- resources, search, feed ------------------------------------------------------------

    async def get_resource(self, kind: str, resource_id: str) -> m.Resource:
        """`GET .../resources/{kind}/{resource_id}`: the exact body or tombstone."""
        return await self._read(p.get(p.resource_path(self._ctx, kind, resource_id), m.Resource))

    async def put_resource(
        self, kind: str, resource_id: str, payload: dict[str, Any], **pin: Unpack[p.Pin]
    ) -> m.Written:
        """`POST /v1/commands` `resource.put` of a `custom.*` resource (CMD-4);
        `expected_revision` and `command_id` (a new ULID unless given) as keywords."""
        return await self._run(p.raw(self._ctx, kind, resource_id, payload, **pin))

    async def delete_resource(self, kind: str, resource_id: str, **pin: Unpack[p.Pin]) -> m.Written:
        """`POST /v1/commands` `resource.delete` of a `custom.*` resource (CMD-4), pinned as
        `put_resource`."""
        return await self._run(p.raw(self._ctx, kind, resource_id, None, **pin))

    async def search(
        self,
        q: str,
        *,
        source_id: str | None = None,
        limit: int | None = None,
        at_least_seq: int | None = None,
        mode: Literal["lexical", "semantic", "hybrid", "auto"] | None = None,
    ) -> m.Search:
        """`GET .../search` in `mode` (SRCH-*, SEM-1..5; None: the server's default, auto)."""
        return await self._get(
            "/search",
            m.Search,
            q=q,
            source_id=source_id,
            limit=limit,
            at_least_seq=at_least_seq,
            mode=mode,
        )

    async def changes(
        self, after_seq: int = 0, *, limit: int | None = None, project_epoch: str | None = None
    ) -> m.ChangeBatch:
        """`GET .../changes` after `after_seq` (FEED-1); the epoch defaults to the project's."""
        return await self._run(
            p.changes(self._ctx, "changes", m.ChangeBatch, after_seq, limit, project_epoch)
        )

    async def changes_materialized(
        self, after_seq: int = 0, *, limit: int | None = None, project_epoch: str | None = None
    ) -> m.MaterializedBatch:
        """`GET .../changes/materialized`: each entry with the body at its revision."""
        plan = p.changes(
            self._ctx, "changes/materialized", m.MaterializedBatch, after_seq, limit, project_epoch
        )
        return await self._run(plan)

    async def snapshot(
        self, *, limit: int | None = None, page_token: str | None = None
    ) -> m.Snapshot:
        """`GET .../snapshot`: one page of the state at one sequence (`at_seq`), at most
        `limit` resources (the server's default without it); `page_token` is the previous
        page's `next_page_token`."""
        return await self._get("/snapshot", m.Snapshot, limit=limit, page_token=page_token)

    async def snapshot_pages(self, *, limit: int | None = None) -> AsyncIterator[m.Snapshot]:
        """Every page of one snapshot, all at the first page's `at_seq`."""
        page = first = await self.snapshot(limit=limit)
        while True:
            yield page
            if page.next_page_token is None:
                return
            page = await self.snapshot(limit=limit, page_token=page.next_page_token)
            p.check_page(first, page)

    async def send_recorded(
        self, target: str, body: bytes, kind: str, resource_id: str, *, seen: int | None = None
    ) -> m.Written:
        """`POST target` with `body`, bytes recorded earlier (an outbox item, OUTBOX-3): the
        retry and recovery of CLIENT-1 and CLIENT-2, `seen` a revision read before."""
        call = p.Call("POST", target, m.Receipt, body)
        return await self._run(p.write(self._ctx, call, kind, resource_id, seen))

    # -- handoffs ---------------------------------------------------------------------------

    async def create_context(
        self,
        handoff_id: str,
        session_id: str,
        to_actor: str,
        content: str,
        **options: Unpack[p.ContextOptions],
    ) -> m.Written:
        """`POST .../handoff-contexts`: the packet for handoff `handoff_id` (send it after);
        `context_id` (a ULID unless given), `command_id`."""
        fields = {
            "handoff_id": handoff_id,
            "session_id": session_id,
            "to_actor": to_actor,
            "content": content,
        }
        return await self._run(p.create(self._ctx, p.CONTEXT, fields, options))

    async def send_handoff(
        self, session_id: str, to_actor: str, **options: Unpack[p.HandoffOptions]
    ) -> m.Written:
        """`POST .../handoffs`: `focus`, `done_when`, `context_id`, `handoff_id` (a ULID
        unless given), `command_id`."""
        fields = {"session_id": session_id, "to_actor": to_actor}
        return await self._run(p.create(self._ctx, p.HANDOFF, fields, options))

    async def handoff_status(self, handoff_id: str) -> m.HandoffStatus:
        """`GET .../handoffs/{handoff_id}` (HO-8), with `lease_state` (READS-2)."""
        return await self._read(p.status_call(self._ctx, handoff_id))

    async def inbox(self, **query: Unpack[p.MailboxQuery]) -> m.Mailbox:
        """`GET .../handoffs?box=inbox`, newest first (MBX-1, MBX-2): `source_id`,
        `include_completed`, `before_seq`, `limit`."""
        return await self._read(p.mailbox(self._ctx, "inbox", query))

    async def outbox(self, **query: Unpack[p.MailboxQuery]) -> m.Mailbox:
        """`GET .../handoffs?box=outbox`, newest first (MBX-1, MBX-2), filtered as `inbox`."""
        return await self._read(p.mailbox(self._ctx, "outbox", query))

    async def accept_handoff(self, handoff_id: str, **claim: Unpack[p.ClaimPin]) -> m.Transition:
        """`POST .../handoffs/{id}/accept`; `claim_id` and `command_id` derived (ID-4) and
        `expected_revision` read from the status unless given."""
        return await self._run(p.accept(self._ctx, handoff_id, **claim))

    async def heartbeat_handoff(self, handoff_id: str, **claim: Unpack[p.ClaimPin]) -> m.Transition:
        """`POST .../handoffs/{id}/heartbeat`: renew the current (or given) claim's lease."""
        return await self._run(p.heartbeat(self._ctx, handoff_id, **claim))

    async def return_handoff(
        self,
        handoff_id: str,
        result_fact_id: str,
        outcome: Outcome = "succeeded",
        **pin: Unpack[p.ReturnPin],
    ) -> m.Transition:
        """`POST .../handoffs/{id}/return` with a result fact of the receiver (HO-4)
        and, when given, `result_artifact_id`, the artifact holding the result (HO-9)."""
        plan = p.return_handoff(self._ctx, handoff_id, result_fact_id, outcome, **pin)
        return await self._run(plan)
