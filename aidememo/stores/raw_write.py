"""`Store.execute_raw` on any store's write transaction: one guarded write of a generic put or
delete, through `WriteTx.begin_command` and `WriteTx.commit_mutation`.

The in-memory and SQLite stores use it as it is; the PostgreSQL store runs the same steps in
one statement (`aidememo_execute_raw`). The command checks are the domain's
(`aidememo.domain.admission.raw_verdict`); their verdict goes back to the caller, which names
the error of a refusal from it (`aidememo.service.ledger`).
"""

from __future__ import annotations

from aidememo.domain.admission import raw_verdict
from aidememo.domain.model import Mutation, RawOutcome, RawWrite, Receipt, Verdict
from aidememo.ports import Store, WriteTx


def execute_raw(store: Store, write: RawWrite) -> RawOutcome:
    """`write` in a write transaction of `store`'s (joining the one open on this thread)."""
    return store.transaction(lambda tx: write_raw(tx, write))


def write_raw(tx: WriteTx, write: RawWrite) -> RawOutcome:
    """Lock the project and read its rows; write at the next sequence and revision only when
    the checks admit the command on them."""
    call = write.call
    start = tx.begin_command(call)
    project, current = start.project, start.current
    revision = None if current is None else current.revision
    verdict = raw_verdict(write, start)
    if verdict is Verdict.REPLAY:
        return RawOutcome(verdict, start.receipt, revision)
    if verdict is not Verdict.ADMITTED or project is None:
        return RawOutcome(verdict, None, revision)
    scope = call.scope
    receipt = Receipt(
        call.command_id, write.fingerprint, scope.tenant_id, scope.project_id, call.actor_id,
        project.head_seq + 1, call.resource, (revision or 0) + 1, write.now_ms,
    )  # fmt: skip
    tx.commit_mutation(
        Mutation(receipt, project.project_epoch, write.operation, write.op, write.body)
    )
    return RawOutcome(verdict, receipt, revision)
