"""The use cases one app serves, built once over one store: what every handler is given."""

from __future__ import annotations

from collections.abc import Callable

from aidememo.ports import BodyStore, Clock, Ids, Store, VectorSearch
from aidememo.service.archive import Archive
from aidememo.service.artifacts import Artifacts
from aidememo.service.identity import IdentityService
from aidememo.service.ledger import Ledger
from aidememo.service.ledger_reads import LedgerReads
from aidememo.service.readiness import Readiness
from aidememo.service.search_modes import Searches
from aidememo.service.typed_reads import TypedReads
from aidememo.service.typed_writes import TypedWrites


class Services:
    """The use cases one app serves, built once over one store."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        ids: Ids,
        lease_ms: int,
        mcp_allowed_origins: frozenset[str] = frozenset(),
        bodies: BodyStore | None = None,
        semantic: VectorSearch | None = None,
    ) -> None:
        self.store = store
        self.mcp_allowed_origins = mcp_allowed_origins  # MCP-7
        self.console_key: bytes | None = None  # the console's session cookies (CONSOLE-2)
        self.identity = IdentityService(store, clock, ids)
        self.ledger = Ledger(store, clock)
        self.ledger_reads = LedgerReads(store, clock)
        self.typed_reads = TypedReads(store, clock)
        self.searches = Searches(store, self.typed_reads, semantic)  # SEM-3
        # What `/ready` says of a semantic indexer running in this process (SEM-7).
        self.semantic_status: Callable[[], dict[str, object]] | None = None
        self.typed_writes = TypedWrites(self.ledger, lease_ms)
        self.archive = Archive(store, clock, ids)
        self.archive.grant_window_ms = int(getattr(bodies, "grant_window_ms", 0))  # GRANT-7
        self.readiness = Readiness(store)
        self.artifacts = Artifacts(store, clock, ids, self.ledger, bodies)  # ART-*
        self.archive.bodies = bodies  # exports and imports with their bodies (ART-12)
