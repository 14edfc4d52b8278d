"""The MCP tool registry: every tool the team surface offers, one `Tool` entry each (MCP-1).

A tool has a stable name, a description written for a model, a closed JSON Schema for its
arguments (`additionalProperties: false`; tenant and actor are never arguments, they come from
the token), the schema of its answer, and its REST twin: the route (by its name in
`aidememo.http.routes`) whose handler answers it, with `build` turning the arguments into that
route's path parameters, query and body. A read tool's query arguments are made from its twin's
declared query parameters (`aidememo.mcp.twins`, HTTP-16), never written here.
`aidememo.mcp.dispatch` runs the call through the twin's handler, so checks, visibility,
idempotency and error codes are the route's own.

Creates take the resource id and an optional `operation_id`, the command id; without it the
command id is derived from the operation by `aidememo.domain.command_ids` (ID-4), so a model
that repeats a tool call replays the first answer instead of applying it twice (CMD-3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aidememo.domain import command_ids
from aidememo.domain.limits import CONTENT_MAX_BYTES, FOCUS_MAX_BYTES, ID_MAX_BYTES, TOPIC_MAX_BYTES
from aidememo.mcp.artifact_tools import artifact_tools
from aidememo.mcp.tool import Args, Build, Context, Schema, Tool, Twin
from aidememo.mcp.twins import COMPONENTS, TWINS, passed_on, pick, query_arguments

__all__ = ["BY_NAME", "READ_TOOLS", "TOOLS", "Args", "Context", "Tool", "Twin"]

# -- argument schemas -------------------------------------------------------------------------

_ID_PATTERN = f"^[A-Za-z0-9\\-_.:@]{{1,{ID_MAX_BYTES}}}$"


def _id(description: str) -> Schema:
    return {
        "type": "string",
        "pattern": _ID_PATTERN,
        "minLength": 1,
        "maxLength": ID_MAX_BYTES,
        "description": description,
    }


def _int(minimum: int, description: str) -> Schema:
    return {"type": "integer", "minimum": minimum, "description": description}


def _text(max_bytes: int, description: str) -> Schema:
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": max_bytes,
        "description": f"{description} (at most {max_bytes} bytes of UTF-8).",
    }


def _enum(values: tuple[str, ...], description: str) -> Schema:
    return {"type": "string", "enum": list(values), "description": description}


_OPERATION = _id(
    "Optional idempotency key, the command id. Omit it: the id is derived from the operation,"
    " so repeating the identical call replays its first answer."
)
_REVISION = _int(1, "The handoff's current revision (from handoff_status or handoff_list).")
_CLAIM = _id("Your claim on the handoff: choose it at accept, reuse it for heartbeat and return.")
_HANDOFF = _id("The handoff's id.")
_SESSION = _id("The session it belongs to.")
# A transition's arguments: the handoff, its revision and the claim.
_CLAIM_ARGS = {"handoff_id": _HANDOFF, "expected_revision": _REVISION, "claim_id": _CLAIM}
_CLAIM_REQUIRED = ("handoff_id", "expected_revision", "claim_id")


# -- output schemas ---------------------------------------------------------------------------

_COMPONENTS = "#/components/schemas/"


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        target = node.get("$ref")
        if isinstance(target, str) and target.startswith(_COMPONENTS):
            found.add(target[len(_COMPONENTS) :])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def _relinked(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _relinked(v) for k, v in node.items()}
        target = out.get("$ref")
        if isinstance(target, str) and target.startswith(_COMPONENTS):
            out["$ref"] = "#/$defs/" + target[len(_COMPONENTS) :]
        return out
    if isinstance(node, list):
        return [_relinked(v) for v in node]
    return node


def self_contained(schema: Schema, components: dict[str, Schema]) -> Schema:
    """`schema` with the components it references (transitively) in its own `$defs`, so a
    client validates the answer without the OpenAPI document."""
    needed: set[str] = set()
    _refs(schema, needed)
    pending = list(needed)
    while pending:
        found: set[str] = set()
        _refs(components[pending.pop()], found)
        for name in found - needed:
            needed.add(name)
            pending.append(name)
    out: Schema = _relinked(schema)
    if needed:
        out["$defs"] = {name: _relinked(components[name]) for name in sorted(needed)}
    return out


def _answer(component: str) -> Schema:
    """The REST twin's 200 answer as a self-contained schema."""
    return self_contained(dict(COMPONENTS[component]), COMPONENTS)


# -- twins ------------------------------------------------------------------------------------


