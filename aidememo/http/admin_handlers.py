"""Administration over HTTP, the same on origin and edge (SPEC.md ADM-*).

The request pipeline admits only the admin token, whose SHA-256 is configured; a member's
token is refused with `admin_required` before a handler here runs. Bootstrap, membership and
revocation follow the CLI's rules exactly, because both call the same `IdentityService`. The
import reads its body as a stream, line by line (`import_lines`).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Any

from aidememo.domain.canonical import decode_json
from aidememo.domain.envelope import check_fields, require_object
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.domain.limits import MAX_ARCHIVE_BYTES, TOKEN_DIGEST_BYTES
from aidememo.domain.model import ActorKind, Membership, MemberStatus, Role
from aidememo.http.handling import ok_json
from aidememo.http.query_values import query_of
from aidememo.http.services import Services
from aidememo.http.types import Request, Response
from aidememo.service.access import Caller
from aidememo.service.archive import ImportSummary
from aidememo.service.archive_verify import LineSplitter
from aidememo.service.identity import BootstrapResult

NDJSON_HEADERS = [("content-type", "application/x-ndjson")]


def _choice(obj: dict[str, Any], key: str, allowed: type[Any], default: Any = None) -> Any:
    value = obj.get(key)
    if value is None:
        return default
    try:
        return allowed(value)
    except ValueError:
        names = ", ".join(member.value for member in allowed)
        raise fail(ErrorCode.INVALID_COMMAND, f"{key} must be one of {names}") from None


def parse_digest(value: object) -> bytes:
    """A token digest given as 64 lowercase hex characters."""
    if isinstance(value, str) and len(value) == 2 * TOKEN_DIGEST_BYTES:
        try:
            if value == value.lower():
                return bytes.fromhex(value)
        except ValueError:
            pass
    raise fail(ErrorCode.INVALID_COMMAND, "token_sha256 must be 64 lowercase hex characters")


_BOOTSTRAP_REQUIRED = frozenset({"tenant_id", "project_id", "actor_id", "token_sha256"})
_BOOTSTRAP_OPTIONAL = frozenset({"actor_kind", "role", "project_epoch"})


def parse_bootstrap(body: bytes) -> dict[str, Any]:
    """`{tenant_id, project_id, actor_id, actor_kind?, role?, project_epoch?, token_sha256}`."""
    obj = require_object(decode_json(body), "request")
    check_fields(obj, _BOOTSTRAP_REQUIRED, _BOOTSTRAP_OPTIONAL, "request")
    epoch = obj.get("project_epoch")
    return {
        "tenant_id": validate_id(obj["tenant_id"], "tenant_id"),
        "project_id": validate_id(obj["project_id"], "project_id"),
        "actor_id": validate_id(obj["actor_id"], "actor_id"),
        "kind": _choice(obj, "actor_kind", ActorKind, ActorKind.AGENT),
        "role": _choice(obj, "role", Role, Role.WRITER),
        "project_epoch": None if epoch is None else validate_id(epoch, "project_epoch"),
        "token_sha256": parse_digest(obj["token_sha256"]),
    }


def bootstrap_request(request: Request) -> dict[str, Any]:
    """The body checks of `POST /v1/admin/bootstrap` (it takes no query parameters)."""
    return parse_bootstrap(request.body.read())


def bootstrap_json(result: BootstrapResult) -> dict[str, Any]:
    """The answer to a bootstrap."""
    m = result.membership
    return {
        "tenant_id": m.tenant_id,
        "project_id": m.project_id,
        "project_epoch": result.project.project_epoch,
        "actor_id": m.actor_id,
        "role": m.role,
    }


def members_request(request: Request) -> dict[str, Any]:
    """`{tenant_id, project_id, actor_id, role?, status?}`; one of role and status is needed."""
    obj = require_object(decode_json(request.body.read()), "request")
    required = frozenset({"tenant_id", "project_id", "actor_id"})
    check_fields(obj, required, frozenset({"role", "status"}), "request")
    role = _choice(obj, "role", Role)
    status = _choice(obj, "status", MemberStatus)
    if role is None and status is None:
        raise fail(ErrorCode.INVALID_COMMAND, "give role or status")
    return {
        "tenant_id": validate_id(obj["tenant_id"], "tenant_id"),
        "project_id": validate_id(obj["project_id"], "project_id"),
        "actor_id": validate_id(obj["actor_id"], "actor_id"),
        "role": role,
        "status": status,
    }


def membership_json(m: Membership) -> dict[str, Any]:
    """The answer to a membership change."""
    return {
        "tenant_id": m.tenant_id,
        "project_id": m.project_id,
        "actor_id": m.actor_id,
        "role": m.role,
        "status": m.status,
    }


def revoke_request(request: Request) -> bytes:
    """The digest of `POST /v1/admin/tokens/revoke` `{token_sha256}`."""
    obj = require_object(decode_json(request.body.read()), "request")
    check_fields(obj, frozenset({"token_sha256"}), frozenset(), "request")
    return parse_digest(obj["token_sha256"])


def export_request(request: Request, params: dict[str, str]) -> tuple[str, str | None, bool, bool]:
    """`(tenant_id, project_id or None, include_token_digests, include_bodies)` of an
    export."""
    tenant_id = validate_id(params["tenant_id"], "tenant_id")
    q = query_of(request)
    return tenant_id, q["project_id"], q["include_token_digests"], q["include_bodies"]


def delete_request(request: Request, params: dict[str, str]) -> tuple[str, str]:
    """`(tenant_id, confirm)` of a tenant deletion."""
    tenant_id = validate_id(params["tenant_id"], "tenant_id")
    confirm = query_of(request)["confirm"]
    return tenant_id, confirm or ""


def admin_bootstrap(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Idempotent bootstrap of tenant, project, actor, membership and token (ADM-2)."""
    return ok_json(bootstrap_json(s.identity.bootstrap(**bootstrap_request(request))))


