"""Administration at the edge: the origin's admin routes, orchestrated across objects.

The request checks and answers are the core's (`aidememo.http.admin`); what differs is that
a tenant lives in several objects. The order of writes makes every operation safe to retry:

- bootstrap: token directory check -> `TenantRegistry.bootstrap` (the CLI's rules, one
  transaction) -> directory `bind` -> `ProjectCoordinator.sync_member`. Each step is
  idempotent, so retrying a bootstrap that failed half-way completes it.
- members: registry first, then the project object.
- token revoke: directory first (authentication stops there; cached copies expire within
  30 s), then the registry's copy.
- import: every check first (registry: projects absent, actor kinds; directory shards: token
  owners), then registry, directory shards, and each project object (staged in pages of at
  most 1 MiB, written in one transaction per project). Not atomic across objects: a failure
  half-way is cleaned up with the tenant deletion, which the registry (written first) sees.
- export: the registry's identity records, one consistent snapshot per project object (its
  head and epoch go into the project line), its pages, and the manifest computed here.
- delete-tenant: every project object, every directory shard holding the tenant's digests,
  then the registry last, so a retry still finds what is left; each object verifies by counts
  (a deletion whose rows survive rolls back in that object and answers 503). The answer counts
  the rows this request removed, so a retry after a half-done deletion counts only the rest.

Between Worker and client the export and import bodies are whole in the isolate's memory;
only the hops between Worker and objects are paged (at most 1 MiB each).
"""

from __future__ import annotations

import uuid
from typing import Any

from aidememo.domain.model import Membership, MemberStatus, Project, Role
from aidememo.http import admin as core
from aidememo.http.render import json_bytes
from aidememo.http.types import Request, Response
from aidememo.ports import Clock, Ids
from aidememo.service.archive import (
    ImportSummary,
    Manifest,
    Plan,
    check_header,
    confirm_deletion,
    header_record,
    line,
    record_counts,
    verified_records,
)
from aidememo.service.identity import BootstrapResult
from aidememo.stores.sqlite.archive import TENANT_TABLES
from durable_objects.rpc import split_text
from worker.auth_cache import TokenCache
from worker.objects import Objects, call
from worker.routing import token_shard

_JSON = [("content-type", "application/json")]
IDENTITY_TYPES = ("actor", "project", "membership", "token")
ROW_TYPES = ("resource", "change", "receipt", "audit")
IDENTITY_TABLES = frozenset({"tenants", "actors", "projects", "memberships", "token_bindings"})


def _ok(value: Any) -> Response:
    return Response(200, list(_JSON), json_bytes(value))


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
    await call(objs.registry(owner["tenant_id"]), "revoke", digest.hex())
    cache.evict(digest)
    return _ok({"revoked": True})


async def export(objs: Objects, request: Request, params: dict[str, str], clock: Clock) -> Response:
    """`GET /v1/admin/tenants/{t}/export`, assembled from the registry and the projects."""
    tenant_id, project_id, include_tokens = core.export_request(request, params)
    records = await call(
        objs.registry(tenant_id),
        "export_identity",
        {"tenant_id": tenant_id, "project_id": project_id, "include_tokens": include_tokens},
    )
    snapshots: dict[str, dict[str, Any]] = {}
    for record in records:
        if record["type"] == "project":
            pid = record["project_id"]
            snapshots[pid] = await call(
                objs.project(tenant_id, pid),
                "export_begin",
                {"tenant_id": tenant_id, "project_id": pid},
            )
    m = Manifest()
    out = [
        m.add("header", line(header_record(tenant_id, project_id, clock.now_ms(), include_tokens)))
    ]
    for record in records:
        current = record
        if record["type"] == "project":
            snap = snapshots[record["project_id"]]
            current = {
                **record,
                "project_epoch": snap["project_epoch"],
                "head_seq": snap["head_seq"],
            }
        out.append(m.add(current["type"], line(current)))
    for pid, snap in snapshots.items():
        stub = objs.project(tenant_id, pid)
        for number in range(snap["pages"]):
            for kind, count, text in await call(stub, "export_page", snap["export_id"], number):
                out.append(m.add(kind, text.encode("utf-8"), count))
    out.append(m.line())
    return Response(200, list(core.NDJSON_HEADERS), b"".join(out))


async def import_(objs: Objects, request: Request, ids: Ids) -> Response:
    """`POST /v1/admin/import`: checked whole here, then written object by object."""
    lines = core.import_request(request)
    records = verified_records(lines)
    tenant_id = check_header(records[0])
    plan = Plan.build(tenant_id, records[1:])  # every check of the origin, before any write
    epochs = {pid: ids.new_id("epoch") for pid in plan.projects}
    identity = [r for r in records[1:] if r["type"] in IDENTITY_TYPES]
    shards = _token_shards(identity)
    registry = objs.registry(tenant_id)
    await call(registry, "check_import", {"tenant_id": tenant_id, "records": identity})
    for shard_records in shards.values():
        first = shard_records[-1]["token_sha256"]
        await call(
            objs.tokens(first), "check_import", {"tenant_id": tenant_id, "records": shard_records}
        )
    await call(
        registry,
        "import_identity",
        {"tenant_id": tenant_id, "records": identity, "epochs": epochs},
    )
    for shard_records in shards.values():
        first = shard_records[-1]["token_sha256"]
        await call(
            objs.tokens(first), "import_tokens", {"tenant_id": tenant_id, "records": shard_records}
        )
    for pid in plan.projects:
        await _import_project(objs, tenant_id, pid, epochs[pid], identity, lines, records)
    summary = ImportSummary(tenant_id, epochs, record_counts(records[1:]))
    return _ok(core.import_json(summary))


def _token_shards(identity: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Token records grouped by directory shard, each group led by its actors' records."""
    actors = {r["actor_id"]: r for r in identity if r["type"] == "actor"}
    shards: dict[str, list[dict[str, Any]]] = {}
    for r in identity:
        if r["type"] == "token":
            group = shards.setdefault(token_shard(r["token_sha256"]), [])
            actor = actors.get(r["actor_id"])
            if actor is not None and actor not in group:
                group.insert(0, actor)
            group.append(r)
    return shards


async def _import_project(
    objs: Objects,
    tenant_id: str,
    pid: str,
    epoch: str,
    identity: list[dict[str, Any]],
    lines: list[bytes],
    records: list[dict[str, Any]],
) -> None:
    members = [r for r in identity if r["type"] == "membership" and r["project_id"] == pid]
    member_ids = {r["actor_id"] for r in members}
    own = [
        r
        for r in identity
        if (r["type"] == "project" and r["project_id"] == pid)
        or (r["type"] == "actor" and r["actor_id"] in member_ids)
    ]
    rows = [
        data if data.endswith(b"\n") else data + b"\n"
        for data, r in zip(lines, records, strict=False)
        if r["type"] in ROW_TYPES and r["project_id"] == pid
    ]
    stub = objs.project(tenant_id, pid)
    import_id = uuid.uuid4().hex
    await call(
        stub,
        "import_begin",
        {
            "import_id": import_id,
            "tenant_id": tenant_id,
            "project_id": pid,
            "project_epoch": epoch,
            "identity": own + members,
        },
    )
    for text in split_text(rows):
        await call(stub, "import_page", import_id, text)
    await call(stub, "import_commit", import_id)


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
