"""Administration at the edge: the origin's admin routes, orchestrated across objects.

The request checks and answers are the core's (`aidememo.http.admin_handlers`); what differs is that
a tenant lives in several objects. The order of writes makes every operation safe to retry:

- bootstrap: token directory check -> `TenantRegistry.bootstrap` (the CLI's rules, one
  transaction) -> directory `bind` -> `ProjectCoordinator.sync_member`. Each step is
  idempotent, so retrying a bootstrap that failed half-way completes it.
- members: registry first, then the project object.
- token revoke: directory first (authentication stops there; cached copies expire within
  30 s), then the registry's copy, then every project object of the token's actor, which
  closes the live feeds opened with that token (LIVE-5, 4401). A retry repeats it all.
- export and import stream their bodies: `worker.transfer`.
- delete-tenant: every project object, every directory shard holding the tenant's digests,
  then the registry last, so a retry still finds what is left; each object verifies by counts
  (a deletion whose rows survive rolls back in that object and answers 503). The answer counts
  the rows this request removed, so a retry after a half-done deletion counts only the rest.
"""

from __future__ import annotations

import json
from typing import Any

from aidememo.domain.model import Membership, MemberStatus, Project, Role
from aidememo.http import admin_handlers as core
from aidememo.http.app import json_response
from aidememo.http.render import json_bytes
from aidememo.http.types import Request, Response
from aidememo.service.archive import (
    confirm_deletion,
)
from aidememo.service.identity import BootstrapResult
from aidememo.stores.sqlite.archive import TENANT_TABLES
from durable_objects import vectors
from worker.auth_cache import TokenCache
from worker.objects import Objects, call
from worker.routing import token_shard

IDENTITY_TABLES = frozenset({"tenants", "actors", "projects", "memberships", "token_bindings"})


def _ok(value: Any) -> Response:
    return json_response(200, json_bytes(value))


async def bootstrap(objs: Objects, request: Request) -> Response:
    """`POST /v1/admin/bootstrap` across registry, directory and project object."""
    spec = core.bootstrap_request(request)
    tenant_id, project_id, actor_id = spec["tenant_id"], spec["project_id"], spec["actor_id"]
    digest = spec["token_sha256"].hex()
    owner = {"tenant_id": tenant_id, "actor_id": actor_id, "token_sha256": digest}
    await call(objs.tokens(digest), "check_owner", owner)
    reg = await call(
        objs.registry(tenant_id),
        "bootstrap",
        {
            "tenant_id": tenant_id,
            "project_id": project_id,
            "actor_id": actor_id,
            "kind": spec["kind"].value,
            "role": spec["role"].value,
            "project_epoch": spec["project_epoch"],
            "token_sha256": digest,
        },
    )
    await call(objs.tokens(digest), "bind", {**owner, "kind": reg["kind"]})
    await _sync_member(objs, tenant_id, project_id, actor_id, reg)
    result = BootstrapResult(
        Project(tenant_id, project_id, reg["project_epoch"], 0),
        Membership(tenant_id, project_id, actor_id, Role(reg["role"]), MemberStatus(reg["status"])),
    )
    return _ok(core.bootstrap_json(result))


async def _sync_member(
    objs: Objects, tenant_id: str, project_id: str, actor_id: str, reg: dict[str, Any]
) -> None:
    await call(
        objs.project(tenant_id, project_id),
        "sync_member",
        {
            "tenant_id": tenant_id,
            "project_id": project_id,
            "project_epoch": reg["project_epoch"],
            "actor_id": actor_id,
            "kind": reg["kind"],
            "role": reg["role"],
            "status": reg["status"],
        },
    )


async def members(objs: Objects, request: Request) -> Response:
    """`POST /v1/admin/members`: the registry decides, the project object follows."""
    spec = core.members_request(request)
    tenant_id, project_id, actor_id = spec["tenant_id"], spec["project_id"], spec["actor_id"]
    reg = await call(
        objs.registry(tenant_id),
        "set_member",
        {
            "tenant_id": tenant_id,
            "project_id": project_id,
            "actor_id": actor_id,
            "role": None if spec["role"] is None else spec["role"].value,
            "status": None if spec["status"] is None else spec["status"].value,
        },
    )
    await _sync_member(objs, tenant_id, project_id, actor_id, reg)
    m = Membership(tenant_id, project_id, actor_id, Role(reg["role"]), MemberStatus(reg["status"]))
    return _ok(core.membership_json(m))


async def revoke(objs: Objects, request: Request, cache: TokenCache) -> Response:
    """`POST /v1/admin/tokens/revoke`: directory, registry, and this isolate's cache."""
    digest = core.revoke_request(request)
    owner = await call(objs.tokens(digest.hex()), "revoke", digest.hex())
    done = await call(objs.registry(owner["tenant_id"]), "revoke", digest.hex())
    cache.evict(digest)
    for project_id in done["projects"]:  # the token's open live feeds close (LIVE-5)
        await call(objs.project(owner["tenant_id"], project_id), "revoke_token", digest.hex())
    return _ok({"revoked": True})


async def delete_tenant(objs: Objects, request: Request, params: dict[str, str]) -> Response:
    """`DELETE /v1/admin/tenants/{t}?confirm={t}`: every object emptied, verified by counts."""
    tenant_id, confirm = core.delete_request(request, params)
    confirm_deletion(tenant_id, confirm)
    registry = objs.registry(tenant_id)
    inventory = await call(registry, "inventory", tenant_id)
    removed = dict.fromkeys((*TENANT_TABLES, "fact_search"), 0)
    for pid in inventory["projects"]:
        done = await call(objs.project(tenant_id, pid), "delete_tenant", tenant_id)
        for table, count in done["removed"].items():
            if table not in IDENTITY_TABLES:
                removed[table] += count
    for shard in sorted({token_shard(d) for d in inventory["tokens"]}):
        digest = next(d for d in inventory["tokens"] if token_shard(d) == shard)
        await call(objs.tokens(digest), "delete_tenant", tenant_id)
    done = await call(registry, "delete_tenant", tenant_id)
    for table, count in done["removed"].items():
        if table in IDENTITY_TABLES:
            removed[table] += count
    return _ok({"tenant_id": tenant_id, "removed": removed})


# -- the semantic index in PostgreSQL mode (SEM-11) ---------------------------------------------
# The Worker deletes and imports tenants on the database itself there; the project objects,
# which keep their projects' vectors in Vectorize, are told afterwards.


def doomed_projects(store: Any, env: Any, params: dict[str, str]) -> list[str]:
    """The projects a tenant deletion is about to remove, when their objects index them."""
    tenant_id = params.get("tenant_id")
    if not tenant_id or vectors.bindings(env) is None:
        return []
    return [p.project_id for p in store.read(lambda tx: tx.list_projects(tenant_id))]


async def after_postgres_deletion(objs: Objects, doomed: list[str], response: Response) -> None:
    """The deleted projects' objects clear their vectors from Vectorize (ARC-4)."""
    if response.status != 200 or not doomed:
        return
    tenant_id = json.loads(response.body)["tenant_id"]
    for project_id in doomed:
        await call(objs.project(tenant_id, project_id), "clear_index")


async def after_postgres_import(objs: Objects, response: Response) -> None:
    """The imported projects' objects index them anew (SEM-6: a fresh index)."""
    if response.status != 200 or vectors.bindings(objs.env) is None:
        return
    answer = json.loads(response.body)
    for project_id in answer["project_epochs"]:
        tenant_id = answer["tenant_id"]
        await call(objs.project(tenant_id, project_id), "reindex", tenant_id, project_id)
