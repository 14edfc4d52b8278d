"""Whole-tenant counting and deletion on SQLite (SPEC.md ARC-4), and imported search rows.

Kept apart from the hot-path store code: these run rarely and touch every table. The tenant's
rows are read for export by the shared `SqlReadRows` and written back by its
`restore_history`; mixed into the store's transaction classes.
"""

from __future__ import annotations

from typing import Any

from aidememo.domain.model import SearchDoc
from aidememo.stores.sql_common.statements import TENANT_TABLES_BUT_SEARCH
from aidememo.stores.sqlite import sql as q
from aidememo.stores.sqlite.executor import SqlExecutor

# Child tables first, so foreign keys hold at every step of a deletion.
TENANT_TABLES = ("fact_search_keys", *TENANT_TABLES_BUT_SEARCH)
COUNT = {table: f"SELECT count(*) FROM {table} WHERE tenant_id = ?" for table in TENANT_TABLES}
DELETE = {table: f"DELETE FROM {table} WHERE tenant_id = ?" for table in TENANT_TABLES}
# FTS5 UNINDEXED columns cannot be filtered through an index; its rows go by their key rows.
COUNT_SEARCH = "SELECT count(*) FROM fact_search WHERE tenant_id = ?"
DELETE_SEARCH = (
    "DELETE FROM fact_search WHERE rowid IN "
    "(SELECT doc_rowid FROM fact_search_keys WHERE tenant_id = ?)"
)


class ArchiveReads:
    """The ReadTx method of ARC-4 SQLite answers its own way; expects `self._x` to be the
    executor."""

    __slots__ = ()
    _x: SqlExecutor

    def _count(self, sql: str, tenant_id: str) -> int:
        rows: list[Any] = self._x.execute(sql, (tenant_id,))
        return int(rows[0][0])

    def count_tenant_rows(self, tenant_id: str) -> dict[str, int]:
        """Row counts of every table the tenant owns."""
        counts = {table: self._count(COUNT[table], tenant_id) for table in TENANT_TABLES}
        counts["fact_search"] = self._count(COUNT_SEARCH, tenant_id)
        return counts


class ArchiveWrites:
    """The WriteTx methods of ARC-* SQLite writes its own way."""

    __slots__ = ()
    _x: SqlExecutor

    def _index_restored(self, tenant_id: str, project_id: str, doc: SearchDoc) -> None:
        """An imported search row: its stable FTS rowid, then the FTS row (new, so nothing
        to delete first)."""
        x = self._x
        rowid = x.execute(q.SEARCH_KEY, (tenant_id, project_id, doc.fact_id))[0][0]
        x.execute(
            q.SEARCH_INSERT, (rowid, doc.terms, tenant_id, project_id, doc.fact_id, doc.source_id)
        )

    def delete_tenant(self, tenant_id: str) -> None:
        """Delete every row of the tenant, children first."""
        self._x.execute(DELETE_SEARCH, (tenant_id,))
        for table in TENANT_TABLES:
            self._x.execute(DELETE[table], (tenant_id,))
