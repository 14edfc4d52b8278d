"""The reference store's tables, as plain dicts: the ledger's, the artifact catalog's and the
semantic index's. `aidememo.stores.in_memory` and its two mixins read and write them."""

from __future__ import annotations

import secrets

from aidememo.domain.artifacts import GcIntent, Reservation
from aidememo.domain.model import (
    Actor,
    AuditRow,
    ChangeRecord,
    HandoffIndexRow,
    Membership,
    Project,
    Receipt,
    SearchDoc,
    StoredResource,
    TokenBinding,
)
from aidememo.domain.semantic_index import IndexState, VectorRow

Posting = tuple[str, str, int, int]


class ArtifactTables:
    """Reservations by (tenant, project, reservation id); intents by body key (no tenant
    scope, ARC-4); the pinned body-store identity."""

    def __init__(self) -> None:
        self.reservations: dict[tuple[str, str, str], Reservation] = {}
        self.intents: dict[str, GcIntent] = {}
        self.identity: dict[str, str] = {}


class SemanticTables:
    """Per project its index state; per (tenant, project, fact) its vector."""

    def __init__(self) -> None:
        self.state: dict[tuple[str, str], IndexState] = {}
        self.vectors: dict[tuple[str, str, str], VectorRow] = {}


class Tables:
    """Every table of the reference store, as dicts."""

    def __init__(self) -> None:
        self.tenants: dict[str, int] = {}
        self.projects: dict[tuple[str, str], Project] = {}
        self.actors: dict[tuple[str, str], Actor] = {}
        self.memberships: dict[tuple[str, str, str], Membership] = {}
        self.tokens: dict[bytes, TokenBinding] = {}
        self.resources: dict[tuple[str, str], dict[tuple[str, str], StoredResource]] = {}
        self.receipts: dict[tuple[str, str, str], Receipt] = {}
        self.changes: dict[tuple[str, str], list[ChangeRecord]] = {}
        self.audit: dict[tuple[str, str], list[AuditRow]] = {}
        self.handoffs: dict[tuple[str, str], dict[str, HandoffIndexRow]] = {}
        # The lexical index (SRCH-4), as the SQL stores keep it: per project, each fact's
        # (doc_seq, entry); per (tenant, project, term), the postings by doc_seq; per
        # project, (fact count, total length, last doc_seq).
        self.search: dict[tuple[str, str], dict[str, tuple[int, SearchDoc]]] = {}
        self.postings: dict[tuple[str, str, str], dict[int, Posting]] = {}
        self.search_stats: dict[tuple[str, str], tuple[int, int, int]] = {}
        # (import id, project id, page seq) -> (created_at_ms, page): staged imports (ARC-9)
        self.import_staging: dict[tuple[str, str, int], tuple[int, bytes]] = {}
        # The key of snapshot page tokens (SNAP-3), made with the store.
        self.page_token_key = secrets.token_bytes(32)
        self.artifacts = ArtifactTables()  # the artifact catalog (ART-*)
        self.semantic = SemanticTables()  # the derived semantic index (SEM-6)
