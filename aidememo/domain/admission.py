"""The command checks on the rows read with the project locked, in CMD-5's order, as verdicts.

A command is checked against the project, the caller's membership (AUTH-3..5), the command id's
receipt (CMD-3), the secret screen's finding (SEC-3) and the resource's current revision (REV-2,
REV-3), in that order; the first check that does not pass is the `Verdict`. `refusal` is the one
place a verdict becomes an error (code and message). The generic pipeline, every store's
guarded write of a raw command (`RawWrite`) and the readers' access check all decide here.

PostgreSQL's guarded write runs inside the database (`aidememo_raw_verdict`, in
`aidememo/stores/postgres/schema.py`), so it holds a copy of `raw_verdict` in SQL and answers
the verdict's value; tests/stores/test_postgres_raw_verdict.py runs every combination of the
rows through both and requires the same verdict.
"""

from __future__ import annotations

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.model import (
    ChangeOp,
    CommandStart,
    Membership,
    Project,
    RawWrite,
    Receipt,
    ResourceRef,
    Role,
    Verdict,
)
from aidememo.domain.secrets import SecretFinding

WRITER_ROLES = tuple(role.value for role in Role if role.can_write)
"""The roles that write (AUTH-4), as the guarded write on PostgreSQL receives them."""

_REFUSALS: dict[Verdict, tuple[ErrorCode, str]] = {
    Verdict.NO_MEMBERSHIP: (ErrorCode.PROJECT_UNAUTHORIZED, "no active membership in this project"),
    Verdict.READ_ONLY: (ErrorCode.PROJECT_UNAUTHORIZED, "this member may not write"),
    Verdict.COMMAND_CONFLICT: (
        ErrorCode.COMMAND_CONFLICT,
        "command_id was used for another command",
    ),
    Verdict.NOT_FOUND: (ErrorCode.RESOURCE_NOT_FOUND, "resource not found"),
    Verdict.STALE_REVISION: (
        ErrorCode.STALE_REVISION,
        "expected revision {expected}, current revision is {current}",
    ),
    Verdict.DELETE_MISSING: (
        ErrorCode.RESOURCE_NOT_FOUND,
        "cannot delete a resource never written",
    ),
}
"""Each refusing verdict's error code and message (the secret's is the finding's own, SEC-3)."""


def access_verdict(
    project: Project | None, membership: Membership | None, *, write: bool
) -> Verdict:
    """The membership checks (AUTH-3..5): readers, suspended members and strangers that write
    are refused alike, so a caller learns nothing of projects it cannot use."""
    if project is None or membership is None or not membership.active:
        return Verdict.NO_MEMBERSHIP
    if write and not membership.role.can_write:
        return Verdict.READ_ONLY
    return Verdict.ADMITTED


def receipt_verdict(
    stored: Receipt | None, actor_id: str, fingerprint: str, resource: ResourceRef
) -> Verdict:
    """The receipt check (CMD-3): the same actor, fingerprint and resource replay it; any
    other reuse of the command id conflicts."""
    if stored is None:
        return Verdict.ADMITTED
    if (
        stored.actor_id == actor_id
        and stored.fingerprint == fingerprint
        and stored.resource == resource
    ):
        return Verdict.REPLAY
    return Verdict.COMMAND_CONFLICT


def revision_verdict(current: int | None, expected: int | None, *, delete: bool) -> Verdict:
    """The revision checks on the current revision (None: never written): an expected revision
    must be the current one (REV-2), and a delete needs something to delete (REV-3)."""
    if expected is not None:
        if current is None:
            return Verdict.NOT_FOUND
        if current != expected:
            return Verdict.STALE_REVISION
    if delete and current is None:
        return Verdict.DELETE_MISSING
    return Verdict.ADMITTED


def command_verdict(
    start: CommandStart, actor_id: str, fingerprint: str, resource: ResourceRef
) -> Verdict:
    """The checks every command runs first (AUTH-3..5, then CMD-3) on the rows of
    `WriteTx.begin_command`."""
    verdict = access_verdict(start.project, start.membership, write=True)
    if verdict is not Verdict.ADMITTED:
        return verdict
    return receipt_verdict(start.receipt, actor_id, fingerprint, resource)


def raw_verdict(write: RawWrite, start: CommandStart) -> Verdict:
    """Every check of a generic put or delete, in CMD-5's order, on the rows its guarded write
    read with the project locked; only `ADMITTED` writes."""
    call = write.call
    verdict = command_verdict(start, call.actor_id, write.fingerprint, call.resource)
    if verdict is not Verdict.ADMITTED:
        return verdict
    if write.secret is not None:
        return Verdict.SECRET
    current = None if start.current is None else start.current.revision
    return revision_verdict(current, write.expected_revision, delete=write.op is ChangeOp.DELETE)


def refusal(
    verdict: Verdict,
    *,
    expected: int | None = None,
    current: int | None = None,
    secret: SecretFinding | None = None,
) -> AidememoError:
    """The error of a refusing verdict: `expected` and `current` are the revisions a stale one
    names, `secret` the finding a `SECRET` one reports. A verdict without its error (a store
    answering `ADMITTED` or `REPLAY` without a receipt, or `SECRET` for a command without a
    finding) is `storage_failure`."""
    if verdict is Verdict.SECRET and secret is not None:
        return secret.error()
    found = _REFUSALS.get(verdict)
    if found is None:
        return fail(ErrorCode.STORAGE_FAILURE, f"the store answered {verdict} out of turn")
    code, message = found
    return fail(code, message.format(expected=expected, current=current))
