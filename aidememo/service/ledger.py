"""The command pipeline (SPEC.md CMD-*): one command, one transaction, one receipt.

Order inside the write transaction: lock the project, check membership, then the receipt
(an identical replay returns the stored receipt; anything else reusing the command id is
`command_conflict`), then the secret screen (SEC-3: the caller scanned the written texts
before the transaction and passes what it found), then the operation's own checks (`decide`),
then one write of resource, change, audit row and receipt with a compare-and-swap of the
project head.

A generic put or delete (`execute_raw`) is one guarded write on every store
(`Store.execute_raw`): the store writes only when its guard holds on the rows it read with the
project locked (`RawWrite.admits`: an active writer, no receipt, the expected revision), and
returns those rows either way; PostgreSQL does that in one statement. The checks below then
run on the rows, the same checks in the same order as the generic pipeline (`_admit`,
`check_raw`), so they alone name the error or the replay; a guard that disagrees with them is
a store's bug, answered `storage_failure`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from aidememo.domain.canonical import canonical_bytes, fingerprint_of_payload
from aidememo.domain.envelope import Command
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.model import (
    ChangeOp,
    CommandStart,
    HandoffIndexRow,
    Mutation,
    Project,
    RawOutcome,
    RawWrite,
    Receipt,
    Role,
    Scope,
    SearchDoc,
    StoredResource,
)
from aidememo.domain.secrets import SecretFinding, find_in_json
from aidememo.ports import Clock, Store, WriteTx
from aidememo.service.access import Caller, check_access


@dataclass(frozen=True, slots=True)
class Decision:
    """What an operation decided to write; the pipeline adds revision, sequence and time."""

    op: ChangeOp
    body: bytes | None
    handoff: HandoffIndexRow | None = None  # revision and updated_seq are filled in
    search: SearchDoc | None = None

    def mutation(self, receipt: Receipt, project_epoch: str, operation: str) -> Mutation:
        """The writes of the command `receipt` answers: this decision, with its handoff index
        row at the receipt's revision and sequence."""
        handoff = self.handoff
        if handoff is not None:
            handoff = replace(handoff, revision=receipt.revision, updated_seq=receipt.project_seq)
        return Mutation(receipt, project_epoch, operation, self.op, self.body, handoff, self.search)


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


def check_raw(command: Command, current: StoredResource | None) -> None:
    """A generic put's or delete's own checks (REV-2, REV-3)."""
    check_expected_revision(current, command.expected_revision)
    if command.change is ChangeOp.DELETE and current is None:
        raise fail(ErrorCode.RESOURCE_NOT_FOUND, "cannot delete a resource never written")


def _admit(
    caller: Caller, command: Command, fp: str, start: CommandStart
) -> tuple[Project, Receipt | None]:
    """Membership (AUTH-3..5), then the receipt (CMD-3), on the rows read with the project
    locked: the project and the stored receipt of an identical replay, or an error."""
    project = check_access(start.project, start.membership, write=True)
    stored = start.receipt
    if stored is not None:
        if (
            stored.actor_id == caller.actor_id
            and stored.fingerprint == fp
            and stored.resource == command.resource
        ):
            return project, stored
        raise fail(ErrorCode.COMMAND_CONFLICT, "command_id was used for another command")
    return project, None


