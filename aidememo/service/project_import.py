"""One project's part of an import, written chunk by chunk in one transaction (SPEC.md
ARC-2, ARC-3, ARC-8).

`Archive.import_plan` writes a `Plan`, which holds every record of the import at once. A
front whose memory cannot hold a project's rows (the edge's project object has 128 MB; an
import may be 256 MiB) uses `ProjectImport` instead. It gets the project's identity records
(its `project` line with the head, its members' `actor` lines and its `membership` lines) as
records, and the rows (`resource`, `change`, `receipt`, `audit`) as pages of NDJSON text it
reads one at a time (`Pages`: the edge reads them from its staging table). `write` then, in
ONE write transaction (all or nothing, ARC-2):

1. writes the identity rows exactly as `Archive.write_plan` does (a project that exists is
   `resource_already_exists`, an actor of another kind `identity_mismatch`), the project row
   already at its head;
2. reads the pages in order; each page's records are decoded and checked as `Plan.build`
   checks them (an object of a row type, kind and id well-formed, the project's own id, the
   change log dense from 1 in order and not past the head) and written with one
   `restore_history` call per page, search index rows rebuilt from the page's facts;
3. refuses a change log that stops before the head (`invalid_command`, as `Plan.build`);
4. rebuilds the mailbox index (ARC-3): a handoff's row is its current resource with the
   sequence of its last change. Each page's handoff changes upsert the rows of the
   resources already written, pages in order, so the last write of a row has its last
   change; if a `resource` record came after a `change` record (not the export's order, but
   `Plan.build` accepts it), the pages holding handoff changes are read once more at the end.

Memory: one page's records and rows, never the project's. Every failure raises and the
transaction rolls back, so nothing of the project is left. The result equals
`Archive.import_plan` of the same records.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from aidememo.domain.canonical import decode_json
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id, validate_name
from aidememo.domain.model import (
    AuditRow,
    ChangeRecord,
    HandoffIndexRow,
    History,
    Project,
    Receipt,
    ResourceRef,
    SearchDoc,
    StoredResource,
)
from aidememo.ports import WriteTx
from aidememo.service.archive_plan import Plan, PlanWriter
from aidememo.service.archive_rows import (
    audit_row,
    change_row,
    handoff_row,
    receipt_row,
    resource_row,
    search_doc,
)

ROW_TYPES = frozenset({"resource", "change", "receipt", "audit"})
HANDOFF_KIND = "handoff"


class Pages(Protocol):
    """A project's staged rows: `len(pages)` pages, `pages[n]` page `n` as text or UTF-8
    bytes (whole NDJSON lines); each page is read when asked for, so it may be read more
    than once."""

    def __len__(self) -> int: ...

    def __getitem__(self, number: int, /) -> str | bytes: ...


def page_records(page: str | bytes) -> Iterator[dict[str, Any]]:
    """The records of one page: every non-empty line decoded (`invalid_command` if one is not
    JSON, or not an object of a row type). Lines end at `\\n` only."""
    for raw in _lines(page):
        record = decode_json(raw, "a staged import line")
        if not isinstance(record, dict) or record.get("type") not in ROW_TYPES:
            raise fail(
                ErrorCode.INVALID_COMMAND,
                "an import page holds resource, change, receipt and audit records only",
            )
        yield record


def _lines(page: str | bytes) -> Iterator[str | bytes]:
    """The non-empty lines of a page, one at a time (no list of them all)."""
    start, end = 0, len(page)
    while start < end:
        stop = page.find(b"\n" if isinstance(page, bytes) else "\n", start)  # type: ignore[arg-type]
        stop = end if stop < 0 else stop
        if stop > start:
            yield page[start:stop]
        start = stop + 1


@dataclass
class Chunk:
    """One page's rows, checked, ready for `restore_history`."""

    resources: list[StoredResource] = field(default_factory=list)
    changes: list[ChangeRecord] = field(default_factory=list)
    receipts: list[Receipt] = field(default_factory=list)
    audit: list[AuditRow] = field(default_factory=list)
    search: list[SearchDoc] = field(default_factory=list)
    # handoff id -> the sequence of its last change in this page
    handoff_changes: dict[str, int] = field(default_factory=dict)

    def history(self) -> History:
        """The page as a `History` without mailbox rows (those need the whole log)."""
        return History(self.resources, self.changes, self.receipts, self.audit, [], self.search)


