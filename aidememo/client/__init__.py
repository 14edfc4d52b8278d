"""The Python client of aidememo (CPython only: httpx and pydantic v2).

`Client` (synchronous) and `AsyncClient` (asynchronous) have the same methods, one per member
route of the HTTP contract; answers are the typed models of `aidememo.client.models`, and
every failure is an `AidememoClientError` (`AidememoUnreachable` when no answer came back).
Writes generate the ids a caller leaves out (ULIDs) and derive command ids as the core does
(`aidememo.domain.command_ids`, ID-4), so a retry after a lost answer replays instead of
applying twice (SPEC.md CLIENT-1..CLIENT-4). Neither the core nor the edge imports this
package.
"""

from __future__ import annotations

from aidememo.client.async_client import AsyncClient
from aidememo.client.errors import AidememoClientError, AidememoUnreachable
from aidememo.client.models import (
    Assignment,
    ChangeBatch,
    ChangeEntry,
    FactItem,
    FactRecord,
    HandoffRecord,
    HandoffStatus,
    Health,
    Identity,
    Mailbox,
    MaterializedBatch,
    Member,
    Members,
    Receipt,
    Resource,
    Search,
    SearchResult,
    SemanticModel,
    SessionFacts,
    SessionItem,
    SessionRecord,
    Sessions,
    Snapshot,
    Transition,
    Written,
)
from aidememo.client.sync import Client
from aidememo.client.ulid import new_ulid

__all__ = [
    "AidememoClientError",
    "AidememoUnreachable",
    "Assignment",
    "AsyncClient",
    "ChangeBatch",
    "ChangeEntry",
    "Client",
    "FactItem",
    "FactRecord",
    "HandoffRecord",
    "HandoffStatus",
    "Health",
    "Identity",
    "Mailbox",
    "MaterializedBatch",
    "Member",
    "Members",
    "Receipt",
    "Resource",
    "Search",
    "SearchResult",
    "SemanticModel",
    "SessionFacts",
    "SessionItem",
    "SessionRecord",
    "Sessions",
    "Snapshot",
    "Transition",
    "Written",
    "new_ulid",
]
