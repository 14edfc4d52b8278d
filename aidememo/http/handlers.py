"""One function per member or public route: read parameters strictly, call the service,
render the answer. Each is named by its entry in `aidememo.http.routes`.

Handlers run once the request pipeline admitted the request (`aidememo.http.pipeline`), and
receive the services, the request (its body a bounded `Body`), the path parameters and the
authenticated caller (None only on the public routes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from aidememo.domain.canonical import decode_json
from aidememo.domain.envelope import parse_raw_command
from aidememo.domain.errors import STORE_OK, ErrorCode, fail
from aidememo.domain.ids import is_valid_id, validate_id, validate_name
from aidememo.domain.limits import (
    CHANGES_LIMIT_DEFAULT,
    CHANGES_LIMIT_MAX,
    MAILBOX_LIMIT_DEFAULT,
    MAILBOX_LIMIT_MAX,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    SESSION_FACTS_LIMIT_DEFAULT,
    SESSION_FACTS_LIMIT_MAX,
    SESSIONS_LIMIT_DEFAULT,
    SESSIONS_LIMIT_MAX,
    SNAPSHOT_LIMIT_DEFAULT,
    SNAPSHOT_LIMIT_MAX,
)
from aidememo.domain.model import Receipt, ResourceRef
from aidememo.domain.records import CreateRequest, parse_create, parse_transition
from aidememo.http.query import Query
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
from aidememo.http.types import Request, Response
from aidememo.service.access import Caller
from aidememo.service.product import Product

if TYPE_CHECKING:
    from aidememo.http.app import Services

_JSON = [("content-type", "application/json")]
_NONE = frozenset[str]()
_IDENTITY_PARAMS = frozenset({"actor_id", "tenant_id"})


def _ok(body: bytes) -> Response:
    return Response(200, list(_JSON), body)


REPLAYED_HEADER = "aidememo-replayed"


def _receipt(receipt: Receipt) -> Response:
    """A command's answer: its receipt, and `aidememo-replayed: true` when the command had
    already been applied and this is its stored receipt (CMD-7)."""
    headers = list(_JSON)
    if receipt.replayed:
        headers.append((REPLAYED_HEADER, "true"))
    return Response(200, headers, receipt_json(receipt))


def _caller(caller: Caller | None) -> Caller:
    if caller is None:  # public routes never reach a handler that needs a caller
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "missing bearer token")
    return caller


def _no_query(request: Request) -> None:
    if request.query:  # an empty query string has no parameter to refuse
        Query(request.query).finish(_NONE, forbidden=_IDENTITY_PARAMS)


def command_project_id(request: Request, body: bytes) -> str:
    """The project a `POST /v1/commands` body names, for a front that routes by project (the
    edge Worker) before the project's object decodes the body in full.

    The top-level `project_id` is found by a scan (`aidememo.http.scan`), not a decode; when
    the scan cannot be sure, or the id is malformed, the handler's own checks run here, so
    the request is refused with exactly the error `command` would give.
    """
    found = top_level_string(body, "project_id")
    if found is not None and is_valid_id(found):
        return found
    _no_query(request)
    return parse_raw_command(decode_json(body)).project_id


def _project(params: dict[str, str]) -> str:
    return validate_id(params["project_id"], "project_id")


# -- public ---------------------------------------------------------------------------------


def health(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Liveness: 200 while the process serves, `{status, mode, schema_version, state}` with
    the store's state (READY-2); `schema_version` is null while the store cannot be read."""
    _no_query(request)
    state = s.readiness.state()
    body = {
        "status": "ok",
        "mode": s.store.mode,
        "schema_version": s.readiness.schema_version,
        "state": state,
    }
    return _ok(json_bytes(body))


def ready(s: Services, request: Request, params: dict[str, str], caller: Caller | None) -> Response:
    """Readiness: 200 `{ready: true, ...}` while the store takes writes, else 503 with the
    state that stops it (READY-1); never Retry-After, this is a status, not an error."""
    _no_query(request)
    status = s.semantic_status
    return ready_response(s.store.mode, s.readiness.state(), None if status is None else status())


def ready_response(mode: str, state: str, semantic: dict[str, object] | None = None) -> Response:
    """The `/ready` answer for a store `state` (the edge Worker answers with it too); with an
    indexer in the process, its model and lag under `semantic` (SEM-7)."""
    body: dict[str, object] = {"ready": state == STORE_OK, "mode": mode, "state": state}
    if semantic is not None:
        body["semantic"] = semantic
    return Response(200 if state == STORE_OK else 503, list(_JSON), json_bytes(body))


