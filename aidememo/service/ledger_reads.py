"""Read paths: exact resource, change feeds and the paged snapshot (SPEC.md FEED-*, SNAP-*).

Each query runs inside one read view of the store, so the membership check, the cursor
check and the rows it returns all come from one consistent state; a snapshot page is one
read view too, and the pages after the first are the state at the first page's sequence
(`aidememo.service.snapshot_pages`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TypeVar

from aidememo.domain.clock import SystemClock
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.limits import (
    CHANGES_LIMIT_DEFAULT,
    CHANGES_LIMIT_MAX,
    SNAPSHOT_LIMIT_DEFAULT,
    SNAPSHOT_LIMIT_MAX,
    SNAPSHOT_TOKEN_TTL_MS,
)
from aidememo.domain.model import (
    ChangeRecord,
    Membership,
    Project,
    ResourceRef,
    Scope,
    StoredResource,
)
from aidememo.domain.page_token import sign, verify
from aidememo.domain.visibility import PARTICIPANT_KINDS, visible_to
from aidememo.ports import Clock, ReadTx, Store
from aidememo.service.access import Caller, authorize, check_access
from aidememo.service.snapshot_pages import read_page

R = TypeVar("R", ChangeRecord, StoredResource)


@dataclass(frozen=True, slots=True)
class ChangePage:
    """One page of the change feed after a cursor, already filtered for the caller.

    `next_after_seq` advances over hidden entries too, so a page may be empty while
    `has_more` is true (FEED-4).
    """

    scope: Scope
    project_epoch: str
    after_seq: int
    records: list[ChangeRecord]
    next_after_seq: int
    has_more: bool


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One page of the resources the caller may see, at exactly `at_seq` (SNAP-1, SNAP-2);
    `next_page_token` is None on the last page."""

    scope: Scope
    project_epoch: str
    at_seq: int
    resources: list[StoredResource]
    next_page_token: str | None = None


@dataclass(frozen=True, slots=True)
class IdentityView:
    """Who the caller is in a project."""

    tenant_id: str
    project_id: str
    project_epoch: str
    actor_id: str
    role: str

    def to_json(self) -> dict[str, str]:
        """Wire shape of `GET /identity`: the fields in order."""
        return asdict(self)


def check_cursor(project: Project, project_epoch: str, after_seq: int) -> None:
    """Fail closed on a cursor from another history or ahead of the head (FEED-2, FEED-3)."""
    if project_epoch != project.project_epoch:
        raise fail(ErrorCode.CURSOR_EPOCH_MISMATCH, "cursor epoch does not match the project")
    if after_seq < 0 or after_seq > project.head_seq:
        raise fail(ErrorCode.CURSOR_OUT_OF_RANGE, "cursor is beyond the project head")


def check_change_limit(limit: int) -> None:
    """A change page holds 1 to 10,000 entries (FEED-5)."""
    if not 1 <= limit <= CHANGES_LIMIT_MAX:
        raise fail(
            ErrorCode.INVALID_CHANGE_BATCH, f"limit must be an integer 1-{CHANGES_LIMIT_MAX}"
        )


