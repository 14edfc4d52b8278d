"""`Store.execute_raw` on any store's write transaction: one guarded write of a generic put or
delete, through `WriteTx.begin_command` and `WriteTx.commit_mutation`.

The in-memory and SQLite stores use it as it is; the PostgreSQL store runs the same steps in
one statement (`aidememo_execute_raw`). Nothing here decides which error a refused command
gets: the rows the guard read go back to the caller, whose checks name it
(`aidememo.service.ledger`).
"""

from __future__ import annotations

from aidememo.domain.model import Mutation, RawOutcome, RawWrite, Receipt
from aidememo.ports import Store, WriteTx


def execute_raw(store: Store, write: RawWrite) -> RawOutcome:
    """`write` in a write transaction of `store`'s (joining the one open on this thread)."""
    return store.transaction(lambda tx: write_raw(tx, write))


def write_raw(tx: WriteTx, write: RawWrite) -> RawOutcome:
    """Lock the project and read its rows; write at the next sequence and revision only when
    the guard holds on them."""
    call = write.call
    start = tx.begin_command(call)
    project, current = start.project, start.current
    if project is None or not write.admits(start):
        return RawOutcome(start)
    revision = 1 if current is None else current.revision + 1
    scope = call.scope
    receipt = Receipt(
        call.command_id, write.fingerprint, scope.tenant_id, scope.project_id, call.actor_id,
        project.head_seq + 1, call.resource, revision, write.now_ms,
    )  # fmt: skip
    tx.commit_mutation(
        Mutation(receipt, project.project_epoch, write.operation, write.op, write.body)
    )
    return RawOutcome(start, receipt)