class ProjectImport:
    """Import one project's rows, page by page, into a scope that does not exist yet."""

    def __init__(
        self,
        archive: PlanWriter,
        tenant_id: str,
        project_id: str,
        epoch: str,
        identity: list[dict[str, Any]],
    ) -> None:
        """`identity`: the project's `project`, `actor` and `membership` records (checked
        here as `Plan.build` checks them); `epoch`: the project's new epoch."""
        self.archive = archive
        tenant_id = validate_id(tenant_id, "tenant_id")
        project_id = validate_id(project_id, "project_id")
        epoch = validate_id(epoch, "project_epoch")
        self.plan = Plan.build(tenant_id, identity, history=False)
        if list(self.plan.projects) != [project_id]:
            raise fail(ErrorCode.INVALID_COMMAND, "an import names another project")
        self.rows = ProjectRows(tenant_id, project_id, epoch, self.plan.projects[project_id])
        self.head = self.rows.head

    def write(self, pages: Pages) -> int:
        """Check and write the identity and every page in one transaction; the head."""
        self.archive.store.transaction(lambda tx: self.write_in(tx, pages))
        return self.head

    def write_in(self, tx: WriteTx, pages: Pages) -> None:
        """`write` inside the caller's transaction `tx` (which must roll back on an error)."""
        epochs = {self.rows.project_id: self.rows.epoch}
        self.archive.write_plan(tx, self.plan, epochs, history=False)
        self.rows.write_in(tx, pages)


class ProjectRows:
    """Steps 2 to 4 of an import: one project's pages written into its new scope, whose
    project row (at its head) the caller's transaction wrote already."""

    def __init__(self, tenant_id: str, project_id: str, epoch: str, head: int) -> None:
        self.tenant_id = tenant_id
        self.project_id = project_id
        self.epoch = epoch
        self.head = head

    def write_in(self, tx: WriteTx, pages: Pages) -> None:
        """Check and write every page inside the caller's transaction `tx`."""
        project = Project(self.tenant_id, self.project_id, self.epoch, self.head)
        next_seq = 1
        changes_seen = resources_after_changes = False
        handoff_pages: list[int] = []
        for number in range(len(pages)):
            chunk, next_seq = self.read_chunk(pages[number], next_seq)
            resources_after_changes |= changes_seen and bool(chunk.resources)
            changes_seen |= bool(chunk.changes)
            tx.restore_history(project, chunk.history())
            if chunk.handoff_changes:
                handoff_pages.append(number)
                self._mailbox(tx, project, chunk.handoff_changes)
            del chunk  # written: not held while the next page is read
        if next_seq != self.head + 1:
            raise self._not_dense()
        if resources_after_changes:  # a handoff may have been written after its changes
            for number in handoff_pages:
                self._mailbox(tx, project, self._handoff_changes(pages[number]))

    def read_chunk(self, text: str | bytes, next_seq: int) -> tuple[Chunk, int]:
        """The checked rows of one page whose first change must be `next_seq`, and the
        sequence the next page's first change must have."""
        chunk = Chunk()
        try:
            for r in page_records(text):
                kind = r["type"]
                validate_name(r["kind"], "kind")
                validate_id(r["id"], "id")
                if validate_id(r["project_id"], "project_id") != self.project_id:
                    raise fail(ErrorCode.INVALID_COMMAND, "an import page names another project")
                if kind == "resource":
                    resource = resource_row(r)
                    chunk.resources.append(resource)
                    doc = search_doc(resource)
                    if doc is not None:
                        chunk.search.append(doc)
                elif kind == "change":
                    if r["seq"] != next_seq or next_seq > self.head:
                        raise self._not_dense()
                    change = change_row(r, self.epoch)
                    chunk.changes.append(change)
                    if change.ref.kind == HANDOFF_KIND:
                        chunk.handoff_changes[change.ref.id] = change.seq
                    next_seq += 1
                elif kind == "receipt":
                    chunk.receipts.append(receipt_row(r, self.tenant_id, self.project_id))
                else:
                    chunk.audit.append(audit_row(r))
        except (KeyError, ValueError, TypeError) as exc:
            raise fail(ErrorCode.INVALID_COMMAND, f"malformed export record: {exc}") from None
        return chunk, next_seq

    def _not_dense(self) -> Exception:
        return fail(
            ErrorCode.INVALID_COMMAND,
            f"project {self.project_id} history is not dense 1..{self.head}",
        )

    @staticmethod
    def _handoff_changes(text: str | bytes) -> dict[str, int]:
        """handoff id -> the sequence of its last change in a page already checked."""
        last: dict[str, int] = {}
        for r in page_records(text):
            if r["type"] == "change" and r["kind"] == HANDOFF_KIND:
                last[r["id"]] = r["seq"]
        return last

    def _mailbox(self, tx: WriteTx, project: Project, last_seq: dict[str, int]) -> None:
        """Upsert the mailbox rows of these handoffs from their resources written so far."""
        rows: list[HandoffIndexRow] = []
        try:
            for handoff_id, seq in last_seq.items():
                current = tx.get_resource(project.scope, ResourceRef(HANDOFF_KIND, handoff_id))
                row = None if current is None else handoff_row(current, seq)
                if row is not None:
                    rows.append(row)
        except (KeyError, ValueError, TypeError) as exc:
            raise fail(ErrorCode.INVALID_COMMAND, f"malformed handoff record: {exc}") from None
        if rows:
            tx.restore_history(project, History([], [], [], [], rows, []))
