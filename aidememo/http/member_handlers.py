"""The member routes' handlers: one function per route of `aidememo.http.member_routes` (by
the same name), checking its path parameters and body, calling the service and rendering the
answer. Query parameters are the route's (`Route.query`): the pipeline has read them, and a
handler takes their values from the request (`query_of`).

Handlers run once the request pipeline admitted the request (`aidememo.http.pipeline`), and
receive the services, the request (its body a bounded `Body`), the path parameters and the
authenticated caller (None only on the public routes).
"""

from __future__ import annotations

from collections.abc import Callable

from aidememo.domain.canonical import decode_json
from aidememo.domain.envelope import parse_raw_command
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import is_valid_id, validate_id, validate_name
from aidememo.domain.model import Receipt, ResourceRef
from aidememo.domain.records import CreateRequest, parse_create, parse_transition
from aidememo.http.handling import member, ok_bytes, project_of
from aidememo.http.query_values import query_of
from aidememo.http.render import (
    batch_json,
    change_entries,
    json_bytes,
    materialized_entries,
    receipt_json,
    resource_json,
    scope_json,
    snapshot_json,
    typed_record_json,
)
from aidememo.http.scan import top_level_string
from aidememo.http.services import Services
from aidememo.http.types import Handler, Request, Response
from aidememo.service.access import Caller
from aidememo.service.live import LiveSubscription, check_subscription
from aidememo.service.typed_writes import TypedWrites


def receipt_answer(receipt: Receipt) -> Response:
    """A command's answer: its receipt, marked when it is a replay (CMD-7)."""
    return ok_bytes(receipt_json(receipt), replayed=receipt.replayed)


def command_project_id(request: Request, body: bytes) -> str:
    """The project a `POST /v1/commands` body names, for a front that routes by project (the
    edge Worker) before the project's object decodes the body in full.

    The top-level `project_id` is found by a scan (`aidememo.http.scan`), not a decode; when
    the scan cannot be sure, or the id is malformed, the handler's own checks run here, so
    the request is refused with exactly the error `command` would give (its query was read
    by the pipeline already).
    """
    found = top_level_string(body, "project_id")
    if found is not None and is_valid_id(found):
        return found
    return parse_raw_command(decode_json(body)).project_id


# -- ledger ---------------------------------------------------------------------------------


