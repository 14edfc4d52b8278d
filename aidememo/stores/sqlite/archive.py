"""Whole-tenant counting and deletion on SQLite (SPEC.md ARC-4), and imported search rows.

Kept apart from the hot-path store code: these run rarely and touch every table. The tenant's
rows are read for export by the shared `SqlReadRows` and written back by its
`restore_history`; mixed into the store's transaction classes.
"""

from __future__ import annotations

from typing import Any

from aidememo.domain.model import SearchDoc
from aidememo.stores.sql_common.semantic_rows import SEMANTIC_TABLES
from aidememo.stores.sql_common.statements import TENANT_TABLES_BUT_SEARCH
from aidememo.stores.sqlite.executor import SqlExecutor
from aidememo.stores.sqlite.search import index_fact
from aidememo.stores.sqlite.search_schema import FACTS, ROWID

# Child tables first, so foreign keys hold at every step of a deletion. The index's FTS5 rows
# and fact rows carry no tenant column: `delete_tenant` removes them first, by the tenant's
# facts (`_UNINDEX`).
SEARCH_TABLES = ("fact_search", "fact_search_stats", *SEMANTIC_TABLES)
_TENANT_DOCS = f"SELECT {ROWID} FROM {FACTS} WHERE d.tenant_id = ?"
_UNINDEX = (
    "INSERT INTO fact_search_fts (fact_search_fts, rowid, t) "
    f"SELECT 'delete', id, t FROM fact_search_text WHERE id IN ({_TENANT_DOCS})",
    f"DELETE FROM fact_search_text WHERE id IN ({_TENANT_DOCS})",
    f"DELETE FROM fact_search_docs WHERE id IN ({_TENANT_DOCS})",
)
TENANT_TABLES = (*SEARCH_TABLES, *TENANT_TABLES_BUT_SEARCH)
COUNT = {table: f"SELECT count(*) FROM {table} WHERE tenant_id = ?" for table in TENANT_TABLES}
DELETE = {table: f"DELETE FROM {table} WHERE tenant_id = ?" for table in TENANT_TABLES}


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
        return {table: self._count(COUNT[table], tenant_id) for table in TENANT_TABLES}


class ArchiveWrites:
    """The WriteTx methods of ARC-* SQLite writes its own way."""

    __slots__ = ()
    _x: SqlExecutor

    def _index_restored(self, tenant_id: str, project_id: str, docs: list[SearchDoc]) -> None:
        """Imported search rows, through the indexing a command's commit uses (SQLite updates
        rows in place, so fact by fact costs no more than set-wise)."""
        for doc in docs:
            index_fact(self._x, tenant_id, project_id, doc)

    def delete_tenant(self, tenant_id: str) -> None:
        """Delete every row of the tenant, its index entries and children first."""
        for statement in _UNINDEX:
            self._x.execute(statement, (tenant_id,))
        for table in TENANT_TABLES:
            self._x.execute(DELETE[table], (tenant_id,))
