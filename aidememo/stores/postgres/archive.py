"""Whole-tenant counting and deletion on PostgreSQL (SPEC.md ARC-4), and imported search rows.

Kept apart from the hot path: these run rarely and touch every table. The tenant's rows are
read for export by the shared `SqlReadRows` and written back by its `restore_history`.
Tenant deletion is the search postings and term frequencies (which have no foreign key), then
one `DELETE FROM tenants`: every other table hangs off the tenant through `ON DELETE CASCADE`
foreign keys (schema.py), and the counts afterwards prove it.
Imported search rows go through `aidememo_index_facts`, which writes the rows
`aidememo_index_fact` (a command's) would, set-wise, so the project's index and statistics
stay exact.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from aidememo.domain.model import SearchDoc
from aidememo.stores.postgres import sql as q
from aidememo.stores.sql_common.rows import RowExecutor
from aidememo.stores.sql_common.semantic_rows import SEMANTIC_TABLES
from aidememo.stores.sql_common.statements import TENANT_TABLES_BUT_SEARCH

# One `aidememo_index_facts` call indexes at most this many facts or bytes of terms, so each
# statement stays well inside the statement timeout.
INDEX_BATCH_FACTS = 2_000
INDEX_BATCH_BYTES = 1 << 20
TENANT_TABLES = (
    "fact_search",
    "fact_search_postings",
    "fact_search_terms",
    "fact_search_stats",
    *SEMANTIC_TABLES,
    *TENANT_TABLES_BUT_SEARCH,
)
# One statement, one round trip: a count per table.
COUNT_TENANT_ROWS = "SELECT " + ", ".join(
    f"(SELECT count(*) FROM {table} WHERE tenant_id = %s)" for table in TENANT_TABLES
)
# The index tables without a foreign key go first; everything else cascades from the tenant.
DELETE_UNLINKED = (
    "DELETE FROM fact_search_postings WHERE tenant_id = %s",
    "DELETE FROM fact_search_terms WHERE tenant_id = %s",
)
DELETE_TENANT = "DELETE FROM tenants WHERE tenant_id = %s"


X = TypeVar("X", bound=RowExecutor)


class ArchiveReads(Generic[X]):
    """The ReadTx method of ARC-4 PostgreSQL writes its own way; expects `self._x` to be the
    transaction's session."""

    __slots__ = ()
    _x: X

    def count_tenant_rows(self, tenant_id: str) -> dict[str, int]:
        """Row counts of every table the tenant owns."""
        row = self._x.execute(COUNT_TENANT_ROWS, (tenant_id,) * len(TENANT_TABLES))[0]
        return {table: int(n) for table, n in zip(TENANT_TABLES, row, strict=True)}


class ArchiveWrites(Generic[X]):
    """The WriteTx methods of ARC-* PostgreSQL writes its own way."""

    __slots__ = ()
    _x: X

    def _index_restored(self, tenant_id: str, project_id: str, docs: list[SearchDoc]) -> None:
        """Imported search rows, set-wise through `aidememo_index_facts` in batches of at most
        `INDEX_BATCH_FACTS` facts or `INDEX_BATCH_BYTES` of terms (the same rows
        `aidememo_index_fact` writes)."""
        start = 0
        while start < len(docs):
            end, size = start, 0
            while end < len(docs) and (
                end == start or (size < INDEX_BATCH_BYTES and end - start < INDEX_BATCH_FACTS)
            ):
                size += len(docs[end].terms) + 1
                end += 1
            batch = docs[start:end]
            self._x.execute(
                q.INDEX_FACTS,
                (
                    tenant_id,
                    project_id,
                    "\n".join(d.fact_id for d in batch),
                    "\n".join(d.source_id for d in batch),
                    "\n".join(d.terms for d in batch),
                ),
            )
            start = end

    def delete_tenant(self, tenant_id: str) -> None:
        """Delete the tenant's index rows without a foreign key, then the tenant: its
        projects, actors and everything below them cascade."""
        for statement in DELETE_UNLINKED:
            self._x.execute(statement, (tenant_id,))
        self._x.execute(DELETE_TENANT, (tenant_id,))