class LedgerReads:
    """Read-only use cases."""

    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock or SystemClock()

    def identity(self, caller: Caller, project_id: str) -> IdentityView:
        """The caller's identity and role in the project."""

        def run(tx: ReadTx) -> tuple[Project, Membership]:
            return authorize(tx, caller, project_id, write=False)

        project, membership = self.store.read(run)
        return IdentityView(
            caller.tenant_id, project_id, project.project_epoch, caller.actor_id, membership.role
        )

    def resource(self, caller: Caller, project_id: str, ref: ResourceRef) -> StoredResource:
        """The exact current state of a resource; hidden records are not found (VIS-1)."""

        def run(tx: ReadTx) -> StoredResource | None:
            # the access check and the row in one statement (READS-5); the row is only
            # looked at once the access holds
            project, membership, found = tx.get_access_resource(
                caller.scope(project_id), caller.actor_id, caller.token_sha256, ref
            )
            check_access(project, membership, write=False)
            return found

        found = self.store.read(run)
        if found is None or not visible_to(ref.kind, found.body, caller.actor_id):
            raise fail(ErrorCode.RESOURCE_NOT_FOUND, "resource not found")
        return found

    def changes(
        self,
        caller: Caller,
        project_id: str,
        project_epoch: str,
        after_seq: int,
        limit: int = CHANGES_LIMIT_DEFAULT,
        bodies: bool = True,
    ) -> ChangePage:
        """Change records after the cursor, filtered for the caller (FEED-1); with bodies,
        or (`bodies=False`, the metadata feed) without those visibility does not need."""
        check_change_limit(limit)
        scope = caller.scope(project_id)

        def run(tx: ReadTx) -> tuple[Project, list[ChangeRecord]]:
            project, _ = authorize(tx, caller, project_id, write=False)
            check_cursor(project, project_epoch, after_seq)
            return project, tx.list_changes(scope, after_seq, limit, bodies)

        project, rows = self.store.read(run)
        next_after = rows[-1].seq if rows else after_seq
        visible = _visible(rows, caller.actor_id)
        return ChangePage(
            scope=scope,
            project_epoch=project.project_epoch,
            after_seq=after_seq,
            records=visible,
            next_after_seq=next_after,
            has_more=next_after < project.head_seq,
        )

    def snapshot(
        self,
        caller: Caller,
        project_id: str,
        limit: int = SNAPSHOT_LIMIT_DEFAULT,
        page_token: str | None = None,
    ) -> Snapshot:
        """A page of the state at the first page's head (SNAP-1..4): without a token, the
        current state from the start, with `at_seq` the head of the same read view; with
        one, the page after the token's resource, as of its sequence."""
        if not 1 <= limit <= SNAPSHOT_LIMIT_MAX:
            raise fail(
                ErrorCode.INVALID_COMMAND, f"limit must be an integer 1-{SNAPSHOT_LIMIT_MAX}"
            )
        scope = caller.scope(project_id)
        now_ms = self.clock.now_ms()

        def run(tx: ReadTx) -> tuple[Project, bytes, int, list[StoredResource], bool]:
            project, _ = authorize(tx, caller, project_id, write=False)
            key = tx.page_token_key()
            after: ResourceRef | None = None
            at_seq = project.head_seq
            if page_token is not None:
                at_seq, after = verify(key, _binding(caller, project), page_token, now_ms)
                if at_seq > project.head_seq:  # another history under the same epoch
                    raise fail(ErrorCode.SNAPSHOT_EXPIRED, "the snapshot's history is gone")
            rows, more = read_page(tx, scope, at_seq, after, limit, project.head_seq)
            return project, key, at_seq, rows, more

        project, key, at_seq, rows, more = self.store.read(run)
        token = None
        if more:
            expires = now_ms + SNAPSHOT_TOKEN_TTL_MS
            token = sign(key, _binding(caller, project), at_seq, rows[-1].ref, expires)
        visible = _visible(rows, caller.actor_id)
        return Snapshot(scope, project.project_epoch, at_seq, visible, token)


def _binding(caller: Caller, project: Project) -> tuple[str, str, str, str]:
    """What a page token is bound to (SNAP-3): tenant, project, epoch and actor."""
    return (caller.tenant_id, project.project_id, project.project_epoch, caller.actor_id)


def _visible(rows: list[R], actor: str) -> list[R]:
    """The rows `actor` may see (VIS-1); only participant kinds need their body decoded."""
    hidden = PARTICIPANT_KINDS
    if not any(row.ref.kind in hidden for row in rows):
        return rows
    return [
        row
        for row in rows
        if row.ref.kind not in hidden or visible_to(row.ref.kind, row.body, actor)
    ]
