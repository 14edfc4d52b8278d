"""One project's rows in the export format, both ways (SPEC.md ARC-1, ARC-3).

- `project_lines` reads a project's resources, changes, receipts and audit rows as export
  lines, in keyset pages (`ReadTx.list_resources(after=...)`, `list_changes`,
  `list_receipts(after_seq=...)`, `list_audit(after_seq=...)`), so a caller that consumes the
  lines as they come (the edge's project object stages them page by page) never holds more
  than one read of rows. Called inside one `store.read`, the pages are one consistent view.
- `resource_row` ... `audit_row` turn an import's records back into the store's rows, and
  `search_doc`, `handoff_row` and `derived_rows` rebuild the derived index rows from them
  (an import never trusts index rows from a file: ARC-3). They raise `KeyError`,
  `ValueError` or `TypeError` on a malformed record; callers report that as
  `invalid_command`.

Stdlib and the domain only, so every front (origin, edge, Pyodide) shares it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from aidememo.domain.canonical import canonical_bytes, decode_stored
from aidememo.domain.model import (
    AuditRow,
    ChangeOp,
    ChangeRecord,
    HandoffIndexRow,
    Project,
    Receipt,
    ResourceRef,
    SearchDoc,
    StoredResource,
)
from aidememo.domain.tokenize import index_terms
from aidememo.ports import ReadTx

# Rows per read of the tables with bodies (resources, changes). A body is at most about 1 MiB
# (the request limit), so a caller that must bound its memory passes fewer.
READ_ROWS = 1_000
# Rows per read of receipts and audit rows: ids and names only, well under 1 KiB a row.
SMALL_READ_ROWS = 1_000


def line(record: dict[str, Any]) -> bytes:
    """One export line: the record in canonical JSON and a newline."""
    return canonical_bytes(record) + b"\n"


def _body(raw: bytes | None) -> Any:
    return None if raw is None else decode_stored(raw)


def project_lines(
    tx: ReadTx, p: Project, *, read_rows: int = READ_ROWS
) -> Iterator[tuple[str, bytes]]:
    """One project's rows as `(type, line)`: resources, changes, receipts, audit; each table
    read `read_rows` rows at a time (receipts and audit `SMALL_READ_ROWS`)."""
    scope, pid, rows, small = p.scope, p.project_id, read_rows, SMALL_READ_ROWS
    for r in _keyset(lambda after: tx.list_resources(scope, rows, after), None, rows, _ref):
        record = {
            "type": "resource",
            "project_id": pid,
            "kind": r.ref.kind,
            "id": r.ref.id,
            "revision": r.revision,
            "body": _body(r.body),
        }
        yield "resource", line(record)
    for c in _keyset(lambda after: tx.list_changes(scope, after, rows), 0, rows, _seq):
        record = {
            "type": "change",
            "project_id": pid,
            "seq": c.seq,
            "kind": c.ref.kind,
            "id": c.ref.id,
            "operation": c.op,
            "revision": c.revision,
            "actor_id": c.actor_id,
            "committed_at_ms": c.committed_at_ms,
            "body": _body(c.body),
        }
        yield "change", line(record)
    for rc in _keyset(lambda after: tx.list_receipts(scope, after, small), 0, small, _project_seq):
        record = {
            "type": "receipt",
            "project_id": pid,
            "command_id": rc.command_id,
            "fingerprint": rc.fingerprint,
            "actor_id": rc.actor_id,
            "seq": rc.project_seq,
            "kind": rc.resource.kind,
            "id": rc.resource.id,
            "revision": rc.revision,
            "committed_at_ms": rc.committed_at_ms,
        }
        yield "receipt", line(record)
    for a in _keyset(lambda after: tx.list_audit(scope, after, small), 0, small, _project_seq):
        record = {
            "type": "audit",
            "project_id": pid,
            "seq": a.project_seq,
            "command_id": a.command_id,
            "operation": a.operation,
            "kind": a.ref.kind,
            "id": a.ref.id,
            "actor_id": a.actor_id,
            "committed_at_ms": a.committed_at_ms,
        }
        yield "audit", line(record)


def _keyset(
    read: Callable[[Any], Sequence[Any]], first: Any, rows: int, key: Callable[[Any], Any]
) -> Iterator[Any]:
    """Every row of a table read `rows` at a time: `read(after)` answers the rows after the
    key `after` (`first` to start) in key order, `key(row)` is a row's key; a short page is
    the last."""
    after = first
    while True:
        page = read(after)
        yield from page
        if len(page) < rows:
            return
        after = key(page[-1])


def _ref(row: StoredResource) -> ResourceRef:
    return row.ref


def _seq(row: ChangeRecord) -> int:
    return row.seq


def _project_seq(row: Receipt | AuditRow) -> int:
    return row.project_seq


# -- records back into rows ---------------------------------------------------------------


def stored_body(record: dict[str, Any]) -> bytes | None:
    """A record's `body` as the canonical bytes a store keeps (None for a tombstone)."""
    return None if record["body"] is None else canonical_bytes(record["body"])


