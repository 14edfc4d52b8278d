"""The live edge: `wrangler dev` started here, or a deployed Worker at AIDEMEMO_EDGE_URL.

Nothing in this module runs unless a test marked `edge_live` runs, and those run only with
AIDEMEMO_EDGE_LIVE=1 (tests/conftest.py); otherwise they are skipped and no connection is made.

Settings (environment):
- AIDEMEMO_EDGE_URL: a deployed Worker (https://...). Needs AIDEMEMO_EDGE_ADMIN_TOKEN_FILE, the
  admin token whose SHA-256 is the Worker's ADMIN_TOKEN_SHA256 secret. The suite creates and
  deletes the tenants of the contract fixture (`tenant_http`), so point it at a test deployment.
- without it: `wrangler dev` (AIDEMEMO_WRANGLER, default the repository's pinned
  node_modules/.bin/wrangler run on the pinned Node of tests/node.py) in the repository on a
  free loopback port, with a fresh `--persist-to` folder, a generated admin token passed as
  `--var ADMIN_TOKEN_SHA256:...` and `ALLOW_INSECURE_HTTP:1` (wrangler dev serves plain HTTP).
  wrangler runs the `[build]` command (scripts/build_edge.py: the bundle and python_modules/
  with the vendored Workers SDK) first. workerd downloads its Python runtime bundle from
  Cloudflare when it starts (cached afterwards), so this needs the network the first time and
  cannot run on the offline CI machines; docs/edge.md lists what it needs.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shlex
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import ActorKind, MemberStatus, Role
from tests.contract.live import SocketClient
from tests.contract.support import (
    Query,
)
from tests.node import node_env

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 300.0  # the first wrangler dev downloads the Python runtime bundle
WRANGLER = REPO / "node_modules" / ".bin" / "wrangler"


@dataclass
class LiveEdge:
    url: str
    admin_token: str


class LiveIdentity:
    """The contract fixture's provisioning, as admin HTTP requests to the live edge."""

    def __init__(self, client: SocketClient, admin_token: str) -> None:
        self.client = client
        self.admin_token = admin_token

    def admin(
        self, method: str, path: str, json: Any = None, query: Query = None
    ) -> tuple[int, Any]:
        status, _, answer = self.client.request(
            method, path, token=self.admin_token, json=json, query=query
        )
        return status, answer

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        status, answer = self.admin("POST", path, body)
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
        return self._post("/v1/admin/bootstrap", body)

    def set_membership(
        self,
        tenant_id: str,
        project_id: str,
        actor_id: str,
        *,
        role: Role | None = None,
        status: MemberStatus | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"tenant_id": tenant_id, "project_id": project_id}
        body["actor_id"] = actor_id
        if role is not None:
            body["role"] = role.value
        if status is not None:
            body["status"] = status.value
        return self._post("/v1/admin/members", body)

    def revoke_token(self, token_sha256: bytes) -> bool:
        status, _ = self.admin(
            "POST", "/v1/admin/tokens/revoke", {"token_sha256": token_sha256.hex()}
        )
        return status == 200

    def delete_tenant(self, tenant_id: str) -> None:
        """Empty the tenant (a 404 for a tenant that does not exist is fine)."""
        path = f"/v1/admin/tenants/{tenant_id}"
        status, answer = self.admin("DELETE", path, query={"confirm": tenant_id})
        assert status in (200, 404), answer


class LiveClock(FixedClock):
    """The live edge keeps its own time: a test that moves or reads the fixture's clock is
    skipped (its expectations assume the Worker runs on that clock)."""

    def __init__(self) -> None:
        pass

    @property  # type: ignore[override]
    def value(self) -> int:
        pytest.skip("the live edge runs on its own clock; this test reads the fixture clock")

    def advance(self, ms: int) -> None:
        pytest.skip("the live edge runs on its own clock; this test advances time")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _healthy(url: str) -> bool:
    client = SocketClient(url, timeout=60)
    try:
        status, _, body = client.request("GET", "/health")
        return status == 200 and isinstance(body, dict) and body.get("mode") == "edge"
    except OSError:
        return False
    finally:
        client.close()


@contextmanager
def live_edge() -> Iterator[LiveEdge]:
    """The deployed Worker of AIDEMEMO_EDGE_URL, or a `wrangler dev` started for the session."""
    url = os.environ.get("AIDEMEMO_EDGE_URL")
    if url:
        token_file = os.environ.get("AIDEMEMO_EDGE_ADMIN_TOKEN_FILE")
        if not token_file:
            pytest.fail("AIDEMEMO_EDGE_URL needs AIDEMEMO_EDGE_ADMIN_TOKEN_FILE (the admin token)")
        yield LiveEdge(url.rstrip("/"), Path(token_file).read_text(encoding="utf-8").strip())
        return
    with _wrangler_dev() as edge:
        yield edge


def dev_command(port: int, state: Path, admin: str) -> list[str]:
    """The `wrangler dev` command line of the live tier (AIDEMEMO_WRANGLER overrides the
    executable)."""
    command = shlex.split(os.environ.get("AIDEMEMO_WRANGLER", str(WRANGLER)))
    return [
        *command,
        "dev",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--persist-to",
        str(state),
        "--var",
        f"ADMIN_TOKEN_SHA256:{hashlib.sha256(admin.encode()).hexdigest()}",
        "--var",
        "ALLOW_INSECURE_HTTP:1",
    ]


@contextmanager
def _wrangler_dev() -> Iterator[LiveEdge]:
    admin = secrets.token_hex(32)
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="aidememo-edge-live-") as tmp:
        log_path = Path(tmp) / "wrangler.log"
        args = dev_command(port, Path(tmp) / "state", admin)
        env = node_env(WRANGLER_SEND_METRICS="false", NO_COLOR="1")
        with log_path.open("wb") as log:
            try:
                proc = subprocess.Popen(
                    args,
                    cwd=REPO,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group, stopped as one below
                )
            except FileNotFoundError:
                hint = "run scripts/test once (npm ci), or set AIDEMEMO_WRANGLER"
                pytest.fail(f"{args[0]} not found: {hint}")
            url = f"http://127.0.0.1:{port}"
            try:
                deadline = time.monotonic() + STARTUP_TIMEOUT_S
                while not _healthy(url):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        tail = log_path.read_text(errors="replace")[-4000:]
                        pytest.fail(f"wrangler dev did not serve {url}:\n{tail}")
                    time.sleep(0.5)
                yield LiveEdge(url, admin)
            finally:
                _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT to the process group this module started (wrangler stops workerd on it)."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGINT, 15), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
