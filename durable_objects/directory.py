"""`TokenDirectory`: token digest -> tenant and actor, sharded by the digest's prefix.

Never one global object: the shard of a digest is named by its first two hex characters
(`worker.routing.token_shard`), so authentication spreads over 256 objects and a hot tenant
cannot serialize everyone's logins behind one. Each shard keeps, in the shared SQLite schema,
only the rows `authenticate` needs: the tenants and actors of its digests and their bindings
(active or revoked). The core's `IdentityService.authenticate` answers from them.

The Worker caches positive answers for at most 30 s per isolate (`worker.auth_cache`), so a
revocation here reaches every edge location within that window.
"""

from __future__ import annotations

from typing import Any

from workers import DurableObject

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.model import ActorKind
from aidememo.service.identity import IdentityService
from durable_objects.base import StoredObject, delete_rows
from durable_objects.rpc import answer, plain


class TokenDirectory(DurableObject, StoredObject):  # type: ignore[misc]
    """One shard of the global digest -> (tenant, actor) map."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self._init_store()

    async def authenticate(self, token_sha256: Any) -> dict[str, Any]:
        """`{tenant_id, actor_id}` of an active binding, else `authentication_failed`."""

        def run() -> dict[str, str]:
            store = self._open(create=False)
            if store is None:
                raise fail(ErrorCode.AUTHENTICATION_FAILED, "unknown or revoked token")
            identity = IdentityService(store, self.clock, self.ids)
            caller = identity.authenticate(bytes.fromhex(str(token_sha256)))
            return {"tenant_id": caller.tenant_id, "actor_id": caller.actor_id}

        return answer(run)

    async def check_owner(self, spec: Any) -> dict[str, Any]:
        """Refuse a digest bound to another actor or revoked (before a bootstrap writes)."""
        s = plain(spec)

        def run() -> None:
            store = self._open(create=False)
            if store is not None:
                IdentityService(store, self.clock, self.ids).check_token_owner(
                    s["tenant_id"], s["actor_id"], bytes.fromhex(s["token_sha256"])
                )

        return answer(run)

    async def bind(self, spec: Any) -> dict[str, Any]:
        """Bind a digest to `{tenant_id, actor_id, kind}`; idempotent for the same owner."""
        s = plain(spec)
        return answer(
            lambda: IdentityService(self._writable(), self.clock, self.ids).bind_token(
                s["tenant_id"],
                s["actor_id"],
                ActorKind(s["kind"]),
                bytes.fromhex(s["token_sha256"]),
            )
        )

    async def revoke(self, token_sha256: Any) -> dict[str, Any]:
        """Revoke a digest; `{tenant_id, actor_id}` of its owner, or `resource_not_found`."""

        def run() -> dict[str, str]:
            store = self._open(create=False)
            digest = bytes.fromhex(str(token_sha256))
            binding = None if store is None else store.read(lambda tx: tx.get_token(digest))
            if store is None or binding is None:
                raise fail(ErrorCode.RESOURCE_NOT_FOUND, "no such token")
            IdentityService(store, self.clock, self.ids).revoke_token(digest)
            return {"tenant_id": binding.tenant_id, "actor_id": binding.actor_id}

        return answer(run)

    async def import_tokens(self, spec: Any) -> dict[str, Any]:
        """Imported bindings (active or revoked): `{tenant_id, records}` with the actor and
        token records of this shard's digests; another owner is `identity_mismatch`."""
        return self._import_identity(spec, epochs=False)

    async def check_import(self, spec: Any) -> dict[str, Any]:
        """Refuse imported digests that another tenant or actor owns."""
        return self._check_in_store(spec, _owned_elsewhere)

    async def delete_tenant(self, tenant_id: Any) -> dict[str, Any]:
        """Remove the tenant's bindings (and its tenant and actor rows) from this shard."""
        return answer(lambda: delete_rows(self._open(create=False), str(tenant_id)))


def _owned_elsewhere(s: dict[str, Any], tx: Any) -> None:
    """`identity_mismatch` when an imported digest is bound to another tenant or actor."""
    owners = {
        bytes.fromhex(r["token_sha256"]): r["actor_id"]
        for r in s["records"]
        if r["type"] == "token"
    }
    for digest, actor_id in owners.items():
        owner = tx.get_token(digest)
        if owner is not None and (owner.tenant_id, owner.actor_id) != (s["tenant_id"], actor_id):
            raise fail(ErrorCode.IDENTITY_MISMATCH, "a token digest belongs to another actor")
