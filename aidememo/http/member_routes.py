"""The member routes' entries (a member's token: the ledger, typed records, reads, search), in
`routes.ROUTES`, with their query parameters, declared here once (HTTP-16). Their handlers are
`aidememo.http.member_handlers`'."""

from __future__ import annotations

from typing import Any

from aidememo.domain.errors import ErrorCode
from aidememo.domain.limits import (
    CHANGES_LIMIT_DEFAULT,
    CHANGES_LIMIT_MAX,
    MAILBOX_LIMIT_DEFAULT,
    MAILBOX_LIMIT_MAX,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    SEARCH_QUERY_MAX_BYTES,
    SESSION_FACTS_LIMIT_DEFAULT,
    SESSION_FACTS_LIMIT_MAX,
    SESSIONS_LIMIT_DEFAULT,
    SESSIONS_LIMIT_MAX,
    SNAPSHOT_LIMIT_DEFAULT,
    SNAPSHOT_LIMIT_MAX,
)
from aidememo.http import member_handlers as h
from aidememo.http.query import Param
from aidememo.http.schemas import integer, ref, text
from aidememo.http.types import Handler, Route

E = ErrorCode
P = "/v1/projects/{project_id}"
_CURSOR = (E.INVALID_CHANGE_BATCH, E.CURSOR_EPOCH_MISMATCH, E.CURSOR_OUT_OF_RANGE)
_CREATE = (E.COMMAND_CONFLICT, E.RESOURCE_ALREADY_EXISTS)
_TRANSITION = (
    E.HANDOFF_ACTOR_MISMATCH,
    E.RESOURCE_NOT_FOUND,
    E.COMMAND_CONFLICT,
    E.STALE_REVISION,
    E.HANDOFF_CONFLICT,
)


# -- query parameters (shared by the routes that take them) ----------------------------------

_SOURCE = Param(
    "source_id", ref("Id"), doc="Only this source (e.g. a repository or workspace name)."
)
_BEFORE = Param("before_seq", integer(1), doc="Exclusive: `next_before_seq` of the previous page.")


def _page_size(maximum: int, default: int) -> Param:
    return Param("limit", integer(1, maximum, default=default), doc="Page size.")


_CHANGES_QUERY = (
    Param("project_epoch", ref("Id"), required=True, doc="The project's epoch (identity)."),
    Param(
        "after_seq", integer(0), required=True, doc="Exclusive cursor; at most the project head."
    ),
    Param(
        "limit",
        integer(1, CHANGES_LIMIT_MAX, default=CHANGES_LIMIT_DEFAULT),
        doc="Most entries to scan (out of range: 400 invalid_change_batch).",
        code=ErrorCode.INVALID_CHANGE_BATCH,
    ),
)
_MAILBOX_QUERY = (
    Param("box", {"type": "string", "enum": ["inbox", "outbox"]}, required=True, doc="Which box."),
    _SOURCE,
    Param(
        "include_completed",
        {"type": "boolean"},
        doc="Include completed handoffs: `true` or `false`; defaults to false for the inbox"
        " and true for the outbox.",
    ),
    _BEFORE,
    _page_size(MAILBOX_LIMIT_MAX, MAILBOX_LIMIT_DEFAULT),
)
_SESSIONS_QUERY = (_SOURCE, _BEFORE, _page_size(SESSIONS_LIMIT_MAX, SESSIONS_LIMIT_DEFAULT))
_SESSION_FACTS_QUERY = (
    Param("after_seq", integer(0), doc="Exclusive: `next_after_seq` of the previous page."),
    _page_size(SESSION_FACTS_LIMIT_MAX, SESSION_FACTS_LIMIT_DEFAULT),
)
_SNAPSHOT_QUERY = (
    Param(
        "limit",
        integer(1, SNAPSHOT_LIMIT_MAX, default=SNAPSHOT_LIMIT_DEFAULT),
        doc="Resources scanned (hidden ones count); a page also ends once its bodies reach 4 MiB.",
    ),
    Param(
        "page_token",
        {"type": "string"},
        doc="The previous page's `next_page_token` (opaque; bound to the caller and project, "
        "valid 10 minutes): the next page of the same `at_seq`.",
    ),
)
_SEARCH_QUERY = (
    Param(
        "q",
        text(
            SEARCH_QUERY_MAX_BYTES,
            SEARCH_QUERY_MAX_BYTES,
            what="Plain words or a question; no query syntax",
        ),
        required=True,
    ),
    _SOURCE,
    Param(
        "limit",
        integer(1, SEARCH_LIMIT_MAX, default=SEARCH_LIMIT_DEFAULT),
        doc="Most results to return.",
    ),
    Param(
        "at_least_seq",
        integer(0),
        doc="Wait for the index to reach this sequence (a receipt's project_seq). Beyond the"
        " head: 409 cursor_out_of_range (the lexical index is the head). Beyond the semantic"
        " index: waits a bounded time, then semantic answers 409 index_not_ready and"
        " hybrid/auto answer lexically with a fallback_reason (SEM-5).",
    ),
    Param(
        "mode",
        {"type": "string", "enum": ["lexical", "semantic", "hybrid", "auto"], "default": "auto"},
        doc="lexical (words), semantic (meaning), hybrid (both) or auto: hybrid where the"
        " project's semantic index is built, else lexical (SEM-3).",
    ),
)


# -- the entries ------------------------------------------------------------------------------


def _command(
    name: str, path: str, handler: Handler, summary: str, body: str, errors: tuple[E, ...]
) -> Route:
    """A command route: a POST of one command answered by its receipt, batched (HTTP-10)."""
    return Route(
        name, "POST", path, handler, summary, body=body, answer="Receipt", errors=errors, batch=True
    )