def _create(kind: str, id_field: str, *fields: str) -> Build:
    def build(ctx: Context, args: Args) -> Twin:
        command_id = args.get("operation_id")
        if command_id is None:
            command_id = command_ids.create_command_id(ctx.project_id, kind, args[id_field])
        payload = pick(args, id_field, *fields)
        return Twin(body={"command_id": command_id, "payload": payload})

    return build


def _transition(derive: Callable[[Context, Args], str], *fields: str) -> Build:
    def build(ctx: Context, args: Args) -> Twin:
        command_id = args.get("operation_id")
        if command_id is None:
            command_id = derive(ctx, args)
        return Twin(
            params={"handoff_id": args["handoff_id"]},
            body={
                "command_id": command_id,
                "expected_revision": args["expected_revision"],
                "payload": pick(args, *fields),
            },
        )

    return build


def _accept_id(ctx: Context, args: Args) -> str:
    return command_ids.accept_command_id(
        ctx.project_id, ctx.actor_id, args["handoff_id"], args["claim_id"]
    )


def _heartbeat_id(ctx: Context, args: Args) -> str:
    return command_ids.heartbeat_command_id(
        ctx.project_id,
        ctx.actor_id,
        args["handoff_id"],
        args["claim_id"],
        args["expected_revision"],
    )


def _return_id(ctx: Context, args: Args) -> str:
    return command_ids.return_command_id(
        ctx.project_id,
        ctx.actor_id,
        args["handoff_id"],
        args["claim_id"],
        args["result_fact_id"],
        args["outcome"],
        args.get("result_artifact_id"),
    )


def _read(
    name: str,
    description: str,
    route: str,
    answer: str,
    path: dict[str, Schema] | None = None,
) -> Tool:
    """A read tool passing its arguments on to its twin `route`: `path`, the route's path
    parameters (beside the project), and the route's declared query parameters."""
    twin = TWINS[route]
    query, required = query_arguments(twin)
    return Tool(
        name,
        description,
        route,
        {**(path or {}), **query},
        (*(path or {}), *required),
        write=False,
        output=_answer(answer),
        build=passed_on(twin),
    )


# -- the registry -----------------------------------------------------------------------------