def admin_members(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Change a member's role or status (ADM-2)."""
    spec = members_request(request)
    m = s.identity.set_membership(
        spec["tenant_id"],
        spec["project_id"],
        spec["actor_id"],
        role=spec["role"],
        status=spec["status"],
    )
    return ok_json(membership_json(m))


def admin_revoke_token(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Revoke a token by digest (ADM-2); unknown digests are `resource_not_found`."""
    if not s.identity.revoke_token(revoke_request(request)):
        raise fail(ErrorCode.RESOURCE_NOT_FOUND, "no such token")
    return ok_json({"revoked": True})


def admin_export(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """The tenant's (or one project's) export as JSON Lines (ADM-3, ARC-1); with
    `include_bodies` the artifact bodies follow the rows as chunked lines, streamed (ART-12)."""
    tenant_id, project_id, include_tokens, include_bodies = export_request(request, params)
    lines = s.archive.export_lines(
        tenant_id, project_id, include_tokens=include_tokens, include_bodies=include_bodies
    )
    if not include_bodies:
        return Response(200, list(NDJSON_HEADERS), b"".join(lines))
    first = next(lines)  # the rows are read and every body checked before the status
    return Response(200, list(NDJSON_HEADERS), b"", stream=chain((first,), lines))


def import_json(summary: ImportSummary) -> dict[str, Any]:
    """The answer to an import."""
    return {
        "tenant_id": summary.tenant_id,
        "project_epochs": summary.epochs,
        "counts": summary.counts,
    }


def import_lines(request: Request, max_bytes: int = MAX_ARCHIVE_BYTES) -> Iterator[bytes]:
    """The lines of an import body as its chunks arrive."""
    splitter = LineSplitter(max_bytes)
    for chunk in request.body:
        yield from splitter.feed(chunk)
    yield from splitter.finish()


def admin_import(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Import an export into scopes that do not exist yet (ADM-3, ARC-2)."""
    return ok_json(import_json(s.archive.import_lines(import_lines(request))))


def admin_delete_tenant(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Remove every row of a tenant, verified by counts (ADM-3, ARC-4)."""
    tenant_id, confirm = delete_request(request, params)
    removed = s.archive.delete_tenant(tenant_id, confirm)
    return ok_json({"tenant_id": tenant_id, "removed": removed})
