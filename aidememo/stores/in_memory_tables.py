"""The reference store's tables, as plain dicts: the ledger's, the artifact catalog's and the
semantic index's; and `JournaledView`, the transaction view's base, whose writes go through an
undo log. `aidememo.stores.in_memory` and its two mixins read and write the tables."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from aidememo.domain.artifacts import GcIntent, Reservation
from aidememo.domain.errors import ErrorCode, fail
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
_MISSING = object()


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


class JournaledView:
    """A view of the tables whose writes are journaled: each `_set`/`_pop` records its undo,
    so the store rolls a failed callback back (STORE-1); a read view refuses writes."""

    def __init__(self, tables: Tables, writable: bool) -> None:
        self._t = tables
        self._writable = writable
        self.undo: list[Callable[[], None]] = []

    def _set(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        if not self._writable:
            raise fail(ErrorCode.STORAGE_FAILURE, "write attempted in a read view")
        old = table.get(key, _MISSING)
        if old is _MISSING:
            self.undo.append(lambda: table.pop(key, None))
        else:
            self.undo.append(lambda: table.__setitem__(key, old))
        table[key] = value

    def _pop(self, table: dict[Any, Any], key: Any) -> None:
        if not self._writable:
            raise fail(ErrorCode.STORAGE_FAILURE, "write attempted in a read view")
        old = table.pop(key)
        self.undo.append(lambda: table.__setitem__(key, old))

    def _append(self, table: dict[Any, list[Any]], key: Any, value: Any) -> None:
        rows = table.get(key)
        if rows is None:
            rows = []
            self._set(table, key, rows)
        rows.append(value)
        self.undo.append(rows.pop)

    def _child(self, table: dict[Any, dict[Any, Any]], key: Any) -> dict[Any, Any]:
        child = table.get(key)
        if child is None:
            child = {}
            self._set(table, key, child)
        return child
