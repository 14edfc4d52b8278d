"""The live change feed's HTTP side: the checks before the upgrade and the message shapes.

`GET /v1/projects/{p}/changes/live?project_epoch=E&after_seq=N[&limit=L]` (SPEC.md LIVE-*)
runs every check of `/changes` before a WebSocket is accepted: route, authentication (the
bearer header), parameters, membership and the cursor, so a refused subscriber gets the
same HTTP error as `/changes` would give. After the upgrade every message is one JSON text:

- a change batch in exactly the shape of `/changes/materialized` (catch-up pages first, then
  one batch per commit; a commit the subscriber may not see is an empty batch that still
  advances `next_cursor`);
- `{"type": "lease_expired", "handoff_id", "claim_id"}` to the handoff's participants;
- `{"error": {"code", "message"}}`, followed by a close with code 4000 + the HTTP status.

A plain GET of the route (no upgrade) runs the same checks and then answers 426
`upgrade_required`. Transports (the origin's ASGI adapter, the edge's Durable Object) only
move these bytes.
"""

from __future__ import annotations

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.model import ChangeRecord
from aidememo.http.app import HttpApp
from aidememo.http.handling import member
from aidememo.http.member_handlers import parse_subscription
from aidememo.http.query_values import parse_query
from aidememo.http.render import batch_json, json_bytes, materialized_entries
from aidememo.http.routes import CHANGES_LIVE, resolve
from aidememo.http.types import Request
from aidememo.service.access import Caller
from aidememo.service.ledger_reads import ChangePage
from aidememo.service.live import CommitBatch, Lease, LiveSubscription


def open_subscription(app: HttpApp, request: Request) -> LiveSubscription:
    """Every check before the upgrade, in the order of HTTP-1, for a front that holds the
    bearer token (the origin): the pipeline's stage one (`HttpApp.admit`, with
    `request.upgrade` set), then the subscription's own checks. Raises the `AidememoError` to
    answer as an HTTP response instead of upgrading."""
    admission = app.admit(request)
    return parse_subscription(
        app.services, request, admission.params, member(admission.caller), admission.digest
    )


def open_forwarded(
    app: HttpApp, request: Request, caller: Caller, digest: bytes | None
) -> LiveSubscription:
    """The same checks for an upgrade a front has admitted already (the edge Worker, which
    forwards it to the project object with the identity it authenticated): the route must be
    the live feed's, then the subscription's own checks."""
    match = resolve(request.method, request.path)
    if match.route is not CHANGES_LIVE:
        raise fail(ErrorCode.ROUTE_NOT_FOUND, "no WebSocket route here")
    parse_query(CHANGES_LIVE, request)
    return parse_subscription(app.services, request, match.params, caller, digest)


def page_message(page: ChangePage) -> str:
    """A catch-up page: exactly the `/changes/materialized` response body."""
    scope = page.scope
    entries = materialized_entries(scope, page.records)
    body = batch_json(
        scope, page.project_epoch, page.after_seq, entries, page.next_after_seq, page.has_more
    )
    return body.decode()


def commit_message(batch: CommitBatch, row: ChangeRecord, visible: bool) -> str:
    """One commit as a change batch from `seq - 1` to `seq`; empty when not `visible`."""
    project = batch.project
    assert project is not None  # a batch without a project closes every subscriber first
    scope = batch.scope
    entries = materialized_entries(scope, [row]) if visible else []
    more = row.seq < project.head_seq
    return batch_json(scope, project.project_epoch, row.seq - 1, entries, row.seq, more).decode()


def notice_message(lease: Lease) -> str:
    """`{"type": "lease_expired", "handoff_id", "claim_id"}` (LIVE-7)."""
    return (
        f'{{"type":"lease_expired","handoff_id":"{lease.handoff_id}",'
        f'"claim_id":"{lease.claim_id}"}}'
    )


def error_message(error: AidememoError) -> str:
    """`{"error": {"code", "message"}}`, sent just before the close (LIVE-4)."""
    return json_bytes(error.to_json()).decode()
