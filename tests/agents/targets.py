"""Real servers for the real MCP clients: `aidememo serve` on SQLite and on PostgreSQL (a child
process each), and the edge runtime double behind a loopback HTTP server (both storage modes).

Each target is provisioned over HTTP with the admin token (`POST /v1/admin/bootstrap`): a
writer, a receiver, a reader of project `p_mcp`, and a writer of another project.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

TENANT, PROJECT, OTHER = "t_mcp", "p_mcp", "p_other"
WRITER, RECEIVER, READER, OUTSIDER = "writer_a", "receiver_b", "reader_c", "outsider_d"
ADMIN_TOKEN = "admin-token-for-mcp-tests"


@dataclass
class Target:
    """A served deployment: its base URL and a bearer token per actor."""

    url: str
    tokens: dict[str, str] = field(default_factory=dict)

    def endpoint(self, project: str = PROJECT) -> str:
        return f"{self.url}/v1/projects/{project}/mcp"

    def provision(self, admin_token: str) -> None:
        for actor, role, project in (
            (WRITER, "writer", PROJECT),
            (RECEIVER, "writer", PROJECT),
            (READER, "reader", PROJECT),
            (OUTSIDER, "writer", OTHER),
        ):
            token = secrets.token_hex(16)
            body = {
                "tenant_id": TENANT,
                "project_id": project,
                "actor_id": actor,
                "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
                "role": role,
            }
            reply = httpx.post(
                f"{self.url}/v1/admin/bootstrap",
                json=body,
                headers={"authorization": f"Bearer {admin_token}"},
                timeout=10,
            )
            assert reply.status_code == 200, reply.text
            self.tokens[actor] = token


def _serve(tmp: Path, database: str) -> Iterator[Target]:
    from tests.origin.test_serve_process import ServeProcess

    admin = tmp / "admin.token"
    admin.write_text(ADMIN_TOKEN)
    admin.chmod(0o600)
    server = ServeProcess(
        tmp / "home", tmp / "serve.log", "--database", database, "--admin-token-file", str(admin)
    )
    try:
        target = Target(server.url)
        target.provision(ADMIN_TOKEN)
        yield target
    finally:
        server.kill()


@pytest.fixture(params=["serve_sqlite", "serve_postgres", "edge", "edge_postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    """Every real server the clients run against."""
    with ExitStack() as stack:
        if request.param == "serve_sqlite":
            yield from _serve(tmp_path, str(tmp_path / "ssot.sqlite"))
            return
        from tests import pg

        if request.param == "serve_postgres":
            db = stack.enter_context(pg.fresh_database(migrated=False))
            yield from _serve(tmp_path, db.url)
            return
        from tests.edge.loopback import Loopback

        db = None
        if request.param == "edge_postgres":
            db = pg.create_database(pooled=True)
            stack.callback(db.drop)
        served = stack.enter_context(Loopback(tmp_path / "edge", db=db))
        target = Target(served.url)
        target.provision(served.admin_token)
        yield target
