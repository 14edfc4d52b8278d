"""A project object's staged exports and imports, in its own SQLite (SPEC.md ARC-8).

An export or import of a project moves between the Worker and the project's object in pages
of at most 1 MiB (`durable_objects.rpc.PAGE_BYTES`), over several RPC calls. What waits
between those calls lives here, in the table `aidememo_staging` of the object's SQLite
(`ctx.storage.sql`), never in Python memory: an isolate has 128 MB and a project may hold
hundreds of MiB. The object holds one page at a time.

The table:
- Its name starts with `aidememo_` like `aidememo_schema`: workerd refuses names starting
  with `_cf_` (and SQLite `sqlite_`).
- It is not part of the canonical schema (`aidememo.stores.sqlite.schema`) and not a table of
  tenant rows: it is created (`CREATE TABLE IF NOT EXISTS`) when a stage begins and dropped
  when the last stage is gone, so an object that is not exporting or importing has exactly
  the canonical tables, the schema version and migrations never see it, and neither do
  `TENANT_TABLES`, `count_tenant_rows` or a deletion's verification. A staged import is not
  yet data: its rows are copied into the canonical tables by `import_commit`.
- One row per part of a page, keyed by `(kind, stage_id, number, part)`: `number` -1 is the
  stage's own row (its spec as JSON: an export's page count, an import's `import_begin`
  spec), pages are numbered from 0 in order. A page is kept as its UTF-8 bytes (a BLOB: no
  second copy as a Python `str` while it is staged) with, for an export, its runs
  `[type, count, size]` (`rpc.iter_packed`). workerd caps a row at 2 MB, so a page is stored
  in parts of at most 1 MiB (one part, unless a single line is longer).
  Every row carries the tenant (tenant deletion drops its stages) and the time its stage
  began (the alarm drops stages older than the object's `STAGE_TTL_MS`).

Every method runs synchronously on `ctx.storage.sql` (`DoSqlExecutor`); `transaction` is the
object's `transactionSync`, the same one its store uses, so a snapshot can be read and
staged in one transaction and an import can read its pages inside the store's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from aidememo.domain.canonical import decode_stored
from aidememo.stores.sqlite.do_executor import DoSqlExecutor
from durable_objects.rpc import unpack_page

T = TypeVar("T")

TABLE = "aidememo_staging"
EXPORT = "export"
IMPORT = "import"
# The stage's own row; pages are numbered from 0.
SPEC_ROW = -1
# At most this many bytes per stored part: half of workerd's 2 MB row limit.
PART_BYTES = 1024 * 1024

CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} ("
    "kind TEXT NOT NULL CHECK (kind IN ('export', 'import')), "
    "stage_id TEXT NOT NULL, "
    "number INTEGER NOT NULL, "
    "part INTEGER NOT NULL, "
    "tenant_id TEXT NOT NULL, "
    "created_at_ms INTEGER NOT NULL, "
    "runs TEXT, "
    "body BLOB NOT NULL, "
    "PRIMARY KEY (kind, stage_id, number, part)"
    ") STRICT"
)
EXISTS = "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?"
INSERT = (
    f"INSERT INTO {TABLE} (kind, stage_id, number, part, tenant_id, created_at_ms, runs, body) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
SELECT_PAGE = (
    f"SELECT runs, body FROM {TABLE} WHERE kind = ? AND stage_id = ? AND number = ? ORDER BY part"
)
SELECT_STAGE = (
    f"SELECT tenant_id, created_at_ms FROM {TABLE} WHERE kind = ? AND stage_id = ? AND number = -1"
)
NEXT_NUMBER = f"SELECT coalesce(max(number), -1) + 1 FROM {TABLE} WHERE kind = ? AND stage_id = ?"
DELETE_STAGE = f"DELETE FROM {TABLE} WHERE kind = ? AND stage_id = ?"
DELETE_TENANT = f"DELETE FROM {TABLE} WHERE tenant_id = ?"
DELETE_OLDER = f"DELETE FROM {TABLE} WHERE created_at_ms <= ?"
EARLIEST = f"SELECT min(created_at_ms) FROM {TABLE}"
ANY_ROW = f"SELECT 1 FROM {TABLE} LIMIT 1"
DROP = f"DROP TABLE IF EXISTS {TABLE}"


def parts(data: bytes) -> list[bytes]:
    """`data` cut into parts of at most `PART_BYTES` (one part when short)."""
    if len(data) <= PART_BYTES:
        return [data]
    return [data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)]


class Staging:
    """The staging table of one object, over its `ctx.storage`."""

    def __init__(self, storage: Any) -> None:
        self.x = DoSqlExecutor(storage)
        self._exists: bool | None = None  # cached: only this object writes its storage

    def transaction(self, fn: Callable[[], T]) -> T:
        """Run `fn` in the object's `transactionSync` (nested in an open one). A rollback may
        undo a `CREATE` or `DROP` of the table, so whether it exists is read again."""
        try:
            return self.x.transaction(fn)
        except BaseException:
            self._exists = None
            raise

    # -- the table ------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the table exists (anything is staged)."""
        if self._exists is None:
            self._exists = bool(self.x.execute(EXISTS, (TABLE,)))
        return self._exists

    def _create(self) -> None:
        if not self.exists():
            self.x.execute(CREATE)
            self._exists = True

    def _drop_if_empty(self) -> None:
        if self.exists() and not self.x.execute(ANY_ROW):
            self.x.execute(DROP)
            self._exists = False

    def _write(
        self,
        kind: str,
        stage_id: str,
        number: int,
        tenant_id: str,
        created_at_ms: int,
        data: bytes,
        runs: str | None = None,
    ) -> None:
        for part, piece in enumerate(parts(data)):
            self.x.execute(
                INSERT,
                (kind, stage_id, number, part, tenant_id, created_at_ms, runs, piece),
            )

    def _read(self, kind: str, stage_id: str, number: int) -> tuple[str | None, bytes] | None:
        rows: list[Any] = self.x.execute(SELECT_PAGE, (kind, stage_id, number))
        if not rows:
            return None
        if len(rows) == 1:
            return rows[0][0], rows[0][1]
        return rows[0][0], b"".join(body for _, body in rows)

    # -- a stage --------------------------------------------------------------------------

    def begin(
        self, kind: str, stage_id: str, tenant_id: str, created_at_ms: int, spec: Any
    ) -> None:
        """Start a stage with its spec (a JSON value); a stage of that id starts over."""

        def run() -> None:
            self._create()
            self.x.execute(DELETE_STAGE, (kind, stage_id))
            self._write(kind, stage_id, SPEC_ROW, tenant_id, created_at_ms, _json(spec))

        self.transaction(run)

    def spec(self, kind: str, stage_id: str) -> Any | None:
        """The spec a stage began with, or None when it is gone."""
        if not self.exists():
            return None
        row = self._read(kind, stage_id, SPEC_ROW)
        return None if row is None else decode_stored(row[1])

    def add_page(self, kind: str, stage_id: str, data: bytes) -> int | None:
        """Append a page (bytes) to a stage; its number, or None when the stage is gone."""

        def run() -> int | None:
            if not self.exists():
                return None
            rows: list[Any] = self.x.execute(SELECT_STAGE, (kind, stage_id))
            if not rows:
                return None
            tenant_id, created_at_ms = rows[0]
            number = int(self.x.execute(NEXT_NUMBER, (kind, stage_id))[0][0] or 0)
            self._write(kind, stage_id, number, tenant_id, created_at_ms, data)
            return number

        return self.transaction(run)

    def page(self, kind: str, stage_id: str, number: int) -> tuple[Any, bytes] | None:
        """Page `number` of a stage as `(runs, data)`, or None when it is not there."""
        if number < 0 or not self.exists():
            return None
        row = self._read(kind, stage_id, number)
        if row is None:
            return None
        runs, data = row
        return (None if runs is None else decode_stored(runs)), data

    def pages(self, kind: str, stage_id: str) -> int:
        """How many pages a stage holds."""
        if not self.exists():
            return 0
        return int(self.x.execute(NEXT_NUMBER, (kind, stage_id))[0][0] or 0)

    # -- exports --------------------------------------------------------------------------

    def stage_export(
        self,
        export_id: str,
        tenant_id: str,
        created_at_ms: int,
        pages: Iterable[tuple[list[list[Any]], bytes]],
    ) -> int:
        """Write an export's packed pages (`rpc.iter_packed`) as they come; the page count.
        Call inside `transaction` together with the snapshot's read, so the stage is whole
        or absent. An export without pages stages nothing."""
        count = 0
        for number, (runs, data) in enumerate(pages):
            if number == 0:
                self._create()
                self.x.execute(DELETE_STAGE, (EXPORT, export_id))
            self._write(EXPORT, export_id, number, tenant_id, created_at_ms, data, _text(runs))
            del runs, data  # nothing of this page is held while the next one is read
            count = number + 1
        if count:
            spec = _json({"pages": count})
            self._write(EXPORT, export_id, SPEC_ROW, tenant_id, created_at_ms, spec)
        return count

    def export_page(self, export_id: str, number: int) -> tuple[list[Any], bool] | None:
        """Page `number` of a staged export as runs `[type, count, text]`, and whether it is
        the last page; None when the export or the page is gone."""
        spec = self.spec(EXPORT, export_id)
        found = self.page(EXPORT, export_id, number)
        if spec is None or found is None:
            return None
        runs, data = found
        return unpack_page(runs, data), number == int(spec["pages"]) - 1

    # -- dropping -------------------------------------------------------------------------

    def drop(self, kind: str, stage_id: str) -> None:
        """Drop a stage (nothing if it is gone)."""
        self._delete(DELETE_STAGE, (kind, stage_id))

    def drop_tenant(self, tenant_id: str) -> None:
        """Drop every stage of a tenant."""
        self._delete(DELETE_TENANT, (tenant_id,))

    def drop_older(self, cutoff_ms: int) -> None:
        """Drop every stage that began at or before `cutoff_ms`."""
        self._delete(DELETE_OLDER, (cutoff_ms,))

    def _delete(self, sql: str, params: tuple[Any, ...]) -> None:
        if not self.exists():
            return

        def run() -> None:
            self.x.execute(sql, params)
            self._drop_if_empty()

        self.transaction(run)

    def earliest(self) -> int | None:
        """When the oldest stage began, or None when nothing is staged."""
        if not self.exists():
            return None
        value = self.x.execute(EARLIEST)[0][0]
        return None if value is None else int(value)


def _text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _json(value: Any) -> bytes:
    return _text(value).encode("utf-8")


class StagedPages:
    """A staged import's pages as `project_import.Pages`: each read when asked for."""

    def __init__(self, staging: Staging, import_id: str) -> None:
        self.staging = staging
        self.import_id = import_id
        self.count = staging.pages(IMPORT, import_id)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, number: int) -> bytes:
        found = self.staging.page(IMPORT, self.import_id, number)
        if found is None:
            raise IndexError(number)
        return found[1]