def command(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`POST /v1/commands`: a raw `custom.*` put or delete (CMD-4)."""
    cmd = parse_raw_command(decode_json(request.body.read()))
    return receipt_answer(s.ledger.execute_raw(member(caller), cmd))


def identity(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """The caller's identity in the project."""
    project_id = project_of(params)
    return ok_bytes(json_bytes(s.ledger_reads.identity(member(caller), project_id).to_json()))


def resource(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """The exact current body or tombstone (VIS-1 hides participant records)."""
    project_id = project_of(params)
    ref = ResourceRef(
        validate_name(params["kind"], "kind"), validate_id(params["resource_id"], "resource_id")
    )
    who = member(caller)
    row = s.ledger_reads.resource(who, project_id, ref)
    return ok_bytes(resource_json(scope_json(who.scope(project_id)), row))


def _changes(
    s: Services,
    request: Request,
    params: dict[str, str],
    caller: Caller | None,
    *,
    materialized: bool,
) -> Response:
    project_id = project_of(params)
    q = query_of(request)
    page = s.ledger_reads.changes(
        member(caller),
        project_id,
        q["project_epoch"],
        q["after_seq"],
        q["limit"],
        bodies=materialized,
    )
    scope = page.scope
    if materialized:
        entries = materialized_entries(scope, page.records)
    else:
        entries = change_entries(scope, page.records)
    return ok_bytes(
        batch_json(
            scope, page.project_epoch, page.after_seq, entries, page.next_after_seq, page.has_more
        )
    )


def changes(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Metadata-only change entries after a cursor (FEED-1)."""
    return _changes(s, request, params, caller, materialized=False)


def changes_materialized(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Change entries with the exact body at each revision (FEED-1)."""
    return _changes(s, request, params, caller, materialized=True)


def changes_live(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """The live feed without a WebSocket upgrade: every check of the upgrade, then 426
    `upgrade_required` (LIVE-1)."""
    parse_subscription(s, request, params, member(caller), None)
    raise fail(ErrorCode.UPGRADE_REQUIRED, "connect with a WebSocket upgrade")


def parse_subscription(
    s: Services, request: Request, params: dict[str, str], caller: Caller, digest: bytes | None
) -> LiveSubscription:
    """The live feed's parameters (checked as `/changes` checks them), then membership and
    the cursor in one read (LIVE-1)."""
    project_id = project_of(params)
    q = query_of(request)
    sub = LiveSubscription(
        caller=caller,
        project_id=project_id,
        project_epoch=q["project_epoch"],
        after_seq=q["after_seq"],
        page_limit=q["limit"],
        token_sha256=digest,
    )
    check_subscription(s.store, sub)
    return sub


def snapshot(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """A page of the state at one sequence, `next_page_token` to the next (SNAP-1, SNAP-2)."""
    project_id = project_of(params)
    q = query_of(request)
    snap = s.ledger_reads.snapshot(member(caller), project_id, q["limit"], q["page_token"])
    return ok_bytes(
        snapshot_json(
            snap.scope, snap.project_epoch, snap.at_seq, snap.resources, snap.next_page_token
        )
    )


# -- typed writes ---------------------------------------------------------------------------


CreateOperation = Callable[[TypedWrites, Caller, str, CreateRequest], Receipt]


def _creates(operation: CreateOperation, what: str) -> Handler:
    """The handler of a typed create: `operation` of the `TypedWrites` on the checked body."""

    def create(
        s: Services, request: Request, params: dict[str, str], caller: Caller | None
    ) -> Response:
        project_id = project_of(params)
        req = parse_create(decode_json(request.body.read()))
        return receipt_answer(operation(s.typed_writes, member(caller), project_id, req))

    create.__doc__ = f"`{what}`."
    return create


create_session = _creates(TypedWrites.create_session, "session.create")
create_fact = _creates(TypedWrites.create_fact, "fact.create")
create_context = _creates(TypedWrites.create_context, "handoff_context.create")
send_handoff = _creates(TypedWrites.send_handoff, "handoff.send")


def _transitions(kind: str) -> Handler:
    """The handler of a handoff transition: `handoff.<kind>` on the checked body."""

    def transition(
        s: Services, request: Request, params: dict[str, str], caller: Caller | None
    ) -> Response:
        project_id = project_of(params)
        handoff_id = validate_id(params["handoff_id"], "handoff_id")
        req = parse_transition(decode_json(request.body.read()))
        receipt = s.typed_writes.transition(member(caller), project_id, handoff_id, kind, req)
        return receipt_answer(receipt)

    transition.__doc__ = f"`handoff.{kind}`."
    return transition


accept = _transitions("accept")
heartbeat = _transitions("heartbeat")
return_ = _transitions("return")


# -- typed reads ----------------------------------------------------------------------------


def handoff_status(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`{revision, record}` for sender and receiver (HO-8)."""
    project_id = project_of(params)
    handoff_id = validate_id(params["handoff_id"], "handoff_id")
    found = s.typed_reads.handoff(member(caller), project_id, handoff_id)
    return ok_bytes(_with_lease(typed_record_json(found.revision, found.body), found.lease_state))


def _entry(project_seq: int, revision: int, body: bytes) -> bytes:
    """`{project_seq, revision, record}` of one page entry, its stored body spliced in."""
    return f'{{"project_seq":{project_seq},"revision":{revision},"record":'.encode() + body + b"}"


def _page(name: str, items: bytes, cursor: str, next_seq: int | None) -> Response:
    """A page answer: `{<name>: [items], <cursor>: next_seq or null}`."""
    tail = "null" if next_seq is None else str(next_seq)
    return ok_bytes(f'{{"{name}":['.encode() + items + f'],"{cursor}":{tail}}}'.encode())


def _with_lease(item: bytes, state: str | None) -> bytes:
    """`item` (a JSON object's bytes) with `lease_state` added when there is one (READS-2)."""
    return item if state is None else item[:-1] + f',"lease_state":"{state}"}}'.encode()


def mailbox(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """The caller's inbox or outbox, newest first (MBX-1)."""
    project_id = project_of(params)
    page = s.typed_reads.mailbox(member(caller), project_id, **query_of(request))
    items = b",".join(
        _with_lease(_entry(a.project_seq, a.revision, a.body), a.lease_state)
        for a in page.assignments
    )
    return _page("assignments", items, "next_before_seq", page.next_before_seq)


def sessions(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """The project's sessions, newest first, paged by `before_seq` (READS-3)."""
    project_id = project_of(params)
    page = s.typed_reads.sessions(member(caller), project_id, **query_of(request))
    items = b",".join(_entry(e.project_seq, e.revision, e.body) for e in page.sessions)
    return _page("sessions", items, "next_before_seq", page.next_before_seq)


def session_facts(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """A session's facts in commit order, paged by `after_seq` (READS-4)."""
    project_id = project_of(params)
    session_id = validate_id(params["session_id"], "session_id")
    q = query_of(request)
    page = s.typed_reads.session_facts(member(caller), project_id, session_id, **q)
    items = b",".join(_entry(e.project_seq, e.revision, e.body) for e in page.facts)
    return _page("facts", items, "next_after_seq", page.next_after_seq)


def members(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Every member of the project with kind, role and status, for any member (READS-1)."""
    project_id = project_of(params)
    rows = s.typed_reads.members(member(caller), project_id)
    body = {
        "members": [
            {"actor_id": m.actor_id, "kind": m.kind, "role": m.role, "status": m.status}
            for m in rows
        ]
    }
    return ok_bytes(json_bytes(body))


def search(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Search over facts in the mode asked for (SRCH-1, SEM-3)."""
    project_id = project_of(params)
    found = s.searches.search(member(caller), project_id, **query_of(request))
    return ok_bytes(json_bytes(found.as_json()))
