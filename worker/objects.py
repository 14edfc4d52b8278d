"""Stubs of the three Durable Object namespaces, named as `worker.routing` says.

`namespace.getByName(name)` returns a stub whose methods are the object's RPC methods
(the runtime's Durable Object stub; `getByName(name)` is `get(idFromName(name))`).
Every call goes through `call`, which awaits the stub and turns an `{"error"}` answer back
into the core's `AidememoError` (`durable_objects.rpc.unwrap`).
"""

from __future__ import annotations

from typing import Any

from durable_objects.rpc import unwrap
from worker import bindings
from worker.routing import (
    PROJECTS,
    TENANTS,
    TOKENS,
    project_object_name,
    tenant_object_name,
    token_shard,
)


class Objects:
    """The Worker's view of its Durable Object bindings."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def project(self, tenant_id: str, project_id: str) -> Any:
        """The stub of one project's `ProjectCoordinator`."""
        ns = getattr(self.env, PROJECTS)
        return ns.getByName(project_object_name(tenant_id, project_id))

    def project_js(self, tenant_id: str, project_id: str) -> Any:
        """The runtime's own stub of a project's object, from the namespace under the SDK's
        wrapper (which would wrap every stub it hands out): for `handle`, whose text
        argument and answer need no conversion (`worker.bindings`)."""
        return bindings.raw_binding(self.env, PROJECTS).getByName(
            project_object_name(tenant_id, project_id)
        )

    def registry(self, tenant_id: str) -> Any:
        """The stub of one tenant's `TenantRegistry`."""
        return getattr(self.env, TENANTS).getByName(tenant_object_name(tenant_id))

    def tokens(self, token_sha256_hex: str) -> Any:
        """The stub of the `TokenDirectory` shard of a digest."""
        return getattr(self.env, TOKENS).getByName(token_shard(token_sha256_hex))


async def call(stub: Any, method: str, *args: Any) -> Any:
    """Call an RPC method that answers `{"ok"}` or `{"error"}`; return the value."""
    return unwrap(await getattr(stub, method)(*args))