def command_fingerprint(command: Command, payload_bytes: bytes | None = None) -> str:
    """The command's fingerprint (CJ-2); `payload_bytes`, when given, must be the payload's
    canonical bytes (a write's body), so the payload is not encoded twice."""
    return fingerprint_of_payload(
        project_id=command.project_id,
        expected_revision=command.expected_revision,
        operation=command.operation,
        resource_kind=command.resource.kind,
        resource_id=command.resource.id,
        change=command.change.value,
        payload_bytes=canonical_bytes(command.payload) if payload_bytes is None else payload_bytes,
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

    def execute(
        self,
        caller: Caller,
        command: Command,
        decide: Decide,
        *,
        fp: str | None = None,
        secret: SecretFinding | None = None,
    ) -> Receipt:
        """Run one command through the pipeline and return its receipt (CMD-3 .. CMD-6);
        `fp` is the command's fingerprint when the caller computed it already; `secret` is
        the first secret found in the command's written texts, refused after membership and
        receipt replay (SEC-3, SEC-4)."""
        if fp is None:
            fp = command_fingerprint(command)
        call = caller.command_call(command.project_id, command.command_id, command.resource)
        scope = call.scope

        committed = False

        def run(tx: WriteTx) -> Receipt:
            nonlocal committed
            committed = False
            # A cached caller's binding is checked in the same statement (AUTH-7).
            start = tx.begin_command(call)
            project, stored = _admit(caller, command, fp, start)
            if stored is not None:
                return stored.as_replay()
            if secret is not None:
                raise secret.error()
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
            tx.commit_mutation(decision.mutation(receipt, project.project_epoch, command.operation))
            committed = True
            return receipt

        receipt = self.store.transaction(run)
        if committed:
            self.announce(scope, receipt.project_seq)
        return receipt

    def announce(self, scope: Scope, seq: int) -> None:
        """Call the `on_commit` hooks for the commit `seq` that `store.transaction` just
        returned, once it is durable (`Store.after_commit`)."""
        if self.on_commit:
            self.store.after_commit(lambda: self._hooks(scope, seq))

    def _hooks(self, scope: Scope, seq: int) -> None:
        for hook in self.on_commit:
            try:
                hook(scope, seq)
            except Exception:
                log.exception("on_commit hook failed")

    def execute_raw(self, caller: Caller, command: Command) -> Receipt:
        """A generic put or delete (`POST /v1/commands`): the store's one guarded write, then
        the pipeline's checks on the rows it read (CMD-3 .. CMD-6, REV-2, REV-3, SEC-3)."""
        upsert = command.change is ChangeOp.UPSERT
        body = canonical_bytes(command.payload) if upsert else None
        fp = command_fingerprint(command, body)
        # Every key and string of a custom.* payload is screened (SEC-1); a payload holding a
        # secret is written by no one, and refused below after membership and receipt replay.
        secret = find_in_json(command.payload, "/payload") if upsert else None
        write = RawWrite(
            call=caller.command_call(command.project_id, command.command_id, command.resource),
            fingerprint=fp,
            expected_revision=command.expected_revision,
            operation=command.operation,
            op=command.change,
            body=body,
            now_ms=self.clock.now_ms(),
            writers=() if secret is not None else WRITER_ROLES,
            must_exist=not upsert,
        )
        outcome = self.store.execute_raw(write)
        try:
            _, stored = _admit(caller, command, fp, outcome.start)
            if stored is None:
                if secret is not None:
                    raise secret.error()
                check_raw(command, outcome.start.current)
        except AidememoError as exc:
            if outcome.receipt is not None:
                raise _disagreement(f"the store wrote a command refused with {exc.code}") from exc
            raise
        return self._raw_receipt(write, outcome, stored)

    def _raw_receipt(self, write: RawWrite, outcome: RawOutcome, stored: Receipt | None) -> Receipt:
        """The answer to a raw command the checks admitted: its new receipt, or the stored one
        of a replay (a retried write's own lost commit counts as new)."""
        receipt = outcome.receipt
        if stored is not None and receipt is None:
            if not outcome.retried:
                return stored.as_replay()
            receipt = stored
        elif stored is not None or receipt is None:
            raise _disagreement("the store's guard and the checks disagree on an admitted command")
        self.announce(write.call.scope, receipt.project_seq)
        return receipt


WRITER_ROLES = tuple(role.value for role in Role if role.can_write)
"""The roles a raw command's guard lets write (AUTH-4)."""


def _disagreement(message: str) -> AidememoError:
    """A store whose guard disagrees with the checks: a bug, answered `storage_failure`."""
    log.error("raw command: %s", message)
    return fail(ErrorCode.STORAGE_FAILURE, message)
