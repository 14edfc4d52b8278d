"""The command pipeline (SPEC.md CMD-*): one command, one transaction, one receipt.

Order inside the write transaction: lock the project, check membership, then the receipt
(an identical replay returns the stored receipt; anything else reusing the command id is
`command_conflict`), then the operation's own checks (`decide`), then one write of resource,
change, audit row and receipt with a compare-and-swap of the project head.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from aidememo.domain.canonical import canonical_bytes, fingerprint
from aidememo.domain.envelope import Command
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.model import (
    ChangeOp,
    HandoffIndexRow,
    Mutation,
    Project,
    Receipt,
    Scope,
    SearchDoc,
    StoredResource,
)
from aidememo.ports import Clock, Store, WriteTx
from aidememo.service.access import Caller, check_access


@dataclass(frozen=True, slots=True)
class Decision:
    """What an operation decided to write; the pipeline adds revision, sequence and time."""

    op: ChangeOp
    body: bytes | None
    handoff: HandoffIndexRow | None = None  # revision and updated_seq are filled in
    search: SearchDoc | None = None


log = logging.getLogger("aidememo.ledger")

OnCommit = Callable[[Scope, int], None]
"""`on_commit(scope, seq)`: called after a new commit is durable (live feed, LIVE-2)."""

Decide = Callable[[WriteTx, Project, StoredResource | None, int], Decision]
"""`decide(tx, project, current, now_ms)` runs the operation's checks inside the transaction."""


def check_expected_revision(current: StoredResource | None, expected: int | None) -> None:
    """The revision check (REV-2): a missing resource is `resource_not_found`, another
    revision is `stale_revision`; no expectation means an unconditional write."""
    if expected is None:
        return
    if current is None:
        raise fail(ErrorCode.RESOURCE_NOT_FOUND, "resource not found")
    if current.revision != expected:
        raise fail(
            ErrorCode.STALE_REVISION,
            f"expected revision {expected}, current revision is {current.revision}",
        )


def command_fingerprint(command: Command) -> str:
    """The command's fingerprint (CJ-2)."""
    return fingerprint(
        project_id=command.project_id,
        expected_revision=command.expected_revision,
        operation=command.operation,
        resource_kind=command.resource.kind,
        resource_id=command.resource.id,
        change=command.change.value,
        payload=command.payload,
    )


class Ledger:
    """Executes commands against the canonical store."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        # Called with (scope, seq) after `store.transaction` returned a new commit, i.e. once
        # it is durable; never for a receipt replay or a rolled-back command. A hook must be
        # quick and must not raise (it is logged and ignored: the commit stands).
        self.on_commit: list[OnCommit] = []

    def execute(self, caller: Caller, command: Command, decide: Decide) -> Receipt:
        """Run one command through the pipeline and return its receipt (CMD-3 .. CMD-6)."""
        fp = command_fingerprint(command)
        scope = caller.scope(command.project_id)

        committed = False

        def run(tx: WriteTx) -> Receipt:
            nonlocal committed
            committed = False
            start = tx.begin_command(scope, caller.actor_id, command.command_id, command.resource)
            project = check_access(start.project, start.membership, write=True)
            stored = start.receipt
            if stored is not None:
                if (
                    stored.actor_id == caller.actor_id
                    and stored.fingerprint == fp
                    and stored.resource == command.resource
                ):
                    return stored
                raise fail(ErrorCode.COMMAND_CONFLICT, "command_id was used for another command")
            current = start.current
            now = self.clock.now_ms()
            decision = decide(tx, project, current, now)
            revision = 1 if current is None else current.revision + 1
            receipt = Receipt(
                command_id=command.command_id,
                fingerprint=fp,
                tenant_id=scope.tenant_id,
                project_id=scope.project_id,
                actor_id=caller.actor_id,
                project_seq=project.head_seq + 1,
                resource=command.resource,
                revision=revision,
                committed_at_ms=now,
            )
            handoff = decision.handoff
            if handoff is not None:
                handoff = replace(handoff, revision=revision, updated_seq=receipt.project_seq)
            tx.commit_mutation(
                Mutation(
                    receipt=receipt,
                    project_epoch=project.project_epoch,
                    operation=command.operation,
                    op=decision.op,
                    body=decision.body,
                    handoff=handoff,
                    search=decision.search,
                )
            )
            committed = True
            return receipt

        receipt = self.store.transaction(run)
        if committed and self.on_commit:
            for hook in self.on_commit:
                try:
                    hook(scope, receipt.project_seq)
                except Exception:
                    log.exception("on_commit hook failed")
        return receipt

    def execute_raw(self, caller: Caller, command: Command) -> Receipt:
        """A generic put or delete (`POST /v1/commands`): revision check, then write."""
        body = canonical_bytes(command.payload) if command.change is ChangeOp.UPSERT else None

        def decide(
            tx: WriteTx, project: Project, current: StoredResource | None, now: int
        ) -> Decision:
            check_expected_revision(current, command.expected_revision)
            if command.change is ChangeOp.DELETE and current is None:
                raise fail(ErrorCode.RESOURCE_NOT_FOUND, "cannot delete a resource never written")
            return Decision(command.change, body)

        return self.execute(caller, command, decide)
