"""Whole-tenant counting and deletion on PostgreSQL (SPEC.md ARC-4), and imported search rows.

Kept apart from the hot path: these run rarely and touch every table. The tenant's rows are
read for export by the shared `SqlReadRows` and written back by its `restore_history`.
Tenant deletion is the search postings and term frequencies (which have no foreign key), then
one `DELETE FROM tenants`: every other table hangs off the tenant through `ON DELETE CASCADE`
foreign keys (schema.py), and the counts afterwards prove it.
Imported search rows go through `aidememo_index_fact`, the same function a command uses, so
the project's index and statistics stay exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aidememo.domain.model import SearchDoc
from aidememo.stores.postgres import sql as q
from aidememo.stores.sql_common.statements import TENANT_TABLES_BUT_SEARCH

if TYPE_CHECKING:
    from aidememo.stores.postgres.tx import Session

TENANT_TABLES = (
    "fact_search",
    "fact_search_postings",
    "fact_search_terms",
    "fact_search_stats",
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


class ArchiveReads:
    """The ReadTx method of ARC-4 PostgreSQL writes its own way; expects `self._x` to be the
    transaction's session."""

    __slots__ = ()
    _x: Session

    def count_tenant_rows(self, tenant_id: str) -> dict[str, int]:
        """Row counts of every table the tenant owns."""
        row = self._x.execute(COUNT_TENANT_ROWS, (tenant_id,) * len(TENANT_TABLES))[0]
        return {table: int(n) for table, n in zip(TENANT_TABLES, row, strict=True)}


class ArchiveWrites:
    """The WriteTx methods of ARC-* PostgreSQL writes its own way."""

    __slots__ = ()
    _x: Session

    def _index_restored(self, tenant_id: str, project_id: str, doc: SearchDoc) -> None:
        """An imported search row, through the function a command's commit uses."""
        self._x.execute(
            q.INDEX_FACT, (tenant_id, project_id, doc.fact_id, doc.source_id, doc.terms)
        )

    def delete_tenant(self, tenant_id: str) -> None:
        """Delete the tenant's index rows without a foreign key, then the tenant: its
        projects, actors and everything below them cascade."""
        for statement in DELETE_UNLINKED:
            self._x.execute(statement, (tenant_id,))
        self._x.execute(DELETE_TENANT, (tenant_id,))
