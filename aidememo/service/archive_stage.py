"""An import read once, line by line, its verified rows staged in the store (SPEC.md ARC-2,
ARC-6, ARC-9).

An import can be 256 MiB (ADM-4), several times that as Python objects, so
`Archive.import_lines` never holds it: `StagedImport.run` consumes its lines once, lazily.

1. Each line goes through `ExportReader` (header first, identity records before rows, every
   byte hashed for the manifest). The identity records are kept (they are small); when the
   first row arrives they are checked as `Plan.build` checks them (`history=False`).
2. Each row is checked as `Plan.build` checks it (`Plan.row_project`: kind, id, conversions,
   a declared project; each project's change log counted dense from 1) and its line joins the
   current page of its project; a page of about `PAGE_BYTES` is written to the store's
   staging table (`WriteTx.stage_import_page`, `aidememo_import_staging`, outside the tenant
   data) in a short transaction of its own, and let go. What stays in Python memory is one
   page, the identity records and a few counters per project.
3. A refusal found while reading is kept, not raised, and nothing more is staged; the rest of
   the lines are still hashed, so the manifest is verified first (ARC-2) and the answer is
   the same error, with the same message, as when the whole file was read before any check.
4. After the manifest, the refusal if any, then each project's change log dense 1..head.
5. Only then, in ONE write transaction: `Archive.write_plan` of the identity records (a
   project that exists is `resource_already_exists`, an actor of another kind or a token of
   another actor `identity_mismatch`), each project's staged pages read back one at a time
   and written (`project_import.ProjectRows`, which rebuilds the index rows, ARC-3), and the
   stage dropped with the commit.

Any failure drops the stage (its own transaction, best effort); a stage a crash left behind is
dropped by the next import that writes (its first page, or its final transaction) once it is
older than `STAGE_TTL_MS`, so an import refused before it staged anything writes nothing.
Nothing is written to tenant data before the whole archive verified, and the outcome equals
that of `Plan.build` and `Archive.import_plan` over the whole file.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.ports import ReadTx, WriteTx
from aidememo.service.archive_bodies import BODY_TYPE, BodyImport
from aidememo.service.archive_plan import ImportSummary, Plan, PlanWriter, malformed
from aidememo.service.archive_verify import ROW_TYPES, ExportReader
from aidememo.service.project_import import ProjectRows

log = logging.getLogger("aidememo.archive")

# A page is written once its lines reach this many bytes (a longer line is a page alone).
PAGE_BYTES = 1024 * 1024
# A stage older than this belongs to an import that died; the next import drops it.
STAGE_TTL_MS = 6 * 60 * 60 * 1000


class StagedPages:
    """One project's staged pages as `project_import.Pages`, read in the caller's `tx`."""

    def __init__(self, tx: ReadTx, import_id: str, project_id: str, count: int) -> None:
        self.tx = tx
        self.import_id = import_id
        self.project_id = project_id
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, number: int) -> bytes:
        page = self.tx.staged_import_page(self.import_id, self.project_id, number)
        if page is None:
            raise fail(ErrorCode.STORAGE_FAILURE, "a staged import page is gone")
        return page


class StagedImport:
    """One import in flight: identity records kept, rows staged page by page."""

    def __init__(self, archive: PlanWriter) -> None:
        self.archive = archive
        self.store = archive.store
        self.import_id = archive.ids.new_id("import")
        self.started_at_ms = archive.clock.now_ms()
        self.reader = ExportReader()
        self.tenant_id = ""
        self.identity: list[dict[str, Any]] = []
        self.plan: Plan | None = None
        self.refusal: AidememoError | None = None  # the first, raised after the manifest
        self.pages: dict[str, int] = {}  # project -> pages staged
        self.next_seq: dict[str, int] = {}  # project -> the change sequence expected next
        self.not_dense: set[str] = set()
        self.page: list[bytes] = []
        self.page_project = ""
        self.page_bytes = 0
        self.swept = False  # the stages a crash left behind
        self.body_store: str | None = None  # the export's body-store identity (ART-8)
        self.bodies_checked = False
        self.with_bodies = False  # the export carries its bodies (ART-12)
        self.body_import = BodyImport(self.store, archive.bodies, self.started_at_ms)

    def run(self, lines: Iterable[bytes]) -> ImportSummary:
        """Read, check and stage every line, then write everything in one transaction."""
        try:
            for data in lines:
                self.feed(data)
            return self.finish()
        except BaseException:
            self.abort()
            raise

    def feed(self, data: bytes) -> None:
        """Read, check and stage one line (a front whose lines are awaited pushes them here,
        then calls `finish`, or `abort` when it gives up)."""
        checked = self.reader.feed(data)
        if checked is not None and self.refusal is None:
            self._add(*checked)

    def abort(self) -> None:
        """Drop what is staged; the import's own error is the answer, this is cleanup."""
        self._drop()

    def finish(self) -> ImportSummary:
        """After the last line: verify the manifest, then write everything in one transaction."""
        reader = self.reader
        tenant_id = reader.finish()
        if self.refusal is not None:
            raise self.refusal
        plan = self._identity_plan()
        if self.refusal is not None:
            raise self.refusal
        self.body_import.finish()
        self._flush()
        for pid, head in plan.projects.items():
            if pid in self.not_dense or self.next_seq.get(pid, 1) != head + 1:
                raise fail(
                    ErrorCode.INVALID_COMMAND, f"project {pid} history is not dense 1..{head}"
                )
        epochs = {pid: self.archive.ids.new_id("epoch") for pid in plan.projects}
        self.store.transaction(lambda tx: self._write(tx, plan, epochs))
        self.pages.clear()  # the commit dropped the stage
        return ImportSummary(tenant_id, epochs, reader.record_counts())

    # -- reading --------------------------------------------------------------------------

    def _add(self, record: dict[str, Any], data: bytes) -> None:
        kind = record["type"]
        if kind == "header":
            self.tenant_id = record["tenant_id"]
            found = record.get("body_store")
            self.body_store = found if isinstance(found, str) else None
            self.with_bodies = record.get("bodies") is True
        elif kind == BODY_TYPE:
            try:
                self.body_import.add(record)
            except AidememoError as exc:
                self._refuse(exc)
        elif kind not in ROW_TYPES:  # identity records come before every row (ARC-6)
            self.identity.append(record)
        else:
            plan = self._identity_plan()
            artifact = kind == "resource" and record.get("kind") == "artifact"
            if (
                artifact
                and self.refusal is None
                and not self.bodies_checked
                and not self.with_bodies
            ):
                self.bodies_checked = True
                self._check_bodies()
            if self.refusal is None:
                self._row(plan, record, data)

    def _check_bodies(self) -> None:
        """An artifact's body lives in the exporting body store: an import into a catalog
        pinned to another is refused, since the bodies do not come with it (ART-8)."""
        here = self.store.read(lambda tx: tx.body_store_identity())
        if here is not None and here != self.body_store:
            self._refuse(
                fail(
                    ErrorCode.IDENTITY_MISMATCH,
                    f"the export's artifact bodies are in body store {self.body_store!r}, this"
                    f" catalog's are in {here!r}: the bodies do not come with the export",
                )
            )

    def _identity_plan(self) -> Plan:
        """The identity records, checked once they are complete (a refusal is kept)."""
        if self.plan is None:
            try:
                self.plan = Plan.build(self.tenant_id, self.identity, history=False)
            except AidememoError as exc:
                self._refuse(exc)
                self.plan = Plan(self.tenant_id, {}, [], [], [], {})
        return self.plan

    def _row(self, plan: Plan, record: dict[str, Any], data: bytes) -> None:
        try:
            pid = plan.row_project(record)
        except (KeyError, ValueError, TypeError) as exc:
            self._refuse(malformed(exc))
            return
        except AidememoError as exc:
            self._refuse(exc)
            return
        if record["type"] == "change":
            expected = self.next_seq.get(pid, 1)
            if record["seq"] != expected:
                self.not_dense.add(pid)
            self.next_seq[pid] = expected + 1
        if self.page and (pid != self.page_project or self.page_bytes + len(data) > PAGE_BYTES):
            self._flush()
        self.page.append(data)
        self.page_project = pid
        self.page_bytes += len(data)

    def _refuse(self, exc: AidememoError) -> None:
        """Keep the first refusal; stage nothing more (the manifest is still verified)."""
        self.refusal = exc
        self.page, self.page_bytes = [], 0

    def _flush(self) -> None:
        """Stage the current page in a transaction of its own, and let it go."""
        if not self.page:
            return
        pid, body = self.page_project, b"".join(self.page)
        self.page, self.page_bytes = [], 0
        seq = self.pages.get(pid, 0)
        import_id, at = self.import_id, self.started_at_ms

        def stage(tx: WriteTx) -> None:
            self._sweep(tx)
            tx.stage_import_page(import_id, pid, seq, body, at)

        self.store.transaction(stage)
        self.pages[pid] = seq + 1

    def _sweep(self, tx: WriteTx) -> None:
        """With this import's first write: drop the stages older than `STAGE_TTL_MS`."""
        if not self.swept:
            tx.drop_import_stages_before(self.started_at_ms - STAGE_TTL_MS)
            self.swept = True

    # -- writing --------------------------------------------------------------------------

    def _write(self, tx: WriteTx, plan: Plan, epochs: dict[str, str]) -> None:
        """Identity, then each project's staged pages, then the stage dropped: one transaction."""
        self._sweep(tx)
        self.archive.write_plan(tx, plan, epochs, history=False)
        for pid, head in plan.projects.items():
            rows = ProjectRows(plan.tenant_id, pid, epochs[pid], head)
            rows.write_in(tx, StagedPages(tx, self.import_id, pid, self.pages.get(pid, 0)))
        tx.drop_import_stage(self.import_id)

    def _drop(self) -> None:
        """Drop what is staged; the import's own error is the answer, this is cleanup."""
        if not self.pages:
            return
        try:
            self.store.transaction(lambda tx: tx.drop_import_stage(self.import_id))
        except Exception:
            log.warning("dropping the staged import %s failed", self.import_id, exc_info=True)
