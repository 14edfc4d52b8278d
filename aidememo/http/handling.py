"""What every route family's handlers share: the caller a member route needs, the project of
the path, a JSON answer (with the replay header of CMD-7), and a closed JSON object body."""

from __future__ import annotations

from typing import Any

from aidememo.domain.canonical import decode_json
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.http.render import json_bytes
from aidememo.http.types import Request, Response
from aidememo.service.access import Caller

JSON_HEADERS = [("content-type", "application/json")]
REPLAYED_HEADER = "aidememo-replayed"


def member(caller: Caller | None) -> Caller:
    """The authenticated caller; public routes never reach a handler that needs one."""
    if caller is None:
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "missing bearer token")
    return caller


def project_of(params: dict[str, str]) -> str:
    """The `project_id` path parameter, checked."""
    return validate_id(params["project_id"], "project_id")


def ok_bytes(body: bytes, *, replayed: bool = False) -> Response:
    """A 200 JSON answer of rendered bytes; `aidememo-replayed: true` when the command had
    already been applied and this is its stored answer (CMD-7)."""
    headers = list(JSON_HEADERS)
    if replayed:
        headers.append((REPLAYED_HEADER, "true"))
    return Response(200, headers, body)


def ok_json(value: Any, *, replayed: bool = False) -> Response:
    """A 200 JSON answer of a plain value."""
    return ok_bytes(json_bytes(value), replayed=replayed)


def json_object(request: Request, allowed: set[str]) -> dict[str, Any]:
    """The body as a JSON object with no field beyond `allowed`."""
    body = decode_json(request.body.read())
    if not isinstance(body, dict):
        raise fail(ErrorCode.INVALID_COMMAND, "the body must be a JSON object")
    extra = sorted(set(body) - allowed)
    if extra:
        raise fail(ErrorCode.INVALID_COMMAND, f"unknown field {extra[0]!r}")
    return body