def resource_row(r: dict[str, Any]) -> StoredResource:
    """A `resource` record as the resource's current state."""
    return StoredResource(ResourceRef(r["kind"], r["id"]), r["revision"], stored_body(r))


def change_row(c: dict[str, Any], epoch: str) -> ChangeRecord:
    """A `change` record as a change of the project's new `epoch`."""
    return ChangeRecord(
        c["seq"],
        epoch,
        ResourceRef(c["kind"], c["id"]),
        ChangeOp(c["operation"]),
        c["revision"],
        c["actor_id"],
        c["committed_at_ms"],
        stored_body(c),
    )


def receipt_row(r: dict[str, Any], tenant_id: str, project_id: str) -> Receipt:
    """A `receipt` record as the stored receipt."""
    return Receipt(
        r["command_id"],
        r["fingerprint"],
        tenant_id,
        project_id,
        r["actor_id"],
        r["seq"],
        ResourceRef(r["kind"], r["id"]),
        r["revision"],
        r["committed_at_ms"],
    )


def audit_row(a: dict[str, Any]) -> AuditRow:
    """An `audit` record as the audit row."""
    return AuditRow(
        a["seq"],
        a["command_id"],
        a["operation"],
        ResourceRef(a["kind"], a["id"]),
        a["actor_id"],
        a["committed_at_ms"],
    )


def check_row(r: dict[str, Any]) -> None:
    """Convert a row record (`resource`, `change`, `receipt`, `audit`) as its import will, so
    a malformed one fails before anything is written; raises KeyError, ValueError or
    TypeError, which importers report as `invalid_command`."""
    kind = r["type"]
    if kind == "resource":
        resource_row(r)
    elif kind == "change":
        change_row(r, "epoch_check")
    elif kind == "receipt":
        receipt_row(r, "tenant_check", "project_check")
    elif kind == "audit":
        audit_row(r)
    else:
        raise ValueError(f"{kind!r} is not a row type")


def search_doc(r: StoredResource) -> SearchDoc | None:
    """The search index row of a current fact; None for anything else."""
    if r.ref.kind != "fact" or r.body is None:
        return None
    record = decode_stored(r.body)
    return SearchDoc(r.ref.id, record["source_id"], index_terms(record["content"]))


def handoff_row(r: StoredResource, updated_seq: int) -> HandoffIndexRow | None:
    """The mailbox index row of a current handoff whose last change is `updated_seq`; None for
    anything else."""
    if r.ref.kind != "handoff" or r.body is None:
        return None
    record = decode_stored(r.body)
    return HandoffIndexRow(
        r.ref.id,
        record["from_actor"],
        record["to_actor"],
        record["source_id"],
        record["status"],
        r.revision,
        updated_seq,
    )


def derived_rows(
    resources: Iterable[StoredResource], changes: Iterable[ChangeRecord]
) -> tuple[list[HandoffIndexRow], list[SearchDoc]]:
    """Rebuild the mailbox and search index rows of a whole project from its canonical rows
    (ARC-3): a handoff's `updated_seq` is the sequence of its last change."""
    last_seq = {c.ref: c.seq for c in changes}
    handoffs: list[HandoffIndexRow] = []
    search: list[SearchDoc] = []
    for r in resources:
        handoff = handoff_row(r, last_seq.get(r.ref, 0))
        if handoff is not None:
            handoffs.append(handoff)
        doc = search_doc(r)
        if doc is not None:
            search.append(doc)
    return handoffs, search
