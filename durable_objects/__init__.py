"""The edge's Durable Objects: thin translations from Workers RPC to the shared core.

- `ProjectCoordinator` (binding `PROJECTS`, one per project): the project's records and its
  single writer; runs `HttpApp.dispatch` with the caller the Worker authenticated.
- `TenantRegistry` (binding `TENANTS`, one per tenant): projects, actors, memberships, tokens.
- `TokenDirectory` (binding `TOKENS`, 256 shards by digest prefix): digest -> tenant, actor.

Only the stdlib, the core and the Workers SDK (`workers`) are imported, so the package runs
under Pyodide; `tests/unit/test_import_contract.py` enforces it.
"""

from durable_objects.directory import TokenDirectory
from durable_objects.project import ProjectCoordinator
from durable_objects.registry import TenantRegistry

__all__ = ["ProjectCoordinator", "TenantRegistry", "TokenDirectory"]
