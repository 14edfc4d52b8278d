"""Who may write under an artifact path (SPEC.md ART-13, ART-14): one check, in the core.

A path under `handoffs/<h>/` is written only by that handoff's sender and receiver, and
`branches/<actor>/` only by that actor. The check runs in the reservation's transaction, so
every front (the origin's routes, the edge's project object, MCP `artifact_write`) follows it.
A handoff that does not exist and one the caller takes no part in get the same answer, so the
refusal tells nothing about hidden handoffs.

`PathRights` also says how long a reservation of the path may live: the receiver's, while it
holds a live claim, ends no later than that claim's lease (HO-6), and the receiver may take
over a live reservation another party holds on the handoff's path (ART-14).
"""

from __future__ import annotations

from dataclasses import dataclass

from aidememo.domain.artifacts import handoff_of
from aidememo.domain.canonical import decode_stored
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.model import ResourceRef, Scope
from aidememo.domain.visibility import participants
from aidememo.ports import ReadTx

__all__ = ["PathRights", "branch_owner", "not_yours", "path_rights"]


@dataclass(frozen=True, slots=True)
class PathRights:
    """What the caller may do with a path it is allowed to write."""

    receiver: bool = False  # the caller is the receiver of the path's handoff
    lease_end_ms: int | None = None  # the end of the receiver's live claim, when it holds one

    def bounded(self, expires_at_ms: int) -> int:
        """A reservation's expiry cut to the holder's lease, when it holds one (ART-14)."""
        return expires_at_ms if self.lease_end_ms is None else min(expires_at_ms, self.lease_end_ms)


def not_yours() -> AidememoError:
    """The one answer for a path the caller may not write, whether or not its handoff exists."""
    return fail(
        ErrorCode.INVALID_ARTIFACT_PATH,
        "the path names no handoff or branch the caller may write",
    )


def branch_owner(path: str) -> str | None:
    """The actor of a `branches/<actor>/...` path, else None."""
    parts = path.split("/")
    return parts[1] if parts[0] == "branches" else None


def path_rights(tx: ReadTx, scope: Scope, actor_id: str, path: str, now_ms: int) -> PathRights:
    """The caller's rights on a valid `path`; raises `not_yours()` when it may not write it."""
    owner = branch_owner(path)
    if owner is not None:
        if owner != actor_id:
            raise not_yours()
        return PathRights()
    handoff = handoff_of(path)
    if handoff is None:
        return PathRights()
    res = tx.get_resource(scope, ResourceRef("handoff", handoff))
    body = None if res is None else res.body
    pair = participants(body)
    if pair is None or actor_id not in pair:
        raise not_yours()
    if actor_id != pair[1]:
        return PathRights()
    record = decode_stored(body) if body is not None else None
    if not isinstance(record, dict) or record.get("outcome") == "failed":
        return PathRights(receiver=True)
    lease = record.get("claim_expires_at_ms")
    live = isinstance(lease, int) and now_ms < lease
    return PathRights(
        receiver=True, lease_end_ms=lease if live and isinstance(lease, int) else None
    )
