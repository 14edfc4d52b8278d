"""Who is calling, and whether they may read or write a project (SPEC.md AUTH-*).

Membership is loaded inside the same transaction as the work it guards, on every request,
so a suspension or a role change takes effect on the very next request. A caller the origin
resolved from its per-process token cache (`IdentityService.authenticate_cached`) carries its
token digest, and the same transaction checks that binding is still active (AUTH-7), so a
revocation takes effect on the next request in every process without any cache invalidation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aidememo.domain.admission import access_verdict, refusal
from aidememo.domain.model import CommandCall, Membership, Project, ResourceRef, Scope, Verdict
from aidememo.ports import ReadTx


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated principal: tenant and actor come from the token, never the body."""

    tenant_id: str
    actor_id: str
    token_sha256: bytes | None = field(default=None, compare=False, repr=False)
    """The token digest when the binding is still to be checked in the guarded transaction
    (a caller from the token cache, AUTH-7); None when it was just looked up, or at the edge."""

    def scope(self, project_id: str) -> Scope:
        """The scope of one of this caller's projects."""
        return Scope(self.tenant_id, project_id)

    def command_call(self, project_id: str, command_id: str, resource: ResourceRef) -> CommandCall:
        """This caller's command on `resource` in one of its projects, with the token digest
        its binding is checked by (AUTH-7)."""
        scope = self.scope(project_id)
        return CommandCall(scope, self.actor_id, command_id, resource, self.token_sha256)


def check_access(project: Project | None, membership: Membership | None, *, write: bool) -> Project:
    """The membership rule on rows already loaded (AUTH-3, AUTH-4, AUTH-5)."""
    verdict = access_verdict(project, membership, write=write)
    if verdict is not Verdict.ADMITTED or project is None:
        raise refusal(verdict)
    return project


def authorize(
    tx: ReadTx, caller: Caller, project_id: str, *, write: bool
) -> tuple[Project, Membership]:
    """Return the project and the caller's active membership, or raise `project_unauthorized`.

    Non-members, suspended members and readers that write are all refused the same way, so a
    caller learns nothing about projects it cannot use (AUTH-3, AUTH-4, AUTH-5).
    """
    # A cached caller's binding is checked in the same statement (AUTH-7).
    project, membership = tx.get_access(
        caller.scope(project_id), caller.actor_id, caller.token_sha256
    )
    project = check_access(project, membership, write=write)
    assert membership is not None  # check_access refused a missing membership
    return project, membership