TOOLS: tuple[Tool, ...] = (
    _read(
        "identity",
        "Who you are in this project: tenant, project, project_epoch (needed by `changes`),"
        " your actor id and role (owner, admin, writer or reader).",
        "identity",
        "Identity",
    ),
    _read(
        "members",
        "Every member of the project with actor id, kind, role and status: whom you can hand"
        " work to (active writers).",
        "members",
        "Members",
    ),
    _read(
        "search",
        "Search the project's facts by words and by meaning, best first (mode auto: hybrid"
        " where the semantic index is built, else lexical). Pass at_least_seq (a receipt's"
        " project_seq) to be sure a write you just made is included.",
        "search",
        "Search",
    ),
    Tool(
        "resource_get",
        "The exact current body of one record (or its tombstone) by kind and id, e.g. kind"
        " fact, session, handoff, handoff_context, or a custom.* kind.",
        "resource",
        {"kind": {"type": "string", "description": "The record kind."}, "id": _id("Its id.")},
        ("kind", "id"),
        write=False,
        output=_answer("Resource"),
        build=lambda ctx, args: Twin(params={"kind": args["kind"], "resource_id": args["id"]}),
    ),
    Tool(
        "session_create",
        "Open a work session (the container of facts and handoffs) with a short topic.",
        "create_session",
        {
            "session_id": _id("A new id you choose for the session."),
            "topic": _text(TOPIC_MAX_BYTES, "What the session is about"),
            "source_id": _id("Where the work happens (default: default)."),
            "operation_id": _OPERATION,
        },
        ("session_id", "topic"),
        write=True,
        output=_answer("Receipt"),
        build=_create("session", "session_id", "topic", "source_id"),
    ),
    _read(
        "session_list",
        "The project's sessions, newest first, a page at a time.",
        "sessions",
        "Sessions",
    ),
    Tool(
        "fact_create",
        "Record a fact (a finding, decision or result) in a session; teammates can search it.",
        "create_fact",
        {
            "fact_id": _id("A new id you choose for the fact."),
            "session_id": _SESSION,
            "content": _text(CONTENT_MAX_BYTES, "The fact itself"),
            "operation_id": _OPERATION,
        },
        ("fact_id", "session_id", "content"),
        write=True,
        output=_answer("Receipt"),
        build=_create("fact", "fact_id", "session_id", "content"),
    ),
    _read(
        "fact_list",
        "A session's facts in commit order, a page at a time (pass next_after_seq back as"
        " after_seq for the next page).",
        "session_facts",
        "SessionFacts",
        {"session_id": _id("The session whose facts to list.")},
    ),
    Tool(
        "handoff_context_create",
        "Attach an immutable context packet for a handoff you are about to send (what the"
        " receiver needs to know); pass its id as context_id to handoff_send.",
        "create_context",
        {
            "context_id": _id("A new id you choose for the context."),
            "handoff_id": _id("The handoff it is for."),
            "session_id": _SESSION,
            "to_actor": _id("The receiver's actor id."),
            "content": _text(CONTENT_MAX_BYTES, "The context"),
            "operation_id": _OPERATION,
        },
        ("context_id", "handoff_id", "session_id", "to_actor", "content"),
        write=True,
        output=_answer("Receipt"),
        build=_create(
            "handoff_context", "context_id", "handoff_id", "session_id", "to_actor", "content"
        ),
    ),
    Tool(
        "handoff_send",
        "Hand a piece of work to another active writer of the project; it lands in their inbox"
        " as pending until they accept it.",
        "send_handoff",
        {
            "handoff_id": _id("A new id you choose for the handoff."),
            "session_id": _SESSION,
            "to_actor": _id("The receiver's actor id (see members)."),
            "focus": _text(FOCUS_MAX_BYTES, "What to do"),
            "done_when": _text(FOCUS_MAX_BYTES, "How the receiver knows it is done"),
            "context_id": _id("A context packet made with handoff_context_create."),
            "operation_id": _OPERATION,
        },
        ("handoff_id", "session_id", "to_actor"),
        write=True,
        output=_answer("Receipt"),
        build=_create(
            "handoff", "handoff_id", "session_id", "to_actor", "focus", "done_when", "context_id"
        ),
    ),
    _read(
        "handoff_list",
        "Your inbox (handoffs sent to you) or outbox (sent by you), newest first, with each"
        " handoff's revision and lease_state.",
        "mailbox",
        "Mailbox",
    ),
    _read(
        "handoff_status",
        "One handoff's revision, record and lease_state, for its sender and its receiver.",
        "handoff_status",
        "HandoffStatus",
        {"handoff_id": _HANDOFF},
    ),
    Tool(
        "handoff_accept",
        "Claim a handoff sent to you, with a lease: you own it until the lease runs out."
        " Renew with handoff_heartbeat, finish with handoff_return.",
        "accept",
        {**_CLAIM_ARGS, "operation_id": _OPERATION},
        _CLAIM_REQUIRED,
        write=True,
        output=_answer("Receipt"),
        build=_transition(_accept_id, "claim_id"),
    ),
    Tool(
        "handoff_heartbeat",
        "Renew the lease of your live claim on a handoff (each renewal needs the current"
        " revision).",
        "heartbeat",
        {**_CLAIM_ARGS, "operation_id": _OPERATION},
        _CLAIM_REQUIRED,
        write=True,
        output=_answer("Receipt"),
        build=_transition(_heartbeat_id, "claim_id"),
    ),
    Tool(
        "handoff_return",
        "Finish your claim: outcome succeeded completes the handoff, failed releases it for a"
        " new claim. result_fact_id is a fact you wrote in the handoff's session;"
        " result_artifact_id (optional) names a published artifact holding the result.",
        "return",
        {
            **_CLAIM_ARGS,
            "result_fact_id": _id("The fact holding the result."),
            "outcome": _enum(command_ids.OUTCOMES, "succeeded or failed."),
            "result_artifact_id": _id("A published artifact holding the result (optional)."),
            "operation_id": _OPERATION,
        },
        (*_CLAIM_REQUIRED, "result_fact_id", "outcome"),
        write=True,
        output=_answer("Receipt"),
        build=_transition(
            _return_id, "claim_id", "result_fact_id", "outcome", "result_artifact_id"
        ),
    ),
    _read(
        "changes",
        "Change entries (metadata only) after a cursor: start at after_seq 0 with the"
        " project_epoch from identity, then pass next_cursor.after_seq.",
        "changes",
        "ChangeBatch",
    ),
)

TOOLS = (*TOOLS, *artifact_tools(_answer, _id))
BY_NAME: dict[str, Tool] = {tool.name: tool for tool in TOOLS}
READ_TOOLS: tuple[Tool, ...] = tuple(tool for tool in TOOLS if not tool.write)
