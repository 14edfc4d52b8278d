"""The command pipeline (SPEC.md CMD-*): one command, one transaction, one receipt.

Order inside the write transaction: lock the project, check membership, then the receipt
(an identical replay returns the stored receipt; anything else reusing the command id is
`command_conflict`), then the secret screen (SEC-3: the caller scanned the written texts
before the transaction and passes what it found), then the operation's own checks (`decide`),
then one write of resource, change, audit row and receipt with a compare-and-swap of the
project head.

The checks are the domain's (`aidememo.domain.admission`): each answers a verdict, and
`refusal` names a refusing verdict's error. A generic put or delete (`execute_raw`) is one
guarded write on every store (`Store.execute_raw`): the store runs every check on the rows it
reads with the project locked, writes only when they admit the command, and answers their
verdict, from which the error or the replay is named here without checking again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from aidememo.domain.admission import command_verdict, refusal, revision_verdict
from aidememo.domain.canonical import canonical_bytes, fingerprint_of_payload
from aidememo.domain.envelope import Command
from aidememo.domain.model import (
    ChangeOp,
    HandoffIndexRow,
    Mutation,
    Project,
    RawWrite,
    Receipt,
    Scope,
    SearchDoc,
    StoredResource,
    Verdict,
)
from aidememo.domain.secrets import SecretFinding, find_in_json
from aidememo.ports import Clock, Store, WriteTx
from aidememo.service.access import Caller


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
    _check_revision(current, expected, delete=False)


def check_raw(command: Command, current: StoredResource | None) -> None:
    """A generic put's or delete's own checks (REV-2, REV-3)."""
    _check_revision(current, command.expected_revision, delete=command.change is ChangeOp.DELETE)


def _check_revision(current: StoredResource | None, expected: int | None, *, delete: bool) -> None:
    revision = None if current is None else current.revision
    verdict = revision_verdict(revision, expected, delete=delete)
    if verdict is not Verdict.ADMITTED:
        raise refusal(verdict, expected=expected, current=revision)


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
            verdict = command_verdict(start, caller.actor_id, fp, command.resource)
            if verdict is Verdict.REPLAY and start.receipt is not None:
                return start.receipt.as_replay()
            project = start.project
            if verdict is not Verdict.ADMITTED or project is None:
                raise refusal(verdict)
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
        """A generic put or delete (`POST /v1/commands`): the store's one guarded write, whose
        verdict on the rows it read names the answer (CMD-3 .. CMD-6, REV-2, REV-3, SEC-3)."""
        upsert = command.change is ChangeOp.UPSERT
        body = canonical_bytes(command.payload) if upsert else None
        # Every key and string of a custom.* payload is screened (SEC-1); a payload holding a
        # secret is written by no one, and refused after membership and receipt replay.
        write = RawWrite(
            call=caller.command_call(command.project_id, command.command_id, command.resource),
            fingerprint=command_fingerprint(command, body),
            expected_revision=command.expected_revision,
            operation=command.operation,
            op=command.change,
            body=body,
            now_ms=self.clock.now_ms(),
            secret=find_in_json(command.payload, "/payload") if upsert else None,
        )
        outcome = self.store.execute_raw(write)
        receipt = outcome.receipt
        if receipt is None:
            raise refusal(
                outcome.verdict,
                expected=write.expected_revision,
                current=outcome.current_revision,
                secret=write.secret,
            )
        # A retried write's replay may be its own first attempt's commit: answered as new.
        if outcome.verdict is Verdict.REPLAY and not outcome.retried:
            return receipt.as_replay()
        self.announce(write.call.scope, receipt.project_seq)
        return receipt