def _read(name: str, path: str, handler: Handler, summary: str, answer: str, **more: Any) -> Route:
    """A member read of the store alone, on the store's pool (HTTP-12)."""
    return Route(name, "GET", path, handler, summary, answer=answer, store_read=True, **more)


COMMAND = Route(
    "command",
    "POST",
    "/v1/commands",
    h.command,
    "Raw resource.put / resource.delete of a custom.* resource",
    body="RawCommand",
    answer="Receipt",
    errors=(E.RESOURCE_NOT_FOUND, E.COMMAND_CONFLICT, E.STALE_REVISION, E.SECRET_REJECTED),
    batch=True,
    project_in_body=True,
)
CHANGES_LIVE = Route(
    "changes_live",
    "GET",
    f"{P}/changes/live",
    h.changes_live,
    "Live change feed over a WebSocket: catch-up pages, then every commit",
    upgrade=True,
    query=_CHANGES_QUERY,
    errors=(*_CURSOR, E.UPGRADE_REQUIRED),
)

MEMBER_ROUTES: tuple[Route, ...] = (
    COMMAND,
    _read(
        "identity",
        f"{P}/identity",
        h.identity,
        "The caller's identity and role in the project",
        "Identity",
    ),
    _read(
        "resource",
        f"{P}/resources/{{kind}}/{{resource_id}}",
        h.resource,
        "The exact current body or tombstone of one resource",
        "Resource",
        errors=(E.RESOURCE_NOT_FOUND,),
    ),
    _read(
        "changes",
        f"{P}/changes",
        h.changes,
        "Metadata-only change entries after a cursor",
        "ChangeBatch",
        query=_CHANGES_QUERY,
        errors=_CURSOR,
    ),
    _read(
        "changes_materialized",
        f"{P}/changes/materialized",
        h.changes_materialized,
        "Change entries with the exact body at each revision",
        "MaterializedBatch",
        query=_CHANGES_QUERY,
        errors=_CURSOR,
    ),
    CHANGES_LIVE,
    _read(
        "snapshot",
        f"{P}/snapshot",
        h.snapshot,
        "A page of the state at one sequence; `next_page_token` pages on at that sequence",
        "Snapshot",
        query=_SNAPSHOT_QUERY,
        errors=(E.SNAPSHOT_EXPIRED,),
    ),
    _command(
        "create_session",
        f"{P}/sessions",
        h.create_session,
        "session.create",
        "SessionCreate",
        (*_CREATE, E.SECRET_REJECTED),
    ),
    _read(
        "sessions",
        f"{P}/sessions",
        h.sessions,
        "The project's sessions, newest first",
        "Sessions",
        query=_SESSIONS_QUERY,
    ),
    _read(
        "session_facts",
        f"{P}/sessions/{{session_id}}/facts",
        h.session_facts,
        "A session's facts in commit order",
        "SessionFacts",
        query=_SESSION_FACTS_QUERY,
        errors=(E.RESOURCE_NOT_FOUND,),
    ),
    _command(
        "create_fact",
        f"{P}/facts",
        h.create_fact,
        "fact.create (source and actor inherited server-side)",
        "FactCreate",
        (E.RESOURCE_NOT_FOUND, *_CREATE, E.SECRET_REJECTED),
    ),
    _command(
        "create_context",
        f"{P}/handoff-contexts",
        h.create_context,
        "handoff_context.create: an immutable packet for one handoff route",
        "HandoffContextCreate",
        (E.RESOURCE_NOT_FOUND, *_CREATE, E.SECRET_REJECTED),
    ),
    _command(
        "send_handoff",
        f"{P}/handoffs",
        h.send_handoff,
        "handoff.send to another active writer",
        "HandoffSend",
        (E.RESOURCE_NOT_FOUND, *_CREATE, E.HANDOFF_CONFLICT, E.SECRET_REJECTED),
    ),
    _read(
        "mailbox",
        f"{P}/handoffs",
        h.mailbox,
        "The caller's inbox or outbox, newest first",
        "Mailbox",
        query=_MAILBOX_QUERY,
    ),
    _read(
        "handoff_status",
        f"{P}/handoffs/{{handoff_id}}",
        h.handoff_status,
        "{revision, record} of a handoff, for its sender and receiver",
        "HandoffStatus",
        errors=(E.HANDOFF_ACTOR_MISMATCH, E.RESOURCE_NOT_FOUND),
    ),
    _command(
        "accept",
        f"{P}/handoffs/{{handoff_id}}/accept",
        h.accept,
        "handoff.accept: claim the handoff with a lease",
        "ClaimTransition",
        _TRANSITION,
    ),
    _command(
        "heartbeat",
        f"{P}/handoffs/{{handoff_id}}/heartbeat",
        h.heartbeat,
        "handoff.heartbeat: renew the live claim's lease",
        "ClaimTransition",
        _TRANSITION,
    ),
    _command(
        "return",
        f"{P}/handoffs/{{handoff_id}}/return",
        h.return_,
        "handoff.return: complete (succeeded) or release (failed) the claim",
        "ReturnTransition",
        (*_TRANSITION, E.ARTIFACT_NOT_FOUND),
    ),
    _read(
        "members",
        f"{P}/members",
        h.members,
        "Every member of the project: actor id, kind, role and status",
        "Members",
    ),
    _read(
        "search",
        f"{P}/search",
        h.search,
        "Search over facts by words, meaning or both (SRCH-*, SEM-*)",
        "Search",
        query=_SEARCH_QUERY,
        errors=(E.CURSOR_OUT_OF_RANGE, E.INDEX_NOT_READY, E.SEMANTIC_UNAVAILABLE),
        costly=True,
        semantic=True,
    ),
)
