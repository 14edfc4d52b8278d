"""Tenants, projects, actors, memberships and tokens (SPEC.md AUTH-*, BOOT-*).

Bootstrap is idempotent and fails closed: a retry reuses the stored epoch, and a conflicting
epoch, actor kind, role or token owner is refused with no change at all, because everything
happens in one transaction.

`authenticate_cached` keeps, per process, the digest -> (tenant, actor) answers it looked up.
A binding's owner never changes and revocation is final (AUTH-6), so a cached answer can only
become revoked (or its tenant or actor deleted), never point at someone else while its binding
row stands; the cached `Caller` carries its digest, and the transaction of the request re-checks
that binding in the statement that reads the membership (AUTH-7, `ReadTx.get_access`,
`WriteTx.begin_command`). A revocation therefore takes effect on the next request in every
process sharing the store, and needs no invalidation message; `forget` drops an entry the
re-check refused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.domain.limits import TOKEN_DIGEST_BYTES
from aidememo.domain.model import (
    Actor,
    ActorKind,
    Membership,
    MemberStatus,
    Project,
    Role,
    Scope,
    TokenBinding,
)
from aidememo.ports import Clock, Ids, Store, WriteTx
from aidememo.service.access import Caller

TOKEN_CACHE_MAX = 10_000
"""Digests `authenticate_cached` keeps per process before it starts over."""


def token_digest(token_text: str) -> bytes:
    """SHA-256 of a token's text; only this digest is ever stored (AUTH-1)."""
    return hashlib.sha256(token_text.encode("utf-8")).digest()


def check_digest(token_sha256: bytes) -> None:
    """A token digest is exactly 32 bytes (IDENT-9)."""
    if len(token_sha256) != TOKEN_DIGEST_BYTES:
        raise fail(ErrorCode.INVALID_COMMAND, "token digest must be 32 bytes")


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """What a bootstrap left in place."""

    project: Project
    membership: Membership


