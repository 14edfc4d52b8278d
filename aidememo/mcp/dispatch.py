"""A tool call, answered by its REST twin's route handler (SPEC.md MCP-2, MCP-3).

`call_tool` checks the arguments against the tool's closed schema (unknown keys, missing
required keys and wrong JSON types are `invalid_command`), builds the twin request
(`aidememo.mcp.tools.Twin`), reads its query against the twin route's declared parameters
(`parse_query`, as the pipeline does for a REST call) and calls the twin route's own handler
with the caller's identity: the same parameter checks, membership and role check, visibility,
receipt replay and error codes as the REST call, inside the same read or write. The answer is
the REST JSON as `structuredContent` plus its text; a refusal is a result with `isError: true`
whose `structuredContent` is the REST error `{"error": {"code", "message"}}`.

A storage error (`storage_failure`, `storage_full`) is not a tool result: it propagates, so
the whole request answers 503 or 507 as any route does and readiness sees it (READY-1).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.http.body import Body
from aidememo.http.query_values import parse_query
from aidememo.http.services import Services
from aidememo.http.types import Request
from aidememo.mcp.tool import Args, Context, Tool
from aidememo.mcp.twins import TWINS
from aidememo.service.access import Caller

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
}


def check_arguments(tool: Tool, arguments: Any) -> Args:
    """`arguments` when they fit the tool's closed schema, else `invalid_command`.

    Only the shape is checked here (keys and JSON types); values (id grammar, ranges, enums,
    byte limits) are the twin route's to judge, so their codes are the REST codes.
    """
    if not isinstance(arguments, dict):
        raise fail(ErrorCode.INVALID_COMMAND, "arguments must be an object")
    unknown = sorted(set(arguments) - set(tool.properties))
    if unknown:
        raise fail(
            ErrorCode.INVALID_COMMAND,
            f"unknown argument(s) {unknown} for {tool.name}; tenant and actor come from the"
            " token, never from arguments",
        )
    missing = [key for key in tool.required if key not in arguments]
    if missing:
        raise fail(ErrorCode.INVALID_COMMAND, f"missing argument(s) {missing} for {tool.name}")
    for key, value in arguments.items():
        kind = tool.properties[key].get("type")
        expected = _JSON_TYPES.get(kind) if isinstance(kind, str) else None
        if expected is None:
            continue
        wrong_bool = kind == "integer" and type(value) is bool
        if not isinstance(value, expected) or wrong_bool:
            raise fail(ErrorCode.INVALID_COMMAND, f"{key} must be a JSON {kind}")
    return arguments


def _query_value(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def twin_request(tool: Tool, ctx: Context, args: Args) -> tuple[Request, dict[str, str]]:
    """The REST request of a call: the core `Request` and the route's path parameters."""
    route = TWINS[tool.route]
    twin = tool.build(ctx, args)
    params = {"project_id": ctx.project_id, **twin.params}
    path = route.path
    for key, value in params.items():
        path = path.replace("{" + key + "}", quote(value, safe=""))
    query = urlencode({k: _query_value(v) for k, v in twin.query.items()})
    headers: dict[str, str] = {}
    body = b""
    if twin.body is not None:
        headers["content-type"] = "application/json"
        body = json.dumps(twin.body, ensure_ascii=False).encode("utf-8")
    return Request(route.method, path, query, headers, Body.of(body)), params


def _text_json(raw: bytes) -> str:
    return json.dumps(raw.decode("utf-8"), ensure_ascii=False)


def result_bytes(answer: bytes, *, error: bool) -> bytes:
    """A `CallToolResult` around a REST JSON answer, spliced without decoding it again."""
    flag = b"true" if error else b"false"
    return b"".join(
        (
            b'{"content":[{"type":"text","text":',
            _text_json(answer).encode("utf-8"),
            b'}],"structuredContent":',
            answer,
            b',"isError":',
            flag,
            b"}",
        )
    )


def error_result(error: AidememoError) -> bytes:
    """A tool result with `isError: true` carrying the REST error shape (ERR-1)."""
    return result_bytes(json.dumps(error.to_json()).encode("utf-8"), error=True)


def call_tool(
    services: Services, caller: Caller, project_id: str, tool: Tool, arguments: Any
) -> bytes:
    """The `CallToolResult` JSON of one call of `tool` (see the module docstring)."""
    try:
        args = check_arguments(tool, arguments)
        ctx = Context(project_id, caller.actor_id)
        if tool.run is not None:  # a body carried inline: the service, not the twin
            answer = json.dumps(tool.run(services, caller, ctx, args), ensure_ascii=False)
            return result_bytes(answer.encode("utf-8"), error=False)
        request, params = twin_request(tool, ctx, args)
        route = TWINS[tool.route]
        parse_query(route, request)
        response = route.handler(services, request, params, caller)
    except AidememoError as error:
        if error.store_state is not None:
            raise  # the store's failure is the request's, not the tool's (READY-1)
        return error_result(error)
    return result_bytes(response.body, error=False)
