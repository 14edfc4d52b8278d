"""The Python client of aidememo (CPython only; `AsyncClient` runs on httpx).

`Client` (synchronous, standard library only) and `AsyncClient` (asynchronous) have the same
methods, one per member route of the HTTP contract (`Client` is generated from `AsyncClient`,
scripts/gen_sync_client.py); answers are the typed records of `aidememo.client.models`, and
every failure is an `AidememoClientError` (`AidememoUnreachable` when no answer came back).
Writes generate the ids a caller leaves out (ULIDs) and derive command ids as the core does
(`aidememo.domain.command_ids`, ID-4), so a retry after a lost answer replays instead of
applying twice (SPEC.md CLIENT-1..CLIENT-4). Neither the core nor the edge imports this
package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aidememo.client.errors import AidememoClientError, AidememoUnreachable

if TYPE_CHECKING:
    from aidememo.client.async_client import AsyncClient
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

# Each name loads its module when first used (PEP 562): a command that needs the synchronous
# client never imports the asynchronous one (nor httpx).
_WHERE = {
    "AsyncClient": "aidememo.client.async_client",
    "Client": "aidememo.client.sync",
    "new_ulid": "aidememo.client.ulid",
    "Assignment": "aidememo.client.models",
    "ChangeBatch": "aidememo.client.models",
    "ChangeEntry": "aidememo.client.models",
    "FactItem": "aidememo.client.models",
    "FactRecord": "aidememo.client.models",
    "HandoffRecord": "aidememo.client.models",
    "HandoffStatus": "aidememo.client.models",
    "Health": "aidememo.client.models",
    "Identity": "aidememo.client.models",
    "Mailbox": "aidememo.client.models",
    "MaterializedBatch": "aidememo.client.models",
    "Member": "aidememo.client.models",
    "Members": "aidememo.client.models",
    "Receipt": "aidememo.client.models",
    "Resource": "aidememo.client.models",
    "Search": "aidememo.client.models",
    "SearchResult": "aidememo.client.models",
    "SemanticModel": "aidememo.client.models",
    "SessionFacts": "aidememo.client.models",
    "SessionItem": "aidememo.client.models",
    "SessionRecord": "aidememo.client.models",
    "Sessions": "aidememo.client.models",
    "Snapshot": "aidememo.client.models",
    "Transition": "aidememo.client.models",
    "Written": "aidememo.client.models",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