class IdentityService:
    """Provisioning and authentication."""

    def __init__(self, store: Store, clock: Clock, ids: Ids) -> None:
        self.store = store
        self.clock = clock
        self.ids = ids
        self._callers: dict[bytes, Caller] = {}

    # -- provisioning ---------------------------------------------------------------------

    def bootstrap_project(
        self, tenant_id: str, project_id: str, project_epoch: str | None = None
    ) -> Project:
        """Create the tenant and project if missing; a retry reuses the stored epoch."""
        return self.store.transaction(
            lambda tx: self._ensure_project(tx, tenant_id, project_id, project_epoch)
        )

    def provision_member(
        self,
        tenant_id: str,
        project_id: str,
        actor_id: str,
        *,
        kind: ActorKind = ActorKind.AGENT,
        role: Role = Role.WRITER,
        token_sha256: bytes | None = None,
    ) -> Membership:
        """Create the actor, its membership and a token binding, or confirm they exist."""

        def run(tx: WriteTx) -> Membership:
            project = tx.get_project(Scope(tenant_id, project_id))
            if project is None:
                raise fail(ErrorCode.PROJECT_UNAUTHORIZED, "project does not exist")
            return self._ensure_member(tx, project, actor_id, kind, role, token_sha256)

        return self.store.transaction(run)

    def bootstrap(
        self,
        *,
        tenant_id: str,
        project_id: str,
        actor_id: str,
        kind: ActorKind = ActorKind.AGENT,
        role: Role = Role.WRITER,
        project_epoch: str | None = None,
        token_sha256: bytes | None = None,
    ) -> BootstrapResult:
        """Project and member in one transaction: all of it happens, or none (BOOT-1)."""

        def run(tx: WriteTx) -> BootstrapResult:
            project = self._ensure_project(tx, tenant_id, project_id, project_epoch)
            member = self._ensure_member(tx, project, actor_id, kind, role, token_sha256)
            return BootstrapResult(project, member)

        return self.store.transaction(run)

    def set_membership(
        self,
        tenant_id: str,
        project_id: str,
        actor_id: str,
        *,
        role: Role | None = None,
        status: MemberStatus | None = None,
    ) -> Membership:
        """Change an existing member's role or status (AUTH-5)."""

        def run(tx: WriteTx) -> Membership:
            current = tx.get_membership(Scope(tenant_id, project_id), actor_id)
            if current is None:
                raise fail(ErrorCode.RESOURCE_NOT_FOUND, "no such member")
            updated = Membership(
                tenant_id,
                project_id,
                actor_id,
                current.role if role is None else role,
                current.status if status is None else status,
            )
            tx.put_membership(updated, self.clock.now_ms())
            return updated

        return self.store.transaction(run)

    def bind_token(
        self, tenant_id: str, actor_id: str, kind: ActorKind, token_sha256: bytes
    ) -> None:
        """Record tenant, actor and an active token binding, or confirm they exist; the
        bootstrap rules apply (another owner or a revoked binding is `identity_mismatch`).

        The edge's token directory keeps only these rows, apart from any project.
        """

        def run(tx: WriteTx) -> None:
            now = self.clock.now_ms()
            if not tx.tenant_exists(tenant_id):
                tx.insert_tenant(tenant_id, now)
            actor = tx.get_actor(tenant_id, actor_id)
            if actor is None:
                tx.insert_actor(Actor(tenant_id, actor_id, kind), now)
            elif actor.kind is not kind:
                raise fail(ErrorCode.IDENTITY_MISMATCH, f"actor exists with kind {actor.kind}")
            self._ensure_token(tx, tenant_id, actor_id, token_sha256, now)

        self.store.transaction(run)

    def check_token_owner(self, tenant_id: str, actor_id: str, token_sha256: bytes) -> None:
        """Refuse, as `bind_token` would, a digest bound to another actor or revoked."""
        check_digest(token_sha256)
        binding = self.store.read(lambda tx: tx.get_token(token_sha256))
        if binding is None:
            return
        if (binding.tenant_id, binding.actor_id) != (tenant_id, actor_id):
            raise fail(ErrorCode.IDENTITY_MISMATCH, "token belongs to another actor")
        if not binding.active:
            raise fail(ErrorCode.IDENTITY_MISMATCH, "token was revoked; create a new one")

    def revoke_token(self, token_sha256: bytes) -> bool:
        """Revoke a token; True if it was bound. Revocation is final (AUTH-6)."""
        check_digest(token_sha256)

        def run(tx: WriteTx) -> bool:
            if tx.get_token(token_sha256) is None:
                return False
            tx.set_token_active(token_sha256, False)
            return True

        revoked = self.store.transaction(run)
        self.forget(token_sha256)  # this process's cache; every other one re-checks (AUTH-7)
        return revoked

    # -- authentication -------------------------------------------------------------------

    def authenticate(self, token_sha256: bytes) -> Caller:
        """Resolve a token digest to tenant and actor, or raise `authentication_failed`."""
        check_digest(token_sha256)

        binding = self.store.read(lambda tx: tx.authenticate_token(token_sha256))
        if binding is None:  # unknown, revoked, or its tenant or actor is gone
            raise fail(ErrorCode.AUTHENTICATION_FAILED, "unknown or revoked token")
        return Caller(binding.tenant_id, binding.actor_id)

    def authenticate_cached(self, token_sha256: bytes) -> Caller:
        """`authenticate` through this process's cache: the caller carries its digest, so the
        transaction it is used in checks the binding still holds (AUTH-7). Only for callers
        every use of which runs such a transaction (`aidememo.service.access`)."""
        caller = self._callers.get(token_sha256)
        if caller is not None:
            return caller
        found = self.authenticate(token_sha256)
        caller = Caller(found.tenant_id, found.actor_id, token_sha256)
        if len(self._callers) >= TOKEN_CACHE_MAX:
            self._callers.clear()  # rare: a bound, not a policy; the next lookups refill it
        self._callers[token_sha256] = caller
        return caller

    def forget(self, token_sha256: bytes) -> None:
        """Drop a digest from this process's token cache."""
        self._callers.pop(token_sha256, None)

    def membership(self, caller: Caller, project_id: str) -> Membership | None:
        """The caller's membership in a project, whatever its status."""
        return self.store.read(
            lambda tx: tx.get_membership(caller.scope(project_id), caller.actor_id)
        )

    # -- shared steps ---------------------------------------------------------------------

    def _ensure_project(
        self, tx: WriteTx, tenant_id: str, project_id: str, project_epoch: str | None
    ) -> Project:
        validate_id(tenant_id, "tenant_id")
        validate_id(project_id, "project_id")
        if project_epoch is not None:
            validate_id(project_epoch, "project_epoch")
        now = self.clock.now_ms()
        if not tx.tenant_exists(tenant_id):
            tx.insert_tenant(tenant_id, now)
        existing = tx.get_project(Scope(tenant_id, project_id))
        if existing is not None:
            if project_epoch is not None and project_epoch != existing.project_epoch:
                raise fail(ErrorCode.IDENTITY_MISMATCH, "project exists with another epoch")
            return existing
        project = Project(tenant_id, project_id, project_epoch or self.ids.new_id("epoch"), 0)
        tx.insert_project(project, now)
        return project

    def _ensure_member(
        self,
        tx: WriteTx,
        project: Project,
        actor_id: str,
        kind: ActorKind,
        role: Role,
        token_sha256: bytes | None,
    ) -> Membership:
        validate_id(actor_id, "actor_id")
        now = self.clock.now_ms()
        tenant_id = project.tenant_id
        actor = tx.get_actor(tenant_id, actor_id)
        if actor is None:
            tx.insert_actor(Actor(tenant_id, actor_id, kind), now)
        elif actor.kind is not kind:
            raise fail(ErrorCode.IDENTITY_MISMATCH, f"actor exists with kind {actor.kind}")
        scope = project.scope
        membership = tx.get_membership(scope, actor_id)
        if membership is None:
            membership = Membership(
                tenant_id, project.project_id, actor_id, role, MemberStatus.ACTIVE
            )
            tx.put_membership(membership, now)
        elif membership.role is not role:
            raise fail(ErrorCode.IDENTITY_MISMATCH, f"member exists with role {membership.role}")
        if token_sha256 is not None:
            self._ensure_token(tx, tenant_id, actor_id, token_sha256, now)
        return membership

    @staticmethod
    def _ensure_token(
        tx: WriteTx, tenant_id: str, actor_id: str, token_sha256: bytes, now: int
    ) -> None:
        check_digest(token_sha256)
        binding = tx.get_token(token_sha256)
        if binding is None:
            tx.insert_token(TokenBinding(token_sha256, tenant_id, actor_id, True, now))
            return
        if (binding.tenant_id, binding.actor_id) != (tenant_id, actor_id):
            raise fail(ErrorCode.IDENTITY_MISMATCH, "token belongs to another actor")
        if not binding.active:
            raise fail(ErrorCode.IDENTITY_MISMATCH, "token was revoked; create a new one")
