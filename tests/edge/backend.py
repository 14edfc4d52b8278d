"""The `edge` backend of the HTTP contract suite: `Default.fetch` + the Durable Objects.

Provisioning goes through the admin HTTP routes (`POST /v1/admin/bootstrap`, `.../members`,
`.../tokens/revoke`) with the admin token, so the fixture exercises the same orchestration
across registry, token directory and project objects that an operator uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aidememo.domain.clock import FixedClock
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import ActorKind, MemberStatus, Role
from tests.edge.runtime import EdgeClient, Runtime
from tests.edge.runtime.hyperdrive import Hyperdrive


class EdgeIdentity:
    """The provisioning calls the contract fixture makes, as admin HTTP requests."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def _admin(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        status, _, answer = self.runtime.admin("POST", path, json=body)
        if status != 200:
            error = answer["error"]
            raise AidememoError(ErrorCode(error["code"]), error["message"])
        result: dict[str, Any] = answer
        return result

    def bootstrap(
        self,
        *,
        tenant_id: str,
        project_id: str,
        actor_id: str,
        kind: ActorKind = ActorKind.AGENT,
        role: Role = Role.WRITER,
        project_epoch: str | None = None,
        token_sha256: bytes | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "tenant_id": tenant_id,
            "project_id": project_id,
            "actor_id": actor_id,
            "actor_kind": kind.value,
            "role": role.value,
        }
        if project_epoch is not None:
            body["project_epoch"] = project_epoch
        if token_sha256 is not None:
            body["token_sha256"] = token_sha256.hex()
        return self._admin("/v1/admin/bootstrap", body)

    def set_membership(
        self,
        tenant_id: str,
        project_id: str,
        actor_id: str,
        *,
        role: Role | None = None,
        status: MemberStatus | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "tenant_id": tenant_id,
            "project_id": project_id,
            "actor_id": actor_id,
        }
        if role is not None:
            body["role"] = role.value
        if status is not None:
            body["status"] = status.value
        return self._admin("/v1/admin/members", body)

    def revoke_token(self, token_sha256: bytes) -> bool:
        status, _, _ = self.runtime.admin(
            "POST", "/v1/admin/tokens/revoke", json={"token_sha256": token_sha256.hex()}
        )
        return status == 200


def project_store(runtime: Runtime) -> Any:
    """The canonical store of the contract project's object (its SQLite, or the PostgreSQL
    store in PostgreSQL mode), opened by the object itself."""
    from tests.contract.support import PROJECT, TENANT

    name = f"{TENANT}/{PROJECT}"  # worker.routing.project_object_name
    return runtime.namespaces["PROJECTS"].instance(name).obj._open(create=False)


def edge_backend(tmp: Path, clock: FixedClock, *, semantic: bool = False) -> Any:
    """A `tests.contract.support.Backend` on a fresh simulated deployment; `semantic` binds
    the Workers AI and Vectorize doubles."""
    from tests.contract.support import LEASE_MS, MCP_ORIGIN, Backend

    variables = {"HANDOFF_LEASE_MS": str(LEASE_MS), "MCP_ALLOWED_ORIGINS": MCP_ORIGIN}
    runtime = Runtime(tmp / "edge", clock, vars=variables, semantic=semantic)
    backend = Backend(EdgeClient(runtime), EdgeIdentity(runtime), runtime.close)  # type: ignore[arg-type]
    backend.store = lambda: project_store(runtime)
    return backend


def postgres_runtime(tmp: Path, clock: FixedClock, db: Any, **kw: Any) -> Runtime:
    """A deployment with `STORAGE_MODE=postgres` whose Hyperdrive binding names `db` (a
    `tests.pg.Database`; through PgBouncer in transaction pool mode when it is pooled)."""
    variables = {"STORAGE_MODE": "postgres", **kw.pop("vars", {})}
    return Runtime(tmp, clock, vars=variables, hyperdrive=Hyperdrive(db.url), **kw)


def edge_postgres_backend(tmp: Path, clock: FixedClock, *, semantic: bool = False) -> Any:
    """The Worker and its objects in PostgreSQL mode: pg8000 through PgBouncer (transaction
    pool mode, as Hyperdrive pools) to a fresh migrated schema of the test cluster."""
    from tests import pg
    from tests.contract.support import LEASE_MS, MCP_ORIGIN, Backend

    db = pg.create_database(pooled=True)
    try:
        variables = {"HANDOFF_LEASE_MS": str(LEASE_MS), "MCP_ALLOWED_ORIGINS": MCP_ORIGIN}
        runtime = postgres_runtime(tmp / "edge", clock, db, vars=variables, semantic=semantic)
    except BaseException:
        db.drop()
        raise

    def close() -> None:
        try:
            runtime.close()
        finally:
            db.drop()

    backend = Backend(EdgeClient(runtime), EdgeIdentity(runtime), close)  # type: ignore[arg-type]
    backend.admin_token = runtime.admin_token
    backend.store = lambda: project_store(runtime)
    return backend