def openapi(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """The OpenAPI 3.1 document of this contract."""
    # Imported here: the document reads the route table, which imports this module.
    from aidememo.http.openapi import document_bytes

    _no_query(request)
    return _ok(document_bytes())


# -- ledger ---------------------------------------------------------------------------------


def command(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`POST /v1/commands`: a raw `custom.*` put or delete (CMD-4)."""
    _no_query(request)
    cmd = parse_raw_command(decode_json(request.body.read()))
    return _receipt(s.ledger.execute_raw(_caller(caller), cmd))


def identity(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """The caller's identity in the project."""
    project_id = _project(params)
    _no_query(request)
    return _ok(json_bytes(s.queries.identity(_caller(caller), project_id).to_json()))


def resource(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """The exact current body or tombstone (VIS-1 hides participant records)."""
    project_id = _project(params)
    ref = ResourceRef(
        validate_name(params["kind"], "kind"), validate_id(params["resource_id"], "resource_id")
    )
    _no_query(request)
    who = _caller(caller)
    row = s.queries.resource(who, project_id, ref)
    return _ok(resource_json(scope_json(who.scope(project_id)), row))


def _changes(
    s: Services,
    request: Request,
    params: dict[str, str],
    caller: Caller | None,
    *,
    materialized: bool,
) -> Response:
    project_id = _project(params)
    query = Query(request.query)
    epoch = query.text("project_epoch")
    after_seq = query.integer("after_seq")
    limit = query.integer(
        "limit", minimum=1, maximum=CHANGES_LIMIT_MAX, code=ErrorCode.INVALID_CHANGE_BATCH
    )
    query.finish(frozenset({"project_epoch", "after_seq", "limit"}), forbidden=_IDENTITY_PARAMS)
    if epoch is None or after_seq is None:
        raise fail(ErrorCode.INVALID_COMMAND, "project_epoch and after_seq are required")
    validate_id(epoch, "project_epoch")
    page = s.queries.changes(
        _caller(caller),
        project_id,
        epoch,
        after_seq,
        CHANGES_LIMIT_DEFAULT if limit is None else limit,
        bodies=materialized,
    )
    scope = page.scope
    if materialized:
        entries = materialized_entries(scope, page.records)
    else:
        entries = change_entries(scope, page.records)
    return _ok(
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
    from aidememo.http.live import parse_subscription

    parse_subscription(s, request, params, _caller(caller), None)
    raise fail(ErrorCode.UPGRADE_REQUIRED, "connect with a WebSocket upgrade")


def snapshot(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """A page of the state at one sequence, `next_page_token` to the next (SNAP-1, SNAP-2)."""
    project_id = _project(params)
    query = Query(request.query)
    limit = query.integer("limit", minimum=1, maximum=SNAPSHOT_LIMIT_MAX)
    page_token = query.text("page_token")
    query.finish(frozenset({"limit", "page_token"}), forbidden=_IDENTITY_PARAMS)
    snap = s.queries.snapshot(
        _caller(caller),
        project_id,
        SNAPSHOT_LIMIT_DEFAULT if limit is None else limit,
        page_token,
    )
    return _ok(
        snapshot_json(
            snap.scope, snap.project_epoch, snap.at_seq, snap.resources, snap.next_page_token
        )
    )


# -- typed writes ---------------------------------------------------------------------------


CreateOperation = Callable[[Product, Caller, str, CreateRequest], Receipt]


def _create(
    operation: CreateOperation,
    s: Services,
    request: Request,
    params: dict[str, str],
    caller: Caller | None,
) -> Response:
    project_id = _project(params)
    _no_query(request)
    req = parse_create(decode_json(request.body.read()))
    return _receipt(operation(s.product, _caller(caller), project_id, req))


def create_session(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`session.create`."""
    return _create(Product.create_session, s, request, params, caller)


def create_fact(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`fact.create`."""
    return _create(Product.create_fact, s, request, params, caller)


def create_context(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`handoff_context.create`."""
    return _create(Product.create_context, s, request, params, caller)


def send_handoff(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`handoff.send`."""
    return _create(Product.send_handoff, s, request, params, caller)


def _transition(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None, kind: str
) -> Response:
    project_id = _project(params)
    handoff_id = validate_id(params["handoff_id"], "handoff_id")
    _no_query(request)
    req = parse_transition(decode_json(request.body.read()))
    receipt = s.product.transition(_caller(caller), project_id, handoff_id, kind, req)
    return _receipt(receipt)


def accept(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`handoff.accept`."""
    return _transition(s, request, params, caller, "accept")


def heartbeat(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`handoff.heartbeat`."""
    return _transition(s, request, params, caller, "heartbeat")


def return_(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`handoff.return`."""
    return _transition(s, request, params, caller, "return")


# -- typed reads ----------------------------------------------------------------------------


def handoff_status(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`{revision, record}` for sender and receiver (HO-8)."""
    project_id = _project(params)
    handoff_id = validate_id(params["handoff_id"], "handoff_id")
    _no_query(request)
    found = s.lookups.handoff(_caller(caller), project_id, handoff_id)
    return _ok(_with_lease(typed_record_json(found.revision, found.body), found.lease_state))


def _with_lease(item: bytes, state: str | None) -> bytes:
    """`item` (a JSON object's bytes) with `lease_state` added when there is one (READS-2)."""
    return item if state is None else item[:-1] + f',"lease_state":"{state}"}}'.encode()


def mailbox(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """The caller's inbox or outbox, newest first (MBX-1)."""
    project_id = _project(params)
    query = Query(request.query)
    box = query.text("box")
    source_id = query.text("source_id")
    include_completed = query.boolean("include_completed")
    before_seq = query.integer("before_seq", minimum=1)
    limit = query.integer("limit", minimum=1, maximum=MAILBOX_LIMIT_MAX)
    allowed = frozenset({"box", "source_id", "include_completed", "before_seq", "limit"})
    query.finish(allowed, forbidden=_IDENTITY_PARAMS)
    if box is None:
        raise fail(ErrorCode.INVALID_COMMAND, "box is required: inbox or outbox")
    if source_id is not None:
        validate_id(source_id, "source_id")
    page = s.lookups.mailbox(
        _caller(caller),
        project_id,
        box=box,
        source_id=source_id,
        include_completed=include_completed,
        before_seq=before_seq,
        limit=MAILBOX_LIMIT_DEFAULT if limit is None else limit,
    )
    items = b",".join(
        _with_lease(
            f'{{"project_seq":{a.project_seq},"revision":{a.revision},"record":'.encode()
            + a.body
            + b"}",
            a.lease_state,
        )
        for a in page.assignments
    )
    tail = "null" if page.next_before_seq is None else str(page.next_before_seq)
    return _ok(b'{"assignments":[' + items + f'],"next_before_seq":{tail}}}'.encode())


def sessions(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """The project's sessions, newest first, paged by `before_seq` (READS-3)."""
    project_id = _project(params)
    query = Query(request.query)
    source_id = query.text("source_id")
    before_seq = query.integer("before_seq", minimum=1)
    limit = query.integer("limit", minimum=1, maximum=SESSIONS_LIMIT_MAX)
    query.finish(frozenset({"source_id", "before_seq", "limit"}), forbidden=_IDENTITY_PARAMS)
    if source_id is not None:
        validate_id(source_id, "source_id")
    page = s.lookups.sessions(
        _caller(caller),
        project_id,
        source_id=source_id,
        before_seq=before_seq,
        limit=SESSIONS_LIMIT_DEFAULT if limit is None else limit,
    )
    items = b",".join(
        f'{{"project_seq":{e.project_seq},"revision":{e.revision},"record":'.encode()
        + e.body
        + b"}"
        for e in page.sessions
    )
    tail = "null" if page.next_before_seq is None else str(page.next_before_seq)
    return _ok(b'{"sessions":[' + items + f'],"next_before_seq":{tail}}}'.encode())


def session_facts(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """A session's facts in commit order, paged by `after_seq` (READS-4)."""
    project_id = _project(params)
    session_id = validate_id(params["session_id"], "session_id")
    query = Query(request.query)
    after_seq = query.integer("after_seq")
    limit = query.integer("limit", minimum=1, maximum=SESSION_FACTS_LIMIT_MAX)
    query.finish(frozenset({"after_seq", "limit"}), forbidden=_IDENTITY_PARAMS)
    page = s.lookups.session_facts(
        _caller(caller),
        project_id,
        session_id,
        after_seq=after_seq,
        limit=SESSION_FACTS_LIMIT_DEFAULT if limit is None else limit,
    )
    items = b",".join(
        f'{{"project_seq":{e.project_seq},"revision":{e.revision},"record":'.encode()
        + e.body
        + b"}"
        for e in page.facts
    )
    tail = "null" if page.next_after_seq is None else str(page.next_after_seq)
    return _ok(b'{"facts":[' + items + f'],"next_after_seq":{tail}}}'.encode())


def members(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Every member of the project with kind, role and status, for any member (READS-1)."""
    project_id = _project(params)
    _no_query(request)
    rows = s.lookups.members(_caller(caller), project_id)
    body = {
        "members": [
            {"actor_id": m.actor_id, "kind": m.kind, "role": m.role, "status": m.status}
            for m in rows
        ]
    }
    return _ok(json_bytes(body))


def search(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Search over facts in the mode asked for (SRCH-1, SEM-3)."""
    project_id = _project(params)
    query = Query(request.query)
    q = query.text("q")
    source_id = query.text("source_id")
    limit = query.integer("limit", minimum=1, maximum=SEARCH_LIMIT_MAX)
    at_least_seq = query.integer("at_least_seq")
    mode = query.text("mode")
    query.finish(
        frozenset({"q", "source_id", "limit", "at_least_seq", "mode"}), forbidden=_IDENTITY_PARAMS
    )
    if q is None:
        raise fail(ErrorCode.INVALID_COMMAND, "q is required")
    if source_id is not None:
        validate_id(source_id, "source_id")
    found = s.searches.search(
        _caller(caller),
        project_id,
        q=q,
        source_id=source_id,
        limit=SEARCH_LIMIT_DEFAULT if limit is None else limit,
        at_least_seq=at_least_seq,
        mode=mode,
    )
    return _ok(json_bytes(found.as_json()))


# -- MCP ------------------------------------------------------------------------------------


def mcp(s: Services, request: Request, params: dict[str, str], caller: Caller | None) -> Response:
    """`POST .../mcp`: the MCP endpoint (MCP-4). `aidememo.mcp` builds on this layer (its tool
    calls run the handlers above), so it is imported when the route first runs."""
    from aidememo.mcp.http import mcp as serve

    return serve(s, request, params, caller)
