"""The admin routes' entries (the admin token, ADM-*), in `routes.ROUTES`, with their query
parameters, declared here once (HTTP-16)."""

from __future__ import annotations

from aidememo.domain.errors import ErrorCode
from aidememo.domain.limits import MAX_ARCHIVE_BYTES
from aidememo.http import admin_handlers as h
from aidememo.http.query import Param
from aidememo.http.schemas import ref
from aidememo.http.types import NDJSON, Auth, EdgeHandler, Route

E = ErrorCode

ADMIN_BOOTSTRAP = Route(
    "admin_bootstrap",
    "POST",
    "/v1/admin/bootstrap",
    h.admin_bootstrap,
    "Admin: idempotent bootstrap of tenant, project, actor and token",
    Auth.ADMIN,
    body="AdminBootstrap",
    answer="Identity",
    errors=(E.IDENTITY_MISMATCH,),
    edge_handler=EdgeHandler.BOOTSTRAP,
)
ADMIN_MEMBERS = Route(
    "admin_members",
    "POST",
    "/v1/admin/members",
    h.admin_members,
    "Admin: change a member's role or status",
    Auth.ADMIN,
    body="AdminMember",
    answer="AdminMembership",
    errors=(E.RESOURCE_NOT_FOUND,),
    edge_handler=EdgeHandler.MEMBERS,
)
ADMIN_REVOKE_TOKEN = Route(
    "admin_revoke_token",
    "POST",
    "/v1/admin/tokens/revoke",
    h.admin_revoke_token,
    "Admin: revoke a token by its digest",
    Auth.ADMIN,
    body="AdminRevoke",
    answer="AdminRevoked",
    errors=(E.RESOURCE_NOT_FOUND,),
    edge_handler=EdgeHandler.REVOKE_TOKEN,
)
ADMIN_EXPORT = Route(
    "admin_export",
    "GET",
    "/v1/admin/tenants/{tenant_id}/export",
    h.admin_export,
    "Admin: export a tenant (or one project) as JSON Lines",
    Auth.ADMIN,
    answer="Archive",
    answer_media=NDJSON,
    query=(
        Param("project_id", ref("Id"), doc="Export one project instead of the whole tenant."),
        Param("include_token_digests", {"type": "boolean", "default": False}),
        Param(
            "include_bodies",
            {"type": "boolean", "default": False},
            doc="Carry the current publications' artifact bodies as chunked lines (ART-12).",
        ),
    ),
    errors=(E.RESOURCE_NOT_FOUND, E.ARTIFACT_NOT_FOUND, E.ARTIFACT_STORE_UNAVAILABLE),
    edge_handler=EdgeHandler.EXPORT,
)
ADMIN_IMPORT = Route(
    "admin_import",
    "POST",
    "/v1/admin/import",
    h.admin_import,
    "Admin: import an export into scopes that do not exist yet",
    Auth.ADMIN,
    body="Archive",
    media_type=NDJSON,
    max_body=MAX_ARCHIVE_BYTES,
    streamed=True,
    answer="AdminImported",
    errors=(E.IDENTITY_MISMATCH, E.RESOURCE_ALREADY_EXISTS),
    edge_handler=EdgeHandler.IMPORT,
)
ADMIN_DELETE_TENANT = Route(
    "admin_delete_tenant",
    "DELETE",
    "/v1/admin/tenants/{tenant_id}",
    h.admin_delete_tenant,
    "Admin: delete every row of a tenant",
    Auth.ADMIN,
    answer="AdminDeleted",
    query=(Param("confirm", {"type": "string"}, doc="Must repeat the tenant id."),),
    errors=(E.RESOURCE_NOT_FOUND,),
    edge_handler=EdgeHandler.DELETE_TENANT,
)

ADMIN_ROUTES: tuple[Route, ...] = (
    ADMIN_BOOTSTRAP,
    ADMIN_MEMBERS,
    ADMIN_REVOKE_TOKEN,
    ADMIN_EXPORT,
    ADMIN_IMPORT,
    ADMIN_DELETE_TENANT,
)
