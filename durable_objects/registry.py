"""`TenantRegistry`: one Durable Object per tenant, named by the tenant id.

The authority for the tenant's identities: its projects (with their epochs), actors and
kinds, memberships, and token digests, in the shared SQLite schema (no project rows live
here). Bootstrap, membership changes and revocation run the core's `IdentityService` on this
store, so the CLI's rules (idempotent retries, conflicting epoch, kind, role or owner refused
with no change) hold at the edge exactly. The Worker then copies the outcome to the project
object (`ProjectCoordinator.sync_member`) and the token directory.

Because the registry is written first, it always knows at least every object that holds the
tenant's rows: tenant deletion starts here and empties everything it lists.
"""

from __future__ import annotations

from typing import Any

from workers import DurableObject

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.model import ActorKind, MemberStatus, Role, Scope
from aidememo.service.archive import Plan, identity_records, read_identity
from aidememo.service.identity import IdentityService
from durable_objects.base import StoredObject, delete_rows
from durable_objects.rpc import answer, plain


class TenantRegistry(DurableObject, StoredObject):  # type: ignore[misc]
    """One tenant's projects, actors, memberships and token digests."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self._init_store()

    def _identity(self) -> IdentityService:
        return IdentityService(self._writable(), self.clock, self.ids)

    async def bootstrap(self, spec: Any) -> dict[str, Any]:
        """The core's bootstrap; answers the project epoch, actor kind, role and status."""
        s = plain(spec)

        def run() -> dict[str, Any]:
            result = self._identity().bootstrap(
                tenant_id=s["tenant_id"],
                project_id=s["project_id"],
                actor_id=s["actor_id"],
                kind=ActorKind(s["kind"]),
                role=Role(s["role"]),
                project_epoch=s.get("project_epoch"),
                token_sha256=bytes.fromhex(s["token_sha256"]),
            )
            m = result.membership
            return {
                "project_epoch": result.project.project_epoch,
                "kind": s["kind"],
                "role": m.role.value,
                "status": m.status.value,
            }

        return answer(run)

    async def set_member(self, spec: Any) -> dict[str, Any]:
        """The core's membership change; answers the member with its kind and project epoch."""
        s = plain(spec)

        def run() -> dict[str, Any]:
            identity = self._identity()
            m = identity.set_membership(
                s["tenant_id"],
                s["project_id"],
                s["actor_id"],
                role=None if s.get("role") is None else Role(s["role"]),
                status=None if s.get("status") is None else MemberStatus(s["status"]),
            )

            def facts(tx: Any) -> tuple[str, str]:
                project = tx.get_project(Scope(m.tenant_id, m.project_id))
                actor = tx.get_actor(m.tenant_id, m.actor_id)
                return project.project_epoch, actor.kind.value

            epoch, kind = identity.store.read(facts)
            return {
                "project_epoch": epoch,
                "kind": kind,
                "role": m.role.value,
                "status": m.status.value,
            }

        return answer(run)

    async def revoke(self, token_sha256: Any) -> dict[str, Any]:
        """Mark a digest revoked here too (the directory is revoked first); answers the
        projects where its actor is a member, whose objects close the token's live feeds."""

        def run() -> dict[str, Any]:
            identity = self._identity()
            digest = bytes.fromhex(str(token_sha256))
            revoked = identity.revoke_token(digest)

            def projects(tx: Any) -> list[str]:
                binding = tx.get_token(digest)
                if binding is None:
                    return []
                return sorted(
                    m.project_id
                    for m in tx.list_memberships(binding.tenant_id)
                    if m.actor_id == binding.actor_id
                )

            return {"revoked": revoked, "projects": identity.store.read(projects)}

        return answer(run)

    async def export_identity(self, spec: Any) -> dict[str, Any]:
        """The identity records of an export, in export order (heads are the project
        objects' to give)."""
        s = plain(spec)

        def run() -> list[dict[str, Any]]:
            store = self._open(create=False)
            if store is None:
                raise fail(ErrorCode.RESOURCE_NOT_FOUND, f"tenant {s['tenant_id']} not found")
            view = store.read(
                lambda tx: read_identity(
                    tx, s["tenant_id"], s.get("project_id"), bool(s["include_tokens"])
                )
            )
            return [plain(record) for record in identity_records(view)]

        return answer(run)

    async def import_identity(self, spec: Any) -> dict[str, Any]:
        """The identity part of an import: `{tenant_id, records, epochs}`; projects that
        exist are refused (`resource_already_exists`) before anything is written."""
        return self._import_identity(spec, epochs=True)

    async def check_import(self, spec: Any) -> dict[str, Any]:
        """Refuse an import whose projects exist or whose actors have another kind."""
        return self._check_in_store(spec, _conflicts)

    async def inventory(self, tenant_id: Any) -> dict[str, Any]:
        """What a tenant deletion must visit: `{projects, tokens}` (digests as hex)."""

        def run() -> dict[str, list[str]]:
            store = self._open(create=False)
            tid = str(tenant_id)

            def read(tx: Any) -> dict[str, list[str]]:
                if not tx.tenant_exists(tid):
                    raise fail(ErrorCode.RESOURCE_NOT_FOUND, f"tenant {tid} not found")
                return {
                    "projects": [p.project_id for p in tx.list_projects(tid)],
                    "tokens": [b.token_sha256.hex() for b in tx.list_tokens(tid)],
                }

            if store is None:
                raise fail(ErrorCode.RESOURCE_NOT_FOUND, f"tenant {tid} not found")
            result: dict[str, list[str]] = store.read(read)
            return result

        return answer(run)

    async def delete_tenant(self, tenant_id: Any) -> dict[str, Any]:
        """Remove every row of the tenant here; `{removed, left}` counts by table."""
        return answer(lambda: delete_rows(self._open(create=False), str(tenant_id)))


def _conflicts(s: dict[str, Any], tx: Any) -> None:
    """An imported project that exists, or an actor that exists with another kind."""
    plan = Plan.build(s["tenant_id"], list(s["records"]), history=False)
    for pid in plan.projects:
        if tx.get_project(Scope(plan.tenant_id, pid)) is not None:
            raise fail(ErrorCode.RESOURCE_ALREADY_EXISTS, f"project {pid} already exists")
    for actor in plan.actors:
        existing = tx.get_actor(plan.tenant_id, actor.actor_id)
        if existing is not None and existing.kind is not actor.kind:
            raise fail(ErrorCode.IDENTITY_MISMATCH, f"actor {actor.actor_id} has another kind")
