"""The 15 command-store checks, one SPEC.md rule id each (LEDGER-1 .. 15).

Each check starts from a fresh fixture and replays the prefix of the reference sequence it
needs, so every check stands alone and can be reported as its own test case.
"""

from __future__ import annotations

from aidememo.conformance.harness import (
    EPOCH,
    PROJECT,
    RESOURCE,
    Fixture,
    expect,
    expect_error,
)
from aidememo.domain.canonical import decode_stored
from aidememo.domain.errors import ErrorCode
from aidememo.domain.model import ChangeOp, Receipt


def _create(fx: Fixture) -> Receipt:
    return fx.put("command_create", "a")


def _full_sequence(fx: Fixture) -> tuple[Receipt, Receipt, Receipt]:
    """create, the failed attempts, update and delete: the reference history (seq 1..3)."""
    first = _create(fx)
    fx.put("command_create", "a")  # replay
    expect_error(ErrorCode.COMMAND_CONFLICT, lambda: fx.put("command_create", "a", caller=fx.other))
    expect_error(ErrorCode.COMMAND_CONFLICT, lambda: fx.put("command_create", "b"))
    expect_error(
        ErrorCode.STALE_REVISION,
        lambda: fx.put("command_stale", "c", expected=2, operation="fact.edit"),
    )
    update = fx.put("command_update", "d", expected=1, operation="fact.edit")
    delete = fx.delete("command_delete", expected=2)
    return first, update, delete


def initial_commit(fx: Fixture) -> None:
    receipt = _create(fx)
    expect(receipt.project_seq == 1, f"first commit has seq {receipt.project_seq}, want 1")
    expect(receipt.revision == 1, f"first write has revision {receipt.revision}, want 1")


def canonical_resource_upsert(fx: Fixture) -> None:
    _create(fx)
    found = fx.queries.resource(fx.actor, PROJECT, RESOURCE)
    expect(found.body_json() == {"fixture": "a"}, f"body is {found.body_json()!r}")


def idempotent_replay(fx: Fixture) -> None:
    first = _create(fx)
    fx.clock.advance(500)
    again = _create(fx)
    expect(again == first, f"replay returned {again} instead of {first}")


def receipt_lookup(fx: Fixture) -> None:
    first = _create(fx)
    stored = fx.store.read(lambda tx: tx.get_receipt(fx.actor.scope(PROJECT), "command_create"))
    expect(stored == first, f"stored receipt {stored} differs from {first}")


def command_actor_conflict(fx: Fixture) -> None:
    _create(fx)
    expect_error(ErrorCode.COMMAND_CONFLICT, lambda: fx.put("command_create", "a", caller=fx.other))


def command_id_conflict(fx: Fixture) -> None:
    _create(fx)
    expect_error(ErrorCode.COMMAND_CONFLICT, lambda: fx.put("command_create", "b"))


def stale_revision(fx: Fixture) -> None:
    _create(fx)
    expect_error(
        ErrorCode.STALE_REVISION,
        lambda: fx.put("command_stale", "c", expected=2, operation="fact.edit"),
    )


def compare_and_swap(fx: Fixture) -> None:
    _create(fx)
    update = fx.put("command_update", "d", expected=1, operation="fact.edit")
    expect((update.project_seq, update.revision) == (2, 2), f"update receipt {update}")
    delete = fx.delete("command_delete", expected=2)
    expect((delete.project_seq, delete.revision) == (3, 3), f"delete receipt {delete}")


def single_mutation_per_command(fx: Fixture) -> None:
    _full_sequence(fx)
    page = fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 100)
    seqs = [record.seq for record in page.records]
    expect(seqs == [1, 2, 3], f"change log holds seqs {seqs}, want [1, 2, 3]")
    audit = fx.store.read(lambda tx: tx.list_audit(fx.actor.scope(PROJECT)))
    expect(len(audit) == 3, f"audit holds {len(audit)} rows, want 3")


def delete_tombstone(fx: Fixture) -> None:
    _, _, delete = _full_sequence(fx)
    last = fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 100).records[-1]
    expect(last.op is ChangeOp.DELETE, f"last change is {last.op}")
    expect(
        (last.seq, last.revision) == (delete.project_seq, delete.revision),
        f"tombstone at seq {last.seq} revision {last.revision}",
    )


def canonical_resource_tombstone(fx: Fixture) -> None:
    _full_sequence(fx)
    found = fx.queries.resource(fx.actor, PROJECT, RESOURCE)
    expect(found.deleted and found.revision == 3, f"resource is {found}")


def revision_pinned_change_materialization(fx: Fixture) -> None:
    _full_sequence(fx)
    records = fx.queries.changes(fx.actor, PROJECT, EPOCH, 0, 100).records
    states = [(r.revision, None if r.body is None else decode_stored(r.body)) for r in records]
    want = [(1, {"fixture": "a"}), (2, {"fixture": "d"}), (3, None)]
    expect(states == want, f"materialized states {states}, want {want}")


def atomic_project_snapshot(fx: Fixture) -> None:
    _full_sequence(fx)
    snap = fx.queries.snapshot(fx.actor, PROJECT)
    expect(snap.project_epoch == EPOCH, f"snapshot epoch {snap.project_epoch}")
    expect(snap.at_seq == 3, f"snapshot at_seq {snap.at_seq}, want 3")
    expect(
        len(snap.resources) == 1 and snap.resources[0].deleted,
        f"snapshot resources {snap.resources}",
    )


def cursor_epoch_fail_closed(fx: Fixture) -> None:
    _full_sequence(fx)
    expect_error(
        ErrorCode.CURSOR_EPOCH_MISMATCH,
        lambda: fx.queries.changes(fx.actor, PROJECT, "epoch_replaced", 0, 100),
    )


def cursor_sequence_fail_closed(fx: Fixture) -> None:
    _full_sequence(fx)
    expect_error(
        ErrorCode.CURSOR_OUT_OF_RANGE, lambda: fx.queries.changes(fx.actor, PROJECT, EPOCH, 4, 100)
    )


LEDGER_CHECKS = (
    ("LEDGER-1", initial_commit),
    ("LEDGER-2", canonical_resource_upsert),
    ("LEDGER-3", idempotent_replay),
    ("LEDGER-4", receipt_lookup),
    ("LEDGER-5", command_actor_conflict),
    ("LEDGER-6", command_id_conflict),
    ("LEDGER-7", stale_revision),
    ("LEDGER-8", compare_and_swap),
    ("LEDGER-9", single_mutation_per_command),
    ("LEDGER-10", delete_tombstone),
    ("LEDGER-11", canonical_resource_tombstone),
    ("LEDGER-12", revision_pinned_change_materialization),
    ("LEDGER-13", atomic_project_snapshot),
    ("LEDGER-14", cursor_epoch_fail_closed),
    ("LEDGER-15", cursor_sequence_fail_closed),
)
