"""The use cases one app serves, built once over one store: what every handler is given.

A `Services` gets everything it and the use cases in it hold when it is built, and refuses a
write afterwards (EDGE-8): one is shared by every request its front serves (a process at the
origin, an isolate or a project object at the edge), so what varies per request is an
argument, or the front builds a `Services` for that request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from aidememo.ports import BodyStore, Clock, Ids, Store, VectorSearch
from aidememo.service.archive import Archive
from aidememo.service.artifacts import Artifacts
from aidememo.service.identity import IdentityService
from aidememo.service.ledger import Ledger
from aidememo.service.ledger_reads import LedgerReads
from aidememo.service.readiness import Readiness
from aidememo.service.search_modes import WAIT_S, Searches
from aidememo.service.typed_reads import TypedReads
from aidememo.service.typed_writes import TypedWrites

SemanticStatus = Callable[[], dict[str, object]]


class Services:
    """The use cases one app serves, built once over one store; read-only once built."""

    __slots__ = (
        "archive",
        "artifacts",
        "console_key",
        "identity",
        "ledger",
        "ledger_reads",
        "mcp_allowed_origins",
        "readiness",
        "searches",
        "semantic_status",
        "store",
        "typed_reads",
        "typed_writes",
    )

    store: Store
    mcp_allowed_origins: frozenset[str]  # MCP-7
    console_key: bytes | None  # the console's session cookies (CONSOLE-2); None: no console
    # What `/ready` says of a semantic indexer running in this process (SEM-7).
    semantic_status: SemanticStatus | None
    identity: IdentityService
    ledger: Ledger
    ledger_reads: LedgerReads
    typed_reads: TypedReads
    searches: Searches
    typed_writes: TypedWrites
    archive: Archive
    readiness: Readiness
    artifacts: Artifacts

    def __init__(
        self,
        store: Store,
        clock: Clock,
        ids: Ids,
        lease_ms: int,
        mcp_allowed_origins: frozenset[str] = frozenset(),
        bodies: BodyStore | None = None,
        semantic: VectorSearch | None = None,
        *,
        console_key: bytes | None = None,
        semantic_status: SemanticStatus | None = None,
        search_wait_s: float = WAIT_S,
    ) -> None:
        ledger = Ledger(store, clock)
        typed_reads = TypedReads(store, clock)
        built = {
            "store": store,
            "mcp_allowed_origins": mcp_allowed_origins,
            "console_key": console_key,
            "semantic_status": semantic_status,
            "identity": IdentityService(store, clock, ids),
            "ledger": ledger,
            "ledger_reads": LedgerReads(store, clock),
            "typed_reads": typed_reads,
            # SEM-3; `search_wait_s` bounds SEM-5's wait for `at_least_seq`
            "searches": Searches(store, typed_reads, semantic, search_wait_s),
            "typed_writes": TypedWrites(ledger, lease_ms),
            # exports and imports with their bodies (ART-12); deleted tenants' bodies outwait
            # the body store's longest grant (GRANT-7)
            "archive": Archive(
                store, clock, ids, bodies, int(getattr(bodies, "grant_window_ms", 0))
            ),
            "readiness": Readiness(store),
            "artifacts": Artifacts(store, clock, ids, ledger, bodies),  # ART-*
        }
        for name, value in built.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Services is read-only once built: {name} is given to Services()")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Services is read-only once built: {name} stays")
